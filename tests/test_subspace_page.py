"""Subspace Directions page: AppTest runs (MiniLM, tiny random BERT, tiny variant model) and the
pure helpers behind its caches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from plotly_json import plotly_values  # noqa: E402

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "app_pages/subspace_directions.py"
SENTENCE = "The cat sat on the mat because it was tired."
TABS = ("Weights (D4)", "This input (D1–D3)", "Across inputs", "Faithful vs correct")


@pytest.fixture(autouse=True)
def _private_disk_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path_factory.mktemp("bgcache")))


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Batched SVDs with several OpenMP threads crawl on a busy 2-core machine (10x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _charts(at) -> dict[str, dict]:
    return {el.key: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def _open(**state) -> AppTest:
    state.setdefault("model_id", "minilm-l6")  # the variant model is the app's default
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(PAGE).run()
    return at


def _tab(at: AppTest, name: str, **state) -> dict[str, dict]:
    at.session_state["w_sub_tab"] = name
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return _charts(at)


def _n(x) -> int:
    return len(plotly_values(x))


def test_minilm_page_shows_every_tab_for_the_example_sentence():
    at = _open(text_value=SENTENCE, layer=2, head=3)
    assert not at.exception and not at.error
    assert at.title[0].value == "Subspace Directions"
    assert any("proposed" in i.value for i in at.info)  # the reconstruction caveat
    assert any("two-minute read" in e.label for e in at.expander)

    w = _charts(at)
    assert {"w_sub_wgrid", "w_sub_sv", "w_sub_angles", "w_sub_symeig", "w_sub_eigc", "w_sub_matrix_fig"} <= set(w)
    grid = w["w_sub_wgrid"]["data"]
    assert _n(grid[0]["x"]) == 6 * 12 and grid[-1]["customdata"] == [[2, 3]]  # selected square
    assert len(w["w_sub_sv"]["data"]) == 4 and _n(w["w_sub_angles"]["data"][0]["y"]) == 32  # d_head = 32
    assert _n(w["w_sub_matrix_fig"]["data"][0]["z"]) == 32  # the d_head x d_head factor
    assert any(d.label == "Download every head (CSV)" for d in at.get("download_button"))

    d = _tab(at, TABS[1])
    assert {"w_sub_dgrid", "w_sub_attn_sv", "w_sub_energy", "w_sub_pca"} <= set(d)
    assert _n(d["w_sub_attn_sv"]["data"][0]["y"]) == 13  # 11 word pieces + [CLS] + [SEP]
    assert [t["name"] for t in d["w_sub_pca"]["data"]] == ["queries", "keys"]

    a = _tab(at, TABS[2], w_sub_across_on=True)
    hists = [k for k in a if k.startswith("w_sub_hist_")]
    assert len(hists) == 4 and "w_sub_box" not in a  # sentences carry no class
    assert sum(plotly_values(a["w_sub_hist_delta_A"]["data"][0]["y"])) == 24  # every shipped sentence counted
    assert "24 of 24 used" in " ".join(e.label for e in at.expander)

    f = _tab(at, TABS[3])
    assert {"w_sub_fgrid", "w_sub_compare"} <= set(f)
    assert len(f["w_sub_compare"]["data"]) == 3

    # faithful mode adds the official code's values next to the correct ones
    d2 = _tab(at, TABS[1], w_sub_faithful=True)
    assert len(d2["w_sub_attn_sv"]["data"]) == 2
    assert at.dataframe[0].value.columns.tolist() == ["quantity", "correct", "faithful"]
    a2 = _tab(at, TABS[2])
    assert [t["name"].split(" (n=")[0] for t in a2["w_sub_hist_delta_A"]["data"]] == ["correct",
                                                                                      "faithful (official code)"]

    # the head boxes select the head everywhere (0-based in the session)
    at.number_input(key="w_head").set_value(7).run()
    assert not at.exception and at.session_state["head"] == 6
    assert at.query_params["head"] == "7"


def test_tiny_random_bert_with_another_head_dimension():
    at = _open(text_value=SENTENCE, model_id="tiny-random")
    assert not at.exception and not at.error
    w = _charts(at)
    assert _n(w["w_sub_wgrid"]["data"][0]["x"]) == 2 * 4
    assert _n(w["w_sub_angles"]["data"][0]["y"]) == 16  # d_head = 64 / 4
    # d = 64 is small enough for the full d x d bilinear form
    at.session_state["w_sub_matrix"] = "M"
    at.run()
    assert not at.exception
    assert _n(_charts(at)["w_sub_matrix_fig"]["data"][0]["z"]) == 64
    a = _tab(at, TABS[2], w_sub_across_on=True, w_sub_eps=1e-2, w_sub_tokens="content")
    assert len([k for k in a if k.startswith("w_sub_hist_")]) == 4

    # choices survive closed tabs and other pages (Streamlit drops the state of undrawn widgets)
    _tab(at, TABS[0], w_sub_wfeature="qk_angle_mean_deg", w_sub_faithful=True)
    _tab(at, TABS[1])
    at.switch_page("app_pages/attention_heads.py").run()
    at.switch_page(PAGE).run()
    _tab(at, TABS[0])
    assert at.selectbox(key="w_sub_wfeature").value == "qk_angle_mean_deg"
    assert at.toggle(key="w_sub_faithful").value is True
    assert at.session_state["w_sub_eps"] == 1e-2


def test_tiny_variant_model_with_a_genome(tiny_variant_dir, monkeypatch):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    demo = genome_set("demo")
    at = _open(model_id=str(tiny_variant_dir), genome_value=demo[-1].text)
    assert not at.exception and not at.error
    assert _n(_charts(at)["w_sub_wgrid"]["data"][0]["x"]) == 2 * 4

    d = _tab(at, TABS[1])
    pca = d["w_sub_pca"]["data"]
    names = {t["name"] for t in pca}
    assert {"RBD", "NTD"} <= names and len(pca) > 4  # coloured by spike domain
    assert pca[0]["customdata"][0][1] == 0  # [position, 0 = query]

    a = _tab(at, TABS[2], w_sub_across_on=True, w_sub_correct_only=False)
    assert "w_sub_box" in a and len([k for k in a if k.startswith("w_sub_hist_")]) == 4
    classes = set(a["w_sub_box"]["data"][0]["x"])
    assert {"Alpha", "Omicron"} <= classes  # the classes' display names, as in every other chart
    box_y = a["w_sub_box"]["layout"]["yaxis"]["title"]["text"]
    assert box_y == "D1 · δ_A" and "delta_A" not in box_y  # was the variable name (#14)
    hist = a["w_sub_hist_delta_A"]["data"]
    assert len(hist) == len(classes)  # one colour per class
    assert any(d.label == "Download CSV" for d in at.get("download_button"))

    f = _tab(at, TABS[3])
    n_tokens = _n(d["w_sub_attn_sv"]["data"][0]["y"])
    assert n_tokens > 100 and _n(f["w_sub_compare"]["data"][2]["z"]) == n_tokens  # [CLS] + k-mers + [SEP]


def test_bad_genome_gets_one_sentence_not_a_traceback(tiny_variant_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = _open(model_id=str(tiny_variant_dir), genome_value=">x\nNNNNNNNNNNACGT")
    assert not at.exception
    assert at.error and "\n" not in at.error[0].value.strip()


# -------------------------------------------------------------------------------------------
# Pure helpers
# -------------------------------------------------------------------------------------------
def test_set_reducer_matches_the_per_input_geometry(tiny_bert):
    from bertgeom.sets.inputs import InputItem, map_over_set
    from bertgeom.trace import run_trace
    from bertgeom.sets import subspace as sc
    from bertgeom.weights import extract_layer_weights

    lws = extract_layer_weights(tiny_bert.model)
    items = (InputItem("a", SENTENCE), InputItem("b", "Dogs bark at night."), InputItem("bad", "   "))
    res = sc.collect_set_result(map_over_set(tiny_bert, items, sc.head_set_reducer(lws, 1, 2, eps=1e-3,
                                                                                   token_set="content"))).to_arrays()
    assert res["delta_A"].shape == (2, 2) and res["names"].tolist() == ["a", "b"]
    assert len(res["errors"]) == 1 and res["errors"][0].startswith("bad:")

    trace = run_trace(tiny_bert, SENTENCE)
    correct, none = sc.data_geometry(trace, lws, eps=1e-3, token_set="content")
    faithful, dev = sc.data_geometry(trace, lws, eps=1e-3, token_set="content", faithful=True)
    assert none is None and dev["row_tv"].shape == (2, 4)
    for k in sc.ACROSS_KEYS:
        assert res[k][0, 0] == pytest.approx(correct.scalars[k][1, 2], rel=1e-4, abs=1e-6), k
        assert res[k][0, 1] == pytest.approx(faithful.scalars[k][1, 2], rel=1e-4, abs=1e-6), k
    assert res["n_tokens"][0] == trace.encoded.content_mask.sum()
    assert res["row_tv"][0] == pytest.approx(sc.data_geometry(trace, lws, token_set="content",
                                                              faithful=True)[1]["row_tv"][1, 2])

    # faithful on the input padded to 512 positions, as the single-input tab computes it
    from bertgeom.sets.cone import padded_runner

    P = min(sc.FAITHFUL_PAD_TO, tiny_bert.max_tokens)
    padded = sc.collect_set_result(map_over_set(tiny_bert, items[:1], sc.head_set_reducer(
        lws, 1, 2, eps=1e-3, token_set="all"),
        runner=padded_runner(P))).to_arrays()  # one padded pass serves both modes
    one, dev1 = sc.data_geometry(trace, lws, eps=1e-3, token_set="all", faithful=True,
                                 padded_hidden=sc.padded_hidden_states(tiny_bert, trace))
    plain_all, _ = sc.data_geometry(trace, lws, eps=1e-3, token_set="all")
    for k in sc.ACROSS_KEYS:
        assert padded[k][0, 1] == pytest.approx(one.scalars[k][1, 2], rel=1e-4, abs=1e-6), k
        assert padded[k][0, 0] == pytest.approx(plain_all.scalars[k][1, 2], rel=1e-4, abs=1e-6), k
    assert padded["row_tv"][0] == pytest.approx(dev1["row_tv"][1, 2], rel=1e-5)
    unpadded = sc.collect_set_result(map_over_set(tiny_bert, items[:1], sc.head_set_reducer(lws, 1, 2,
                                                                                            token_set="all"))).to_arrays()
    assert padded["attn_rank_norm"][0, 1] != pytest.approx(unpadded["attn_rank_norm"][0, 1])  # padding changes D2
    assert padded["attn_rank_norm"][0, 0] == pytest.approx(unpadded["attn_rank_norm"][0, 0])  # the model's own does not

    # the arrays are npz-safe (the disk cache reads them without pickle)
    import io

    buf = io.BytesIO()
    np.savez(buf, **res)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as back:
        assert back["labels"].tolist() == ["", ""]


def test_faithful_differs_from_correct_when_the_model_has_biases(tiny_bert):
    import torch

    from bertgeom.trace import run_trace
    from bertgeom.sets import subspace as sc
    from bertgeom.weights import extract_layer_weights

    trace = run_trace(tiny_bert, SENTENCE)
    lws = extract_layer_weights(tiny_bert.model)
    g = torch.Generator().manual_seed(0)
    biased = [
        type(lw)(**{**lw.__dict__, "b_q": lw.b_q + np.asarray(torch.randn(lw.b_q.shape, generator=g))}) for lw in lws
    ]
    A_f, _ = sc.faithful_stack(trace.hidden_states, biased)
    A_f0, _ = sc.faithful_stack(trace.hidden_states, lws)
    assert np.allclose(A_f, A_f0)  # the official code ignores biases
    _, dev = sc.data_geometry(trace, lws, faithful=True)
    assert (dev["row_tv"] > 1e-4).all()  # transposed slices: another attention
