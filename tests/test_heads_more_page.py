"""The further analyses on the Attention Heads page (AppTest): attention flow, two inputs compared,
head disabling over a set, and the top-head domain test — on MiniLM and on the tiny variant model."""

from __future__ import annotations


import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from heads_page import chart_specs, open_heads_page, page_text  # noqa: E402
from plotly_json import plotly_array  # noqa: E402

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "bertgeom_cache_more"))


def _page(tab: str, **state) -> AppTest:
    return open_heads_page(tab, 300, **state)


_specs = chart_specs


_text = page_text


def _grid(at, colour_label: str) -> dict:
    """The head grid whose colour bar is titled ``colour_label``."""
    return next(s for s in _specs(at) if s["data"][0]["type"] == "scatter" and
                s["data"][0].get("marker", {}).get("colorbar", {}).get("title", {}).get("text") == colour_label)


def test_flow_tab_on_minilm_draws_the_library_values(minilm):
    from bertgeom.analysis.flow import attention_flow, rollout
    from bertgeom.trace import run_trace

    at = _page("Attention flow", text_value=SENTENCE, layer=5, head=0)
    assert "What this shows" in _text(at)
    bars = next(s for s in _specs(at) if s["layout"].get("barmode") == "group")
    A = run_trace(minilm, SENTENCE).attentions
    flow = next(plotly_array(d["y"]).astype(float) for d in bars["data"] if d["name"].startswith("flow"))
    roll = next(plotly_array(d["y"]).astype(float) for d in bars["data"] if d["name"].startswith("rollout"))
    np.testing.assert_allclose(flow, attention_flow(A, layers=[5])[5], atol=1e-6)
    np.testing.assert_allclose(roll, rollout(A)[5, 0], atol=1e-6)
    assert any(b.label == "Download CSV" for b in at.get("download_button"))


def test_compare_two_sentences(minilm):
    at = _page("Compare two inputs", text_value=SENTENCE, layer=0, head=0)
    assert at.text_input(key="w_cmpin_text").value == "The dog sat on the mat because it was tired."
    grid = _grid(at, "TV distance")
    tv = plotly_array(grid["data"][0]["marker"]["color"]).astype(float)
    assert (tv > 0).all() and (tv <= 1).all()
    heat = [s for s in _specs(at) if s["data"][0]["type"] == "heatmap"]
    assert len(heat) == 3 and heat[2]["data"][0]["zmid"] == 0
    at.text_input(key="w_cmpin_text").set_value(SENTENCE).run()  # B = A: nothing changes
    grid = _grid(at, "TV distance")
    assert np.allclose(plotly_array(grid["data"][0]["marker"]["color"]).astype(float), 0.0, atol=1e-6)
    at.text_input(key="w_cmpin_text").set_value("The dog sat on the mat because it was tired.").run()
    again = plotly_array(_grid(at, "TV distance")["data"][0]["marker"]["color"]).astype(float)
    np.testing.assert_array_equal(again, tv)  # the typed pair read back from st.cache_data


