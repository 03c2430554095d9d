"""Cone index, token-set selection, information streams and attention entropies.

Cone index (in the official code's form): for the rows ``x_1..x_m`` of a matrix,

    I_cone(X) = || sum_i x_i / ||x_i||_2 ||_2,        0 <= I_cone <= m,

and the normalised index ``I_hat = I_cone / m = sqrt(mean_ij cos(x_i, x_j))`` in [0, 1]. Reference
values: ``I = m`` for vectors on one ray, ``I = sqrt(m)`` for orthogonal vectors (and about
``sqrt(m)`` for an i.i.d. isotropic cloud). ``I >> sqrt(m)`` signals a narrow cone.

Streams: for each layer, the cone index of the layer input, of each head's output
``Z_h = A_h V_h``, of the post-attention sublayer ``U = LN_1(X + Z W_O^T + b_O)``, of the layer
output, and of the official code's "multihead output" (faithful, see :func:`layer_streams`).

Entropies: the official code's "von Neumann" and 20-bin Shannon entropies, reproduced exactly,
plus properly normalised variants.

Everything here is numpy; torch tensors are accepted and converted. Where it sits: an analysis of
one trace's hidden states and attention; the cone sets and the Cone Index page read it.

References
----------
Bonino, Ghione & Cirrincione 2025, *The geometry of BERT* (arXiv:2502.12033): the cone index, its
streams and the attention entropies; its released code (distance_cones_analysis,
von_neumann_entropy_attentions, shannon_entropy_attentions).
docs/methods.md §9 (cone index, streams, entropies).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bertgeom.metricdocs import BONINO_2025, MetricDoc, doc_table

from bertgeom.attention import (
    attention_from_scores,
    correct_attention,
    faithful_qkv,
    merge_heads,
    project_qkv,
    to_numpy,
)
from bertgeom.tokens import TOKEN_SETS

__all__ = [
    "cone_index",
    "isotropic_reference",
    "token_mask",
    "select_rows",
    "layer_norm",
    "activation",
    "STREAM_DOCS",
    "StreamCones",
    "layer_streams",
    "stream_cone_indices",
    "hidden_state_cone_curve",
    "ENTROPY_DOCS",
    "von_neumann_entropy_code",
    "von_neumann_entropy_l1",
    "singular_value_entropy",
    "shannon_value_entropy_code",
    "mean_row_entropy",
    "attention_entropies",
]


def _scalar_or_array(a: np.ndarray):
    a = np.asarray(a)
    return float(a) if a.ndim == 0 else a


# -------------------------------------------------------------------------------------------
# Cone index
# -------------------------------------------------------------------------------------------
def cone_index(X, mask=None, *, normalized: bool = False, raw: bool = False):
    """Cone index of the rows of ``X``, batched over leading dimensions.

    Parameters
    ----------
    X : array_like ``[..., m, d]`` (numpy or torch). Rows are the vectors.
    mask : optional bool array broadcastable to ``X.shape[:-1]``; rows with ``False`` are left
        out (e.g. padding). Lets sequences of different length share one batched call.
    normalized : divide by the number of rows counted, ``m`` (``raw=False``), giving
        ``I_hat in [0, 1]``; with ``raw=True`` divide by ``sum_i ||x_i||`` instead (also in [0, 1],
        equal to ``I/m`` when all norms are equal).
    raw : if True use the paper's unnormalised form ``|| sum_i x_i ||`` (rows are not scaled to
        unit length). Default False = the official code's form (rows L2-normalised first).

    Zero rows have no direction: they contribute nothing and are not counted in ``m``. When no
    row is counted, ``I = 0`` and the normalised index is ``nan``.

    Returns a float for a single matrix, else an array of shape ``X.shape[:-2]`` (float64).
    The computation never materialises a normalised copy of ``X`` (the weights ``1/||x_i||`` are applied
    inside one batched ``einsum``), so it scales to ``[N, L+1, T, d]`` stacks.
    """
    X = to_numpy(X)
    if X.ndim < 2:
        raise ValueError(f"cone_index expects [..., m, d], got shape {X.shape}")
    sq = np.einsum("...i,...i->...", X, X)  # [..., m], no full-size temporary
    norms = np.sqrt(sq.astype(np.float64, copy=False))
    nonzero = norms > 0
    if mask is not None:
        mask = np.asarray(to_numpy(mask) if hasattr(mask, "detach") else mask).astype(bool)
        sel = nonzero & np.broadcast_to(mask, norms.shape)
    else:
        sel = nonzero
    if raw:
        w = sel.astype(X.dtype)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(sel, 1.0 / np.where(nonzero, norms, 1.0), 0.0).astype(X.dtype)
    s = np.einsum("...m,...md->...d", w, X).astype(np.float64)  # [..., d]
    I = np.sqrt(np.einsum("...i,...i->...", s, s))
    if normalized:
        denom = (np.where(sel, norms, 0.0).sum(-1)) if raw else sel.sum(-1).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            I = np.where(denom > 0, I / np.where(denom > 0, denom, 1.0), np.nan)
    return _scalar_or_array(I)


def isotropic_reference(m) -> np.ndarray | float:
    """Reference cone index ``sqrt(m)`` of ``m`` orthogonal rows (≈ an i.i.d. isotropic cloud)."""
    return _scalar_or_array(np.sqrt(np.asarray(m, dtype=np.float64)))


# -------------------------------------------------------------------------------------------
# Token sets
# -------------------------------------------------------------------------------------------
def token_mask(
    attention_mask,
    token_set: str = "content",
    *,
    special_tokens_mask=None,
    cls_position: int = 0,
) -> np.ndarray:
    """Boolean row selection ``[..., T]`` for a token set (see :data:`TOKEN_SETS`).

    ``attention_mask``: ``[..., T]``, 1 for real tokens (incl. [CLS]/[SEP]), 0 for padding.
    ``special_tokens_mask``: optional ``[..., T]``, 1 for special tokens (as returned by a HF
    tokenizer with ``return_special_tokens_mask=True``). If omitted, the standard single-segment
    layout ``[CLS] t_1 .. t_n [SEP] [PAD]*`` is assumed: [CLS] is at ``cls_position`` and [SEP] is
    the last valid position.
    """
    if token_set not in TOKEN_SETS:
        raise ValueError(f"token_set must be one of {list(TOKEN_SETS)}, got {token_set!r}")
    am = np.asarray(to_numpy(attention_mask) if hasattr(attention_mask, "detach") else attention_mask)
    valid = am.astype(bool)
    if token_set == "all":
        return np.ones_like(valid, dtype=bool)
    T = valid.shape[-1]
    pos = np.arange(T)
    if special_tokens_mask is not None:
        stm = special_tokens_mask
        stm = np.asarray(to_numpy(stm) if hasattr(stm, "detach") else stm).astype(bool)
        special = stm | ~valid
    else:
        last_valid = T - 1 - np.argmax(valid[..., ::-1], axis=-1)  # [...]
        special = ~valid | (pos == cls_position) | (pos == last_valid[..., None])
    content = valid & ~special
    if token_set == "content":
        return content
    return content | (valid & (pos == cls_position))


def select_rows(X, mask) -> np.ndarray:
    """Rows of one matrix ``X [T, d]`` selected by ``mask [T]`` (``None`` = all rows)."""
    X = to_numpy(X)
    if mask is None:
        return X
    return X[np.asarray(mask, dtype=bool)]


# -------------------------------------------------------------------------------------------
# Small numpy building blocks for the streams
# -------------------------------------------------------------------------------------------
def layer_norm(x: np.ndarray, gamma=None, beta=None, eps: float = 1e-12) -> np.ndarray:
    """LayerNorm over the last axis (biased variance, as torch)."""
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def activation(name: str, x: np.ndarray) -> np.ndarray:
    """The MLP activations used by BERT-family configs."""
    from scipy.special import erf

    name = (name or "gelu").lower()
    if name == "gelu":
        return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python"):
        if name == "gelu_python":
            return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name in ("silu", "swish"):
        return x / (1.0 + np.exp(-x))
    if name == "tanh":
        return np.tanh(x)
    raise ValueError(f"unsupported hidden_act {name!r}")


# -------------------------------------------------------------------------------------------
# Streams
# -------------------------------------------------------------------------------------------
STREAM_DOCS: dict[str, MetricDoc] = doc_table({
    "layer_input": (
        "Layer input",
        "X = hidden_states[l]",
        f"{BONINO_2025}; docs/methods.md §9 (code: distance_cones_analysis)",
    ),
    "head_output": (
        "Head output (true)",
        "Z_h = A_h V_h, V_h = X W_v[s,:]^T + b_v[s], A_h = the model's masked attention",
        f"{BONINO_2025}, corrected computation; docs/methods.md §9",
    ),
    "post_attention": (
        "Post-attention sublayer (multihead output, corrected)",
        "U = LN_1(X + [Z_0|..|Z_H-1] W_o^T + b_o) (HF attention.output)",
        f"{BONINO_2025}, corrected computation; docs/methods.md §9",
    ),
    "layer_output": (
        "Layer output",
        "Y = hidden_states[l+1] = LN_2(U + GELU(U W_1^T + b_1) W_2^T + b_2)",
        f"{BONINO_2025}; docs/methods.md §9 (code: distance_cones_analysis)",
    ),
    "multihead_faithful": (
        "Multihead output (official code)",
        "LayerNorm_{gamma=1,beta=0,eps=config.layer_norm_eps}(X + [Z'_0|..|Z'_H-1]), Z'_h from the faithful head "
        "computation (transposed slices X W[:, s], no bias, no mask); no W_o",
        f"{BONINO_2025}, official code; docs/methods.md §9 (code: distance_cones_analysis)",
    ),
    "head_output_faithful": (
        "Head output (official code)",
        "Z'_h = softmax(X W_q[:,s] (X W_k[:,s])^T / sqrt(d_h)) X W_v[:,s]",
        "official code's hand-made attention; docs/methods.md §8.3 (code: distance_cones_analysis)",
    ),
})

#: The official code builds its fresh ``torch.nn.LayerNorm`` (gamma = 1, beta = 0) with the model
#: config's ``layer_norm_eps``, not torch's default 1e-5; :func:`layer_streams` therefore reads the
#: layer's own eps (``lw.ln1_eps``, the same config value).


def layer_streams(
    X,
    lw,
    *,
    attention_mask=None,
    attention=None,
    faithful: bool = True,
    layer_output: bool = True,
) -> dict[str, np.ndarray]:
    """All streams of one layer for one sequence (float64 arrays).

    Parameters
    ----------
    X : ``[T, d]`` layer input (``hidden_states[l]``).
    lw : :class:`bertgeom.weights.LayerWeights` of that layer.
    attention_mask : optional ``[T]`` (1 valid, 0 pad) used for the true attention.
    attention : optional ``[H, T, T]`` true attention (e.g. ``outputs.attentions[l][b]``); if
        omitted it is recomputed from the weights (biases, mask).
    faithful : also compute the official code's head outputs and "multihead output".
    layer_output : recompute the layer output through the MLP (``Y``).

    Returns a dict with ``layer_input [T,d]``, ``attention [H,T,T]``, ``head_output [H,T,dh]``,
    ``post_attention [T,d]``, optionally ``layer_output [T,d]``, ``attention_faithful``,
    ``head_output_faithful [H,T,dh]`` and ``multihead_faithful [T,d]``.
    """
    X = to_numpy(X).astype(np.float64)
    out: dict[str, np.ndarray] = {"layer_input": X}
    pre = getattr(lw, "placement", "post") == "pre"
    # project_qkv reads what the heads read (a pre-LN layer's LN_1(X), rotary positions applied)
    _, _, V = project_qkv(X, lw, bias=True)
    if attention is None:
        A = correct_attention(X, lw, attention_mask=attention_mask)
    else:
        A = to_numpy(attention).astype(np.float64)
    Z = A @ V  # [H, T, dh]
    out["attention"] = A
    out["head_output"] = Z
    attn_sum = X + merge_heads(Z) @ lw.W_o.T.astype(np.float64) + lw.b_o
    # post-LN (BERT): the LayerNorm after the residual sum; pre-LN (ESM-2, ModernBERT): the residual sum
    # itself is the stream after attention, and each sub-block normalises its own input
    U = attn_sum if pre else layer_norm(attn_sum, lw.ln1_gamma, lw.ln1_beta, lw.ln1_eps)
    out["post_attention"] = U
    if layer_output:
        u_in = layer_norm(U, lw.ln2_gamma, lw.ln2_beta, lw.ln2_eps) if pre else U
        pre_act = u_in @ lw.W_1.T.astype(np.float64) + lw.b_1
        Hm = activation(lw.hidden_act, pre_act)
        if getattr(lw, "W_gate", None) is not None:  # ModernBERT's GLU: act(W_1 u) * (W_gate u)
            Hm = Hm * (u_in @ lw.W_gate.T.astype(np.float64))
        mlp = U + Hm @ lw.W_2.T.astype(np.float64) + lw.b_2
        out["layer_output"] = mlp if pre else layer_norm(mlp, lw.ln2_gamma, lw.ln2_beta, lw.ln2_eps)
    if faithful:
        Qf, Kf, Vf = faithful_qkv(X, lw)  # once (faithful_attention would project again)
        Af = attention_from_scores(Qf, Kf, lw.scaling)
        Zf = Af @ Vf
        out["attention_faithful"] = Af
        out["head_output_faithful"] = Zf
        out["multihead_faithful"] = layer_norm(X + merge_heads(Zf), eps=lw.ln1_eps)
    return out


@dataclass
class StreamCones:
    """Cone index of every stream per layer for one sequence.

    ``layer_input``, ``post_attention``, ``layer_output``, ``multihead_faithful``: ``[L]``;
    ``head_output``, ``head_output_faithful``: ``[L, H]``; ``hidden``: ``[L+1]`` (the curve
    ``I(hidden_states[l])``, l = 0..L, the official single-sequence plot); ``m``: rows counted.
    """

    layer_input: np.ndarray
    head_output: np.ndarray
    post_attention: np.ndarray
    layer_output: np.ndarray
    hidden: np.ndarray
    multihead_faithful: np.ndarray | None
    head_output_faithful: np.ndarray | None
    m: int
    normalized: bool
    raw: bool
    docs: dict = field(default_factory=lambda: dict(STREAM_DOCS))

    def as_dict(self) -> dict[str, np.ndarray]:
        return {
            k: v
            for k, v in {
                "layer_input": self.layer_input,
                "head_output": self.head_output,
                "post_attention": self.post_attention,
                "layer_output": self.layer_output,
                "multihead_faithful": self.multihead_faithful,
                "head_output_faithful": self.head_output_faithful,
                "hidden": self.hidden,
            }.items()
            if v is not None
        }


def stream_cone_indices(
    hidden_states,
    layer_weights,
    *,
    attention_mask=None,
    rows=None,
    attentions=None,
    faithful: bool = True,
    normalized: bool = False,
    raw: bool = False,
) -> StreamCones:
    """Cone index of each stream per layer for one sequence.

    ``hidden_states``: ``[L+1, T, d]`` (HF ``output_hidden_states`` for one batch item).
    ``layer_weights``: list of :class:`LayerWeights` (length L).
    ``attention_mask``: ``[T]`` for the true attention; ``rows``: ``[T]`` bool token set for the
    cone index (see :func:`token_mask`; ``None`` = all positions, the faithful choice).
    ``attentions``: optional ``[L, H, T, T]`` true attention (else recomputed).
    The "layer output" stream uses ``hidden_states[l+1]`` (the model's own output).
    """
    hs = to_numpy(hidden_states).astype(np.float64)
    L = len(layer_weights)
    if hs.shape[0] != L + 1:
        raise ValueError(f"hidden_states has {hs.shape[0]} entries, expected L+1 = {L + 1}")
    T = hs.shape[1]
    rmask = np.ones(T, bool) if rows is None else np.asarray(rows, dtype=bool)
    att = None if attentions is None else to_numpy(attentions)
    H = layer_weights[0].num_heads
    li, po, lo = np.zeros(L), np.zeros(L), np.zeros(L)
    ho = np.zeros((L, H))
    mhf = np.zeros(L) if faithful else None
    hof = np.zeros((L, H)) if faithful else None
    kw = dict(normalized=normalized, raw=raw)
    for l, lw in enumerate(layer_weights):
        s = layer_streams(
            hs[l],
            lw,
            attention_mask=attention_mask,
            attention=None if att is None else att[l],
            faithful=faithful,
            layer_output=False,
        )
        li[l] = cone_index(hs[l], rmask, **kw)
        ho[l] = cone_index(s["head_output"], rmask, **kw)
        po[l] = cone_index(s["post_attention"], rmask, **kw)
        lo[l] = cone_index(hs[l + 1], rmask, **kw)
        if faithful:
            mhf[l] = cone_index(s["multihead_faithful"], rmask, **kw)
            hof[l] = cone_index(s["head_output_faithful"], rmask, **kw)
    hidden = np.asarray(cone_index(hs, rmask, **kw))
    return StreamCones(
        layer_input=li,
        head_output=ho,
        post_attention=po,
        layer_output=lo,
        hidden=hidden,
        multihead_faithful=mhf,
        head_output_faithful=hof,
        m=int(rmask.sum()),
        normalized=normalized,
        raw=raw,
    )


def hidden_state_cone_curve(hidden_states, mask=None, *, normalized=False, raw=False):
    """``I(hidden_states[..., l, :, :])`` for every layer l (batched): ``[..., L+1]``.

    ``hidden_states``: ``[..., L+1, T, d]``; ``mask``: ``[..., T]`` row selection (broadcast over
    layers). Equivalent to the official single-sequence curve (keys -1..L-1 = x ticks 0..L).
    """
    hs = to_numpy(hidden_states)
    m = None
    if mask is not None:
        m = np.asarray(mask, dtype=bool)[..., None, :]
    return cone_index(hs, m, normalized=normalized, raw=raw)


# -------------------------------------------------------------------------------------------
# Entropies (see the module's References)
# -------------------------------------------------------------------------------------------
ENTROPY_DOCS: dict[str, MetricDoc] = doc_table({
    "vn_code": (
        "'von Neumann' entropy (official code)",
        "lambda = eig(A); p_i = |lambda_i| / sqrt(sum_j |lambda_j|^2); S = -sum_{p>0} p ln p",
        f"{BONINO_2025}; docs/methods.md §9 (code: von_neumann_entropy_attentions); L2 normalisation, sum p != 1",
    ),
    "vn_l1": (
        "Eigenvalue entropy (L1-normalised)",
        "p_i = |lambda_i| / sum_j |lambda_j|; S = -sum p ln p",
        "our addition; docs/methods.md §9",
    ),
    "sv_entropy": (
        "Singular-value (spectral) entropy",
        "p_i = sigma_i^2 / sum_j sigma_j^2; S = -sum p ln p",
        "our addition; docs/methods.md §9",
    ),
    "shannon_code": (
        "Shannon entropy of attention values (official code)",
        "20 equal-width bins of all n^2 entries over [min, max] (pandas.cut); p_b = count_b / n^2; "
        "H = -sum p_b ln p_b",
        f"{BONINO_2025}; docs/methods.md §9 (code: shannon_entropy_attentions)",
    ),
    "row_entropy": (
        "Mean row entropy",
        "mean over valid queries i of -sum_{j valid} A_ij ln A_ij",
        "our addition; docs/methods.md §9",
    ),
})


def _plogp_sum(p: np.ndarray, axis=-1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -t.sum(axis)


def _eigvals(A: np.ndarray) -> np.ndarray:
    try:
        import torch

        with torch.no_grad():
            return torch.linalg.eigvals(torch.tensor(np.asarray(A))).numpy()
    except ImportError:  # pragma: no cover
        return np.linalg.eigvals(A)


def _svdvals(A: np.ndarray) -> np.ndarray:
    try:
        import torch

        with torch.no_grad():
            return torch.linalg.svdvals(torch.tensor(np.asarray(A))).numpy()
    except ImportError:  # pragma: no cover
        return np.linalg.svd(A, compute_uv=False)


def _entropy_of(w: np.ndarray, norm: str) -> np.ndarray:
    """``-sum p ln p`` with ``p = w / ||w||_2`` (``norm='l2'``) or ``w / sum w`` (``'l1'``)."""
    w = np.asarray(w, dtype=np.float64)
    z = np.sqrt((w**2).sum(-1, keepdims=True)) if norm == "l2" else w.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(z > 0, w / np.where(z > 0, z, 1.0), 0.0)
    return _plogp_sum(p)


def von_neumann_entropy_code(A, *, dtype=np.float64):
    """The official code's "von Neumann" entropy of ``A [..., n, n]``, batched: ``[...]``.

    ``p_i = |lambda_i| / sqrt(sum_j |lambda_j|^2)`` (L2, so ``sum p != 1``); ``-sum_{p>0} p ln p``.
    """
    lam = np.abs(_eigvals(to_numpy(A).astype(dtype)))
    return _scalar_or_array(_entropy_of(lam, "l2"))


def von_neumann_entropy_l1(A, *, dtype=np.float64):
    """Eigenvalue entropy with ``p = |lambda| / sum |lambda|`` (a proper distribution)."""
    lam = np.abs(_eigvals(to_numpy(A).astype(dtype)))
    return _scalar_or_array(_entropy_of(lam, "l1"))


def singular_value_entropy(A, *, dtype=np.float64):
    """Spectral entropy with ``p = sigma^2 / sum sigma^2`` of ``A [..., n, m]``."""
    sv = _svdvals(to_numpy(A).astype(dtype)).astype(np.float64)
    return _scalar_or_array(_entropy_of(sv**2, "l1"))


def _shannon_code_one(x: np.ndarray, bins: int) -> float:
    # Exactly pandas.cut(x, bins) + value_counts / len(x): equal-width bins over [min, max],
    # right-closed intervals, the first edge extended down by 0.1 % of the range.
    mn, mx = x.min(), x.max()
    if mn == mx:
        mn = mn - (0.001 * abs(mn) if mn != 0 else 0.001)
        mx = mx + (0.001 * abs(mx) if mx != 0 else 0.001)
        edges = np.linspace(mn, mx, bins + 1, endpoint=True)
    else:
        edges = np.linspace(mn, mx, bins + 1, endpoint=True)
        edges[0] -= (mx - mn) * 0.001
    idx = np.searchsorted(edges, x.astype(np.float64), side="left") - 1
    counts = np.bincount(idx[(idx >= 0) & (idx < bins)], minlength=bins)
    p = counts / x.size
    return float(_plogp_sum(p))


def shannon_value_entropy_code(A, bins: int = 20):
    """The official code's Shannon entropy of the *values* of ``A [..., n, m]``: ``[...]``.

    All entries (zeros included) are cut into ``bins`` equal-width bins over [min, max] exactly
    as ``pandas.cut`` does; ``p_b = count_b / n m``; natural log.
    """
    A = to_numpy(A)
    lead = A.shape[:-2]
    flat = A.reshape((-1,) + (A.shape[-2] * A.shape[-1],))
    res = np.array([_shannon_code_one(r, bins) for r in flat]).reshape(lead)
    return _scalar_or_array(res)


def mean_row_entropy(A, rows=None, *, normalize: bool = False):
    """Mean over valid query rows of the row entropy restricted to valid keys: ``[...]``.

    ``A``: ``[..., T, T]``; ``rows``: ``[..., T]`` bool (valid tokens; applied to queries and
    keys), ``None`` = all. Rows are renormalised over the valid keys. ``normalize`` divides by
    ``ln(n_v)`` (1 = uniform rows).
    """
    A = to_numpy(A).astype(np.float64)
    T = A.shape[-1]
    v = np.ones(A.shape[:-2] + (T,), bool) if rows is None else np.broadcast_to(
        np.asarray(rows, bool), A.shape[:-2] + (T,)
    )
    Am = A * v[..., None, :]
    rs = Am.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        P = np.where(rs > 0, Am / np.where(rs > 0, rs, 1.0), 0.0)
    h = _plogp_sum(P)  # [..., T]
    nv = v.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        res = np.where(nv > 0, (h * v).sum(-1) / np.maximum(nv, 1), np.nan)
        if normalize:
            res = np.where(nv > 1, res / np.log(np.maximum(nv, 2)), np.nan)
    return _scalar_or_array(res)


def attention_entropies(
    A, rows=None, *, bins: int = 20, dtype=np.float32
) -> dict[str, np.ndarray]:
    """All entropies of :data:`ENTROPY_DOCS` for ``A [..., T, T]`` (e.g. ``[L, H, T, T]``).

    The spectral/binned entropies use the matrix as given (the official code passed 512x512
    class-mean matrices with [SEP]/[PAD] rows and columns zeroed); if ``rows`` (``[T]`` bool) is
    given, they use ``A[rows][:, rows]`` instead. The row entropy always uses ``rows``.
    Add ``.mean(-1)`` over heads for the per-layer curves of the code. ``dtype``: precision of
    the eigen/singular decompositions (float32 is several times faster on CPU; eigenvalues of
    144 heads of 426x426 take a few seconds).
    """
    A = to_numpy(A).astype(np.float64)
    Ar = A
    if rows is not None:
        r = np.asarray(rows, bool)
        if r.ndim != 1:
            raise ValueError("attention_entropies: rows must be a 1-D [T] mask")
        Ar = A[..., r, :][..., :, r]
    lam = np.abs(_eigvals(Ar.astype(dtype))).astype(np.float64)
    sv = _svdvals(Ar.astype(dtype)).astype(np.float64)
    return {
        "vn_code": _entropy_of(lam, "l2"),
        "vn_l1": _entropy_of(lam, "l1"),
        "sv_entropy": _entropy_of(sv**2, "l1"),
        "shannon_code": np.asarray(shannon_value_entropy_code(Ar, bins=bins)),
        "row_entropy": np.asarray(mean_row_entropy(A, rows)),
    }
