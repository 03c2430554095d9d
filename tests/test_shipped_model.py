"""The shipped variant model on the shipped real validation genomes (never trained on)."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.models import REGISTRY, load_model
from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

pytestmark = pytest.mark.skipif(VARIANT_MODEL_ID not in REGISTRY, reason="the variant model is not shipped")


@pytest.fixture(scope="module")
def variant():
    return load_model(VARIANT_MODEL_ID)


def test_shape_and_labels(variant):
    assert (variant.num_layers, variant.num_heads, variant.config.hidden_size) == (6, 12, 384)
    assert variant.labels == ("gh", "lambda", "mu", "alpha", "beta", "delta", "gamma", "omicron")
    assert variant.tokenizer.k == 12 and variant.tokenizer.stride == 9
    assert "model card" in variant.extra.get("card", "").lower()  # the card ships beside the weights
    # held-out real genomes, less the calibration split kept apart for the temperature
    # (bertgeom.sars_cov_2.genome.dataset)
    assert variant.extra.get("metrics", {}).get("model", {}).get("n", 0) > 150


def test_accuracy_on_the_shipped_real_validation_genomes(variant):
    from bertgeom.sars_cov_2.genome.fasta import SequenceRecord
    from bertgeom.sars_cov_2.genome.dataset import load_validation_small
    from bertgeom.sars_cov_2.variant.predict import classify_stream, eval_report

    pairs = load_validation_small()
    truth = {rec.name: meta["class"] for rec, meta in pairs}
    preds = list(classify_stream(variant, [rec for rec, _ in pairs if isinstance(rec, SequenceRecord)]))
    assert not [p.name for p in preds if p.error]
    y_true = [truth[p.name] for p in preds]
    y_pred = [p.predicted for p in preds]
    report = eval_report("shipped", y_true, y_pred, list(variant.labels))
    assert report.n == len(pairs) >= 30
    assert report.accuracy >= 0.97, report.table()
    recalls = np.array([report.per_class[c]["recall"] for c in variant.labels])
    assert (recalls >= 0.75).all(), report.table()


def test_cone_page_shows_all_8_classes_with_the_shipped_model(tmp_path, monkeypatch):
    """Issue 6's done-when: per-class cone curves and [CLS] projections for the 8 classes."""
    import json
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600)
    at.session_state["w_cone_section"] = "classes"
    at.run()
    at.switch_page("app_pages/cone_index.py").run()
    assert not at.exception and not at.error
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    curves = [s for s in specs if "per class" in (s["layout"].get("title") or {}).get("text", "")]
    names = [t["name"] for t in curves[0]["data"] if t.get("mode") == "lines+markers"]
    assert len(names) == 8, names
    at.segmented_control(key="w_cone_section").set_value("distribution").run()
    assert not at.exception
    assert any("Separability" in (s["layout"].get("title") or {}).get("text", "")
               for s in (json.loads(el.proto.spec) for el in at.get("plotly_chart")))


def test_one_foreign_marker_or_one_reversion_does_not_flip_the_shipped_model(variant):
    """Issue 11: the demo genomes keep their call with one characteristic mutation of another class
    added (T19R, D80A, T76I, K417N wherever foreign, plus others drawn from the table) or one of their
    own reverted; the rule-based marker call agrees on every one of them."""
    from bertgeom.sars_cov_2.genome.align import align_spike
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.sars_cov_2.genome.markers import call_by_markers
    from bertgeom.sars_cov_2.variant.predict import logits_for_ids
    from bertgeom.sars_cov_2.variant.robustness import Genome, perturbations

    genomes = [Genome(meta["name"], meta["class"], cut.aligned, tuple(cut.insertions))
               for rec, meta in load_demo_genomes() for cut in [align_spike(rec.sequence)]]
    pert = perturbations(genomes, seed=1, foreign_per_genome=2, revert_per_genome=2)
    assert len(pert) >= 40
    texts = [g.aligned for g in genomes] + [p.aligned for p in pert]
    ids, _ = variant.tokenizer.encode_batch(texts, max_length=None)
    calls = [variant.labels[i] for i in logits_for_ids(variant, ids).argmax(1)]
    plain, perturbed = calls[: len(genomes)], calls[len(genomes):]
    assert plain == [g.cls for g in genomes]
    flips = [(genomes[p.base].cls, p.change, c) for p, c in zip(pert, perturbed) if c != plain[p.base]]
    assert not flips, flips
    assert all(call_by_markers(p.aligned, p.insertions).call == genomes[p.base].cls for p in pert)


def test_no_shipped_validation_genome_is_wrong_with_high_confidence(variant):
    from bertgeom.sars_cov_2.genome.dataset import load_validation_small
    from bertgeom.sars_cov_2.genome.fasta import SequenceRecord
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    pairs = load_validation_small()
    truth = {rec.name: meta["class"] for rec, meta in pairs}
    preds = list(classify_stream(variant, [rec for rec, _ in pairs if isinstance(rec, SequenceRecord)]))
    confident_wrong = [(p.name, p.predicted, max(p.probs.values())) for p in preds
                       if p.qc == "pass" and p.predicted != truth[p.name] and max(p.probs.values()) >= 0.9]
    assert not confident_wrong
    assert all(p.rule_call for p in preds) and sum(p.rule_call == truth[p.name] for p in preds) >= len(preds) - 1
