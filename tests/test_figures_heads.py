"""Pure plotly figures of the Attention Heads page."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio

from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, matrix_heatmap, picked_head, probability_bars
from plotly_json import plotly_array  # noqa: E402


def _json(fig) -> dict:
    return json.loads(pio.to_json(fig))


def test_attention_map_masks_below_theta_and_uses_unique_category_labels():
    a = np.array([[0.7, 0.3, 0.0], [0.1, 0.1, 0.8], [0.5, 0.25, 0.25]], dtype=np.float32)
    fig = fh.attention_map(a, ["[CLS]", "x", "x"], hover_labels=["[CLS]", "1-4 · SP", "4-7 · SP"], theta=0.3)
    tr = fig.data[0]
    z = np.asarray(tr.z, dtype=float)
    assert np.isnan(z[1, 0]) and z[0, 1] == np.float32(0.3) and np.isnan(z[2, 1])
    assert list(tr.x) == ["[CLS]", "1-4 · SP", "4-7 · SP"] and list(tr.y) == list(tr.x)
    assert "%{z" in tr.hovertemplate and tr.text is None  # no T x T hover strings
    assert len(fig.data) == 1  # the heatmap's own x/y register the categories: no marker per position
    assert list(fig.layout.xaxis.ticktext) == ["[CLS]", "x", "x"]
    # duplicate names are made unique; all-masked maps keep their axes
    fig2 = fh.attention_map(a, ["a", "a", "a"], theta=0.95)
    assert len(set(fig2.data[0].x)) == 3 and tuple(fig2.layout.xaxis.range) == (-0.5, 2.5)
    assert len(fig2.data) == 2 and list(fig2.data[1].x) == list(fig2.data[0].x)  # the invisible category trace


def test_long_maps_thin_their_ticks_and_stay_small():
    rng = np.random.default_rng(0)
    a = rng.random((427, 427)).astype(np.float32)
    a /= a.sum(1, keepdims=True)
    fig = fh.attention_map(a, [f"t{i}" for i in range(427)], max_ticks=60)
    assert len(fig.layout.xaxis.tickvals) <= 61
    assert len(pio.to_json(fig)) < 1_500_000  # float32 z, no per-cell hover text


def test_a_titled_map_keeps_its_title_clear_of_long_key_labels():
    """A genome's key labels ("424:1270-1273") stand at -60° above the map: the title is pinned to the
    figure's top and the top margin holds it, the axis title and the labels (in the Context mixing tab
    they ran into each other, docs/screenshot_context_mixing_genome.png before the fix)."""
    n = 427
    labels = ["0:[CLS]"] + [f"{i}:{3 * i - 2}-{3 * i + 1}" for i in range(1, n)]
    a = np.full((n, n), 1.0 / n, dtype=np.float32)
    long = fh.attention_map(a, labels, title="whole block (L5)")
    short = fh.attention_map(a[:3, :3], ["[CLS]", "cat", "[SEP]"], title="Raw attention (L1)")
    for fig in (long, short):
        assert fig.layout.title.yref == "container" and fig.layout.title.y == 1 and fig.layout.title.yanchor == "top"
    longest = max(len(t) for t in long.layout.xaxis.ticktext)
    assert longest == 13 and long.layout.margin.t >= 34 + 28 + 0.87 * 6 * longest  # title + axis title + labels
    assert long.layout.margin.t > short.layout.margin.t >= 110
    assert fh.attention_map(a[:3, :3], ["a", "b", "c"]).layout.title.text is None  # untitled maps add no room


def test_head_scatter_customdata_is_layer_head_and_a_click_selects_that_head():
    coords = np.arange(24, dtype=float).reshape(12, 2)
    fig = fh.head_scatter(coords, 4, categories=["a", "b", "c"] * 4, selected=(1, 2))
    spec = _json(fig)
    for tr in spec["data"][:-1]:
        for cd, ht in zip(tr["customdata"], tr["hovertext"]):
            l, h = cd
            assert ht.startswith(f"L{l + 1} H{h + 1}")
    ring = spec["data"][-1]
    assert ring["customdata"] == [[1, 2]] and plotly_array(ring["x"])[0] == coords[6, 0]
    point = spec["data"][0]
    picked = picked_head({"selection": {"points": [{"customdata": point["customdata"][1]}]}})
    assert picked == tuple(point["customdata"][1])
    # continuous colouring
    fig2 = fh.head_scatter(coords, 4, values=np.arange(12), colour_label="layer")
    assert len(fig2.data) == 1 and fig2.data[0].marker.colorbar.title.text == "layer"


def test_feature_bars_show_values_and_threshold_marks():
    fig = fh.feature_bars(["prev", "next", "cls"], [0.9, 0.05, 0.2], marks={"prev": 0.5, "missing": 0.1})
    assert list(fig.data[0].x) == [0.9, 0.05, 0.2] and list(fig.data[0].text) == ["0.90", "0.05", "0.20"]
    assert list(fig.data[1].x) == [0.5] and list(fig.data[1].y) == ["prev"]


def test_label_charts_distributions_and_lines():
    counts = fh.label_counts({"vertical": 3, "diagonal": 0}, display={"vertical": "Vertical"})
    assert list(counts.data[0].y) == ["Vertical", "diagonal"] and list(counts.data[0].x) == [3, 0]
    assert counts.data[0].orientation == "h"  # long names on the left, never overlapping
    shares = fh.label_shares({"Kovaleva": (("vertical", "diagonal"), np.array([0.75, 0.25])),
                              "gates": (("closed", "open"), np.array([1.0, 0.0]))})
    assert len(shares.data) == 3 and shares.layout.barmode == "stack"
    box = fh.distribution({"alpha": np.arange(5), "beta": np.arange(3)}, kind="box")
    vio = fh.distribution({"all": np.arange(300)}, kind="violin")
    assert [t.type for t in box.data] == ["box", "box"] and vio.data[0].type == "violin"
    assert vio.data[0].points == "outliers" and vio.data[0].spanmode == "hard"  # never past the data (k90 >= 1)
    many = fh.distribution({"rows": np.arange(fh.VIOLIN_POINTS_MAX + 1)}, kind="violin")
    assert many.data[0].points is False  # thousands of rows: the density only, no SVG marker per outlier
    bars = fh.layer_bars([1, 2, 3])
    assert list(bars.data[0].x) == ["L1", "L2", "L3"]
    lines = fh.layer_lines({"a": [0.1, 0.2], "b": [0.3, 0.4]}, xlabels=["emb", "L1"])
    assert len(lines.data) == 2 and list(lines.data[0].x) == ["emb", "L1"]
    probs = probability_bars(["x", "y"], {"all heads": [0.8, 0.2], "heads disabled": [0.6, 0.4]})
    assert [t.name for t in probs.data] == ["all heads", "heads disabled"] and probs.layout.showlegend
    one = probability_bars(["x", "y"], {"p": [0.8, 0.2]}, highlight="x")
    assert list(one.data[0].marker.color) == ["#e4572e", "#9db4c0"] and not one.layout.showlegend


def test_matrix_heatmap_and_diverging_grid():
    m = matrix_heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "c"], colour_label="JS")
    assert m.data[0].type == "heatmap" and "JS" in m.data[0].hovertemplate
    g = fh.diverging_grid(np.array([[-0.2, 0.1], [0.05, 0.0]]), colour_label="Δ", selected=(0, 1))
    spec = _json(g)
    mk = spec["data"][0]["marker"]
    assert mk["cmin"] == -0.2 and mk["cmax"] == 0.2  # centred on zero
    assert spec["data"][-1]["customdata"] == [[0, 1]]
    flat = fh.diverging_grid(np.zeros((2, 2)))
    assert _json(flat)["data"][0]["marker"]["cmax"] == 1.0


def test_category_grid_grows_with_its_legend_and_keeps_clicks():
    cats = np.array([["a", "b", "c", "d"], ["e", "a", "b", "c"]], dtype=object)
    fig = head_grid(np.zeros((2, 4)), categories=cats, selected=(1, 2))
    plain = head_grid(np.zeros((2, 4)), selected=(1, 2))
    assert fig.layout.height > plain.layout.height and fig.layout.legend.yanchor == "top"
    spec = _json(fig)
    assert {tr["name"] for tr in spec["data"][:-1]} == {"a", "b", "c", "d", "e"}
    assert spec["data"][-1]["customdata"] == [[1, 2]] and spec["data"][-1]["cliponaxis"] is False


def test_head_grid_copes_with_all_nan_and_constant_values():
    nan = _json(head_grid(np.full((2, 3), np.nan)))["data"][0]["marker"]
    assert (nan["cmin"], nan["cmax"]) == (0.0, 1.0)
    const = _json(head_grid(np.full((2, 3), 0.5)))["data"][0]["marker"]
    assert const["cmin"] == 0.5 and const["cmax"] > 0.5


def test_layer_lines_keep_coinciding_series_visible():
    """Three series all at 1.0 (a fine-tuned head and its parent): each has its own dash and a
    larger marker, so none is hidden under another."""
    from bertgeom.figures.heads import layer_lines

    fig = layer_lines({"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [1.0, 1.0]})
    dashes = [t.line.dash for t in fig.data]
    sizes = [t.marker.size for t in fig.data]
    assert len(set(dashes)) == 3 and sizes == sorted(sizes) and len(set(sizes)) == 3
