"""Head similarity: Clark's JS distance, MDS, k-means on features, Kovaleva's cosine similarity."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.heads import head_features
from bertgeom.tokens import TokenKinds
from bertgeom.attention import softmax
from bertgeom.analysis.headsim import (
    JSAccumulator,
    _js_reference,
    choose_k,
    classical_mds,
    cluster_heads,
    cosine_similarity_maps,
    js_distance_matrix,
    mds_embedding,
    mean_cosine_similarity,
    name_clusters,
    standardize,
)


def softmax_maps(rng, L, H, T, scale=2.0):
    return softmax(rng.normal(size=(L, H, T, T)) * scale).astype(np.float32)


def test_js_matches_textbook_formula_over_inputs_of_different_length():
    rng = np.random.default_rng(0)
    a1, a2 = softmax_maps(rng, 2, 3, 9), softmax_maps(rng, 2, 3, 14)
    D = js_distance_matrix([a1, a2])
    f1, f2 = a1.reshape(6, 9, 9), a2.reshape(6, 14, 14)
    ref = np.array([[_js_reference(f1[a], f1[b]) + _js_reference(f2[a], f2[b]) for b in range(6)] for a in range(6)])
    np.testing.assert_allclose(D, ref, rtol=1e-10, atol=1e-12)
    assert D.dtype == np.float64
    np.testing.assert_array_equal(D, D.T)
    assert np.all(np.diag(D) == 0) and np.all(D[~np.eye(6, dtype=bool)] > 0)
    # JS divergence is bounded by ln 2 per row: 9 + 14 rows
    assert D.max() < (9 + 14) * np.log(2)


def test_js_block_size_does_not_change_result_and_identical_heads_are_zero():
    rng = np.random.default_rng(1)
    a = softmax_maps(rng, 3, 4, 11)
    a[1, 2] = a[0, 0]  # heads 0 and 6 identical
    big = JSAccumulator(max_mb=512).update(a).distance
    tiny = JSAccumulator(max_mb=1e-6).update(a).distance  # one head pair-row at a time
    np.testing.assert_allclose(big, tiny, rtol=1e-12, atol=1e-14)
    assert big[0, 6] == pytest.approx(0.0, abs=1e-12)
    acc = JSAccumulator()
    acc.update(a).update(a)
    np.testing.assert_allclose(acc.distance, 2 * big)
    assert acc.n_inputs == 2 and acc.n_rows == 22
    with pytest.raises(ValueError):
        acc.update(softmax_maps(rng, 1, 2, 11))


def test_mds_is_reproducible_and_recovers_geometry():
    pts = np.array([[0, 0], [3, 0], [0, 4], [3, 4], [1.5, 2]], dtype=float)
    D = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    X = classical_mds(D)
    np.testing.assert_allclose(np.linalg.norm(X[:, None] - X[None], axis=-1), D, atol=1e-9)
    m1 = mds_embedding(D, random_state=0, n_init=2, max_iter=300)
    m2 = mds_embedding(D, random_state=0, n_init=2, max_iter=300)
    np.testing.assert_array_equal(m1, m2)
    assert m1.shape == (5, 2)
    Dm = np.linalg.norm(m1[:, None] - m1[None], axis=-1)
    np.testing.assert_allclose(Dm, D, atol=1e-3)
    assert mds_embedding(D**2, method="classical", sqrt=True).shape == (5, 2)


def test_js_mds_separates_head_types():
    """Prev heads, next heads and [SEP] heads form three tight groups in the MDS plane."""
    rng = np.random.default_rng(2)
    T = 16
    base = {
        "prev": np.eye(T, k=-1),
        "next": np.eye(T, k=1),
        "sep": np.zeros((T, T)),
    }
    base["prev"][0, 0] = 1
    base["next"][-1, -1] = 1
    base["sep"][:, -1] = 1
    heads = []
    for kind in ["prev", "next", "sep"] * 3:
        z = 6 * base[kind] + 0.5 * rng.normal(size=(T, T))
        heads.append(np.exp(z) / np.exp(z).sum(-1, keepdims=True))
    D = js_distance_matrix([np.stack(heads)[None]])
    X = mds_embedding(D, method="classical")
    groups = np.arange(9) % 3
    within = max(np.linalg.norm(X[i] - X[j]) for i in range(9) for j in range(9) if groups[i] == groups[j])
    between = min(np.linalg.norm(X[i] - X[j]) for i in range(9) for j in range(9) if groups[i] != groups[j])
    assert within < 0.25 * between


def test_cluster_heads_on_feature_table():
    rng = np.random.default_rng(3)
    T = 20
    kinds = TokenKinds.simple(T)
    maps = []
    for kind in ["prev", "sep", "broad"] * 4:
        if kind == "prev":
            z = 6 * np.eye(T, k=-1)
        elif kind == "sep":
            z = np.zeros((T, T))
            z[:, -1] = 6
        else:
            z = np.zeros((T, T))
        z = z + 0.3 * rng.normal(size=(T, T))
        maps.append(np.exp(z) / np.exp(z).sum(-1, keepdims=True))
    table = head_features(np.stack(maps).reshape(3, 4, T, T), kinds)
    names = ["prev", "next", "self", "sink", "entropy_norm", "mean_dist_norm", "signed_offset"]
    X = table.matrix(names)
    res = cluster_heads(X, k=3, feature_names=names, random_state=0)
    truth = np.arange(12) % 3
    # same partition as the truth, up to label permutation
    for c in range(3):
        assert len(set(res.labels[truth == c])) == 1
    assert len(set(res.labels)) == 3
    assert res.coords.shape == (12, 2) and res.silhouette > 0.8
    assert res.grid(3, 4).shape == (3, 4)
    again = cluster_heads(X, k=3, feature_names=names, random_state=0)
    np.testing.assert_array_equal(res.labels, again.labels)
    np.testing.assert_array_equal(res.coords, again.coords)
    named = name_clusters(res.centroids, names)  # one name per cluster id
    assert named[res.labels[0]] == "local-backward"
    assert named[res.labels[1]] == "sink/vertical"
    assert named[res.labels[2]] == "broad/global"
    k, scores = choose_k(X, range(2, 6))
    assert k == 3 and set(scores) == {2, 3, 4, 5}


def test_standardize_constant_columns():
    X = np.array([[1.0, 5.0], [3.0, 5.0]])
    Z, mu, sd = standardize(X)
    np.testing.assert_allclose(Z, [[-1, 0], [1, 0]])
    np.testing.assert_allclose(mu, [2, 5])
    assert sd[1] == 0


def test_cosine_similarity_between_checkpoints():
    rng = np.random.default_rng(4)
    a = softmax_maps(rng, 2, 3, 7)
    b = a.copy()
    b[1, 2] = np.roll(np.eye(7), 3, axis=1)  # a permutation map
    b[0, 1] = 0.0
    c = cosine_similarity_maps(a, b)
    assert c.shape == (2, 3)
    np.testing.assert_allclose(c[0, 0], 1.0)
    assert np.isnan(c[0, 1])
    x, y = a[1, 2].astype(np.float64).ravel(), b[1, 2].astype(np.float64).ravel()
    assert c[1, 2] == pytest.approx(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
    e = np.eye(5)[None, None]
    f = np.roll(np.eye(5), 1, axis=1)[None, None]
    assert cosine_similarity_maps(e, f)[0, 0] == 0.0
    m = mean_cosine_similarity([(e, e), (e, f)])
    assert m[0, 0] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        cosine_similarity_maps(e, np.eye(4)[None, None])


def test_cluster_names_are_unique():
    """Two sink clusters are numbered by their sink mass instead of sharing one name."""
    names = ["sink", "prev", "next", "self", "entropy_norm", "mean_dist_norm", "signed_offset"]
    cents = np.array([
        [0.9, 0.0, 0.0, 0.0, 0.2, 0.1, 0.0],   # the strongest sink cluster
        [0.6, 0.0, 0.0, 0.0, 0.3, 0.2, 0.0],   # a second sink cluster
        [0.0, 0.8, 0.0, 0.0, 0.3, 0.1, -1.0],  # local-backward
        [0.1, 0.1, 0.1, 0.1, 0.5, 0.5, 0.0],   # mid-range
    ])
    named = name_clusters(cents, names)
    # the two sink clusters differ most (in z units over the 4 centroids) in entropy: 0.2 vs 0.3
    assert named == ["sink/vertical 1 (low normalised entropy)", "sink/vertical 2 (high normalised entropy)",
                     "local-backward", "mid-range/content-dependent"]
    assert len(set(named)) == len(named)
    # the order follows the sink mass, not the cluster index
    assert [n.split(" (")[0] for n in name_clusters(cents[[1, 0]], names)] == ["sink/vertical 2", "sink/vertical 1"]


def test_namesake_clusters_say_in_words_what_sets_them_apart():
    """Three mid-range clusters: each names the feature on which it stands out from the other two."""
    names = ["sink", "prev", "entropy_norm", "mean_dist_norm"]
    cents = np.array([
        [0.40, 0.10, 0.50, 0.50],  # more sink than its namesakes
        [0.05, 0.10, 0.50, 0.20],  # attends closer
        [0.05, 0.10, 0.75, 0.50],  # flatter rows
    ])
    named = name_clusters(cents, names)
    assert [n.split(" (")[1] for n in named] == ["high sink mass)", "low distance / uniform)",
                                                   "high normalised entropy)"]
    assert all("_" not in n for n in named)  # words, not variable names
