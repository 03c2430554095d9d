"""Plotly figures of the Attention Heads page (pure functions: arrays in, figures out).

Same conventions as :mod:`bertgeom.figures`: arrays are 0-based ``(layer, head)``, labels shown
to users are 1-based (``L3 H7``); every clickable chart of heads carries ``customdata = [layer,
head]`` (0-based, plain lists) so :func:`bertgeom.figures.picked_head` reads a click the same
way everywhere.  Export each figure with ``config=bertgeom.figures.PLOTLY_CONFIG``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from bertgeom.figures.base import SELECTED_COLOUR, category_colours, head_grid, head_label
from bertgeom.safety import plotly_text, plotly_texts

__all__ = [
    "attention_map",
    "contrast_max",
    "default_theta",
    "feature_bars",
    "label_counts",
    "label_shares",
    "head_scatter",
    "distribution",
    "feature_over_set",
    "layer_bars",
    "layer_lines",
    "diverging_grid",
    "token_bars",
    "significance_grid",
    "difference_map",
]

_FONT = dict(size=12)


def default_theta(attentions, *, cap: float = 0.3, quantile: float = 0.99) -> float:
    """A threshold θ for the attention maps of one input that never leaves them blank: the 2025
    paper's 0.3, or, when fewer than 1% of the weights reach it (long inputs such as a 427-token
    genome spread attention thin), the ``quantile`` of all weights of all heads, rounded down to
    0.01 and at least 0.01 (docs/methods.md §5); and never above the largest weight of the head
    that spreads its attention most (rounded down), so every head's map shows a cell when opened
    (a model whose local-attention layers hold larger weights than its global ones: ModernBERT)."""
    arr = np.asarray(attentions, dtype=np.float32)
    a = arr.ravel()
    if a.size == 0:
        return cap
    q = float(np.quantile(a, quantile))
    theta = min(cap, max(0.01, np.floor(q * 100) / 100))
    if arr.ndim >= 2:
        weakest = float(np.nanmin(arr.reshape(-1, arr.shape[-2] * arr.shape[-1]).max(axis=1)))
        theta = min(theta, max(0.01, np.floor(weakest * 100) / 100))
    return float(theta)


def contrast_max(*maps, theta: float = 0.0, quantile: float = 0.995) -> float:
    """Top of the colour scale for attention maps that never look blank: the ``quantile`` of the
    weights shown (those >= ``theta``) of all ``maps`` together, so the few largest cells (a [CLS]
    or [SEP] column can hold 0.9 while a 427-token genome's other weights are ~0.002) saturate
    instead of pushing every other cell to white. Shared by maps drawn side by side."""
    vals = np.concatenate([np.asarray(m, dtype=np.float32).ravel() for m in maps]) if maps else np.zeros(0)
    vals = vals[np.isfinite(vals)]
    shown = vals[vals >= theta] if theta > 0 else vals
    if shown.size == 0:
        return float(vals.max()) if vals.size and vals.max() > 0 else 1e-9
    return max(float(np.quantile(shown, quantile)), 1e-9)


#: Tick labels of a map drawn in half the page's width, side by side with another: 30 crowded
#: the spike model's rotated labels into one another at the top of the comparison maps.
SIDE_BY_SIDE_TICKS = 15


def attention_map(
    attention: np.ndarray,
    labels: Sequence[str],
    *,
    hover_labels: Sequence[str] | None = None,
    theta: float = 0.0,
    title: str = "",
    colorscale: str = "Blues",
    max_ticks: int = 60,
    zmax: float | None = None,
    colour_label: str = "weight",
    auto_contrast: bool = True,
) -> go.Figure:
    """Heatmap of one attention map (rows: queries, columns: keys) that stays light for long inputs.

    Axes are categorical with one unique ``hover_labels`` entry per position (e.g.
    ``"211: 631-634 · RBD"``), so hovering shows query, key and weight through a template
    instead of ``T x T`` hover strings; ticks show the short ``labels``, thinned to about
    ``max_ticks``.  Weights below ``theta`` are hidden (the paper's masking).  Without ``zmax`` the
    colour scale tops at :func:`contrast_max` (``auto_contrast``; the colour-bar title then says
    which weights are drawn darkest, the hover keeps every true value) or at the largest weight.
    """
    a = np.asarray(attention, dtype=np.float32)
    n = a.shape[0]
    labels = plotly_texts(str(x) for x in labels)
    cats = plotly_texts(str(x) for x in (hover_labels if hover_labels is not None else labels))
    if len(set(cats)) != n:  # categorical axes need unique names
        cats = [f"{i}: {c}" for i, c in enumerate(cats)]
    shown = np.where(a >= theta, a, np.nan).astype(np.float32) if theta > 0 else a
    largest = float(np.nanmax(a)) if a.size else 0.0
    top = float(zmax) if zmax is not None else (contrast_max(a, theta=theta) if auto_contrast else largest)
    bar_title = colour_label if top >= largest * 0.999 else f"{colour_label} (≥ {top:.2g} darkest)"
    fig = go.Figure(
        go.Heatmap(
            z=shown, x=cats, y=cats, colorscale=colorscale, zmin=0, zmax=max(top, 1e-9),
            hovertemplate="query %{y}<br>key %{x}<br>" + colour_label + " %{z:.3f}<extra></extra>",
            hoverongaps=False, colorbar=dict(title=dict(text=bar_title, side="right"), thickness=12),
        )
    )
    if not np.isfinite(shown).any():
        # theta hides every weight and a heatmap of NaNs alone defines no categories: an invisible
        # trace registers them, so the axes keep their labels. Only then: its T markers were SVG
        # nodes of their own (427 per spike map, two maps on the comparison tab).
        fig.add_trace(go.Scatter(x=cats, y=cats, mode="markers", marker=dict(opacity=0), hoverinfo="skip",
                                 showlegend=False))
    step = max(1, int(np.ceil(n / max_ticks)))
    ticks = list(range(0, n, step))
    # the key labels stand at -60° above the map, under the axis title; the title is pinned to the top
    # and the margin holds all three, so a long label (a genome's "424:1270-1273") never runs into it
    longest = max((len(labels[t]) for t in ticks), default=0)
    labels_px = int(np.ceil(0.87 * 7.0 * longest)) + 8  # ~7 px a character at size 12, sin 60° ≈ 0.87
    top = labels_px + 28 + (34 if title else 0)
    fig.update_layout(
        title=dict(text=title, y=1.0, yref="container", yanchor="top", pad=dict(t=8)) if title else None,
        xaxis=dict(title="key (attended to)", type="category", tickmode="array", tickvals=[cats[t] for t in ticks],
                   ticktext=[labels[t] for t in ticks], side="top", tickangle=-60, range=[-0.5, n - 0.5]),
        yaxis=dict(title="query (attending)", type="category", tickmode="array", tickvals=[cats[t] for t in ticks],
                   ticktext=[labels[t] for t in ticks], range=[n - 0.5, -0.5]),
        height=min(900, max(380, 130 + 16 * min(n, max_ticks))),
        margin=dict(l=10, r=10, t=max(top, 110 if title else 95), b=10),
        plot_bgcolor="#f7f7f7",
        font=_FONT,
    )
    return fig


def feature_bars(
    names: Sequence[str],
    values: Sequence[float],
    *,
    labels: Sequence[str] | None = None,
    hover: Sequence[str] | None = None,
    marks: Mapping[str, float] | None = None,
    title: str = "",
    xrange: tuple[float, float] | None = (0.0, 1.0),
) -> go.Figure:
    """Horizontal bars of one head's feature vector (first name on top).

    ``marks`` draws a threshold tick on the bar of that feature (a rule's cut-off).
    """
    names = list(names)
    vals = np.asarray(values, dtype=float)
    ylab = plotly_texts(labels if labels is not None else names)
    fig = go.Figure(
        go.Bar(
            x=vals, y=ylab, orientation="h", marker_color="#4c78a8",
            text=[f"{v:.2f}" for v in vals], textposition="outside", cliponaxis=False,
            hovertext=plotly_texts(hover if hover is not None else names), hoverinfo="text+x",
        )
    )
    if marks:
        mx, my = [], []
        for n, t in marks.items():
            if n in names:
                mx.append(t)
                my.append(ylab[names.index(n)])
        if mx:
            fig.add_trace(go.Scatter(x=mx, y=my, mode="markers", name="threshold", hoverinfo="x+name",
                                     marker=dict(symbol="line-ns-open", size=18, color=SELECTED_COLOUR,
                                                 line=dict(width=2))))
    hi = max(1.0, float(np.nanmax(vals)) * 1.15) if vals.size else 1.0
    fig.update_layout(
        title=title, showlegend=False, height=max(220, 40 + 22 * len(names)),
        margin=dict(l=10, r=30, t=40 if title else 10, b=30),
        xaxis=dict(range=[xrange[0], max(xrange[1], hi)] if xrange else None, zeroline=True),
        yaxis=dict(autorange="reversed", automargin=True),
        plot_bgcolor="white", font=_FONT,
    )
    return fig


def label_counts(counts: Mapping[str, int], *, display: Mapping[str, str] | None = None, title: str = "") -> go.Figure:
    """Horizontal bars of how many heads carry each label: long names ("backward contextual
    gate") sit on the left in full instead of overlapping under a half-width chart."""
    keys = list(counts)
    palette = category_colours(sorted(keys))
    names = plotly_texts(str(display.get(k, k) if display else k) for k in keys)
    fig = go.Figure(go.Bar(y=names, x=[counts[k] for k in keys], orientation="h",
                           marker_color=[palette[k] for k in keys],
                           text=[counts[k] for k in keys], textposition="outside", cliponaxis=False))
    fig.update_layout(title=title, height=90 + 26 * max(1, len(keys)),
                      margin=dict(l=10, r=30, t=40 if title else 10, b=10),
                      xaxis=dict(title="heads"), yaxis=dict(autorange="reversed", automargin=True),
                      plot_bgcolor="white", font=_FONT)
    return fig


def label_shares(
    rows: Mapping[str, tuple[Sequence[str], np.ndarray]], *, display: Mapping[str, str] | None = None, title: str = ""
) -> go.Figure:
    """Stacked horizontal bars: for each taxonomy (row), the share of inputs giving each label."""
    fig = go.Figure()
    seen: set[str] = set()
    all_classes = sorted({c for cls, _ in rows.values() for c in cls})
    palette = category_colours(all_classes)
    for tax, (classes, frac) in rows.items():
        for c, f in zip(classes, np.asarray(frac, dtype=float)):
            if f <= 0:
                continue
            name = plotly_text(display.get(c, c) if display else c)
            fig.add_trace(go.Bar(x=[f], y=[tax], orientation="h", name=name, marker_color=palette[c],
                                 legendgroup=c, showlegend=c not in seen, text=[f"{name} {f:.0%}"],
                                 textposition="inside", insidetextanchor="middle", hoverinfo="text"))
            seen.add(c)
    fig.update_layout(barmode="stack", title=title, height=80 + 45 * max(1, len(rows)),
                      margin=dict(l=10, r=10, t=40 if title else 10, b=10),
                      xaxis=dict(range=[0, 1.001], tickformat=".0%", dtick=0.2), yaxis=dict(autorange="reversed"),
                      legend=dict(orientation="h", y=-0.3), plot_bgcolor="white", font=_FONT)
    return fig


def head_scatter(
    coords: np.ndarray,
    n_heads: int,
    *,
    categories: Sequence[str] | None = None,
    values: np.ndarray | None = None,
    colour_label: str = "",
    selected: tuple[int, int] | None = None,
    hover_text: Sequence[str] | None = None,
    title: str = "",
    axis_titles: tuple[str, str] = ("dimension 1", "dimension 2"),
    colorscale: str = "Viridis",
) -> go.Figure:
    """Clickable 2-D map of heads (MDS, PCA): one point per head in row-major (layer, head)
    order, ``customdata = [layer, head]``; coloured by ``categories`` or by ``values``; the
    selected head is ringed."""
    xy = np.asarray(coords, dtype=float)
    N = xy.shape[0]
    ll, hh = np.divmod(np.arange(N), n_heads)
    custom = np.stack([ll, hh], axis=1).tolist()
    text = [
        head_label(l, h) + (f"<br>{hover_text[i]}" if hover_text is not None else "")
        for i, (l, h) in enumerate(zip(ll, hh))
    ]
    fig = go.Figure()
    if categories is not None:
        cats = np.asarray([str(c) for c in categories])
        palette = category_colours(sorted(set(cats.tolist())))
        for cat, colour in palette.items():
            idx = np.flatnonzero(cats == cat)
            fig.add_trace(go.Scatter(
                x=xy[idx, 0], y=xy[idx, 1], mode="markers", name=cat,
                marker=dict(size=11, color=colour, line=dict(width=1, color="white")),
                customdata=[custom[i] for i in idx], hovertext=[text[i] for i in idx], hoverinfo="text",
            ))
    else:
        v = np.asarray(values if values is not None else ll, dtype=float)
        fig.add_trace(go.Scatter(
            x=xy[:, 0], y=xy[:, 1], mode="markers", showlegend=False,
            marker=dict(size=11, color=v, colorscale=colorscale, line=dict(width=1, color="white"),
                        colorbar=dict(title=dict(text=colour_label, side="right"), thickness=12)),
            customdata=custom, hovertext=text, hoverinfo="text",
        ))
    if selected is not None:
        i = selected[0] * n_heads + selected[1]
        if 0 <= i < N:
            fig.add_trace(go.Scatter(x=[xy[i, 0]], y=[xy[i, 1]], mode="markers+text", showlegend=False,
                                     hoverinfo="skip", text=[head_label(*selected)], textposition="top center",
                                     marker=dict(symbol="circle-open", size=20, color=SELECTED_COLOUR,
                                                 line=dict(width=3)),
                                     customdata=[list(selected)]))
    fig.update_layout(
        title=title, height=460, margin=dict(l=10, r=10, t=40 if title else 10, b=10),
        xaxis=dict(title=axis_titles[0], zeroline=False), yaxis=dict(title=axis_titles[1], zeroline=False),
        plot_bgcolor="#fafafa", clickmode="event+select", legend=dict(orientation="h", y=-0.18), font=_FONT,
    )
    return fig


#: Above this many values a violin draws its density only, no single points.
VIOLIN_POINTS_MAX = 1000


def distribution(
    groups: Mapping[str, np.ndarray],
    *,
    kind: str = "box",
    title: str = "",
    ylabel: str = "",
    points: bool = True,
    display: Mapping[str, str] | None = None,
    hover_name: str = "",
) -> go.Figure:
    """Box or violin per group (e.g. per class) of one head's values over inputs or rows.

    ``display`` maps a group key to its name on screen (a class's display name); ``hover_name``
    (a variable name, say) is shown with each value in the hover, never on an axis. A violin over
    more than :data:`VIOLIN_POINTS_MAX` values draws no single points: its outliers alone were ~1,000
    SVG markers for the k90 of every query row of the shipped set, a second of drawing on 2 cores,
    and the violin already shows where they lie."""
    fig = go.Figure()
    display = display or {}
    names = {k: plotly_text(display.get(k, k)) for k in groups}
    palette = category_colours(list(names.values()))
    for key, vals in groups.items():
        v = np.asarray(vals, dtype=float).ravel()
        name = names[key]
        hover = {"hovertemplate": f"{name}<br>{hover_name} = %{{y:.3g}}<extra></extra>"} if hover_name else {}
        if kind == "violin":
            fig.add_trace(go.Violin(y=v, name=name, box_visible=True, meanline_visible=True, spanmode="hard",
                                    points=(False if v.size > VIOLIN_POINTS_MAX or not points
                                            else "outliers" if v.size > 200 else "all"),
                                    line_color=palette[name], **hover))
        else:
            fig.add_trace(go.Box(y=v, name=name, boxpoints="all" if (points and v.size <= 200) else "outliers",
                                 jitter=0.3, marker_color=palette[name], **hover))
    fig.update_layout(title=title, showlegend=False, height=360, yaxis=dict(title=ylabel),
                      margin=dict(l=10, r=10, t=40 if title else 10, b=10), plot_bgcolor="white", font=_FONT)
    return fig


def feature_over_set(
    mean: np.ndarray,
    groups: Mapping[str, np.ndarray],
    name: str,
    *,
    layer: int,
    head: int,
    display: Mapping[str, str] | None = None,
) -> tuple[go.Figure, go.Figure]:
    """The *Feature distributions* view of one per-head feature over a set: the grid of its mean
    per head and the selected head's values per input, one box per group (class).

    Titles, colour bar and axis read the feature's plain-word label (``k90 median / n_v``); its
    variable name (``k90_frac``) and formula appear in the hover only (docs/methods.md §3)."""
    from bertgeom.analysis.heads import feature_doc

    doc = feature_doc(name)
    hover = np.full(np.shape(mean), f"{name} = {doc.formula}", dtype=object)
    grid = head_grid(mean, colour_label=doc.label, selected=(layer, head), hover_text=hover)
    box = distribution(groups, kind="box", title=f"{head_label(layer, head)}: {doc.label}, per input",
                       ylabel=doc.label, display=display, hover_name=name)
    return grid, box


def layer_bars(values: Sequence[float], *, title: str = "", ylabel: str = "", hover: Sequence[str] | None = None,
               colour: str = "#4c78a8") -> go.Figure:
    """One bar per layer (1-based), e.g. the per-layer maximum of a head statistic."""
    v = np.asarray(values, dtype=float)
    x = [f"L{i + 1}" for i in range(v.size)]
    fig = go.Figure(go.Bar(x=x, y=v, marker_color=colour, hovertext=list(hover) if hover is not None else None,
                           hoverinfo="text+y" if hover is not None else "x+y"))
    fig.update_layout(title=title, height=280, yaxis=dict(title=ylabel),
                      margin=dict(l=10, r=10, t=40 if title else 10, b=10), plot_bgcolor="white", font=_FONT)
    return fig


def layer_lines(series: Mapping[str, Sequence[float]], *, title: str = "", ylabel: str = "",
                yrange: tuple[float, float] | None = None, xlabels: Sequence[str] | None = None) -> go.Figure:
    """Lines over layers (x = ``xlabels`` or L1..Ln), one per series. Each series gets its own dash
    and a larger hollow marker than the one before, so series that coincide (three cosines all at
    1.0) stay visible one inside the other instead of hiding each other."""
    fig = go.Figure()
    dashes = ("solid", "dash", "dot", "dashdot")
    symbols = ("circle", "square-open", "diamond-open", "circle-open")
    for k, (name, vals) in enumerate(series.items()):
        v = np.asarray(vals, dtype=float)
        x = list(xlabels) if xlabels is not None else [f"L{i + 1}" for i in range(v.size)]
        fig.add_trace(go.Scatter(x=x, y=v, mode="lines+markers", name=str(name),
                                 line=dict(dash=dashes[k % 4], width=2),
                                 marker=dict(symbol=symbols[k % 4], size=7 + 5 * (k % 4), line=dict(width=2))))
    fig.update_layout(title=title, height=300, yaxis=dict(title=ylabel, range=list(yrange) if yrange else None),
                      margin=dict(l=10, r=10, t=40 if title else 10, b=10), plot_bgcolor="white",
                      legend=dict(orientation="h", y=-0.25), font=_FONT)
    return fig


def diverging_grid(values: np.ndarray, *, colour_label: str = "", selected: tuple[int, int] | None = None,
                   hover_text: np.ndarray | None = None, title: str = "") -> go.Figure:
    """Clickable head grid on a diverging scale centred on 0 (e.g. the change an ablation causes)."""
    v = np.asarray(values, dtype=float)
    m = float(np.nanmax(np.abs(v))) if np.isfinite(v).any() else 1.0
    m = m if m > 0 else 1.0
    return head_grid(v, colour_label=colour_label, selected=selected, hover_text=hover_text, title=title,
                     colorscale="RdBu_r", zrange=(-m, m))


def token_bars(series: Mapping[str, Sequence[float]], tokens: Sequence[str], *, title: str = "",
               ylabel: str = "", numbered: bool = True) -> go.Figure:
    """Grouped bars, one group per token, one bar per series; x = ``tokens``, made unique by their position
    (``numbered``) unless they already are."""
    x = plotly_texts(f"{i}:{t}" for i, t in enumerate(tokens)) if numbered else plotly_texts(str(t) for t in tokens)
    fig = go.Figure([go.Bar(x=x, y=np.asarray(v, dtype=float), name=plotly_text(n)) for n, v in series.items()])
    fig.update_layout(title=title, barmode="group", height=340, yaxis=dict(title=ylabel),
                      xaxis=dict(type="category", tickangle=-60), legend=dict(orientation="h", y=1.12),
                      margin=dict(l=10, r=10, t=60 if title else 30, b=10), plot_bgcolor="white")
    return fig


def significance_grid(z: np.ndarray, significant: np.ndarray, p: np.ndarray, *, selected=None,
                      title: str = "") -> go.Figure:
    """Clickable head grid coloured by z, a star on every significant head, p-values on hover."""
    z = np.asarray(z, dtype=float)
    sig = np.asarray(significant, dtype=bool)
    hover = np.array([[f"p = {pv:.2e}{' (significant)' if s else ''}" for pv, s in zip(pr, sr)]
                      for pr, sr in zip(np.asarray(p), sig)])
    m = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    fig = head_grid(z, colour_label="z", selected=selected, hover_text=hover, colorscale="RdBu_r",
                    zrange=(-max(m, 1e-9), max(m, 1e-9)), title=title)
    ll, hh = np.nonzero(sig)
    fig.add_trace(go.Scatter(x=hh + 1, y=ll + 1, mode="markers", name="significant (Bonferroni)",
                             marker=dict(symbol="star", size=11, color="gold", line=dict(width=1, color="black")),
                             customdata=np.stack([ll, hh], axis=1).tolist(), hoverinfo="skip"))
    fig.update_layout(showlegend=bool(sig.any()))
    if sig.any():  # the legend under the axis title ("head"), not beside it: the figure grows, the grid does not
        t, b = int(fig.layout.margin.t), int(fig.layout.margin.b)
        plot_h = int(fig.layout.height) - t - b
        fig.update_layout(height=int(fig.layout.height) + LEGEND_ROOM, margin=dict(b=b + LEGEND_ROOM),
                          legend=dict(orientation="h", yanchor="top", y=-LEGEND_GAP / plot_h, x=0, xanchor="left"))
    return fig


#: Pixels between the grid's bottom and the legend's top (below the tick labels and the axis
#: title), and the height the figure grows by to hold the legend.
LEGEND_GAP, LEGEND_ROOM = 58, 44


def difference_map(diff: np.ndarray, labels: Sequence[str], *, hover_labels: Sequence[str] | None = None,
                   title: str = "", max_ticks: int = 30) -> go.Figure:
    """Heatmap of ``A − B`` on a diverging scale centred on 0 (red: more in A, blue: more in B)."""
    d = np.asarray(diff, dtype=np.float32)
    m = float(np.abs(d).max()) if d.size else 1.0
    fig = attention_map(d, labels, hover_labels=hover_labels, title=title, colorscale="RdBu_r", max_ticks=max_ticks,
                        colour_label="A − B", auto_contrast=False)
    fig.update_traces(zmin=-max(m, 1e-9), zmax=max(m, 1e-9), zmid=0, selector=dict(type="heatmap"))
    return fig
