"""Attention maths, written once: softmax, the head split, and attention rebuilt from weights.

Everything that recomputes attention outside the model's own forward pass reads it from here
(the subspace and cone analyses, the head-by-head checkpoint comparison):

* :func:`softmax` -- the numerically stable softmax (``-inf`` entries get weight 0);
* :func:`split_heads` / :func:`merge_heads` -- ``[T, H*d_head] <-> [H, T, d_head]``;
* :func:`project_qkv` and :func:`correct_attention` -- the model's attention, biases and padding
  mask included (reproduces Hugging Face's eager attention);
* :func:`faithful_qkv` and :func:`faithful_attention` -- the official code's hand-made variant
  (transposed head slices ``X @ W[:, s]``, no biases, no mask): the official code's hand-made
  attention (docs/methods.md §8.3);
* :func:`attention_from_weights` -- every layer's correct attention at once, each layer reading
  its own input;
* :func:`kept_tokens` -- which rows and columns a class-mean or entropy recipe keeps ([SEP] and
  what follows it removed, docs/methods.md §5), in one place for every recipe.

``lw`` is a :class:`bertgeom.weights.LayerWeights`. Everything is numpy (float64 inside);
torch tensors are accepted and converted.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "to_numpy",
    "softmax",
    "split_heads",
    "merge_heads",
    "project_qkv",
    "faithful_qkv",
    "attention_from_scores",
    "correct_attention",
    "faithful_attention",
    "attention_from_weights",
    "ZERO_MODES",
    "kept_tokens",
]


def to_numpy(x) -> np.ndarray:
    """A float numpy array from a numpy array, a list or a (CPU/GPU, half or full) torch tensor."""
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().to("cpu")
        if str(x.dtype) in ("torch.bfloat16", "torch.float16"):
            x = x.float()
        x = x.numpy()
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    return x


def softmax(z, axis: int = -1) -> np.ndarray:
    """``exp(z) / sum exp(z)`` along ``axis``, shifted by the maximum (stable; ``-inf`` -> 0)."""
    z = np.asarray(z)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def split_heads(Y: np.ndarray, num_heads: int, head_dim: int) -> np.ndarray:
    """``[..., T, H*d_head] -> [..., H, T, d_head]`` (head ``h`` owns features ``h*d_head:(h+1)*d_head``)."""
    Y = np.asarray(Y)
    return np.swapaxes(Y.reshape(*Y.shape[:-1], num_heads, head_dim), -2, -3)


def merge_heads(Z: np.ndarray) -> np.ndarray:
    """``[..., H, T, d_head] -> [..., T, H*d_head]``: the heads' outputs concatenated, as W_O reads them."""
    Z = np.swapaxes(np.asarray(Z), -2, -3)
    return Z.reshape(*Z.shape[:-2], -1)


