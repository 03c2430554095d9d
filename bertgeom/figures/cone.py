"""Plotly figures of the Cone Index per Layer page (pure functions, no Streamlit).

Conventions: hidden-state layers are ``0..L`` (0 = embedding output, l = output of layer l);
streams are drawn at layers ``1..L`` (the layer they belong to); heads are numbered from 1.
Every figure exports from its toolbar through :data:`bertgeom.figures.PLOTLY_CONFIG`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertgeom.figures.base import PALETTE, category_colours, layout
from bertgeom.safety import plotly_text, plotly_texts

REFERENCE_COLOUR = "#888888"

#: Colours of the streams (fixed so the same stream looks the same in every figure).
STREAM_COLOURS = {
    "hidden": "#4c78a8",
    "layer_input": "#9d755d",
    "head_output": "#72b7b2",
    "post_attention": "#f58518",
    "layer_output": "#4c78a8",
    "multihead_faithful": "#e45756",
    "head_output_faithful": "#b279a2",
}


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _band(fig, x, lo, hi, colour, name, *, row=None, col=None, legendgroup=None):
    """A filled band between ``lo`` and ``hi`` (no legend entry)."""
    xs = list(x) + list(x)[::-1]
    ys = list(np.asarray(hi, float)) + list(np.asarray(lo, float))[::-1]
    trace = go.Scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=_rgba(colour, 0.14), line=dict(width=0),
                       hoverinfo="skip", showlegend=False, name=name, legendgroup=legendgroup)
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=col)


# -------------------------------------------------------------------------------------------
# One input
# -------------------------------------------------------------------------------------------
def cone_curve(curves: Mapping[str, np.ndarray] | np.ndarray, m: int, *, title: str = "",
               normalized_curves: Mapping[str, np.ndarray] | None = None,
               normalized_label: str = "I / m", raw_reference: bool = True) -> go.Figure:
    """Cone index per layer ``0..L``: raw ``I`` (left) and normalised (right), with the isotropic
    reference (``sqrt(m)`` left, ``1/sqrt(m)`` right) as dashed lines.

    ``curves``: one ``[L+1]`` array or ``{name: [L+1]}``; ``m``: rows counted. The normalised
    panel shows ``normalized_curves`` when given (else ``curves / m``). ``raw_reference=False``
    drops the ``sqrt(m)`` line of the left panel (it holds for unit-length rows only).
    """
    if not isinstance(curves, Mapping):
        curves = {"I": np.asarray(curves)}
    m = int(m)
    if normalized_curves is None:
        normalized_curves = {k: np.asarray(v, float) / max(m, 1) for k, v in curves.items()}
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("cone index I", f"normalised {normalized_label} (0…1)"))
    n = len(next(iter(curves.values())))
    x = np.arange(n)
    colours = category_colours(list(curves))
    for name, y in curves.items():
        y = np.asarray(y, float)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name, legendgroup=name,
                                 line=dict(color=colours[name], width=2.5),
                                 hovertemplate="layer %{x}<br>I = %{y:.3f}<extra>" + name + "</extra>"), row=1, col=1)
        yn = np.asarray(normalized_curves[name], float)
        fig.add_trace(go.Scatter(x=x, y=yn, mode="lines+markers", name=name, legendgroup=name, showlegend=False,
                                 line=dict(color=colours[name], width=2.5),
                                 hovertemplate=("layer %{x}<br>" + normalized_label + " = %{y:.3f}<extra>" + name
                                                + "</extra>")),
                      row=1, col=2)
    ref = float(np.sqrt(max(m, 0)))
    if raw_reference:
        fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[ref, ref], mode="lines",
                                 name=f"isotropic cloud ≈ √m = {ref:.2f}",
                                 line=dict(color=REFERENCE_COLOUR, dash="dash"), hoverinfo="name"), row=1, col=1)
    refn = 1.0 / ref if ref > 0 else np.nan
    fig.add_trace(go.Scatter(x=[x[0], x[-1]], y=[refn, refn], mode="lines", showlegend=not raw_reference,
                             name=f"isotropic ≈ 1/√m = {refn:.3f}", line=dict(color=REFERENCE_COLOUR, dash="dash"),
                             hoverinfo="name"), row=1, col=2)
    fig.update_xaxes(title_text="layer (0 = embeddings)", tickmode="linear", dtick=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    layout(fig, title=title, height=380, legend_below=True)
    if title:  # the panel titles sit under the figure title, not against it
        fig.update_layout(margin=dict(t=72), height=400)
    return fig


def stream_curves(streams: Mapping[str, np.ndarray], labels: Mapping[str, str], m: int, *,
                  normalized: bool = True, title: str = "", reference: bool = True) -> go.Figure:
    """Cone index of each stream per layer ``1..L``.

    ``streams``: ``{key: [L]}`` or, for per-head streams, ``{key: [L, H]}`` (drawn as the mean
    over heads with a min–max band). ``labels``: display names. The isotropic reference
    (``1/sqrt(m)`` normalised, else ``sqrt(m)``) is a dashed line.
    """
    fig = go.Figure()
    L = None
    for key, v in streams.items():
        v = np.asarray(v, float)
        L = v.shape[0]
        x = np.arange(1, L + 1)
        colour = STREAM_COLOURS.get(key, PALETTE[len(fig.data) % len(PALETTE)])
        name = labels.get(key, key)
        dash = "dot" if key.endswith("_faithful") else None
        if v.ndim == 2:
            _band(fig, x, v.min(1), v.max(1), colour, name, legendgroup=key)
            y = v.mean(1)
        else:
            y = v
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name, legendgroup=key,
                                 line=dict(color=colour, width=2.5, dash=dash),
                                 hovertemplate="layer %{x}<br>%{y:.3f}<extra>" + name + "</extra>"))
    if L and reference:
        ref = 1.0 / np.sqrt(m) if normalized else np.sqrt(m)
        fig.add_trace(go.Scatter(x=[1, L], y=[ref, ref], mode="lines", name="isotropic reference",
                                 line=dict(color=REFERENCE_COLOUR, dash="dash"), hoverinfo="name"))
    fig.update_xaxes(title_text="layer", tickmode="linear", dtick=1)
    fig.update_yaxes(title_text="I / m" if normalized else "I", rangemode="tozero")
    if normalized:
        fig.update_yaxes(range=[0, 1.05])
    return layout(fig, title=title, height=400, legend_below=True)


def head_heatmap(values: np.ndarray, *, title: str = "", colour_label: str = "I / m",
                 zrange: tuple[float, float] | None = None, colorscale: str = "Viridis") -> go.Figure:
    """Layer x head heatmap (rows layer 1..L top to bottom, columns head 1..H)."""
    v = np.asarray(values, float)
    L, H = v.shape
    zmin, zmax = zrange if zrange else (float(np.nanmin(v)), float(np.nanmax(v)))
    fig = go.Figure(go.Heatmap(
        z=v, x=np.arange(1, H + 1), y=np.arange(1, L + 1), colorscale=colorscale, zmin=zmin,
        zmax=zmax if zmax > zmin else zmin + 1e-9,
        colorbar=dict(title=dict(text=colour_label, side="right"), thickness=12),
        hovertemplate="layer %{y} head %{x}<br>" + colour_label + " = %{z:.3f}<extra></extra>",
    ))
    fig.update_xaxes(title_text="head", tickmode="linear", dtick=1)
    fig.update_yaxes(title_text="layer", tickmode="linear", dtick=1, autorange="reversed")
    return layout(fig, title=title, height=max(220, 90 + 34 * L), legend_below=False)


# -------------------------------------------------------------------------------------------
# Over a set
# -------------------------------------------------------------------------------------------
def class_curves(values: np.ndarray, groups: Sequence[str], *, x: Sequence[int] | None = None,
                 order: Sequence[str] | None = None, display: Mapping[str, str] | None = None,
                 y_title: str = "I / m", title: str = "", reference: float | np.ndarray | None = None,
                 reference_label: str = "isotropic reference", x_title: str = "layer",
                 unit_range: bool = False) -> go.Figure:
    """Mean ± sd per group of ``values [N, K]`` (one curve per group, a band of ± 1 sd).

    ``groups [N]``: group label per row; ``order``: legend order (default sorted);
    ``display``: display names. Hover shows mean, sd and n.
    """
    v = np.asarray(values, float)
    g = np.asarray(groups).astype(str)
    K = v.shape[1]
    x = np.arange(K) if x is None else np.asarray(x)
    present = set(g.tolist())
    keys = [k for k in (order or sorted(present)) if k in present]
    colours = category_colours(list(order or sorted(present)))
    display = display or {}
    fig = go.Figure()
    for k in keys:
        sel = v[g == k]
        mu, sd = np.nanmean(sel, 0), np.nanstd(sel, 0)
        name = f"{plotly_text(display.get(k, k))} (n={len(sel)})"
        _band(fig, x, mu - sd, mu + sd, colours[k], name, legendgroup=k)
        fig.add_trace(go.Scatter(
            x=x, y=mu, mode="lines+markers", name=name, legendgroup=k, line=dict(color=colours[k], width=2.5),
            customdata=np.stack([sd, np.full(K, len(sel))], axis=1),
            hovertemplate="layer %{x}<br>mean %{y:.3f} ± %{customdata[0]:.3f}<br>n = %{customdata[1]}<extra>"
            + plotly_text(display.get(k, k)) + "</extra>",
        ))
    if reference is not None:
        ref = np.broadcast_to(np.asarray(reference, float), (K,))
        fig.add_trace(go.Scatter(x=x, y=ref, mode="lines", name=reference_label,
                                 line=dict(color=REFERENCE_COLOUR, dash="dash"), hoverinfo="name"))
    fig.update_xaxes(title_text=x_title, tickmode="linear", dtick=1)
    fig.update_yaxes(title_text=y_title)
    if unit_range:
        fig.update_yaxes(range=[0, 1.05])
    return layout(fig, title=title, height=420, legend_below=True)


def histogram_counts(series: Mapping[str, np.ndarray], bins: int = 20) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Common equal-width bin edges over all series (``[bins+1]``) and the counts of each."""
    allv = np.concatenate([np.asarray(v, float).ravel() for v in series.values()]) if series else np.zeros(0)
    allv = allv[np.isfinite(allv)]
    if allv.size == 0:
        edges = np.linspace(0.0, 1.0, bins + 1)
    else:
        lo, hi = float(allv.min()), float(allv.max())
        if hi <= lo:
            lo, hi = lo - 0.5 * max(abs(lo), 1e-3), hi + 0.5 * max(abs(hi), 1e-3)
        edges = np.linspace(lo, hi, bins + 1)
    counts = {k: np.histogram(np.asarray(v, float)[np.isfinite(v)], bins=edges)[0] for k, v in series.items()}
    return edges, counts


