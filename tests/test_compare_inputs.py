"""Two inputs side by side: token pairing, total variation per head on known cases and real traces."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.compare import map_change, paired_maps, pair_tokens, row_change


def test_pairing_keeps_substitutions_and_drops_insertions():
    ia, ib = pair_tokens(["[CLS]", "the", "cat", "sat", "[SEP]"], ["[CLS]", "the", "dog", "sat", "down", "[SEP]"])
    assert list(zip(ia, ib)) == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 5)]


def test_total_variation_worked_by_hand():
    A = np.array([[[[1.0, 0.0], [0.5, 0.5]]]])
    B = np.array([[[[0.0, 1.0], [0.5, 0.5]]]])
    idx = np.arange(2)
    # row 0: ½(1 + 1) = 1, row 1: 0 -> mean 0.5
    assert map_change(A, B, idx, idx)[0, 0] == pytest.approx(0.5)
    assert map_change(A, A, idx, idx)[0, 0] == 0.0
    np.testing.assert_allclose(row_change(A[0, 0], B[0, 0], idx, idx), [1.0, 0.0])  # one head's rows
    # only token 0 paired: row 0 of A puts 1 on key 0 (paired), B's row 0 puts 1 on key 1 (unpaired) -> ½(1 + 0 + 1)
    one = np.array([0])
    assert map_change(A, B, one, one)[0, 0] == pytest.approx(1.0)
    a, b = paired_maps(A[0, 0], B[0, 0], one, one)
    assert a.shape == (1, 1) and a[0, 0] - b[0, 0] == 1.0


def test_real_sentences(minilm):
    from bertgeom.trace import run_trace

    ta = run_trace(minilm, "The cat sat on the mat.")
    tb = run_trace(minilm, "The dog sat on the mat.")
    ia, ib = pair_tokens(ta.tokens, tb.tokens)
    assert ia.size == len(ta.tokens)  # one word substituted: every token pairs
    same = map_change(ta.attentions, ta.attentions, ia, ia)
    assert np.allclose(same, 0.0)
    tv = map_change(ta.attentions, tb.attentions, ia, ib)
    assert tv.shape == (6, 12) and (tv > 0).all() and (tv <= 1).all()
    with pytest.raises(ValueError):
        map_change(ta.attentions, tb.attentions[:2], ia, ib)
