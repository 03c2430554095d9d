"""The variant model's loader and genome encoding, on a tiny random variant-shaped model."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.sets.inputs import map_over_set
from bertgeom.sars_cov_2.variant.spec import genome_set
from bertgeom.trace import InputError, run_trace


def test_tiny_variant_model_reads_a_genome_into_427_tokens(tiny_variant):
    item = genome_set("demo")[-1]
    trace = run_trace(tiny_variant, item.text)
    assert len(trace.tokens) == 427 and trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"
    assert trace.encoded.axis_labels[1] == "1-4" and trace.encoded.axis_labels[425] == "1273-1276"
    assert trace.encoded.spans[1].tolist() == [0, 12] and trace.encoded.span_unit == "nt"
    assert trace.logits.shape == (8,) and trace.predicted in tiny_variant.labels
    np.testing.assert_allclose(trace.attentions.sum(-1), 1.0, atol=1e-5)


def test_bad_genome_input_gets_one_clear_sentence(tiny_variant):
    with pytest.raises(InputError):
        run_trace(tiny_variant,
                  "MKFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHVSGTNGTKRFDNPVLPFNDGVYFASTEK")
    with pytest.raises(InputError, match="empty"):
        run_trace(tiny_variant, "  ")


def test_map_over_set_keeps_reductions_and_reports_bad_records(tiny_variant):
    items = list(genome_set("demo")[:3])
    from bertgeom.inputs import InputItem

    items.append(InputItem("broken", ">broken\nNNNNNNNNNN", "gh"))
    seen = []
    res = map_over_set(tiny_variant, items, lambda tr, it: tr.attentions.shape, batch_size=2,
                       progress=lambda d, n: seen.append((d, n)))
    assert [it.name for it in res.items] == [it.name for it in items[:3]]
    assert res.results[0] == (2, 4, 427, 427)
    assert res.errors and res.errors[0][0] == "broken"
    assert seen[-1] == (4, 4)