def _rotate_half(x: np.ndarray) -> np.ndarray:
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rotary(x: np.ndarray, inv_freq: np.ndarray, scaling: float = 1.0) -> np.ndarray:
    """``x [..., T, d_head]`` rotated by position ``0..T-1`` (RoFormer, Su et al. 2021 arXiv:2104.09864,
    in the half-split layout ESM-2 and ModernBERT use)."""
    T = x.shape[-2]
    freqs = np.arange(T, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    return x * (np.cos(emb) * scaling) + _rotate_half(x) * (np.sin(emb) * scaling)


def layer_norm_np(X: np.ndarray, gamma, beta, eps: float) -> np.ndarray:
    mu = X.mean(-1, keepdims=True)
    var = ((X - mu) ** 2).mean(-1, keepdims=True)
    return (X - mu) / np.sqrt(var + eps) * gamma + beta


def project_qkv(X, lw, *, bias: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-head queries, keys, values of one layer as its scores use them: each ``[H, T, d_head]`` (float64).

    ``Q = X W_q^T + b_q`` split into heads (rows ``s`` of the (out, in) weight), same for K, V.
    ``X``: ``[T, d]`` layer input ``hidden_states[l]``. For a pre-LayerNorm layer (ESM-2, ModernBERT)
    the heads read ``LN_1(X)``; with rotary positions Q and K are rotated by position (0..T-1), so
    :func:`correct_attention` reproduces every family's own attention.
    """
    X = to_numpy(X).astype(np.float64)
    if getattr(lw, "placement", "post") == "pre" and getattr(lw, "ln1_present", True):
        X = layer_norm_np(X, lw.ln1_gamma, lw.ln1_beta, lw.ln1_eps)
    res = []
    for W, b in ((lw.W_q, lw.b_q), (lw.W_k, lw.b_k), (lw.W_v, lw.b_v)):
        Y = X @ W.T.astype(np.float64)
        if bias:
            Y = Y + b
        res.append(split_heads(Y, lw.num_heads, lw.head_dim))
    inv = getattr(lw, "rotary_inv_freq", None)
    if inv is not None:
        res[0], res[1] = rotary(res[0], inv, lw.rotary_scaling), rotary(res[1], inv, lw.rotary_scaling)
    return tuple(res)


def faithful_qkv(X, lw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The official code's per-head Q, K, V: ``X @ W[:, s]`` (columns of the (out, in) weight,
    i.e. the transposed map), no biases. Each ``[H, T, d_head]``.

    Equivalent to the correct projection with ``W`` replaced by ``W^T`` and ``b = 0``.
    """
    X = to_numpy(X).astype(np.float64)
    return tuple(split_heads(X @ W.astype(np.float64), lw.num_heads, lw.head_dim) for W in (lw.W_q, lw.W_k, lw.W_v))


def attention_from_scores(Q, K, scaling: float, attention_mask=None) -> np.ndarray:
    """``softmax(Q K^T * scaling)`` per head, ``[..., H, T, T]``; padding **columns**
    (``attention_mask == 0``, shape ``[T]``) get zero weight (Hugging Face eager semantics)."""
    S = (Q @ np.swapaxes(K, -1, -2)) * scaling
    if attention_mask is not None:
        am = np.asarray(to_numpy(attention_mask)).astype(bool).reshape(-1)
        S = np.where(am[None, None, :], S, -np.inf)
    return softmax(S)


def correct_attention(X, lw, attention_mask=None) -> np.ndarray:
    """The model's attention ``[H, T, T]``: ``softmax(Q_h K_h^T * scaling + mask)`` with biases."""
    Q, K, _ = project_qkv(X, lw, bias=True)
    window = getattr(lw, "window", None)
    if window is None:
        return attention_from_scores(Q, K, lw.scaling, attention_mask)
    S = (Q @ np.swapaxes(K, -1, -2)) * lw.scaling  # a local layer: keys beyond the window get no weight
    T = S.shape[-1]
    allowed = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :]) <= window
    if attention_mask is not None:
        allowed = allowed & np.asarray(to_numpy(attention_mask)).astype(bool).reshape(-1)[None, :]
    return softmax(np.where(allowed, S, -np.inf))


def faithful_attention(X, lw) -> np.ndarray:
    """The official code's hand-made attention ``[H, T, T]`` for all heads of a layer:
    transposed head slices, no biases, no padding mask (softmax over every position)."""
    Q, K, _ = faithful_qkv(X, lw)
    return attention_from_scores(Q, K, lw.scaling)


def attention_from_weights(weights, layer_inputs) -> np.ndarray:
    """Correct attention ``[L, H, T, T]`` of every head when layer ``l`` reads ``layer_inputs[l]``
    (``[L, T, D]``), from the query/key weights alone (no padding; single input)."""
    X = np.asarray(layer_inputs, dtype=np.float64)
    if X.ndim != 3 or X.shape[0] != len(weights):
        raise ValueError(f"layer_inputs must be [L={len(weights)}, T, D], got {X.shape}")
    return np.stack([correct_attention(X[l], lw) for l, lw in enumerate(weights)])


#: How the official code zeroes a map before averaging: ``first_sep`` -- every row and column from
#: the first [SEP] on (``A[:, s:] = 0; A[s:, :] = 0``: [SEP] and [PAD] removed, [CLS] kept; the
#: class-mean and the entropy recipes, docs/methods.md §5); ``special`` -- the [SEP] rows and columns only
#: (kept for comparison: it differs from ``first_sep`` on sentence pairs).
ZERO_MODES = ("first_sep", "special")


def kept_tokens(is_sep, mode: str = "first_sep") -> np.ndarray:
    """Boolean ``[T]``: the positions whose rows and columns a recipe keeps (see :data:`ZERO_MODES`)."""
    is_sep = np.asarray(is_sep, dtype=bool)
    if mode == "special":
        return ~is_sep
    if mode == "first_sep":
        keep = np.ones(is_sep.shape[0], dtype=bool)
        seps = np.flatnonzero(is_sep)
        if seps.size:
            keep[seps[0]:] = False
        return keep
    raise ValueError(f"mode must be one of {ZERO_MODES}, got {mode!r}")
