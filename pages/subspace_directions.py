"""Subspace Directions: how each head selects directions (paper_spec §2.2, D1–D4)."""

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom import figures
from bertgeom import figures_subspace as fs
from bertgeom.genome.classes import CLASS_DISPLAY, CLASSES
from bertgeom.inputsets import InputItem, labelled_fasta_set, shipped_set
from bertgeom.subspace import DATA_FEATURE_DOCS, WEIGHT_FEATURE_DOCS
from bertgeom.inputs import InputError
from bertgeom.ui import subspace_cache as sc
from bertgeom.ui.sidebar import current_input_text, current_model_and_trace
from bertgeom.ui.state import select_head

#: Largest heatmap of a d x d matrix drawn in the browser (d = 512 is 262k cells).
MAX_FULL_D = 512
#: Most inputs a user-supplied set may hold (bounded work).
MAX_SET_INPUTS = 200

TEACHING = """
**A head reads the token stream through three small windows.** Every token is a vector
x in R^d (d = model width). Head *h* keeps only d_head of those d numbers for each role:
the query q = W_Q,h x, the key k = W_K,h x and the value v = W_V,h x. So a head *sees* a
d_head-dimensional **subspace** of the stream, and what it writes back, W_O,h v, lies in
another d_head-dimensional subspace. A **direction** in the head's subspace is one axis of
that small space: one pattern in the input the head can look for, or one pattern it can write.

**Searching (weights, D4).** The score of token *i* looking at token *j* is
x_iᵀ M_h x_j / √d_head with M_h = W_Q,hᵀ W_K,h, a d x d matrix of rank ≤ d_head. Split it
into a symmetric part S (the head rewards keys *similar* to the query: "like looks for like")
and a skew part N (a *directed* relation: "find the token that stands in relation R to me";
the skew part never rewards looking at oneself). The skew share α_h = ‖N‖/‖M‖ says which
kind of search dominates. The **principal angles** between the query and key subspaces tell
whether queries and keys read the same directions of the input (0°) or unrelated ones (90°).

**Selecting (data, D1–D3).** On an input, the attention matrix A mixes the value vectors:
row *i* is the recipe for token *i*. If every row is the same recipe, every token receives
the same mixture, so the head output Z_h = A V_h is **rank one**: the head pushes the whole
sentence in a single direction of its value subspace. That is *directional* subspace
selection. D1 measures how parallel the rows of A are (1 = all the same), D2 counts how many
independent recipes the head really uses (singular values of A above ε), D3 measures the
same on the output (share of Z_h's energy in its first direction). The paper's code found
layer 11, head 1 of its genome model to be of this kind: all 512 rows practically parallel,
A of numerical rank 1 to 9.

**The plane of queries and keys.** The joint PCA puts one head's queries (●) and keys (×)
in the same plane: a query attends to the keys lying far along its own direction.
"""

CAVEAT = (
    "**Reconstruction.** The paper's body text could not be read (only its abstract and summaries): "
    "D1–D4 are *proposed* operational definitions that reproduce what the official code measured "
    "(D1–D3) and its interest in the eigen-structure of W_Q W_Kᵀ (D4). They are not the authors' own "
    "definitions; move the thresholds to see how much a conclusion depends on them."
)

FAITHFUL_HELP = (
    "Also compute the attention the way the paper's official code did by hand: head slices taken "
    "as columns of the weights (the transposed map), no biases, no padding mask. Needed to compare "
    "with the paper's figures; the model itself never computes this."
)

#: Short names of the data-space quantities for narrow tables.
DATA_SHORT = {"attn_rank": "D2 · rank r_ε(A)", "attn_rank_norm": "D2 · r_ε(A) / n", "delta_row": "D1 · δ_row",
              "out_energy_top1": "D3 · energy in direction 1", "delta_out": "D3 · δ_out"}

