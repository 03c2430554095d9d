"""Each definition fixed by issue #14, against a synthetic case worked by hand (docs/methods.md §10)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bertgeom.analysis.cone import layer_norm, layer_streams
from bertgeom.analysis.heads import head_features
from bertgeom.analysis.patterns import classify_heads
from bertgeom.analysis.subspace import head_data_geometry
from bertgeom.tokens import TokenKinds
from bertgeom.attention import attention_from_scores, faithful_qkv, merge_heads
from bertgeom.sets.cone import attention_code_matrix


def _sep_parked(n_content: int = 10, on_sep: float = 0.9) -> np.ndarray:
    """[CLS] c_1..c_m [SEP]: every content query puts ``on_sep`` on [SEP] and the rest on itself."""
    n = n_content + 2
    A = np.full((n, n), 1.0 / n)
    for i in range(1, n - 1):
        A[i] = 0.0
        A[i, n - 1] = on_sep
        A[i, i] = 1.0 - on_sep
    return A


def test_delta_row_keeps_every_key_and_delta_A_drops_the_keys_outside_the_token_set():
    m = 10
    A = _sep_parked(m)
    n = m + 2
    delta_row = head_features(A[None, None], TokenKinds.simple(n))["delta_row"][0, 0]
    content = np.zeros(n, bool)
    content[1:-1] = True
    delta_A = head_data_geometry(A[None, None], rows=content).scalars["delta_A"][0, 0]
    # rows (0.1 e_i + 0.9 e_SEP)/||.||: pairwise cosine 0.81/0.82, so delta_row = sqrt(mean cos) ~ 0.99
    cos = 0.81 / 0.82
    assert delta_row == pytest.approx(np.sqrt((m + m * (m - 1) * cos) / m**2), rel=1e-6)
    assert delta_row > 0.99
    # restricted to content keys the rows are 0.1 e_i: orthogonal, so delta_A = 1/sqrt(m)
    assert delta_A == pytest.approx(1 / np.sqrt(m), rel=1e-5)


def test_a_two_block_head_with_some_rest_on_sep_is_block_and_cluster():
    """Two equal blocks can never reach 'twice uniform' once a row leaves any mass on [SEP];
    the block graph's 1.5 x uniform lets Kovaleva's block head in."""
    n = 22
    A = np.zeros((n, n))
    for block in (range(1, 11), range(11, 21)):
        for i in block:
            A[i, list(block)] = 0.09
            A[i, n - 1] = 0.1
    A[0], A[n - 1] = 1 / n, 1 / n
    table = head_features(A[None, None], TokenKinds.simple(n))
    assert table["n_blocks"][0, 0] == 2
    assert table["block_inner"][0, 0] == pytest.approx(0.9)
    labels = classify_heads(table)
    assert labels["kovaleva"].labels[0, 0] == "block"
    assert labels["gates"].primary[0, 0] == "cluster"


def test_uniform_heads_are_broad_at_every_length():
    for n in (12, 40, 300):
        table = head_features(np.full((1, 1, n, n), 1.0 / n), TokenKinds.simple(n))
        assert classify_heads(table)["clark"].labels[0, 0] == "broad", n


def test_entropy_matrix_zeroes_everything_from_the_first_sep_on():
    """A sentence pair [CLS] a b [SEP] c d [SEP]: the second segment goes too (A[:, s:] = A[s:, :] = 0)."""
    T = 7
    is_sep = np.zeros(T, bool)
    is_sep[[3, 6]] = True
    A = np.random.default_rng(0).dirichlet(np.ones(T), size=T)
    out, keep = attention_code_matrix(A, is_sep, n=10)
    assert keep.tolist() == [True] * 3 + [False] * 7
    np.testing.assert_array_equal(out[:3, :3], A[:3, :3])
    assert not out[3:].any() and not out[:, 3:].any()


def test_faithful_multihead_output_uses_the_models_layer_norm_eps(tiny_bert):
    from bertgeom.weights import extract_layer_weights

    lw = dataclasses.replace(extract_layer_weights(tiny_bert.model)[0], ln1_eps=0.5)
    X = np.random.default_rng(1).normal(size=(6, lw.W_q.shape[1])) * 0.3
    out = layer_streams(X, lw)
    Qf, Kf, Vf = faithful_qkv(X, lw)
    Zf = attention_from_scores(Qf, Kf, lw.scaling) @ Vf
    np.testing.assert_allclose(out["multihead_faithful"], layer_norm(X + merge_heads(Zf), eps=0.5), atol=1e-10)
    assert not np.allclose(out["multihead_faithful"], layer_norm(X + merge_heads(Zf), eps=1e-5), atol=1e-4)


def test_faithful_mode_reads_the_next_layer_on_the_padded_positions(tiny_bert):
    """The official code fed layer l the output hidden_states[l+1] and ran on 512 padded positions."""
    from bertgeom.attention import faithful_attention
    from bertgeom.sets.subspace import data_geometry, faithful_stack, padded_hidden_states
    from bertgeom.trace import run_trace
    from bertgeom.weights import extract_layer_weights

    trace = run_trace(tiny_bert, "The cat sat on the mat.")
    lws = extract_layer_weights(tiny_bert.model)
    hs = np.asarray(trace.hidden_states)
    A, _ = faithful_stack(hs, lws)
    for l in range(len(lws)):
        np.testing.assert_allclose(A[l], faithful_attention(hs[l + 1], lws[l]), atol=1e-5)
        assert np.abs(A[l] - faithful_attention(hs[l], lws[l])).max() > 1e-5  # not the true input
    padded = padded_hidden_states(tiny_bert, trace)
    T, P = hs.shape[1], min(512, int(tiny_bert.max_tokens))
    assert padded.shape == (hs.shape[0], P, hs.shape[2])
    np.testing.assert_allclose(padded[:, :T], hs, atol=1e-4)  # PAD keys are masked in the model
    geom, dev = data_geometry(trace, lws, faithful=True, padded_hidden=padded)
    assert geom.spectra["attn_sv"].shape[-1] == P  # every padded position counts
    assert dev["row_tv"].shape == hs[1:, 0, :1].shape[:1] + (lws[0].num_heads,)
    assert np.all((dev["row_tv"] >= 0) & (dev["row_tv"] <= 1 + 1e-6))
    content, _ = data_geometry(trace, lws, faithful=True, padded_hidden=padded, token_set="content")
    assert content.spectra["attn_sv"].shape[-1] == T - 2
