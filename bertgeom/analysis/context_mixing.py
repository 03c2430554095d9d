"""Context mixing measured through the whole attention block: norm-based attention, the mixing ratio
(Kobayashi et al. 2020, 2021) and ALTI (Ferrando et al. 2022), on one input's trace.

Notation for layer l: ``x_j`` the hidden state entering the layer (``trace.hidden_states[l]``),
``alpha^h_ij`` head h's attention (``trace.attentions[l]``), and per head the value-then-output map
``f_h(x) = (x W_V^h + b_V^h) W_O^h`` (the head's slice of ``attention.output.dense``). The block then
computes ``z_i = sum_j sum_h alpha^h_ij f_h(x_j) + b_O + x_i`` and ``y_i = LN1(z_i)``. Everything here
is reconstructed from the trace (which the forward engine, :mod:`bertgeom.forward`, produced) and the
layer weights, in float64; nothing is run again.

* **Norm-based attention** (2020, §3): ``||alpha^h_ij f_h(x_j)|| = alpha^h_ij ||f_h(x_j)||`` per layer,
  head, query and key: the size of what key j actually adds to query i, not only its weight.
* **Whole-block contributions** (2021, §3): ``z_i`` splits by source token,
  ``z_ij = sum_h alpha^h_ij f_h(x_j) + [i = j] x_i``; LayerNorm's linear part
  ``g_i(v) = gamma * (v - mean(v)) / s_i`` (``s_i = sqrt(var(z_i) + eps)``, the token's own scale)
  maps each piece, ``T_i(x_j) = g_i(z_ij)``, and ``y_i = sum_j T_i(x_j) + g_i(b_O) + beta`` exactly.
  Three scopes: ``attn`` (no residual, no LN), ``attn+res`` and ``attn+res+ln``.
* **Mixing ratio** (2021, §5): ``r_i = ||sum_{j!=i} c_ij|| / (||sum_{j!=i} c_ij|| + ||c_ii||)`` with
  ``c_ij`` the contribution of the scope; the weight-based variants read ``1 - mean_h alpha^h_ii``
  (Attn-W) and half of it (AttnRes-W: the residual counted as a second self-weight of 1).
* **ALTI** (Ferrando et al. 2022, §3): ``d_ij = ||y_i - T_i(x_j)||_1``,
  ``c_ij = max(0, ||y_i||_1 - d_ij) / sum_k max(0, ||y_i||_1 - d_ik)`` (rows sum to 1), and over
  layers ``R_l = C_l R_{l-1}`` (rollout without an added identity: the residual is already inside).
  Their released code divides by ``std(z_i + eps)`` (unbiased); here ``s_i`` is LayerNorm's own scale,
  so ``y_i`` is exactly the LN1 output the model computed (docs/methods.md, "Context mixing").

Costs: the norms of sums over heads use per-token Gram matrices of the heads' vectors (``T H^2 d`` and
``T^2 H^2``), never the ``[T, T, d]`` tensor; ALTI's L1 distances need the vectors, built in chunks
of query rows (:data:`ALTI_CHUNK_BYTES`), so a 427-token genome takes ~1 s per layer on two cores.

The per-layer weights are read through one function, :func:`block_weights`, so that a change of how
weights are stored touches one place.

References: Kobayashi, Kuribayashi, Yokoi & Inui 2020, "Attention is Not Only a Weight: Analyzing
Transformers with Vector Norms" (arXiv:2004.10102, §3, §4); Kobayashi et al. 2021, "Incorporating
Residual and Normalization Layers into Analysis of Masked Language Models" (arXiv:2109.07152, §3, §5,
Table 1); Ferrando, Gállego & Costa-jussà 2022, "Measuring the Mixing of Contextual Information in
the Transformer" (arXiv:2203.04212, §3, §4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from bertgeom.metricdocs import MetricDoc, doc_table

__all__ = [
    "MIXING_DOCS",
    "MIXING_VARIANTS",
    "SCOPES",
    "BlockWeights",
    "alti",
    "alti_rollout",
    "block_norms",
    "block_weights",
    "context_mixing_view",
    "head_mixing_ratios",
    "mixing_ratios",
    "norm_attention",
    "transformed_values",
    "value_norms",
]

KOBAYASHI_2020 = "Kobayashi et al. 2020 (arXiv:2004.10102)"
KOBAYASHI_2021 = "Kobayashi et al. 2021 (arXiv:2109.07152)"
FERRANDO_2022 = "Ferrando et al. 2022 (arXiv:2203.04212)"

#: The scopes of the whole-block decomposition, from the attention alone to the block with LN1.
SCOPES = ("attn", "attn+res", "attn+res+ln")
#: The mixing-ratio variants, in the order of Kobayashi et al. 2021, Table 1 (W: weights, N: norms).
MIXING_VARIANTS = ("Attn-W", "Attn-N", "AttnRes-W", "AttnRes-N", "AttnResLn-N")

MIXING_DOCS: dict[str, MetricDoc] = doc_table({
    "norm_attention": ("norm-based attention", "||alpha^h_ij f_h(x_j)|| = alpha^h_ij ||(x_j W_V^h + b_V^h) W_O^h||",
                       "Kobayashi et al. 2020 (arXiv:2004.10102) §3"),
    "block_norm": ("whole-block contribution", "||T_i(x_j)||, T_i(x_j) = gamma * centre(sum_h alpha^h_ij f_h(x_j) "
                   "+ [i=j] x_i) / s_i", "Kobayashi et al. 2021 (arXiv:2109.07152) §3"),
    "Attn-W": ("mixing ratio, attention weights", "1 - mean_h alpha^h_ii",
               "Kobayashi et al. 2021 (arXiv:2109.07152) §5, Table 1"),
    "Attn-N": ("mixing ratio, attention norms", "||sum_{j!=i} sum_h alpha f_h(x_j)|| / (that + ||sum_h alpha^h_ii "
               "f_h(x_i)||)", "Kobayashi et al. 2021 (arXiv:2109.07152) §5, Table 1"),
    "AttnRes-W": ("mixing ratio, attention + residual weights", "(1 - mean_h alpha^h_ii) / 2",
                  "Kobayashi et al. 2021 (arXiv:2109.07152) §5, Table 1"),
    "AttnRes-N": ("mixing ratio, attention + residual norms", "as Attn-N with x_i added to the self term",
                  "Kobayashi et al. 2021 (arXiv:2109.07152) §5, Table 1"),
    "AttnResLn-N": ("mixing ratio, whole attention block", "||sum_{j!=i} T_i(x_j)|| / (that + ||T_i(x_i)||)",
                    "Kobayashi et al. 2021 (arXiv:2109.07152) §5, Table 1"),
    "head_mixing": ("mixing ratio of one head (norms)", "||sum_{j!=i} alpha^h_ij f_h(x_j)|| / (that + "
                    "||alpha^h_ii f_h(x_i)||)",
                    "Kobayashi et al. 2020 (arXiv:2004.10102) §4 (per head; our aggregation)"),
    "alti": ("ALTI contribution", "max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised to 1",
             "Ferrando et al. 2022 (arXiv:2203.04212) §3"),
    "alti_rollout": ("ALTI over layers", "R_l = C_l R_{l-1} (no identity added)",
                     "Ferrando et al. 2022 (arXiv:2203.04212) §3"),
    "alti_mixing_share": ("ALTI mixing share over a set", "1 - mean_i C_l[i, i], mean ± sd over the inputs",
                          "Ferrando et al. 2022 (arXiv:2203.04212) §3 (our reduction over tokens and inputs)"),
    "alti_rank_agreement": ("rank agreement of ALTI and attention rollout",
                            "mean_i spearman_j(R_l[i, j], Ahat_l[i, j]), Ahat: rollout of 0.5 mean_h A + 0.5 I",
                            "Ferrando et al. 2022 (arXiv:2203.04212) §4; Abnar & Zuidema 2020 (arXiv:2005.00928) "
                            "(our comparison)"),
    "rollout_self": ("share a token keeps of itself", "mean_i R_l[i, i] (ALTI) beside mean_i Ahat_l[i, i]",
                     "Ferrando et al. 2022 (arXiv:2203.04212) §3 (our reduction)"),
})

#: Bytes of one chunk of ALTI's per-(query, key) vectors ``[chunk, T, d]`` (float64).
ALTI_CHUNK_BYTES = 48 * 2**20


@dataclass(frozen=True)
class BlockWeights:
    """One layer's weights that the attention block's decomposition reads, float64, contiguous:
    ``Wv [H, d_h, d]`` and ``bv [H, d_h]`` (the heads' value maps, (out, in)), ``Wo_t [H, d_h, d]`` (the
    head's columns of ``attention.output.dense``, transposed: ``f_h(x) = v Wo_t[h]``), ``bo [d]``, and
    LN1's ``gamma``, ``beta``, ``eps``."""

    Wv: np.ndarray
    bv: np.ndarray
    Wo_t: np.ndarray
    bo: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    eps: float


def block_weights(source, layer: int) -> BlockWeights:
    """Layer ``layer``'s :class:`BlockWeights` from ``source``: a :class:`~bertgeom.trace.Trace` (its
    ``layer_weights``), a list of :class:`~bertgeom.weights.LayerWeights`, or a loaded / torch model.

    Every function here takes ``weights=`` (anything this accepts) for a trace made without them.
    The one place this module reads weights (:mod:`bertgeom.weights`), so it is the one line to change
    when their storage changes."""
    from bertgeom.weights import layer_weights_of

    if isinstance(source, (list, tuple)):
        layers = source
    elif hasattr(source, "attentions") and hasattr(source, "hidden_states"):  # a trace
        layers = getattr(source, "layer_weights", None)
        if layers is None:
            raise ValueError("This trace carries no layer weights: pass the model as weights=, or make the trace "
                             "with bertgeom.trace(model, text).")
    else:
        layers = layer_weights_of(getattr(source, "model", source))
    lw = layers[layer]
    f8 = np.float64
    return BlockWeights(Wv=np.ascontiguousarray(lw.Wv_heads, dtype=f8), bv=lw.bv_heads.astype(f8),
                        Wo_t=np.ascontiguousarray(lw.Wo_heads.transpose(0, 2, 1), dtype=f8),
                        bo=lw.b_o.astype(f8), gamma=lw.ln1_gamma.astype(f8), beta=lw.ln1_beta.astype(f8),
                        eps=float(lw.ln1_eps))


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (stacked like :func:`numpy.matmul`) through torch, float64. Why not numpy: on a busy
    machine OpenBLAS's threads spin against each other, and the same products ran 10x slower than
    torch's (or single-threaded OpenBLAS) on the two-core Xeon of bench/bench_context_mixing.py."""
    import torch

    return torch.matmul(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)),
                        torch.from_numpy(np.ascontiguousarray(b, dtype=np.float64))).numpy()