#: The page's widgets and their defaults (kept across pages and tabs).
PERSIST = {
    "w_sub_eps": 1e-3, "w_sub_tokens": "all", "w_sub_rank_rtol": None, "w_sub_sym_rtol": 1e-6, "w_sub_bins": 20,
    "w_sub_faithful": False, "w_sub_wfeature": "qk_skew_share", "w_sub_dfeature": "delta_row",
    "w_sub_dsource": "correct", "w_sub_matrix": "factor", "w_sub_logsv": True, "w_sub_more_sv": False,
    "w_sub_pca_colour": "domain", "w_sub_pca_norm": True, "w_sub_pca_faithful": False, "w_sub_across_on": False,
    "w_sub_correct_only": True, "w_sub_box_q": "delta_row",
}

DATA_SOURCES = {"correct": "the model's attention", "faithful": "faithful (official code)",
                "difference": "faithful − correct"}

# -------------------------------------------------------------------------------------------
st.title("Subspace Directions")
st.caption(
    "Which directions does each head search for, and does it push all tokens in one direction? "
    "Weight-space geometry needs no input; data-space measures use the input in the sidebar."
)

loaded, trace = current_model_and_trace()
model_id = st.session_state["model_id"]
is_spike = loaded.spec.input_kind == "spike"
text = current_input_text(loaded)
wh = loaded.weights_hash
L, H = trace.num_layers, trace.num_heads

with st.expander("What is a direction in a head's subspace? (two-minute read)"):
    st.markdown(TEACHING)
st.info(CAVEAT, icon=":material/science:")


# ---- selection and settings ------------------------------------------------------------------
def _on_widget_select() -> None:
    select_head(st.session_state["w_layer"] - 1, st.session_state["w_head"] - 1)


def _grid_callback(key: str):
    def callback() -> None:
        picked = figures.picked_head(st.session_state.get(key))
        if picked is not None and 0 <= picked[0] < L and 0 <= picked[1] < H:
            select_head(*picked)

    return callback


def _download(df: pd.DataFrame, file_name: str, key: str, label: str = "Download CSV") -> None:
    st.download_button(label, df.to_csv(index=False).encode("utf-8"), file_name=file_name, mime="text/csv",
                       key=key, on_click="ignore", icon=":material/download:")


def _table(df: pd.DataFrame, file_name: str, key: str, **kw) -> None:
    st.dataframe(df, hide_index=True, width="stretch", **kw)
    _download(df, file_name, key)


def _grid_frame(scalars: dict[str, np.ndarray], prefix: str = "") -> pd.DataFrame:
    """One row per head (1-based layer and head), one column per scalar (vectorised)."""
    any_v = next(iter(scalars.values()))
    ll, hh = np.meshgrid(np.arange(any_v.shape[0]), np.arange(any_v.shape[1]), indexing="ij")
    cols = {"layer": ll.ravel() + 1, "head": hh.ravel() + 1}
    cols.update({prefix + k: np.asarray(v).ravel() for k, v in scalars.items()})
    return pd.DataFrame(cols)


layer, head = st.session_state["layer"], st.session_state["head"]
st.session_state["w_layer"], st.session_state["w_head"] = layer + 1, head + 1
# Streamlit forgets a widget's value when the widget is not drawn (another page, a closed tab):
# the page keeps its own copy and puts it back.
_kept = st.session_state.setdefault("_sub_kept", {})
for k, v in PERSIST.items():
    if k not in st.session_state:
        st.session_state[k] = _kept.get(k, v)

c1, c2, c3, c4 = st.columns([1, 1, 2, 3], vertical_alignment="bottom")
c1.number_input("Layer", min_value=1, max_value=L, step=1, key="w_layer", on_change=_on_widget_select)
c2.number_input("Head", min_value=1, max_value=H, step=1, key="w_head", on_change=_on_widget_select)
faithful = c3.toggle("Faithful mode", key="w_sub_faithful", help=FAITHFUL_HELP)
with c4.expander("Thresholds and token set"):
    eps = st.select_slider("ε: singular values of A below ε do not count (D2)",
                           options=[1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 5e-2, 1e-1], key="w_sub_eps",
                           format_func=lambda x: f"{x:g}", help="The official code used ε = 1e-3.")
    token_set = st.radio("Tokens used by D1–D3", list(sc.TOKEN_SETS), key="w_sub_tokens",
                         format_func=sc.TOKEN_SETS.get)
    rank_rtol = st.select_slider("Numerical rank of the weight blocks: relative tolerance",
                                 options=[None, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2], key="w_sub_rank_rtol",
                                 format_func=lambda x: "numpy default" if x is None else f"{x:g}",
                                 help="σ_i counts when σ_i > tol·σ_max; numpy's default is max(shape)·eps32.")
    sym_rtol = st.select_slider("Eigenvalues of S_h counted as zero below (× max |λ|)",
                                options=[1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2], key="w_sub_sym_rtol",
                                format_func=lambda x: f"{x:g}")
    nbins = st.slider("Histogram bins (across inputs)", 5, 60, key="w_sub_bins",
                      help="The official code used 20 equal-width bins.")

