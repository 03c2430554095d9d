"""Subspace Directions tab *Across inputs*: D1–D3 of the selected head over many inputs (the shipped set
or the user's own), as histograms per class, a per-class comparison and tables.
The computations are cached in :mod:`bertgeom.ui.subspace_cache`.

References: Bonino, Ghione & Cirrincione 2025 (arXiv:2502.12033), whose figure showed one head over 30
Omicron test sequences; docs/methods.md §8.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.figures import subspace as fs
from bertgeom.inputs import INPUT_KINDS
from bertgeom.safety import error_text, plain
from bertgeom.sets.inputs import InputItem, shipped_set
from bertgeom.sets.subspace import ACROSS_KEYS
from bertgeom.ui import subspace_cache as sc
from bertgeom.ui.subspace.view import DATA_SHORT, View, file_safe
from bertgeom.ui.widgets import chart, read_set_upload, table
from bertgeom.tables import counted

#: Most inputs a user-supplied set may hold (bounded work).
MAX_SET_INPUTS = 200


def _user_set(kind) -> tuple[InputItem, ...] | None:
    """A set the user uploads, read by the input kind's own reader (None: no upload, or unreadable)."""
    if kind.read_set is None:
        return None
    up = st.file_uploader(f"…or {kind.words.set_upload_label}", type=list(kind.set_upload_types),
                          key="w_sub_set_upload")
    if up is None:
        return None
    return read_set_upload(kind, up.name, up.getvalue())


def across_tab(v: View) -> None:
    """The tab: D1–D3 of the selected head over a set, per class, once the user switches it on."""
    model_id, eps, token_set, faithful = v.model_id, v.eps, v.token_set, v.faithful
    layer, head, HL, kind, loaded, nbins = v.layer, v.head, v.HL, v.kind, v.loaded, v.nbins
    shipped = shipped_set(loaded.spec.input_kind)
    desc = kind.words.shipped_set_description
    st.markdown(f"D1–D3 of **{HL}** over many inputs (the paper's figure showed one head of its "
                f"12-layer genome BERT, its layer 11 head 1, over 30 Omicron test sequences; this model has "
                f"{v.trace.num_layers} layers, so pick the head to study on the D1 grid). Default set: {desc}, "
                f"{len(shipped)} inputs.")
    with st.expander("Use your own set instead"):
        user = _user_set(kind)
    items = user or shipped
    if len(items) > MAX_SET_INPUTS:
        st.caption(f"Only the first {MAX_SET_INPUTS} of {len(items)} inputs are used.")
        items = items[:MAX_SET_INPUTS]
    ready = sc.across_ready(loaded, items, layer, head, eps=eps, token_set=token_set) or \
        sc.across_pending(loaded, items, layer, head, eps=eps, token_set=token_set)
    if not ready and not st.toggle(f"Compute for {HL} over {len(items)} inputs", key="w_sub_across_on",
                                   help="Runs the model once per input the first time (cached on disk afterwards)."):
        st.caption("Switch on to run the model over the set; each head is computed once and then cached. "
                   "For the shipped set with the default ε and tokens, every head is prepared ahead "
                   "(`python -m bertgeom prepare-sets`, or in the background when the server starts).")
        return
    try:
        res = sc.across_inputs(loaded, items, layer, head, eps=eps, token_set=token_set)
    except (ValueError, RuntimeError, np.linalg.LinAlgError, OSError) as exc:
        st.error(f"The set could not be analysed: {plain(error_text(exc))}")
        return
    if len(res.errors):
        with st.expander(f"{counted(len(res.errors), 'input')} could not be analysed"):
            st.markdown("\n".join(f"* {plain(e)}" for e in res.errors.tolist()))
    n = len(res.names)
    if n == 0:
        st.info("No input of the set could be analysed.")
        return
    labels = res.labels.astype(str)
    predicted = res.predicted.astype(str)
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
        v = res.measures[q][keep]
        if faithful:
            groups = {"correct": v[:, 0], "faithful (official code)": v[:, 1]}
        elif colour_by_class:
            kl = labels[keep]
            groups = {INPUT_KINDS.class_name(c): v[kl == c, 0] for c in dict.fromkeys(kl.tolist())}
        else:
            groups = {"all inputs": v[:, 0]}
        with cols[i % 2]:
            chart(fs.histogram_figure(groups, title=f"{HL}: {title}", x_title=title, nbins=nbins, x_range=xr),
                  f"w_sub_hist_{q}")
    if faithful:
        st.caption("Faithful mode: both attentions are shown; the paper's figures used the faithful one. As on "
                   "the single-input tabs, it reads the next layer's output on each input padded to 512 positions "
                   "([docs/methods.md §8.3](/?view=methods&section=8.3)), so these values are that tab's faithful "
                   "values, input by input.")
    if has_labels:
        q = st.selectbox("Per-class comparison of", list(quantities), key="w_sub_box_q",
                         format_func=lambda k: quantities[k][0])
        series = {"correct": res.measures[q][keep, 0]}
        if faithful:
            series["faithful (official code)"] = res.measures[q][keep, 1]
        order = [c for c in CLASSES if c in set(labels[keep].tolist())]
        order += sorted(set(labels[keep].tolist()) - set(order))
        chart(fs.class_box_figure(labels[keep], series, order=order, names=res.names[keep],
                                  display=INPUT_KINDS.all_class_names(),
                                  title=f"{HL}: {quantities[q][0]} per class",
                                  y_title=DATA_SHORT.get(q, quantities[q][0]),  # the full name is the title above
                                  hover_name=q), "w_sub_box")
    frame = pd.DataFrame({"input": res.names, "label": labels, "predicted": predicted,
                          "n_tokens": res.n_tokens.astype(int)})
    for q in ACROSS_KEYS:
        frame[q] = res.measures[q][:, 0]
    for q in ACROSS_KEYS:
        frame[f"faithful_{q}"] = res.measures[q][:, 1]
    frame["faithful_row_tv"] = res.row_tv
    frame["used"] = keep
    with st.expander(f"Per-input values ({int(keep.sum())} of {n} used)"):
        table(frame, f"across_L{layer + 1}H{head + 1}_{file_safe(model_id)}.csv", "w_sub_dl_across")
    if has_labels:
        summ = frame[frame["used"]].groupby("label")[[f"{p}{q}" for p in ("", "faithful_") for q in ACROSS_KEYS]]
        summary = summ.agg(["mean", "std", "count"])
        summary.columns = [f"{a}_{b}" for a, b in summary.columns]
        summary = summary.reset_index()
        with st.expander("Per-class mean and standard deviation"):
            table(summary, f"across_by_class_L{layer + 1}H{head + 1}_{file_safe(model_id)}.csv", "w_sub_dl_class")

