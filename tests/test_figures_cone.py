"""Figures of the Cone Index per Layer page (pure plotly, no Streamlit)."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.figures import cone as fc


def _y(trace) -> np.ndarray:
    return np.asarray(trace.y, dtype=float)


def test_cone_curve_has_raw_and_normalised_panels_with_isotropic_references():
    I = np.array([3.0, 5.0, 8.0, 9.0])
    fig = fc.cone_curve({"input": I}, 16, title="t")
    names = [t.name for t in fig.data]
    assert names.count("input") == 2  # one per panel
    lines = [t for t in fig.data if t.name and "isotropic" in t.name]
    assert len(lines) == 2
    assert _y(lines[0])[0] == pytest.approx(4.0) and _y(lines[1])[0] == pytest.approx(0.25)
    np.testing.assert_allclose(_y(fig.data[1]), I / 16)  # normalised panel = I / m
    assert fig.layout.yaxis2.range == (0, 1.05)
    no_ref = fc.cone_curve(I, 16, raw_reference=False, normalized_curves={"I": I / 30})
    assert len([t for t in no_ref.data if t.name and "isotropic" in t.name]) == 1
    np.testing.assert_allclose(_y(no_ref.data[1]), I / 30)


def test_stream_curves_draw_per_head_streams_as_mean_with_band():
    heads = np.array([[0.1, 0.3], [0.2, 0.6]])
    fig = fc.stream_curves({"layer_input": np.array([0.5, 0.4]), "head_output": heads},
                           {"layer_input": "X", "head_output": "Z"}, 25)
    line = [t for t in fig.data if t.name == "Z" and t.mode == "lines+markers"][0]
    np.testing.assert_allclose(_y(line), [0.2, 0.4])
    band = [t for t in fig.data if t.fill == "toself"][0]
    np.testing.assert_allclose(_y(band), [0.3, 0.6, 0.2, 0.1])  # max forward, min backward
    ref = fig.data[-1]
    assert ref.name == "isotropic reference" and _y(ref)[0] == pytest.approx(0.2)
    assert list(fig.data[-2].x) == [1, 2]  # streams sit at layers 1..L
    assert "isotropic reference" not in [t.name for t in fc.stream_curves({"x": np.ones(2)}, {}, 4,
                                                                          reference=False).data]


def test_head_heatmap_shape_and_axes():
    v = np.arange(12, dtype=float).reshape(3, 4)
    fig = fc.head_heatmap(v, zrange=(0, 1))
    hm = fig.data[0]
    assert np.asarray(hm.z).shape == (3, 4) and list(hm.x) == [1, 2, 3, 4] and list(hm.y) == [1, 2, 3]
    assert (hm.zmin, hm.zmax) == (0, 1)


def test_class_curves_mean_sd_per_class_in_order():
    values = np.array([[1.0, 2.0], [3.0, 4.0], [10.0, 10.0]])
    groups = np.array(["b", "b", "a"])
    fig = fc.class_curves(values, groups, order=["b", "a", "c"], display={"b": "Beta"}, reference=0.5)
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in lines] == ["Beta (n=2)", "a (n=1)"]
    np.testing.assert_allclose(_y(lines[0]), [2.0, 3.0])
    np.testing.assert_allclose(np.asarray(lines[0].customdata)[:, 0], [1.0, 1.0])  # sd
    bands = [t for t in fig.data if t.fill == "toself"]
    np.testing.assert_allclose(_y(bands[0]), [3.0, 4.0, 2.0, 1.0])
    assert fig.data[-1].name == "isotropic reference" and _y(fig.data[-1]).tolist() == [0.5, 0.5]


def test_histogram_counts_share_bins_and_count_everything():
    rng = np.random.default_rng(0)
    a, b = rng.random(30), rng.random(12) + 0.5
    edges, counts = fc.histogram_counts({"a": a, "b": b}, bins=20)
    assert len(edges) == 21 and edges[0] == pytest.approx(min(a.min(), b.min()))
    assert counts["a"].sum() == 30 and counts["b"].sum() == 12
    e2, c2 = fc.histogram_counts({"c": np.full(5, 0.3)}, bins=20)  # constant values still bin
    assert c2["c"].sum() == 5 and e2[0] < 0.3 < e2[-1]


def test_layer_histograms_one_panel_per_layer_and_one_step_line_per_group():
    series = {"x": np.random.default_rng(1).random((10, 5)), "y": np.random.default_rng(2).random((4, 5))}
    fig = fc.layer_histograms(series, panel_titles=[f"layer {i}" for i in range(5)], cols=3)
    assert len(fig.data) == 10 and all(t.line.shape == "hv" for t in fig.data)
    assert [a.text for a in fig.layout.annotations] == [f"layer {i}" for i in range(5)]
    assert sum(t.showlegend for t in fig.data) == 2
    assert sum(_y(fig.data[0])[:-1]) == 10  # counts of group x in layer 0


def test_projection_scatter_2d_3d_and_bad_shape():
    X = np.random.default_rng(0).standard_normal((6, 3))
    g = ["a", "a", "b", "b", "c", "c"]
    f2 = fc.projection_scatter(X[:, :2], g, order=["c", "b", "a"], hover=[str(i) for i in range(6)])
    assert [t.name for t in f2.data] == ["c", "b", "a"] and f2.data[0].type == "scatter"
    f3 = fc.projection_scatter(X, g)
    assert f3.data[0].type == "scatter3d" and len(f3.data) == 3
    with pytest.raises(ValueError):
        fc.projection_scatter(np.zeros((3, 4)), ["a"] * 3)


def test_pareto_chart_bars_and_cumulative_line():
    r = np.array([0.5, 0.3, 0.1])
    fig = fc.pareto_chart(r)
    np.testing.assert_allclose(_y(fig.data[0]), [50, 30, 10])
    np.testing.assert_allclose(_y(fig.data[1]), [50, 80, 90])


def test_entropy_figure_and_score_curve():
    v = np.array([[1.0, 3.0], [2.0, 2.0], [0.0, 4.0]])
    fig = fc.entropy_figure({"e": v}, {"e": "E"}, reference={"max": 5.0})
    line = [t for t in fig.data if t.name == "E" and t.mode == "lines+markers"][0]
    np.testing.assert_allclose(_y(line), [2.0, 2.0, 2.0])
    assert fig.data[-1].name == "max"
    s = fc.layer_score_curve({"silhouette": np.array([0.1, 0.5, np.nan])}, selected=1)
    assert len(s.data) == 1 and s.layout.shapes
