"""Pure functions that turn analysis arrays into plotly figures (no Streamlit here).

Conventions: arrays are 0-based (layer, head); labels shown to users are 1-based
("L3 H7"), as in the papers. Every figure returned here can be exported from its
toolbar (PNG; SVG through :data:`PLOTLY_CONFIG`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bertgeom.tables import head_label
from bertgeom.safety import plotly_text, plotly_texts  # noqa: F401 - plotly_text: the figures' one escape

#: Toolbar options for ``st.plotly_chart(config=...)``: SVG download, no logo.
PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "svg", "scale": 1},
    "modeBarButtonsToAdd": ["toImage"],
}

SELECTED_COLOUR = "#e4572e"


def head_grid(
    values: np.ndarray,
    *,
    title: str = "",
    colour_label: str = "",
    selected: tuple[int, int] | None = None,
    hover_text: np.ndarray | None = None,
    colorscale: str = "Viridis",
    zrange: tuple[float, float] | None = None,
    categories: np.ndarray | None = None,
) -> go.Figure:
    """Clickable grid of all heads: one square marker per (layer, head).

    A scatter (not a heatmap) so that Streamlit returns click selections; each point's
    ``customdata`` is ``[layer, head]`` (0-based). ``values`` is ``[L, H]``; when
    ``categories`` (``[L, H]`` strings) is given the squares are coloured by category.
    """
    values = np.asarray(values, dtype=float)
    n_layers, n_heads = values.shape
    layers, heads = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    lf, hf = layers.ravel(), heads.ravel()
    custom = np.stack([lf, hf], axis=1).tolist()  # plain lists: selections echo them back as JSON
    size = max(10, min(34, int(420 / max(n_heads, n_layers))))
    text = [
        f"{head_label(l, h)}<br>{colour_label}: {v:.3g}" + (f"<br>{hover_text[l, h]}" if hover_text is not None else "")
        for l, h, v in zip(lf, hf, values.ravel())
    ]
    fig = go.Figure()
    if categories is not None:
        cats = np.asarray(categories).ravel()
        palette = category_colours(sorted(set(cats.tolist())))
        for cat, colour in palette.items():
            sel = cats == cat
            fig.add_trace(
                go.Scatter(
                    x=hf[sel] + 1, y=lf[sel] + 1, mode="markers", name=str(cat),
                    marker=dict(symbol="square", size=size, color=colour, line=dict(width=1, color="white")),
                    customdata=[custom[i] for i in np.flatnonzero(sel)],
                    hovertext=[text[i] for i in np.flatnonzero(sel)], hoverinfo="text",
                )
            )
    else:
        cmin, cmax = zrange if zrange else _finite_range(values)
        fig.add_trace(
            go.Scatter(
                x=hf + 1, y=lf + 1, mode="markers", showlegend=False,
                marker=dict(
                    symbol="square", size=size, color=values.ravel(), colorscale=colorscale,
                    cmin=cmin, cmax=cmax,
                    colorbar=dict(title=dict(text=colour_label, side="right"), thickness=12),
                    line=dict(width=1, color="white"),
                ),
                customdata=custom, hovertext=text, hoverinfo="text",
            )
        )
    if selected is not None:
        l, h = selected
        fig.add_trace(
            go.Scatter(
                x=[h + 1], y=[l + 1], mode="markers", showlegend=False, hoverinfo="skip",
                marker=dict(symbol="square-open", size=size + 6, color=SELECTED_COLOUR, line=dict(width=3)),
                customdata=[[l, h]],
                cliponaxis=False,  # the outline of a square on the grid's edge stays whole
            )
        )
    fig.update_layout(
        title=title,
        xaxis=dict(title="head", tickmode="linear", dtick=1, range=[0.4, n_heads + 0.6], showgrid=False,
                   zeroline=False),
        yaxis=dict(title="layer", tickmode="linear", dtick=1, range=[n_layers + 0.6, 0.4], showgrid=False,
                   zeroline=False),
        height=max(220, 60 + n_layers * (size + 8)),
        margin=dict(l=50, r=20, t=40 if title else 10, b=40),
        plot_bgcolor="white",
        clickmode="event+select",
    )
    if categories is not None:  # legend under the axis title; the figure grows so squares keep their size
        rows = int(np.ceil(len(set(np.asarray(categories).ravel().tolist())) / 3))
        plot_h = max(100, int(fig.layout.height) - 50)
        fig.update_layout(height=int(fig.layout.height) + 40 + 24 * rows,
                          legend=dict(orientation="h", yanchor="top", y=-58 / plot_h, x=0, xanchor="left"))
    return fig


def _finite_range(values: np.ndarray) -> tuple[float, float]:
    """Colour range of the finite values (all-NaN -> (0, 1); a constant gets a tiny width)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0, 1.0
    lo, hi = float(finite.min()), float(finite.max())
    return lo, hi if hi > lo else lo + max(abs(lo), 1.0) * 1e-6


