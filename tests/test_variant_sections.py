"""AppTest of the genome-pipeline sections of the Variant Classifier page (bertgeom/sars_cov_2/ui/sections.py)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from bertgeom.sars_cov_2.variant.spec import genome_set

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_gene_tables_nearest_clade_and_qc_score_read_the_one_analysis(tiny_variant_dir, tiny_variant, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = genome_set("demo")[3].text  # the Alpha example
    at.run()
    at = at.switch_page("bertgeom/sars_cov_2/page.py").run()
    assert not at.exception
    assert any(m.value.startswith("Clade **20I \\(Alpha\\)**") and "Pango lineage **" in m.value for m in at.markdown)
    assert any("QC score (Nextclade's rules)" in m.value for m in at.markdown)
    # the batch table's QC score is the number the genome view prints (one decimal both: not 11.6 and 12)
    from bertgeom.sars_cov_2.genome.fasta import parse_sequences
    from bertgeom.sars_cov_2.variant.predict import classify_stream
    from bertgeom.sars_cov_2.variant.result import batch_table

    rows = [p.row(tiny_variant.labels, tiny_variant.weights_hash)
            for p in classify_stream(tiny_variant, parse_sequences(genome_set("demo")[3].text, tolerant=True))]
    shown = f"{batch_table(rows)['QC score'][0]:.1f}"
    assert any(m.value.startswith("##### QC score (Nextclade's rules)") and m.value.endswith(f"· {shown}")
               for m in at.markdown), shown
    rules = [c.value for c in at.caption if c.value.startswith("• **")]
    assert [r.split("**")[1] for r in rules] == ["missing data", "mixed sites", "private mutations", "snp clusters",
                                                 "frameshifts", "stop codons"]  # Nextclade's six rules
    table = at.dataframe[0].value
    assert "S:H69-" in set(table["mutation"])  # S first, Nextclade's names
    private_col = next(c for c in table.columns if c.startswith("private (vs. node "))
    spike_card = next(m for m in at.metric if m.label == "Private mutations")
    assert int(spike_card.value) == (table[private_col] == "yes").sum()  # one word, one count
    coverage = next(m for m in at.metric if m.label == "Spike coverage").value
    n_share = next(m for m in at.metric if m.label == "N in spike").value
    assert abs(float(coverage.rstrip("%")) + float(n_share.rstrip("%")) - 100) < 0.11
    at.segmented_control(key="w_gene").set_value("ORF8").run()
    assert not at.exception
    orf8 = at.dataframe[0].value
    assert {"ORF8:Q27*", "ORF8:K68*"} <= set(orf8["mutation"]) and "domain" not in orf8.columns
    assert any("ORF8:" in c.value and "premature stop" in c.value for c in at.caption)