def _trace_arrays(trace) -> tuple[np.ndarray, np.ndarray]:
    """``(attentions [L, H, T, T], hidden_states [L+1, T, d])`` of a trace, checked."""
    a, hs = np.asarray(trace.attentions), np.asarray(trace.hidden_states)
    if a.ndim != 4 or hs.ndim != 3 or hs.shape[0] != a.shape[0] + 1 or hs.shape[1] != a.shape[-1]:
        raise ValueError(f"a trace needs attentions [L, H, T, T] and hidden states [L+1, T, d], got {a.shape} "
                         f"and {hs.shape}")
    return a, hs


def transformed_values(x: np.ndarray, w: BlockWeights) -> np.ndarray:
    """``[H, T, d]``: ``f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h`` for every head and token (float64)."""
    return _mm(_values(x, w), w.Wo_t)


def _values(x: np.ndarray, w: BlockWeights) -> np.ndarray:
    """``[H, T, d_h]``: the heads' value vectors ``x_j W_V^h + b_V^h`` (float64, contiguous; one
    matrix product for all heads: numpy's stacked products of transposed views skip BLAS)."""
    H, dh, d = w.Wv.shape
    v = _mm(np.asarray(x, dtype=np.float64), w.Wv.reshape(H * dh, d).T) + w.bv.reshape(-1)
    return np.ascontiguousarray(v.reshape(-1, H, dh).transpose(1, 0, 2))


