"""Isotropy of a point cloud: IsoScore and IsoScore*, beside the cone index.

The cone index (``bertgeom.analysis.cone``) asks how narrow a cone the token vectors sit in: it
is an average-cosine measure, so it sees a shared direction (a common mean offset) but not how
evenly the cloud spreads over the dimensions. Rudman et al. argue that average-cosine measures
mislead: a cloud centred away from the origin has a high mean cosine although its variance is
spread evenly over every direction, and a centred cloud squeezed onto a line has a mean cosine near
zero. IsoScore measures the second property only: the share of the space's dimensions that the
cloud's variance uses uniformly, from 0 (all variance along one direction) to 1 (the same variance
in every direction).

For a cloud of ``n`` points in ``d`` dimensions, with ``λ`` the eigenvalues of its covariance
(the variances along its principal axes):

    λ̂ = sqrt(d) · λ / ||λ||₂                       (so an isotropic cloud gives λ̂ = 1)
    δ = ||λ̂ - 1||₂ / sqrt(2 (d - sqrt(d)))          (isotropy defect, 0 ≤ δ ≤ 1)
    φ = (d - δ² (d - sqrt(d)))² / d²                 (fraction of dimensions used, 1/d ≤ φ ≤ 1)
    IsoScore = (d φ - 1) / (d - 1)                   (0 ≤ IsoScore ≤ 1)

With fewer points than dimensions the sample covariance has rank ``n - 1 < d``, so IsoScore cannot
reach 1 even for isotropic data. IsoScore* shrinks the covariance toward a reference ``C0``,
``C = (1 - ζ) Σ + ζ C0``, before the same steps; ``C0`` should come from a larger sample of the same
space (e.g. every token of a set), the identity when nothing better is known.

Everything is numpy and vectorised over a leading stack axis (layers, classes).

References
----------
* W. Rudman, N. Gillman, T. Rayne, C. Eickhoff. *IsoScore: Measuring the Uniformity of Embedding
  Space Utilization.* Findings of ACL 2022, §3 (the six steps above). arXiv:2108.07344.
* W. Rudman, C. Eickhoff. *Stable Anisotropic Regularization* (I-STAR). ICLR 2024, §3 (IsoScore*
  with covariance shrinkage). arXiv:2305.19358.
* M. Bonino, G. Ghione, G. Cirrincione. *The geometry of BERT.* arXiv:2502.12033 (2025), the cone
  index this is shown beside; docs/methods.md, "Isotropy beside the cone index".
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "covariance",
    "isoscore",
    "isoscore_from_covariance",
    "isoscore_star",
    "hidden_state_isoscore_curve",
]


def covariance(points) -> np.ndarray:
    """Sample covariance (divisor ``n - 1``) of ``points`` shaped ``(..., n, d)``: ``(..., d, d)``."""
    X = np.asarray(points, dtype=np.float64)
    if X.ndim < 2:
        raise ValueError("points must be shaped (..., n, d)")
    n = X.shape[-2]
    if n < 2:
        raise ValueError("a covariance needs at least two points")
    centred = X - X.mean(axis=-2, keepdims=True)
    return np.swapaxes(centred, -1, -2) @ centred / (n - 1)


def isoscore_from_covariance(cov) -> np.ndarray | float:
    """IsoScore of a distribution given by its covariance ``(..., d, d)`` (see the module docstring)."""
    C = np.asarray(cov, dtype=np.float64)
    d = C.shape[-1]
    if d < 2:
        raise ValueError("IsoScore needs at least two dimensions")
    variances = np.clip(np.linalg.eigvalsh(C), 0.0, None)  # symmetric: eigenvalues are the variances
    norm = np.linalg.norm(variances, axis=-1, keepdims=True)
    norm = np.where(norm > 0, norm, 1.0)  # a single point: all-zero variances read as one direction
    normalised = np.sqrt(d) * variances / norm
    defect = np.linalg.norm(normalised - 1.0, axis=-1) / np.sqrt(2.0 * (d - np.sqrt(d)))
    used = (d - defect**2 * (d - np.sqrt(d))) ** 2 / d**2
    score = np.clip((d * used - 1.0) / (d - 1.0), 0.0, 1.0)
    return float(score) if score.ndim == 0 else score


def isoscore(points) -> np.ndarray | float:
    """IsoScore of the point cloud ``points`` shaped ``(n, d)``, or a stack ``(..., n, d)``."""
    return isoscore_from_covariance(covariance(points))


def isoscore_star(points, zeta: float = 0.2, reference_covariance=None) -> np.ndarray | float:
    """IsoScore* : IsoScore on the covariance shrunk toward ``reference_covariance`` (identity scaled
    to the sample's mean variance when omitted), ``(1 - zeta) Σ + zeta C0`` with ``0 <= zeta <= 1``."""
    if not 0.0 <= zeta <= 1.0:
        raise ValueError("zeta must lie in [0, 1]")
    sample = covariance(points)
    if reference_covariance is None:
        d = sample.shape[-1]
        mean_variance = np.trace(sample, axis1=-2, axis2=-1) / d
        reference = mean_variance[..., None, None] * np.eye(d)
    else:
        reference = np.asarray(reference_covariance, dtype=np.float64)
    return isoscore_from_covariance((1.0 - zeta) * sample + zeta * reference)


def hidden_state_isoscore_curve(hidden_states, mask=None, *, zeta: float = 0.0) -> np.ndarray:
    """IsoScore (``zeta = 0``) or IsoScore* of the selected tokens at every layer: ``[L+1]``.

    ``hidden_states``: ``[L+1, T, d]`` (one input); ``mask``: ``[T]`` row selection, as for
    ``bertgeom.analysis.cone.hidden_state_cone_curve``. Layers are scored in one batched call.
    """
    hs = np.asarray(hidden_states, dtype=np.float64)
    if hs.ndim != 3:
        raise ValueError(f"hidden_states must be shaped [L+1, T, d], got {hs.shape}")
    if mask is not None:
        hs = hs[:, np.asarray(mask, dtype=bool), :]
    if zeta == 0.0:
        return np.atleast_1d(isoscore(hs))
    return np.atleast_1d(isoscore_star(hs, zeta=zeta))
