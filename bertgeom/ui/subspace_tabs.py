"""The four tabs of the Subspace Directions page (weights, this input, across inputs,
faithful vs correct): widgets in, figures out; the computations are cached in
:mod:`bertgeom.ui.subspace_cache`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.figures import subspace as fs
from bertgeom.figures.base import matrix_heatmap
from bertgeom.inputs import INPUT_KINDS
from bertgeom.inputs import InputError
from bertgeom.tokens import TOKEN_SETS
from bertgeom.sets.inputs import InputItem, shipped_set
from bertgeom.sets.subspace import ACROSS_KEYS
from bertgeom.analysis.subspace import DATA_FEATURE_DOCS, WEIGHT_FEATURE_DOCS
from bertgeom.tables import per_head_frame
from bertgeom.ui import subspace_cache as sc
from bertgeom.ui.state import PageView
from bertgeom.ui.names import symbols
from bertgeom.ui.widgets import chart, csv_button, table
from bertgeom.ui.plain import plain

#: Largest heatmap of a d x d matrix drawn in the browser (d = 512 is 262k cells).
MAX_FULL_D = 512
#: Most inputs a user-supplied set may hold (bounded work).
MAX_SET_INPUTS = 200

#: Short names of the data-space quantities for narrow tables.
DATA_SHORT = {"attn_rank": "D2 · rank r_ε(A)", "attn_rank_norm": "D2 · r_ε(A) / n", "delta_A": "D1 · δ_A",
              "out_energy_top1": "D3 · energy in direction 1", "delta_out": "D3 · δ_out"}

DATA_SOURCES = {"correct": "the model's attention", "faithful": "faithful (official code)",
                "difference": "faithful − correct"}


@dataclass
class View(PageView):
    """What every tab reads: the page view with the page's settings and the layer weights."""

    eps: float
    token_set: str
    rank_rtol: float | None
    sym_rtol: float
    nbins: int
    faithful: bool
    lws: list

    @property
    def wh(self) -> str:
        return self.loaded.weights_hash


