"""Temperature scaling of the variant model's probabilities, stored next to its weights.

Why: a fine-tuned BERT's softmax is over- or under-confident (label smoothing, augmentation), and
the classifier page warns when the top probability is low: that warning only means something when
the probability is calibrated. Temperature scaling (Guo et al. 2017, arXiv:1706.04599, §4.2)
divides the logits by one scalar ``T`` fitted by minimising the negative log-likelihood on held-out
genomes; the call (argmax) never changes.

The temperature is fitted on the **calibration split** of the real genomes
(:func:`bertgeom.sars_cov_2.genome.dataset.split_calibration`: never trained on, never evaluated), on the
plain genomes and their perturbations of the wide robustness benchmark
(:func:`bertgeom.sars_cov_2.variant.robustness.wide_perturbations`), so it reflects what the page is shown.
It is written to ``calibration.json`` beside ``model.safetensors`` (versioned, tied to the weights'
hash) and read by :func:`bertgeom.sars_cov_2.variant.load_variant`; :func:`bertgeom.probabilities.class_probabilities`
applies it wherever probabilities are produced.

References: Guo, Pleiss, Sun & Weinberger, "On Calibration of Modern Neural Networks", ICML 2017,
arXiv:1706.04599 (§4.2 temperature scaling).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


CALIBRATION_FILE = "calibration.json"
CALIBRATION_FORMAT = "bertgeom-temperature"
CALIBRATION_VERSION = 1
T_RANGE = (0.05, 20.0)  #: the temperatures searched


def _nll(logits: np.ndarray, y: np.ndarray, t: float, weights: np.ndarray) -> float:
    z = logits / t
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float(-(weights * logp[np.arange(len(y)), y]).sum() / weights.sum())


def fit_temperature(logits: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The ``T`` in :data:`T_RANGE` minimising the (weighted) mean NLL of ``softmax(logits / T)``:
    a log-spaced grid, then golden-section refinement (the NLL is unimodal in log T)."""
    logits = np.asarray(logits, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    grid = np.linspace(np.log(T_RANGE[0]), np.log(T_RANGE[1]), 121)
    vals = [_nll(logits, y, float(np.exp(g)), w) for g in grid]
    i = int(np.argmin(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if _nll(logits, y, float(np.exp(c)), w) < _nll(logits, y, float(np.exp(d)), w):
            b = d
        else:
            a = c
    return float(np.exp((a + b) / 2))


def write_calibration(model_dir: Path, temperature: float, weights_hash: str, fitted_on: dict) -> dict:
    """Write ``calibration.json`` (sorted keys, so identical fits give identical bytes)."""
    record = {"format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION, "method": "temperature scaling",
              "temperature": round(float(temperature), 6), "weights": weights_hash, "fitted_on": fitted_on}
    (Path(model_dir) / CALIBRATION_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def read_temperature(model_dir: Path, weights_hash: str) -> tuple[float, str]:
    """``(temperature, note)`` for a model directory: 1.0 and a note when there is no usable
    calibration (none, another format or version, fitted for other weights)."""
    path = Path(model_dir) / CALIBRATION_FILE
    if not path.is_file():
        return 1.0, "no calibration.json: probabilities are the raw softmax"
    try:
        rec = json.loads(path.read_text())
        t = float(rec["temperature"])
    except (OSError, ValueError, KeyError, TypeError):
        return 1.0, "calibration.json is unreadable: probabilities are the raw softmax"
    if rec.get("format") != CALIBRATION_FORMAT or rec.get("version") != CALIBRATION_VERSION:
        return 1.0, "calibration.json has another format or version: probabilities are the raw softmax"
    if rec.get("weights") != weights_hash:
        return 1.0, "calibration.json was fitted for other weights: probabilities are the raw softmax"
    if not T_RANGE[0] <= t <= T_RANGE[1]:
        return 1.0, f"calibration.json's temperature {t} is out of range: probabilities are the raw softmax"
    return t, f"temperature-scaled (T = {t:.3f}, fitted on the calibration genomes)"


__all__ = ["CALIBRATION_FILE", "CALIBRATION_VERSION", "fit_temperature", "read_temperature",
           "write_calibration"]