def layer_histograms(series: Mapping[str, np.ndarray], *, panel_titles: Sequence[str], bins: int = 20,
                     x_title: str = "I / m", title: str = "", cols: int = 4,
                     display: Mapping[str, str] | None = None, order: Sequence[str] | None = None) -> go.Figure:
    """One step histogram per group and panel (the official code's 20-bin cone-index figures).

    ``series``: ``{group: [n_group, K]}`` (K panels, e.g. layers); bins are shared by the
    groups within a panel. Counts are drawn as steps (``line_shape='hv'``).
    """
    display = display or {}
    K = len(panel_titles)
    cols = max(1, min(cols, K))
    rows = int(np.ceil(K / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(panel_titles), horizontal_spacing=0.06,
                        vertical_spacing=0.16 if rows > 1 else 0.1)
    keys = list(series)
    colours = category_colours(list(order) if order else keys)
    for j in range(K):
        edges, counts = histogram_counts({k: np.asarray(series[k], float)[:, j] for k in keys}, bins)
        r, c = j // cols + 1, j % cols + 1
        for k in keys:
            cnt = counts[k]
            xs = np.concatenate([edges[:-1], edges[-1:]])
            ys = np.concatenate([cnt, cnt[-1:]])
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", line_shape="hv", name=plotly_text(display.get(k, k)), legendgroup=k,
                showlegend=j == 0, line=dict(color=colours.get(k, PALETTE[0]), width=2),
                hovertemplate="%{x:.3f}: %{y}<extra>" + plotly_text(display.get(k, k)) + "</extra>",
            ), row=r, col=c)
    fig.update_xaxes(nticks=4)  # plotly picks the decimals (narrow ranges need more than 2)
    fig.update_xaxes(title_text=x_title, row=rows)
    fig.update_yaxes(title_text="count", col=1)
    fig.update_annotations(font_size=12)
    return layout(fig, title=title, height=120 + 230 * rows, legend_below=True)


