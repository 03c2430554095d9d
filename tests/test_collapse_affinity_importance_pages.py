"""The views of rank collapse (Cone Index), the projection kernel between heads (Subspace Directions)
and head importance (the head grid's colours, Gradient importance) open on both bundled models and on
a user's BERT (AppTest), and their set views compute when asked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from plotly_json import plotly_values  # noqa: E402

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SENTENCE = "The cat sat on the mat because it was tired."


def _ok(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _titles(at) -> list[str]:
    return [(json.loads(el.proto.spec)["layout"].get("title") or {}).get("text", "") for el in at.get("plotly_chart")]


def _chart(at, starts: str) -> dict:
    return next(json.loads(el.proto.spec) for el in at.get("plotly_chart")
                if (json.loads(el.proto.spec)["layout"].get("title") or {}).get("text", "").startswith(starts))


def _open(model_id: str, page: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=900)
    at.session_state["model_id"] = model_id
    for k, val in state.items():
        at.session_state[k] = val
    at.run()
    at.switch_page(page).run()
    _ok(at)
    return at


def _press_set_button(at) -> bool:
    buttons = [b for b in at.button if b.label.startswith("Compute over the")]
    if not buttons:
        return False
    buttons[0].click().run()
    _ok(at)
    return True


def _all_views(at_factory, *, compute_sets: bool, layers: int, heads: int, d_head: int):
    """Open the three views of one model; with ``compute_sets`` also run their set parts."""
    at = at_factory("app_pages/cone_index.py")
    at.segmented_control(key="w_cone_section").set_value("collapse").run()
    _ok(at)
    curve = _chart(at, "This input's")
    names = [t["name"] for t in curve["data"] if t.get("name")]
    assert names[:4] == ["full model", "without MLPs (SAN + skip)", "without skips (SAN + MLP)",
                         "attention only (SAN)"] and names[4].startswith("cone index")
    full = plotly_values(curve["data"][0]["y"])
    assert len(full) == layers + 1 and 0 < full[0] <= 1.5
    if compute_sets:
        _press_set_button(at)
        band = _chart(at, "Mean ± std over")
        assert len(plotly_values(band["data"][1]["y"])) == layers + 1
    else:
        assert any(b.label.startswith("Compute over the") for b in at.button)

    at = at_factory("app_pages/subspace_directions.py")
    at.session_state["w_sub_tab"] = "Head-to-head affinity"
    at.run()
    _ok(at)
    heat = _chart(at, "Projection kernel OQ")
    z = np.array(plotly_values(heat["data"][0]["z"]), dtype=float).reshape(layers * heads, layers * heads)
    assert np.isnan(z[-1]).all() and np.isfinite(z[0, heads:]).all()  # the last layer feeds no later head
    at.radio(key="w_pk_pair").set_value("VV").run()
    _ok(at)
    zz = np.array(plotly_values(_chart(at, "Projection kernel VV")["data"][0]["z"]), dtype=float)
    assert np.allclose(np.diag(zz.reshape(layers * heads, -1)), d_head, atol=1e-3)  # a head with itself: d_h
    assert any("random baseline" in t for t in _titles(at))

    at = at_factory("app_pages/attention_heads.py")
    at.selectbox(key="w_feature").set_value("importance:michel").run()
    _ok(at)
    grid = json.loads(at.get("plotly_chart")[0].proto.spec)
    g = np.array(plotly_values(grid["data"][0]["marker"]["color"]), dtype=float)  # a scatter of squares
    assert g.size == layers * heads and np.nanmax(g) > 0
    at.selectbox(key="w_feature").set_value("max_weight").run()
    _ok(at)
    assert any("Voita" in c.value for c in at.caption)
    at.session_state["heads_tab"] = "Gradient importance"
    at.run()
    _ok(at)
    assert any("Head importance (Michel" in m.value for m in at.markdown)
    if compute_sets:
        _press_set_button(at)
        assert any("The set's task" in c.value for c in at.caption)
        tab_grid = _grid_colours(next(json.loads(el.proto.spec) for el in at.get("plotly_chart")
                                      if "mean I_h" in el.proto.spec))
    # the grid's colour: the mean importance over the shipped set, with the set's task (the tab's numbers)
    at.selectbox(key="w_feature").set_value("importance:michel-set").run()
    _ok(at)
    if compute_sets:
        grid = json.loads(at.get("plotly_chart")[0].proto.spec)
        np.testing.assert_allclose(_grid_colours(grid), tab_grid, rtol=1e-6)
        assert any("The set's task" in c.value and "shipped set" in c.value for c in at.caption)
    else:  # not prepared here: the grid waits for its button, which states the estimate
        assert any(b.label.startswith("Compute over the") for b in at.button)
        assert any("Not computed yet for this set" in c.value and "at this input's pace" in c.value
                   for c in at.caption)
    return at


def _grid_colours(spec: dict) -> np.ndarray:
    return np.array(plotly_values(spec["data"][0]["marker"]["color"]), dtype=float)


def test_views_on_minilm_with_their_set_parts():
    _all_views(lambda page: _open("minilm-l6", page, text_value=SENTENCE), compute_sets=True, layers=6, heads=12,
               d_head=32)


def test_views_on_a_users_bert(tiny_bert_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    _all_views(lambda page: _open(str(tiny_bert_dir), page, text_value=SENTENCE), compute_sets=True,
               layers=2, heads=4, d_head=8)


def test_views_on_the_genome_model_open_and_offer_the_set_run():
    from bertgeom.sars_cov_2.variant.spec import genome_set

    at = _all_views(lambda page: _open("sars-cov-2-variant", page, genome_value=genome_set("demo")[0].text),
                    compute_sets=False, layers=6, heads=12, d_head=32)
    assert any("cross-entropy" in c.value for c in at.caption)
