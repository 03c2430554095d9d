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


def _alti_set_charts(at) -> dict[str, dict[str, np.ndarray]]:
    """The ALTI set section's three charts by y-axis title: ``{axis title: {series: y}}``."""
    out = {}
    for spec in chart_specs(at):
        title = str(spec["layout"].get("yaxis", {}).get("title", {}).get("text", ""))
        if title in ("mixing share (%)", "Spearman ρ (ALTI vs attention)", "own share after rollout"):
            out[title] = {d["name"]: plotly_array(d["y"]).astype(float) for d in spec["data"] if d.get("name")}
    return out


def _check_alti_set_section(at, loaded, *, recompute: bool = True) -> dict:
    """The toggle opens the section; its lines are the set means of the library's reductions
    (computed again here, or with ``recompute=False`` read from the view's memory, where the page put
    them: the spike genomes' alignment is the cost, not ALTI)."""
    from bertgeom.sets.context_mixing import alti_over_set
    from bertgeom.sets.inputs import shipped_set
    from bertgeom.sets.views import ALTI_SET

    assert "w_alti_set" in [t.key for t in at.toggle] and not _alti_set_charts(at)
    assert "ALTI over the set:" in page_text(at)  # what it costs (or that it is prepared) before it runs
    at.toggle(key="w_alti_set").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    charts = _alti_set_charts(at)
    assert len(charts) == 3
    items = shipped_set(loaded.spec.input_kind)
    want = (alti_over_set(loaded, items) if recompute else
            ALTI_SET.get(loaded, items, around=lambda: pytest.fail("the page did not keep what it computed")))
    share = charts["mixing share (%)"]
    np.testing.assert_allclose(share["ALTI (1 − self)"], 100 * (1 - want["alti_self"]).mean(axis=0),
                               atol=1e-3)
    assert {"Attn-W", "AttnResLn-N"} <= set(share)
    rank = charts["Spearman ρ (ALTI vs attention)"]
    np.testing.assert_allclose(rank["mean over output tokens"], np.nanmean(want["rank_agreement"], axis=0),
                               atol=1e-5)
    np.testing.assert_allclose(rank["row of [CLS]"], np.nanmean(want["rank_agreement_first"], axis=0),
                               atol=1e-5)
    own = charts["own share after rollout"]
    np.testing.assert_allclose(own["ALTI rollout"], want["rollout_self"].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(own["attention rollout (r = 0.5)"], want["attention_rollout_self"].mean(axis=0),
                               atol=1e-5)
    assert "Reconstructed" in page_text(at) and "Spearman" in page_text(at)
    assert any(b.label == "Download CSV" and "alti" in b.key for b in at.get("download_button")
               if getattr(b, "key", None))
    return want


def test_the_alti_set_section_on_minilm(minilm):
    at = open_heads_page("Context mixing", 600, text_value=SENTENCE, layer=0, head=0)
    want = _check_alti_set_section(at, minilm)
    assert want["tokens"].size == 24
    # MiniLM's residual keeps most of each token: ALTI's mixing share sits far below the weights' Attn-W
    share = _alti_set_charts(at)["mixing share (%)"]
    assert (share["ALTI (1 − self)"] < share["Attn-W"] - 30).all()


def test_the_alti_set_section_on_the_tiny_variant_model(tiny_variant, tiny_variant_dir, monkeypatch):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = open_heads_page("Context mixing", 600, model_id=str(tiny_variant_dir),
                         genome_value=genome_set("demo")[-1].text, layer=1, head=0)
    want = _check_alti_set_section(at, tiny_variant, recompute=False)
    assert (want["tokens"] > 400).all()  # whole spike genomes


def test_the_alti_set_section_on_a_users_bert(tiny_bert, tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = open_heads_page("Context mixing", 300, model_id=str(tiny_bert_dir), text_value=SENTENCE, layer=1, head=3)
    want = _check_alti_set_section(at, tiny_bert)
    assert want["alti_self"].shape[1] == 2


def test_the_alti_set_section_on_the_shipped_genome_model():
    """The bundled genome model's own ALTI over its 35 shipped genomes (about 90 s on 2 quiet cores: in
    the slow tier, tests/conftest.py SLOW_TIER); the genome model agrees with attention rollout on how
    it ranks each token's sources, unlike MiniLM's top layer (docs/methods.md)."""
    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant.spec import VARIANT_MODEL_ID, genome_set

    at = open_heads_page("Context mixing", 1800, model_id=VARIANT_MODEL_ID, genome_value=genome_set("demo")[0].text,
                         layer=5, head=0)
    want = _check_alti_set_section(at, load_model(VARIANT_MODEL_ID), recompute=False)
    assert (want["tokens"] > 400).all() and want["alti_self"].shape == (want["tokens"].size, 6)
    assert (np.nanmean(want["rank_agreement"], axis=0) > 0.3).all()
