"""Subspace Directions: how each head selects directions (Bonino 2025 (arXiv:2502.12033); docs/methods.md §8).

The page holds the settings every tab shares. Below them, lazy tabs (only the open one runs), one module
each under :mod:`bertgeom.ui.subspace`, drawn in the order of its registry (``TABS``)."""

import streamlit as st

from bertgeom.safety import error_text, plain
from bertgeom.tokens import TOKEN_SET_LABELS
from bertgeom.sets.subspace import SUBSPACE_TOKEN_SETS
from bertgeom.ui.sidebar import current_subject
from bertgeom.ui.subspace import TABS
from bertgeom.ui.tabs import offered_tabs
from bertgeom.ui.subspace.view import View
from bertgeom.weights import weight_geometry_notes
from bertgeom.ui.widgets import head_picker, open_tabs, remember_widgets, restore_widgets, teaching

CAVEAT = (
    "**Reconstruction.** *Directionality of subspace selection* is a concept of Bonino, Ghione & "
    "Cirrincione 2025 (arXiv:2502.12033). The numbers D1–D4 are operational versions of it proposed by this tool: "
    "D1–D3 measure what the authors' released code measured, D4 follows that code's interest in the "
    "eigen-structure of W_Q W_Kᵀ. They are not the authors' own definitions; move the thresholds to see "
    "how much a conclusion depends on them. Definitions: [docs/methods.md §8](/?view=methods&section=8)."
)

FAITHFUL_HELP = (
    "Also compute the attention the way the paper's official code did by hand: head slices taken "
    "as columns of the weights (the transposed map), no biases, no padding mask, each layer fed the "
    "next layer's output (hidden_states[l+1]), on the input padded to 512 positions (D1–D3 then count "
    "every padded position with the 'all positions' token set). Needed to compare with the paper's "
    "figures; the model itself never computes this. [docs/methods.md §8.3](/?view=methods&section=8.3)."
)

#: The page's widgets and their defaults (kept across pages and tabs).
PERSIST = {
    "w_sub_eps": 1e-3, "w_sub_tokens": "all", "w_sub_rank_rtol": None, "w_sub_sym_rtol": 1e-6, "w_sub_bins": 20,
    "w_sub_faithful": False, "w_sub_wfeature": "qk_skew_share", "w_sub_dfeature": "delta_A",
    "w_sub_dsource": "correct", "w_sub_matrix": "factor", "w_sub_logsv": True, "w_sub_more_sv": False,
    "w_sub_pca_colour": "domain", "w_sub_pca_norm": True, "w_sub_pca_faithful": False, "w_sub_across_on": False,
    "w_sub_correct_only": True, "w_sub_box_q": "delta_A",
}

# -------------------------------------------------------------------------------------------
st.title("Subspace Directions")
st.caption(
    "Which directions does each head search for, and does it push all tokens in one direction? "
    "Weight-space geometry needs no input; data-space measures use the input in the sidebar."
)

subject = current_subject()  # the model and the input, resolved once for every tab
loaded, trace = subject.loaded, subject.trace
L, H = trace.num_layers, trace.num_heads

teaching("subspace_directions", "What is a direction in a head's subspace? (two-minute read)")
st.info(CAVEAT, icon=":material/science:")


# ---- selection and settings ------------------------------------------------------------------
restore_widgets("_sub_kept", PERSIST)
c1, c2, c3, c4 = st.columns([1, 1, 2, 3], vertical_alignment="bottom")
layer, head = head_picker(L, H, (c1, c2))
faithful = c3.toggle("Faithful mode", key="w_sub_faithful", help=FAITHFUL_HELP)
with c4.expander("Thresholds and token set"):
    eps = st.select_slider("ε: singular values of A below ε do not count (D2)",
                           options=[1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 5e-2, 1e-1], key="w_sub_eps",
                           format_func=lambda x: f"{x:g}", help="The official code used ε = 1e-3.")
    token_set = st.radio("Tokens used by D1–D3", SUBSPACE_TOKEN_SETS, key="w_sub_tokens",
                         format_func=TOKEN_SET_LABELS.get)
    rank_rtol = st.select_slider("Numerical rank of the weight blocks: relative tolerance",
                                 options=[None, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2], key="w_sub_rank_rtol",
                                 format_func=lambda x: "numpy default" if x is None else f"{x:g}",
                                 help="σ_i counts when σ_i > tol·σ_max; numpy's default is max(shape)·eps32.")
    sym_rtol = st.select_slider("Eigenvalues of S_h counted as zero below (× max |λ|)",
                                options=[1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2], key="w_sub_sym_rtol",
                                format_func=lambda x: f"{x:g}")
    nbins = st.slider("Histogram bins (across inputs)", 5, 60, key="w_sub_bins",
                      help="The official code used 20 equal-width bins.")

try:
    lws = subject.loaded.layer_weights
except ValueError as exc:
    st.error(f"This model's attention weights cannot be read: {plain(error_text(exc))}")
    st.stop()
for note in weight_geometry_notes(lws):  # where a definition made for BERT does not carry over to this model
    st.info(note, icon=":material/info:")
view = View(subject, layer, head, eps=eps, token_set=token_set, rank_rtol=rank_rtol,
            sym_rtol=sym_rtol, nbins=nbins, faithful=faithful, lws=lws)
render = {t.title: t.render for t in offered_tabs(TABS, view)}
for name, tab in open_tabs(list(render), key="w_sub_tab"):
    with tab:
        render[name](view)
remember_widgets("_sub_kept", (*PERSIST, "w_sub_classes"))
