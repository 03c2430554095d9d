"""Rank collapse per layer (Dong, Cordonnier & Loukas 2021): how far each layer's token matrix is from
the rank-1 matrices whose rows are all equal, for the full model and with its paths cut.

Dong et al. define the residual ``res(X) = X - 1 xᵀ`` with ``x = argmin_x ‖X - 1 xᵀ‖`` and prove that
pure self-attention (no skip connections, no MLPs) drives ``‖res‖`` to 0 doubly exponentially with depth.
What their plots measure (the authors' plotting code, read for this reconstruction) is

    ratio(X) = ‖X - 1 meanᵀ‖ / ‖X‖,   mean = the mean of the token rows,

in the composite norm ``‖M‖_{1,∞} = sqrt(‖M‖₁ ‖M‖_∞)`` (``‖M‖₁`` the largest column absolute sum,
``‖M‖_∞`` the largest row absolute sum), per hidden state ``0 … L``. The row mean is the exact
minimiser of the Frobenius distance, not of the ``‖·‖_{1,∞}`` one, so with ``norm="l1_inf"`` (theirs,
the default) ``x`` is their choice, and with ``norm="fro"`` it is the true optimum. Either way a matrix
``1 xᵀ`` (every row the same, rank 1) has ratio 0, and ratio ≤ 1 in the Frobenius norm.

The path ablations (Dong et al. §4, their surgery modules) run through :func:`bertgeom.forward.run_forward`
(``remove_skips``, ``remove_mlps``): *SAN* = attention only (no skips, MLPs replaced by the identity),
*SAN + skip* = no MLPs, *SAN + MLP* = no skips, *transformer* = the model as trained; LayerNorms are
kept in every variant. Published check (bert-base-cased, 32 wiki_bio texts of 128 tokens): the full
model goes from 0.687 at the embeddings to 0.310 after layer 12, attention alone is ~0 by layer 6
(``tools/reproduce_rank_collapse.py``).

Vectorised: one call reduces ``[..., n, d]`` stacks (every layer, every input of a padded batch,
with a row mask) without a Python loop over layers or tokens.

References
----------
* Dong, Cordonnier & Loukas 2021, *Attention is Not All You Need: Pure Attention Loses Rank Doubly
  Exponentially with Depth* (arXiv:2103.03404): §2 (the residual and the composite norm), §4 and
  Figure 2 (path ablations on BERT); github.com/twistedcubic/attention-rank-collapse (plotting code).
* docs/methods.md, "Rank collapse per layer".
"""

from __future__ import annotations

import numpy as np

from bertgeom.metricdocs import MetricDoc, doc_table

__all__ = ["NORMS", "PATH_VARIANTS", "COLLAPSE_DOCS", "relative_residual", "rank_collapse_curves"]

#: The norms a ratio can be measured in.
NORMS = ("l1_inf", "fro")

#: Dong et al.'s four variants: name -> (run_forward's remove_skips, remove_mlps), in their order.
PATH_VARIANTS: dict[str, tuple[bool, bool]] = {
    "full": (False, False),
    "no_mlp": (False, True),
    "no_skip": (True, False),
    "attention_only": (True, True),
}

#: What each variant's curve means (label, formula, source).
COLLAPSE_DOCS: dict[str, MetricDoc] = doc_table({
    "ratio": ("relative residual from rank 1",
              "‖X − 1 meanᵀ‖_{1,∞} / ‖X‖_{1,∞},  ‖M‖_{1,∞} = sqrt(max col abs sum · max row abs sum)",
              "Dong 2021 (arXiv:2103.03404) §2; the ratio their plotting code draws "
              "(reconstruction of the normalisation)"),
    "full": ("full model (transformer)", "ratio of hidden state l, the model as trained",
             "Dong 2021 (arXiv:2103.03404) §4, Fig. 2"),
    "no_mlp": ("without MLPs (SAN + skip)", "ratio with every feed-forward block replaced by the identity",
               "Dong 2021 (arXiv:2103.03404) §4, Fig. 2"),
    "no_skip": ("without skips (SAN + MLP)", "ratio with both residual connections of every layer removed",
                "Dong 2021 (arXiv:2103.03404) §4, Fig. 2"),
    "attention_only": ("attention only (SAN)", "ratio without skips and without MLPs (LayerNorms kept)",
                       "Dong 2021 (arXiv:2103.03404) §2 (the theorem's setting), Fig. 2"),
})


