"""The one place a classifier's logits become the probabilities and log-odds any screen shows.

A classifier may carry a softmax temperature T fitted after training (``loaded.extra["temperature"]``,
read from its ``calibration.json`` by the family that loads it; 1.0 when it has none), and every
probability bertgeom shows (pages, tour, what-if, head disabling, the CLI, precompute) is
``softmax(logits / T)``. The call (argmax) is the same for every T. Log-odds are computed from the
logits, so they keep moving where a calibrated probability shows as "> 99.9%".

Generic over model families: the variant case study fits T (:mod:`bertgeom.sars_cov_2.variant.calibration`);
any other classifier gets T = 1, the plain softmax.

References
----------
Guo, Pleiss, Sun & Weinberger 2017, *On calibration of modern neural networks*: temperature scaling
(arXiv:1706.04599 §4.2). docs/methods.md, *Calibrated probabilities and the robustness benchmark*.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bertgeom.models import LoadedModel


def scaled_softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """``softmax(logits / temperature)`` over the last axis (float32)."""
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def temperature_of(loaded: LoadedModel) -> float:
    """The model's calibrated softmax temperature (1.0 when it has none)."""
    return float(loaded.extra.get("temperature", 1.0))


def class_probabilities(loaded: LoadedModel, logits: np.ndarray) -> np.ndarray:
    """The probabilities shown anywhere (page, CSV, JSON, warnings, tour): ``softmax(logits / T)``."""
    return scaled_softmax(logits, temperature_of(loaded))


def class_log_odds(loaded: LoadedModel, logits: np.ndarray) -> np.ndarray:
    """The log-odds ``ln(p / (1 - p))`` of every class under :func:`class_probabilities`, from the
    logits (``z_c/T - logsumexp_{j != c} z_j/T``); same shape as ``logits``."""
    z = np.asarray(logits, dtype=np.float64) / temperature_of(loaded)
    out = np.empty_like(z)
    for c in range(z.shape[-1]):  # a handful of classes
        rest = np.delete(z, c, axis=-1)
        m = rest.max(-1)
        out[..., c] = z[..., c] - (m + np.log(np.exp(rest - m[..., None]).sum(-1)))
    return out
