"""Attention Heads tab *Gradient importance*: |∂L/∂α| of every attention weight, per head and by key
kind (:mod:`bertgeom.analysis.gradients`).

References: Clark et al. 2019 (arXiv:1906.04341) §3.2.
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid
from bertgeom.tables import head_label, per_head_frame
from bertgeom.subject import Subject
from bertgeom.ui.cache import BY_SUBJECT
from bertgeom.ui.heads.view import View
from bertgeom.ui.names import class_name
from bertgeom.ui.widgets import chart, csv_button
from bertgeom.ui.workqueue import heavy


@st.cache_data(max_entries=8, show_spinner="Differentiating the loss with respect to every attention weight…",
               hash_funcs=BY_SUBJECT)
def cached_gradients(subject: Subject, target: int | None) -> dict:
    from bertgeom.analysis.gradients import attention_gradients, gradient_by_key_kind

    enc, loaded = subject.trace.encoded, subject.loaded
    with heavy("differentiating the loss"):
        res = dict(vars(attention_gradients(loaded, enc.input_ids, target)))
    res["kinds"] = gradient_by_key_kind(res["grad"], res["attn"], enc.is_cls, enc.is_sep)
    return res


def gradient_tab(v: View) -> None:
    layer, head = v.layer, v.head
    st.caption("**What this shows:** whether the loss depends on where a head looks. For every attention weight α, "
               "|∂L/∂α| is how much the loss would change if that weight moved (Clark et al. 2019 §3.2). Heads that "
               "put much attention on [SEP] or [CLS] while the gradient there is tiny are parking attention: a no-op.")
    if not v.loaded.labels:
        from bertgeom.models import REGISTRY

        # name no other model: say whether this server has one with a classifier
        others = any(spec.is_classifier for spec in REGISTRY.values())
        st.info("This model has no classification head, so there is no loss to differentiate. "
                + ("Pick a classifier in the sidebar's model list: its loss is the cross-entropy of its classes."
                   if others else "No installed model here has one."))
        return
    labels = list(v.loaded.labels)
    pred = int(np.argmax(v.trace.logits))
    target = st.selectbox("Loss L = −log p(class)", list(range(len(labels))), index=pred, key="w_grad_target",
                          format_func=lambda i: class_name(labels[i]) + (" (predicted)" if i == pred else ""))
    res = cached_gradients(v.subject, int(target))
    kinds = res["kinds"]
    names = [k[5:] for k in kinds if k.startswith("grad ")]
    kind = st.radio("Keys", names, horizontal=True, key="w_grad_kind", index=names.index("[SEP]") if "[SEP]" in names else 0)
    c1, c2 = st.columns([5, 4])
    with c1:
        st.markdown(f"**Mean |∂L/∂α| on {kind} keys** per head; click a head.")
        chart(head_grid(kinds[f"grad {kind}"], colour_label="|∂L/∂α|", selected=(layer, head), colorscale="Viridis"),
              "w_grad_grid", selects_head=True)
    with c2:
        att = np.nanmean(kinds[f"attn {kind}"], axis=1)
        grd = np.nanmean(kinds[f"grad {kind}"], axis=1)
        chart(fh.layer_lines({f"attention on {kind} (share)": att / max(att.max(), 1e-12),
                              f"|∂L/∂α| on {kind}": grd / max(grd.max(), 1e-12)},
                             title="Layer means, each scaled to its maximum", ylabel="relative"), "w_grad_layers")
    st.markdown(f"#### {head_label(layer, head)}: |∂L/∂α| of every weight (loss {res['loss']:.3g})")
    axis = v.trace.axis_labels
    st.caption("A confident prediction has a small loss and small gradients everywhere; pick another class to see "
               "what the model would need to change. In the last layer only the [CLS] row can matter (the classifier "
               "reads [CLS] alone).")
    chart(fh.attention_map(res["grad"][layer, head], axis, colour_label="|∂L/∂α|", colorscale="Viridis"),
          "w_grad_map")
    csv_button(per_head_frame(kinds), f"attention_gradients_{labels[int(target)]}.csv", "w_grad_csv")
