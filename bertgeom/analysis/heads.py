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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from bertgeom.tokens import TokenKinds
from bertgeom.attention import ZERO_MODES, kept_tokens
from bertgeom.metricdocs import MetricDoc, doc_table
from bertgeom.tables import head_label
from numpy.lib.stride_tricks import as_strided

__all__ = [
    "HeadFeatureTable",
    "head_features",
    "class_mean_maps",
    "FEATURE_DOCS",
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

# name -> (short label, formula, source).  Row means are over the query rows Q
# (content tokens by default); n = T = number of real tokens, V = content positions,
# n_v = |V|, C = [CLS], S = [SEP] positions, P = punctuation positions.
FEATURE_DOCS: dict[str, MetricDoc] = doc_table({
    "self": (
        "attention to self",
        "mean_i A[i,i]",
        "Clark 2019 §3.1 ('self'); Guan-style r_0; Bonino m_self (reconstruction)",
    ),
    "prev": ("attention to previous token", "mean_i A[i,i-1]", "Clark 2019 §3.1 ('left'); Guan-style r_-1"),
    "next": ("attention to next token", "mean_i A[i,i+1]", "Clark 2019 §3.1 ('right'); Guan-style r_+1"),
    "bwd": (
        "backward window mass",
        "mean_i sum_{1<=i-j<=w} A[i,j]  (w = local_window)",
        "Bonino m_bwd(w) (reconstruction; docs/methods.md §3.4)",
    ),
    "fwd": (
        "forward window mass",
        "mean_i sum_{1<=j-i<=w} A[i,j]  (w = local_window)",
        "Bonino m_fwd(w) (reconstruction; docs/methods.md §3.4)",
    ),
    "bwd_all": ("mass on all earlier tokens", "mean_i sum_{j<i} A[i,j]", "Bonino M_bwd (reconstruction)"),
    "fwd_all": ("mass on all later tokens", "mean_i sum_{j>i} A[i,j]", "Bonino M_fwd (reconstruction)"),
    "cls": ("attention to [CLS]", "mean_i A[i,C]", "Clark 2019 §3.2; = Kovaleva [CLS] score"),
    "sep": ("attention to [SEP]", "mean_i sum_{j in S} A[i,j]", "Clark 2019 §3.2"),
    "sep_max": ("strongest [SEP] column", "max_{s in S} mean_i A[i,s]", "Kovaleva 2019 §4.4 (get_max_target_weight)"),
    "punct": ("attention to punctuation", "mean_i sum_{j in P} A[i,j]  (P = '.' ',' by default)", "Clark 2019 §3.2"),
    "special": (
        "special-token mass",
        "cls + sep = mean_i (A[i,C] + sum_{j in S} A[i,j])",
        "Bonino m_spec (reconstruction)",
    ),
    "sink": ("sink mass", "cls + sep + punct", "Guan-style G9 (reconstruction)"),
    "content_mass": ("mass on content keys", "mean_i sum_{j in V} A[i,j]", "ours"),
    "sep_from_sep": (
        "[SEP] -> [SEP]",
        "mean_{i in S} sum_{j in S} A[i,j]  (0 without [SEP])",
        "Clark 2019 §3.2 (real |S| as denominator)",
    ),
    "sep_from_other": (
        "other -> [SEP]",
        "mean_{i not in S} sum_{j in S} A[i,j]  ([CLS] row counts as other)",
        "Clark 2019 §3.2",
    ),
    "entropy": ("row entropy (nats)", "mean_i -sum_j a ln a,  a = 0.9999 A[i,j] + 0.0001/n", "Clark 2019 §3.3"),
    "entropy_norm": (
        "normalised entropy",
        "entropy / ln n",
        "Guan-style G8 (reconstruction); Bonino H-hat (reconstruction, ln n instead of ln n_v)",
    ),
    "entropy_cls": (
        "[CLS]-row entropy (nats)",
        "-sum_j a ln a on the [CLS] row (smoothed as above)",
        "Clark 2019 §3.3",
    ),
    "max_weight": ("focus (max weight)", "mean_i max_j A[i,j]", "from Clark 2019 §3.3's text"),
    "verticality": ("strongest column", "max_j mean_i A[i,j]  (any key)", "Kovaleva 2019 §4.1 'vertical'"),
    "col_content": ("strongest content column", "max_{j in V} mean_i A[i,j]", "Bonino m_col (reconstruction)"),
    "col3_content": (
        "top-3 content columns",
        "sum of the 3 largest mean_i A[i,j], j in V",
        "Bonino m_col3 (reconstruction)",
    ),
    "mean_dist": ("mean attended distance", "mean_i sum_j A[i,j] |j-i|", "Guan-style G1 (reconstruction)"),
    "mean_dist_norm": (
        "distance / uniform",
        "mean_dist / E_U,  E_U = mean_i mean_j |j-i|  (= (n^2-1)/(3n) over all rows)",
        "Guan-style G2 (reconstruction)",
    ),
    "signed_offset": (
        "mean signed offset",
        "mean_i sum_j A[i,j] (j-i)  (<0 looks back)",
        "Guan-style G3 (reconstruction)",
    ),
    "signed_offset_norm": ("signed offset / uniform", "signed_offset / E_U", "Guan-style G3 (reconstruction)"),
    "mean_dist_content": (
        "content-only distance",
        "mean_i sum_{j in V} A[i,j]|j-i| / sum_{j in V} A[i,j]  (rows with content mass > 0)",
        "Guan-style G7 (reconstruction)",
    ),
    "mean_dist_content_norm": (
        "content distance / uniform",
        "mean_dist_content / mean_i mean_{j in V} |j-i|",
        "Guan-style G7 (reconstruction)",
    ),
    "signed_offset_content": (
        "content-only signed offset",
        "mean_i sum_{j in V} A[i,j](j-i) / sum_{j in V} A[i,j]",
        "Guan-style G7 (reconstruction)",
    ),
    "k90_median": (
        "k90 median",
        "median_i k90_i,  k90_i = min #largest entries of row i with sum >= 0.9 * row sum",
        "Bonino §2.5 metastable-state size (after Ramsauer et al.)",
    ),
    "k90_mean": ("k90 mean", "mean_i k90_i", "Bonino §2.5 (compute_size_of_metastable_state_k averages)"),
    "k90_frac": ("k90 median / real tokens", "median_i k90_i / n_v  (kappa)", "Bonino kappa (reconstruction)"),
    "block_mass": (
        "block mass",
        "mean_{i in V} sum_{j in comp(i), j!=i, |i-j|>w} A[i,j]; comp = connected components (>=3 nodes) of "
        "{S=(A+A^T)/2 >= tau/n_v, |i-j|>w} on V, tau = 1.5",
        "Bonino m_block (reconstruction; docs/methods.md §3.4, §10)",
    ),
    "block_inner": (
        "within-block mass",
        "mean_{i in V} sum_{j in comp(i)} A[i,j]  (same components, self and neighbours included)",
        "ours; Kovaleva 'block' proxy",
    ),
    "n_blocks": (
        "number of blocks",
        "#components with >= 3 members (graph of block_mass)",
        "Bonino n_blocks (reconstruction)",
    ),
    "segment_mass": (
        "own-segment content mass",
        "mean_i sum_{j in V, seg(j)=seg(i)} A[i,j]; 0 for single-segment inputs",
        "Kovaleva 2019 §4.1 'block' (reconstruction)",
    ),
    "delta_row": (
        "row alignment over all keys δ_row",
        "|| sum_{i in Q} A[i,:]/||A[i,:]|| || / |Q|  (query rows Q, every key; not the Subspace page's delta_A, "
        "which drops the keys outside the token set)",
        "Bonino delta_row (reconstruction; docs/methods.md §3.4)",
    ),
    "template_residual": (
        "template residual",
        "max(0, 1 - (sink + self + prev + next))",
        "Kovaleva 2019 §4.1 heterogeneous proxy (reconstruction)",
    ),
})


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
    """(label, formula, source) for any feature name, including generated ones."""
    if name in FEATURE_DOCS:
        return FEATURE_DOCS[name]
    if name.startswith("off_m") or name.startswith("off_p"):
        k = int(name[5:])
        sign = "-" if name[4] == "m" else "+"
        return MetricDoc(f"offset {sign}{k} mass", f"mean_i A[i,i{sign}{k}]", "Guan-style G4 r_k (reconstruction)")
    if name.startswith("local_"):
        w = int(name[6:])
        return MetricDoc(f"local mass |j-i|<={w}", f"mean_i sum_{{|j-i|<={w}}} A[i,j]",
                         "Guan-style G5 loc(w) (reconstruction)")
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

    names = _ordered_names(max_offset, local_windows)
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


def _chunk_features(X: np.ndarray, p: _Plan, sort_src: np.ndarray | None = None, blocks: bool = True):
    """Features of a contiguous float64 stack ``X`` of ``n`` maps ``[n, T, T]``.

    Per-row quantities are computed on all ``T`` rows (cheaper than copying the query
    rows out) and reduced over the query rows ``p.q`` at the end.  ``sort_src`` is the
    same chunk in its original float32 dtype if it had one (sorting it is exact and faster).
    """
    n, T, _ = X.shape
    q, nq, nv = p.q, p.nq, p.nv
    f: dict[str, np.ndarray] = {}

    def qmean(per_row: np.ndarray) -> np.ndarray:  # [n, T] -> [n]
        return per_row[:, q].mean(axis=1)

    def key_mass(cols: np.ndarray) -> np.ndarray:  # [n, T]: sum over a few key columns
        return X[:, :, cols].sum(axis=-1) if cols.size else np.zeros((n, T))

    # ---- 1. key-type masses per row --------------------------------------------------
    sep_r = key_mass(p.sep_cols)
    f["cls"] = qmean(key_mass(p.cls_cols))
    f["sep"] = qmean(sep_r)
    f["punct"] = qmean(key_mass(p.punct_cols))
    f["special"] = f["cls"] + f["sep"]
    f["sink"] = f["special"] + f["punct"]
    # content mass computed directly (not as rowsum minus specials) so that the G7
    # renormalisation stays accurate on sink heads whose content mass is tiny
    cont_r = np.einsum("nij,j->ni", X, p.cmask)[:, q]
    poscont_r = np.einsum("nij,j->ni", X, p.pos * p.cmask)[:, q]
    f["content_mass"] = cont_r.mean(axis=1)
    f["sep_from_sep"] = sep_r[:, p.sep_cols].mean(axis=1) if p.sep_cols.size else np.zeros(n)
    f["sep_from_other"] = (
        sep_r[:, p.other_rows].mean(axis=1) if (p.sep_cols.size and p.other_rows.size) else np.zeros(n)
    )
    if p.two_seg:
        own = np.zeros((n, nq))
        for s, ind in enumerate(p.seg_ind):  # one pass per segment (2 for a sentence pair)
            rows_s = p.segq == s
            if rows_s.any():
                own[:, rows_s] = np.einsum("nij,j->ni", X, ind)[:, q[rows_s]]
        f["segment_mass"] = own.mean(axis=1)
    else:
        f["segment_mass"] = np.zeros(n)

    # ---- 2. offsets, windows, histogram and distances from the offset profile ----------
    prof = _offset_profile(X, q)  # [n, 2T-1]

    def s_range(lo: int | None, hi: int | None) -> np.ndarray:
        lo = -(T - 1) if lo is None else max(lo, -(T - 1))
        hi = T - 1 if hi is None else min(hi, T - 1)
        if hi < lo:
            return np.zeros(n)
        return prof[:, T - 1 + lo: T + hi].sum(axis=1)

    f["self"], f["prev"], f["next"] = s_range(0, 0), s_range(-1, -1), s_range(1, 1)
    for k in range(2, p.max_offset + 1):
        f[f"off_m{k}"] = s_range(-k, -k)
        f[f"off_p{k}"] = s_range(k, k)
    w = p.w
    f["bwd"] = s_range(-w, -1)
    f["fwd"] = s_range(1, w)
    f["bwd_all"] = s_range(None, -1)
    f["fwd_all"] = s_range(1, None)
    for lw in p.local_windows:
        f[f"local_{lw}"] = s_range(-lw, lw)
    pos_bins = [(e, p.edges[k + 1] - 1 if k + 1 < len(p.edges) else None) for k, e in enumerate(p.edges)]
    hist_cols = [s_range(None if hi is None else -hi, -e) for e, hi in reversed(pos_bins)]
    hist_cols.append(f["self"])
    hist_cols += [s_range(e, hi) for e, hi in pos_bins]
    hist = np.stack(hist_cols, axis=-1)
    offs = np.arange(-(T - 1), T, dtype=np.float64)
    f["mean_dist"] = prof @ np.abs(offs)
    f["signed_offset"] = prof @ offs
    prof = None  # the [n, 2T-1] profile is no longer needed: free it before the next block
    f["mean_dist_norm"] = f["mean_dist"] / p.EU if p.EU > 0 else np.zeros(n)
    f["signed_offset_norm"] = f["signed_offset"] / p.EU if p.EU > 0 else np.zeros(n)
    # content-only (G7): renormalise each row over the content keys
    distc_r = np.einsum("nij,ij->ni", X, p.Dc)[:, q]
    qpos = q.astype(np.float64)[None, :]
    okc = cont_r > 1e-12
    denom = np.where(okc, cont_r, 1.0)
    safe = np.maximum(okc.sum(axis=1), 1)
    f["mean_dist_content"] = np.where(okc, distc_r / denom, 0.0).sum(axis=1) / safe
    f["mean_dist_content_norm"] = f["mean_dist_content"] / p.EUc if p.EUc > 0 else np.zeros(n)
    f["signed_offset_content"] = np.where(okc, (poscont_r - qpos * cont_r) / denom, 0.0).sum(axis=1) / safe

    # ---- 3. columns: verticality, strongest content column, [SEP] column ----------------
    colsum = X.sum(axis=1)
    if p.nonq.size:
        colsum -= X[:, p.nonq, :].sum(axis=1)
    colmean = colsum / nq
    f["sep_max"] = colmean[:, p.sep_cols].max(axis=1) if p.sep_cols.size else np.zeros(n)
    top_col = colmean.argmax(axis=1)
    f["verticality"] = colmean.max(axis=1)
    cv = np.sort(colmean[:, p.v], axis=1)
    f["col_content"] = cv[:, -1]
    f["col3_content"] = cv[:, -min(3, nv):].sum(axis=1)

    # ---- 4. entropy (Clark smoothing) ---------------------------------------------------
    buf = np.multiply(X, 1.0 - p.eps)
    buf += p.eps / T
    lg = np.log(buf)
    ent_rows = np.einsum("nij,nij->ni", buf, lg)
    del buf, lg
    f["entropy"] = -ent_rows[:, q].mean(axis=1)
    f["entropy_norm"] = f["entropy"] / math.log(T) if T > 1 else np.zeros(n)
    f["entropy_cls"] = -ent_rows[:, p.cls_row] if p.cls_row >= 0 else np.zeros(n)

    # ---- 5. sorted rows: max weight and k90 ---------------------------------------------
    # k90 = T - #{m : sum of the m smallest entries <= total - k_mass * total}
    srt = np.sort(X if sort_src is None else sort_src, axis=-1)
    f["max_weight"] = qmean(srt[..., -1].astype(np.float64))
    asc = np.cumsum(srt[:, q], axis=-1, dtype=np.float64)
    del srt
    total = asc[..., -1:]
    budget = total - total * (p.k_mass * (1.0 - _K90_TOL))
    k90 = np.clip(T - (asc <= budget).sum(axis=-1), 1, T)
    del asc
    f["k90_median"] = np.median(k90, axis=1).astype(np.float64)
    f["k90_mean"] = k90.mean(axis=1)
    f["k90_frac"] = f["k90_median"] / nv

    # ---- 6. row alignment: cone index of the query rows / |Q| -----------------------------
    norms = np.sqrt(np.einsum("nij,nij->ni", X, X))
    inv = np.zeros_like(norms)
    nz = norms[:, q] > 0
    inv[:, q] = np.divide(1.0, norms[:, q], out=np.zeros((n, nq)), where=nz)
    f["delta_row"] = np.linalg.norm(np.einsum("nij,ni->nj", X, inv), axis=1) / nq

    # ---- 7. block graph -------------------------------------------------------------------
    if blocks:
        f["block_mass"], f["block_inner"], f["n_blocks"] = _block_features(X, p)
    else:
        f["block_mass"] = f["block_inner"] = f["n_blocks"] = np.full(n, np.nan)

    f["template_residual"] = np.maximum(0.0, 1.0 - (f["sink"] + f["self"] + f["prev"] + f["next"]))
    return f, hist, k90, top_col


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


def _ordered_names(max_offset: int, local_windows: Sequence[int]) -> list[str]:
    names = ["self", "prev", "next"]
    for k in range(2, max_offset + 1):
        names += [f"off_m{k}", f"off_p{k}"]
    names += ["bwd", "fwd", "bwd_all", "fwd_all"] + [f"local_{int(w)}" for w in local_windows]
    names += ["cls", "sep", "sep_max", "punct", "special", "sink", "content_mass", "sep_from_sep", "sep_from_other"]
    names += ["entropy", "entropy_norm", "entropy_cls", "max_weight", "verticality", "col_content", "col3_content"]
    names += ["mean_dist", "mean_dist_norm", "signed_offset", "signed_offset_norm"]
    names += ["mean_dist_content", "mean_dist_content_norm", "signed_offset_content"]
    names += ["k90_median", "k90_mean", "k90_frac", "block_mass", "block_inner", "n_blocks", "segment_mass"]
    names += ["delta_row", "template_residual"]
    return names



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
