"""Subspace Directions tab *This input (D1–D3)*: the data-space measures of every head on the input in
the sidebar (optionally beside the official code's faithful attention), the selected head's spectra, and
its queries and keys in one plane. The computations are cached in :mod:`bertgeom.ui.subspace_cache`.

References: Bonino, Ghione & Cirrincione 2025 (arXiv:2502.12033); docs/methods.md §8; AttentionViz
(Yeh et al. 2023, arXiv:2305.03210) for the joint query-key projection.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.subspace import DATA_FEATURE_DOCS
from bertgeom.figures import subspace as fs
from bertgeom.safety import error_text, plain
from bertgeom.tables import per_head_frame
from bertgeom.tokens import TOKEN_SETS
from bertgeom.ui import subspace_cache as sc
from bertgeom.ui.subspace.view import DATA_SHORT, View, file_safe
from bertgeom.ui.widgets import chart, csv_button, table, waited

#: Which attention the grid shows in faithful mode.
DATA_SOURCES = {"correct": "the model's attention", "faithful": "faithful (official code)",
                "difference": "faithful − correct"}


def _data_geometries(v: View):
    """This input's data geometry, and (faithful mode) the faithful one with its deviation; stops the
    run with one sentence when it cannot be computed."""
    model_id, wh, text, eps, token_set, faithful = v.model_id, v.wh, v.text, v.eps, v.token_set, v.faithful
    try:
        correct, _ = waited(sc.cached_data_geometry, v.subject, eps, token_set, False,
                            text="Computing D1–D3 for every head…", key="subspace-data-geometry",
                            estimate_key=f"data-geometry:{model_id}")
        fgeom, dev = sc.data_geometry_for(v.subject, eps, token_set, True) if faithful else (None, None)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        st.error(f"D1–D3 could not be computed for this input: {plain(error_text(exc))}")
        st.stop()
    return correct, fgeom, dev


def data_tab(v: View) -> None:
    """The tab: D1–D3 of every head on this input, the selected head's spectra and its query-key plane."""
    model_id, wh, text, eps, token_set, faithful = v.model_id, v.wh, v.text, v.eps, v.token_set, v.faithful
    layer, head, HL, trace, kind = v.layer, v.head, v.HL, v.trace, v.kind
    dg, fdg, _ = _data_geometries(v)
    names = list(DATA_FEATURE_DOCS)
    left, right = st.columns([5, 4], gap="large")
    with left:
        if st.session_state.get("w_sub_dfeature") not in names:
            st.session_state["w_sub_dfeature"] = "delta_A"
        feature = st.selectbox("Colour the grid by (this input)", names, key="w_sub_dfeature",
                               format_func=lambda n: DATA_FEATURE_DOCS[n][0])
        source = "correct"
        if faithful:
            source = st.radio("Attention", list(DATA_SOURCES), horizontal=True, key="w_sub_dsource",
                              format_func=DATA_SOURCES.get)
        label, formula, src = DATA_FEATURE_DOCS[feature]
        st.caption(f"`{formula.replace('1e-3', f'{eps:g}')}` — {src}")
        values = dg.scalars[feature]
        cs = "Viridis"
        if source == "faithful":
            values = fdg.scalars[feature]
        elif source == "difference":
            values, cs = fdg.scalars[feature] - dg.scalars[feature], "RdBu_r"
        zr = None
        if source == "difference":
            m = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
            zr = (-m, m) if m > 0 else (-1.0, 1.0)
        chart(fs.scalar_grid(values, label=DATA_SHORT.get(feature, label), selected=(layer, head), colorscale=cs,
                             zrange=zr),
              "w_sub_dgrid", selects_head=True)
    with right:
        st.markdown(f"#### {HL} · this input")
        st.caption(f"{dg.n_tokens} tokens used — {TOKEN_SETS[token_set]}; ε = {eps:g}."
                   + (f" Faithful: {fdg.n_tokens} positions (padded as the official code), each layer fed "
                      "the next layer's output." if faithful else ""))
        rows = {"quantity": [DATA_SHORT.get(n, n) for n in names],
                "correct": [float(dg.scalars[n][layer, head]) for n in names]}
        if faithful:
            rows["faithful"] = [float(fdg.scalars[n][layer, head]) for n in names]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        frame = per_head_frame(dg.scalars)
        if faithful:
            frame = frame.join(per_head_frame(fdg.scalars, prefix="faithful_").drop(columns=["layer", "head"]))
        csv_button(frame, f"data_geometry_{file_safe(model_id)}.csv", "w_sub_dl_dall", "Download every head (CSV)")

    a, b = st.columns(2)
    with a:
        chart(fs.attention_spectrum_figure(dg.spectra["attn_sv"][layer, head], eps=eps,
                                         faithful_sv=fdg.spectra["attn_sv"][layer, head] if faithful else None,
                                         title=f"{HL}: singular values of A (D2)"), "w_sub_attn_sv")
    with b:
        chart(fs.energy_figure(dg.spectra["out_sv"][layer, head],
                                         title=f"{HL}: energy of Z_h per direction (D3)"), "w_sub_energy")
    sv_df = pd.DataFrame({"i": np.arange(1, dg.spectra["attn_sv"].shape[-1] + 1),
                          "sigma_A": dg.spectra["attn_sv"][layer, head]})
    if faithful:  # the faithful spectrum runs over the padded positions: the longer column sets the rows
        fsv = pd.DataFrame({"i": np.arange(1, fdg.spectra["attn_sv"].shape[-1] + 1),
                            "sigma_A_faithful": fdg.spectra["attn_sv"][layer, head]})
        sv_df = fsv.merge(sv_df, on="i", how="left")[["i", "sigma_A", "sigma_A_faithful"]]
    with st.expander(f"{HL}: singular values of A as a table"):
        table(sv_df, f"attention_sv_L{layer + 1}H{head + 1}.csv", "w_sub_dl_attn_sv")

    st.markdown(f"#### {HL} · queries and keys in one plane")
    c1, c2, c3 = st.columns([2, 2, 3])
    colour = "position"
    if kind.has_domains and trace.encoded.domains:
        colour = c1.radio("Colour by", ["domain", "position"], horizontal=True, key="w_sub_pca_colour",
                          format_func={"position": "token position", "domain": kind.words.domain_noun}.get)
    else:
        c1.caption("Colour: token position (0 = [CLS]).")
    normalize = c2.checkbox("AttentionViz normalisation", key="w_sub_pca_norm",
                            help="Scale queries and keys to the same mean norm and move the keys' centre onto "
                                 "the queries' one: no attention weight changes, but the two clouds become comparable.")
    use_faithful = False
    if faithful:
        use_faithful = c3.toggle("Faithful projections (transposed slices, no bias)", key="w_sub_pca_faithful")
    proj = waited(sc.cached_joint_qk, v.subject, layer, head, normalize, use_faithful,
                  text="Projecting the head's queries and keys…", key="subspace-joint-qk",
                  estimate_key=f"joint-qk:{model_id}")
    cats = None
    if colour == "domain":
        cats = [d or "special token" for d in trace.encoded.domains]
    chart(fs.joint_qk_figure(proj.q_coords, proj.k_coords, trace.axis_labels,
                           colour_by="category" if colour == "domain" else "position", categories=cats,
                           explained=proj.explained_variance_ratio,
                           title=f"{HL}: queries (●) and keys (×), joint PCA"), "w_sub_pca")
    st.caption(f"Explained variance of the two axes: {proj.explained_variance_ratio.sum():.0%}. "
               "A query attends most to the keys far along its own direction (large dot product).")

