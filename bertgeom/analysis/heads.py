"""Vectorised per-head attention features for every head of a model at once.

Input convention (project-wide): ``attn`` is a numpy array of shape ``[L, H, T, T]``
(layers, heads, query, key), float32 or float64, each row a distribution over keys.
Maps are cropped to the real tokens, so ``T`` counts [CLS] and [SEP] but no [PAD]
(a ``TokenKinds.is_pad`` mask is honoured if padding was kept).  Indices are 0-based
in arrays; the UI shows 1-based names (``L8 H10``, :func:`bertgeom.tables.head_label`).

Every feature is computed for a whole stack of heads with array operations (no
Python loop over heads, query rows or keys; the block graph of all heads is one
block-diagonal sparse graph).  The stack is cut into cache-sized chunks of heads
(optionally run on threads); the remaining Python loops run over a handful of
offsets, segments or histogram bins.  ``bench/reference_heads.py`` holds a plain
loop-over-heads-and-rows version of the same formulas; the tests check that both
agree and ``bench/bench_head_features.py`` times them.  Token masks: :mod:`bertgeom.tokens`.

Each feature is one function registered once with its documentation (``@head_feature(name,
(label, formula, source))``, in :data:`HEAD_FEATURES`): the chunk loop computes every registered
feature, the table's columns and :data:`FEATURE_DOCS` (what the pages and the precompute
configuration read) follow the registry, and intermediates shared by several features (the offset
profile, the sorted rows, the column means…) are computed once per chunk by :class:`_Chunk`.

Row convention: unless a feature says otherwise, it is a mean over the *query rows*
``Q``, by default the content tokens (``rows="content"``: not [CLS], [SEP], [PAD]).
``rows="all"`` gives Clark's convention (mean over all ``n`` rows).  Keys always span every
real token.  ``FEATURE_DOCS`` holds each feature's formula and source.

Where it sits: an analysis of one trace's attention; the pattern labels, head similarity, the
sets and the Attention Heads page read its table.

References
----------
* Clark et al. 2019, *What Does BERT Look At?* (arXiv:1906.04341): self / prev / next, [CLS],
  [SEP], punctuation, entropy with 1e-4 smoothing, [SEP]->[SEP].
* Kovaleva et al. 2019, *Revealing the Dark Secrets of BERT* (arXiv:1908.08593): max [SEP]
  column, verticality, block structure.
* Guan et al. 2020, *How Far Does BERT Look At* (arXiv:2011.00943), **reconstructed** (the
  paper's formulas were not read): distance features G1-G7.
* Bonino, Ghione & Cirrincione 2025, *The geometry of BERT* (arXiv:2502.12033),
  **reconstructed** gate features (backward/forward masses, top content column, row alignment,
  k90, block mass); k90 is the metastable-state size of Ramsauer et al. 2021.
* docs/methods.md §2 (row convention), §3.3 (Guan features), §3.4 (gate features),
  docs/methods.md §5 (class-mean maps), §10 (block graph).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from bertgeom.tokens import TokenKinds
from bertgeom.attention import ZERO_MODES, kept_tokens
from bertgeom.metricdocs import MetricDoc
from bertgeom.tables import head_label
from numpy.lib.stride_tricks import as_strided

__all__ = [
    "HeadFeatureTable",
    "head_features",
    "class_mean_maps",
    "FEATURE_DOCS",
    "HEAD_FEATURES",
    "HeadFeature",
    "head_feature",
    "head_feature_family",
    "feature_names",
    "DEFAULT_DIST_BINS",
    "feature_doc",
    "hist_labels",
]

# Lower edges of the |offset| bins after the {0} bin: {1}, {2}, {3-4}, {5-8}, {9-16},
# {17-32}, {>32} (Guan-style G6, Guan 2020 reconstruction, docs/methods.md §3.3), mirrored for backward offsets.
DEFAULT_DIST_BINS: tuple[int, ...] = (1, 2, 3, 5, 9, 17, 33)

_K90_TOL = 1e-9  # relative slack so that e.g. 18 x 0.05 counts as reaching 0.9


# ----------------------------------------------------------------------------------------
# Feature documentation
# ----------------------------------------------------------------------------------------

def hist_labels(dist_bins: Sequence[int] = DEFAULT_DIST_BINS) -> list[str]:
    """Labels of the signed distance-histogram bins, from far-backward to far-forward."""
    edges = list(dist_bins)
    pos = []
    for k, e in enumerate(edges):
        if k + 1 < len(edges):
            hi = edges[k + 1] - 1
            pos.append(f"{e}" if hi == e else f"{e}..{hi}")
        else:
            pos.append(f"{e}+")
    return [f"d-{p}" for p in reversed(pos)] + ["d0"] + [f"d+{p}" for p in pos]


def feature_doc(name: str) -> MetricDoc:
    """(label, formula, source) for any feature name, including generated ones (a family's
    ``off_m2``, ``local_4``… and the histogram bins ``d-1``, ``d0``…)."""
    if name in FEATURE_DOCS:
        return FEATURE_DOCS[name]
    for family in HEAD_FEATURES.values():
        if family.names is not None and name.startswith(family.name + "_"):
            return family.doc(name)
    if name.startswith("d-") or name.startswith("d+") or name == "d0":
        return MetricDoc(f"distance bin {name[1:]}", "mean_i sum_{j-i in bin} A[i,j]",
                         "Guan-style G6 histogram (reconstruction)")
    raise KeyError(name)


# ----------------------------------------------------------------------------------------
# Feature table
# ----------------------------------------------------------------------------------------


@dataclass
class HeadFeatureTable:
    """Per-head features of one input (or the mean over inputs).

    ``features[name]`` is an ``[L, H]`` array; ``hist`` is ``[L, H, B]`` with
    ``hist_labels``; ``k90_rows`` is ``[L, H, |Q|]`` (per-row k90, for violin plots;
    concatenated over inputs in a mean table); ``top_col`` is the 0-based key index of
    the strongest column (``verticality``), or None for a mean table.
    """

    features: dict[str, np.ndarray]
    hist: np.ndarray
    hist_labels: list[str]
    k90_rows: np.ndarray | None = None
    top_col: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    n_examples: int = 1
    std: dict[str, np.ndarray] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.hist.shape[:2])  # type: ignore[return-value]

    @property
    def names(self) -> list[str]:
        return list(self.features)

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.features:
            return self.features[name]
        if name in self.hist_labels:
            return self.hist[..., self.hist_labels.index(name)]
        raise KeyError(name)

    def __contains__(self, name: str) -> bool:
        return name in self.features or name in self.hist_labels

    def _expand(self, names: Sequence[str] | None) -> list[str]:
        if names is None:
            return self.names
        out: list[str] = []
        for n in names:
            out.extend(self.hist_labels if n == "hist" else [n])
        return out

    def matrix(self, names: Sequence[str] | None = None) -> np.ndarray:
        """``[L*H, F]`` matrix, heads in row-major (layer, head) order; ``"hist"`` expands to the bins."""
        cols = self._expand(names)
        L, H = self.shape
        return np.stack([np.asarray(self[c], dtype=np.float64).reshape(L * H) for c in cols], axis=1)

    def columns(self, names: Sequence[str] | None = None) -> list[str]:
        """Column names of ``matrix(names)``."""
        return self._expand(names)

    def to_rows(self, names: Sequence[str] | None = None, *, include_hist: bool = False) -> list[dict]:
        """One dict per head (1-based ``layer``/``head`` plus ``name`` like '8-10') for a table or CSV."""
        cols = self._expand(names)
        if include_hist and names is None:
            cols = cols + self.hist_labels
        L, H = self.shape
        rows = []
        for l in range(L):
            for h in range(H):
                r: dict = {"layer": l + 1, "head": h + 1, "name": head_label(l, h)}
                for c in cols:
                    v = float(self[c][l, h])
                    r[c] = int(round(v)) if c == "n_blocks" and self.n_examples == 1 else v
                if self.top_col is not None:
                    r["top_col"] = int(self.top_col[l, h])
                rows.append(r)
        return rows

    @staticmethod
    def mean(tables: Sequence["HeadFeatureTable"]) -> "HeadFeatureTable":
        """Equal-weight mean over inputs (docs/methods.md §2), with per-feature standard deviations."""
        tables = list(tables)
        if not tables:
            raise ValueError("no tables")
        names = tables[0].names
        for t in tables[1:]:
            if t.names != names or t.shape != tables[0].shape or t.hist_labels != tables[0].hist_labels:
                raise ValueError("tables have different features, shapes or histogram bins")
        w = np.array([t.n_examples for t in tables], dtype=np.float64)
        w /= w.sum()
        feats, std = {}, {}
        for n in names:
            stack = np.stack([t.features[n] for t in tables])
            feats[n] = np.tensordot(w, stack, axes=1)
            std[n] = np.sqrt(np.tensordot(w, (stack - feats[n]) ** 2, axes=1))
        hist = np.tensordot(w, np.stack([t.hist for t in tables]), axes=1)
        k90 = None
        if all(t.k90_rows is not None for t in tables):
            k90 = np.concatenate([t.k90_rows for t in tables], axis=-1)
        return HeadFeatureTable(
            features=feats,
            hist=hist,
            hist_labels=list(tables[0].hist_labels),
            k90_rows=k90,
            top_col=None,
            params=dict(tables[0].params),
            n_examples=int(sum(t.n_examples for t in tables)),
            std=std,
        )


# ----------------------------------------------------------------------------------------
# Vectorised computation
# ----------------------------------------------------------------------------------------


def _as_lhtt(attn) -> np.ndarray:
    a = np.asarray(attn)
    if a.ndim == 2:
        a = a[None, None]
    elif a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attention must have shape [L, H, T, T], got {a.shape}")
    return a


def _query_rows(kinds: TokenKinds, rows: str) -> np.ndarray:
    if rows == "content":
        return kinds.content
    if rows == "all":
        return kinds.real
    raise ValueError("rows must be 'content' or 'all'")


def _check_params(kinds, T, local_window, max_offset, local_windows, dist_bins, k_mass):
    if kinds.n != T:
        raise ValueError(f"TokenKinds has {kinds.n} tokens but the maps are {T}x{T}")
    if local_window < 1 or max_offset < 1 or any(w < 1 for w in local_windows):
        raise ValueError("windows and offsets must be >= 1")
    edges = list(dist_bins)
    if not edges or edges[0] != 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError("dist_bins must be increasing lower edges starting at 1, e.g. (1, 2, 3, 5, 9)")
    if not 0 < k_mass <= 1:
        raise ValueError("k_mass must be in (0, 1]")
    if kinds.content.sum() == 0:
        raise ValueError("the input has no content tokens")


def head_features(
    attn,
    kinds,
    *,
    rows: str = "content",
    local_window: int = 1,
    max_offset: int = 3,
    local_windows: Sequence[int] = (1, 2, 4),
    k_mass: float = 0.9,
    dist_bins: Sequence[int] = DEFAULT_DIST_BINS,
    block_tau: float = 1.5,
    entropy_smoothing: float = 1e-4,
    n_jobs: int | None = None,
    chunk_mb: float = 4.0,
    blocks: bool = True,
) -> HeadFeatureTable:
    """All per-head features of one input, for every head at once.

    Parameters
    ----------
    attn : ``[L, H, T, T]`` attention (``[H, T, T]`` and ``[T, T]`` are promoted); any
        float dtype, converted to float64.
    kinds : token masks of length ``T``: a :class:`~bertgeom.tokens.TokenKinds`, or what holds one
        (the trace's ``encoded`` input, the trace itself).
    rows : ``"content"`` (default; docs/methods.md §2) or ``"all"`` (Clark's 1/n convention).
    local_window : ``w`` of ``bwd``/``fwd`` (Bonino m_bwd(w), m_fwd(w)) and of the
        ``|i-j| > w`` rule of the block graph.  Default 1.
    max_offset : offsets ``±2..±max_offset`` get their own ``off_m{k}``/``off_p{k}`` column.
    local_windows : windows of the ``local_{w}`` masses (Guan-style G5).
    k_mass : mass of the k90 statistic (0.9).
    dist_bins : lower edges of the |offset| histogram bins beyond 0 (G6).
    block_tau : block-graph edge threshold in units of the uniform weight, ``S_ij >= tau / n_v``
        (see docs/methods.md §10).
    entropy_smoothing : Clark's smoothing ``a = (1-eps) A + eps/n`` (1e-4).
    n_jobs : threads over chunks of heads (numpy releases the GIL).  None = ``min(4, cpu_count)``.
    chunk_mb : target float64 size of one chunk of heads, each chunk processed fully
        vectorised.  Small chunks stay in cache: 4 MB (2-3 heads at T=427, ~30 at T=128)
        was fastest in ``bench/bench_head_features.py``; peak extra memory is ~6x this per thread.
    blocks : compute the block-graph features (:data:`BLOCK_FEATURES`, a connected-components pass
        over every head's thresholded map: about a third of the time at T=427). ``False`` leaves
        them NaN and every other feature unchanged (precompute skips them when none is stored).
    """
    kinds = TokenKinds.of(kinds)
    a4 = _as_lhtt(attn)
    L, H, T, _ = a4.shape
    _check_params(kinds, T, local_window, max_offset, local_windows, dist_bins, k_mass)
    N = L * H
    plan = _Plan.build(kinds, rows, local_window, max_offset, local_windows, k_mass, dist_bins, block_tau,
                       entropy_smoothing)
    flat = a4.reshape(N, T, T)

    if n_jobs is None:
        n_jobs = min(4, os.cpu_count() or 1)
    per_head_mb = 8.0 * T * T / 2**20
    n_chunks = max(1, math.ceil(N * per_head_mb / max(chunk_mb, 1e-9)))
    if n_jobs > 1:
        n_chunks = max(n_chunks, min(n_jobs, N))
    bounds = np.linspace(0, N, n_chunks + 1).round().astype(int)
    spans = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    exact32 = flat.dtype in (np.float32, np.float16)

    def run(span):
        a, b = span
        X = np.ascontiguousarray(flat[a:b], dtype=np.float64)
        src = np.asarray(flat[a:b], dtype=np.float32) if exact32 else None
        return _chunk_features(X, plan, src, blocks)

    if n_jobs > 1 and len(spans) > 1:
        with ThreadPoolExecutor(max_workers=min(n_jobs, len(spans))) as ex:
            parts = list(ex.map(run, spans))
    else:
        parts = [run(s) for s in spans]

    names = feature_names(plan)
    out = {n: np.concatenate([p[0][n] for p in parts]).reshape(L, H) for n in names}
    hist = np.concatenate([p[1] for p in parts]).reshape(L, H, -1)
    k90 = np.concatenate([p[2] for p in parts]).reshape(L, H, plan.nq)
    top_col = np.concatenate([p[3] for p in parts]).reshape(L, H)
    params = dict(
        rows=rows,
        local_window=plan.w,
        max_offset=max_offset,
        local_windows=tuple(int(x) for x in local_windows),
        k_mass=k_mass,
        dist_bins=tuple(plan.edges),
        block_tau=block_tau,
        entropy_smoothing=plan.eps,
        n_tokens=T,
        n_content=plan.nv,
        n_query_rows=plan.nq,
        n_segments=kinds.n_segments,
    )
    return HeadFeatureTable(
        features=out,
        hist=hist,
        hist_labels=hist_labels(plan.edges),
        k90_rows=k90.astype(np.int32),
        top_col=top_col,
        params=params,
    )


@dataclass
class _Plan:
    """Token-level constants shared by all heads of one input."""

    T: int
    q: np.ndarray  # query rows (int positions)
    v: np.ndarray  # content positions
    vmask: np.ndarray
    cmask: np.ndarray  # content indicator as float
    nonq: np.ndarray  # rows that are not query rows
    pos: np.ndarray  # 0..T-1 as float
    cls_cols: np.ndarray
    sep_cols: np.ndarray
    punct_cols: np.ndarray
    other_rows: np.ndarray  # real rows that are not [SEP] (Clark's "other -> [SEP]")
    n_real: int  # real tokens ([CLS], [SEP] and content; not [PAD]): the keys of a row
    seg_ind: list  # per segment: float indicator of its content keys
    segq: np.ndarray  # segment of each query row
    two_seg: bool
    Dc: np.ndarray  # [T, T] |j - i| on content keys, 0 elsewhere
    EU: float  # mean |j - i| over query rows and all keys (uniform expectation)
    EUc: float  # same over content keys
    cls_row: int  # -1 if none
    w: int
    max_offset: int
    local_windows: tuple
    edges: list
    k_mass: float
    tau: float
    eps: float

    @property
    def nq(self) -> int:
        return int(self.q.size)

    @property
    def nv(self) -> int:
        return int(self.v.size)

    @classmethod
    def build(cls, kinds, rows, local_window, max_offset, local_windows, k_mass, dist_bins, block_tau, eps):
        T = kinds.n
        content = kinds.content
        seg = kinds.segment_ids
        q = np.flatnonzero(_query_rows(kinds, rows))
        v = np.flatnonzero(content)
        ar = np.arange(T)
        D = np.abs(ar[None, :] - ar[:, None]).astype(np.float64)
        cls_rows = np.flatnonzero(kinds.is_cls)
        return cls(
            T=T,
            q=q,
            v=v,
            vmask=content.copy(),
            cmask=content.astype(np.float64),
            nonq=np.setdiff1d(ar, q),
            pos=ar.astype(np.float64),
            cls_cols=cls_rows,
            sep_cols=np.flatnonzero(kinds.is_sep),
            punct_cols=np.flatnonzero(kinds.is_punct),
            other_rows=np.flatnonzero(~kinds.is_sep & kinds.real),
            n_real=int(kinds.real.sum()),
            seg_ind=[(content & (seg == s)).astype(np.float64) for s in range(int(seg.max()) + 1)],
            segq=seg[q],
            two_seg=kinds.n_segments >= 2,
            Dc=D * content[None, :],
            EU=float(D[q].mean()),
            EUc=float(D[np.ix_(q, v)].mean()),
            cls_row=int(cls_rows[0]) if cls_rows.size else -1,
            w=int(local_window),
            max_offset=int(max_offset),
            local_windows=tuple(int(x) for x in local_windows),
            edges=list(dist_bins),
            k_mass=float(k_mass),
            tau=float(block_tau),
            eps=float(eps),
        )


def _offset_profile(X: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Mean over the query rows ``q`` of the mass at each offset ``d = j - i``.

    Returns ``[n, 2T-1]`` with offset ``d`` at column ``T-1+d``.  The maps are sheared
    into a zero buffer (row ``i`` shifted right by ``T-1-i``) with one strided copy, so
    every diagonal becomes a column and one reduction gives all ``2T-1`` diagonal sums.
    """
    n, T, _ = X.shape
    Z = np.zeros((n, T, 2 * T))
    s0, s1, s2 = Z.strides
    W = as_strided(Z[:, :, T - 1:], shape=(n, T, T), strides=(s0, s1 - s2, s2))
    W[...] = X
    nonq = np.setdiff1d(np.arange(T), q)
    if nonq.size:
        W[:, nonq, :] = 0.0
    return Z.sum(axis=1)[:, : 2 * T - 1] / q.size


# ----------------------------------------------------------------------------------------
# The feature registry: one function per feature, registered once with its documentation
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadFeature:
    """One registered per-head feature: ``compute(chunk) -> [n]`` for a chunk of ``n`` heads
    (a :class:`_Chunk`), documented by ``doc``. A *family* (``names`` given) is a set of features
    whose names depend on the parameters (``off_m2``, ``local_4``…): ``names(plan)`` lists them,
    ``compute`` returns ``{name: [n]}`` and ``doc`` is a function of the name."""

    name: str
    doc: MetricDoc | Callable[[str], MetricDoc]
    compute: Callable[["_Chunk"], np.ndarray | dict[str, np.ndarray]]
    names: Callable[["_Plan"], list[str]] | None = None

    def names_for(self, plan: "_Plan") -> list[str]:
        return [self.name] if self.names is None else self.names(plan)


#: Every per-head feature, in the column order of :class:`HeadFeatureTable` (registration order).
HEAD_FEATURES: dict[str, HeadFeature] = {}
#: ``name -> MetricDoc`` of every registered feature with a fixed name (row means are over the
#: query rows Q, content tokens by default; n = T real tokens, V content positions, n_v = |V|,
#: C = [CLS], S = [SEP] positions, P = punctuation positions). Families: :func:`feature_doc`.
FEATURE_DOCS: dict[str, MetricDoc] = {}


def head_feature(name: str, doc: MetricDoc | tuple[str, str, str]):
    """Register ``fn(chunk) -> [n]`` as the per-head feature ``name`` with its ``(label, formula,
    source)``: :func:`head_features` computes it for every head, and the pages, the stored
    precompute columns and :data:`FEATURE_DOCS` read it from :data:`HEAD_FEATURES`. ``fn`` reads
    the attention and shared intermediates from the :class:`_Chunk` (vectorised over heads)."""

    def register(fn):
        if name in HEAD_FEATURES:
            raise ValueError(f"a head feature named {name!r} is registered already")
        HEAD_FEATURES[name] = HeadFeature(name, MetricDoc(*doc), fn)
        FEATURE_DOCS[name] = HEAD_FEATURES[name].doc
        return fn

    return register


def head_feature_family(name: str, names: Callable[["_Plan"], list[str]], doc: Callable[[str], MetricDoc]):
    """Register ``fn(chunk) -> {name: [n]}``: features whose names come from the parameters."""

    def register(fn):
        if name in HEAD_FEATURES:
            raise ValueError(f"a head feature named {name!r} is registered already")
        HEAD_FEATURES[name] = HeadFeature(name, doc, fn, names)
        return fn

    return register


def feature_names(plan: "_Plan") -> list[str]:
    """The columns of a :class:`HeadFeatureTable` computed with ``plan``'s parameters."""
    return [n for feat in HEAD_FEATURES.values() for n in feat.names_for(plan)]


class _Chunk:
    """A contiguous float64 stack ``X`` of ``n`` maps ``[n, T, T]`` and what its features share.

    Per-row quantities are computed on all ``T`` rows (cheaper than copying the query rows out)
    and reduced over the query rows ``p.q``; every shared intermediate is computed once, on first
    use, and is small (``[n, T]`` or ``[n, 2T-1]``: the large temporaries are freed inside).
    ``sort_src`` is the same chunk in its original float32 dtype if it had one (sorting it is exact
    and faster). ``chunk[name]`` is a feature's value (computed on demand, then kept).
    """

    def __init__(self, X: np.ndarray, p: "_Plan", sort_src: np.ndarray | None = None, blocks: bool = True):
        self.X, self.p, self.sort_src, self.blocks = X, p, sort_src, blocks
        self.n, self.T = X.shape[0], X.shape[1]
        self.values: dict[str, np.ndarray] = {}
        self._family_of = {m: f for f in HEAD_FEATURES.values() if f.names is not None for m in f.names_for(p)}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.values:
            family = self._family_of.get(name)
            if family is not None:
                self.values.update(family.compute(self))
            else:
                self.values[name] = HEAD_FEATURES[name].compute(self)
        return self.values[name]

    def zeros(self) -> np.ndarray:
        return np.zeros(self.n)

    # ---- helpers ---------------------------------------------------------------------------
    def qmean(self, per_row: np.ndarray) -> np.ndarray:  # [n, T] -> [n]
        return per_row[:, self.p.q].mean(axis=1)

    def key_mass(self, cols: np.ndarray) -> np.ndarray:  # [n, T]: sum over a few key columns
        return self.X[:, :, cols].sum(axis=-1) if cols.size else np.zeros((self.n, self.T))

    def offset_mass(self, lo: int | None, hi: int | None) -> np.ndarray:
        """Mean mass at offsets ``lo <= j - i <= hi`` (``None``: unbounded), from the offset profile."""
        T = self.T
        lo = -(T - 1) if lo is None else max(lo, -(T - 1))
        hi = T - 1 if hi is None else min(hi, T - 1)
        if hi < lo:
            return np.zeros(self.n)
        return self.profile[:, T - 1 + lo: T + hi].sum(axis=1)

    # ---- shared intermediates --------------------------------------------------------------
    @cached_property
    def sep_rows(self) -> np.ndarray:
        """``[n, T]`` mass of each row on the [SEP] keys."""
        return self.key_mass(self.p.sep_cols)

    @cached_property
    def content_rows(self) -> np.ndarray:
        """``[n, |Q|]`` mass of each query row on the content keys (computed directly, not as the
        row sum minus the specials, so that the G7 renormalisation stays accurate on sink heads)."""
        return np.einsum("nij,j->ni", self.X, self.p.cmask)[:, self.p.q]

    @cached_property
    def profile(self) -> np.ndarray:
        """``[n, 2T-1]``: :func:`_offset_profile` (offset ``d`` at column ``T-1+d``)."""
        return _offset_profile(self.X, self.p.q)

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.arange(-(self.T - 1), self.T, dtype=np.float64)

    @cached_property
    def hist(self) -> np.ndarray:
        """``[n, B]`` the signed distance histogram (:func:`hist_labels`), far-backward first."""
        p = self.p
        pos_bins = [(e, p.edges[k + 1] - 1 if k + 1 < len(p.edges) else None) for k, e in enumerate(p.edges)]
        cols = [self.offset_mass(None if hi is None else -hi, -e) for e, hi in reversed(pos_bins)]
        cols.append(self["self"])
        cols += [self.offset_mass(e, hi) for e, hi in pos_bins]
        return np.stack(cols, axis=-1)

    @cached_property
    def content_rows_renormalised(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """G7's rows with content mass (``ok [n, |Q|]``), their content mass (1 elsewhere) and how
        many there are per head (at least 1)."""
        ok = self.content_rows > 1e-12
        return ok, np.where(ok, self.content_rows, 1.0), np.maximum(ok.sum(axis=1), 1)

    @cached_property
    def column_means(self) -> np.ndarray:
        """``[n, T]`` mean over the query rows of each key column."""
        X, p = self.X, self.p
        colsum = X.sum(axis=1)
        if p.nonq.size:
            colsum -= X[:, p.nonq, :].sum(axis=1)
        return colsum / p.nq

    @cached_property
    def content_columns_sorted(self) -> np.ndarray:
        return np.sort(self.column_means[:, self.p.v], axis=1)

    @cached_property
    def top_col(self) -> np.ndarray:
        """``[n]`` the 0-based key of the strongest column."""
        return self.column_means.argmax(axis=1)

    @cached_property
    def entropy_rows(self) -> np.ndarray:
        """``[n, T]`` ``sum_j a ln a`` of each row, Clark's smoothing ``a = (1-eps) A + eps/T``."""
        buf = np.multiply(self.X, 1.0 - self.p.eps)
        buf += self.p.eps / self.T
        lg = np.log(buf)
        return np.einsum("nij,nij->ni", buf, lg)

    @cached_property
    def sorted_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(max [n, T] float64, k90 [n, |Q|])`` from one sort of every row.

        ``k90 = T - #{m : sum of the m smallest entries <= total - k_mass * total}``."""
        p, T = self.p, self.T
        srt = np.sort(self.X if self.sort_src is None else self.sort_src, axis=-1)
        top = srt[..., -1].astype(np.float64)
        asc = np.cumsum(srt[:, p.q], axis=-1, dtype=np.float64)
        del srt
        total = asc[..., -1:]
        budget = total - total * (p.k_mass * (1.0 - _K90_TOL))
        return top, np.clip(T - (asc <= budget).sum(axis=-1), 1, T)

    @cached_property
    def block_graph(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(block_mass, block_inner, n_blocks)`` (:func:`_block_features`; NaN with ``blocks=False``)."""
        if not self.blocks:
            return tuple(np.full(self.n, np.nan) for _ in range(3))
        return _block_features(self.X, self.p)


def _chunk_features(X: np.ndarray, p: "_Plan", sort_src: np.ndarray | None = None, blocks: bool = True):
    """Every registered feature of one chunk of heads, with its histogram, per-row k90 and strongest
    column: ``(features {name: [n]}, hist [n, B], k90 [n, |Q|], top_col [n])``."""
    chunk = _Chunk(X, p, sort_src, blocks)
    features = {name: chunk[name] for name in feature_names(p)}
    return features, chunk.hist, chunk.sorted_rows[1], chunk.top_col


# ---- 1. offsets and windows (from the offset profile) --------------------------------------
@head_feature("self", ("attention to self", "mean_i A[i,i]",
                       "Clark 2019 §3.1 ('self'); Guan-style r_0; Bonino m_self (reconstruction)"))
def _self(c: _Chunk):
    return c.offset_mass(0, 0)


@head_feature("prev", ("attention to previous token", "mean_i A[i,i-1]", "Clark 2019 §3.1 ('left'); Guan-style r_-1"))
def _prev(c: _Chunk):
    return c.offset_mass(-1, -1)


@head_feature("next", ("attention to next token", "mean_i A[i,i+1]", "Clark 2019 §3.1 ('right'); Guan-style r_+1"))
def _next(c: _Chunk):
    return c.offset_mass(1, 1)


def _offset_doc(name: str) -> MetricDoc:
    k, sign = int(name[5:]), "-" if name[4] == "m" else "+"
    return MetricDoc(f"offset {sign}{k} mass", f"mean_i A[i,i{sign}{k}]", "Guan-style G4 r_k (reconstruction)")


@head_feature_family("off", lambda p: [f"off_{s}{k}" for k in range(2, p.max_offset + 1) for s in "mp"], _offset_doc)
def _offsets(c: _Chunk):
    out = {}
    for k in range(2, c.p.max_offset + 1):
        out[f"off_m{k}"] = c.offset_mass(-k, -k)
        out[f"off_p{k}"] = c.offset_mass(k, k)
    return out


@head_feature("bwd", ("backward window mass", "mean_i sum_{1<=i-j<=w} A[i,j]  (w = local_window)",
                      "Bonino m_bwd(w) (reconstruction; docs/methods.md §3.4)"))
def _bwd(c: _Chunk):
    return c.offset_mass(-c.p.w, -1)


@head_feature("fwd", ("forward window mass", "mean_i sum_{1<=j-i<=w} A[i,j]  (w = local_window)",
                      "Bonino m_fwd(w) (reconstruction; docs/methods.md §3.4)"))
def _fwd(c: _Chunk):
    return c.offset_mass(1, c.p.w)


@head_feature("bwd_all", ("mass on all earlier tokens", "mean_i sum_{j<i} A[i,j]", "Bonino M_bwd (reconstruction)"))
def _bwd_all(c: _Chunk):
    return c.offset_mass(None, -1)


@head_feature("fwd_all", ("mass on all later tokens", "mean_i sum_{j>i} A[i,j]", "Bonino M_fwd (reconstruction)"))
def _fwd_all(c: _Chunk):
    return c.offset_mass(1, None)


def _local_doc(name: str) -> MetricDoc:
    w = int(name[6:])
    return MetricDoc(f"local mass |j-i|<={w}", f"mean_i sum_{{|j-i|<={w}}} A[i,j]",
                     "Guan-style G5 loc(w) (reconstruction)")


@head_feature_family("local", lambda p: [f"local_{w}" for w in p.local_windows], _local_doc)
def _local(c: _Chunk):
    return {f"local_{w}": c.offset_mass(-w, w) for w in c.p.local_windows}


# ---- 2. key-type masses ---------------------------------------------------------------------
@head_feature("cls", ("attention to [CLS]", "mean_i A[i,C]", "Clark 2019 §3.2; = Kovaleva [CLS] score"))
def _cls(c: _Chunk):
    return c.qmean(c.key_mass(c.p.cls_cols))


@head_feature("sep", ("attention to [SEP]", "mean_i sum_{j in S} A[i,j]", "Clark 2019 §3.2"))
def _sep(c: _Chunk):
    return c.qmean(c.sep_rows)


@head_feature("sep_max", ("strongest [SEP] column", "max_{s in S} mean_i A[i,s]",
                          "Kovaleva 2019 §4.4 (get_max_target_weight)"))
def _sep_max(c: _Chunk):
    return c.column_means[:, c.p.sep_cols].max(axis=1) if c.p.sep_cols.size else c.zeros()


@head_feature("punct", ("attention to punctuation", "mean_i sum_{j in P} A[i,j]  (P = '.' ',' by default)",
                        "Clark 2019 §3.2"))
def _punct(c: _Chunk):
    return c.qmean(c.key_mass(c.p.punct_cols))


@head_feature("special", ("special-token mass", "cls + sep = mean_i (A[i,C] + sum_{j in S} A[i,j])",
                          "Bonino m_spec (reconstruction)"))
def _special(c: _Chunk):
    return c["cls"] + c["sep"]


@head_feature("sink", ("sink mass", "cls + sep + punct", "Guan-style G9 (reconstruction)"))
def _sink(c: _Chunk):
    return c["special"] + c["punct"]


@head_feature("content_mass", ("mass on content keys", "mean_i sum_{j in V} A[i,j]", "ours"))
def _content_mass(c: _Chunk):
    return c.content_rows.mean(axis=1)


@head_feature("sep_from_sep", ("[SEP] -> [SEP]", "mean_{i in S} sum_{j in S} A[i,j]  (0 without [SEP])",
                               "Clark 2019 §3.2 (real |S| as denominator)"))
def _sep_from_sep(c: _Chunk):
    return c.sep_rows[:, c.p.sep_cols].mean(axis=1) if c.p.sep_cols.size else c.zeros()


@head_feature("sep_from_other", ("other -> [SEP]", "mean_{i not in S} sum_{j in S} A[i,j]  ([CLS] row counts as other)",
                                 "Clark 2019 §3.2"))
def _sep_from_other(c: _Chunk):
    p = c.p
    return c.sep_rows[:, p.other_rows].mean(axis=1) if (p.sep_cols.size and p.other_rows.size) else c.zeros()


# ---- 3. entropy (Clark smoothing), focus and columns ----------------------------------------
@head_feature("entropy", ("row entropy (nats)", "mean_i -sum_j a ln a,  a = 0.9999 A[i,j] + 0.0001/n",
                          "Clark 2019 §3.3"))
def _entropy(c: _Chunk):
    return -c.entropy_rows[:, c.p.q].mean(axis=1)


@head_feature("entropy_norm", ("normalised entropy", "entropy / ln n",
                               "Guan-style G8 (reconstruction); Bonino H-hat (reconstruction, ln n instead of ln n_v)"))
def _entropy_norm(c: _Chunk):
    return c["entropy"] / math.log(c.T) if c.T > 1 else c.zeros()


@head_feature("entropy_cls", ("[CLS]-row entropy (nats)", "-sum_j a ln a on the [CLS] row (smoothed as above)",
                              "Clark 2019 §3.3"))
def _entropy_cls(c: _Chunk):
    return -c.entropy_rows[:, c.p.cls_row] if c.p.cls_row >= 0 else c.zeros()


@head_feature("max_weight", ("head confidence (mean max weight)", "mean_i max_j A[i,j]  (rows: content tokens)",
                             "Voita 2019 (arXiv:1905.09418) §4 'confidence' (their EOS excluded: here the "
                             "[CLS]/[SEP] rows); also Clark 2019 §3.3's text"))
def _max_weight(c: _Chunk):
    return c.qmean(c.sorted_rows[0])


@head_feature("verticality", ("strongest column", "max_j mean_i A[i,j]  (any key)", "Kovaleva 2019 §4.1 'vertical'"))
def _verticality(c: _Chunk):
    return c.column_means.max(axis=1)


@head_feature("col_content", ("strongest content column", "max_{j in V} mean_i A[i,j]",
                              "Bonino m_col (reconstruction)"))
def _col_content(c: _Chunk):
    return c.content_columns_sorted[:, -1]


@head_feature("col3_content", ("top-3 content columns", "sum of the 3 largest mean_i A[i,j], j in V",
                               "Bonino m_col3 (reconstruction)"))
def _col3_content(c: _Chunk):
    return c.content_columns_sorted[:, -min(3, c.p.nv):].sum(axis=1)


# ---- 4. distances ---------------------------------------------------------------------------
@head_feature("mean_dist", ("mean attended distance", "mean_i sum_j A[i,j] |j-i|", "Guan-style G1 (reconstruction)"))
def _mean_dist(c: _Chunk):
    return c.profile @ np.abs(c.offsets)


@head_feature("mean_dist_norm", ("distance / uniform",
                                 "mean_dist / E_U,  E_U = mean_i mean_j |j-i| over the rows averaged  "
                                 "((n^2-1)/(3n) over all rows)",
                                 "Guan-style G2 (reconstruction)"))
def _mean_dist_norm(c: _Chunk):
    return c["mean_dist"] / c.p.EU if c.p.EU > 0 else c.zeros()


@head_feature("signed_offset", ("mean signed offset", "mean_i sum_j A[i,j] (j-i)  (<0 looks back)",
                                "Guan-style G3 (reconstruction)"))
def _signed_offset(c: _Chunk):
    return c.profile @ c.offsets


@head_feature("signed_offset_norm", ("signed offset / uniform", "signed_offset / E_U",
                                     "Guan-style G3 (reconstruction)"))
def _signed_offset_norm(c: _Chunk):
    return c["signed_offset"] / c.p.EU if c.p.EU > 0 else c.zeros()


@head_feature("mean_dist_content", (
    "content-only distance",
    "mean_i sum_{j in V} A[i,j]|j-i| / sum_{j in V} A[i,j]  (rows with content mass > 0)",
    "Guan-style G7 (reconstruction)"))
def _mean_dist_content(c: _Chunk):
    ok, denom, safe = c.content_rows_renormalised
    dist_rows = np.einsum("nij,ij->ni", c.X, c.p.Dc)[:, c.p.q]
    return np.where(ok, dist_rows / denom, 0.0).sum(axis=1) / safe


@head_feature("mean_dist_content_norm", ("content distance / uniform", "mean_dist_content / mean_i mean_{j in V} |j-i|",
                                         "Guan-style G7 (reconstruction)"))
def _mean_dist_content_norm(c: _Chunk):
    return c["mean_dist_content"] / c.p.EUc if c.p.EUc > 0 else c.zeros()


@head_feature("signed_offset_content", ("content-only signed offset",
                                        "mean_i sum_{j in V} A[i,j](j-i) / sum_{j in V} A[i,j]",
                                        "Guan-style G7 (reconstruction)"))
def _signed_offset_content(c: _Chunk):
    p = c.p
    ok, denom, safe = c.content_rows_renormalised
    poscont_rows = np.einsum("nij,j->ni", c.X, p.pos * p.cmask)[:, p.q]
    qpos = p.q.astype(np.float64)[None, :]
    return np.where(ok, (poscont_rows - qpos * c.content_rows) / denom, 0.0).sum(axis=1) / safe


# ---- 5. k90, blocks, segments, alignment ------------------------------------------------------
@head_feature("k90_median", ("k90 median",
                             "median_i k90_i,  k90_i = min #largest entries of row i with sum >= 0.9 * row sum",
                             "Bonino §2.5 metastable-state size (after Ramsauer et al.)"))
def _k90_median(c: _Chunk):
    return np.median(c.sorted_rows[1], axis=1).astype(np.float64)


@head_feature("k90_mean", ("k90 mean", "mean_i k90_i", "Bonino §2.5 (compute_size_of_metastable_state_k averages)"))
def _k90_mean(c: _Chunk):
    return c.sorted_rows[1].mean(axis=1)


@head_feature("k90_frac", ("k90 median / real tokens", "median_i k90_i / n  (kappa; n = real tokens, [CLS] and [SEP] "
                           "included: the keys k90_i counts among)", "Bonino kappa (reconstruction)"))
def _k90_frac(c: _Chunk):
    # k90_i counts a row's largest entries among all its n real keys ([CLS] and [SEP] too), so the share
    # divides by n: at most 1 by definition (dividing by n_v, the content tokens, gave up to n / n_v)
    return c["k90_median"] / c.p.n_real


@head_feature("block_mass", (
    "block mass",
    "mean_{i in V} sum_{j in comp(i), j!=i, |i-j|>w} A[i,j]; comp = connected components (>=3 nodes) of "
    "{S=(A+A^T)/2 >= tau/n_v, |i-j|>w} on V, tau = 1.5",
    "Bonino m_block (reconstruction; docs/methods.md §3.4, §10)"))
def _block_mass(c: _Chunk):
    return c.block_graph[0]


@head_feature("block_inner", (
    "within-block mass",
    "mean_{i in V} sum_{j in comp(i)} A[i,j]  (same components, self and neighbours included)",
    "ours; Kovaleva 'block' proxy"))
def _block_inner(c: _Chunk):
    return c.block_graph[1]


@head_feature("n_blocks", ("number of blocks", "#components with >= 3 members (graph of block_mass)",
                           "Bonino n_blocks (reconstruction)"))
def _n_blocks(c: _Chunk):
    return c.block_graph[2]


@head_feature("segment_mass", ("own-segment content mass",
                               "mean_i sum_{j in V, seg(j)=seg(i)} A[i,j]; 0 for single-segment inputs",
                               "Kovaleva 2019 §4.1 'block' (reconstruction)"))
def _segment_mass(c: _Chunk):
    p = c.p
    if not p.two_seg:
        return c.zeros()
    own = np.zeros((c.n, p.nq))
    for s, ind in enumerate(p.seg_ind):  # one pass per segment (2 for a sentence pair)
        rows_s = p.segq == s
        if rows_s.any():
            own[:, rows_s] = np.einsum("nij,j->ni", c.X, ind)[:, p.q[rows_s]]
    return own.mean(axis=1)


@head_feature("delta_row", (
    "row alignment over all keys δ_row",
    "|| sum_{i in Q} A[i,:]/||A[i,:]|| || / |Q|  (query rows Q, every key; not the Subspace page's delta_A, "
    "which drops the keys outside the token set)",
    "Bonino delta_row (reconstruction; docs/methods.md §3.4)"))
def _delta_row(c: _Chunk):
    X, q, nq = c.X, c.p.q, c.p.nq
    norms = np.sqrt(np.einsum("nij,nij->ni", X, X))
    inv = np.zeros_like(norms)
    nz = norms[:, q] > 0
    inv[:, q] = np.divide(1.0, norms[:, q], out=np.zeros((c.n, nq)), where=nz)
    return np.linalg.norm(np.einsum("nij,ni->nj", X, inv), axis=1) / nq


@head_feature("template_residual", ("template residual", "max(0, 1 - (sink + self + prev + next))",
                                    "Kovaleva 2019 §4.1 heterogeneous proxy (reconstruction)"))
def _template_residual(c: _Chunk):
    return np.maximum(0.0, 1.0 - (c["sink"] + c["self"] + c["prev"] + c["next"]))


#: The features of the block graph (:func:`head_features` ``blocks=False`` leaves them NaN).
BLOCK_FEATURES = ("block_mass", "block_inner", "n_blocks")


def _block_features(X: np.ndarray, p: _Plan):
    """Bonino block mass / n_blocks for a stack of heads via one connected-components call.

    Nodes are (head, position) pairs, so the graphs of all heads form one block-diagonal
    sparse graph and ``scipy.sparse.csgraph.connected_components`` labels every head's
    components at once.  Only content positions get edges.  The within-component mass is
    a batched matmul of the maps with a one-hot component matrix.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n, T, _ = X.shape
    nv, w = p.nv, p.w
    if nv < 3:
        z = np.zeros(n)
        return z, z.copy(), z.copy()
    thr = (2.0 * p.tau / nv) * (1.0 - 1e-9)  # on A_ij + A_ji, i.e. S_ij >= tau / n_v
    # an edge needs max(A_ij, A_ji) >= thr / 2: find those candidates, then check the sum
    hh, ii, jj = np.nonzero(X >= thr / 2)
    keep = p.vmask[ii] & p.vmask[jj] & (np.abs(ii - jj) > w)
    hh, ii, jj = hh[keep], ii[keep], jj[keep]
    keep = (X[hh, ii, jj] + X[hh, jj, ii]) >= thr
    hh, ii, jj = hh[keep], ii[keep], jj[keep]
    base = hh * T
    g = coo_matrix((np.ones(hh.size, dtype=np.int8), (base + ii, base + jj)), shape=(n * T, n * T))
    _, lab = connected_components(g, directed=False)
    sizes = np.bincount(lab)
    lab = lab.reshape(n, T)
    comp_head = np.empty(sizes.size, dtype=np.int64)
    comp_head[lab] = np.arange(n)[:, None]  # components never span two heads
    big = sizes >= 3
    n_blocks = np.bincount(comp_head[big], minlength=n).astype(np.float64)
    if not big.any():
        z = np.zeros(n)
        return z, z.copy(), n_blocks
    # number the big components 0..K_h-1 inside each head; everything else -> K (dummy)
    big_ids = np.flatnonzero(big)
    hb = comp_head[big_ids]
    order = np.argsort(hb, kind="stable")
    counts = np.bincount(hb, minlength=n)
    starts = np.cumsum(counts) - counts
    local = np.empty(big_ids.size, dtype=np.int64)
    local[order] = np.arange(big_ids.size) - starts[hb[order]]
    K = int(counts.max())
    loc_of_comp = np.full(sizes.size, K, dtype=np.int64)
    loc_of_comp[big_ids] = local
    node = loc_of_comp[lab]  # [n, T]
    in_big = node < K
    if K <= 48:
        onehot = np.zeros((n, T, K + 1))
        np.put_along_axis(onehot, node[..., None], 1.0, axis=-1)
        M = X @ onehot  # [n, T, K+1]: mass of row i on each component
        inner_rows = np.take_along_axis(M, node[..., None], axis=-1)[..., 0]
    else:  # many small blocks: explicit same-component mask
        same = node[:, :, None] == node[:, None, :]
        inner_rows = np.where(same, X, 0.0).sum(axis=-1)
    inner_rows = np.where(in_big, inner_rows, 0.0)
    # subtract the local part |i - j| <= w (a few diagonals) to get the block mass
    local_rows = np.zeros((n, T))
    ar = np.arange(T)
    for d in range(-w, w + 1):
        j = ar + d
        ok = (j >= 0) & (j < T)
        i_ok, j_ok = ar[ok], j[ok]
        same_d = (node[:, i_ok] == node[:, j_ok]) & in_big[:, i_ok]
        local_rows[:, i_ok] += np.where(same_d, X[:, i_ok, j_ok], 0.0)
    v = p.v
    inner = inner_rows[:, v].sum(axis=1) / nv
    block = (inner_rows - local_rows)[:, v].sum(axis=1) / nv
    return block, inner, n_blocks



# ----------------------------------------------------------------------------------------
# Class-mean maps (docs/methods.md §5)
# ----------------------------------------------------------------------------------------


def _zero_mask(kinds: TokenKinds, mode: str) -> np.ndarray:
    """Positions whose rows and columns are zeroed (padding always; see :func:`bertgeom.attention.kept_tokens`)."""
    if mode == "none":
        return kinds.is_pad.copy()
    if mode not in ZERO_MODES:
        raise ValueError("mode must be 'first_sep', 'special' or 'none'")
    return ~kept_tokens(kinds.is_sep, mode) | kinds.is_pad


def class_mean_maps(
    attn_list: Sequence[np.ndarray],
    kinds_list: Sequence[TokenKinds] | TokenKinds,  # or encoded inputs (anything TokenKinds.of reads)
    *,
    theta: float = 0.3,
    mode: str = "first_sep",
    dtype=np.float64,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Bonino et al.'s class-mean attention (docs/methods.md §5).

    For each sample ``A`` (``[L, H, T, T]``, all of equal ``T``): zero the rows and columns
    from the first [SEP] on (``mode="first_sep"``, the code's ``A[:, s:] = 0; A[s:, :] = 0``,
    which also drops [PAD]; [CLS] is kept), or only [SEP]/[PAD] (``mode="special"``).
    Returns ``(mean, theta_sum, n)``: the mean of the zeroed maps over samples, the **sum**
    (not mean, as in the code) of ``A * 1[A >= theta]``, and the number of samples.
    """
    attn_list = list(attn_list)
    if not attn_list:
        raise ValueError("no samples")
    if not isinstance(kinds_list, (list, tuple)):
        kinds_list = [kinds_list] * len(attn_list)
    kinds_list = [TokenKinds.of(k) for k in kinds_list]
    if len(kinds_list) != len(attn_list):
        raise ValueError("need one TokenKinds per sample")
    shape = _as_lhtt(attn_list[0]).shape
    total = np.zeros(shape, dtype=dtype)
    tsum = np.zeros(shape, dtype=dtype)
    for a, k in zip(attn_list, kinds_list):
        a4 = _as_lhtt(a)
        if a4.shape != shape:
            raise ValueError(f"all samples must have shape {shape}, got {a4.shape}")
        if k.n != shape[-1]:
            raise ValueError("TokenKinds length does not match the maps")
        keep = (~_zero_mask(k, mode)).astype(dtype)
        z = a4.astype(dtype) * keep[:, None] * keep[None, :]
        total += z
        tsum += z * (z >= theta)
    return total / len(attn_list), tsum, len(attn_list)