# ---- weight space ------------------------------------------------------------------------
def weights_tab(v: View) -> None:
    model_id, wh, layer, head, HL, lws = v.model_id, v.wh, v.layer, v.head, v.HL, v.lws
    rank_rtol, sym_rtol = v.rank_rtol, v.sym_rtol
    try:
        wg = sc.cached_weight_geometry(model_id, wh, rank_rtol, sym_rtol)
    except (ValueError, np.linalg.LinAlgError) as exc:
        st.error(f"The weight geometry of this model could not be computed: {plain(str(exc).splitlines()[0])}")
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
        chart(fs.scalar_grid(wg.scalars[feature], label=label, selected=(layer, head)), "w_sub_wgrid", selects_head=True)
    with right:
        st.markdown(f"#### {HL} · weight geometry")
        st.caption(f"d = {wg.d_model}, d_head = {wg.head_dim}. M_h ignores the biases; the query bias only "
                   "adds a per-key prior (‖u_h‖ below), the other bias terms cancel in the softmax.")
        st.dataframe(
            pd.DataFrame({"quantity": [symbols(WEIGHT_FEATURE_DOCS[n][0]) for n in names],
                          "value": [float(wg.scalars[n][layer, head]) for n in names]}),
            hide_index=True, width="stretch", height=330,
        )
        csv_button(per_head_frame(wg.scalars), f"weight_geometry_{_safe(model_id)}.csv", "w_sub_dl_wall",
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
        table(spectra_df, f"spectra_L{layer + 1}H{head + 1}_{_safe(model_id)}.csv", "w_sub_dl_spectra")


# ---- data space ----------------------------------------------------------------------------
def _data_geometries(v: View):
    model_id, wh, text, eps, token_set, faithful = v.model_id, v.wh, v.text, v.eps, v.token_set, v.faithful
    try:
        correct, _ = sc.cached_data_geometry(model_id, wh, text, eps, token_set, False)
        fgeom, dev = sc.data_geometry_for(model_id, wh, text, eps, token_set, True) if faithful else (None, None)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        st.error(f"D1–D3 could not be computed for this input: {plain(str(exc).splitlines()[0])}")
        st.stop()
    return correct, fgeom, dev


def data_tab(v: View) -> None:
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
        chart(fs.scalar_grid(values, label=DATA_SHORT.get(feature, label), selected=(layer, head), colorscale=cs, zrange=zr),
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
        csv_button(frame, f"data_geometry_{_safe(model_id)}.csv", "w_sub_dl_dall", "Download every head (CSV)")

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
                          format_func={"position": "token position", "domain": kind.domain_noun}.get)
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
        cats = [d or "special token" for d in trace.encoded.domains]
    chart(fs.joint_qk_figure(proj.q_coords, proj.k_coords, trace.axis_labels,
                           colour_by="category" if colour == "domain" else "position", categories=cats,
                           explained=proj.explained_variance_ratio,
                           title=f"{HL}: queries (●) and keys (×), joint PCA"), "w_sub_pca")
    st.caption(f"Explained variance of the two axes: {proj.explained_variance_ratio.sum():.0%}. "
               "A query attends most to the keys far along its own direction (large dot product).")


# ---- across inputs ---------------------------------------------------------------------------
def _user_set(kind) -> tuple[InputItem, ...] | None:
    """A set the user uploads, read by the input kind's own reader (None: no upload, or unreadable)."""
    if kind.read_set is None:
        return None
    up = st.file_uploader(f"…or {kind.set_upload_label}", type=list(kind.set_upload_types), key="w_sub_set_upload")
    if up is None:
        return None
    try:
        return kind.read_set(up.getvalue())
    except InputError as exc:
        st.error(plain(exc))
        return None


def across_tab(v: View) -> None:
    model_id, wh, eps, token_set, faithful = v.model_id, v.wh, v.eps, v.token_set, v.faithful
    layer, head, HL, kind, loaded, nbins = v.layer, v.head, v.HL, v.kind, v.loaded, v.nbins
    shipped = shipped_set(loaded.spec.input_kind)
    desc = kind.shipped_set_description
    st.markdown(f"D1–D3 of **{HL}** over many inputs (the paper's figure showed one head of its "
                f"12-layer genome BERT, its layer 11 head 1, over 30 Omicron test sequences; this model has "
                f"{v.trace.num_layers} layers, so pick the head to study on the D1 grid). Default set: {desc}, {len(shipped)} inputs.")
    with st.expander("Use your own set instead"):
        user = _user_set(kind)
    items = user or shipped
    if len(items) > MAX_SET_INPUTS:
        st.caption(f"Only the first {MAX_SET_INPUTS} of {len(items)} inputs are used.")
        items = items[:MAX_SET_INPUTS]
    ready = sc.across_ready(model_id, wh, items, layer, head, eps=eps, token_set=token_set) or \
        sc.across_pending(model_id, wh, items, layer, head, eps=eps, token_set=token_set)
    if not ready and not st.toggle(f"Compute for {HL} over {len(items)} inputs", key="w_sub_across_on",
                                   help="Runs the model once per input the first time (cached on disk afterwards)."):
        st.caption("Switch on to run the model over the set; each head is computed once and then cached. "
                   "For the shipped set with the default ε and tokens, every head is prepared ahead "
                   "(`python -m bertgeom prepare-sets`, or in the background when the server starts).")
        return
    try:
        res = sc.across_inputs(model_id, wh, items, layer, head, eps=eps, token_set=token_set)
    except (ValueError, RuntimeError, np.linalg.LinAlgError, OSError) as exc:
        st.error(f"The set could not be analysed: {plain(str(exc).splitlines()[0])}")
        return
    if len(res["errors"]):
        with st.expander(f"{len(res['errors'])} input(s) could not be analysed"):
            st.markdown("\n".join(f"* {plain(e)}" for e in res["errors"].tolist()))
    n = len(res["names"])
    if n == 0:
        st.info("No input of the set could be analysed.")
        return
    labels = res["labels"].astype(str)
    predicted = res["predicted"].astype(str)
    CLASSES = tuple(kind.class_names) or tuple(loaded.labels)  # the kind's class order
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
                                format_func=lambda c: INPUT_KINDS.class_name(c))
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
        "delta_A": ("D1 · row alignment on the token set δ_A", None),
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
            groups = {INPUT_KINDS.class_name(c): v[kl == c, 0] for c in dict.fromkeys(kl.tolist())}
        else:
            groups = {"all inputs": v[:, 0]}
        with cols[i % 2]:
            chart(fs.histogram_figure(groups, title=f"{HL}: {title}", x_title=title, nbins=nbins, x_range=xr), f"w_sub_hist_{q}")
    if faithful:
        st.caption("Faithful mode: both attentions are shown; the paper's figures used the faithful one. As on "
                   "the single-input tabs, it reads the next layer's output on each input padded to 512 positions "
                   "([docs/methods.md §8.3](/?view=methods&section=8.3)), so these values are that tab's faithful values, input by input.")
    if has_labels:
        q = st.selectbox("Per-class comparison of", list(quantities), key="w_sub_box_q",
                         format_func=lambda k: quantities[k][0])
        series = {"correct": res[q][keep, 0]}
        if faithful:
            series["faithful (official code)"] = res[q][keep, 1]
        order = [c for c in CLASSES if c in set(labels[keep].tolist())]
        order += sorted(set(labels[keep].tolist()) - set(order))
        chart(fs.class_box_figure(labels[keep], series, order=order, names=res["names"][keep], display=INPUT_KINDS.all_class_names(),
                                  title=f"{HL}: {quantities[q][0]} per class",
                                  y_title=DATA_SHORT.get(q, quantities[q][0]),  # the full name is the title above
                                  hover_name=q), "w_sub_box")
    frame = pd.DataFrame({"input": res["names"], "label": labels, "predicted": predicted,
                          "n_tokens": res["n_tokens"].astype(int)})
    for q in ACROSS_KEYS:
        frame[q] = res[q][:, 0]
    for q in ACROSS_KEYS:
        frame[f"faithful_{q}"] = res[q][:, 1]
    frame["faithful_row_tv"] = res["row_tv"]
    frame["used"] = keep
    with st.expander(f"Per-input values ({int(keep.sum())} of {n} used)"):
        table(frame, f"across_L{layer + 1}H{head + 1}_{_safe(model_id)}.csv", "w_sub_dl_across")
    if has_labels:
        summ = frame[frame["used"]].groupby("label")[[f"{p}{q}" for p in ("", "faithful_") for q in ACROSS_KEYS]]
        summary = summ.agg(["mean", "std", "count"])
        summary.columns = [f"{a}_{b}" for a, b in summary.columns]
        summary = summary.reset_index()
        with st.expander("Per-class mean and standard deviation"):
            table(summary, f"across_by_class_L{layer + 1}H{head + 1}_{_safe(model_id)}.csv", "w_sub_dl_class")


