"""Pure figure functions of the Subspace Directions page (no Streamlit here).

Inputs are the arrays of :mod:`bertgeom.analysis.subspace` (0-based layer/head); labels shown to users
are 1-based, as in :mod:`bertgeom.figures`. Every figure carries ``customdata`` that says
what a point is (a head ``[layer, head]``, a spectrum index, a token ``[position, 0=query /
1=key]``) so that selections and hover texts can be read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertgeom.figures.base import category_colours, head_grid, head_label, layout
from bertgeom.safety import plotly_text, plotly_texts  # noqa: F401

__all__ = [
    "scalar_grid",
    "spectra_figure",
    "sym_eigen_figure",
    "principal_angles_figure",
    "complex_eigen_figure",
    "attention_spectrum_figure",
    "energy_figure",
    "joint_qk_figure",
    "histogram_figure",
    "class_box_figure",
    "attention_comparison_figure",
]

QUERY_COLOUR = "#4c78a8"
KEY_COLOUR = "#f58518"
POS_COLOUR = "#2f7ebc"
NEG_COLOUR = "#d6604d"
ZERO_COLOUR = "#bab0ac"


# -------------------------------------------------------------------------------------------
# Layer x head grids
# -------------------------------------------------------------------------------------------
def scalar_grid(
    values: np.ndarray,
    *,
    label: str,
    selected: tuple[int, int] | None = None,
    title: str = "",
    colorscale: str = "Viridis",
    zrange: tuple[float, float] | None = None,
) -> go.Figure:
    """Clickable layer x head grid of one per-head scalar (``[L, H]``, NaN allowed).

    A thin wrapper of :func:`bertgeom.figures.head_grid` (customdata ``[layer, head]``; all-NaN
    and constant values are handled there).
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise ValueError(f"scalar_grid expects [L, H] values, got shape {v.shape}")
    return head_grid(v, title=title, colour_label=label, selected=selected, colorscale=colorscale, zrange=zrange)


# -------------------------------------------------------------------------------------------
# Weight-space drill-down (one head)
# -------------------------------------------------------------------------------------------
def spectra_figure(
    spectra: Mapping[str, np.ndarray],
    *,
    title: str = "",
    log_y: bool = True,
    y_title: str = "singular value",
) -> go.Figure:
    """Line + marker plot of several descending spectra (one trace per entry, x = 1..k).

    ``customdata`` of each point is its 1-based index in the spectrum.
    """
    fig = go.Figure()
    for name, sv in spectra.items():
        s = np.asarray(sv, dtype=float).ravel()
        idx = np.arange(1, s.size + 1)
        fig.add_trace(
            go.Scatter(
                x=idx, y=s, mode="lines+markers", name=name, customdata=idx.tolist(),
                marker=dict(size=5), hovertemplate=f"{name}<br>σ_%{{x}} = %{{y:.4g}}<extra></extra>",
            )
        )
    layout(fig, title=title, legend=dict(orientation="h", y=-0.25))
    fig.update_xaxes(title="index i (descending)")
    fig.update_yaxes(title=y_title, type="log" if log_y else "linear")
    return fig


def sym_eigen_figure(eigs: np.ndarray, *, d_model: int, rtol: float = 1e-6, title: str = "") -> go.Figure:
    """Bars of the non-trivial eigenvalues of ``S_h`` (descending), coloured by sign.

    Eigenvalues with ``|lambda| <= rtol * max|lambda|`` count as zero; the other
    ``d_model - len(eigs)`` eigenvalues of ``S_h`` are exactly zero and are stated in the
    title. ``customdata``: 1-based index.
    """
    lam = np.asarray(eigs, dtype=float).ravel()
    tol = rtol * (np.abs(lam).max() if lam.size else 0.0)
    sign = np.where(lam > tol, "positive", np.where(lam < -tol, "negative", "≈ 0"))
    colours = {"positive": POS_COLOUR, "negative": NEG_COLOUR, "≈ 0": ZERO_COLOUR}
    idx = np.arange(1, lam.size + 1)
    fig = go.Figure()
    for name, colour in colours.items():
        sel = sign == name
        if not sel.any():
            continue
        fig.add_trace(
            go.Bar(x=idx[sel], y=lam[sel], name=f"{name} ({int(sel.sum())})", marker_color=colour,
                   customdata=idx[sel].tolist(), hovertemplate="λ_%{x} = %{y:.4g}<extra></extra>")
        )
    n_trivial = max(d_model - lam.size, 0)
    full_title = title or "Eigenvalues of the symmetric part S_h"
    full_title += f"<br><sup>+ {n_trivial} eigenvalues exactly 0 (rank S_h ≤ 2·d_head)</sup>"
    layout(fig, title=full_title, height=340, legend=dict(orientation="h", y=-0.25), bargap=0.1)
    fig.update_xaxes(title="index i (descending)")
    fig.update_yaxes(title="λ_i(S_h)", zeroline=True, zerolinecolor="#888888")
    return fig


