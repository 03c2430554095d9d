"""Subspace Directions tab *Head-to-head affinity*: the projection kernel between the weight subspaces of
every pair of heads (Yamagiwa et al. 2026), for a chosen pair type, as a head-by-head map with the random
baseline d_h²/d, its distribution, and the selected head's strongest partners (no input needed; the
measure is :mod:`bertgeom.analysis.head_affinity`).

References: Yamagiwa, Takase & Shimodaira 2026 (arXiv:2601.10266); Elhage et al. 2021 (composition).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.head_affinity import AFFINITY_DOCS, PAIR_TYPES, random_baseline
from bertgeom.figures import subspace as fs
from bertgeom.tables import head_label
from bertgeom.ui.subspace.view import View, file_safe
from bertgeom.ui.widgets import chart, csv_button, doc_caption

KIND_NAMES = {"Q": "query (read)", "K": "key (read)", "V": "value (read)", "O": "output (write)"}

PAIR_HELP = {
    "OQ": "what an earlier head writes against what a later head's queries read (Q-composition)",
    "OK": "what an earlier head writes against what a later head's keys read (K-composition)",
    "OV": "what an earlier head writes against what a later head's values read (V-composition)",
    "QQ": "two heads' query subspaces (do they read the same directions?)",
    "KK": "two heads' key subspaces",
    "VV": "two heads' value subspaces",
    "OO": "two heads' output subspaces (do they write into the same directions?)",
}

EXPLAIN = (
    "**What this shows.** Each head reads the residual stream through a d_h-dimensional subspace (the row "
    "space of its W_Q, W_K or W_V) and writes into one (the column space of its W_O). The projection kernel "
    "PK = Σ cos² θ_i over the principal angles between two such subspaces is d_h when they coincide, 0 when "
    "they are orthogonal, and d_h²/d on average for random subspaces (the middle of the colour scale: red "
    "cells share more than chance, blue ones less). The paper's pairs are O→Q, O→K and O→V: an earlier head's "
    "output against a later head's input, the weight-space analogue of composition. **Reconstructed:** only "
    "the paper's abstract and introduction were read; BERT puts a LayerNorm between a write and the next "
    "read, and this map uses the raw weights (no LayerNorm folded in). Unlike the attention views, it needs "
    "no input: it is a property of the weights alone."
)


@st.cache_data(max_entries=16, show_spinner="Comparing the subspaces of every pair of heads…")
def _affinity_map(_lws, weights_hash: str, pair: str) -> np.ndarray:
    """The projection kernels of every pair of heads of the layer weights ``_lws`` (the page's model:
    keyed by its weights hash, the weights themselves never hashed)."""
    from bertgeom.analysis.head_affinity import projection_kernel_map
    from bertgeom.ui.workqueue import heavy

    with heavy("the head-to-head projection kernels"):
        return projection_kernel_map(_lws, pair)


def affinity_tab(v: View) -> None:
    """The tab: pair type, the map with the baseline, its histogram and the selected head's partners."""
    st.caption(EXPLAIN)
    doc_caption(AFFINITY_DOCS["projection_kernel"])
    c1, c2 = st.columns([3, 2])
    pair = c1.radio("Pair type (first head's subspace → second head's)", list(PAIR_TYPES), horizontal=True,
                    key="w_pk_pair", help="; ".join(f"{k}: {t}" for k, t in PAIR_HELP.items()))
    a_kind, b_kind = PAIR_TYPES[pair]
    composition = a_kind == "O" and b_kind != "O"
    earlier_only = c2.checkbox("Only pairs whose first head is in an earlier layer", value=composition,
                               key="w_pk_earlier_" + ("composition" if composition else "same_kind"),
                               help="A head can only feed heads of later layers; the other cells are left blank.")
    st.caption(f"**{pair}**: {PAIR_HELP[pair]}.")
    M = _affinity_map(v.lws, v.wh, pair)
    lw = v.lws[0]
    H, dh, d = lw.num_heads, lw.head_dim, lw.d_model
    base = random_baseline(dh, dh, d)
    layer_of = np.arange(M.shape[0]) // H
    shown = M.copy()
    if earlier_only:
        shown[layer_of[:, None] >= layer_of[None, :]] = np.nan
    chart(fs.head_affinity_map(shown, H, baseline=base, top=dh, pair_label=pair, row_kind=KIND_NAMES[a_kind],
                               col_kind=KIND_NAMES[b_kind],
                               title=f"Projection kernel {pair} of every pair of heads (raw weights)"), "w_pk_map")
    off = shown[~np.eye(M.shape[0], dtype=bool)] if a_kind == b_kind else shown.ravel()
    a, b = st.columns([3, 2])
    with a:
        chart(fs.affinity_histogram(off, baseline=base, top=dh,
                                    title=f"Distribution over the pairs shown (random baseline d_h²/d = "
                                          f"{dh}²/{d} = {base:.2f})"), "w_pk_hist")
    with b:
        me = v.layer * H + v.head
        row = shown[me].copy()
        if a_kind == b_kind:
            row[me] = np.nan
        order = [int(i) for i in np.argsort(-np.nan_to_num(row, nan=-1.0)) if np.isfinite(row[i])][:8]
        st.markdown(f"**{v.HL}**, its {KIND_NAMES[a_kind]} subspace: strongest partners")
        if order:
            st.dataframe(pd.DataFrame({"second head": [head_label(i // H, i % H) for i in order],
                                       "PK": [round(float(row[i]), 3) for i in order],
                                       "× random": [round(float(row[i]) / base, 2) for i in order]}),
                         hide_index=True, width="stretch")
        else:
            st.caption("No pair of this head is shown (a head of the last layer feeds no later one).")
        st.caption(f"Mean over the pairs shown: {np.nanmean(off):.2f} ({np.nanmean(off) / base:.2f}× random).")
    ii, jj = np.meshgrid(np.arange(M.shape[0]), np.arange(M.shape[0]), indexing="ij")
    frame = pd.DataFrame({"first_head": [head_label(i // H, i % H) for i in ii.ravel()],
                          "second_head": [head_label(j // H, j % H) for j in jj.ravel()],
                          f"pk_{pair}": M.ravel()})
    csv_button(frame, f"projection_kernel_{pair}_{file_safe(v.model_id)}.csv", "w_pk_csv",
               "Download every pair (CSV)")
