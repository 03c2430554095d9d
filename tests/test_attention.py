"""The one attention module: softmax, head split, the zeroing recipes, attention from weights."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.attention import (
    attention_from_weights,
    correct_attention,
    faithful_attention,
    kept_tokens,
    merge_heads,
    softmax,
    split_heads,
)
from bertgeom.trace import run_trace
from bertgeom.weights import extract_layer_weights


def test_softmax_is_stable_and_masks_minus_infinity():
    z = np.array([[1000.0, 1000.0, -np.inf], [0.0, np.log(3.0), -np.inf]])
    p = softmax(z)
    np.testing.assert_allclose(p, [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]])
    np.testing.assert_allclose(softmax(np.zeros((2, 4)), axis=0), 0.5)


def test_split_and_merge_heads_are_inverse():
    Y = np.arange(2 * 5 * 12, dtype=float).reshape(2, 5, 12)  # a batch of two [T=5, H*dh=12]
    Z = split_heads(Y, 3, 4)
    assert Z.shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(Z[1, 2, 0], Y[1, 0, 8:12])  # head 2 owns features 8..11
    np.testing.assert_array_equal(merge_heads(Z), Y)


@pytest.mark.parametrize("mode, expected", [("first_sep", [1, 1, 1, 0, 0, 0]), ("special", [1, 1, 1, 0, 1, 0])])
def test_kept_tokens_recipes(mode, expected):
    is_sep = np.array([0, 0, 0, 1, 0, 1], bool)  # [CLS] a b [SEP] c [SEP]
    assert kept_tokens(is_sep, mode).astype(int).tolist() == expected
    with pytest.raises(ValueError):
        kept_tokens(is_sep, "other")


def test_every_layer_from_weights_matches_the_model_and_differs_from_the_faithful_variant(tiny_bert):
    trace = run_trace(tiny_bert, "The cat sat on the mat because it was tired.")
    lws = extract_layer_weights(tiny_bert.model)
    A = attention_from_weights(lws, trace.hidden_states[:-1])
    np.testing.assert_allclose(A, trace.attentions, atol=1e-5)
    np.testing.assert_allclose(correct_attention(trace.hidden_states[1], lws[1]), trace.attentions[1], atol=1e-5)
    Af = faithful_attention(trace.hidden_states[1], lws[1])
    np.testing.assert_allclose(Af.sum(-1), 1.0, atol=1e-9)
    assert np.abs(Af - trace.attentions[1]).max() > 1e-3  # transposed slices, no biases: another attention