def principal_angles_figure(angles_rad: np.ndarray, *, title: str = "") -> go.Figure:
    """Bars of the principal angles (degrees, ascending) between the query and key subspaces.

    0° = both read the same input direction; 90° = orthogonal directions. ``customdata``:
    1-based index.
    """
    deg = np.degrees(np.asarray(angles_rad, dtype=float).ravel())
    idx = np.arange(1, deg.size + 1)
    fig = go.Figure(
        go.Bar(x=idx, y=deg, marker_color=QUERY_COLOUR, customdata=idx.tolist(),
               hovertemplate="θ_%{x} = %{y:.2f}°<extra></extra>")
    )
    layout(fig, title=title or "Principal angles, query vs key subspace", height=340)
    fig.update_xaxes(title="index i (ascending)")
    fig.update_yaxes(title="angle (degrees)", range=[0, 90], dtick=15)
    return fig


def complex_eigen_figure(eigvals: np.ndarray, *, title: str = "") -> go.Figure:
    """Eigenvalues of ``M_h`` (its non-zero ones = those of ``W_k,h W_q,h^T``) in the complex
    plane. Real positive = "attend to similar", imaginary parts = rotation (skew) in the search.
    ``customdata``: 1-based index (by decreasing modulus)."""
    z = np.asarray(eigvals).ravel().astype(complex)
    order = np.argsort(-np.abs(z), kind="stable")
    z = z[order]
    idx = np.arange(1, z.size + 1)
    r = float(np.abs(z).max()) if z.size else 1.0
    fig = go.Figure(
        go.Scatter(x=z.real, y=z.imag, mode="markers", customdata=idx.tolist(),
                   marker=dict(size=8, color=np.abs(z), colorscale="Viridis", line=dict(width=0.5, color="white"),
                               colorbar=dict(title=dict(text="|λ|", side="right"), thickness=10)),
                   hovertemplate="λ = %{x:.3g} %{y:+.3g}i<extra></extra>")
    )
    layout(fig, title=title or "Eigenvalues of M_h (complex plane)", height=340)
    lim = 1.08 * (r if r > 0 else 1.0)
    fig.update_xaxes(title="Re λ", range=[-lim, lim], zeroline=True, zerolinecolor="#888888")
    fig.update_yaxes(title="Im λ", range=[-lim, lim], zeroline=True, zerolinecolor="#888888",
                     scaleanchor="x", scaleratio=1)
    return fig


# -------------------------------------------------------------------------------------------
# Data-space drill-down (one head, one input)
# -------------------------------------------------------------------------------------------
def attention_spectrum_figure(sv: np.ndarray, *, eps: float = 1e-3, title: str = "",
                              faithful_sv: np.ndarray | None = None) -> go.Figure:
    """Singular values of one attention matrix (log scale) with the ε line of D2.

    ``faithful_sv``: optionally the spectrum of the faithful (official-code) attention, drawn
    as a second trace. ``customdata``: 1-based index.
    """
    series = {"correct (model)": sv}
    if faithful_sv is not None:
        series["faithful (official code)"] = faithful_sv
    pos = np.concatenate([np.asarray(v, dtype=float).ravel() for v in series.values()] + [np.array([eps])])
    pos = pos[pos > 0]
    decades = np.log10(pos.max() / pos.min()) if pos.size else 1.0
    fig = go.Figure()
    for (name, s), colour in zip(series.items(), (QUERY_COLOUR, KEY_COLOUR)):
        s = np.asarray(s, dtype=float).ravel()
        idx = np.arange(1, s.size + 1)
        rank = int((s >= eps).sum())
        fig.add_trace(
            go.Scatter(x=idx, y=np.maximum(s, 1e-12), mode="lines+markers", name=f"{name}: r_ε = {rank}",
                       marker=dict(size=4, color=colour), line=dict(color=colour), customdata=idx.tolist(),
                       hovertemplate="σ_%{x} = %{y:.3g}<extra></extra>")
        )
    fig.add_hline(y=eps, line=dict(color="#888888", dash="dash"), annotation_text=f"ε = {eps:g}",
                  annotation_position="top right")
    layout(fig, title=title or "Singular values of A (D2)", height=340,
            legend=dict(orientation="h", y=-0.3), showlegend=True)
    fig.update_xaxes(title="index i (descending)")
    fig.update_yaxes(title="σ_i(A)", type="log", dtick=max(1, int(np.ceil(decades / 6))), exponentformat="power")
    return fig


