"""Attention Heads tab *Compare checkpoints*: this model's heads against another checkpoint of the
same shape, on shared layer inputs and by their weight circuits (W_Q W_Kᵀ, W_O W_V).

References: Kovaleva et al. 2019 (arXiv:1908.08593) (maps before and after fine-tuning).
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid
from bertgeom.tables import counted, head_label, per_head_frame
from bertgeom.ui import heads_cache as hc
from bertgeom.ui.heads.view import View, hover_labels
from bertgeom.safety import plain
from bertgeom.ui.widgets import chart, csv_button


def no_partner_sentence(shape: tuple[int, int, int], n_others: int, custom: bool) -> str:
    """Why no checkpoint can be compared with this one, from what is installed here (``n_others``
    other checkpoints, none of this shape) and what the box beside accepts: it names no model but the
    one on screen and promises nothing this server does not have."""
    what = ("no other checkpoint is installed" if n_others == 0 else
            "the other installed checkpoint has another shape" if n_others == 1 else
            f"none of the {counted(n_others, 'other installed checkpoint')} has this model's shape")
    how = ("enter one (a hub id or a directory) in the box beside" if custom else
           "this server reads installed checkpoints only (BERTGEOM_ALLOW_CUSTOM_MODELS=1 lets it read one from a "
           "hub id or a directory)")
    return (f"Heads are compared one to one between checkpoints of the same shape, and {what} (this model: "
            f"{shape[0]} layers × {shape[1]} heads, hidden {shape[2]}). A fine-tuned model and the checkpoint it "
            f"started from share their shape: {how}.")


def compare_tab(v: View) -> None:
    model_id, text, trace, layer, head, domains = v.model_id, v.text, v.trace, v.layer, v.head, v.domains
    from bertgeom.models import REGISTRY, ModelLoadError, custom_models_allowed

    st.caption(
        "Kovaleva et al. compare a head's attention maps before and after fine-tuning on the same input, but English "
        "word pieces and genome 12-mers share no input, so here both checkpoints' layer l read the same *layer input* "
        "(this model's hidden states for the current input) and their maps are compared head by head. "
        "Alongside, the heads' weights are compared directly: the cosine of each head's query-key circuit W_Q W_Kᵀ and "
        "value-output circuit W_O W_V, which does not depend on any input and is meaningful for a fine-tuned model "
        "and the parent it shares its coordinates with (unrelated models score about 0)."
    )
    shape = v.loaded.shape
    candidates, skipped = [], []
    for mid in REGISTRY:
        if mid == model_id:
            continue
        try:
            (candidates if hc.model_shape(mid) == shape else skipped).append(mid)
        except ModelLoadError:
            skipped.append(mid)
    extra = st.session_state.get("w_cmp_custom", "").strip() if custom_models_allowed() else ""
    if extra and extra not in candidates and extra != model_id:
        try:
            if hc.model_shape(extra) == shape:
                candidates.append(extra)
            else:
                st.warning(f"'{plain(extra)}' has a different shape {hc.model_shape(extra)} from this model {shape}.")
        except ModelLoadError as exc:
            st.error(plain(exc))
    c1, c2 = st.columns(2)
    if custom_models_allowed():
        c2.text_input("…or another checkpoint (hub id or directory)", key="w_cmp_custom",
                      placeholder="/path/to/model", persist_state="session")
    if not candidates:
        st.info(no_partner_sentence(shape, len(skipped), custom_models_allowed()))
        return
    if st.session_state.get("w_cmp_partner") not in candidates:
        st.session_state["w_cmp_partner"] = candidates[0]
    partner = c1.selectbox("Compare with", candidates, key="w_cmp_partner",
                           format_func=lambda m: REGISTRY[m].display_name if m in REGISTRY else m)
    res = hc.cached_compare(v.subject, partner)
    metrics = {"maps": "attention maps on shared layer inputs", "qk": "query-key circuit W_Q W_Kᵀ",
               "ov": "value-output circuit W_O W_V"}
    metric = st.radio("Cosine of", list(metrics), format_func=metrics.get, horizontal=True, key="w_cmp_metric")
    c1, c2 = st.columns([5, 4])
    with c1:
        st.markdown(f"**Cosine per head** ({metrics[metric]}); click a head to select it.")
        chart(head_grid(res[metric], colour_label="cosine", selected=(layer, head), zrange=(0.0, 1.0),
                                 colorscale="Viridis"), "w_cmp_grid", selects_head=True)
    with c2:
        chart(fh.layer_lines({metrics[m]: np.nanmean(res[m], axis=1) for m in metrics}, title="Layer mean",
                              ylabel="cosine", yrange=(min(0.0, float(np.nanmin([np.nanmin(res[m]) for m in metrics]))),
                                                       1.02)), "w_cmp_layers")
    a, b = hc.cached_compare_layer(v.subject, partner, layer)
    st.markdown(f"#### {head_label(layer, head)} on the same layer input: this model vs "
                f"{REGISTRY[partner].display_name if partner in REGISTRY else partner}")
    axis = trace.axis_labels
    hov = hover_labels(axis, domains)
    zmax = fh.contrast_max(a[head], b[head])  # one scale for both, the largest few cells saturated
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**this model**")
        chart(fh.attention_map(a[head], axis, hover_labels=hov, zmax=zmax, max_ticks=fh.SIDE_BY_SIDE_TICKS), "w_cmp_a")
    with c2:
        st.markdown("**compared checkpoint**")
        chart(fh.attention_map(b[head], axis, hover_labels=hov, zmax=zmax, max_ticks=fh.SIDE_BY_SIDE_TICKS), "w_cmp_b")
    cdf = per_head_frame({f"cos_{m}": res[m] for m in metrics})
    csv_button(cdf, f"compare_{partner.replace('/', '_')}.csv", "w_cmp_csv")
