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
#: The shade of a recombinant breakpoint interval, on the spike track and the genome track.
BAND_COLOUR = "#f4a63a"


def spike_track(
    tracks: dict[str, np.ndarray],
    axis_labels: Sequence[str],
    domains: Sequence[str],
    *,
    mutation_tokens: dict[int, str] | None = None,
    bands: Sequence[tuple[int, int, str]] = (),
    title: str = "",
) -> go.Figure:
    """Per-token signals along the spike with the domains drawn as a bar underneath.

    ``tracks`` maps a name to a ``[T]`` array (special positions included); each is drawn
    scaled to its own maximum absolute value so shapes can be compared (a signed track such as
    integrated gradients spans -1…1). ``mutation_tokens`` maps token positions to mutation names
    (drawn as ticks). ``bands``: ``(first token, last token, label)`` shaded over the tracks (a
    recombinant breakpoint interval inside the spike, labelled with its parents). The tracks and the
    domain bar sit on two y axes with disjoint domains (:data:`TRACK_DOMAIN` above
    :data:`BAR_DOMAIN`), sharing the x axis drawn under the bar.
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
    for a, b, _label in bands:  # over the tracks, under their lines; named in the legend (below)
        shapes.append(dict(type="rect", x0=a - 0.5, x1=b + 0.5, y0=TRACK_DOMAIN[0], y1=TRACK_DOMAIN[1], xref="x",
                           yref="paper", fillcolor=BAND_COLOUR, opacity=0.45, line_width=0, layer="below"))
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
    for a, b, label in bands:  # a legend entry in the band's colour (a label over the tracks hid the ticks)
        fig.add_trace(go.Scatter(x=[(a + b) / 2], y=[None], mode="markers", hoverinfo="skip",
                                 name=plotly_texts([f"breakpoint {label}"])[0],
                                 marker=dict(symbol="square", size=12, color=BAND_COLOUR)))
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


#: The genome track's marks, top row first: kind -> (colour, symbol).
MARK_STYLE = {"private": ("#d62728", "line-ns-open"), "reversion": ("#1f77b4", "line-ns-open"),
              "on the node's path": ("#7f7f7f", "line-ns-open")}
GENOME_GENE_DOMAIN = (0.0, 0.16)
GENOME_MARK_DOMAIN = (0.24, 0.86)


def genome_track(
    length: int,
    genes: Sequence[tuple[str, int, int]],
    marks: dict[str, Sequence[tuple[int, str]]],
    *,
    unread: Sequence[tuple[int, int]] = (),
    bands: Sequence[tuple[int, int, str]] = (),
    title: str = "",
) -> go.Figure:
    """The sequence along the genome: its nucleotide changes as ticks, one row per kind (``marks``:
    kind -> ``(position, hover label)``, drawn top to bottom in :data:`MARK_STYLE`'s order), the
    stretches it does not read (``unread`` ``(first, last)``, shaded grey), each recombinant
    breakpoint interval (``bands`` ``(after, before, "5' parent | 3' parent")``, shaded and labelled
    with its interval, the parents named over the parts on either side), and the genes as a bar
    underneath (``genes`` ``(name, start, end)``). Positions are 1-based genome coordinates."""
    fig = go.Figure()
    kinds = [k for k in MARK_STYLE if k in marks] + [k for k in marks if k not in MARK_STYLE]
    rows = {k: len(kinds) - 1 - i for i, k in enumerate(kinds)}  # the first kind on top
    shapes, notes = [], []
    gene_colours = category_colours([g for g, _, _ in genes])
    lanes = {}
    for name, a, b in genes:  # a gene inside or overlapping the one before it (ORF9b in N) takes the lower lane
        y0, y1 = (0.0, 0.42) if any(s0 < a < e0 for s0, e0 in lanes.values()) else (0.48, 1.0)
        lanes[name] = (a, b)
        shapes.append(dict(type="rect", x0=a, x1=b, y0=y0, y1=y1, xref="x", yref="y2",
                           fillcolor=gene_colours.get(name, NO_DOMAIN_COLOUR), line_width=0))
        notes.append(dict(x=(a + b) / 2, y=(y0 + y1) / 2, xref="x", yref="y2", showarrow=False,
                          text=plotly_texts([name])[0] if b - a > length / 25 else "",
                          font=dict(size=10, color="white")))
    lo_y, hi_y = -0.6, len(kinds) - 0.4
    for a, b in unread:
        shapes.append(dict(type="rect", x0=a - 0.5, x1=b + 0.5, y0=lo_y, y1=hi_y, xref="x", yref="y",
                           fillcolor="#e6e6e6", line_width=0, layer="below"))
    min_width = length / 300  # a 40-base interval stays visible on a 30 kb axis
    first = next((b + 1 for a, b in unread if a <= 1), 1)  # the read part, where the parents' names go
    last = next((a - 1 for a, b in unread if b >= length), length)
    edges = [first]
    for a, b, label in bands:
        mid, half = (a + b) / 2, max((b - a) / 2, min_width / 2)
        shapes.append(dict(type="rect", x0=mid - half, x1=mid + half, y0=lo_y, y1=hi_y, xref="x", yref="y",
                           fillcolor=BAND_COLOUR, opacity=0.45, line_width=0, layer="below"))
        notes.append(dict(x=mid, y=1.0, xref="x", yref="paper", yanchor="bottom", showarrow=False,
                          text=plotly_texts([f"breakpoint {a:,}-{b:,}"])[0], font=dict(size=10, color="#8a4b00")))
        edges.append(mid)
    edges.append(last)
    if bands:  # each part under its parent's name
        parents = [bands[0][2].split(" | ")[0]] + [lab.split(" | ")[-1] for _, _, lab in bands]
        for (x0, x1), parent in zip(zip(edges, edges[1:]), parents):
            notes.append(dict(x=(x0 + x1) / 2, y=GENOME_MARK_DOMAIN[1], xref="x", yref="paper", yanchor="bottom",
                              showarrow=False, text=plotly_texts([parent])[0], font=dict(size=11, color="#333")))
    fig.update_layout(shapes=shapes, annotations=notes)
    fig.add_trace(go.Scatter(x=[(a + b) / 2 for _, a, b in genes], y=[0.7] * len(genes), yaxis="y2", mode="markers",
                             marker=dict(opacity=0, size=12), hoverinfo="text", showlegend=False,
                             hovertext=plotly_texts(f"{g} {a:,}-{b:,}" for g, a, b in genes)))  # the gene bar's axis
    for kind in kinds:
        pts = sorted(marks[kind])
        colour, symbol = MARK_STYLE.get(kind, ("#333333", "line-ns-open"))
        fig.add_trace(go.Scatter(x=[p for p, _ in pts], y=[rows[kind]] * len(pts), mode="markers",
                                 name=plotly_texts([f"{kind} ({len(pts)})"])[0], hoverinfo="text",
                                 hovertext=plotly_texts(lab for _, lab in pts),
                                 marker=dict(symbol=symbol, size=14, color=colour, line=dict(width=2, color=colour))))
    fig.update_layout(
        title=title, height=250 if bands else 215, plot_bgcolor="white",
        margin=dict(l=10, r=10, t=60 if title else 30 if bands else 10, b=40),  # room for the parents' names
        xaxis=dict(title="genome position (Wuhan-Hu-1)", range=[0, length + 1], anchor="y2", tickformat=",d"),
        yaxis=dict(domain=[GENOME_MARK_DOMAIN[0], GENOME_MARK_DOMAIN[1] if bands else 1.0], range=[lo_y, hi_y],
                   tickmode="array",
                   tickvals=list(rows.values()), ticktext=plotly_texts(f"{k} ({len(marks[k])})" for k in rows),
                   fixedrange=True, showgrid=False),
        yaxis2=dict(domain=list(GENOME_GENE_DOMAIN), range=[0, 1], visible=False, fixedrange=True),
        showlegend=False,
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
