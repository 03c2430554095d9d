"""Similarity between heads: Clark's Jensen-Shannon distances + MDS, Guan-style k-means
on feature vectors, and Kovaleva's per-head cosine similarity between two checkpoints.

All inputs follow the project convention ``[L, H, T, T]`` (``[N, T, T]`` is accepted where
noted); heads are flattened in row-major ``(layer, head)`` order, i.e. index ``l * H + h``.

Where it sits: above the per-head features (:mod:`bertgeom.analysis.heads`) and the projections;
the sets and the Attention Heads page's similarity and checkpoint tabs read it.

References
----------
* Clark et al. 2019, *What Does BERT Look At?* (arXiv:1906.04341), §6: Jensen-Shannon distances
  between heads, embedded with MDS.
* Guan et al. 2020, *How Far Does BERT Look At* (arXiv:2011.00943): clustering heads by their
  features (**reconstructed**).
* Kovaleva et al. 2019, *Revealing the Dark Secrets of BERT* (arXiv:1908.08593): per-head cosine
  similarity between the pretrained and the fine-tuned model.
* docs/methods.md §6 (head similarity, clustering and cluster names), §7 (checkpoint comparison).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from bertgeom.analysis.heads import FEATURE_DOCS
from bertgeom.analysis.projections import pca

__all__ = [
    "JSAccumulator",
    "js_distance_matrix",
    "mds_embedding",
    "classical_mds",
    "HeadClustering",
    "standardize",
    "cluster_heads",
    "choose_k",
    "name_clusters",
    "cosine_similarity_maps",
    "mean_cosine_similarity",
]


def _as_nTT(attn) -> np.ndarray:
    a = np.asarray(attn)
    if a.ndim == 4:
        a = a.reshape(-1, a.shape[-2], a.shape[-1])
    if a.ndim != 3 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expected [L, H, T, T] or [N, T, T] maps, got {a.shape}")
    return a


# ----------------------------------------------------------------------------------------
# Clark's Jensen-Shannon distance between heads (see the module's References)
# ----------------------------------------------------------------------------------------


class JSAccumulator:
    """Accumulates Clark et al.'s head-to-head distance over inputs.

    ``D(a, b) = sum over inputs, sum over query rows i of JS(p_a,i || p_b,i)`` with rows smoothed
    as ``p~ = (1 - s) p + s / n`` (``s = 0.001``, head_distances.py) and
    ``JS(p, q) = 1/2 KL(p || m) + 1/2 KL(q || m)``, ``m = (p + q) / 2`` in nats.  A **sum**, not a
    mean; raw JS divergence (not its square root).  Float64 throughout.

    Vectorised: ``JS = 1/2 sum p ln p + 1/2 sum q ln q - sum m ln m``; the first two terms are
    per-head, the last is computed for blocks of head pairs at once, bounded by ``max_mb``.
    """

    def __init__(self, n_heads: int | None = None, *, smoothing: float = 0.001, max_mb: float = 128.0):
        self.smoothing = float(smoothing)
        self.max_mb = float(max_mb)
        self.n_heads = n_heads
        self.total = None if n_heads is None else np.zeros((n_heads, n_heads))
        self.n_inputs = 0
        self.n_rows = 0

    def update(self, attn, rows: np.ndarray | None = None) -> "JSAccumulator":
        """Add one input: ``[L, H, T, T]`` (or ``[N, T, T]``); ``rows`` optionally restricts the query rows."""
        P = _as_nTT(attn).astype(np.float64)
        N, T, _ = P.shape
        if rows is not None:
            P = P[:, np.asarray(rows), :]
        if self.total is None:
            self.n_heads = N
            self.total = np.zeros((N, N))
        if N != self.n_heads:
            raise ValueError(f"expected {self.n_heads} heads, got {N}")
        s = self.smoothing
        P = P * (1.0 - s) + s / T
        if s <= 0:
            from scipy.special import xlogy

            plogp = xlogy(P, P).sum(axis=(1, 2))
        else:
            plogp = np.einsum("nij,nij->n", P, np.log(P))
        R = P.shape[1]
        per_pair_mb = 8.0 * R * T / 2**20
        D = np.zeros((N, N))
        # blocks of rows a in [a0, a1) against every b > a (upper triangle)
        a0 = 0
        while a0 < N - 1:
            width = N - a0 - 1
            n_a = max(1, min(N - 1 - a0, int(self.max_mb // max(per_pair_mb * width, 1e-12))))
            a1 = a0 + n_a
            M = P[a0:a1, None] + P[None, a0 + 1:]  # [n_a, N-a0-1, R, T] = 2 m
            mlogm = np.einsum("abij,abij->ab", M, np.log(M))  # sum of (2m) ln(2m)
            # sum m ln m = (sum 2m ln 2m) / 2 - ln 2 * sum m
            msum = M.sum(axis=(2, 3)) / 2.0
            cross = mlogm / 2.0 - math.log(2.0) * msum
            js = 0.5 * (plogp[a0:a1, None] + plogp[None, a0 + 1:]) - cross
            for r in range(n_a):  # write the block into the upper triangle (row a0 + r)
                a = a0 + r
                D[a, a + 1:] = js[r, r:]
            a0 = a1
        D = np.maximum(D, 0.0)  # clip float noise
        D = D + D.T
        self.total += D
        self.n_inputs += 1
        self.n_rows += R
        return self

    @property
    def distance(self) -> np.ndarray:
        if self.total is None:
            raise ValueError("no inputs added")
        return self.total.copy()


def js_distance_matrix(attn_maps: Iterable, *, smoothing: float = 0.001, max_mb: float = 128.0) -> np.ndarray:
    """Clark's ``[N, N]`` head distance (sum of row-wise JS divergences) over a set of inputs.

    ``attn_maps`` yields ``[L, H, T, T]`` arrays (``T`` may differ between inputs).
    """
    acc = JSAccumulator(smoothing=smoothing, max_mb=max_mb)
    for a in attn_maps:
        acc.update(a)
    return acc.distance


def _js_reference(p: np.ndarray, q: np.ndarray, smoothing: float = 0.001) -> float:
    """JS divergence summed over rows of two ``[T, T]`` maps, written the textbook way (tests)."""
    n = p.shape[-1]
    p = (1 - smoothing) * p.astype(np.float64) + smoothing / n
    q = (1 - smoothing) * q.astype(np.float64) + smoothing / n
    m = (p + q) / 2
    return float(0.5 * (p * np.log(p / m)).sum() + 0.5 * (q * np.log(q / m)).sum())


# ----------------------------------------------------------------------------------------
# MDS
# ----------------------------------------------------------------------------------------


def classical_mds(D: np.ndarray, n_components: int = 2) -> np.ndarray:
    """Torgerson (classical) MDS of a distance matrix: top eigenvectors of the double-centred
    ``-1/2 J D^2 J``.  Deterministic; the sign of each axis is fixed so its largest |coordinate|
    is positive."""
    D = np.asarray(D, dtype=np.float64)
    n = D.shape[0]
    J = np.eye(n) - 1.0 / n
    B = -0.5 * J @ (D**2) @ J
    vals, vecs = np.linalg.eigh((B + B.T) / 2)
    idx = np.argsort(vals)[::-1][:n_components]
    X = vecs[:, idx] * np.sqrt(np.maximum(vals[idx], 0.0))
    for c in range(X.shape[1]):
        if X[np.argmax(np.abs(X[:, c])), c] < 0:
            X[:, c] *= -1
    return X


def _sk_mds(n_components, random_state, n_init, max_iter, eps):
    from sklearn.manifold import MDS

    params = inspect.signature(MDS).parameters
    kw = dict(n_components=n_components, n_init=n_init, max_iter=max_iter, eps=eps, random_state=random_state)
    if "metric_mds" in params:  # scikit-learn >= 1.8
        kw.update(metric_mds=True, metric="precomputed")
        if "init" in params:
            kw["init"] = "random"
    else:
        kw.update(metric=True, dissimilarity="precomputed")
    if "normalized_stress" in params:
        kw["normalized_stress"] = False
    return MDS(**kw)


def mds_embedding(
    D: np.ndarray,
    *,
    n_components: int = 2,
    method: str = "metric",
    sqrt: bool = False,
    random_state: int = 0,
    n_init: int = 5,
    max_iter: int = 1000,
    eps: float = 1e-10,
) -> np.ndarray:
    """2-D embedding of a precomputed distance matrix.

    ``method="metric"``: scikit-learn SMACOF metric MDS with Clark's settings (n_init=5,
    max_iter=1000, eps=1e-10) and a fixed ``random_state``.  ``method="classical"``: Torgerson
    MDS (deterministic, fast).  ``sqrt=True`` embeds ``sqrt(D)`` (a true metric for JS).
    """
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError("D must be square")
    D = (D + D.T) / 2
    np.fill_diagonal(D, 0.0)
    if sqrt:
        D = np.sqrt(np.maximum(D, 0.0))
    if method == "classical":
        return classical_mds(D, n_components)
    if method != "metric":
        raise ValueError("method must be 'metric' or 'classical'")
    return _sk_mds(n_components, random_state, n_init, max_iter, eps).fit_transform(D)


# ----------------------------------------------------------------------------------------
# Guan-style k-means on standardised features
# ----------------------------------------------------------------------------------------


def standardize(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column z-scores; constant columns become 0.  Returns ``(Z, mean, std)``."""
    X = np.asarray(X, dtype=np.float64)
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd_safe = np.where(sd > 1e-12, sd, 1.0)
    return (X - mu) / sd_safe, mu, sd


