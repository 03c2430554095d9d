"""Affinity between the weight subspaces of two heads: the projection kernel (Yamagiwa, Takase &
Shimodaira 2026), for every pair of heads of a model at once.

Each head reads the residual stream through ``W_Q,h``, ``W_K,h``, ``W_V,h`` (``d_h x d``: the read
subspace is their row space in ℝ^d) and writes into it through ``W_O,h`` (``d x d_h``: its column
space). With orthonormal bases ``U`` (``d x p``) and ``V`` (``d x q``) of two such subspaces,

    PK(U, V) = ‖Uᵀ V‖_F² = Σ_i cos² θ_i   (θ_i the principal angles),

which runs from 0 (orthogonal subspaces) to ``min(p, q)`` (one contains the other); a head's
subspace with itself gives its rank, ``d_h`` for a full-rank head. Two uniformly random subspaces give
``E[PK] = p q / d`` (``d_h² / d``: 5.33 for bert-base's 64 and 768), the baseline drawn with the map.

Pair types: ``OQ``, ``OK``, ``OV`` are the paper's (the output subspace of a head against the query,
key or value subspace of another: a weight-space reading of Q-, K- and V-composition, meaningful when
the writer sits in an earlier layer); ``QQ``, ``KK``, ``VV``, ``OO`` compare subspaces of one kind
(our addition). BERT is post-LN: a LayerNorm (mean removed, scaled by γ) sits between a head's write
and the next layer's read; this map uses the raw weights (no LayerNorm folded), as said on screen.

Bases come from one batched SVD of every head's block (columns whose singular value is below
``rtol`` times the largest are dropped, so a rank-deficient head counts its rank); the map is one
matrix product per layer of writers (``[H p, d] @ [d, L H q]``), squared and summed in ``p x q`` blocks.

References
----------
* Yamagiwa, Takase & Shimodaira 2026, *Measuring Affinity between Attention-Head Weight Subspaces via
  the Projection Kernel* (arXiv:2601.10266), abstract and §1 (the kernel, the OQ/OK/OV pairs; the
  later sections were not reachable, so the details here are a reconstruction); the random
  baseline p q / d is our derivation (E[tr(P_U P_V)] = p q / d for independent uniform subspaces).
* Elhage et al. 2021, *A Mathematical Framework for Transformer Circuits* (composition).
* docs/methods.md, "Projection kernel between heads".
"""

from __future__ import annotations

import numpy as np

from bertgeom.metricdocs import MetricDoc, doc_table

__all__ = ["PAIR_TYPES", "AFFINITY_DOCS", "head_bases", "projection_kernel", "projection_kernel_map",
           "random_baseline"]

#: Pair types: name -> (first head's subspace kind, second head's).
PAIR_TYPES: dict[str, tuple[str, str]] = {
    "OQ": ("O", "Q"), "OK": ("O", "K"), "OV": ("O", "V"),
    "QQ": ("Q", "Q"), "KK": ("K", "K"), "VV": ("V", "V"), "OO": ("O", "O"),
}

AFFINITY_DOCS: dict[str, MetricDoc] = doc_table({
    "projection_kernel": ("projection kernel", "PK(U, V) = ‖Uᵀ V‖_F² = Σ cos² θ_i  (0 … min(p, q))",
                          "Yamagiwa 2026 (arXiv:2601.10266), abstract and §1 (later sections not read)"),
    "random_baseline": ("random baseline", "E[PK] = p q / d for uniformly random subspaces (d_h² / d)",
                        "our derivation (the paper compares with random subspaces)"),
})


def _blocks(lw, kind: str) -> np.ndarray:
    """``[H, d, d_h]``: each head's block of one kind as ``d x d_h`` columns spanning its subspace."""
    if kind == "O":
        return np.asarray(lw.Wo_heads, dtype=np.float64)
    rows = {"Q": lw.Wq_heads, "K": lw.Wk_heads, "V": lw.Wv_heads}[kind]
    return np.asarray(rows, dtype=np.float64).transpose(0, 2, 1)


def head_bases(layer_weights, kind: str, *, rtol: float = 1e-6) -> np.ndarray:
    """Orthonormal bases ``[L, H, d, d_h]`` of every head's ``kind`` subspace (``"Q"``, ``"K"``, ``"V"``:
    row spaces of the read maps; ``"O"``: column space of the write map). One batched SVD; columns of
    singular value below ``rtol · s_max`` are zeroed, so a basis holds exactly the block's rank."""
    if kind not in ("Q", "K", "V", "O"):
        raise ValueError(f"kind must be Q, K, V or O, got {kind!r}")
    M = np.stack([_blocks(lw, kind) for lw in layer_weights])  # [L, H, d, d_h]
    U, s, _ = np.linalg.svd(M, full_matrices=False)
    keep = s > rtol * s.max(axis=-1, keepdims=True)
    return U * keep[..., None, :]


def projection_kernel(U, V) -> np.ndarray:
    """``‖Uᵀ V‖_F²`` of bases ``U [..., d, p]`` and ``V [..., d, q]`` (leading axes broadcast)."""
    U, V = np.asarray(U, dtype=np.float64), np.asarray(V, dtype=np.float64)
    G = np.swapaxes(U, -1, -2) @ V
    return (G * G).sum(axis=(-2, -1))


def random_baseline(p: int, q: int, d: int) -> float:
    """``p q / d``: the mean projection kernel of independent uniformly random p- and q-dimensional
    subspaces of ℝ^d."""
    return p * q / d


def projection_kernel_map(layer_weights, pair: str = "OQ", *, rtol: float = 1e-6) -> np.ndarray:
    """``[L H, L H]`` projection kernels of every ordered pair of heads (row = head ``l1*H + h1`` with
    the pair's first kind, column = head ``l2*H + h2`` with its second): ``pair`` one of
    :data:`PAIR_TYPES`. One product per layer of first heads; no loop over heads."""
    if pair not in PAIR_TYPES:
        raise ValueError(f"pair must be one of {', '.join(PAIR_TYPES)}, got {pair!r}")
    a_kind, b_kind = PAIR_TYPES[pair]
    A = head_bases(layer_weights, a_kind, rtol=rtol)  # [L, H, d, p]
    B = A if b_kind == a_kind else head_bases(layer_weights, b_kind, rtol=rtol)
    L, H, d, p = A.shape
    q = B.shape[-1]
    B_all = B.transpose(2, 0, 1, 3).reshape(d, L * H * q)  # every second head's basis, side by side
    out = np.empty((L * H, L * H))
    for layer in range(L):  # one [H p, d] @ [d, L H q] product per layer of first heads
        G = A[layer].transpose(0, 2, 1).reshape(H * p, d) @ B_all
        out[layer * H:(layer + 1) * H] = (G * G).reshape(H, p, L * H, q).sum(axis=(1, 3))
    return out