def _head_outputs(A: np.ndarray, x: np.ndarray, w: BlockWeights) -> np.ndarray:
    """``[H, T, d]``: ``sum_j alpha^h_ij f_h(x_j)`` per head, as ``(A_h V_h) W_O^h`` (the attention is
    applied in the narrow value space first: ``d / d_h`` times less work than ``A_h F_h``)."""
    return _mm(_mm(A, _values(x, w)), w.Wo_t)


def value_norms(trace, weights=None) -> np.ndarray:
    """``[L, H, T]``: ``||f_h(x_j)||`` per layer, head and key token. Norm-based attention is
    ``attentions * value_norms[:, :, None, :]`` (:func:`norm_attention`)."""
    a, hs = _trace_arrays(trace)
    src = trace if weights is None else weights
    return np.stack([np.linalg.norm(transformed_values(hs[l], block_weights(src, l)), axis=-1)
                     for l in range(a.shape[0])])


def norm_attention(trace, layer: int | None = None, weights=None) -> np.ndarray:
    """Norm-based attention ``||alpha^h_ij f_h(x_j)||``: ``[L, H, T, T]`` (or ``[H, T, T]`` of one
    ``layer``), float64."""
    a, hs = _trace_arrays(trace)
    src = trace if weights is None else weights
    if layer is None:
        return a.astype(np.float64) * value_norms(trace, weights)[:, :, None, :]
    f_norm = np.linalg.norm(transformed_values(hs[layer], block_weights(src, layer)), axis=-1)
    return a[layer].astype(np.float64) * f_norm[:, None, :]


