"""The completed Attention Heads page (AppTest, no browser) and its cached set computations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertgeom.figures.base import picked_head
from heads_page import chart_specs, open_heads_page, page_text

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "bertgeom_cache"))


def _page(tab: str = "Head detail", **state) -> AppTest:
    return open_heads_page(tab, 240, **state)


_chart_specs = chart_specs


_text = page_text


def _variant_state(tiny_variant_dir) -> dict:
    from bertgeom.sars_cov_2.variant.spec import genome_set

    return {"model_id": str(tiny_variant_dir), "genome_value": genome_set("demo")[-1].text}


# ------------------------------------------------------------------------------------------
# MiniLM (English)
# ------------------------------------------------------------------------------------------


def test_minilm_labels_find_prev_next_and_cls_heads_with_their_values():
    at = _page("All heads", text_value=SENTENCE, layer=0, head=2)
    text = _text(at)
    assert "reconstructions" in text  # the caveat is on the page
    assert "**attend to prev** (previous-token mass): L1 H3" in text
    assert "**attend to next** (next-token mass): L2 H9" in text
    assert "**attend to [CLS]** ([CLS] mass):" in text
    assert "attend to [SEP]: no head passes the threshold (strongest [SEP] mass:" in text
    # the selected head's labels and feature vector sit beside the grid
    assert "Clark: **attend to prev**" in text
    vector = _chart_specs(at)[1]
    assert vector["data"][0]["type"] == "bar" and "attention to previous token" in vector["data"][0]["y"]
    table = at.dataframe[0].value
    assert len(table) == 72 and {"kovaleva", "gate", "clark", "prev", "next"} <= set(table.columns)
    import json

    titles = {c: v.get("label") for c, v in json.loads(at.dataframe[0].proto.columns).items()}  # on screen: words
    assert titles["prev"] == "attention to previous token" and titles["kovaleva_conf"] == "Kovaleva confidence"
    assert not [t for t in titles.values() if t and "_" in t], titles
    assert any(b.label.startswith("Download the table") for b in at.get("download_button"))


def test_grid_colour_picker_offers_label_categories():
    at = _page(text_value=SENTENCE)
    at.selectbox(key="w_feature").set_value("label:clark").run()
    assert not at.exception
    grid = _chart_specs(at)[0]
    names = {tr.get("name") for tr in grid["data"]}
    assert {"attend to prev", "attend to next", "attend to [CLS]"} <= names


def test_minilm_over_the_shipped_sentences_is_cached_on_disk(monkeypatch):
    from bertgeom.runtime import cache_dir
    from bertgeom.ui import heads_cache as hc

    at = _page("Over a set of inputs", text_value=SENTENCE, layer=1, head=8)
    assert "**24** inputs analysed" in _text(at)
    heat = [c for c in _chart_specs(at) if c["data"][0]["type"] == "heatmap"][0]
    assert heat["data"][0]["x"][0] == "pos 0"  # class-mean map over positions
    at.radio(key="w_set_view").set_value("Feature distributions").run()
    assert not at.exception
    text = _text(at)
    assert "Clark behaviours on the mean over all inputs" in text and "L2 H9" in text and "L1 H3" in text
    specs = _chart_specs(at)
    assert any(s["data"][0]["type"] == "violin" for s in specs) and any(s["data"][0]["type"] == "box" for s in specs)
    # a second visit is instant: memory, then the disk cache (no model pass, no progress callbacks)
    assert list(Path(cache_dir()).glob("*.npz"))
    from bertgeom.sets.views import HEADS_SET

    HEADS_SET.memo.clear()
    from bertgeom.ui.cache import cached_model

    summary = HEADS_SET.get(*hc.set_args(cached_model("minilm-l6")),
                            around=lambda: pytest.fail("recomputed what is on disk"))
    assert summary.n == 24 and summary.arrays["js"].shape == (72, 72)


def test_selecting_a_head_shows_it_everywhere():
    at = _page("Head similarity", text_value=SENTENCE, layer=2, head=3)
    specs = _chart_specs(at)
    grid, mds = specs[0], next(s for s in specs if s["layout"].get("xaxis", {}).get("title", {}).get("text") == "MDS 1")
    assert grid["data"][-1]["customdata"] == [[2, 3]]  # ring on the grid
    assert mds["data"][-1]["customdata"] == [[2, 3]] and mds["data"][-1]["text"] == ["L3 H4"]
    assert at.number_input(key="w_layer").value == 3 and at.number_input(key="w_head").value == 4
    # a click on any MDS point selects the head named in its hover text
    for tr in mds["data"][:-1]:
        for cd, ht in zip(tr["customdata"][:3], tr["hovertext"][:3]):
            l, h = picked_head({"selection": {"points": [{"customdata": cd}]}})
            assert ht.startswith(f"L{l + 1} H{h + 1}")
    # the widgets move the selection, and the map follows
    at.number_input(key="w_head").set_value(6).run()
    mds = next(s for s in _chart_specs(at) if s["layout"].get("xaxis", {}).get("title", {}).get("text") == "MDS 1")
    assert mds["data"][-1]["customdata"] == [[2, 5]] and at.session_state["head"] == 5
    at.session_state["heads_tab"] = "Head detail"
    at.run()
    assert "#### L3 H6 — who attends to whom" in [m.value for m in at.markdown]


def test_disable_heads_on_minilm_moves_the_cls_vector():
    at = _page("Disable heads", text_value=SENTENCE, layer=0, head=2)
    assert at.multiselect(key="w_abl_heads").value == ["L1 H3"]
    cos = float(at.metric[0].value)
    assert 0 < cos < 1
    at.radio(key="w_abl_mode").set_value("Each layer alone (sweep)").run()
    at.button(key="w_abl_run").click().run()
    assert not at.exception
    bars = [s for s in _chart_specs(at) if s["data"][0]["type"] == "bar" and isinstance(s["data"][0]["x"], list)
            and s["data"][0]["x"][:1] == ["L1"]]
    assert bars and len(bars[0]["data"][0]["x"]) == 6
    at.run()  # the sweep's typed result read back from st.cache_data draws the same bars
    assert not at.exception and [s for s in _chart_specs(at) if s == bars[0]]
    at.radio(key="w_abl_mode").set_value("Chosen heads").run()  # and the ablation's, the same cosine
    assert not at.exception and float(at.metric[0].value) == cos


def test_similarity_metric_mds_and_clusters_on_the_set():
    at = _page("Head similarity", text_value=SENTENCE)
    at.radio(key="w_sim_scope").set_value("The shipped set").run()
    at.radio(key="w_sim_mds").set_value("metric").run()
    at.radio(key="w_sim_colour").set_value("k-means cluster").run()
    assert not at.exception
    assert "JS summed over 24 inputs" in _text(at)
    assert len(at.dataframe[0].value) == 5  # k = 5 cluster centres


# ------------------------------------------------------------------------------------------
# tiny random model and the tiny variant model
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tab", ["Head detail", "All heads", "Head similarity", "Disable heads", "Compare checkpoints"])
def test_tiny_random_model_every_tab(tab):
    at = _page(tab, text_value=SENTENCE, model_id="tiny-random")
    assert len(_chart_specs(at)[0]["data"][0]["customdata"]) == 8
    if tab == "Compare checkpoints":
        assert "other installed checkpoints has this model's shape" in _text(at)


def test_variant_model_domains_set_statistics_ablation_and_comparison(tiny_variant_dir, tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    state = _variant_state(tiny_variant_dir)
    at = _page("Head detail", **state)
    heat = [s for s in _chart_specs(at) if s["data"][0]["type"] == "heatmap"][0]
    cats = heat["data"][0]["x"]
    assert len(cats) > 400 and any(c.endswith("· RBD") for c in cats)  # amino-acid ranges, domain on hover
    ticks = heat["layout"]["xaxis"]["ticktext"]
    assert "631-634" in ticks or any("-" in t for t in ticks)

    at.session_state["heads_tab"] = "Over a set of inputs"
    at.run()
    assert not at.exception and "predicted correctly" in _text(at)
    at.radio(key="w_set_view").set_value("Domain proportions").run()
    assert not at.exception and "Share of the class-mean attention" in _text(at)
    grid = next(s for s in _chart_specs(at)
                if s["data"][0]["type"] == "scatter" and "% on RBD" in json.dumps(s["data"][0].get("marker", {})))
    assert len(grid["data"][0]["customdata"]) == 8

    at.session_state["heads_tab"] = "Disable heads"
    at.run()
    assert not at.exception
    probs = [s for s in _chart_specs(at) if s["layout"].get("barmode") == "group"]
    assert probs and len(probs[0]["data"][0]["y"]) == 8  # 8 classes before / after (horizontal bars)

    at.session_state["heads_tab"] = "Compare checkpoints"
    at.run()
    assert "Heads are compared one to one between checkpoints of the same shape" in _text(at)
    at.text_input(key="w_cmp_custom").set_value(str(tiny_bert_dir)).run()
    assert not at.exception
    assert at.selectbox(key="w_cmp_partner").value == str(tiny_bert_dir)
    heat = [s for s in _chart_specs(at) if s["data"][0]["type"] == "heatmap"]
    assert len(heat) == 2  # this model vs the other checkpoint, same head and layer input


# ------------------------------------------------------------------------------------------
# pure helpers behind the set statistics
# ------------------------------------------------------------------------------------------


def test_domain_masses_partition_the_zeroed_attention(tiny_variant):
    from bertgeom.sars_cov_2.variant.spec import genome_set
    from bertgeom.trace import run_trace
    from bertgeom.sets.heads import domain_masses

    trace = run_trace(tiny_variant, genome_set("demo")[0].text)
    mass, hi = domain_masses(trace.attentions, trace.encoded, theta=0.0)
    A = trace.attentions[..., :-1, :-1]  # [SEP] is the last token: its row and column are removed
    np.testing.assert_allclose(mass.sum(-1), A.sum((-1, -2)), rtol=1e-5)
    np.testing.assert_allclose(hi, mass, rtol=1e-5)  # theta = 0 keeps every positive weight
    assert mass.shape[-1] == 13  # 12 fine domains + [CLS]


def test_js_rows_subsample_long_inputs_only(minilm):
    from bertgeom.trace import run_trace
    from bertgeom.sets.heads import js_rows_for

    short = run_trace(minilm, SENTENCE).encoded
    assert js_rows_for(short) is None

    class Long:
        n_tokens = 400
        is_cls = np.r_[True, np.zeros(399, bool)]
        is_sep = np.r_[np.zeros(399, bool), True]

    rows = js_rows_for(Long, 24)
    assert rows.size == 24 and rows.min() >= 1 and rows.max() <= 398


def test_class_mean_pads_zeroes_and_averages_like_the_paper(minilm):
    from bertgeom.tokens import TokenKinds
    from bertgeom.sets.inputs import sentence_set
    from bertgeom.trace import run_trace
    from bertgeom.sets.heads import class_mean_over_set

    items = sentence_set()[:2]
    cm = class_mean_over_set(minilm, items)
    traces = [run_trace(minilm, it.text) for it in items]
    T = max(t.encoded.n_tokens for t in traces)
    expected = np.zeros((6, 12, T, T))
    for t in traces:
        n = t.encoded.n_tokens
        keep = ~np.asarray(TokenKinds(t.encoded.is_cls, t.encoded.is_sep, t.encoded.is_punct).is_sep)
        expected[..., :n, :n] += t.attentions * keep[:, None] * keep[None, :]
    expected /= 2
    assert cm.n == 2 and cm.mean.shape == (6, 12, T, T) and cm.labels[0] == "pos 0"
    np.testing.assert_allclose(cm.mean.astype(np.float64), expected, atol=2e-3)  # stored as float16
    assert not cm.mean.flags.writeable
