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
    assert res.balanced_accuracy[1] > 0.95 and res.auc[1] > 0.97
    assert 0.2 < res.balanced_accuracy[0] < 0.75  # pure noise: near chance (held out, so no memorising)
    assert res.folds == 5 and (res.n_pos, res.n_neg) == (20, 40)


def test_too_few_inputs_raise():
    X = np.zeros((1, 5, 3))
    with pytest.raises(ValueError, match="2 on each side"):
        one_vs_all_probe(X, ["a", "b", "b", "b", "b"], "a")


def test_cone_page_shows_the_probe_for_the_variant_set(tiny_variant_dir, tmp_path, monkeypatch):
    import json
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from bertgeom.sars_cov_2.variant.spec import genome_set
    from plotly_json import plotly_values

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = genome_set("demo")[-1].text
    at.run()
    at.switch_page("app_pages/cone_index.py").run()
    at.segmented_control(key="w_cone_section").set_value("distribution").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("What this shows" in c.value and "decoded" in c.value for c in at.caption)
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    curve = next(s for s in specs if "held-out probe score" in (s["layout"].get("title") or {}).get("text", ""))
    for trace in curve["data"][:2]:
        y = np.asarray(plotly_values(trace["y"]), dtype=float)
        # embeddings + 2 layers: the [CLS] embedding is one vector for every input, so it is left blank
        assert y.shape == (3,) and np.isnan(y[0]) and ((0 <= y[1:]) & (y[1:] <= 1)).all()
    chance = next(t for t in curve["data"] if t.get("name") == "chance")  # drawn only where a score exists
    assert plotly_values(chance["x"]) == [1, 2] and plotly_values(chance["y"]) == [0.5, 0.5]
    assert len(at.selectbox(key="w_cone_probe_cls").options) >= 2
    at.run()  # a rerun reads the probe's and the silhouette's typed results back from st.cache_data
    assert not at.exception, [e.value for e in at.exception]
    again = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    assert again == specs


def test_a_layer_with_one_vector_for_every_input_is_uninformative_not_below_chance():
    rng = np.random.default_rng(1)
    labels = np.array(["mu"] * 10 + ["rest"] * 30)
    constant = np.tile(rng.normal(size=(1, 6)), (40, 1))  # like the [CLS] embedding before layer 1
    informative = rng.normal(size=(40, 6))
    informative[:10, 0] += 8.0
    res = one_vs_all_probe(np.stack([constant, informative]), labels, "mu")
    assert res.uninformative.tolist() == [True, False]
    assert np.isnan(res.balanced_accuracy[0]) and np.isnan(res.auc[0])
    assert res.balanced_accuracy[1] > 0.9