def projection_scatter(coords: np.ndarray, groups: Sequence[str], *, hover: Sequence[str] | None = None,
                       order: Sequence[str] | None = None, display: Mapping[str, str] | None = None,
                       title: str = "", axis_titles: Sequence[str] | None = None) -> go.Figure:
    """2-D or 3-D scatter of ``coords [N, 2|3]`` coloured by group."""
    X = np.asarray(coords, float)
    k = X.shape[1]
    if k not in (2, 3):
        raise ValueError(f"projection_scatter needs 2 or 3 columns, got {k}")
    g = np.asarray(groups).astype(str)
    present = set(g.tolist())
    keys = [c for c in (order or sorted(present)) if c in present]
    colours = category_colours(list(order or sorted(present)))
    display = display or {}
    hover = np.asarray(plotly_texts(hover) if hover is not None else [""] * len(g), dtype=object)
    axis_titles = list(axis_titles or [f"dim {i + 1}" for i in range(k)])
    fig = go.Figure()
    for c in keys:
        sel = g == c
        shown = plotly_text(display.get(c, c))
        common = dict(mode="markers", name=shown, text=hover[sel].tolist(),
                      hovertemplate="%{text}<extra>" + shown + "</extra>")
        if k == 2:
            marker = dict(size=9, color=colours[c], opacity=0.85, line=dict(width=0.5, color="white"))
            fig.add_trace(go.Scatter(x=X[sel, 0], y=X[sel, 1], marker=marker, **common))
        else:
            fig.add_trace(go.Scatter3d(x=X[sel, 0], y=X[sel, 1], z=X[sel, 2],
                                       marker=dict(size=4, color=colours[c], opacity=0.85), **common))
    if k == 2:
        fig.update_xaxes(title_text=axis_titles[0])
        fig.update_yaxes(title_text=axis_titles[1])
        layout(fig, title=title, height=460, legend_below=True)
    else:
        fig.update_layout(scene=dict(xaxis_title=axis_titles[0], yaxis_title=axis_titles[1],
                                     zaxis_title=axis_titles[2]))
        layout(fig, title=title, height=520, legend_below=True)
        fig.update_layout(margin=dict(l=0, r=0, t=60 if title else 25, b=0))
    return fig