# ---- faithful vs correct -------------------------------------------------------------------
def faithful_tab(v: View) -> None:
    model_id, wh, text, eps, token_set = v.model_id, v.wh, v.text, v.eps, v.token_set
    layer, head, HL, trace = v.layer, v.head, v.HL, v.trace
    st.caption("The official code recomputed attention by hand with the *transposed* head slices X·W[:, s], "
               "without biases or padding mask, feeding each layer the **next** layer's output, on inputs "
               "**padded to 512** positions ([docs/methods.md §8.3](/?view=methods&section=8.3)). Faithful mode does all four. "
               "Switch on *Faithful mode* above to see the faithful values in the other tabs too.")
    try:
        _, dev = sc.data_geometry_for(model_id, wh, text, eps, token_set, True)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        st.error(f"The faithful attention could not be computed for this input: {plain(str(exc).splitlines()[0])}")
        return
    left, right = st.columns([5, 4], gap="large")
    with left:
        st.markdown("#### Faithful vs model, every head")
        top = float(np.nanmax(dev["row_tv"])) if np.isfinite(dev["row_tv"]).any() else 1.0
        chart(fs.scalar_grid(dev["row_tv"], label="row TV", selected=(layer, head), zrange=(0.0, max(top, 1e-6)),
                           colorscale="Purples"), "w_sub_fgrid", selects_head=True)
        st.caption("Mean over query rows of ½·Σ_j |A_faithful − A_correct|: 0 = identical rows, 1 = disjoint.")
    with right:
        st.markdown(f"#### {HL}")
        st.dataframe(pd.DataFrame({
            "deviation": ["mean |A_f − A_c|", "max |A_f − A_c|", "mean row TV distance"],
            "value": [float(dev[k][layer, head]) for k in ("mean_abs", "max_abs", "row_tv")],
        }), hide_index=True, width="stretch")
        csv_button(per_head_frame(dev), f"faithful_deviation_{_safe(model_id)}.csv", "w_sub_dl_dev",
                  "Download every head (CSV)")
        st.caption("The grid and the table compare the padded faithful map with the model's: attention "
                   "the faithful map gives to PAD positions counts as deviation. The maps below are the "
                   "unpadded ones (the faithful one from the next layer's output), so they can sit side by side.")
    Af = sc.cached_faithful_layer(model_id, wh, text, layer)[head]
    chart(fs.attention_comparison_figure(trace.attentions[layer, head], Af, trace.axis_labels,
                                                   layer=layer, head=head), "w_sub_compare")


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(s))[-60:]


TABS = {"Weights (D4)": weights_tab, "This input (D1–D3)": data_tab, "Across inputs": across_tab,
        "Faithful vs correct": faithful_tab}