HL = figures.head_label(layer, head)
tab_names = ["Weights (D4)", "This input (D1–D3)", "Across inputs", "Faithful vs correct"]
tabs = dict(zip(tab_names, st.tabs(tab_names, key="w_sub_tab", on_change="rerun")))

try:
    lws = sc.cached_layer_weights(model_id, wh)
except ValueError as exc:
    st.error(f"This model's attention weights cannot be read: {str(exc).splitlines()[0]}")
    st.stop()


# ---- weight space ------------------------------------------------------------------------
def weights_tab() -> None:
    try:
        wg = sc.cached_weight_geometry(model_id, wh, rank_rtol, sym_rtol)
    except (ValueError, np.linalg.LinAlgError) as exc:
        st.error(f"The weight geometry of this model could not be computed: {str(exc).splitlines()[0]}")
        return
    names = [n for n in WEIGHT_FEATURE_DOCS if n in wg.scalars]
    left, right = st.columns([5, 4], gap="large")
    with left:
        if st.session_state.get("w_sub_wfeature") not in names:
            st.session_state["w_sub_wfeature"] = "qk_skew_share"
        feature = st.selectbox("Colour the grid by (weight space, no input needed)", names, key="w_sub_wfeature",
                               format_func=lambda n: WEIGHT_FEATURE_DOCS[n][0])
        label, formula, source = WEIGHT_FEATURE_DOCS[feature]
        st.caption(f"`{formula}` — {source}")
        st.plotly_chart(fs.scalar_grid(wg.scalars[feature], label=feature, selected=(layer, head)),
                        key="w_sub_wgrid", on_select=_grid_callback("w_sub_wgrid"), selection_mode="points",
                        config=figures.PLOTLY_CONFIG)
    with right:
        st.markdown(f"#### {HL} · weight geometry")
        st.caption(f"d = {wg.d_model}, d_head = {wg.head_dim}. M_h ignores the biases; the query bias only "
                   "adds a per-key prior (‖u_h‖ below), the other bias terms cancel in the softmax.")
        st.dataframe(
            pd.DataFrame({"quantity": [WEIGHT_FEATURE_DOCS[n][0] for n in names],
                          "value": [float(wg.scalars[n][layer, head]) for n in names]}),
            hide_index=True, width="stretch", height=330,
        )
        _download(_grid_frame(wg.scalars), f"weight_geometry_{_safe(model_id)}.csv", "w_sub_dl_wall",
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
        st.plotly_chart(fs.spectra_figure(blocks, title="Singular values of the head's blocks", log_y=log_y),
                        key="w_sub_sv", config=figures.PLOTLY_CONFIG)
    with b:
        st.plotly_chart(fs.principal_angles_figure(sp["qk_angles_rad"]), key="w_sub_angles",
                        config=figures.PLOTLY_CONFIG)
    a, b = st.columns(2)
    lw = lws[layer]
    s = lw.head_slice(head)
    factor = lw.W_q[s, :].astype(np.float64) @ lw.W_k[s, :].astype(np.float64).T  # d_head x d_head
    with a:
        st.plotly_chart(fs.sym_eigen_figure(sp["qk_sym_eig"], d_model=wg.d_model, rtol=sym_rtol),
                        key="w_sub_symeig", config=figures.PLOTLY_CONFIG)
        st.caption("By Sylvester's law of inertia S_h has d_head positive and d_head negative eigenvalues "
                   "whenever the query and key subspaces are in general position: the *sizes* (balance) "
                   "carry the information, not the counts.")
    with b:
        st.plotly_chart(fs.complex_eigen_figure(np.linalg.eigvals(factor)), key="w_sub_eigc",
                        config=figures.PLOTLY_CONFIG)
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
        fig = fs.matrix_heatmap(factor, title=f"{HL}: W_Q,h W_K,hᵀ (d_head × d_head)",
                                x_title="key feature j", y_title="query feature i", height=480)
        cap = ("Entry (i, j) = ⟨row i of W_Q,h, row j of W_K,h⟩: how much query feature i and key feature j "
               "read the same input direction; its trace is tr(M_h). "
               "The official code drew the d × d matrix W_q[:, s] W_k[:, s]ᵀ of the *transposed* slices.")
    else:
        from bertgeom.subspace import qk_bilinear

        M, S, N = qk_bilinear(lw, head)
        mat = {"M": M, "S": S, "N": N}[choice]
        fig = fs.matrix_heatmap(mat, title=f"{HL}: {choice}_h (d × d)", x_title="input feature (key side)",
                                y_title="input feature (query side)", height=520)
        cap = "score(x_i, x_j) = x_iᵀ M_h x_j / √d_head; S and N are its symmetric and skew parts."
    hm.plotly_chart(fig, key="w_sub_matrix_fig", config=figures.PLOTLY_CONFIG)
    txt.caption(cap)
    spectra_df = pd.DataFrame({
        f"{k}": pd.Series(np.asarray(v, dtype=float)) for k, v in sp.items()
    })
    spectra_df.insert(0, "i", np.arange(1, len(spectra_df) + 1))
    with st.expander(f"{HL}: spectra as a table"):
        _table(spectra_df, f"spectra_L{layer + 1}H{head + 1}_{_safe(model_id)}.csv", "w_sub_dl_spectra")


# ---- data space ----------------------------------------------------------------------------
def _data_geometries():
    try:
        correct, _ = sc.cached_data_geometry(model_id, wh, text, eps, token_set, False)
        fgeom, dev = sc.cached_data_geometry(model_id, wh, text, eps, token_set, True) if faithful else (None, None)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        st.error(f"D1–D3 could not be computed for this input: {str(exc).splitlines()[0]}")
        st.stop()
    return correct, fgeom, dev


def data_tab() -> None:
    dg, fdg, _ = _data_geometries()
    names = list(DATA_FEATURE_DOCS)
    left, right = st.columns([5, 4], gap="large")
    with left:
        if st.session_state.get("w_sub_dfeature") not in names:
            st.session_state["w_sub_dfeature"] = "delta_row"
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
        st.plotly_chart(fs.scalar_grid(values, label=feature, selected=(layer, head), colorscale=cs, zrange=zr),
                        key="w_sub_dgrid", on_select=_grid_callback("w_sub_dgrid"), selection_mode="points",
                        config=figures.PLOTLY_CONFIG)
    with right:
        st.markdown(f"#### {HL} · this input")
        st.caption(f"{dg.n_tokens} tokens used — {sc.TOKEN_SETS[token_set]}; ε = {eps:g}.")
        rows = {"quantity": [DATA_SHORT.get(n, n) for n in names],
                "correct": [float(dg.scalars[n][layer, head]) for n in names]}
        if faithful:
            rows["faithful"] = [float(fdg.scalars[n][layer, head]) for n in names]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        table = _grid_frame(dg.scalars)
        if faithful:
            table = table.join(_grid_frame(fdg.scalars, "faithful_").drop(columns=["layer", "head"]))
        _download(table, f"data_geometry_{_safe(model_id)}.csv", "w_sub_dl_dall", "Download every head (CSV)")

    a, b = st.columns(2)
    with a:
        st.plotly_chart(
            fs.attention_spectrum_figure(dg.spectra["attn_sv"][layer, head], eps=eps,
                                         faithful_sv=fdg.spectra["attn_sv"][layer, head] if faithful else None,
                                         title=f"{HL}: singular values of A (D2)"),
            key="w_sub_attn_sv", config=figures.PLOTLY_CONFIG)
    with b:
        st.plotly_chart(fs.energy_figure(dg.spectra["out_sv"][layer, head],
                                         title=f"{HL}: energy of Z_h per direction (D3)"),
                        key="w_sub_energy", config=figures.PLOTLY_CONFIG)
    sv_df = pd.DataFrame({"i": np.arange(1, dg.spectra["attn_sv"].shape[-1] + 1),
                          "sigma_A": dg.spectra["attn_sv"][layer, head]})
    if faithful:
        sv_df["sigma_A_faithful"] = fdg.spectra["attn_sv"][layer, head]
    with st.expander(f"{HL}: singular values of A as a table"):
        _table(sv_df, f"attention_sv_L{layer + 1}H{head + 1}.csv", "w_sub_dl_attn_sv")

    st.markdown(f"#### {HL} · queries and keys in one plane")
    c1, c2, c3 = st.columns([2, 2, 3])
    colour = "position"
    if is_spike and trace.encoded.extra.get("domains"):
        colour = c1.radio("Colour by", ["domain", "position"], horizontal=True, key="w_sub_pca_colour",
                          format_func={"position": "token position", "domain": "spike domain"}.get)
    else:
        c1.caption("Colour: token position (0 = [CLS]).")
    normalize = c2.checkbox("AttentionViz normalisation", key="w_sub_pca_norm",
                            help="Scale queries and keys to the same mean norm and move the keys' centre onto "
                                 "the queries' one: no attention weight changes, but the two clouds become comparable.")
    use_faithful = False
    if faithful:
        use_faithful = c3.toggle("Faithful projections (transposed slices, no bias)", key="w_sub_pca_faithful")
    proj = sc.cached_joint_qk(model_id, wh, text, layer, head, normalize, use_faithful)
    cats = None
    if colour == "domain":
        cats = [d or "special token" for d in trace.encoded.extra["domains"]]
    st.plotly_chart(
        fs.joint_qk_figure(proj.q_coords, proj.k_coords, trace.axis_labels,
                           colour_by="category" if colour == "domain" else "position", categories=cats,
                           explained=proj.explained_variance_ratio,
                           title=f"{HL}: queries (●) and keys (×), joint PCA"),
        key="w_sub_pca", config=figures.PLOTLY_CONFIG)
    st.caption(f"Explained variance of the two axes: {proj.explained_variance_ratio.sum():.0%}. "
               "A query attends most to the keys far along its own direction (large dot product).")


# ---- across inputs ---------------------------------------------------------------------------
def _user_set() -> tuple[InputItem, ...] | None:
    if is_spike:
        up = st.file_uploader("…or your own labelled FASTA (header suffix |class, e.g. >seq1|omicron)",
                              type=["fasta", "fa", "fna", "txt", "gz", "xz"], key="w_sub_set_upload")
        if up is None:
            return None
        try:
            return labelled_fasta_set(up.getvalue())
        except InputError as exc:
            st.error(str(exc))
            return None
    up = st.file_uploader("…or your own sentences (a .txt file, one per line)", type=["txt"],
                          key="w_sub_set_upload")
    if up is None:
        return None
    lines = [s.strip() for s in up.getvalue().decode("utf-8", "replace").splitlines() if s.strip()]
    if not lines:
        st.error("The uploaded file holds no sentence.")
        return None
    return tuple(InputItem(f"line {i + 1}", s) for i, s in enumerate(lines))


def across_tab() -> None:
    shipped = shipped_set(loaded.spec.input_kind)
    desc = ("the shipped validation genomes (held out from training, labelled with their class)" if is_spike
            else "the shipped example sentences")
    st.markdown(f"D1–D3 of **{HL}** over many inputs (the paper's figure: layer 11, head 1, 30 Omicron test "
                f"sequences). Default set: {desc}, {len(shipped)} inputs.")
    with st.expander("Use your own set instead"):
        user = _user_set()
    items = user or shipped
    if len(items) > MAX_SET_INPUTS:
        st.caption(f"Only the first {MAX_SET_INPUTS} of {len(items)} inputs are used.")
        items = items[:MAX_SET_INPUTS]
    if not st.toggle(f"Compute for {HL} over {len(items)} inputs", key="w_sub_across_on",
                     help="Runs the model once per input the first time (cached on disk afterwards)."):
        st.caption("Switch on to run the model over the set; each head is computed once and then cached.")
        return
    try:
        res = sc.across_inputs(model_id, wh, items, layer, head, eps=eps, token_set=token_set)
    except (ValueError, RuntimeError, np.linalg.LinAlgError, OSError) as exc:
        st.error(f"The set could not be analysed: {str(exc).splitlines()[0]}")
        return
    if len(res["errors"]):
        with st.expander(f"{len(res['errors'])} input(s) could not be analysed"):
            st.write("\n".join(f"* {e}" for e in res["errors"].tolist()))
    n = len(res["names"])
    if n == 0:
        st.info("No input of the set could be analysed.")
        return
    labels = res["labels"].astype(str)
    predicted = res["predicted"].astype(str)
    has_labels = bool((labels != "").any())
    has_pred = bool((predicted != "").any())
    keep = np.ones(n, bool)
    f1, f2 = st.columns([3, 2])
    if has_labels:
        present = [c for c in CLASSES if c in set(labels.tolist())] + sorted(set(labels.tolist()) - set(CLASSES) - {""})
        stored = st.session_state.get("w_sub_classes")
        if not stored or not set(stored) <= set(present):
            kept = st.session_state["_sub_kept"].get("w_sub_classes")
            st.session_state["w_sub_classes"] = kept if kept and set(kept) <= set(present) else present
        chosen = f1.multiselect("Classes", present, key="w_sub_classes",
                                format_func=lambda c: CLASS_DISPLAY.get(c, c))
        keep &= np.isin(labels, chosen)
    correct = (predicted == labels) & (labels != "")
    if has_labels and has_pred:
        if f2.toggle("Correct predictions only (as the official code)", key="w_sub_correct_only"):
            keep &= correct
        f2.caption(f"{int(correct.sum())} of {n} inputs predicted correctly.")
    if not keep.any():
        st.info("No input is left after these filters: add classes or include wrong predictions.")
        return
    quantities = {
        "delta_row": ("D1 · row alignment δ_row", None),
        "attn_rank_norm": (f"D2 · r_ε / n (ε = {eps:g})", None),
        "out_energy_top1": ("D3 · energy share of direction 1", None),
        "delta_out": ("D3 · output alignment δ_out", None),
    }
    colour_by_class = has_labels and not faithful
    cols = st.columns(2)
    for i, (q, (title, xr)) in enumerate(quantities.items()):
        v = res[q][keep]
        if faithful:
            groups = {"correct": v[:, 0], "faithful (official code)": v[:, 1]}
        elif colour_by_class:
            kl = labels[keep]
            groups = {CLASS_DISPLAY.get(c, c): v[kl == c, 0] for c in dict.fromkeys(kl.tolist())}
        else:
            groups = {"all inputs": v[:, 0]}
        with cols[i % 2]:
            st.plotly_chart(fs.histogram_figure(groups, title=f"{HL}: {title}", x_title=q, nbins=nbins, x_range=xr),
                            key=f"w_sub_hist_{q}", config=figures.PLOTLY_CONFIG)
    if faithful:
        st.caption("Faithful mode: both attentions are shown; the paper's figures used the faithful one "
                   "(on 512 padded positions, which these traces do not have).")
    if has_labels:
        q = st.selectbox("Per-class comparison of", list(quantities), key="w_sub_box_q",
                         format_func=lambda k: quantities[k][0])
        series = {"correct": res[q][keep, 0]}
        if faithful:
            series["faithful (official code)"] = res[q][keep, 1]
        order = [c for c in CLASSES if c in set(labels[keep].tolist())]
        order += sorted(set(labels[keep].tolist()) - set(order))
        st.plotly_chart(fs.class_box_figure(labels[keep], series, order=order, names=res["names"][keep],
                                            title=f"{HL}: {quantities[q][0]} per class", y_title=q),
                        key="w_sub_box", config=figures.PLOTLY_CONFIG)
    table = pd.DataFrame({"input": res["names"], "label": labels, "predicted": predicted,
                          "n_tokens": res["n_tokens"].astype(int)})
    for q in sc.ACROSS_KEYS:
        table[q] = res[q][:, 0]
    for q in sc.ACROSS_KEYS:
        table[f"faithful_{q}"] = res[q][:, 1]
    table["faithful_row_tv"] = res["row_tv"]
    table["used"] = keep
    with st.expander(f"Per-input values ({int(keep.sum())} of {n} used)"):
        _table(table, f"across_L{layer + 1}H{head + 1}_{_safe(model_id)}.csv", "w_sub_dl_across")
    if has_labels:
        summ = table[table["used"]].groupby("label")[[f"{p}{q}" for p in ("", "faithful_") for q in sc.ACROSS_KEYS]]
        summary = summ.agg(["mean", "std", "count"])
        summary.columns = [f"{a}_{b}" for a, b in summary.columns]
        summary = summary.reset_index()
        with st.expander("Per-class mean and standard deviation"):
            _table(summary, f"across_by_class_L{layer + 1}H{head + 1}_{_safe(model_id)}.csv", "w_sub_dl_class")


# ---- faithful vs correct -------------------------------------------------------------------
def faithful_tab() -> None:
    st.caption("The official code recomputed attention by hand with the *transposed* head slices X·W[:, s], "
               "without biases or padding mask (paper_spec §2.1). Here it is next to the model's own attention. "
               "Switch on *Faithful mode* above to see the faithful values in the other tabs too.")
    try:
        _, dev = sc.cached_data_geometry(model_id, wh, text, eps, token_set, True)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        st.error(f"The faithful attention could not be computed for this input: {str(exc).splitlines()[0]}")
        return
    left, right = st.columns([5, 4], gap="large")
    with left:
        st.markdown("#### Faithful vs model, every head")
        top = float(np.nanmax(dev["row_tv"])) if np.isfinite(dev["row_tv"]).any() else 1.0
        st.plotly_chart(
            fs.scalar_grid(dev["row_tv"], label="row TV", selected=(layer, head), zrange=(0.0, max(top, 1e-6)),
                           colorscale="Purples"),
            key="w_sub_fgrid", on_select=_grid_callback("w_sub_fgrid"), selection_mode="points",
            config=figures.PLOTLY_CONFIG)
        st.caption("Mean over query rows of ½·Σ_j |A_faithful − A_correct|: 0 = identical rows, 1 = disjoint.")
    with right:
        st.markdown(f"#### {HL}")
        st.dataframe(pd.DataFrame({
            "deviation": ["mean |A_f − A_c|", "max |A_f − A_c|", "mean row TV distance"],
            "value": [float(dev[k][layer, head]) for k in ("mean_abs", "max_abs", "row_tv")],
        }), hide_index=True, width="stretch")
        _download(_grid_frame(dev), f"faithful_deviation_{_safe(model_id)}.csv", "w_sub_dl_dev",
                  "Download every head (CSV)")
        st.caption("These traces hold no padding, so the missing mask plays no part here; the transposed "
                   "slices and the missing biases do.")
    Af = sc.cached_faithful_layer(model_id, wh, text, layer)[head]
    st.plotly_chart(fs.attention_comparison_figure(trace.attentions[layer, head], Af, trace.axis_labels,
                                                   layer=layer, head=head),
                    key="w_sub_compare", config=figures.PLOTLY_CONFIG)


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(s))[-60:]


RENDER = {"Weights (D4)": weights_tab, "This input (D1–D3)": data_tab, "Across inputs": across_tab,
          "Faithful vs correct": faithful_tab}
for name, tab in tabs.items():
    if tab.open is False:
        continue
    with tab:
        RENDER[name]()
st.session_state["_sub_kept"] = {k: st.session_state[k] for k in (*PERSIST, "w_sub_classes") if k in st.session_state}