def pareto_chart(ratios: np.ndarray, *, title: str = "") -> go.Figure:
    """Explained-variance ratio per principal component (bars) and cumulative % (line)."""
    r = np.asarray(ratios, float)
    x = [f"PC{i + 1}" for i in range(len(r))]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=x, y=100 * r, name="explained variance %", marker_color=PALETTE[0],
                         hovertemplate="%{x}: %{y:.1f}%<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=x, y=100 * np.cumsum(r), name="cumulative %", mode="lines+markers",
                             line=dict(color=PALETTE[1], width=2.5),
                             hovertemplate="up to %{x}: %{y:.1f}%<extra></extra>"), secondary_y=True)
    fig.update_yaxes(title_text="explained variance %", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text="cumulative %", range=[0, 105], tickvals=[0, 25, 50, 75, 100], secondary_y=True,
                     showgrid=False)
    return layout(fig, title=title, height=340, legend_below=True)


def layer_score_curve(scores: Mapping[str, np.ndarray], *, x: Sequence[int] | None = None, title: str = "",
                      y_title: str = "score", x_title: str = "layer (0 = embeddings)",
                      selected: int | None = None, chance: float | None = None) -> go.Figure:
    """One line per score over layers (e.g. silhouette per layer); ``selected`` marks a layer;
    ``chance`` draws the chance level, dashed, over the layers where a score exists (a layer left
    blank, NaN, has no chance level to compare with)."""
    fig = go.Figure()
    colours = category_colours(list(scores))
    scored = None
    for name, v in scores.items():
        v = np.asarray(v, float)
        xs = np.arange(len(v)) if x is None else np.asarray(x)
        scored = xs[np.isfinite(v)] if scored is None else np.union1d(scored, xs[np.isfinite(v)])
        fig.add_trace(go.Scatter(x=xs, y=v, mode="lines+markers", name=name, line=dict(color=colours[name], width=2.5),
                                 hovertemplate="layer %{x}: %{y:.3f}<extra>" + name + "</extra>"))
    if chance is not None and scored is not None and len(scored):
        fig.add_trace(go.Scatter(x=[scored.min(), scored.max()], y=[chance, chance], mode="lines", name="chance",
                                 line=dict(color="#888888", dash="dash", width=1.5), hoverinfo="skip"))
    if selected is not None:
        fig.add_vline(x=selected, line=dict(color="#e4572e", dash="dot"))
    fig.update_xaxes(title_text=x_title, tickmode="linear", dtick=1)
    fig.update_yaxes(title_text=y_title)
    return layout(fig, title=title, height=320, legend_below=True)