def _centre(v: np.ndarray) -> np.ndarray:
    return v - v.mean(axis=-1, keepdims=True)


def _ln_scale(z: np.ndarray, eps: float) -> np.ndarray:
    """``[T]``: LayerNorm's divisor ``sqrt(var(z_i) + eps)`` of each row of the pre-LN state."""
    return np.sqrt(z.var(axis=-1) + eps)


def _layer_parts(a_l: np.ndarray, x: np.ndarray, w: BlockWeights, scope: str):
    """The pieces of one layer's decomposition in ``scope``: ``(U [H, T, d], r [T, d] or None,
    scale [T], pre [T, d])`` with ``c_ij = (sum_h alpha^h_ij U_hj + [i=j] r_i) / scale_i`` and ``pre``
    the pre-LN state ``z_i`` (the model's, whatever the scope)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    x = np.asarray(x, dtype=np.float64)
    F = transformed_values(x, w)
    A = np.asarray(a_l, dtype=np.float64)
    pre = _head_outputs(A, x, w).sum(axis=0) + w.bo + x
    if scope == "attn":
        return F, None, np.ones(x.shape[0]), pre
    if scope == "attn+res":
        return F, x, np.ones(x.shape[0]), pre
    return w.gamma * _centre(F), w.gamma * _centre(x), _ln_scale(pre, w.eps), pre


def _pair_norms(A: np.ndarray, U: np.ndarray, r: np.ndarray | None, scale: np.ndarray) -> np.ndarray:
    """``[T, T]``: ``||sum_h A[h, i, j] U[h, j] + [i=j] r_i|| / scale_i``, from the heads' Gram matrix
    per key token (``G[j] = U[:, j] U[:, j]^T``, ``H x H``), never the ``[T, T, d]`` vectors."""
    Ut = np.ascontiguousarray(U.transpose(1, 0, 2))  # [T(keys), H, d]; contiguous: BLAS, not numpy's loop
    G = _mm(Ut, Ut.transpose(0, 2, 1))  # [T(keys), H, H]
    B = np.ascontiguousarray(A.transpose(2, 1, 0))  # [T(keys), T(queries), H]
    sq = (_mm(B, G) * B).sum(axis=-1).T
    idx = np.arange(A.shape[-1])
    if r is not None:  # the diagonal holds the residual as well: computed directly
        diag = np.einsum("hi,hid->id", A[:, idx, idx], U) + r
        sq[idx, idx] = np.einsum("id,id->i", diag, diag)
    return np.sqrt(np.maximum(sq, 0.0)) / scale[:, None]


def block_norms(trace, scope: str = "attn+res+ln", layers=None, weights=None) -> np.ndarray:
    """``[L, T, T]`` (the ``layers`` asked, default all): the norm of what token j contributes to token
    i's output of each layer's attention block in ``scope`` (:data:`SCOPES`):
    ``||sum_h alpha^h_ij f_h(x_j)||`` for ``attn``, plus ``x_i`` on the diagonal for ``attn+res``,
    ``||T_i(x_j)||`` for ``attn+res+ln``."""
    a, hs = _trace_arrays(trace)
    src = trace if weights is None else weights
    todo = range(a.shape[0]) if layers is None else layers
    out = []
    for l in todo:
        A = a[l].astype(np.float64)
        U, r, scale, _ = _layer_parts(A, hs[l], block_weights(src, l), scope)
        out.append(_pair_norms(A, U, r, scale))
    return np.stack(out)


def _ratio(others: np.ndarray, own: np.ndarray) -> np.ndarray:
    n_o, n_s = np.linalg.norm(others, axis=-1), np.linalg.norm(own, axis=-1)
    total = n_o + n_s
    return np.divide(n_o, total, out=np.zeros_like(total), where=total > 0)


def mixing_ratios(trace, weights=None) -> dict[str, np.ndarray]:
    """``{variant: [L, T]}`` for every :data:`MIXING_VARIANTS`: each token's share of its block output
    that comes from the other tokens (Kobayashi et al. 2021, §5; average over tokens and layers for
    their Table 1). Only the sum over the other tokens and the self term are needed, so no pair
    vectors are built."""
    a, hs = _trace_arrays(trace)
    src = trace if weights is None else weights
    L, H, T, _ = a.shape
    idx = np.arange(T)
    out = {v: np.empty((L, T)) for v in MIXING_VARIANTS}
    for l in range(L):
        w = block_weights(src, l)
        A = a[l].astype(np.float64)
        x = hs[l].astype(np.float64)
        F = transformed_values(x, w)
        diag = A[:, idx, idx]  # [H, T]
        own = np.einsum("hi,hid->id", diag, F)
        others = _head_outputs(A, x, w).sum(axis=0) - own
        self_w = diag.mean(axis=0)
        out["Attn-W"][l] = 1.0 - self_w
        out["AttnRes-W"][l] = (1.0 - self_w) / 2.0
        out["Attn-N"][l] = _ratio(others, own)
        out["AttnRes-N"][l] = _ratio(others, own + x)
        # LN's linear part is centring, gamma and a per-token scale: the scale cancels in the ratio
        out["AttnResLn-N"][l] = _ratio(w.gamma * _centre(others), w.gamma * _centre(own + x))
    return out


def head_mixing_ratios(trace, weights=None) -> np.ndarray:
    """``[L, H, T]``: the norm-based mixing ratio of each head alone,
    ``||sum_{j!=i} alpha^h_ij f_h(x_j)|| / (that + ||alpha^h_ii f_h(x_i)||)`` (Kobayashi et al. 2020's
    norms, summed per head; our aggregation)."""
    a, hs = _trace_arrays(trace)
    src = trace if weights is None else weights
    L, H, T, _ = a.shape
    idx = np.arange(T)
    out = np.empty((L, H, T))
    for l in range(L):
        A = a[l].astype(np.float64)
        w = block_weights(src, l)
        own = A[:, idx, idx][:, :, None] * transformed_values(hs[l], w)
        out[l] = _ratio(_head_outputs(A, hs[l], w) - own, own)
    return out


def _alti_layer(A: np.ndarray, x: np.ndarray, w: BlockWeights) -> np.ndarray:
    """``[T, T]``: one layer's ALTI contributions (rows sum to 1), the L1 distances built in chunks of
    query rows."""
    U, r, scale, pre = _layer_parts(A, x, w, "attn+res+ln")
    T, d = x.shape
    y = w.gamma * (pre - pre.mean(axis=-1, keepdims=True)) / scale[:, None] + w.beta  # the LN1 output
    y_l1 = np.abs(y).sum(axis=-1)
    Ut = np.ascontiguousarray(U.transpose(1, 0, 2))  # [T(keys), H, d]
    chunk = max(1, int(ALTI_CHUNK_BYTES // (8 * T * d)))
    contrib = np.empty((T, T))
    for start in range(0, T, chunk):  # numpy here: many small products, where torch's float64 ran 2x slower
        rows = np.arange(start, min(T, start + chunk))
        Z = np.matmul(np.ascontiguousarray(A[:, rows, :].transpose(2, 1, 0)), Ut)  # [T(keys), rows, d]
        Z[rows, np.arange(rows.size)] += r[rows]
        Z /= scale[rows][None, :, None]
        Z -= y[rows][None]  # in place: the chunk is the largest array here
        np.abs(Z, out=Z)
        dist = Z.sum(axis=-1).T  # [rows, T]
        contrib[rows] = np.maximum(0.0, y_l1[rows, None] - dist)
    total = contrib.sum(axis=-1, keepdims=True)
    return np.divide(contrib, total, out=np.full_like(contrib, 1.0 / T), where=total > 0)


def alti(trace, *, weights=None, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """``[L, T, T]``: ALTI's token-to-token contributions of every layer (row i: what each input token
    j of the layer gives to token i's output; rows sum to 1). ``progress(done, total)`` per layer."""
    a, hs = _trace_arrays(trace)
    src = trace if weights is None else weights
    L = a.shape[0]
    out = np.empty((L, a.shape[-1], a.shape[-1]))
    for l in range(L):
        out[l] = _alti_layer(a[l].astype(np.float64), hs[l], block_weights(src, l))
        if progress:
            progress(l + 1, L)
    return out