def test_disabling_over_the_sentences(minilm):
    at = _page("Disable heads", text_value=SENTENCE)
    at.radio(key="w_abl_mode").set_value("Each head, over the set").run()
    at.slider(key="w_abl_set_n").set_value(2).run()
    assert "Run over the set" in [b.label for b in at.button]
    at.button(key="w_abl_set_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    grid = _grid(at, "1 − cos")
    d = plotly_array(grid["data"][0]["marker"]["color"]).astype(float)
    assert (d >= 0).all() and d.max() > 0
    assert any(b.label == "Download CSV" for b in at.get("download_button"))


def test_variant_model_domain_test_flow_window_and_set_disabling(tiny_variant_dir, monkeypatch):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")

    state = {"model_id": str(tiny_variant_dir), "genome_value": genome_set("demo")[-1].text}
    at = _page("Over a set of inputs", **state)
    at.radio(key="w_set_view").set_value("Domain proportions").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Top heads for RBD" in _text(at) and "Bonferroni" in _text(at)
    assert any("domain_test_RBD" in (b.proto.file_name if hasattr(b.proto, "file_name") else "") or
               b.label.startswith("Download the z-test") for b in at.get("download_button"))

    at.session_state["heads_tab"] = "Attention flow"
    at.run()
    assert not at.exception and "first 24 tokens" in _text(at)

    at.session_state["heads_tab"] = "Disable heads"
    at.run()
    at.radio(key="w_abl_mode").set_value("Each head, over the set").run()
    at.button(key="w_abl_set_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(m.label.startswith("Accuracy, all heads") for m in at.metric)
    grid = _grid(at, "Δ")
    assert len(plotly_array(grid["data"][0]["customdata"])) == 8
    assert grid["data"][0]["marker"]["colorscale"]  # diverging change of the true-class probability


def test_gradient_tab_on_the_variant_model_and_minilm_says_why_not(tiny_variant_dir, monkeypatch):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    at = _page("Gradient importance", text_value=SENTENCE)
    assert any("no classification head" in i.value for i in at.info)

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = _page("Gradient importance", model_id=str(tiny_variant_dir), genome_value=genome_set("demo")[-1].text,
               layer=1, head=2)
    assert "What this shows" in _text(at) and "(predicted)" in at.selectbox(key="w_grad_target").format_func(
        at.selectbox(key="w_grad_target").value)
    grid = _grid(at, "|∂L/∂α|")
    g = plotly_array(grid["data"][0]["marker"]["color"]).astype(float)
    assert g.shape == (8,) and (g >= 0).all() and g.max() > 0
    heat = [s for s in _specs(at) if s["data"][0]["type"] == "heatmap"]
    assert heat and len(heat[-1]["data"][0]["x"]) > 400  # the selected head's gradient map over the spike
    one = _grid(at, "I_h")
    at.run()  # a rerun reads the typed results back from st.cache_data (pickled), drawing the same grids
    assert not at.exception, [e.value for e in at.exception]
    np.testing.assert_array_equal(plotly_array(_grid(at, "|∂L/∂α|")["data"][0]["marker"]["color"]).astype(float), g)
    assert _grid(at, "I_h")["data"][0]["marker"]["color"] == one["data"][0]["marker"]["color"]
    at.session_state["heads_tab"] = "Model view"
    at.session_state["w_mv_importance"] = "gradient"  # sized by the same cached gradients
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(c.value.startswith("Most important here") for c in at.caption)


def test_word_toggle_on_the_head_map(minilm):
    from bertgeom.analysis.words import word_groups, word_level
    from bertgeom.trace import run_trace

    text = "Unbelievably, tokenisation splits words."
    at = _page("Head detail", text_value=text, layer=2, head=4)
    at.toggle(key="w_words").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    heat = next(s for s in _specs(at) if s["data"][0]["type"] == "heatmap")
    tr = run_trace(minilm, text)
    group, words = word_groups(tr.tokens)
    assert len(heat["data"][0]["x"]) == len(words) < len(tr.tokens)
    z = plotly_array(heat["data"][0]["z"]).astype(float).reshape(len(words), len(words))
    expected = word_level(tr.attentions[2, 4], group)
    shown = ~np.isnan(z)  # entries below θ are hidden
    np.testing.assert_allclose(z[shown], expected[shown], atol=1e-5)


def test_compare_two_genomes_pairs_every_spike_position(tiny_variant_dir, monkeypatch):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = _page("Compare two inputs", model_id=str(tiny_variant_dir), genome_value=genome_set("demo")[-1].text)
    box = at.selectbox(key="w_cmpin_b")
    assert box.format_func(box.value).split(" — ")[0] in {"GH / pre-VOC", "Lambda", "Mu", "Alpha", "Beta", "Delta",
                                                          "Gamma", "Omicron"}
    assert "427 paired tokens (A has 427, B has 427)" in _text(at)
    assert "differ between A and B (marked *" in _text(at)
    tv = plotly_array(_grid(at, "TV distance")["data"][0]["marker"]["color"]).astype(float)
    assert tv.shape == (8,) and (tv > 0).all()
