"""Weight-space and data-space geometry of attention heads (the directionality of subspace selection).

Weight space (data-independent, computed once per model, vectorised over all heads):

* the query-key bilinear form ``M_h = W_q[s,:]^T W_k[s,:]`` (d x d, rank <= d_head), so that the
  bias-free score is ``x_i^T M_h x_j * scaling``; its symmetric / skew split ``M = S + N`` and the
  skew share ``alpha_h = ||N||_F / ||M||_F`` (D4); the signature of ``S``; principal angles between
  the query and key row spaces; singular spectra and effective ranks of the head blocks
  ``W_q[s,:]``, ``W_k[s,:]``, ``W_v[s,:]``, ``W_o[:,s]`` and of the OV circuit ``W_o[:,s] W_v[s,:]``.
  (By Sylvester's law of inertia the signature of ``S`` is ``(d_head, d_head, d - 2 d_head)`` for
  any head whose query and key subspaces are in general position; the balance
  ``sum lambda / sum |lambda|`` is the informative summary.)

  None of the d x d matrices is formed: every quantity is computed from d_head-sized factors
  (thin QR), so BERT-base (144 heads, d = 768) takes well under a second.

  Biases: the full score is ``(W_q x_i + b_q)·(W_k x_j + b_k) = x_i^T M x_j + x_i^T W_q^T b_k
  + b_q^T W_k x_j + b_q·b_k``. The 2nd and 4th terms are constant over keys and cancel in the
  softmax; the 3rd is a per-key prior along ``u_h = W_k[s,:]^T b_q[s]`` (reported as
  ``key_prior_norm``). ``M_h`` itself ignores biases, as in the authors' code.

Data space (one input): D1-D3 from the attention ``[L,H,T,T]`` and the head outputs
``[L,H,T,d_head]`` with one batched SVD.

Per-layer queries/keys/values and attention, both **correct** (biases, padding mask; reproduces
the model's eager attention) and **faithful** to the official code (transposed head slices
``X @ W[:, s]``, no bias, no mask), plus their difference.

Where it sits: an analysis of one model (weights) or one trace; the sets, figures and the Subspace
Directions page read it.

References
----------
Bonino, Ghione & Cirrincione 2025, *The geometry of BERT* (arXiv:2502.12033): directionality of
subspace selection; its released code (eigenvalues_analysis, cone_index_sing_vals_histograms).
docs/methods.md §8.1 (weight space, D4), §8.2 (data space, D1-D3), §8.3 (faithful mode).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bertgeom.metricdocs import BONINO_2025, MetricDoc, doc_table

from bertgeom.attention import correct_attention, faithful_attention, project_qkv, to_numpy
from bertgeom.analysis.cone import cone_index

__all__ = [
    "WEIGHT_FEATURE_DOCS",
    "WEIGHT_SPECTRA_DOCS",
    "DATA_FEATURE_DOCS",
    "WeightGeometry",
    "DataGeometry",
    "JointQKProjection",
    "effective_rank",
    "numerical_rank",
    "principal_angles",
    "qk_bilinear",
    "weight_geometry",
    "attention_deviation",
    "compare_faithful_attention",
    "head_outputs",
    "compute_head_outputs",
    "head_data_geometry",
    "joint_qk_pca",
]


# -------------------------------------------------------------------------------------------
# Feature documentation: name -> (label, formula, source)
# -------------------------------------------------------------------------------------------
WEIGHT_FEATURE_DOCS: dict[str, MetricDoc] = doc_table({
    "qk_norm": (
        "||M_h||_F",
        "M_h = W_q[s,:]^T W_k[s,:] (bias-free bilinear score form, d x d)",
        f"{BONINO_2025}; docs/methods.md §8.1",
    ),
    "qk_skew_share": (
        "Skew share alpha_h (directionality index)",
        "alpha = ||N||_F / ||M||_F, N = (M - M^T)/2; 0 = symmetric search, 1 = purely skew",
        f"{BONINO_2025}, reconstruction; docs/methods.md §8.1",
    ),
    "qk_sym_share": (
        "Symmetric share",
        "||S||_F / ||M||_F, S = (M + M^T)/2; sym_share^2 + alpha^2 = 1",
        f"{BONINO_2025}, reconstruction; docs/methods.md §8.1",
    ),
    "qk_sym_pos": (
        "# positive eigenvalues of S",
        "#{lambda_i(S) > rtol * max|lambda|}. Note: S = B^T J B with B = [W_q[s,:]; W_k[s,:]] and "
        "J = [[0, I/2], [I/2, 0]], so by Sylvester's law of inertia the signature is (d_head, d_head) "
        "whenever the query and key subspaces are in general position; it only departs from that "
        "when they intersect (e.g. W_q = W_k gives (d_head, 0)). See qk_sym_balance for magnitudes.",
        f"{BONINO_2025}; docs/methods.md §8.1; code: eigenvalues_analysis (positive/negative/zero counts)",
    ),
    "qk_sym_neg": (
        "# negative eigenvalues of S",
        "#{lambda_i(S) < -rtol * max|lambda|}",
        f"{BONINO_2025}; docs/methods.md §8.1; code: eigenvalues_analysis",
    ),
    "qk_sym_zero": (
        "# ~zero eigenvalues of S",
        "d - #pos - #neg (rank(S) <= 2 d_head)",
        f"{BONINO_2025}; docs/methods.md §8.1; code: eigenvalues_analysis",
    ),
    "qk_sym_balance": (
        "Signature balance of S",
        "sum_i lambda_i / sum_i |lambda_i| = tr(M) / ||S||_* in [-1, 1] (+1 = positive semi-definite)",
        "our addition",
    ),
    "qk_erank": (
        "Effective rank of M_h",
        "exp(H(p)), p = sigma(M) / sum sigma(M)",
        "Roy & Vetterli (2007)",
    ),
    "qk_overlap": (
        "Query-key subspace overlap",
        "mean_i cos^2 theta_i over the principal angles between row(W_q[s,:]) and row(W_k[s,:])",
        f"reconstruction after {BONINO_2025}; docs/methods.md §8.1",
    ),
    "qk_angle_min_deg": (
        "Smallest principal angle (deg)",
        "min theta_i between the query and key subspaces of R^d",
        f"{BONINO_2025}; docs/methods.md §8.1",
    ),
    "qk_angle_mean_deg": (
        "Mean principal angle (deg)",
        "mean theta_i between the query and key subspaces of R^d",
        f"{BONINO_2025}; docs/methods.md §8.1",
    ),
    "qk_angle_max_deg": (
        "Largest principal angle (deg)",
        "max theta_i between the query and key subspaces of R^d",
        f"{BONINO_2025}; docs/methods.md §8.1",
    ),
    "key_prior_norm": (
        "Query-bias key prior ||u_h||",
        "u_h = W_k[s,:]^T b_q[s]: score term b_q·k_j, the only bias term that survives the softmax",
        "derived from the biases of the score; docs/methods.md §8.1",
    ),
    "ov_norm": (
        "||W_O,h W_V,h||_F",
        "OV circuit W_o[:,s] W_v[s,:] (d x d, rank <= d_head)",
        "our addition",
    ),
    "ov_erank": (
        "Effective rank of the OV circuit",
        "exp(H(p)), p = sigma(W_o[:,s] W_v[s,:]) / sum sigma",
        "Roy & Vetterli (2007)",
    ),
})
for _n, _blk in (("q", "W_q[s,:]"), ("k", "W_k[s,:]"), ("v", "W_v[s,:]"), ("o", "W_o[:,s]")):
    WEIGHT_FEATURE_DOCS[f"{_n}_norm"] = MetricDoc(
        f"||{_blk}||_F",
        f"Frobenius norm of the head block {_blk}",
        "code: eigenvalues_analysis (singular values of head blocks)",
    )
    WEIGHT_FEATURE_DOCS[f"{_n}_erank"] = MetricDoc(
        f"Effective rank of {_blk}",
        "exp(-sum p ln p), p = sigma / sum sigma",
        "Roy & Vetterli (2007); code: eigenvalues_analysis",
    )
    WEIGHT_FEATURE_DOCS[f"{_n}_rank"] = MetricDoc(
        f"Numerical rank of {_blk}",
        "#{sigma_i > rtol * sigma_max}",
        "code: singularvalues_ratio_analysis (matrix_rank)",
    )

WEIGHT_SPECTRA_DOCS: dict[str, MetricDoc] = doc_table({
    "q_sv": ("Singular values of W_q[s,:]", "[L,H,d_head], descending", "code: eigenvalues_analysis"),
    "k_sv": ("Singular values of W_k[s,:]", "[L,H,d_head], descending", "code: eigenvalues_analysis"),
    "v_sv": ("Singular values of W_v[s,:]", "[L,H,d_head], descending", "code: eigenvalues_analysis"),
    "o_sv": ("Singular values of W_o[:,s]", "[L,H,d_head], descending", "our addition"),
    "qk_sv": ("Singular values of M_h", "[L,H,d_head], descending", f"{BONINO_2025}; docs/methods.md §8.1"),
    "qk_sym_eig": (
        "Non-trivial eigenvalues of S_h",
        "[L,H,2 d_head], descending (the other d - 2 d_head are exactly 0)",
        f"{BONINO_2025}; docs/methods.md §8.1; code: eigenvalues_analysis",
    ),
    "qk_angles_rad": (
        "Principal angles query vs key subspace",
        "[L,H,d_head] radians, ascending",
        f"{BONINO_2025}; docs/methods.md §8.1",
    ),
    "ov_sv": ("Singular values of W_o[:,s] W_v[s,:]", "[L,H,d_head], descending", "our addition"),
})

DATA_FEATURE_DOCS: dict[str, MetricDoc] = doc_table({
    "attn_rank": (
        "Numerical rank of A (D2)",
        "r_eps(A) = #{sigma_i(A) >= eps}, eps = 1e-3, A restricted to the token set",
        f"{BONINO_2025} (D2); docs/methods.md §8.2; code: cone_index_sing_vals_histograms",
    ),
    "attn_rank_norm": ("Normalised rank of A (D2)", "r_eps(A) / n_v", f"{BONINO_2025} (D2); docs/methods.md §8.2"),
    "delta_A": (
        "Row alignment on the token set δ_A (D1)",
        "delta_A = I_cone(rows of A[V][:, V]) / n_v in (0, 1], A restricted to the token set V on rows AND keys; "
        "1 = every query uses the same distribution. Not delta_row of the Attention Heads page, which keeps "
        "every key (a head parked on [SEP] has delta_row ~ 1 but a small delta_A)",
        f"{BONINO_2025}, reconstruction (D1); docs/methods.md §8.2",
    ),
    "out_energy_top1": (
        "Head-output energy in the first direction (D3)",
        "sigma_1(Z_h)^2 / sum_i sigma_i(Z_h)^2",
        f"{BONINO_2025}, reconstruction (D3); docs/methods.md §8.2",
    ),
    "delta_out": (
        "Output directionality (D3)",
        "delta_out = I_cone(rows of Z_h) / n_v",
        f"{BONINO_2025}, reconstruction (D3); docs/methods.md §8.2",
    ),
})


# -------------------------------------------------------------------------------------------
# Spectral helpers
# -------------------------------------------------------------------------------------------
def effective_rank(sv, axis: int = -1):
    """Entropy effective rank (Roy & Vetterli 2007): ``exp(-sum p ln p)``, ``p = sigma/sum sigma``.

    Batched over all but ``axis``; an all-zero spectrum gives 0.
    """
    s = np.abs(np.asarray(sv, dtype=np.float64))
    tot = s.sum(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(tot > 0, s / np.where(tot > 0, tot, 1.0), 0.0)
        h = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=axis)
    er = np.where(np.squeeze(tot, axis=axis) > 0, np.exp(h), 0.0)
    return float(er) if er.ndim == 0 else er


def numerical_rank(sv, rtol: float | None = None, *, atol: float | None = None, shape=None, axis=-1):
    """``#{sigma_i > tol}`` with ``tol = max(atol, rtol * sigma_max)``.

    With neither given, numpy's ``matrix_rank`` rule for float32 data:
    ``rtol = max(shape) * eps(float32)`` (``shape`` = the matrix shape; else the spectrum length).
    """
    s = np.abs(np.asarray(sv, dtype=np.float64))
    smax = s.max(axis=axis, keepdims=True) if s.size else np.zeros(s.shape[:-1] + (1,))
    if rtol is None and atol is None:
        n = max(shape) if shape is not None else s.shape[axis]
        rtol = n * float(np.finfo(np.float32).eps)
    tol = np.zeros_like(smax)
    if rtol is not None:
        tol = np.maximum(tol, rtol * smax)
    if atol is not None:
        tol = np.maximum(tol, atol)
    r = (s > tol).sum(axis=axis)
    return int(r) if np.ndim(r) == 0 else r


def _qr(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Batched thin QR (torch when available: several times faster than numpy's batched QR)."""
    try:
        import torch

        with torch.no_grad():
            Q, R = torch.linalg.qr(torch.tensor(np.asarray(W)))
        return Q.numpy(), R.numpy()
    except ImportError:  # pragma: no cover
        return np.linalg.qr(W)


