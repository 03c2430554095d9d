"""PCA / UMAP / t-SNE: seeded, stable, small-N safe; silhouette per layer."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from bertgeom.analysis import projections as pj


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((3, 10)) * 6
    y = np.repeat(np.arange(3), 15)
    X = centers[y] + rng.standard_normal((45, 10))
    return X, y


def test_pca_ratios_and_determinism(blobs):
    X, _ = blobs
    p = pj.pca(X, n_components=3)
    assert p.coords.shape == (45, 3) and p.method == "pca"
    r = p.explained_variance_ratio
    assert np.all(np.diff(r) <= 1e-12) and 0 < r.sum() <= 1
    full, cum = pj.pca_pareto(X)
    assert len(full) == 10 and cum[-1] == pytest.approx(1.0)
    np.testing.assert_allclose(full[:3], r)
    np.testing.assert_array_equal(pj.pca(X, 3).coords, p.coords)
    # agrees with scikit-learn up to the sign of each component
    from sklearn.decomposition import PCA

    ref = PCA(n_components=3, svd_solver="full").fit(X)
    np.testing.assert_allclose(np.abs(p.coords), np.abs(ref.transform(X)), atol=1e-8)
    np.testing.assert_allclose(r, ref.explained_variance_ratio_, atol=1e-12)
    # more components than the data supports: zero-padded
    small = pj.pca(X[:2], n_components=3)
    assert small.coords.shape == (2, 3) and np.all(small.coords[:, 2] == 0)
    np.testing.assert_allclose(small.coords[:, 1], 0.0, atol=1e-12)


def test_umap_seeded_and_stable(blobs):
    pytest.importorskip("umap")
    X, _ = blobs
    a = pj.umap_project(X, n_components=2, random_state=7)
    b = pj.project(X, "umap", n_components=2, random_state=7)
    assert a.coords.shape == (45, 2) and np.all(np.isfinite(a.coords))
    np.testing.assert_array_equal(a.coords, b.coords)
    c = pj.umap_project(X[:8], n_components=3)  # n_neighbors clipped to N - 1
    assert c.coords.shape == (8, 3) and c.params["n_neighbors"] == 7


def test_umap_unavailable_gives_clear_error(monkeypatch, blobs):
    monkeypatch.setitem(sys.modules, "umap", None)
    with pytest.raises(ImportError, match="umap-learn"):
        pj.umap_project(blobs[0])


def test_tsne_seeded_stable_and_small_n(blobs):
    X, _ = blobs
    a = pj.tsne_project(X, n_components=2, max_iter=250, random_state=42)
    b = pj.project(X, "t-SNE", n_components=2, max_iter=250, random_state=42)
    np.testing.assert_array_equal(a.coords, b.coords)
    c = pj.tsne_project(X[:10], n_components=3, perplexity=40, max_iter=250)
    assert c.coords.shape == (10, 3)
    assert c.params["perplexity"] == pytest.approx(3.0) and c.params["perplexity_requested"] == 40
    with pytest.raises(ValueError):
        pj.tsne_project(X[:3])
    with pytest.raises(ValueError):
        pj.project(X, "isomap")


def test_silhouette_per_layer(blobs):
    X, y = blobs
    rng = np.random.default_rng(1)
    noise = rng.standard_normal(X.shape)
    F = np.stack([noise, X])  # [L=2, N, d]
    s = pj.silhouette_per_layer(F, y)
    assert s.shape == (2,)
    assert s[1] > 0.6 and s[0] < 0.1
    assert np.isnan(pj.silhouette_per_layer(F, np.zeros(45, int))).all()  # one class
    assert np.isnan(pj.silhouette_per_layer([X[:3]], y[[0, 15, 30]])).all()  # N <= #classes
    vr = pj.variance_ratio_per_layer([noise, X], y)
    assert vr[1] > 10 * vr[0]
    with pytest.raises(ValueError):
        pj.silhouette_per_layer(F, y[:10])
