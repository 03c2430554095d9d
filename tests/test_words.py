"""Word-level attention (Clark §4.1): sums over attended pieces, means over attending pieces."""

from __future__ import annotations

import numpy as np

from bertgeom.analysis.words import word_groups, word_level


def test_groups_join_continuation_pieces():
    g, words = word_groups(["[CLS]", "play", "##ing", "cards", "[SEP]"])
    assert g.tolist() == [0, 1, 1, 2, 3] and words == ["[CLS]", "playing", "cards", "[SEP]"]


def test_worked_example_and_rows_still_sum_to_one():
    A = np.array([[0.5, 0.2, 0.3],
                  [0.1, 0.6, 0.3],
                  [0.4, 0.4, 0.2]])
    W = word_level(A, np.array([0, 1, 1]))  # pieces 1 and 2 form one word
    np.testing.assert_allclose(W, [[0.5, 0.5], [0.25, 0.75]])
    rng = np.random.default_rng(0)
    B = rng.dirichlet(np.ones(6), size=(2, 3, 6))  # [L, H, T, T], rows sum to 1
    Wb = word_level(B, np.array([0, 1, 1, 2, 3, 3]))
    assert Wb.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(Wb.sum(-1), 1.0)


def test_text_without_subwords_gives_the_token_map(minilm):
    from bertgeom.trace import run_trace

    tr = run_trace(minilm, "The cat sat on the mat.")
    g, words = word_groups(tr.tokens)
    assert len(words) == len(tr.tokens)
    np.testing.assert_allclose(word_level(tr.attentions, g), tr.attentions, atol=1e-6)
    split = run_trace(minilm, "Unbelievably, tokenisation splits words.")
    g, words = word_groups(split.tokens)
    assert len(words) < len(split.tokens)
    np.testing.assert_allclose(word_level(split.attentions, g).sum(-1), 1.0, atol=1e-5)