def _svdvals(X: np.ndarray, use_torch: bool = True) -> np.ndarray:
    if use_torch:
        try:
            import torch

            with torch.no_grad():
                return torch.linalg.svdvals(torch.tensor(np.asarray(X))).numpy()
        except ImportError:  # pragma: no cover
            pass
    return np.linalg.svd(X, compute_uv=False)


def _orth(W: np.ndarray) -> np.ndarray:
    """Orthonormal basis ``[..., n, k]`` of the column space of full-column-rank ``[..., n, k]``."""
    return _qr(W)[0]


def principal_angles(A, B, *, orthonormal: bool = False) -> np.ndarray:
    """Principal angles (radians, ascending) between the column spaces of ``A [..., n, p]`` and
    ``B [..., n, q]``, batched; returns ``[..., min(p, q)]``.

    Uses cosines (``svd(Qa^T Qb)``) for large angles and sines (``svd(Qb - Qa Qa^T Qb)``) for
    small ones (the Knyazev-Argentati combination, as ``scipy.linalg.subspace_angles``), so equal
    subspaces give angles ~1e-8 or smaller. Columns are assumed linearly independent (use
    ``scipy.linalg.subspace_angles`` for rank-deficient inputs).
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    Qa = A if orthonormal else _orth(A)
    Qb = B if orthonormal else _orth(B)
    if Qa.shape[-1] < Qb.shape[-1]:
        Qa, Qb = Qb, Qa
    C = np.swapaxes(Qa, -1, -2) @ Qb  # [..., p, q]
    cos = _svdvals(C, use_torch=False)  # descending -> angles ascending
    R = Qb - Qa @ C
    sin = _svdvals(R)[..., ::-1]  # ascending sines
    k = cos.shape[-1]
    sin = sin[..., -k:] if sin.shape[-1] >= k else sin
    ang_cos = np.arccos(np.clip(cos, -1.0, 1.0))
    ang_sin = np.arcsin(np.clip(sin, -1.0, 1.0))
    return np.where(cos**2 >= 0.5, ang_sin, ang_cos)


def qk_bilinear(lw, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(M, S, N)`` for one head (d x d, float64): ``M = W_q[s,:]^T W_k[s,:]``, ``S``/``N`` its
    symmetric / skew parts. For drill-down heatmaps only (one head at a time)."""
    s = lw.head_slice(h)
    M = lw.W_q[s, :].astype(np.float64).T @ lw.W_k[s, :].astype(np.float64)
    return M, (M + M.T) / 2.0, (M - M.T) / 2.0


