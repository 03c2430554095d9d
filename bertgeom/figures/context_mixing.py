"""Figures of context mixing (pure plotly, no Streamlit): the mixing ratio per layer for every variant,
the mixing ratio per head, a token-to-token contribution map beside raw attention, and over a set of
inputs ALTI's mixing share beside the mixing ratios, ALTI rollout's rank agreement with attention
rollout and the share each token keeps of itself by either rollout (each mean ± sd over the inputs).

References: Kobayashi et al. 2020 (arXiv:2004.10102) §4; Kobayashi et al. 2021 (arXiv:2109.07152) §5,
Table 1; Ferrando et al. 2022 (arXiv:2203.04212) §3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from bertgeom.figures.base import PALETTE, head_grid, layout
from bertgeom.figures.heads import attention_map, layer_lines, token_bars

__all__ = ["alti_mixing_share_lines", "contribution_map", "head_mixing_grid", "mixing_ratio_lines",
           "rank_agreement_lines", "rollout_bars", "rollout_self_lines", "set_mean_sd"]

#: The grey of reference lines (0, chance).
_REFERENCE = "#888888"


def mixing_ratio_lines(mixing: np.ndarray, variants: Sequence[str], *, title: str = "") -> go.Figure:
    """One line per variant: the mean over tokens of each layer's mixing ratio, in % (``mixing`` is
    ``[V, L, T]``, one row per name in ``variants``)."""
    m = np.asarray(mixing, dtype=float)
    if m.ndim != 3 or m.shape[0] != len(variants):
        raise ValueError(f"mixing must be [V, L, T] with V = {len(variants)}, got {m.shape}")
    return layer_lines({v: 100.0 * m[k].mean(axis=-1) for k, v in enumerate(variants)}, title=title,
                       ylabel="mixing ratio (%)", yrange=(0.0, 100.0))


def head_mixing_grid(head_mixing: np.ndarray, *, selected: tuple[int, int] | None = None,
                     title: str = "") -> go.Figure:
    """The clickable head grid coloured by each head's mean norm-based mixing ratio over the tokens
    (``head_mixing`` ``[L, H, T]``), in %."""
    h = 100.0 * np.asarray(head_mixing, dtype=float).mean(axis=-1)
    return head_grid(h, colour_label="mixing %", selected=selected, zrange=(0.0, 100.0), title=title)


def contribution_map(values: np.ndarray, labels: Sequence[str], *, hover_labels: Sequence[str] | None = None,
                     title: str = "", colour_label: str = "contribution", colorscale: str = "Blues") -> go.Figure:
    """A ``[T, T]`` token-to-token map (rows: the token receiving, columns: the token giving), drawn
    like the attention maps so the two can be read side by side."""
    return attention_map(np.asarray(values, dtype=np.float32), labels, hover_labels=hover_labels, title=title,
                         colour_label=colour_label, colorscale=colorscale)


def rollout_bars(series: Mapping[str, Sequence[float]], tokens: Sequence[str], *, title: str = "") -> go.Figure:
    """Grouped bars over the input tokens: what one output token has gathered from each, one bar per
    aggregation (ALTI rollout beside attention rollout)."""
    return token_bars(series, tokens, title=title, ylabel="share of the output token")


def set_mean_sd(per_input: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, sd)`` over the inputs (axis 0) of a ``[N, L]`` array, NaN-rows left out of each layer."""
    v = np.asarray(per_input, dtype=float)
    if v.ndim != 2 or v.shape[0] == 0:
        raise ValueError(f"per-input values must be [N, L] with N >= 1, got {v.shape}")
    import warnings

    with warnings.catch_warnings():  # a layer with no finite value: NaN, drawn as a gap
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(v, axis=0), np.nanstd(v, axis=0)


