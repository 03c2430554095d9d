"""The shipped variant model on the shipped real validation genomes (never trained on)."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.models import REGISTRY, VARIANT_MODEL_ID, load_model

pytestmark = pytest.mark.skipif(VARIANT_MODEL_ID not in REGISTRY, reason="the variant model is not shipped")


@pytest.fixture(scope="module")
def variant():
    return load_model(VARIANT_MODEL_ID)


def test_shape_and_labels(variant):
    assert (variant.num_layers, variant.num_heads, variant.config.hidden_size) == (6, 12, 384)
    assert variant.labels == ("gh", "lambda", "mu", "alpha", "beta", "delta", "gamma", "omicron")
    assert variant.tokenizer.k == 12 and variant.tokenizer.stride == 9
    assert "model card" in variant.extra.get("card", "").lower()  # the card ships beside the weights
    assert variant.extra.get("metrics", {}).get("model", {}).get("n", 0) > 200


def test_accuracy_on_the_shipped_real_validation_genomes(variant):
    from bertgeom.genome.fasta import SequenceRecord
    from bertgeom.genome.dataset import load_validation_small
    from bertgeom.variant.predict import classify_stream, eval_report

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
