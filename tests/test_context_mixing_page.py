"""The Attention Heads page's *Context mixing* tab (AppTest) draws the library's values, on MiniLM, on the
shipped genome model and on a user's BERT."""

from __future__ import annotations

import numpy as np
import pytest

from heads_page import chart_specs, open_heads_page, page_text
from plotly_json import plotly_array

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "bertgeom_cache_mixing"))


def _lines(at) -> dict[str, np.ndarray]:
    spec = next(s for s in chart_specs(at) if "mixing ratio" in str(s["layout"].get("yaxis", {}).get("title")))
    return {d["name"]: plotly_array(d["y"]).astype(float) for d in spec["data"]}


def _bars(at) -> dict[str, np.ndarray]:
    spec = next(s for s in chart_specs(at) if s["layout"].get("barmode") == "group")
    return {d["name"]: plotly_array(d["y"]).astype(float) for d in spec["data"]}


def _heatmaps(at) -> list[np.ndarray]:
    return [plotly_array(s["data"][0]["z"]).astype(float) for s in chart_specs(at) if s["data"][0]["type"] == "heatmap"]


def test_minilm_tab_draws_the_library_values(minilm):
    import bertgeom
    from bertgeom.analysis import context_mixing as cm
    from bertgeom.analysis.flow import rollout_row

    at = open_heads_page("Context mixing", 300, text_value=SENTENCE, layer=3, head=2)
    assert "What this shows" in page_text(at) and "Reconstructed" in page_text(at)
    trace = bertgeom.trace(minilm, SENTENCE)
    ratios = cm.mixing_ratios(trace)
    lines = _lines(at)
    for variant in cm.MIXING_VARIANTS:
        np.testing.assert_allclose(lines[variant], 100 * ratios[variant].mean(axis=-1), atol=1e-4)
    bars = _bars(at)
    roll = cm.alti_rollout(cm.alti(trace))
    np.testing.assert_allclose(bars["ALTI rollout"], roll[3, 0], atol=1e-6)
    np.testing.assert_allclose(bars["attention rollout (r = 0.5)"], rollout_row(trace.attentions, 0)[3], atol=1e-6)
    maps = _heatmaps(at)  # raw attention, the chosen measure (whole block, rows to 1), the head's norm map
    np.testing.assert_allclose(maps[0], trace.attentions[3].mean(axis=0), atol=1e-6)
    block = cm.block_norms(trace)[3]
    np.testing.assert_allclose(maps[1], block / block.sum(axis=-1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(maps[2], cm.norm_attention(trace, layer=3)[2], rtol=1e-5, atol=1e-6)

    at.radio(key="w_mix_map").set_value("ALTI (rows sum to 1)").run()
    assert not at.exception
    np.testing.assert_allclose(_heatmaps(at)[1], cm.alti(trace)[3], atol=1e-6)
    at.selectbox(key="w_mix_target").set_value(4).run()
    assert not at.exception
    np.testing.assert_allclose(_bars(at)["ALTI rollout"], roll[3, 4], atol=1e-6)
    assert any(b.label == "Download CSV" for b in at.get("download_button"))


def test_shipped_genome_model_opens_the_tab():
    from bertgeom.sars_cov_2.variant.spec import VARIANT_MODEL_ID, genome_set

    at = open_heads_page("Context mixing", 600, model_id=VARIANT_MODEL_ID, genome_value=genome_set("demo")[0].text,
                         layer=5, head=0)
    lines = _lines(at)
    assert set(lines) == {"Attn-W", "Attn-N", "AttnRes-W", "AttnRes-N", "AttnResLn-N"}
    assert all(v.shape == (6,) for v in lines.values())
    # the residual and LayerNorm keep most of each token: the whole block mixes less than the weights say
    assert lines["AttnResLn-N"].mean() < lines["Attn-W"].mean()
    assert _bars(at)["ALTI rollout"].shape[0] > 400


def test_a_users_bert_opens_the_tab(tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = open_heads_page("Context mixing", 300, model_id=str(tiny_bert_dir), text_value=SENTENCE, layer=1, head=3)
    assert all(v.shape == (2,) for v in _lines(at).values())
    bars = _bars(at)["ALTI rollout"]
    assert abs(bars.sum() - 1) < 1e-5


def test_the_set_section_draws_the_set_means(minilm):
    from bertgeom.sets.context_mixing import mixing_over_set
    from bertgeom.sets.inputs import shipped_set

    at = open_heads_page("Context mixing", 600, text_value=SENTENCE, layer=0, head=0)
    at.toggle(key="w_mix_set").set_value(True).run()
    assert not at.exception
    spec = next(s for s in chart_specs(at) if "inputs" in str(s["layout"].get("title", {}).get("text", ""))
                and s["data"][0]["type"] == "scatter" and "mixing ratio" in str(s["layout"].get("yaxis", {})))
    items = shipped_set("text")
    want = mixing_over_set(minilm, items)
    got = {d["name"]: plotly_array(d["y"]).astype(float) for d in spec["data"]}
    np.testing.assert_allclose(got["AttnResLn-N"], 100 * want["mixing"][4].mean(axis=0), atol=1e-3)
    assert want["tokens"].size == len(items)