def energy_figure(out_sv: np.ndarray, *, title: str = "") -> go.Figure:
    """Share of the head output's energy per singular direction (bars) and cumulated (line):
    ``sigma_i^2 / sum sigma^2`` of ``Z_h`` (D3). ``customdata``: 1-based index."""
    s = np.asarray(out_sv, dtype=float).ravel()
    e = s**2
    tot = e.sum()
    share = e / tot if tot > 0 else np.zeros_like(e)
    idx = np.arange(1, s.size + 1)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=idx, y=share, name="share", marker_color=QUERY_COLOUR, customdata=idx.tolist(),
                         hovertemplate="direction %{x}: %{y:.1%}<extra></extra>"))
    fig.add_trace(go.Scatter(x=idx, y=np.cumsum(share), name="cumulative", mode="lines+markers",
                             marker=dict(size=4, color=KEY_COLOUR), customdata=idx.tolist(),
                             hovertemplate="first %{x}: %{y:.1%}<extra></extra>"))
    layout(fig, title=title or "Energy of the head output Z_h per direction (D3)", height=340,
            legend=dict(orientation="h", y=-0.3))
    fig.update_xaxes(title="singular direction i of Z_h")
    fig.update_yaxes(title="σ_i² / Σσ²", range=[0, 1.02], tickformat=".0%")
    return fig


def joint_qk_figure(
    q_coords: np.ndarray,
    k_coords: np.ndarray,
    tokens: Sequence[str],
    *,
    colour_by: str = "position",
    categories: Sequence[str] | None = None,
    explained: Sequence[float] | None = None,
    title: str = "",
) -> go.Figure:
    """Joint 2-D PCA of one head's queries (circles) and keys (crosses), AttentionViz-style.

    ``colour_by="position"`` colours both by token position (one colour bar);
    ``colour_by="category"`` colours by ``categories`` (e.g. the token domain), one legend entry
    per category. ``customdata`` of every point: ``[token position, 0 = query / 1 = key]``.
    """
    Q = np.asarray(q_coords, dtype=float)
    K = np.asarray(k_coords, dtype=float)
    n = Q.shape[0]
    if K.shape[0] != n or len(tokens) != n:
        raise ValueError("joint_qk_figure: queries, keys and tokens must have the same length")
    pos = np.arange(n)
    toks = plotly_texts(str(t) for t in tokens)
    fig = go.Figure()
    symbols = {0: "circle", 1: "x"}
    kinds = {0: "query", 1: "key"}
    if colour_by == "category":
        if categories is None or len(categories) != n:
            raise ValueError("colour_by='category' needs one category per token")
        cats = np.asarray([str(c) for c in categories], dtype=object)
        palette = category_colours(list(dict.fromkeys(cats.tolist())))
        for cat, colour in palette.items():
            sel = np.flatnonzero(cats == cat)
            for kind, P in ((0, Q), (1, K)):
                fig.add_trace(
                    go.Scatter(
                        x=P[sel, 0], y=P[sel, 1], mode="markers", name=str(cat),
                        legendgroup=str(cat), showlegend=kind == 0,
                        marker=dict(symbol=symbols[kind], size=7 if kind == 0 else 6, color=colour,
                                    opacity=0.8, line=dict(width=0.5, color="white") if kind == 0 else None),
                        customdata=[[int(i), kind] for i in sel],
                        hovertext=[f"{kinds[kind]} {i}: {toks[i]} ({cat})" for i in sel], hoverinfo="text",
                    )
                )
    else:
        for kind, P in ((0, Q), (1, K)):
            fig.add_trace(
                go.Scatter(
                    x=P[:, 0], y=P[:, 1], mode="markers", name={0: "queries", 1: "keys"}[kind],
                    marker=dict(symbol=symbols[kind], size=8 if kind == 0 else 7, color=pos,
                                colorscale="Viridis", cmin=0, cmax=max(n - 1, 1),
                                line=dict(width=0.5, color="white") if kind == 0 else None,
                                colorbar=(dict(title=dict(text="position", side="right"), thickness=10)
                                          if kind == 0 else None),
                                showscale=kind == 0),
                    customdata=[[int(i), kind] for i in pos],
                    hovertext=[f"{kinds[kind]} {i}: {toks[i]}" for i in pos], hoverinfo="text",
                )
            )
    ev = list(explained) if explained is not None else [None, None]
    ax = [f"PC{i + 1}" + (f" ({ev[i]:.0%})" if i < len(ev) and ev[i] is not None else "") for i in range(2)]
    layout(fig, title=title or "Queries (●) and keys (×) in one plane", height=460,
            legend=dict(orientation="h", y=-0.18, font=dict(size=10)))
    fig.update_xaxes(title=ax[0])
    fig.update_yaxes(title=ax[1], scaleanchor="x", scaleratio=1)
    return fig


