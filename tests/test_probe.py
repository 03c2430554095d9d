"""One-vs-all probe: separable vectors score ~1, label noise scores ~0.5, held out every time."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.probe import one_vs_all_probe


def test_separable_layer_scores_one_and_noise_layer_scores_chance():
    rng = np.random.default_rng(0)
    n, d = 60, 8
    labels = np.array(["mu"] * 20 + ["rest"] * 40)
    noise = rng.normal(size=(n, d))
    separable = noise.copy()
    separable[:20, 0] += 10.0  # the class sits far along one axis
    res = one_vs_all_probe(np.stack([noise, separable]), labels, "mu")
    assert res["balanced_accuracy"][1] > 0.95 and res["auc"][1] > 0.97
    assert 0.2 < res["balanced_accuracy"][0] < 0.75  # pure noise: near chance (held out, so no memorising)
    assert res["folds"] == 5 and (res["n_pos"], res["n_neg"]) == (20, 40)


def test_too_few_inputs_raise():
    X = np.zeros((1, 5, 3))
    with pytest.raises(ValueError, match="2 on each side"):
        one_vs_all_probe(X, ["a", "b", "b", "b", "b"], "a")