def entropy_figure(values: Mapping[str, np.ndarray], labels: Mapping[str, str], *, title: str = "",
                   y_title: str = "entropy (nats)", reference: Mapping[str, float] | None = None) -> go.Figure:
    """Entropy per layer ``1..L``: mean over heads (line) with the min–max over heads (band).

    ``values``: ``{key: [L, H]}``; ``reference``: optional ``{label: value}`` dashed lines
    (e.g. the maximum ``ln n``)."""
    fig = go.Figure()
    colours = category_colours(list(values))
    L = 0
    for key, v in values.items():
        v = np.asarray(v, float)
        L = v.shape[0]
        x = np.arange(1, L + 1)
        name = labels.get(key, key)
        _band(fig, x, v.min(1), v.max(1), colours[key], name, legendgroup=key)
        fig.add_trace(go.Scatter(x=x, y=v.mean(1), mode="lines+markers", name=name, legendgroup=key,
                                 line=dict(color=colours[key], width=2.5),
                                 hovertemplate="layer %{x}: %{y:.3f}<extra>" + name + "</extra>"))
    for label, value in (reference or {}).items():
        fig.add_trace(go.Scatter(x=[1, max(L, 1)], y=[value, value], mode="lines", name=label,
                                 line=dict(color=REFERENCE_COLOUR, dash="dash"), hoverinfo="name"))
    fig.update_xaxes(title_text="layer", tickmode="linear", dtick=1)
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    return layout(fig, title=title, height=380, legend_below=True)


