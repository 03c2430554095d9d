"""AppTest of the Variant Classifier page on the tiny random variant model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bertgeom.sets.inputs import genome_set

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "pages/variant_classifier.py"


@pytest.fixture
def variant_app(tiny_variant_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")

    def make(genome_text: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=180)
        at.session_state["model_id"] = str(tiny_variant_dir)
        at.session_state["genome_value"] = genome_text
        at.run()
        return at.switch_page(PAGE).run()

    return make


def test_a_pasted_genome_gets_qc_prediction_mutations_and_track(variant_app):
    at = variant_app(genome_set("demo")[3].text)  # the Alpha example
    assert not at.exception
    assert any("Verdict" in m.value for m in at.markdown)
    assert any(m.label == "Spike coverage" for m in at.metric)
    assert len(at.dataframe) >= 1  # mutation table
    charts = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    assert charts[0]["data"][0]["type"] == "bar" and len(charts[0]["data"][0]["y"]) == 8
    assert any(tr.get("name", "").startswith("[CLS] attention") for c in charts for tr in c["data"])
    assert len(at.get("download_button")) == 2


def test_mutagenesis_and_bad_changes(variant_app):
    at = variant_app(genome_set("demo")[7].text)
    at.text_input(key="w_add").input("A23063T X1Y").run()
    assert not at.exception
    assert any("not a nucleotide change" in e.value for e in at.error)
    assert any("Prediction after 1 change" in m.value for m in at.markdown)


def test_several_records_get_a_table_and_protein_text_gets_a_sentence(variant_app):
    two = genome_set("demo")[0].text + "\n" + genome_set("demo")[5].text
    at = variant_app(two)
    assert not at.exception
    assert any("2 records" in s.value for s in at.subheader)
    at2 = variant_app(">p\nMFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHV")
    assert not at2.exception
    assert at2.error and len(at2.error[0].value.split(". ")) <= 2


def test_the_rule_based_second_opinion_stands_beside_the_prediction(variant_app):
    at = variant_app(genome_set("demo")[3].text)  # Alpha: the markers say alpha
    assert not at.exception
    opinion = [m.value for m in at.markdown if "Second opinion" in m.value]
    assert opinion and "Alpha" in opinion[0] and "markers" in opinion[0]
    # the tiny random model almost surely disagrees: the page must say so prominently
    if "disagrees" in opinion[0]:
        assert any("disagree" in e.value for e in at.error)
    table = at.dataframe[0].value
    assert {"mutation", "nucleotide", "domain", "characteristic of", "marker of no class"} <= set(table.columns)
    assert "del69-70" in set(table["mutation"]) and "H69-" not in set(table["mutation"])  # one row per deletion


def test_markdown_in_a_fasta_header_is_shown_as_text(variant_app):
    seq = genome_set("demo")[3].text.split("\n", 1)[1]
    at = variant_app(f">![p](http://127.0.0.1:8999/p.png) :red[x] $x$ [link](http://e.x)\n{seq}")
    assert not at.exception
    heading = at.subheader[0].value
    assert "\\!\\[p\\]\\(http\\:" in heading and "\\:red\\[x\\]" in heading and "\\$x\\$" in heading


def test_plain_renders_user_text_literally():
    from bertgeom.ui.plain import plain

    assert plain("![p](u) :red[x] $y$\nz") == "\\!\\[p\\]\\(u\\) \\:red\\[x\\] \\$y\\$ z"
    assert plain("USA/CA-1/2020") == "USA\\/CA\\-1\\/2020"


def test_mutation_table_uses_readable_region_names():
    from bertgeom.genome.reference import READABLE_REGIONS, readable_region

    assert [a for _, a, _ in READABLE_REGIONS][1:] == [b + 1 for _, _, b in READABLE_REGIONS][:-1]  # they tile 1..1273
    assert readable_region(681) == "SD1/SD2" and readable_region(682) == "S1/S2 site" and readable_region(501) == "RBD"
    assert readable_region(815) == "S2' site" and not any("no domain" in n for n, _, _ in READABLE_REGIONS)


def test_a_ten_record_fasta_gives_a_batch_table_with_the_bad_record_explained(variant_app):
    demo = [g.text for g in genome_set("demo")]
    bad = ">not_a_genome\nMFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHV"
    text = "\n".join(demo[:5] + [bad] + demo[5:8] + [demo[3].replace(">", ">copy_", 1)])
    at = variant_app(text)
    assert not at.exception
    assert any("10 records" in s.value for s in at.subheader)
    table = at.dataframe[0].value
    assert len(table) == 10
    assert {"name", "BERT call", "confidence", "rule call", "agree", "spike QC", "genome QC", "error"} <= set(table.columns)
    row = table[table["name"] == "not_a_genome"].iloc[0]
    assert "protein" in row["error"] and not row["BERT call"]
    assert (table["rule call"][table["error"] == ""] != "").all()
    assert any("Second opinion" in m.value for m in at.markdown)  # the first record's full view follows
    from bertgeom.forward import bf16_supported  # the table says when its forwards ran in bf16 (the policy's)

    assert any("run in bf16" in c.value for c in at.caption) == bf16_supported("cpu")


def test_the_web_csv_quotes_formula_like_names():
    from bertgeom.variant.result import csv_bytes

    text = csv_bytes([{"name": "=cmd|' /C calc'!A0", "predicted": "gh"}, {"name": "ok", "predicted": "gh"}]).decode()
    assert "'=cmd" in text and "\n=cmd" not in text


def test_the_shared_sidebar_shows_a_markdown_header_as_text_on_every_page(tiny_variant_dir, monkeypatch):
    """The 'contains no sequence' error of the Attention Heads page quotes the header as typed."""
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = ">![p](http://127.0.0.1:8999/p.png) :red[x]\n"
    at.run()
    at.switch_page("pages/attention_heads.py").run()
    assert not at.exception
    assert at.error and "\\!\\[p\\]\\(http\\:" in at.error[0].value and "\\:red\\[x\\]" in at.error[0].value
