"""Queries and keys over a set (AttentionViz): the vectorised Q/K match the per-input projection,
the normalisation leaves every attention row unchanged, and the token search ranks by attention."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.qk_embedding import (
    SetQK,
    attentionviz_normalise,
    collect_head_qk,
    dot_distance_correlation,
    embed_qk,
    layer_record,
    token_search,
)
from bertgeom.attention import project_qkv
from bertgeom.trace import run_trace
from bertgeom.weights import extract_layer_weights

TEXTS = ["The cat sat on the mat.", "A dog barked at the cat, loudly.", "Birds sing."]


@pytest.fixture(scope="module")
def setup(tiny_bert):
    traces = [run_trace(tiny_bert, t) for t in TEXTS]
    lw = extract_layer_weights(tiny_bert.model)
    records = [layer_record(t, 1) for t in traces]
    return traces, lw, collect_head_qk(records, lw, 1, 2, labels=["a", "b", None], names=["s1", "s2", "s3"])


def test_set_queries_and_keys_are_the_per_input_projections(setup):
    traces, lw, qk = setup
    off = 0
    for t in traces:
        Q, K, _ = project_qkv(t.hidden_states[1], lw[1])
        n = t.encoded.n_tokens
        np.testing.assert_allclose(qk.Q[off:off + n], Q[2], atol=1e-5)
        np.testing.assert_allclose(qk.K[off:off + n], K[2], atol=1e-5)
        off += n
    assert off == len(qk.rows) and set(qk.rows["label"]) == {"a", "b", ""}
    assert (qk.rows.loc[qk.rows["position"] == 0, "kind"] == "[CLS]").all()


def test_normalisation_leaves_each_attention_row_unchanged(setup):
    traces, lw, qk = setup
    Qn, Kn, c = attentionviz_normalise(qk.Q, qk.K)
    assert c > 0
    np.testing.assert_allclose(np.linalg.norm(qk.Q * c, axis=1).mean(), np.linalg.norm(qk.K / c, axis=1).mean())
    np.testing.assert_allclose(Kn.mean(0), Qn.mean(0), atol=1e-9)  # centroids coincide
    n = traces[1].encoded.n_tokens
    s = slice(traces[0].encoded.n_tokens, traces[0].encoded.n_tokens + n)
    scores = Qn[s] @ Kn[s].T * lw[1].scaling
    A = np.exp(scores - scores.max(1, keepdims=True))
    A /= A.sum(1, keepdims=True)
    np.testing.assert_allclose(A, traces[1].attentions[1, 2], atol=2e-5)


def test_embedding_and_search(setup):
    traces, lw, qk = setup
    frame, _ = embed_qk(qk, "pca", max_points=20)
    assert (frame["role"] == "query").sum() == (frame["role"] == "key").sum() == 10
    full, _ = embed_qk(qk, "pca")
    assert len(full) == 2 * len(qk.rows)
    hits = token_search(qk, "CAT")
    assert len(hits) == 2 and set(hits["input"]) == {"s1", "s2"}
    assert hits["received_mean"].is_monotonic_decreasing
    first = hits.iloc[0]
    t = traces[int(first["item"])]
    np.testing.assert_allclose(first["received_mean"], t.attentions[1, 2][:, int(first["position"])].mean(), atol=1e-6)
    assert token_search(qk, "  ").empty


def test_dot_distance_correlation_is_pearson_over_pairs_of_one_input(setup):
    _traces, _lw, qk = setup
    r = dot_distance_correlation(qk, normalise=False)
    xs, ys = [], []
    for i in range(3):
        sel = (qk.rows["item"] == i).to_numpy()
        for q in qk.Q[sel]:
            for k in qk.K[sel]:
                xs.append(q @ k)
                ys.append(np.linalg.norm(q - k))
    assert r == pytest.approx(np.corrcoef(xs, ys)[0, 1], abs=1e-9)


def test_scaling_makes_distance_read_as_attention_when_norms_differ():
    import pandas as pd

    rng = np.random.default_rng(0)
    Q = rng.normal(size=(60, 8)) * 3.0
    K = rng.normal(size=(60, 8))  # queries three times longer than keys
    rows = pd.DataFrame({"item": np.repeat([0, 1], 30)})
    qk = SetQK(0, 0, Q, K, rows, ["a", "b"], ["", ""])
    assert dot_distance_correlation(qk, normalise=True) < dot_distance_correlation(qk, normalise=False) - 0.2