# -------------------------------------------------------------------------------------------
# Across inputs
# -------------------------------------------------------------------------------------------
#: Legend entries per row under a histogram (each a third of the figure's width: "Omicron (n=12)" fits).
LEGEND_PER_ROW = 3


def histogram_figure(
    groups: Mapping[str, np.ndarray],
    *,
    title: str = "",
    x_title: str = "",
    nbins: int = 20,
    x_range: tuple[float, float] | None = None,
) -> go.Figure:
    """Overlaid histograms (one per group) with shared bins: ``nbins`` equal-width bins over the
    pooled range (the official code used 20). ``customdata`` of each bar: its group name."""
    vals = {k: np.asarray(v, dtype=float).ravel() for k, v in groups.items()}
    pooled = np.concatenate([v[np.isfinite(v)] for v in vals.values()]) if vals else np.zeros(0)
    if x_range is not None:
        lo, hi = x_range
    elif pooled.size:
        lo, hi = float(pooled.min()), float(pooled.max())
    else:
        lo, hi = 0.0, 1.0
    if hi <= lo:
        pad = max(abs(lo) * 0.01, 1e-3)
        lo, hi = lo - pad, hi + pad
    edges = np.linspace(lo, hi, nbins + 1)
    palette = category_colours(list(vals))
    fig = go.Figure()
    for name, v in vals.items():
        v = v[np.isfinite(v)]
        counts, _ = np.histogram(np.clip(v, lo, hi), bins=edges)
        centres = (edges[:-1] + edges[1:]) / 2
        fig.add_trace(
            go.Bar(x=centres, y=counts, width=np.diff(edges), name=f"{name} (n={v.size})",
                   marker=dict(color=palette[name], line=dict(width=0.5, color="white")), opacity=0.7,
                   customdata=[name] * len(centres),
                   hovertemplate=f"{name}<br>%{{x:.4g}}: %{{y}} inputs<extra></extra>")
        )
    several = len(vals) > 1
    # the legend under the axis title, LEGEND_PER_ROW entries a row, and the figure as tall as its rows
    # need: at half the page's width one row of eight classes cut "Gamm…" and pushed Omicron out of view
    rows = -(-len(vals) // LEGEND_PER_ROW)
    bottom = 62 + 20 * rows if several else 45
    layout(fig, title=title, height=250 + bottom, barmode="overlay", bargap=0,
            legend=dict(orientation="h", yanchor="top", y=-52 / 205, x=0, font=dict(size=10),
                        entrywidth=1 / LEGEND_PER_ROW, entrywidthmode="fraction"), showlegend=several)
    fig.update_layout(margin=dict(b=bottom))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title="inputs")
    return fig


