"""Figures of the further analyses (pure functions, plotly): attention flow beside rollout, the
top-head domain test, and two inputs compared.  Conventions of :mod:`bertgeom.figures.base`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from bertgeom.figures.base import head_grid
from bertgeom.figures.heads import attention_map
from bertgeom.safety import plotly_text, plotly_texts

__all__ = ["token_bars", "significance_grid", "difference_map"]


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
