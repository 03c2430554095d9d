"""Low-dimensional projections and per-layer separability: the one PCA of the library, UMAP and t-SNE.

* :func:`pca` (scikit-learn, exact SVD, deterministic signs) with explained-variance ratios for a Pareto chart
  (:func:`pca_pareto`);
* :func:`umap_project` (``umap-learn`` imported lazily, fixed ``random_state``);
* :func:`tsne_project` (scikit-learn, seeded, perplexity clipped for small N);
* :func:`project` dispatches on a method name; all return a :class:`Projection`;
* :func:`silhouette_per_layer` (nan where undefined) and :func:`variance_ratio_per_layer`, both in
  one :class:`Separability` by :func:`separability_per_layer`.

All projections are deterministic: the same input and seed give identical outputs.

Where it sits: an analysis of plain matrices; head similarity, the cone sets, the precompute PCA
pilot and the subspace joint-Q/K view all project with it.

References
----------
Bonino, Ghione & Cirrincione 2025, *The geometry of BERT* (arXiv:2502.12033): PCA of [CLS] per
layer with a Pareto chart of explained variance; docs/methods.md §9.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Projection",
    "METHODS",
    "pca",
    "pca_pareto",
    "umap_project",
    "tsne_project",
    "project",
    "silhouette_per_layer",
    "variance_ratio_per_layer",
    "Separability",
    "separability_per_layer",
]

METHODS = ("pca", "umap", "tsne")


@dataclass
class Projection:
    """``coords [N, k]``; ``explained_variance_ratio [k]`` for PCA (else ``None``); ``params``."""

    coords: np.ndarray
    method: str
    explained_variance_ratio: np.ndarray | None = None
    params: dict = field(default_factory=dict)

    @property
    def total_explained_variance(self) -> float | None:
        if self.explained_variance_ratio is None:
            return None
        return float(self.explained_variance_ratio.sum())


def _as2d(X) -> np.ndarray:
    if hasattr(X, "detach"):
        X = X.detach().to("cpu").float().numpy()
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected a [N, d] array, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("input contains NaN or infinite values")
    return X


def _check_k(n_components: int) -> None:
    if int(n_components) < 1:
        raise ValueError("n_components must be >= 1")


def pca(X, n_components: int = 2) -> Projection:
    """PCA of the centred data, by scikit-learn's exact SVD solver, whose signs are deterministic
    (each component's largest-|loading| entry positive). If ``n_components`` exceeds ``min(N, d)``
    the extra columns are zero (ratio 0), so plots always get the requested dimensionality."""
    from sklearn.decomposition import PCA

    _check_k(n_components)
    X = _as2d(X)
    N, d = X.shape
    k = min(n_components, N, d)
    fitted = PCA(n_components=k, svd_solver="full")
    coords = np.zeros((N, n_components))
    with np.errstate(invalid="ignore", divide="ignore"):  # constant data: zero total variance
        coords[:, :k] = fitted.fit_transform(X)
    evr = np.zeros(n_components)
    if fitted.explained_variance_.sum() > 0:
        evr[:k] = fitted.explained_variance_ratio_
    return Projection(
        coords=coords,
        method="pca",
        explained_variance_ratio=evr,
        params={"n_components": n_components, "components": fitted.components_},
    )


def pca_pareto(X, n_components: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Explained-variance ratios and their cumulative sum (Pareto chart), length
    ``n_components`` (default ``min(N, d)``; the code used ``min(dim, #classes)``)."""
    X = _as2d(X)
    k = min(X.shape) if n_components is None else n_components
    r = pca(X, n_components=k).explained_variance_ratio
    return r, np.cumsum(r)


def umap_project(
    X,
    n_components: int = 2,
    *,
    random_state: int = 42,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
    metric: str = "euclidean",
) -> Projection:
    """UMAP embedding (``umap-learn``, imported lazily). A fixed ``random_state`` makes it
    deterministic (umap then runs single-threaded). ``n_neighbors`` is clipped to ``N - 1``."""
    _check_k(n_components)
    X = _as2d(X)
    N = X.shape[0]
    if N < n_components + 2:
        raise ValueError(f"UMAP needs at least {n_components + 2} samples, got {N}")
    try:
        import umap  # noqa: PLC0415  (lazy: numba import is slow)
    except Exception as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "UMAP is unavailable: install `umap-learn` (pip install umap-learn), "
            "or use method='pca' or 'tsne'."
        ) from exc
    nn = int(max(2, min(n_neighbors, N - 1)))
    reducer = umap.UMAP(
        n_components=n_components,
        n_neighbors=nn,
        min_dist=min_dist,
        metric=metric,
        random_state=random_state,
        n_jobs=1,
        init="spectral" if N > n_components + 1 else "random",
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coords = reducer.fit_transform(X)
    return Projection(
        coords=np.asarray(coords, dtype=np.float64),
        method="umap",
        params={
            "n_components": n_components,
            "n_neighbors": nn,
            "min_dist": min_dist,
            "metric": metric,
            "random_state": random_state,
        },
    )


def tsne_project(
    X,
    n_components: int = 2,
    *,
    random_state: int = 42,
    perplexity: float = 30.0,
    max_iter: int = 1000,
    init: str = "pca",
) -> Projection:
    """t-SNE (scikit-learn), seeded. ``perplexity`` is clipped to ``max(1, (N - 1) / 3)`` so small
    sets work (scikit-learn requires ``perplexity < N``). The code used ``perplexity=40``,
    ``n_iter=300``, ``random_state=42``, 3 components. ``max_iter`` >= 250."""
    _check_k(n_components)
    from sklearn.manifold import TSNE

    X = _as2d(X)
    N = X.shape[0]
    if N < 4:
        raise ValueError(f"t-SNE needs at least 4 samples, got {N}")
    perp = float(min(perplexity, max(1.0, (N - 1) / 3.0)))
    method = "barnes_hut" if n_components < 4 else "exact"
    ts = TSNE(
        n_components=n_components,
        perplexity=perp,
        max_iter=max(250, int(max_iter)),
        random_state=random_state,
        init=init,
        method=method,
        n_jobs=1,
    )
    coords = ts.fit_transform(X)
    return Projection(
        coords=np.asarray(coords, dtype=np.float64),
        method="tsne",
        params={
            "n_components": n_components,
            "perplexity": perp,
            "perplexity_requested": perplexity,
            "max_iter": max(250, int(max_iter)),
            "random_state": random_state,
            "init": init,
        },
    )


def project(X, method: str = "pca", n_components: int = 2, **kwargs) -> Projection:
    """Dispatch to :func:`pca`, :func:`umap_project` or :func:`tsne_project`."""
    m = method.lower().replace("-", "")
    if m == "pca":
        return pca(X, n_components=n_components, **kwargs)
    if m == "umap":
        return umap_project(X, n_components=n_components, **kwargs)
    if m == "tsne":
        return tsne_project(X, n_components=n_components, **kwargs)
    raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")


def _layers(features) -> list[np.ndarray]:
    if isinstance(features, (list, tuple)):
        return [_as2d(f) for f in features]
    F = np.asarray(features.detach().cpu().float().numpy() if hasattr(features, "detach") else features)
    if F.ndim == 2:
        return [_as2d(F)]
    if F.ndim != 3:
        raise ValueError(f"expected [L, N, d] or a list of [N, d], got shape {F.shape}")
    return [_as2d(f) for f in F]


def silhouette_per_layer(features, labels, *, metric: str = "euclidean") -> np.ndarray:
    """Silhouette score of ``labels`` in each layer's features: ``[L]``.

    ``features``: ``[L, N, d]`` (or a list of ``[N, d]``). Returns ``nan`` for a layer where the
    score is undefined (fewer than 2 classes, or ``N <= #classes``).
    """
    from sklearn.metrics import silhouette_score

    y = np.asarray(labels)
    out = []
    for F in _layers(features):
        if F.shape[0] != y.shape[0]:
            raise ValueError(f"{F.shape[0]} samples but {y.shape[0]} labels")
        n_cls = len(np.unique(y))
        if n_cls < 2 or F.shape[0] <= n_cls:
            out.append(np.nan)
            continue
        out.append(float(silhouette_score(F, y, metric=metric)))
    return np.asarray(out, dtype=np.float64)


def variance_ratio_per_layer(features, labels) -> np.ndarray:
    """Between- / within-class variance ratio per layer (our separability scalar): ``[L]``.

    ``sum_c n_c ||mu_c - mu||^2 / sum_i ||x_i - mu_{c(i)}||^2``; nan if fewer than 2 classes or
    zero within-class variance.
    """
    y = np.asarray(labels)
    classes = np.unique(y)
    out = []
    for F in _layers(features):
        if len(classes) < 2:
            out.append(np.nan)
            continue
        mu = F.mean(0)
        between = within = 0.0
        for c in classes:
            Fc = F[y == c]
            mc = Fc.mean(0)
            between += len(Fc) * float(((mc - mu) ** 2).sum())
            within += float(((Fc - mc) ** 2).sum())
        out.append(between / within if within > 0 else np.nan)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class Separability:
    """How far apart the classes lie in each layer ``[L]``: the ``silhouette`` and the between- /
    within-class ``variance_ratio`` (nan where undefined)."""

    silhouette: np.ndarray
    variance_ratio: np.ndarray


def separability_per_layer(features, labels) -> Separability:
    """:func:`silhouette_per_layer` and :func:`variance_ratio_per_layer` of ``features [L, N, D]``."""
    return Separability(silhouette_per_layer(features, labels), variance_ratio_per_layer(features, labels))
