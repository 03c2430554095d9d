"""Subspace Directions tab *Weights (D4)*: the weight-space geometry of every head (no input needed):
the grid of a weight feature, the selected head's spectra, and its search form W_Q W_Kᵀ as a matrix.
The computations are cached in :mod:`bertgeom.ui.subspace_cache`.

References: Bonino, Ghione & Cirrincione 2025 (arXiv:2502.12033); docs/methods.md §8.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.subspace import WEIGHT_FEATURE_DOCS
from bertgeom.figures import subspace as fs
from bertgeom.figures.base import matrix_heatmap
from bertgeom.safety import error_text, plain
from bertgeom.tables import per_head_frame
from bertgeom.ui import subspace_cache as sc
from bertgeom.ui.names import symbols
from bertgeom.ui.subspace.view import View, file_safe
from bertgeom.ui.widgets import chart, csv_button, table

#: Largest heatmap of a d x d matrix drawn in the browser (d = 512 is 262k cells).
MAX_FULL_D = 512


def weights_tab(v: View) -> None:
    """The tab: the weight-feature grid, the selected head's table, spectra and search-form matrix."""
    model_id, wh, layer, head, HL, lws = v.model_id, v.wh, v.layer, v.head, v.HL, v.lws
    rank_rtol, sym_rtol = v.rank_rtol, v.sym_rtol
    try:
        wg = sc.cached_weight_geometry(lws, wh, rank_rtol, sym_rtol)
    except (ValueError, np.linalg.LinAlgError) as exc:
        st.error(f"The weight geometry of this model could not be computed: {plain(error_text(exc))}")
        return
    names = [n for n in WEIGHT_FEATURE_DOCS if n in wg.scalars]
    left, right = st.columns([5, 4], gap="large")
    with left:
        if st.session_state.get("w_sub_wfeature") not in names:
            st.session_state["w_sub_wfeature"] = "qk_skew_share"
        feature = st.selectbox("Colour the grid by (weight space, no input needed)", names, key="w_sub_wfeature",
                               format_func=lambda n: symbols(WEIGHT_FEATURE_DOCS[n][0]))
        label, formula, source = WEIGHT_FEATURE_DOCS[feature]
        label = symbols(label)
        st.caption(f"`{formula}` — {source}")
        chart(fs.scalar_grid(wg.scalars[feature], label=label, selected=(layer, head)), "w_sub_wgrid",
              selects_head=True)
    with right:
        st.markdown(f"#### {HL} · weight geometry")
        no_bias = all(not np.any(lw.b_q) and not np.any(lw.b_k) for lw in lws)  # ModernBERT: no biases at all
        st.caption(f"d = {wg.d_model}, d_head = {wg.head_dim}. "
                   + ("This model's queries and keys have no biases, so M_h is the whole search form (‖u_h‖ "
                      "below is 0)." if no_bias else
                      "M_h ignores the biases; the query bias only adds a per-key prior (‖u_h‖ below), the other "
                      "bias terms cancel in the softmax."))
        st.dataframe(
            pd.DataFrame({"quantity": [symbols(WEIGHT_FEATURE_DOCS[n][0]) for n in names],
                          "value": [float(wg.scalars[n][layer, head]) for n in names]}),
            hide_index=True, width="stretch", height=330,
        )
        csv_button(per_head_frame(wg.scalars), f"weight_geometry_{file_safe(model_id)}.csv", "w_sub_dl_wall",
                  "Download every head (CSV)")

    st.markdown(f"#### {HL} · spectra")
    sp = {k: v[layer, head] for k, v in wg.spectra.items()}
    o1, o2, _ = st.columns([1, 2, 2])
    log_y = o1.checkbox("Logarithmic scale", key="w_sub_logsv")
    more = o2.checkbox("Add M_h = W_Qᵀ W_K and the OV circuit W_O W_V", key="w_sub_more_sv")
    blocks = {"W_Q,h": sp["q_sv"], "W_K,h": sp["k_sv"], "W_V,h": sp["v_sv"], "W_O,h": sp["o_sv"]}
    if more:
        blocks.update({"M_h": sp["qk_sv"], "W_O,h W_V,h": sp["ov_sv"]})
    a, b = st.columns(2)
    with a:
        chart(fs.spectra_figure(blocks, title="Singular values of the head's blocks", log_y=log_y), "w_sub_sv")
    with b:
        chart(fs.principal_angles_figure(sp["qk_angles_rad"]), "w_sub_angles")
    a, b = st.columns(2)
    lw = lws[layer]
    s = lw.head_slice(head)
    factor = lw.W_q[s, :].astype(np.float64) @ lw.W_k[s, :].astype(np.float64).T  # d_head x d_head
    with a:
        chart(fs.sym_eigen_figure(sp["qk_sym_eig"], d_model=wg.d_model, rtol=sym_rtol), "w_sub_symeig")
        st.caption("By Sylvester's law of inertia S_h has d_head positive and d_head negative eigenvalues "
                   "whenever the query and key subspaces are in general position: the *sizes* (balance) "
                   "carry the information, not the counts.")
    with b:
        chart(fs.complex_eigen_figure(np.linalg.eigvals(factor)), "w_sub_eigc")
        st.caption("The non-zero eigenvalues of M_h (those of the d_head × d_head factor W_K,h W_Q,hᵀ). "
                   "On the positive real axis: like looks for like; off the axis: a rotation, a directed search.")

    st.markdown(f"#### {HL} · the search form as a matrix")
    hm, txt = st.columns([3, 2], gap="large")
    options = ["factor"] + (["M", "S", "N"] if wg.d_model <= MAX_FULL_D else [])
    if st.session_state.get("w_sub_matrix") not in options:
        st.session_state["w_sub_matrix"] = "factor"
    choice = txt.radio(
        "Matrix", options, key="w_sub_matrix",
        format_func={"factor": "W_Q,h W_K,hᵀ (d_head × d_head)", "M": "M_h (d × d)",
                     "S": "symmetric part S_h", "N": "skew part N_h"}.get,
    )
    if wg.d_model > MAX_FULL_D:
        txt.caption(f"d = {wg.d_model} is too large to draw M_h in the browser; the d_head × d_head factor "
                   "has the same non-zero eigenvalues (not the same singular values).")
    if choice == "factor":
        fig = matrix_heatmap(factor, diverging=True, title=f"{HL}: W_Q,h W_K,hᵀ (d_head × d_head)",
                                x_title="key feature j", y_title="query feature i", height=480)
        cap = ("Entry (i, j) = ⟨row i of W_Q,h, row j of W_K,h⟩: how much query feature i and key feature j "
               "read the same input direction; its trace is tr(M_h). "
               "The official code drew the d × d matrix W_q[:, s] W_k[:, s]ᵀ of the *transposed* slices.")
    else:
        from bertgeom.analysis.subspace import qk_bilinear

        M, S, N = qk_bilinear(lw, head)
        mat = {"M": M, "S": S, "N": N}[choice]
        fig = matrix_heatmap(mat, diverging=True, title=f"{HL}: {choice}_h (d × d)", x_title="input feature (key side)",
                                y_title="input feature (query side)", height=520)
        cap = "score(x_i, x_j) = x_iᵀ M_h x_j / √d_head; S and N are its symmetric and skew parts."
    with hm:
        chart(fig, "w_sub_matrix_fig")
    txt.caption(cap)
    spectra_df = pd.DataFrame({
        f"{k}": pd.Series(np.asarray(v, dtype=float)) for k, v in sp.items()
    })
    spectra_df.insert(0, "i", np.arange(1, len(spectra_df) + 1))
    with st.expander(f"{HL}: spectra as a table"):
        table(spectra_df, f"spectra_L{layer + 1}H{head + 1}_{file_safe(model_id)}.csv", "w_sub_dl_spectra")

