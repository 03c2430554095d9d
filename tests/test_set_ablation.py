"""Head disabling over a set: per-input sweeps match a direct ablation; set measures on known answers."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.sets.ablation import stratified, summarise_sweeps, sweep_over_set
from bertgeom.sets.inputs import InputItem


def test_summary_on_known_answers():
    # 2 inputs, 1 layer x 2 heads, 2 classes; labels a, b
    probs = np.array([
        [[[0.9, 0.1], [0.4, 0.6]]],  # input 0 (a): head 2 disabled flips it to b
        [[[0.2, 0.8], [0.3, 0.7]]],  # input 1 (b): stays b
    ])
    arrays = {"labels": np.array(["a", "b"]), "probs": probs, "base_probs": np.array([[0.8, 0.2], [0.1, 0.9]]),
              "cos": np.array([[[1.0, 0.5]], [[1.0, 0.9]]])}
    s = summarise_sweeps(arrays, ("a", "b"))
    assert s["base_accuracy"] == 1.0 and s["base_true_prob"] == pytest.approx(0.85)
    np.testing.assert_allclose(s["accuracy"], [[1.0, 0.5]])
    np.testing.assert_allclose(s["d_accuracy"], [[0.0, -0.5]])
    np.testing.assert_allclose(s["true_prob"], [[0.85, 0.55]])
    np.testing.assert_allclose(s["d_true_prob"], [[0.0, -0.3]])
    np.testing.assert_allclose(s["d_cls"], [[0.0, 0.3]])
    with pytest.raises(ValueError):
        summarise_sweeps({**arrays, "labels": np.array(["a", "zz"])}, ("a", "b"))


def test_stratified_takes_the_first_of_each_class():
    items = [InputItem(f"g{i}", "x", lab) for i, lab in enumerate("aabbbc")]
    assert [it.name for it in stratified(items, 1)] == ["g0", "g2", "g5"]
    assert [it.name for it in stratified(items, 2)] == ["g0", "g1", "g2", "g3", "g5"]


def test_sweep_over_a_set_matches_direct_ablation(tiny_variant):
    from bertgeom.analysis.ablation import disabled_mask, forward_with_disabled_heads
    from bertgeom.attention import softmax
    from bertgeom.inputs import encode_input
    from bertgeom.sars_cov_2.variant.spec import genome_set

    items = stratified(genome_set("demo"), 1)[:2] + (InputItem("bad", ">bad\nACGT", "alpha"),)
    seen = []
    arrays = sweep_over_set(tiny_variant, items, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (3, 3) and list(arrays["err_names"]) == ["bad"]
    L, H = tiny_variant.num_layers, tiny_variant.num_heads
    assert arrays["probs"].shape == (2, L, H, len(tiny_variant.labels))
    ids = encode_input(tiny_variant, items[1].text).input_ids
    direct = forward_with_disabled_heads(tiny_variant, ids, disabled_mask(L, H, heads=[(1, 2)]))
    np.testing.assert_allclose(arrays["probs"][1, 1, 2], softmax(direct.logits[0]), atol=1e-5)
    s = summarise_sweeps(arrays, tiny_variant.labels)
    assert s["accuracy"].shape == (L, H) and 0 <= s["base_accuracy"] <= 1
