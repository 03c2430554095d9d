"""The dashboard opens a precomputed results directory instead of running the model."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bertgeom.sars_cov_2.variant.spec import genome_set
from bertgeom.precompute import PrecomputeConfig, precompute

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_cone_page_reads_per_class_curves_from_a_results_directory(tiny_variant, tiny_variant_dir, tmp_path,
                                                                    monkeypatch):
    items = [it for it in genome_set() if it.label in ("gh", "delta", "omicron")][:6]
    fasta, labels = tmp_path / "in.fasta", tmp_path / "labels.tsv"
    fasta.write_text("".join(it.text + "\n" for it in items))
    labels.write_text("name\tclass\n" + "".join(f"{it.name}\t{it.label}\n" for it in items))
    root = tmp_path / "results"
    precompute(fasta, labels, root / "run1", config=PrecomputeConfig(shard_size=4), loaded=tiny_variant)

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    monkeypatch.setenv("BERTGEOM_RESULTS_DIR", str(root))
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = genome_set("demo")[-1].text
    at.session_state["w_cone_section"] = "classes"  # straight to the per-class view of the results directory
    at.session_state["w_cone_set"] = "precomputed"
    at.run()
    at.switch_page("app_pages/cone_index.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("6 genomes precomputed" in c.value for c in at.caption)
    titles = [json.loads(el.proto.spec)["layout"].get("title", {}).get("text", "") for el in at.get("plotly_chart")]
    curves = [t for t in titles if "mean ± sd per class, 6 inputs" in t]
    assert curves, titles
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # nothing recomputed