# -------------------------------------------------------------------------------------------
# Weight geometry
# -------------------------------------------------------------------------------------------
@dataclass
class WeightGeometry:
    """Per-head weight-space geometry of a model.

    ``scalars[name]``: ``[L, H]`` (see :data:`WEIGHT_FEATURE_DOCS`);
    ``spectra[name]``: ``[L, H, k]`` (see :data:`WEIGHT_SPECTRA_DOCS`).
    """

    n_layers: int
    n_heads: int
    d_model: int
    head_dim: int
    scalars: dict[str, np.ndarray]
    spectra: dict[str, np.ndarray]
    params: dict = field(default_factory=dict)
    docs: dict = field(default_factory=lambda: dict(WEIGHT_FEATURE_DOCS))

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.scalars:
            return self.scalars[name]
        return self.spectra[name]

    def records(self) -> list[dict]:
        """One dict per head (layer, head 0-based, then every scalar), e.g. for a DataFrame."""
        rows = []
        for l in range(self.n_layers):
            for h in range(self.n_heads):
                r = {"layer": l, "head": h}
                for k, v in self.scalars.items():
                    x = v[l, h]
                    r[k] = int(x) if np.issubdtype(v.dtype, np.integer) else float(x)
                rows.append(r)
        return rows


def weight_geometry(
    layer_weights,
    *,
    rank_rtol: float | None = None,
    sym_rtol: float = 1e-6,
) -> WeightGeometry:
    """Weight-space geometry of every head (see :data:`WEIGHT_FEATURE_DOCS`).

    ``rank_rtol``: relative tolerance for the numerical ranks (default: numpy's float32 rule,
    ``max(shape) * eps32``). ``sym_rtol``: relative tolerance for "zero" eigenvalues of ``S``.
    All heads of a layer are processed in one batched call (float64).
    """
    lws = list(layer_weights)
    if not lws:
        raise ValueError("weight_geometry: no layers")
    L, H, dh, d = len(lws), lws[0].num_heads, lws[0].head_dim, lws[0].d_model
    sc: dict[str, list] = {}
    sp: dict[str, list] = {}

    def put(dct, k, v):
        dct.setdefault(k, []).append(v)

    for lw in lws:
        Wq = lw.Wq_heads.astype(np.float64)  # [H, dh, d]
        Wk = lw.Wk_heads.astype(np.float64)
        Wv = lw.Wv_heads.astype(np.float64)
        Wo = lw.Wo_heads.astype(np.float64)  # [H, d, dh]
        bq = lw.bq_heads.astype(np.float64)  # [H, dh]

        # thin QR of the transposed blocks: W^T = Q R  (Q: [H, d, dh], R: [H, dh, dh])
        Qq, Rq = _qr(np.swapaxes(Wq, 1, 2))
        Qk, Rk = _qr(np.swapaxes(Wk, 1, 2))
        _, Rv = _qr(np.swapaxes(Wv, 1, 2))
        _, Ro = _qr(Wo)

        # singular spectra of the head blocks (svd of the small R factors)
        for name, R, Wb in (("q", Rq, Wq), ("k", Rk, Wk), ("v", Rv, Wv), ("o", Ro, Wo)):
            sv = np.linalg.svd(R, compute_uv=False)
            put(sp, f"{name}_sv", sv)
            put(sc, f"{name}_norm", np.sqrt((sv**2).sum(-1)))
            put(sc, f"{name}_erank", effective_rank(sv))
            put(sc, f"{name}_rank", numerical_rank(sv, rank_rtol, shape=Wb.shape[-2:]))

        # M = Wq^T Wk = Qq (Rq Rk^T) Qk^T -> singular values of the dh x dh core
        core = Rq @ np.swapaxes(Rk, 1, 2)
        qk_sv = np.linalg.svd(core, compute_uv=False)
        put(sp, "qk_sv", qk_sv)
        put(sc, "qk_erank", effective_rank(qk_sv))
        # ||M||^2 = tr((Wq Wq^T)(Wk Wk^T)); tr(M M) = tr((Wk Wq^T)^2)
        Gq = Wq @ np.swapaxes(Wq, 1, 2)
        Gk = Wk @ np.swapaxes(Wk, 1, 2)
        m2 = np.einsum("hij,hij->h", Gq, Gk)
        C = Wk @ np.swapaxes(Wq, 1, 2)
        trMM = np.einsum("hij,hji->h", C, C)
        s2 = np.maximum((m2 + trMM) / 2.0, 0.0)
        n2 = np.maximum((m2 - trMM) / 2.0, 0.0)
        mn = np.sqrt(np.maximum(m2, 0.0))
        put(sc, "qk_norm", mn)
        with np.errstate(divide="ignore", invalid="ignore"):
            put(sc, "qk_skew_share", np.where(mn > 0, np.sqrt(n2) / np.where(mn > 0, mn, 1), 0.0))
            put(sc, "qk_sym_share", np.where(mn > 0, np.sqrt(s2) / np.where(mn > 0, mn, 1), 0.0))

        # eigenvalues of S = B^T J B / 1, B = [Wq; Wk] ([2dh, d]), J = [[0, I/2], [I/2, 0]]
        # -> with B^T = Q R: nonzero eig(S) = eig(R J R^T) (2dh x 2dh symmetric)
        B = np.concatenate([Wq, Wk], axis=1)  # [H, 2dh, d]
        _, Rb = _qr(np.swapaxes(B, 1, 2))  # [H, 2dh, 2dh]
        J = np.zeros((2 * dh, 2 * dh))
        J[:dh, dh:] = J[dh:, :dh] = 0.5 * np.eye(dh)
        K = Rb @ J @ np.swapaxes(Rb, 1, 2)
        K = (K + np.swapaxes(K, 1, 2)) / 2.0
        lam = np.linalg.eigvalsh(K)[:, ::-1]  # descending
        put(sp, "qk_sym_eig", lam)
        tol = sym_rtol * np.abs(lam).max(-1, keepdims=True)
        pos = (lam > tol).sum(-1)
        neg = (lam < -tol).sum(-1)
        put(sc, "qk_sym_pos", pos)
        put(sc, "qk_sym_neg", neg)
        put(sc, "qk_sym_zero", d - pos - neg)
        absum = np.abs(lam).sum(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            put(sc, "qk_sym_balance", np.where(absum > 0, lam.sum(-1) / np.where(absum > 0, absum, 1), 0.0))

        # principal angles between row(Wq_h) and row(Wk_h) in R^d
        ang = principal_angles(Qq, Qk, orthonormal=True)  # [H, dh] ascending
        put(sp, "qk_angles_rad", ang)
        put(sc, "qk_overlap", (np.cos(ang) ** 2).mean(-1))
        deg = np.degrees(ang)
        put(sc, "qk_angle_min_deg", deg.min(-1))
        put(sc, "qk_angle_mean_deg", deg.mean(-1))
        put(sc, "qk_angle_max_deg", deg.max(-1))

        # key prior from the query bias: u_h = Wk_h^T bq_h
        put(sc, "key_prior_norm", np.linalg.norm(np.einsum("hid,hi->hd", Wk, bq), axis=-1))

        # OV circuit Wo_h Wv_h = Qo (Ro Rv^T) Qv^T
        ov_sv = np.linalg.svd(Ro @ np.swapaxes(Rv, 1, 2), compute_uv=False)
        put(sp, "ov_sv", ov_sv)
        put(sc, "ov_norm", np.sqrt((ov_sv**2).sum(-1)))
        put(sc, "ov_erank", effective_rank(ov_sv))

    scalars = {k: np.stack(v) for k, v in sc.items()}
    spectra = {k: np.stack(v) for k, v in sp.items()}
    order = [k for k in WEIGHT_FEATURE_DOCS if k in scalars]
    scalars = {k: scalars[k] for k in order}
    return WeightGeometry(
        n_layers=L,
        n_heads=H,
        d_model=d,
        head_dim=dh,
        scalars=scalars,
        spectra=spectra,
        params={"rank_rtol": rank_rtol, "sym_rtol": sym_rtol},
    )


# -------------------------------------------------------------------------------------------
# Queries, keys, values and attention for one layer (correct and faithful)
# -------------------------------------------------------------------------------------------
def attention_deviation(A_faithful, A_correct, rows=None) -> dict[str, np.ndarray]:
    """Per-head difference between two attention stacks ``[..., H, T, T]``.

    Returns ``mean_abs`` (mean |A_f - A_c|), ``max_abs``, and ``row_tv`` (mean over query rows of
    the total-variation distance ``0.5 * sum_j |A_f - A_c|``), each ``[..., H]``. ``rows``: ``[T]``
    bool restricts the query rows compared (keys are always all positions).
    """
    Af = to_numpy(A_faithful).astype(np.float64)
    Ac = to_numpy(A_correct).astype(np.float64)
    D = np.abs(Af - Ac)
    if rows is not None:
        D = D[..., np.asarray(rows, bool), :]
    return {
        "mean_abs": D.mean(axis=(-1, -2)),
        "max_abs": D.max(axis=(-1, -2)),
        "row_tv": 0.5 * D.sum(-1).mean(-1),
    }


def compare_faithful_attention(X, lw, attention_mask=None, rows=None) -> dict[str, np.ndarray]:
    """Faithful and correct attention of one layer side by side plus their per-head deviation:
    ``{"faithful": [H,T,T], "correct": [H,T,T], "mean_abs": [H], "max_abs": [H], "row_tv": [H]}``."""
    Af = faithful_attention(X, lw)
    Ac = correct_attention(X, lw, attention_mask=attention_mask)
    out = {"faithful": Af, "correct": Ac}
    out.update(attention_deviation(Af, Ac, rows=rows))
    return out


def head_outputs(A, V) -> np.ndarray:
    """``Z_h = A_h V_h``: ``[..., H, T, T] @ [..., H, T, dh] -> [..., H, T, dh]``."""
    return to_numpy(A).astype(np.float64) @ to_numpy(V).astype(np.float64)


def compute_head_outputs(hidden_states, layer_weights, attentions=None, attention_mask=None):
    """True head outputs of every layer for one sequence: ``[L, H, T, d_head]``.

    ``hidden_states``: ``[L+1, T, d]``; ``attentions``: optional ``[L, H, T, T]`` (the model's);
    else attention is recomputed with :func:`correct_attention`.
    """
    hs = to_numpy(hidden_states)
    Z = []
    for l, lw in enumerate(layer_weights):
        _, _, V = project_qkv(hs[l], lw, bias=True)
        A = (
            correct_attention(hs[l], lw, attention_mask)
            if attentions is None
            else to_numpy(attentions[l])
        )
        Z.append(head_outputs(A, V))
    return np.stack(Z)


# -------------------------------------------------------------------------------------------
# Data geometry (D1-D3) for one input
# -------------------------------------------------------------------------------------------
@dataclass
class DataGeometry:
    """Per-head data-space geometry for one input.

    ``scalars[name]``: ``[L, H]`` (see :data:`DATA_FEATURE_DOCS`); ``spectra``:
    ``attn_sv [L, H, n_v]`` and ``out_sv [L, H, min(n_v, d_head)]`` (descending).
    """

    scalars: dict[str, np.ndarray]
    spectra: dict[str, np.ndarray]
    n_tokens: int
    eps: float
    docs: dict = field(default_factory=lambda: dict(DATA_FEATURE_DOCS))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.scalars[name] if name in self.scalars else self.spectra[name]


def head_data_geometry(
    attentions,
    head_outputs=None,
    rows=None,
    *,
    eps: float = 1e-3,
    dtype=np.float32,
) -> DataGeometry:
    """D1-D3 (see the module's References) for every head of one input.

    ``attentions``: ``[L, H, T, T]`` (or ``[H, T, T]``); ``head_outputs``: optional
    ``[L, H, T, d_head]`` (from :func:`compute_head_outputs`); ``rows``: ``[T]`` bool token set
    (A is restricted to ``A[rows][:, rows]`` and ``Z_h`` to ``Z_h[rows]``); ``None`` = all
    positions (the official code's choice). ``eps``: singular-value threshold of D2.
    All SVDs are done in one batched call (float32 by default).
    """
    A = to_numpy(attentions)
    if A.ndim == 3:
        A = A[None]
    T = A.shape[-1]
    r = np.ones(T, bool) if rows is None else np.asarray(rows, bool)
    n_v = int(r.sum())
    Ar = A[..., r, :][..., :, r].astype(dtype)
    L, H = Ar.shape[:2]
    sv = _svdvals(Ar.reshape(L * H, n_v, n_v)).reshape(L, H, -1).astype(np.float64)
    rank = (sv >= eps).sum(-1)
    sc = {
        "attn_rank": rank,
        "attn_rank_norm": rank / max(n_v, 1),
        "delta_A": np.asarray(cone_index(Ar, normalized=True)),
    }
    spectra = {"attn_sv": sv}
    if head_outputs is not None:
        Z = to_numpy(head_outputs)
        if Z.ndim == 3:
            Z = Z[None]
        Zr = Z[..., r, :].astype(dtype)
        zs = _svdvals(Zr.reshape(L * H, n_v, Zr.shape[-1])).reshape(L, H, -1).astype(np.float64)
        e = zs**2
        tot = e.sum(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            sc["out_energy_top1"] = np.where(tot > 0, e[..., 0] / np.where(tot > 0, tot, 1), np.nan)
        sc["delta_out"] = np.asarray(cone_index(Zr, normalized=True))
        spectra["out_sv"] = zs
    else:
        sc["out_energy_top1"] = np.full((L, H), np.nan)
        sc["delta_out"] = np.full((L, H), np.nan)
    return DataGeometry(scalars=sc, spectra=spectra, n_tokens=n_v, eps=eps)


# -------------------------------------------------------------------------------------------
# Joint query-key PCA (AttentionViz style)
# -------------------------------------------------------------------------------------------
@dataclass
class JointQKProjection:
    """Joint 2-D (or k-D) PCA of one head's queries and keys.

    ``q_coords [T_q, k]``, ``k_coords [T_k, k]``, ``explained_variance_ratio [k]``;
    ``normalized``: whether the AttentionViz translation/scaling was applied (``scale`` = c).
    """

    q_coords: np.ndarray
    k_coords: np.ndarray
    explained_variance_ratio: np.ndarray
    normalized: bool
    scale: float


def joint_qk_pca(Q, K, *, n_components: int = 2, normalize: bool = False) -> JointQKProjection:
    """Joint PCA of one head's queries ``Q [T, dh]`` and keys ``K [T', dh]`` (stacked).

    ``normalize=True`` applies the AttentionViz trick, which leaves every attention row
    unchanged: queries are scaled by ``c`` and keys by ``1/c`` so that both have the same mean
    norm (dot products unchanged), then keys are translated so that their centroid equals the
    queries' centroid (``q·(k + t) = q·k + q·t`` is constant over keys, so the softmax is
    unchanged). Translating last makes the two centroids coincide in the plot.
    """
    from .projections import pca

    Q = to_numpy(Q).astype(np.float64)
    K = to_numpy(K).astype(np.float64)
    c = 1.0
    if normalize:
        qn = np.linalg.norm(Q, axis=1).mean()
        kn = np.linalg.norm(K, axis=1).mean()
        if qn > 0 and kn > 0:
            c = float(np.sqrt(kn / qn))
            Q = Q * c
            K = K / c
        K = K - K.mean(0) + Q.mean(0)
    P = pca(np.concatenate([Q, K], axis=0), n_components=n_components)
    return JointQKProjection(
        q_coords=P.coords[: Q.shape[0]],
        k_coords=P.coords[Q.shape[0] :],
        explained_variance_ratio=P.explained_variance_ratio,
        normalized=normalize,
        scale=c,
    )