@dataclass
class HeadClustering:
    labels: np.ndarray  # [N] cluster per head (row-major layer, head)
    coords: np.ndarray  # [N, 2] PCA of the standardised features
    centroids: np.ndarray  # [k, F] in original feature units
    centroids_z: np.ndarray  # [k, F] standardised
    k: int
    silhouette: float
    inertia: float
    feature_names: list[str]
    explained_variance: np.ndarray  # of the two PCA axes

    def grid(self, n_layers: int, n_heads: int) -> np.ndarray:
        """Labels as an ``[L, H]`` grid."""
        return self.labels.reshape(n_layers, n_heads)


def cluster_heads(
    X: np.ndarray,
    k: int = 5,
    *,
    feature_names: Sequence[str] | None = None,
    random_state: int = 0,
    n_init: int = 20,
) -> HeadClustering:
    """k-means (k-means++, ``n_init``, seeded) on z-scored head feature vectors (Guan 2020,
    reconstructed: docs/methods.md §6), plus 2-D PCA coordinates of the same standardised vectors."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError("X must be [n_heads, n_features]")
    if not np.isfinite(X).all():
        raise ValueError("X contains NaN or inf")
    Z, mu, sd = standardize(X)
    k = int(min(k, X.shape[0]))
    km = KMeans(n_clusters=k, init="k-means++", n_init=n_init, random_state=random_state).fit(Z)
    labels = km.labels_.astype(int)
    n_lab = np.unique(labels).size
    sil = float(silhouette_score(Z, labels)) if 1 < n_lab < X.shape[0] else float("nan")
    plane = pca(Z, n_components=2)  # columns beyond min(N, d) are zero
    coords = plane.coords.copy()
    for c in range(coords.shape[1]):  # deterministic axis signs
        if coords.size and coords[np.argmax(np.abs(coords[:, c])), c] < 0:
            coords[:, c] *= -1
    cz = km.cluster_centers_
    sd_safe = np.where(sd > 1e-12, sd, 1.0)
    ev = plane.explained_variance_ratio
    return HeadClustering(
        labels=labels,
        coords=coords,
        centroids=cz * sd_safe + mu,
        centroids_z=cz,
        k=k,
        silhouette=sil,
        inertia=float(km.inertia_),
        feature_names=list(feature_names) if feature_names is not None else [f"f{i}" for i in range(X.shape[1])],
        explained_variance=ev,
    )


def choose_k(X: np.ndarray, ks: Iterable[int] = range(2, 11), *, random_state: int = 0,
             n_init: int = 10) -> tuple[int, dict[int, float]]:
    """Best k by silhouette over ``ks`` on the standardised features; returns ``(k, {k: score})``."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    Z, _, _ = standardize(X)
    scores = {}
    for k in ks:
        if not 2 <= k < Z.shape[0]:
            continue
        lab = KMeans(n_clusters=k, n_init=n_init, random_state=random_state).fit_predict(Z)
        if np.unique(lab).size < 2:
            continue
        scores[int(k)] = float(silhouette_score(Z, lab))
    if not scores:
        raise ValueError("no valid k")
    best = max(scores, key=lambda kk: (scores[kk], -kk))
    return best, scores