def _band_lines(series: Mapping[str, tuple[np.ndarray, np.ndarray | None]], *, title: str, ylabel: str,
                yrange: tuple[float, float], hover_unit: str = "") -> go.Figure:
    """Lines over layers (L1..Ln), one per series, each with a ± sd band where its sd is given."""
    fig = go.Figure()
    dashes = ("solid", "dash", "dot", "dashdot")
    for k, (name, (mean, sd)) in enumerate(series.items()):
        m = np.asarray(mean, dtype=float)
        x = [f"L{i + 1}" for i in range(m.size)]
        colour = PALETTE[k % len(PALETTE)]
        if sd is not None:
            s = np.asarray(sd, dtype=float)
            fig.add_trace(go.Scatter(x=x + x[::-1], y=np.r_[m + s, (m - s)[::-1]], fill="toself", mode="lines",
                                     fillcolor=colour, opacity=0.18, line=dict(width=0), hoverinfo="skip",
                                     showlegend=False, legendgroup=name))
        fig.add_trace(go.Scatter(x=x, y=m, mode="lines+markers", name=name, legendgroup=name,
                                 line=dict(color=colour, width=2.5 if sd is not None else 1.5, dash=dashes[k % 4]),
                                 customdata=None if sd is None else np.asarray(sd, dtype=float),
                                 hovertemplate=f"{name}<br>%{{x}}: %{{y:.3g}}{hover_unit}"
                                               + (" ± %{customdata:.2g}" if sd is not None else "")
                                               + "<extra></extra>"))
    layout(fig, title=title, height=400, legend_below=True)
    fig.update_yaxes(title=ylabel, range=list(yrange))
    return fig


def alti_mixing_share_lines(alti_self: np.ndarray, mixing: np.ndarray | None = None,
                            variants: Sequence[str] = (), *, title: str = "") -> go.Figure:
    """ALTI's mixing share per layer, ``1 - mean_i C_l[i, i]`` in %, mean ± sd over the inputs
    (``alti_self`` ``[N, L]``), beside the set means of the mixing-ratio variants (``mixing``
    ``[V, N', L]``, one row per name in ``variants``; thin lines, no band)."""
    mean, sd = set_mean_sd(1.0 - np.asarray(alti_self, dtype=float))
    series: dict[str, tuple[np.ndarray, np.ndarray | None]] = {"ALTI (1 − self)": (100 * mean, 100 * sd)}
    if mixing is not None:
        m = np.asarray(mixing, dtype=float)
        if m.ndim != 3 or m.shape[0] != len(variants):
            raise ValueError(f"mixing must be [V, N, L] with V = {len(variants)}, got {m.shape}")
        for k, v in enumerate(variants):
            series[str(v)] = (100 * set_mean_sd(m[k])[0], None)
    return _band_lines(series, title=title, ylabel="mixing share (%)", yrange=(0.0, 100.0), hover_unit=" %")


def rank_agreement_lines(rank_agreement: np.ndarray, rank_agreement_first: np.ndarray, *,
                         first_token: str = "first token", title: str = "") -> go.Figure:
    """Spearman's rank correlation per layer between ALTI rollout and attention rollout (r = 0.5), mean
    ± sd over the inputs (``[N, L]`` each): averaged over every output token's row, and of the first
    token's row alone (``first_token`` names it in the legend: [CLS] for BERT). 1: both rank each
    token's sources alike; 0: unrelated."""
    fig = _band_lines({"mean over output tokens": set_mean_sd(rank_agreement),
                       f"row of {first_token}": set_mean_sd(rank_agreement_first)},
                      title=title, ylabel="Spearman ρ (ALTI vs attention)", yrange=(-1.0, 1.0))
    fig.add_hline(y=0.0, line=dict(color=_REFERENCE, dash="dot"))
    return fig


def rollout_self_lines(rollout_self: np.ndarray, attention_rollout_self: np.ndarray, *,
                       title: str = "") -> go.Figure:
    """The share of each token's own position in its rollout row (mean of the diagonal), per layer,
    mean ± sd over the inputs: ALTI rollout beside attention rollout (r = 0.5)."""
    return _band_lines({"ALTI rollout": set_mean_sd(rollout_self),
                        "attention rollout (r = 0.5)": set_mean_sd(attention_rollout_self)},
                       title=title, ylabel="own share after rollout", yrange=(0.0, 1.0))
