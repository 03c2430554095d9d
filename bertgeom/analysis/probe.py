"""One-vs-all probe: how well one class can be told from the rest from a layer's vectors alone.

For every layer l, a small multilayer perceptron (scikit-learn ``MLPClassifier``, one hidden layer
of 32 ReLU units, inputs standardised) is trained to answer "is this input of class c?" from its
[CLS] vector (or the mean of its content tokens) after layer l.  The score is held out: stratified
k-fold cross-validation (k = min(5, size of the smaller side)) predicts every input from a model
that never saw it, and the **balanced accuracy** ``½ (TPR + TNR)`` of those predictions is reported
(0.5 = chance whatever the class sizes, 1 = perfectly separable), with the ROC AUC of the held-out
probabilities beside it.

A layer whose vectors are the same for every input (the [CLS] embedding before layer 1 is one fixed
vector) carries no information about the class; a probe there can only learn the training folds'
class prior, and cross-validation then scores it *below* chance (a held-out positive leaves fewer
positives in its training folds, so it gets a lower probability than a held-out negative). Such
layers are reported as uninformative (NaN) instead of scored; chance (0.5) holds for the others.

This probe is this tool's design. The paper's notebook (Bonino et al. 2025, arXiv:2502.12033,
case study) trains a classifier on one token position of one variant against the rest; here every
class can be probed, on every layer, with held-out scores. Probing classifiers in general follow
Alain & Bengio 2016 and Hewitt & Liang 2019 (a small probe, so the score reflects the
representation more than the probe).
The silhouette beside it on the Cone page measures geometric separation; the probe measures
*decodability*, which can be high even when classes are not compact clusters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from bertgeom.tables import counted

__all__ = ["ProbeScores", "one_vs_all_probe"]


@dataclass(frozen=True)
class ProbeScores:
    """Held-out scores of one class against the rest, per layer: ``balanced_accuracy [L+1]`` and
    ``auc [L+1]`` (NaN where ``uninformative [L+1]``: every input has the same vector), over
    ``folds`` stratified folds, with the class's ``n_pos`` inputs against ``n_neg``."""

    balanced_accuracy: np.ndarray
    auc: np.ndarray
    uninformative: np.ndarray
    folds: int
    n_pos: int
    n_neg: int


def one_vs_all_probe(features: np.ndarray, labels: Sequence[str], positive: str, *, hidden: int = 32,
                     seed: int = 0, max_iter: int = 600) -> ProbeScores:
    """Held-out one-vs-all scores per layer of ``features [L+1, N, D]`` for the class ``positive``
    (:class:`ProbeScores`; NaN on layers whose vectors are identical for all inputs: see the module
    docstring).
    Raises ValueError when either side has fewer than 2 inputs (no held-out score is possible)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    F = np.asarray(features, dtype=np.float64)
    if F.ndim != 3:
        raise ValueError(f"features must be [layers, inputs, dim], got {F.shape}")
    y = np.array([str(x) == positive for x in labels], dtype=int)
    if y.size != F.shape[1]:
        raise ValueError("one label per input is needed")
    n_pos, n_neg = int(y.sum()), int((1 - y).sum())
    if min(n_pos, n_neg) < 2:
        raise ValueError(f"'{positive}' has {counted(n_pos, 'input')} against {n_neg}: "
                         f"a held-out score needs 2 on each side")
    folds = min(5, n_pos, n_neg)
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    bacc, auc = np.full(F.shape[0], np.nan), np.full(F.shape[0], np.nan)
    spread = np.ptp(F, axis=1).max(axis=-1)  # [L+1]: 0 where every input has the same vector
    scale = np.abs(F).max(axis=(1, 2))
    uninformative = spread <= 1e-6 * np.maximum(scale, 1e-12)
    for l in np.flatnonzero(~uninformative):  # one small model per informative layer
        probe = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(hidden,), max_iter=max_iter,
                                                              random_state=seed))
        with warnings.catch_warnings():  # a few dozen inputs: the optimiser may stop before its tolerance
            warnings.simplefilter("ignore", ConvergenceWarning)
            p = cross_val_predict(probe, F[l], y, cv=cv, method="predict_proba")[:, 1]
        bacc[l] = balanced_accuracy_score(y, p >= 0.5)
        auc[l] = roc_auc_score(y, p)
    return ProbeScores(bacc, auc, uninformative, folds, n_pos, n_neg)
