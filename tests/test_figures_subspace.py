"""Figure functions of the Subspace Directions page: shapes, customdata, edge cases."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from bertgeom.figures import subspace as fs
from bertgeom.figures.base import matrix_heatmap


def _xy(trace) -> tuple[list, list]:
    return list(np.asarray(trace.x).tolist()), list(np.asarray(trace.y).tolist())


def test_scalar_grid_has_one_clickable_point_per_head_and_survives_nan():
    v = np.arange(12, dtype=float).reshape(3, 4)
    fig = fs.scalar_grid(v, label="alpha", selected=(1, 2))
    grid, sel = fig.data[0], fig.data[-1]
    assert len(grid.x) == 12 and list(grid.customdata[5]) == [1, 1]
    assert list(sel.customdata[0]) == [1, 2]
    allnan = fs.scalar_grid(np.full((2, 2), np.nan), label="x")
    assert allnan.data[0].marker.cmin == 0.0 and allnan.data[0].marker.cmax == 1.0
    const = fs.scalar_grid(np.ones((2, 2)), label="x")
    assert const.data[0].marker.cmax > const.data[0].marker.cmin
    with pytest.raises(ValueError):
        fs.scalar_grid(np.ones(3), label="x")


def test_spectra_angles_and_eigen_figures():
    fig = fs.spectra_figure({"W_Q,h": [3.0, 2.0, 1.0], "W_K,h": [2.0, 1.0, 0.5]}, log_y=True)
    assert [t.name for t in fig.data] == ["W_Q,h", "W_K,h"]
    assert list(fig.data[0].customdata) == [1, 2, 3] and fig.layout.yaxis.type == "log"

    ang = fs.principal_angles_figure(np.radians([0.0, 45.0, 90.0]))
    assert np.allclose(ang.data[0].y, [0, 45, 90]) and list(ang.layout.yaxis.range) == [0, 90]

    eig = fs.sym_eigen_figure(np.array([2.0, 1.0, 1e-12, -0.5]), d_model=10, rtol=1e-6)
    names = {t.name: list(t.customdata) for t in eig.data}
    assert names == {"positive (2)": [1, 2], "negative (1)": [4], "≈ 0 (1)": [3]}
    assert "6 eigenvalues exactly 0" in eig.layout.title.text

    c = fs.complex_eigen_figure(np.array([1 + 2j, 1 - 2j, -0.5]))
    assert len(c.data[0].x) == 3 and list(c.data[0].customdata) == [1, 2, 3]
    assert sorted(np.round(c.data[0].y, 6).tolist()) == [-2.0, 0.0, 2.0]


def test_matrix_heatmap_is_centred_on_zero():
    M = np.array([[1.0, -3.0], [0.5, 2.0]])
    fig = matrix_heatmap(M, title="M", diverging=True)
    hm = fig.data[0]
    assert isinstance(hm, go.Heatmap) and np.asarray(hm.z).shape == (2, 2)
    assert hm.zmin == -3.0 and hm.zmax == 3.0 and hm.zmid == 0.0
    assert list(hm.x) == [1, 2]


def test_attention_spectrum_and_energy():
    sv = np.array([1.0, 0.1, 1e-4])
    fig = fs.attention_spectrum_figure(sv, eps=1e-3, faithful_sv=np.array([1.0, 0.5, 0.2]))
    assert len(fig.data) == 2
    assert "r_ε = 2" in fig.data[0].name and "r_ε = 3" in fig.data[1].name
    en = fs.energy_figure(np.array([3.0, 1.0]))
    assert np.allclose(en.data[0].y, [0.9, 0.1]) and np.allclose(en.data[1].y, [0.9, 1.0])


def test_joint_qk_figure_by_position_and_by_category():
    rng = np.random.default_rng(0)
    Q, K = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    toks = [f"t{i}" for i in range(5)]
    fig = fs.joint_qk_figure(Q, K, toks, explained=[0.5, 0.2])
    assert [t.name for t in fig.data] == ["queries", "keys"]
    assert [list(c) for c in fig.data[1].customdata] == [[i, 1] for i in range(5)]
    assert fig.layout.xaxis.title.text == "PC1 (50%)"
    cats = ["a", "a", "b", "b", "b"]
    fig2 = fs.joint_qk_figure(Q, K, toks, colour_by="category", categories=cats)
    assert len(fig2.data) == 4  # 2 categories x (queries, keys)
    b_keys = [t for t in fig2.data if t.name == "b" and not t.showlegend][0]
    assert [list(c) for c in b_keys.customdata] == [[2, 1], [3, 1], [4, 1]]
    with pytest.raises(ValueError):
        fs.joint_qk_figure(Q, K[:3], toks)
    with pytest.raises(ValueError):
        fs.joint_qk_figure(Q, K, toks, colour_by="category")


def test_histogram_shares_bins_and_counts_every_value():
    fig = fs.histogram_figure({"a": [0.0, 0.5, 1.0], "b": [1.0, 1.0]}, nbins=4)
    a, b = fig.data
    assert sum(a.y) == 3 and sum(b.y) == 2
    assert np.allclose(a.x, b.x) and len(a.x) == 4
    assert a.customdata[0] == "a" and fig.layout.barmode == "overlay"
    single = fs.histogram_figure({"all": [0.7, 0.7, 0.7]})  # constant values still get a bin
    assert sum(single.data[0].y) == 3
    empty = fs.histogram_figure({"all": []})
    assert sum(empty.data[0].y) == 0


def test_histogram_legend_of_eight_classes_has_rows_for_all_of_them():
    """At half the page's width one legend row cut "Gamm…" and hid Omicron (#45): three entries a row,
    the figure grown by its rows, the legend under the axis title inside the bottom margin."""
    names = ["GH", "Lambda", "Mu", "Alpha", "Beta", "Delta", "Gamma", "Omicron"]
    fig = fs.histogram_figure({n: [0.1 * i, 0.2] for i, n in enumerate(names)})
    rows = -(-len(names) // fs.LEGEND_PER_ROW)
    assert rows == 3 and fig.layout.legend.entrywidth == 1 / 3 and fig.layout.legend.entrywidthmode == "fraction"
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    legend_bottom_px = -fig.layout.legend.y * plot_h + 20 * rows  # below the plot area, rows of ~20 px
    assert legend_bottom_px <= fig.layout.margin.b  # inside the figure: no entry falls off its bottom
    one = fs.histogram_figure({"GH": [0.1], "Alpha": [0.2]})
    assert one.layout.height < fig.layout.height


def test_class_box_orders_classes_and_names_points():
    fig = fs.class_box_figure(["omicron", "alpha", "omicron"], {"correct": [1.0, 2.0, 3.0], "faithful": [0, 0, 0]},
                              order=["alpha", "omicron"], names=["s1", "s2", "s3"])
    assert len(fig.data) == 2 and fig.layout.boxmode == "group"
    assert list(fig.data[0].x) == ["alpha", "omicron", "omicron"]
    assert list(fig.data[0].customdata) == ["s2", "s1", "s3"]
    assert list(fig.data[0].y) == [2.0, 1.0, 3.0]


def test_attention_comparison_has_three_panels_and_the_difference():
    Ac = np.eye(3)
    Af = np.full((3, 3), 1 / 3)
    fig = fs.attention_comparison_figure(Ac, Af, ["a", "b", "c"], layer=0, head=1)
    assert len(fig.data) == 3 and "L1 H2" in fig.layout.title.text
    assert np.allclose(np.asarray(fig.data[2].z, dtype=float), Af - Ac, atol=1e-6)
    assert fig.data[2].zmid == 0
    with pytest.raises(ValueError):
        fs.attention_comparison_figure(Ac, Af[:2], ["a", "b", "c"], layer=0, head=0)


def test_faithful_map_has_its_own_colour_scale():
    """A flat faithful map next to a peaked model map must not render blank (#14)."""
    from bertgeom.figures.subspace import attention_comparison_figure

    n = 6
    correct = np.eye(n)
    faithful = np.full((n, n), 1.0 / n)
    fig = attention_comparison_figure(correct, faithful, [str(i) for i in range(n)], layer=0, head=0)
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert heat[0].zmax == 1.0 and abs(heat[1].zmax - 1.0 / n) < 1e-6