def class_box_figure(
    classes: Sequence[str],
    series: Mapping[str, np.ndarray],
    *,
    order: Sequence[str] | None = None,
    title: str = "",
    y_title: str = "",
    names: Sequence[str] | None = None,
    display: Mapping[str, str] | None = None,
    hover_name: str = "",
) -> go.Figure:
    """Per-class box plots with every input as a point; one box trace per series (e.g.
    correct / faithful), grouped. ``customdata`` of each point: the input's name (or index).
    ``display`` maps a class to its name on the axis (the same name as every other chart);
    ``hover_name`` (the quantity's variable name) is shown in the hover only."""
    cls = np.asarray([str(c) for c in classes], dtype=object)
    order = list(order) if order is not None else list(dict.fromkeys(cls.tolist()))
    labels = plotly_texts(str(n) for n in names) if names is not None else [str(i) for i in range(cls.size)]
    palette = category_colours(list(series))
    fig = go.Figure()
    rank = {c: i for i, c in enumerate(order)}
    keep = np.array([c in rank for c in cls], dtype=bool)
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort([rank[c] for c in cls[idx]], kind="stable")]
    display = display or {}
    shown = plotly_texts(str(display.get(c, c)) for c in cls[idx])
    what = f"{hover_name} = " if hover_name else ""
    for name, vals in series.items():
        v = np.asarray(vals, dtype=float).ravel()
        fig.add_trace(
            go.Box(x=shown, y=v[idx], name=name, boxpoints="all", jitter=0.4, pointpos=0,
                   marker=dict(color=palette[name], size=5), line=dict(width=1),
                   customdata=[labels[i] for i in idx],
                   hovertemplate=f"%{{customdata}} (%{{x}}): {what}%{{y:.4g}}<extra></extra>")
        )
    layout(fig, title=title, height=320, boxmode="group",
            legend=dict(orientation="h", y=-0.3), showlegend=len(series) > 1)
    fig.update_xaxes(title="class", categoryorder="array",
                     categoryarray=plotly_texts(str(display.get(c, c)) for c in order))
    fig.update_yaxes(title=y_title)
    return fig


# -------------------------------------------------------------------------------------------
# Faithful vs correct
# -------------------------------------------------------------------------------------------
def attention_comparison_figure(
    correct: np.ndarray,
    faithful: np.ndarray,
    labels: Sequence[str],
    *,
    layer: int,
    head: int,
    max_labels: int = 40,
) -> go.Figure:
    """Three heatmaps side by side: the model's attention, the official code's hand-made
    attention (transposed head slices, no bias, no mask) and their difference
    ``faithful - correct`` (diverging scale). Hover shows query, key and value. Each map has its
    own colour scale (0 to the 99.5% quantile of its weights, :func:`~bertgeom.figures.heads.contrast_max`):
    the faithful map is often much flatter than the model's, and on a shared scale, or one that
    stops at a single [CLS] weight, it would look empty."""
    Ac = np.asarray(correct, dtype=np.float32)
    Af = np.asarray(faithful, dtype=np.float32)
    if Ac.shape != Af.shape or Ac.ndim != 2:
        raise ValueError("attention_comparison_figure: two [T, T] matrices of the same shape are needed")
    D = Af - Ac
    n = Ac.shape[0]
    labels = plotly_texts(str(x) for x in labels)
    fig = make_subplots(
        rows=1, cols=3, horizontal_spacing=0.08,
        subplot_titles=("correct (the model's attention)", "faithful (official code)",
                        "difference faithful − correct"),
    )
    from bertgeom.figures.heads import contrast_max

    # auto-contrast (the 99.5% quantile, as every attention map): the few [CLS]/[SEP] cells saturate
    # instead of leaving a 427-token map white; the colour bar says where the scale stops
    zc, zf, dmax = contrast_max(Ac), contrast_max(Af), contrast_max(np.abs(D))

    # where each scale stops, once under the figure title (a title beside a thin colour bar would sit
    # on the next panel)
    saturated = [f"{name} ≥ {top:.2g}" for name, top, largest in
                 (("correct", zc, float(Ac.max())), ("faithful", zf, float(Af.max())),
                  ("|difference|", dmax, float(np.abs(D).max())))
                 if top < 0.999 * largest]
    note = ("<br><sup>darkest colour: " + ", ".join(saturated) + " (99.5% quantile; hover for every value)</sup>"
            if saturated else "")

    idx = np.arange(n)
    for col, (Z, kw) in enumerate(
        (
            (Ac, dict(colorscale="Blues", zmin=0, zmax=zc, colorbar=dict(x=0.285, thickness=8, len=0.9))),
            (Af, dict(colorscale="Blues", zmin=0, zmax=zf, colorbar=dict(x=0.645, thickness=8, len=0.9))),
            (D, dict(colorscale="RdBu_r", zmid=0, zmin=-dmax, zmax=dmax, colorbar=dict(x=1.0, thickness=8, len=0.9))),
        ),
        start=1,
    ):
        fig.add_trace(
            go.Heatmap(z=Z, x=idx, y=idx, hovertemplate="query %{y} · key %{x}: %{z:.3f}<extra></extra>", **kw),
            row=1, col=col,
        )
    step = max(1, int(np.ceil(n / max_labels)))
    ticks = list(range(0, n, step))
    text = [labels[t] for t in ticks]
    xstep = max(1, int(np.ceil(n / 14)))  # three panels side by side: fewer labels across
    xticks = list(range(0, n, xstep))
    for col in (1, 2, 3):
        fig.update_xaxes(tickmode="array", tickvals=xticks, ticktext=[labels[t] for t in xticks], tickangle=-60,
                         tickfont=dict(size=9), range=[-0.5, n - 0.5], row=1, col=col)
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=text if col == 1 else [""] * len(ticks),
                         tickfont=dict(size=9), range=[n - 0.5, -0.5], row=1, col=col)
    fig.update_layout(
        title=dict(text=f"{head_label(layer, head)}: correct vs faithful attention{note}", font=dict(size=14)),
        height=min(620, max(380, 180 + 9 * min(n, max_labels))), margin=dict(l=10, r=10, t=90 if note else 70, b=10),
        plot_bgcolor="#f7f7f7",
    )
    return fig