def picked_head(event) -> tuple[int, int] | None:
    """0-based (layer, head) of the first point selected in a :func:`head_grid` chart.

    Reads the chart's selection state (a dict-like with ``selection.points``); uses the
    point's ``customdata`` when present, else its (x, y) = (head + 1, layer + 1).
    """
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return None
    if not points:
        return None
    p = points[0]
    custom = p.get("customdata")
    if isinstance(custom, dict):  # some encodings come back as {"0": .., "1": ..}
        custom = [custom.get("0", custom.get(0)), custom.get("1", custom.get(1))]
    if isinstance(custom, (list, tuple)) and len(custom) >= 2 and None not in custom[:2]:
        return int(custom[0]), int(custom[1])
    if p.get("x") is not None and p.get("y") is not None:
        return int(round(p["y"])) - 1, int(round(p["x"])) - 1
    return None


#: Qualitative colours for categories (colour-blind friendly first).
PALETTE = (
    "#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2",
    "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac", "#2f4b7c", "#a05195",
)


def _vocabulary_colours() -> dict[str, str]:
    """Fixed colours of the categories every page shares, by raw and display name: the pattern
    labels (Kovaleva, gates, Clark: one colour each across the three, as they meet in one chart)
    and the classes of every registered input kind."""
    from plotly.colors import qualitative

    from bertgeom.analysis.patterns import CLARK_CLASSES, DISPLAY_NAMES, GATE_CLASSES, KOVALEVA_CLASSES
    from bertgeom.inputs import INPUT_KINDS

    fixed: dict[str, str] = {}
    extended = PALETTE + tuple(qualitative.Dark24)
    labels = dict.fromkeys(KOVALEVA_CLASSES + GATE_CLASSES + CLARK_CLASSES)
    classes = INPUT_KINDS.all_class_names()  # every registered input kind's classes, in its own order
    for vocabulary, display, colours in ((labels, DISPLAY_NAMES, extended), (tuple(classes), classes, PALETTE)):
        for i, name in enumerate(vocabulary):
            fixed.setdefault(name, colours[i % len(colours)])
            fixed.setdefault(display.get(name, name), colours[i % len(colours)])
    return fixed


_FIXED: dict[str, str] = {}


def category_colours(categories: Sequence[str]) -> dict[str, str]:
    """One colour per category, the same in every chart: a category of a shared vocabulary
    (a pattern label, a variant class) keeps its own colour; any other is coloured in the order
    given (12 colours, then plotly's 48 beyond 12 categories)."""
    if not _FIXED:
        _FIXED.update(_vocabulary_colours())
    categories = list(categories)
    others = [c for c in categories if str(c) not in _FIXED]
    base = PALETTE
    if len(others) > len(PALETTE):
        from plotly.colors import qualitative

        base = tuple(qualitative.Dark24 + qualitative.Light24)
    free = {c: base[i % len(base)] for i, c in enumerate(others)}
    return {c: _FIXED.get(str(c), free.get(c)) for c in categories}


def layout(fig: go.Figure, *, title: str = "", height: int = 320, legend_below: bool = False, **kw) -> go.Figure:
    """The common look: white background, light grid, a left-aligned title."""
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left", font=dict(size=14)) if title else None,
        height=height,
        margin=dict(l=55, r=20, t=50 if title else 20, b=60 if legend_below else 45),
        plot_bgcolor="white",
        **({"legend": dict(orientation="h", yanchor="top", y=-0.24, x=0), "hovermode": "closest"}
           if legend_below else {}),
        **kw,
    )
    fig.update_xaxes(showgrid=True, gridcolor="#eeeeee", zeroline=False)
    fig.update_yaxes(showgrid=True, gridcolor="#eeeeee", zeroline=False)
    return fig