def name_clusters(centroids: np.ndarray, feature_names: Sequence[str], *, high: float = 0.5) -> list[str]:
    """Name each centroid (original feature units) with the reconstructed rules of docs/methods.md §6.

    In order: sink/vertical (``sink >= high``), local-backward (``prev >= high`` and
    ``signed_offset < 0``), local-forward (``next >= high``, ``signed_offset > 0``), self
    (``self >= high``), broad/global (``entropy_norm >= 0.8`` and ``mean_dist_norm >= 0.8``),
    else mid-range/content-dependent.  Features missing from ``feature_names`` are skipped.

    Names are unique: when several centroids get the same name they are numbered ("sink/vertical 1",
    "sink/vertical 2"), 1 being the one with the most of the rule's key feature (sink mass, previous
    or next-token mass, self, normalised entropy; mean distance for mid-range), and each says in
    words what sets it apart from its namesakes: the feature (z-scored over the centroids) on which
    it differs most from their mean, e.g. "mid-range/content-dependent 2 (high sink mass)". So two
    clusters never read alike on screen, and the number is not all that tells them apart
    (docs/methods.md §6).
    """
    idx = {n: i for i, n in enumerate(feature_names)}

    def g(c, name, default=np.nan):
        return c[idx[name]] if name in idx else default

    names = []
    for c in np.asarray(centroids, dtype=np.float64):
        if g(c, "sink", 0.0) >= high:
            names.append("sink/vertical")
        elif g(c, "prev", 0.0) >= high and g(c, "signed_offset", -1.0) < 0:
            names.append("local-backward")
        elif g(c, "next", 0.0) >= high and g(c, "signed_offset", 1.0) > 0:
            names.append("local-forward")
        elif g(c, "self", 0.0) >= high:
            names.append("self")
        elif g(c, "entropy_norm", 0.0) >= 0.8 and g(c, "mean_dist_norm", 0.0) >= 0.8:
            names.append("broad/global")
        else:
            names.append("mid-range/content-dependent")
    cents = np.asarray(centroids, dtype=np.float64)
    numbered = _numbered(names, [g(c, _KEY_FEATURE[names[i]], 0.0) for i, c in enumerate(cents)])
    return [f"{n} ({q})" if q else n for n, q in zip(numbered, _set_apart(cents, names, feature_names))]