def head_affinity_map(M: np.ndarray, num_heads: int, *, baseline: float, top: float, pair_label: str,
                      row_kind: str, col_kind: str, title: str = "") -> go.Figure:
    """The projection kernel of every ordered pair of heads (``M [L H, L H]``, row = the first head,
    column = the second), white at the random ``baseline``, blue below it (less shared than two random
    subspaces), red above; the scale stops at the 99.5th percentile of the pairs off the diagonal (at
    least twice the baseline, at most ``top`` = d_h) so the bulk of the pairs is not washed out by the
    diagonal's d_h. A line between layers; NaN cells (pairs left out) stay blank."""
    N = M.shape[0]
    names = [head_label(i // num_heads, i % num_heads) for i in range(N)]
    A = np.asarray(M, dtype=np.float64)
    off = A[~np.eye(N, dtype=bool)]
    off = off[np.isfinite(off)]
    cap = float(np.clip(np.percentile(off, 99.5) if off.size else top, 2 * baseline, top))
    mid = float(np.clip(baseline / cap, 0.01, 0.99))
    scale = [[0.0, "#2166ac"], [mid / 2, "#92c5de"], [mid, "#f7f7f7"], [mid + (1 - mid) / 3, "#f4a582"],
             [1.0, "#b2182b"]]
    fig = go.Figure(go.Heatmap(
        z=A.astype(np.float32), x=names, y=names, colorscale=scale, zmin=0.0, zmax=cap,
        hovertemplate=f"{row_kind} of %{{y}} · {col_kind} of %{{x}}<br>PK %{{z:.3f}}<extra></extra>",
        colorbar=dict(title=dict(text=f"PK ({pair_label})", side="right"), thickness=12,
                      tickvals=[0.0, float(baseline), cap],
                      ticktext=["0", f"random {baseline:.2f}", f"{cap:.2f}" + (" (d_h)" if cap >= top else " +")]),
    ))
    for k in range(1, N // num_heads):
        edge = k * num_heads - 0.5
        fig.add_vline(x=edge, line=dict(color="#555555", width=1))
        fig.add_hline(y=edge, line=dict(color="#555555", width=1))
    layout(fig, title=title, height=min(760, max(360, 160 + 5 * N)))
    fig.update_xaxes(title=f"second head ({col_kind} subspace)", type="category", tickangle=-60, showgrid=False,
                     nticks=min(N, 36))
    fig.update_yaxes(title=f"first head ({row_kind} subspace)", type="category", autorange="reversed",
                     showgrid=False, nticks=min(N, 36))
    return fig


def affinity_histogram(values: np.ndarray, *, baseline: float, top: float, title: str = "") -> go.Figure:
    """The distribution of the map's projection kernels with the random baseline p q / d drawn."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    fig = go.Figure(go.Histogram(x=v, nbinsx=60, marker_color="#4C72B0", name="head pairs",
                                 hovertemplate="PK %{x}<br>%{y} pairs<extra></extra>"))
    fig.add_vline(x=float(baseline), line=dict(color="#C44E52", dash="dash", width=2),
                  annotation_text=f"random subspaces: d_h²/d = {baseline:.2f}", annotation_position="top right")
    layout(fig, title=title, height=320)
    right = float(min(top, max(2.5 * baseline, 1.1 * v.max()))) if v.size else float(top)
    fig.update_xaxes(title="projection kernel", range=[0, right])
    fig.update_yaxes(title="head pairs")
    return fig