def _matrix_norm(M: np.ndarray, norm: str) -> np.ndarray:
    """``‖M‖`` over the last two axes (rows = tokens)."""
    if norm == "fro":
        return np.sqrt((M * M).sum(axis=(-2, -1)))
    a = np.abs(M)
    one = a.sum(axis=-2).max(axis=-1)  # largest column absolute sum
    inf = a.sum(axis=-1).max(axis=-1)  # largest row absolute sum
    return np.sqrt(one * inf)


def relative_residual(X, row_mask=None, *, norm: str = "l1_inf") -> np.ndarray:
    """``‖X − 1 meanᵀ‖ / ‖X‖`` of every token matrix in ``X [..., n, d]`` (float64 inside).

    ``row_mask [..., n]`` (bool, broadcast against ``X``'s leading axes) keeps the rows that count
    (real tokens of a padded batch, a token set); the mean and both norms read those rows only.
    ``norm``: ``"l1_inf"`` (Dong et al.'s composite norm, the default) or ``"fro"`` (Frobenius, where
    the row mean is the exact optimum). A matrix without rows, or all zeros, gives NaN."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {norm!r}")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim < 2:
        raise ValueError(f"X must be [..., n, d], got shape {X.shape}")
    if row_mask is None:
        w = np.ones(X.shape[:-1], dtype=np.float64)
    else:
        w = np.broadcast_to(np.asarray(row_mask, dtype=bool), X.shape[:-1]).astype(np.float64)
    count = w.sum(axis=-1, keepdims=True)[..., None]  # [..., 1, 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (X * w[..., None]).sum(axis=-2, keepdims=True) / count
        kept = X * w[..., None]
        res = (X - mean) * w[..., None]
        out = _matrix_norm(res, norm) / _matrix_norm(kept, norm)
    return np.where(np.isfinite(out), out, np.nan)


def rank_collapse_curves(loaded, input_ids, attention_mask=None, *, row_mask=None, norm: str = "l1_inf",
                         variants=tuple(PATH_VARIANTS)) -> dict[str, np.ndarray]:
    """The ratio of every hidden state ``0 … L`` for each of ``variants`` (keys of :data:`PATH_VARIANTS`):
    ``name -> [L+1]`` for ``input_ids [T]``, ``[B, L+1]`` for a batch ``[B, T]``.

    One forward per variant through :func:`bertgeom.forward.run_forward` (fp32, no autograd), all
    inputs of the batch at once; ``row_mask [T]`` or ``[B, T]`` picks the rows that count (default:
    the real tokens of ``attention_mask``)."""
    from bertgeom.forward import run_forward

    ids = np.asarray(input_ids)
    single = ids.ndim == 1
    ids2 = ids.reshape(-1, ids.shape[-1])
    real = (np.ones(ids2.shape, dtype=bool) if attention_mask is None
            else np.asarray(attention_mask).reshape(ids2.shape).astype(bool))
    rows = real if row_mask is None else (np.broadcast_to(np.asarray(row_mask, dtype=bool), ids2.shape) & real)
    out = {}
    for name in variants:
        if name not in PATH_VARIANTS:
            raise ValueError(f"unknown variant {name!r}: one of {', '.join(PATH_VARIANTS)}")
        no_skips, no_mlps = PATH_VARIANTS[name]
        fw = run_forward(loaded, ids2, real.astype(np.int64), hidden_states=True, attention="sdpa"
                         if (no_skips or no_mlps) else "auto", remove_skips=no_skips, remove_mlps=no_mlps)
        hs = fw.arrays()["hidden_states"]  # [B, L+1, T, D]
        ratio = relative_residual(hs, rows[:, None, :], norm=norm)  # [B, L+1]
        out[name] = ratio[0] if single else ratio
    return out