def _set_apart(cents: np.ndarray, names: Sequence[str], feature_names: Sequence[str]) -> list[str]:
    """For every centroid that shares its rule name: "high <feature>" / "low <feature>", the feature on
    which it differs most (in z units over all centroids) from the mean of its namesakes; "" otherwise."""
    sd = cents.std(axis=0)
    z = np.divide(cents - cents.mean(axis=0), sd, out=np.zeros_like(cents), where=sd > 1e-12)
    out = [""] * len(names)
    for name in set(names):
        idx = [i for i, n in enumerate(names) if n == name]
        if len(idx) < 2:
            continue
        for i in idx:
            d = z[i] - z[[j for j in idx if j != i]].mean(axis=0)
            f = int(np.argmax(np.abs(d)))
            if abs(d[f]) > 1e-9:
                fname = feature_names[f]
                label = FEATURE_DOCS[fname].label if fname in FEATURE_DOCS else fname.replace("_", " ")
                out[i] = f"{'high' if d[f] > 0 else 'low'} {label}"
    return out


#: The feature that ranks clusters sharing a name (the one their naming rule reads first).
_KEY_FEATURE = {"sink/vertical": "sink", "local-backward": "prev", "local-forward": "next", "self": "self",
                "broad/global": "entropy_norm", "mid-range/content-dependent": "mean_dist_norm"}


def _numbered(names: list[str], keys: Sequence[float]) -> list[str]:
    """Number the names that occur more than once, in decreasing order of ``keys``."""
    out = list(names)
    for name in set(names):
        idx = [i for i, n in enumerate(names) if n == name]
        if len(idx) > 1:
            for rank, i in enumerate(sorted(idx, key=lambda i: (-keys[i], i)), start=1):
                out[i] = f"{name} {rank}"
    return out


# ----------------------------------------------------------------------------------------
# Kovaleva's cosine similarity between checkpoints
# ----------------------------------------------------------------------------------------


def cosine_similarity_maps(attn_a, attn_b) -> np.ndarray:
    """Per-head cosine similarity of ``vec(A_a)`` and ``vec(A_b)`` for one input -> ``[L, H]``.

    Maps must have equal shape (same input through two checkpoints, same crop or padding).
    A head whose map is all zeros in either model gets NaN.
    """
    a = np.asarray(attn_a, dtype=np.float64)
    b = np.asarray(attn_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim < 2:
        raise ValueError(f"maps must have equal shapes, got {a.shape} and {b.shape}")
    dot = np.einsum("...ij,...ij->...", a, b)
    na = np.sqrt(np.einsum("...ij,...ij->...", a, a))
    nb = np.sqrt(np.einsum("...ij,...ij->...", b, b))
    den = na * nb
    return np.divide(dot, den, out=np.full(dot.shape, np.nan), where=den > 0)


def mean_cosine_similarity(pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Mean over inputs of :func:`cosine_similarity_maps` (Kovaleva Fig. 5, ≤1000 dev examples)."""
    total, count = None, 0
    for a, b in pairs:
        c = cosine_similarity_maps(a, b)
        total = c if total is None else total + c
        count += 1
    if total is None:
        raise ValueError("no pairs")
    return total / count
