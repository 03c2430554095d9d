"""Attention Heads tab *Disable heads*: every way of disabling heads in one place — chosen heads or a
whole layer on this input, the per-head and per-layer sweeps, and each head over the shipped set.

References: Kovaleva et al. 2019 (arXiv:1908.08593) §4.6 (uniform attention for a disabled head);
:mod:`bertgeom.analysis.ablation`, :mod:`bertgeom.sets.ablation`.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.ablation import cls_cosine
from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, probability_bars
from bertgeom.inputs import INPUT_KINDS
from bertgeom.probabilities import class_probabilities
from bertgeom.tables import counted, head_label, head_labels, per_head_frame
from bertgeom.ui import heads_cache as hc
from bertgeom.ui.heads.view import View
from bertgeom.ui.names import class_name
from bertgeom.ui.widgets import chart, csv_button, errors_expander, progress
from bertgeom.ui.workqueue import heavy


def disable_tab(v: View) -> None:
    model_id, text, loaded, layer, head, L, H = v.model_id, v.text, v.loaded, v.layer, v.head, v.L, v.H
    st.caption(
        "Kovaleva et al. §4.6: a disabled head attends uniformly (weight 1/n on each of the input's n real tokens) to "
        "every real token; nothing is retrained. "
        "bertgeom recomputes the forward pass from the shared model's own layers with those heads swapped for the "
        "uniform map — no hooks, no copies, nothing in the shared model changes."
    )
    modes = ["Chosen heads", "A whole layer", "Each head alone (sweep)", "Each layer alone (sweep)",
             "Each head, over the set"]
    mode = st.radio("Disable", modes, horizontal=True, key="w_abl_mode")
    if mode == modes[4]:
        set_disable_section(v)
        return
    classifier = bool(loaded.labels)
    names = head_labels(L, H)
    if mode in modes[:2]:
        if mode == "Chosen heads":
            if st.session_state.get("w_abl_heads") is None:
                st.session_state["w_abl_heads"] = [head_label(layer, head)]
            chosen = st.multiselect("Heads to disable", names, key="w_abl_heads")
            heads = tuple(divmod(names.index(n), H) for n in chosen)
        else:
            lay = st.selectbox("Layer to disable", list(range(L)), index=layer, format_func=lambda i: f"L{i + 1}",
                               key="w_abl_layer")
            heads = tuple((lay, h) for h in range(H))
        if not heads:
            st.info("Pick at least one head.")
            return
        res = hc.cached_ablation(v.subject, heads)
        cos = cls_cosine(res.cls_before, res.cls_after)  # [L+1]: embeddings, then every layer
        if classifier:
            pb = class_probabilities(loaded, res.logits_before)  # calibrated, as on every screen
            pa = class_probabilities(loaded, res.logits_after)
            top = int(np.argmax(pb))
            after = int(np.argmax(pa))
            c1, c2, c3 = st.columns(3)
            c1.metric("Predicted with all heads", f"{class_name(loaded.labels[top])} ({pb[top]:.3f})")
            c2.metric("Predicted with the heads disabled", f"{class_name(loaded.labels[after])} ({pa[after]:.3f})")
            c3.metric(f"Change of p({class_name(loaded.labels[top])})", f"{pa[top] - pb[top]:+.4f}")
            chart(probability_bars(loaded.labels, {"all heads": pb, "heads disabled": pa},
                                   display=INPUT_KINDS.all_class_names(),
                                   title=f"Class probabilities, {counted(len(heads), 'head')} disabled"), "w_abl_probs")
            pdf = pd.DataFrame({"class": loaded.labels, "p_before": pb, "p_after": pa, "change": pa - pb})
            csv_button(pdf, "ablation_probabilities.csv", "w_abl_csv")
        else:
            st.metric("[CLS] cosine, before vs after (last layer)", f"{cos[-1]:.4f}", f"{cos[-1] - 1:+.4f}")
        chart(fh.layer_lines({"[CLS] cosine before/after": cos}, xlabels=["emb"] + [f"L{i + 1}" for i in range(L)],
                              title="How far the [CLS] vector moves, layer by layer", ylabel="cosine"), "w_abl_cos")
        cdf = pd.DataFrame({"layer": ["embeddings"] + [f"L{i + 1}" for i in range(L)], "cls_cosine": cos})
        csv_button(cdf, "ablation_cls_cosine.csv", "w_abl_cos_csv", "Download the [CLS] cosines (CSV)")
        return

    kind = "heads" if mode.startswith("Each head") else "layers"
    cost = "one pass per head, batched" if kind == "heads" else "one pass per layer"
    req_key = (model_id, text, kind)
    if st.session_state.get("abl_sweep") != req_key:
        st.caption(f"Kovaleva Figure {'8' if kind == 'heads' else '9'} on this input ({cost}).")
        st.button("Run the sweep", key="w_abl_run", type="primary",
                  on_click=lambda: st.session_state.update(abl_sweep=req_key))
        return
    sw = hc.cached_sweep(v.subject, kind)
    if classifier:
        pb = class_probabilities(loaded, sw.base_logits)
        top = int(np.argmax(pb))
        pa = class_probabilities(loaded, sw.logits)[..., top]
        delta = pa - pb[top]
        what = f"change of p({class_name(loaded.labels[top])}) (predicted class)"
    else:
        delta = 1.0 - cls_cosine(sw.cls, sw.base_cls)
        what = "1 − cosine of the final [CLS] vector"
    if kind == "heads":
        st.markdown(f"**{what}** when each head alone is disabled; click a head to select it.")
        if classifier:  # a probability can rise or fall: diverging colours centred on 0
            sweep_fig = fh.diverging_grid(delta, colour_label="Δp", selected=(layer, head))
        else:
            sweep_fig = head_grid(delta, colour_label="1 − cos", selected=(layer, head), colorscale="Reds",
                                          zrange=(0.0, max(float(np.nanmax(delta)), 1e-9)))
        chart(sweep_fig, "w_sweep_grid", selects_head=True)
        sdf = per_head_frame({"delta": delta})
    else:
        chart(fh.layer_bars(delta, title=f"{what}, each layer disabled", ylabel="Δ"), "w_sweep_layers")
        sdf = pd.DataFrame({"layer": np.arange(1, L + 1), "delta": delta})
    csv_button(sdf, f"sweep_{kind}.csv", "w_sweep_csv")


def set_disable_section(v: View) -> None:
    """Kovaleva's single-head sweep over the shipped set (drawn inside the *Disable heads* tab)."""
    from bertgeom.sets.ablation import stratified, summarise_sweeps, sweep_over_set
    from bertgeom.sets.inputs import shipped_set

    loaded, layer, head = v.loaded, v.layer, v.head
    classifier = bool(loaded.labels)
    st.caption("**What this shows:** how much the model needs each head, measured over many inputs instead of "
               "one: every head is disabled alone (uniform attention) on every input"
               + (", and the accuracy and mean probability of the true class are compared with the intact model."
                  if classifier else ", and the final [CLS] vector's movement (1 − cosine) is averaged."))
    items = shipped_set(loaded.spec.input_kind)
    if classifier:
        per_class = st.slider(f"{v.kind.words.plural.capitalize()} per class (of the shipped set)", 1, 5, 1,
                              key="w_abl_set_n")
        chosen = stratified(items, per_class)
    else:
        k = st.slider(v.kind.words.plural.capitalize(), 2, len(items), min(8, len(items)), key="w_abl_set_n")
        chosen = tuple(items[:k])
    secs = v.kind.sweep_seconds * len(chosen)
    req = (v.model_id, tuple(it.name for it in chosen))
    from bertgeom.sets.prepared import is_on_disk
    from bertgeom.sets.views import HEAD_SWEEP
    from bertgeom.ui.prepared_cache import pending

    keys = [HEAD_SWEEP.key_of(loaded, it) for it in chosen]
    prepared_now = all(is_on_disk(k) for k in keys)
    being_prepared = not prepared_now and all(is_on_disk(k) or pending(k) for k in keys)
    if being_prepared and st.session_state.get("abl_set_req") != req:
        from bertgeom.ui.prepared_cache import wait_for

        for k, it in zip(keys, chosen):
            wait_for(k, f"Disabling every head on {it.name}", model_id=v.model_id)
        prepared_now = all(is_on_disk(k) for k in keys)
    if not prepared_now and st.session_state.get("abl_set_req") != req:
        st.caption(f"{len(chosen)} inputs × {v.L * v.H} heads; about {secs / 60:.1f} min the first time on 2 cores "
                   "(each input's sweep is then cached on disk, so a larger set reuses it).")
        st.button("Run over the set", key="w_abl_set_run", type="primary",
                  on_click=lambda: st.session_state.update(abl_set_req=req))
        return
    with progress("Disabling every head on every input…", usually_prepared=being_prepared) as update:
        arrays = sweep_over_set(loaded, chosen, update, sweep=HEAD_SWEEP.get,
                                around=lambda: heavy("disabling every head on one input"))
    errors_expander(zip(map(str, arrays["err_names"]), map(str, arrays["err_msgs"])))
    s = summarise_sweeps(arrays, loaded.labels)
    if classifier:
        c1, c2 = st.columns(2)
        c1.metric("Accuracy, all heads", f"{s['base_accuracy']:.1%}")
        c2.metric("Mean true-class probability, all heads", f"{s['base_true_prob']:.3f}")
        what = st.radio("Show", ["change of mean true-class probability", "change of accuracy"], horizontal=True,
                        key="w_abl_set_what")
        grid = s["d_true_prob"] if what.startswith("change of mean") else s["d_accuracy"]
        st.markdown(f"**{what.capitalize()}** over {s['n']} {v.kind.words.plural} when each head alone is disabled; "
                    "click a head.")
        c1, c2 = st.columns([5, 4])
        with c1:
            chart(fh.diverging_grid(grid, colour_label="Δ", selected=(layer, head)), "w_abl_set_grid",
                  selects_head=True)
        df = per_head_frame({"accuracy": s["accuracy"], "d_accuracy": s["d_accuracy"], "true_prob": s["true_prob"],
                             "d_true_prob": s["d_true_prob"], "d_cls": s["d_cls"]})
        with c2:
            st.markdown("Heads whose loss hurts most")
            st.dataframe(df.sort_values("d_true_prob")[["layer", "head", "d_true_prob", "d_accuracy"]].head(8).round(4)
                         .rename(columns={"d_true_prob": "Δ true-class probability", "d_accuracy": "Δ accuracy"}),
                         hide_index=True, width="stretch")
    else:
        st.markdown(f"**Mean 1 − cosine of the final [CLS]** over {s['n']} sentences; click a head.")
        df = per_head_frame({"d_cls": s["d_cls"]})
        c1, c2 = st.columns([5, 4])
        with c1:
            chart(head_grid(s["d_cls"], colour_label="1 − cos", selected=(layer, head), colorscale="Reds",
                            zrange=(0.0, max(float(np.nanmax(s["d_cls"])), 1e-9))), "w_abl_set_grid",
                  selects_head=True)
        with c2:
            st.markdown("Heads whose loss moves [CLS] most")
            st.dataframe(df.sort_values("d_cls", ascending=False).head(8).round(4)
                         .rename(columns={"d_cls": "1 − cos of the final [CLS]"}), hide_index=True, width="stretch")
    csv_button(df, "head_disabling_over_set.csv", "w_abl_set_csv")
