"""A user's or a model's string never forms markup inside a chart (issue 33, round three).

plotly renders a subset of HTML (``<a href>``, ``<span style>``, ``<b>``, ``<br>``) in titles, tick
labels, legend names, annotations and hover text. Class labels of a custom model, tokens of its
vocabulary, record names and mutation names reach those places, so every figure that shows one
passes it through ``safety.plotly_text``: the chart shows the characters, and no link is formed.
Each figure below is built with the payload in every string it takes from outside; the figure's
JSON must hold no tag of it, only its escaped form.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from bertgeom.safety import plotly_text, plotly_texts

PAYLOAD = '<a href="http://127.0.0.1:9/x">sign in again</a><span style="color:red">!</span>'
TAG = re.compile(r"<\s*/?\s*(a|span|img|b|i|br|sub|sup|em|s|u)\b[^>]*href|<\s*(a|span|img)\b", re.I)


def _labels(n: int, stem: str = "") -> list[str]:
    return [f"{PAYLOAD}{stem}{i}" for i in range(n)]


#: Keys whose strings plotly never draws: a legend group's id; a point's data for a click (drawn only
#: through ``%{customdata}`` in a hover template, which the test sees as its own trace's key below).
NOT_DRAWN = {"legendgroup", "customdata"}


def _strings(fig) -> list[str]:
    """Every string plotly may draw as text in the figure."""
    out = []

    def walk(x):
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            drawn_data = "%{customdata" in str(x.get("hovertemplate", ""))
            for k, v in x.items():
                if k not in NOT_DRAWN or (k == "customdata" and drawn_data):
                    walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(json.loads(fig.to_json()))
    return out


def _figures():
    from bertgeom.figures import cone, heads, headview, subspace
    from bertgeom.figures.base import matrix_heatmap, probability_bars, token_lines
    from bertgeom.sars_cov_2.variant.figures import genome_track, layer_strip, spike_track

    rng = np.random.default_rng(0)
    labels = _labels(3, "class")
    toks = _labels(5, "tok")
    att = rng.random((5, 5))
    att /= att.sum(1, keepdims=True)
    display = {c: f"{c} shown" for c in labels}
    groups = np.array([labels[i % 3] for i in range(9)])
    frame = pd.DataFrame({"x": rng.random(6), "y": rng.random(6), "role": ["query", "key"] * 3,
                          "item": [0, 0, 1, 1, 2, 2], "position": [1, 1, 2, 2, 3, 3], "token": toks[:3] * 2,
                          "kind": labels[:3] * 2})
    yield "probability_bars", probability_bars(labels, {"p": [0.2, 0.3, 0.5]}, highlight=labels[2])
    yield "probability_bars (display)", probability_bars(labels, {"a": [0.2, 0.3, 0.5], "b": [0.5, 0.3, 0.2]},
                                                         display=display)
    yield "matrix_heatmap", matrix_heatmap(att, toks, toks)
    yield "token_lines", token_lines(att, toks, theta=0.0)
    yield "attention_map", heads.attention_map(att, toks, hover_labels=toks)
    yield "feature_bars", heads.feature_bars(toks, rng.random(5), labels=toks, hover=toks)
    yield "label_counts", heads.label_counts({c: 2 for c in labels}, display=display)
    yield "label_shares", heads.label_shares({"taxonomy": (labels, np.array([0.2, 0.3, 0.5]))}, display=display)
    yield "distribution", heads.distribution({c: rng.random(4) for c in labels}, display=display, hover_name="x")
    yield "class_curves", cone.class_curves(rng.random((9, 4)), groups, display=display)
    yield "layer_histograms", cone.layer_histograms({c: rng.random((3, 2)) for c in labels},
                                                    panel_titles=["L1", "L2"], display=display)
    yield "isotropy_figure", cone.isotropy_figure(np.arange(3), {PAYLOAD: (rng.random(3), rng.random(3))}, 9.0)
    yield "projection_scatter", cone.projection_scatter(rng.random((9, 2)), groups, hover=_labels(9, "rec"),
                                                        display=display)
    yield "class_box_figure", subspace.class_box_figure(groups, {"s": rng.random(9)}, order=labels,
                                                        names=_labels(9, "rec"), display=display)
    yield "joint_qk_figure", subspace.joint_qk_figure(rng.random((5, 2)), rng.random((5, 2)), toks)
    yield "attention_comparison_figure", subspace.attention_comparison_figure(att, att.T, toks, layer=0, head=0)
    yield "token_bars", heads.token_bars({PAYLOAD: rng.random(5)}, toks)
    yield "qk_set_scatter", headview.qk_set_scatter(frame, "kind")
    yield "spike_track", spike_track({"saliency": rng.random(5)}, toks, ["", "NTD", "NTD", "RBD", ""],
                                     mutation_tokens={2: PAYLOAD})
    yield "spike_track (bands)", spike_track({"saliency": rng.random(5)}, toks, ["", "NTD", "NTD", "RBD", ""],
                                             bands=[(1, 2, f"{PAYLOAD} | x")])
    yield "layer_strip", layer_strip(rng.random((2, 5)), toks)
    yield "genome_track", genome_track(30_000, [(f"{PAYLOAD}gene", 100, 20_000)],
                                       {"private": [(200, PAYLOAD)], PAYLOAD: [(300, "x")]}, unread=[(1, 50)],
                                       bands=[(10_000, 10_100, f"{PAYLOAD} | {PAYLOAD}2")])


@pytest.mark.parametrize("name,fig", list(_figures()), ids=lambda x: x if isinstance(x, str) else "")
def test_no_outside_string_forms_a_tag_in_a_chart(name, fig):
    strings = _strings(fig)
    tags = [s for s in strings if TAG.search(s)]
    assert not tags, f"{name}: an outside string forms markup in the chart: {tags[:3]}"
    assert any(plotly_text(PAYLOAD) in s for s in strings), f"{name}: the escaped text is not shown"


def test_plotly_text_shows_the_characters_and_leaves_numbers():
    assert plotly_text("a<b>&c") == "a&lt;b&gt;&amp;c"
    assert plotly_texts(["<i>", 3, None]) == ["&lt;i&gt;", 3, None]
