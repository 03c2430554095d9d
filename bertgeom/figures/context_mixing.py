"""Figures of context mixing (pure plotly, no Streamlit): the mixing ratio per layer for every variant,
the mixing ratio per head, and a token-to-token contribution map beside raw attention.

References: Kobayashi et al. 2020 (arXiv:2004.10102) §4; Kobayashi et al. 2021 (arXiv:2109.07152) §5,
Table 1; Ferrando et al. 2022 (arXiv:2203.04212) §3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from bertgeom.figures.base import head_grid
from bertgeom.figures.heads import attention_map, layer_lines, token_bars

__all__ = ["contribution_map", "head_mixing_grid", "mixing_ratio_lines", "rollout_bars"]


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
