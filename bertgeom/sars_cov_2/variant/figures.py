"""Plotly figures of the Variant Classifier page (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bertgeom.figures.base import category_colours
from bertgeom.safety import plotly_texts

DOMAIN_COLOURS = category_colours(["SP", "NTD", "RBD", "FP", "HR1", "HR2", "TM", "CT", "S1", "S2"])
NO_DOMAIN_COLOUR = "#c8c8c8"  # the paper's "no domain N" stretches between named domains


def _domain_spans(domains: Sequence[str]) -> list[tuple[str, int, int]]:
    """Contiguous runs ``(domain, first, last)`` of equal domain labels along the tokens."""
    out = []
    start = 0
    for i in range(1, len(domains) + 1):
        if i == len(domains) or domains[i] != domains[start]:
            if domains[start]:
                out.append((domains[start], start, i - 1))
            start = i
    return out


#: Vertical layout of :func:`spike_track` (paper fractions): the domain bar has its own axis under
#: the tracks, so no track (integrated gradients go negative) can draw over it.
BAR_DOMAIN = (0.0, 0.11)
#: Track colours: distinct from each other and from every domain colour of the bar.
TRACK_COLOURS = ("#511cfb", "#222a2a", "#da16ff", "#b68100", "#00a08b")
TRACK_DOMAIN = (0.17, 1.0)


def spike_track(
    tracks: dict[str, np.ndarray],
    axis_labels: Sequence[str],
    domains: Sequence[str],
    *,
    mutation_tokens: dict[int, str] | None = None,
    title: str = "",
) -> go.Figure:
    """Per-token signals along the spike with the domains drawn as a bar underneath.

    ``tracks`` maps a name to a ``[T]`` array (special positions included); each is drawn
    scaled to its own maximum absolute value so shapes can be compared (a signed track such as
    integrated gradients spans -1…1). ``mutation_tokens`` maps token positions to mutation names
    (drawn as ticks). The tracks and the domain bar sit on two y axes with disjoint domains
    (:data:`TRACK_DOMAIN` above :data:`BAR_DOMAIN`), sharing the x axis drawn under the bar.
    """
    t = len(axis_labels)
    axis_labels = plotly_texts(str(a) for a in axis_labels)  # k-mers of a custom model's vocabulary
    x = np.arange(t)
    fig = go.Figure()
    shapes, notes = [], []  # set once below: add_shape/add_annotation re-validate the whole list on every call
    for dom, a, b in _domain_spans(list(domains)):
        shapes.append(dict(type="rect", x0=a - 0.5, x1=b + 0.5, y0=0, y1=1, xref="x", yref="y2",
                           fillcolor=DOMAIN_COLOURS.get(dom, NO_DOMAIN_COLOUR), line_width=0, layer="below"))
        named = dom in DOMAIN_COLOURS
        notes.append(dict(x=(a + b) / 2, y=0.5, xref="x", yref="y2", text=dom if named and b - a > 6 else "",
                          showarrow=False, font=dict(size=10, color="white")))
    fig.update_layout(shapes=shapes, annotations=notes)
    fig.add_trace(go.Scatter(x=[0], y=[0.5], yaxis="y2", mode="markers", marker=dict(opacity=0), hoverinfo="skip",
                             showlegend=False))  # registers the bar's axis
    low = 0.0
    # one hue per track, none of them a domain's (an orange track over the orange NTD would read as "NTD")
    colours = dict(zip(tracks, TRACK_COLOURS))
    for name, values in tracks.items():
        v = np.asarray(values, dtype=float)
        scale = float(np.max(np.abs(v[1:-1]))) if t > 2 else 1.0
        scale = scale if scale > 0 else 1.0
        inner = v[1:-1] if t > 2 else v  # [CLS] and [SEP] are off the scale, as above
        low = min(low, float(np.nanmin(inner / scale)) if inner.size else 0.0)
        hover = [f"{axis_labels[i]} ({domains[i] or '-'})<br>{name}: {v[i]:.4g}" for i in range(t)]
        fig.add_trace(go.Scatter(x=x, y=v / scale, mode="lines", name=name, hovertext=hover, hoverinfo="text",
                                 line=dict(width=1.5, color=colours.get(name))))
    if mutation_tokens:
        pos = sorted(mutation_tokens)
        fig.add_trace(go.Scatter(x=pos, y=[1.08] * len(pos), mode="markers", name="mutations",
                                 marker=dict(symbol="triangle-down", size=8, color="#333"),
                                 hovertext=plotly_texts(mutation_tokens[p] for p in pos), hoverinfo="text"))
    step = max(1, t // 12)
    ticks = list(range(1, t - 1, step))
    bottom = min(-0.05, low - 0.05)  # room for a signed track's lowest value, none wasted otherwise
    fig.update_layout(
        title=title, height=380, margin=dict(l=10, r=10, t=70 if title else 40, b=40), plot_bgcolor="white",
        xaxis=dict(title="spike position (amino acids covered by the token)", tickmode="array", tickvals=ticks,
                   ticktext=[axis_labels[i] for i in ticks], range=[-1, t], anchor="y2"),
        yaxis=dict(title="relative value", range=[bottom, 1.15], zeroline=low < -0.02, zerolinecolor="#bbbbbb",
                   domain=list(TRACK_DOMAIN)),
        yaxis2=dict(domain=list(BAR_DOMAIN), range=[0, 1], visible=False, fixedrange=True),
        legend=dict(orientation="h", yanchor="bottom", y=1.01, x=0),  # above the plot, clear of the mutation ticks
    )
    return fig


def layer_strip(values: np.ndarray, axis_labels: Sequence[str], *, title: str = "") -> go.Figure:
    """Heatmap ``[L, T]`` (e.g. [CLS] attention per layer) with layer rows numbered from 1."""
    v = np.asarray(values, dtype=float)
    t = v.shape[1]
    step = max(1, t // 12)
    ticks = list(range(0, t, step))
    fig = go.Figure(go.Heatmap(z=v, x=list(range(t)), y=[f"L{i + 1}" for i in range(v.shape[0])],
                               colorscale="Blues", colorbar=dict(thickness=10),
                               hovertemplate="%{y} token %{x}<br>%{z:.4f}<extra></extra>"))
    fig.update_layout(title=title, height=80 + 26 * v.shape[0], margin=dict(l=10, r=10, t=30 if title else 10, b=30),
                      xaxis=dict(tickmode="array", tickvals=ticks,
                                 ticktext=plotly_texts(str(axis_labels[i]) for i in ticks)),
                      yaxis=dict(autorange="reversed"))
    return fig
