"""Attention Heads tab *Model view*: a thumbnail of every head's pattern, optionally sized by
importance (the effect of disabling the head, or a gradient importance); a click selects the head.

References: Vig 2019 (arXiv:1906.05714), Wang et al. 2021 Dodrio (arXiv:2103.14625),
Michel et al. 2019 (arXiv:1905.10650).
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertgeom.analysis.tour_facts import special_heads_note
from bertgeom.figures import headview as hv
from bertgeom.tables import head_label
from bertgeom.ui.heads.gradient_importance import cached_gradients
from bertgeom.ui.heads.view import View
from bertgeom.ui.widgets import chart, guarded


IMPORTANCE = {
    "none": "no importance",
    "disable": "effect of disabling the head (1 − cos of the final [CLS])",
    "gradient": "gradient importance (Σ α·|∂L/∂α|, mean over queries)",
}


def _importance(v: View, kind: str) -> np.ndarray | None:
    from bertgeom.analysis.ablation import cls_cosine

    if kind == "disable":
        from bertgeom.ui.heads_cache import cached_sweep

        sweep = cached_sweep(v.subject, "heads")
        return 1.0 - cls_cosine(sweep.cls, sweep.base_cls[None, None])
    if kind == "gradient":
        res = cached_gradients(v.subject, int(np.argmax(v.trace.logits))).gradients
        return (res.attn * res.grad).sum(-1).mean(-1)
    return None


def model_view_tab(v: View) -> None:
    st.caption("**What this shows:** bertviz's model view — a thumbnail of every head's attention map "
               "(rows = layers, columns = heads; each scaled to its own strongest weight, long inputs pooled into "
               "blocks). Vertical stripes are heads that read one token, a diagonal reads a neighbour. "
               "**Click a thumbnail to select that head.** As in Dodrio, thumbnails can be sized and outlined by "
               "how much the head matters.")
    kinds = ["none", "disable"] + (["gradient"] if v.loaded.labels else [])
    kind = st.radio("Size by", kinds, format_func=IMPORTANCE.get, horizontal=True, key="w_mv_importance",
                    bind="query-params",
                    help="Disabling: Kovaleva et al.'s uniform-attention ablation of one head at a time, measured as "
                         "how far the final [CLS] vector turns. Gradient: Michel et al. 2019's head importance, "
                         "approximated as α·|∂L/∂α| summed over keys (needs a classifier).")
    imp = None
    with guarded("The importance"):
        imp = _importance(v, kind)
    fig = hv.model_view(v.trace.attentions, importance=imp, importance_label=IMPORTANCE[kind].split(" (")[0],
                        selected=(v.layer, v.head))
    chart(fig, "w_model_view", selects_head=True)
    table_ = getattr(v, "table", None)
    if table_ is not None and "cls" in table_ and "sep" in table_:
        note = special_heads_note(table_)[0]
        st.caption(f"On this input {note}.")
    if imp is not None:
        top = np.dstack(np.unravel_index(np.argsort(-imp, axis=None)[:3], imp.shape))[0]
        st.caption("Most important here: " + ", ".join(f"{head_label(l, h)} ({imp[l, h]:.3g})" for l, h in top)
                   + ". Small thumbnails matter least on this input.")