def alti_rollout(contributions: np.ndarray) -> np.ndarray:
    """``[L, T, T]``: ALTI aggregated over layers, ``R_l = C_l C_{l-1} ... C_1`` (rows sum to 1; no
    identity added, as the residual is already inside each ``C_l``)."""
    c = np.asarray(contributions, dtype=np.float64)
    out = np.empty_like(c)
    acc = np.eye(c.shape[-1])
    for l in range(c.shape[0]):
        acc = _mm(c[l], acc)
        out[l] = acc
    return out


def context_mixing_view(trace, *, weights=None,
                        progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """Everything the Attention Heads page draws for one input, float32 (small enough to cache):
    ``value_norms [L, H, T]`` (norm-based attention is the trace's attention times these),
    ``block_norms [S, L, T, T]`` (every scope of :data:`SCOPES`, in order), ``mixing [V, L, T]``
    (in :data:`MIXING_VARIANTS`'s order), ``head_mixing [L, H, T]``, ``alti [L, T, T]`` and ``alti_rollout [L, T, T]``.
    ``progress(done, total)`` counts the steps (ALTI's layers and the cheap parts)."""
    a, _ = _trace_arrays(trace)
    L = a.shape[0]
    total = L + 2

    def step(k: int) -> None:
        if progress:
            progress(k, total)

    norms = value_norms(trace, weights)
    mixing = mixing_ratios(trace, weights)
    heads = head_mixing_ratios(trace, weights)
    block = np.stack([block_norms(trace, scope, weights=weights) for scope in SCOPES])
    step(1)
    c = alti(trace, weights=weights, progress=lambda done, _n: step(1 + done))
    roll = alti_rollout(c)
    step(total)
    f4 = np.float32
    return {"value_norms": norms.astype(f4), "block_norms": block.astype(f4),
            "mixing": np.stack([mixing[v] for v in MIXING_VARIANTS]).astype(f4), "head_mixing": heads.astype(f4),
            "alti": c.astype(f4), "alti_rollout": roll.astype(f4)}