def isotropy_figure(x, series: Mapping[str, tuple[np.ndarray, np.ndarray]], m: float, *, title: str = "") -> go.Figure:
    """Per layer, IsoScore (solid) and the normalised cone index I/m (dashed) of each cloud in
    ``series`` (``name -> (isoscore, cone)``), with both isotropic references: IsoScore = 1 and
    I/m = 1/√m for ``m`` unrelated directions (Rudman et al. 2022, arXiv:2108.07344)."""
    colours = category_colours(list(series))
    fig = go.Figure()
    for name, (iso, cone) in series.items():
        c, shown = colours[name], plotly_text(name)
        fig.add_trace(go.Scatter(x=x, y=iso, mode="lines+markers", name=f"IsoScore · {shown}",
                                 line=dict(color=c, width=2.5),
                                 legendgroup=name, hovertemplate="layer %{x}<br>IsoScore %{y:.3f}<extra></extra>"))
        fig.add_trace(go.Scatter(x=x, y=cone, mode="lines", name=f"cone I/m · {shown}", legendgroup=name,
                                 line=dict(color=c, width=2, dash="dash"),
                                 hovertemplate="layer %{x}<br>I/m %{y:.3f}<extra></extra>"))
    fig.add_hline(y=1.0, line=dict(color=REFERENCE_COLOUR, dash="dot"), annotation_text="isotropic: IsoScore = 1",
                  annotation_position="bottom left")  # left: the cone's curve rises to 1 on the right
    fig.add_hline(y=1 / np.sqrt(max(m, 1.0)), line=dict(color=REFERENCE_COLOUR, dash="dashdot"),
                  annotation_text=f"isotropic: I/m = 1/√m ({1 / np.sqrt(max(m, 1.0)):.2f})",
                  annotation_position="top")  # mid-way: IsoScore starts high on the left and falls
    layout(fig, title=title, height=420, legend_below=True)
    fig.update_xaxes(title="layer (0 = embeddings)", dtick=1)
    fig.update_yaxes(title="IsoScore · I/m", range=[0, 1.05])
    return fig


#: How each of Dong et al.'s path variants is drawn (label on screen, dash).
RANK_COLLAPSE_STYLE = {
    "full": ("full model", "solid"),
    "no_mlp": ("without MLPs (SAN + skip)", "dash"),
    "no_skip": ("without skips (SAN + MLP)", "dot"),
    "attention_only": ("attention only (SAN)", "dashdot"),
}


def rank_collapse_figure(x, curves: Mapping[str, np.ndarray], *, spread: Mapping[str, np.ndarray] | None = None,
                         cone: np.ndarray | None = None, cone_label: str = "cone index I/m", title: str = "",
                         norm_label: str = "‖·‖₁,∞") -> go.Figure:
    """Per hidden state, Dong et al.'s relative residual of each path variant in ``curves`` (name ->
    ``[L+1]``; names of :data:`RANK_COLLAPSE_STYLE`), a ± ``spread`` band per variant when given (the
    std over a set), and the cone index of the same tokens as a grey line (both ask whether the token
    cloud narrows: a residual near 0 and a cone index near 1 mean collapse)."""
    colours = category_colours(list(RANK_COLLAPSE_STYLE))
    fig = go.Figure()
    for name, y in curves.items():
        label, dash = RANK_COLLAPSE_STYLE.get(name, (name, "solid"))
        c = colours.get(name, PALETTE[0])
        y = np.asarray(y, dtype=float)
        if spread is not None and name in spread:
            s = np.asarray(spread[name], dtype=float)
            fig.add_trace(go.Scatter(x=np.r_[x, x[::-1]], y=np.r_[y + s, (y - s)[::-1]], fill="toself", mode="lines",
                                     fillcolor=c, opacity=0.15, line=dict(width=0), hoverinfo="skip",
                                     showlegend=False, legendgroup=name))
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=label, legendgroup=name,
                                 line=dict(color=c, width=2.5, dash=dash),
                                 hovertemplate=f"{label}<br>layer %{{x}}<br>residual %{{y:.3f}}<extra></extra>"))
    if cone is not None:
        fig.add_trace(go.Scatter(x=x, y=np.asarray(cone, dtype=float), mode="lines", name=cone_label,
                                 line=dict(color=REFERENCE_COLOUR, width=2),
                                 hovertemplate=f"{cone_label}<br>layer %{{x}}<br>%{{y:.3f}}<extra></extra>"))
    fig.add_hline(y=0.0, line=dict(color=REFERENCE_COLOUR, dash="dot"), annotation_text="rank 1: residual 0",
                  annotation_position="top left")
    layout(fig, title=title, height=420, legend_below=True)
    fig.update_xaxes(title="hidden state (0 = embeddings)", dtick=1)
    fig.update_yaxes(title=f"‖X − 1 meanᵀ‖ / ‖X‖ ({norm_label}) · cone", rangemode="tozero")
    return fig