def matrix_heatmap(
    M: np.ndarray,
    row_labels: Sequence | None = None,
    col_labels: Sequence | None = None,
    *,
    title: str = "",
    colour_label: str = "",
    colorscale: str = "Viridis",
    zrange: tuple[float, float] | None = None,
    diverging: bool = False,
    fmt: str = ".3g",
    x_title: str = "",
    y_title: str = "",
    height: int | None = None,
) -> go.Figure:
    """A matrix as a heatmap (float32 payload), rows top to bottom.

    With labels (heads, domains) the axes are categorical; without, rows and columns are numbered
    from 1 and the cells are square. ``diverging``: a red-blue scale centred on 0.
    """
    A = np.asarray(M, dtype=np.float32)
    labelled = row_labels is not None
    x = plotly_texts(col_labels) if labelled else np.arange(A.shape[1]) + 1
    y = plotly_texts(row_labels) if labelled else np.arange(A.shape[0]) + 1
    if diverging:
        m = float(np.nanmax(np.abs(A))) if A.size else 1.0
        m = m if m > 0 else 1.0
        colorscale, zrange = "RdBu_r", (-m, m)
    where = "%{y} · %{x}" if labelled else "row %{y}, col %{x}"
    fig = go.Figure(go.Heatmap(
        z=A, x=x, y=y, colorscale=colorscale, zmid=0.0 if diverging else None,
        zmin=zrange[0] if zrange else None, zmax=zrange[1] if zrange else None,
        hovertemplate=f"{where}<br>{colour_label} %{{z:{fmt}}}<extra></extra>",
        colorbar=dict(title=dict(text=colour_label, side="right"), thickness=12),
    ))
    layout(fig, title=title, height=height or min(900, max(320, 120 + 9 * A.shape[0])))
    fig.update_xaxes(title=x_title, showgrid=False, **(dict(type="category", tickangle=-60) if labelled
                                                         else dict(constrain="domain")))
    fig.update_yaxes(title=y_title, showgrid=False, autorange="reversed",
                     **(dict(type="category") if labelled else dict(scaleanchor="x", scaleratio=1, constrain="domain")))
    return fig


def probability_label(p: float) -> str:
    """A shown probability to one decimal, never rounded to a certainty it is not: ``> 99.9%`` for
    p >= 0.9995 and ``< 0.1%`` for 0 < p < 0.0005 (a calibrated 0.9997 is not "100.0%")."""
    p = float(p)
    if p >= 0.9995 and p < 1.0:
        return "> 99.9%"
    if 0.0 < p < 0.0005:
        return "< 0.1%"
    return f"{p:.1%}"


def probability_bars(labels: Sequence[str], series: dict[str, Sequence[float]], *, display: dict | None = None,
                     highlight: str | None = None, title: str = "") -> go.Figure:
    """Horizontal bars of class probabilities: one series (the predicted class ``highlight``ed)
    or several side by side (e.g. before / after disabling heads)."""
    display = display or {}
    names = plotly_texts(str(display.get(c, c)) for c in labels)  # a custom model's labels are data
    fig = go.Figure()
    colours = ("#9db4c0", SELECTED_COLOUR)
    for i, (name, probs) in enumerate(series.items()):
        p = np.asarray(probs, dtype=float)
        colour = ([SELECTED_COLOUR if c == highlight else colours[0] for c in labels] if len(series) == 1
                  else colours[i % 2])
        fig.add_trace(go.Bar(x=p, y=names, orientation="h", name=name, marker_color=colour,
                             text=[probability_label(v) for v in p], textposition="outside", cliponaxis=False,
                             hovertemplate="%{y}: %{x:.4f}<extra></extra>"))
    layout(fig, title=title, height=60 + 28 * len(labels) * max(1, len(series)) + (40 if title else 0),
           barmode="group", showlegend=len(series) > 1, legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(range=[0, 1.12], title="probability", tickformat=".0%")
    fig.update_yaxes(autorange="reversed", showgrid=False)
    return fig


def token_lines(attention: np.ndarray, tokens: Sequence[str], *, theta: float = 0.05, title: str = "") -> go.Figure:
    """bertviz-style line view: tokens in two columns, a line per link weighted by attention.

    Meant for short inputs (a sentence); links below ``theta`` are omitted.
    """
    a = np.asarray(attention, dtype=float)
    n = a.shape[0]
    fig = go.Figure()
    shown = plotly_texts(str(t) for t in tokens)
    i, j = np.nonzero(a >= theta)
    for w in sorted({round(float(v), 1) for v in a[i, j]}):  # group links by rounded weight
        sel = np.isclose(np.round(a[i, j], 1), w)
        xs, ys = [], []
        for qi, kj in zip(i[sel], j[sel]):
            xs += [0, 1, None]
            ys += [qi, kj, None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color=f"rgba(76,120,168,{max(0.08, min(1.0, w)):.2f})", width=1 + 5 * w)))
    fig.add_trace(go.Scatter(x=[0] * n, y=list(range(n)), mode="text", text=shown, textposition="middle left",
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=[1] * n, y=list(range(n)), mode="text", text=shown, textposition="middle right",
                             hoverinfo="skip", showlegend=False))
    fig.update_layout(
        title=title, height=max(300, 26 * n + 60), margin=dict(l=10, r=10, t=40 if title else 10, b=10),
        xaxis=dict(visible=False, range=[-0.6, 1.6]), yaxis=dict(visible=False, autorange="reversed"),
        plot_bgcolor="white",
    )
    return fig
