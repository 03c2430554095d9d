"""Cone Index section *Streams inside each layer*: what each step of a layer (attention heads,
concatenation + W_O + LayerNorm, the MLP) does to the cone of the current input, with the official
code's "multihead output" beside it and every head's output as a layer × head map.

References: Bonino et al. 2025 (arXiv:2502.12033) and its released code; docs/methods.md §9.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.cone import STREAM_DOCS
from bertgeom.figures import cone as fc
from bertgeom.sets import cone as conesets
from bertgeom.tables import per_head_frame
from bertgeom.ui.cone.view import View
from bertgeom.ui.widgets import chart, csv_button


def streams_section(v: View) -> None:
    """The section: the cone of each stream of every layer for this input, and every head's output."""
    L, m, cur, unit, norm_label = v.L, v.m, v.cur, v.unit, v.norm_label
    st.markdown("#### What each step of a layer does to the cone")
    from bertgeom.weights import weight_geometry_notes

    lws = v.loaded.layer_weights
    for note in weight_geometry_notes(lws):
        if "pre-LayerNorm" in note or "shares one set" in note:
            st.info(note, icon=":material/info:")
    pre_ln = any(lw.placement == "pre" for lw in lws)  # the formulas this model computes (docs/methods.md)
    st.caption(
        "Per layer: its input X, each head's output Z_h = A_h V_h (band: lowest to highest head), the "
        + ("post-attention stream U = X + concat(Z) W_O + b (the heads read LN(X); no LayerNorm after the sum) "
           "and the layer output U + MLP(LN(U)). " if pre_ln else
           "post-attention sublayer U = LayerNorm(X + concat(Z) W_O + b) and the layer output after the MLP. ")
        + "X → heads shows what attention does; heads → U what concatenation + W_O + residual do; U → output what "
        "the MLP does."
    )
    s1, s2 = st.columns(2)
    faithful = s1.toggle("Show the official code's “multihead output”", value=True, key="w_cone_faithful",
                         help=STREAM_DOCS["multihead_faithful"].formula + ". It skips W_O and the trained LayerNorm, "
                                                                          "so "
                              "it differs from U.")
    normalized = s2.toggle(f"Normalised ({norm_label})", value=True, key="w_cone_stream_norm")
    suffix = "_norm" if normalized else ""
    keys = ["layer_input", "head_output", "post_attention", "layer_output"]
    if faithful:
        keys += ["multihead_faithful"]
    streams = {k: cur[k + suffix] for k in keys}
    labels = dict(conesets.STREAM_LABELS)
    if pre_ln:  # no LayerNorm after the residual sum in a pre-LN layer
        labels["post_attention"] = "after W_O + residual (U)"
    chart(fc.stream_curves(streams, labels, m, normalized=normalized, reference=unit or normalized,
                           title=f"Cone index of the streams of each layer (m = {m})"), "w_cone_streams")
    st.markdown("##### Each head's output, layer × head")
    hcols = st.columns(2 if faithful else 1)
    zr = (0.0, 1.0) if normalized else None
    with hcols[0]:
        chart(fc.head_heatmap(cur["head_output" + suffix], title="head output Z_h (true attention, W_V with bias)",
                              colour_label=norm_label if normalized else "I", zrange=zr), "w_cone_heads")
    if faithful:
        with hcols[1]:
            chart(fc.head_heatmap(cur["head_output_faithful" + suffix],
                                  title="head output, official code (transposed slices, no bias, no mask)",
                                  colour_label=norm_label if normalized else "I", zrange=zr), "w_cone_heads_faithful")
    rows = {"layer": np.arange(1, L + 1)}
    for k in ["layer_input", "head_output", "post_attention", "layer_output", "multihead_faithful",
              "head_output_faithful"]:
        v, vn = cur[k], cur[k + "_norm"]
        if v.ndim == 2:
            v, vn = v.mean(1), vn.mean(1)
            k = k + "_mean_over_heads"
        rows[f"{k}_I"], rows[f"{k}_{'I_over_m' if unit else 'I_over_sum_norms'}"] = v, vn
    stream_df = pd.DataFrame(rows)
    with st.expander("Numbers (per layer)"):
        st.dataframe(stream_df, hide_index=True, width="stretch")
    head_df = per_head_frame({"I": cur["head_output"], "I_norm": cur["head_output_norm"],
                              "I_official_code": cur["head_output_faithful"],
                              "I_norm_official_code": cur["head_output_faithful_norm"]})
    d1, d2 = st.columns(2)
    with d1:
        csv_button(stream_df, "cone_index_streams.csv", "w_cone_streams_csv", "Download streams CSV")
    with d2:
        csv_button(head_df, "cone_index_heads.csv", "w_cone_heads_csv", "Download per-head CSV")
