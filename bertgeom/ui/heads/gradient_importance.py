"""Attention Heads tab *Gradient importance*: |∂L/∂α| of every attention weight, per head and by key
kind, and Michel et al.'s head importance |∂L/∂ξ_h| of a gate on each head, for this input and over the
shipped set with the set's task (:mod:`bertgeom.analysis.gradients`, :mod:`bertgeom.sets.collapse`).
The head importance of the current input and its mean over the shipped set (the set's task) are also
two of the head grid's colours (:data:`IMPORTANCE_OPTION`, :func:`input_importance`;
:data:`IMPORTANCE_SET_OPTION`, :func:`shipped_set_importance`).

References: Clark et al. 2019 (arXiv:1906.04341) §3.2; Michel et al. 2019 (arXiv:1905.10650) §4.1-4.2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from bertgeom.analysis.gradients import InputGradients
from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid
from bertgeom.tables import head_label, per_head_frame
from bertgeom.subject import Subject
from bertgeom.ui.cache import BY_SUBJECT
from bertgeom.sets.views import ImportanceArrays
from bertgeom.ui.heads.view import View
from bertgeom.ui.view_runner import run_view
from bertgeom.ui.names import class_name
from bertgeom.ui.widgets import chart, csv_button, doc_caption, guarded
from bertgeom.ui.workqueue import heavy


@st.cache_data(max_entries=8, show_spinner="Differentiating the loss with respect to every attention weight…",
               hash_funcs=BY_SUBJECT)
def cached_gradients(subject: Subject, target: int | None) -> InputGradients:
    """:func:`bertgeom.analysis.gradients.input_gradients` of the current input for class ``target``."""
    from bertgeom.analysis.gradients import input_gradients

    enc, loaded = subject.trace.encoded, subject.loaded  # before the slot (see bertgeom.ui.workqueue)
    with heavy("differentiating the loss"):
        return input_gradients(loaded, enc, target)


@dataclass(frozen=True)
class InputImportance:
    """Michel et al.'s head importance of the current input and what it took: ``importance [L, H]``,
    the ``loss``, the ``objective`` (:class:`bertgeom.analysis.gradients.HeadImportance`) and the
    ``seconds`` it took, the estimate quoted before a run over the set."""

    importance: np.ndarray
    loss: float
    objective: str
    seconds: float


#: The head grid's colour option for the current input's head importance.
IMPORTANCE_OPTION = "importance:michel"
#: The head grid's colour option for the mean head importance over the shipped set, with the set's task.
IMPORTANCE_SET_OPTION = "importance:michel-set"


def objective_sentence(objective: str, loss: float, vocab: int | None, checkpoint_has_mlm: bool = False) -> str:
    """What loss the importance differentiates, in one sentence for the page, true for the model:
    ``checkpoint_has_mlm`` when its checkpoint ships a masked-word head that is not loaded here
    (:attr:`bertgeom.architectures.Adapter.masked_lm`; AntiBERTy), so the page does not say it has none."""
    if objective == "cross-entropy":
        return f"L = the classifier's cross-entropy (loss {loss:.3g})."
    chance = f"; ln V = {np.log(vocab):.2f} is a uniform guess" if vocab else ""
    if "model's head" in objective:
        how = "the model's own masked-LM head"
    elif checkpoint_has_mlm:
        how = ("the tied word embeddings (logits = h Eᵀ): this checkpoint's masked-LM head is not loaded here, so "
               "this stands in for it")
    else:
        how = "the tied word embeddings (logits = h Eᵀ): this model ships no masked-LM head, so this stands in for one"
    return (f"L = a masked-word loss: 15 % of the content tokens replaced by [MASK] and predicted through {how} "
            f"(loss {loss:.3g}{chance}).")


@st.cache_data(max_entries=16, show_spinner="Differentiating the loss with respect to a gate on every head…",
               hash_funcs=BY_SUBJECT)
def input_importance(subject: Subject) -> InputImportance:
    """Michel et al.'s |∂L/∂ξ| of the current input ``[L, H]`` with its objective, loss and time."""
    from bertgeom.analysis.gradients import head_importance

    import time

    enc = subject.trace.encoded  # before the slot (see bertgeom.ui.workqueue)
    loaded = subject.loaded
    with heavy("differentiating the loss"):
        start = time.monotonic()
        res = head_importance(loaded, enc.input_ids, content_mask=enc.content_mask)
    return InputImportance(res.importance, float(res.loss[0]), res.objective, time.monotonic() - start)


def _vocab(v: View) -> int | None:
    return getattr(getattr(v.loaded.model, "config", None), "vocab_size", None)


def _ships_mlm(v: View) -> bool:
    from bertgeom.architectures import adapter_of

    return adapter_of(v.loaded).masked_lm


def _set_importance(loaded, model_id: str, items, seconds_per_input: float | None,
                    place: str = "") -> ImportanceArrays | None:
    from bertgeom.sets.views import HEAD_IMPORTANCE_SET
    from bertgeom.ui.set_gate import set_view_starts

    key = HEAD_IMPORTANCE_SET.key_of(loaded, items)
    if not set_view_starts(key, HEAD_IMPORTANCE_SET.memo, n_inputs=len(items), seconds_per_input=seconds_per_input,
                           what="one forward and one backward pass per input", model_id=model_id, place=place):
        return None
    return run_view(HEAD_IMPORTANCE_SET, loaded, items)


def shipped_set_importance(subject: Subject, seconds_per_input: float | None = None, *,
                           place: str = "") -> ImportanceArrays | None:
    """The shipped set's head importance with the set's task (:data:`~bertgeom.sets.views.HEAD_IMPORTANCE_SET`,
    prepared ahead for the bundled models), or None while its *Compute* button (drawn here, with the
    estimate) waits. Without ``seconds_per_input`` the estimate is this input's own time, measured only
    when the set is neither in memory, on disk nor being prepared. ``place``: where the button stands
    (two offers of one run need two names)."""
    from bertgeom.sets import prepared
    from bertgeom.sets.inputs import shipped_set
    from bertgeom.sets.views import HEAD_IMPORTANCE_SET
    from bertgeom.ui.prepared_cache import pending

    loaded = subject.loaded
    items = tuple(shipped_set(loaded.spec.input_kind))
    key = HEAD_IMPORTANCE_SET.key_of(loaded, items)
    ready = key in HEAD_IMPORTANCE_SET.memo or prepared.is_on_disk(key) or pending(key, model_id=subject.model_id)
    if seconds_per_input is None and not ready:
        seconds_per_input = input_importance(subject).seconds
    return _set_importance(loaded, subject.model_id, items, seconds_per_input, place)


def set_task_sentence(data: ImportanceArrays) -> str:
    """The loss the set's importance differentiates, in one sentence (``data``: the set view's result)."""
    from bertgeom.analysis.gradients import MASK_SHARE

    used = np.asarray(data.used_label, dtype=bool)
    if str(data.objective) == "cross-entropy":
        return (f"The set's task: the cross-entropy of each input's own class "
                f"({int(used.sum())} of {len(used)} labelled).")
    how = str(data.objective).removeprefix("masked-word").strip(" ()") or "masked words"
    return (f"The set's task: a masked-word loss ({how}), {MASK_SHARE:.0%} of each input's content tokens "
            "replaced by [MASK].")


def _head_importance_part(v: View) -> None:
    from bertgeom.analysis.gradients import IMPORTANCE_DOCS, normalise_per_layer

    st.markdown("#### Head importance (Michel et al. 2019)")
    st.caption("**What this shows:** how much the loss depends on each head as a whole. A gate ξ_h multiplies the "
               "head's output (1 = as trained); I_h = |∂L/∂ξ_h| is the first-order change of the loss if the head "
               "were turned down, the score Michel et al. prune by (40 % of bert-base's heads on MNLI without a "
               "noticeable loss). Unlike the attention maps and |∂L/∂α| above, it weighs what the head *writes*, "
               "not where it looks. The gates are the forward engine's own (never transformers' head_mask).")
    normed = st.checkbox("Normalise per layer (ℓ2, as Michel et al.)", key="w_imp_norm")
    doc_caption(IMPORTANCE_DOCS["importance_norm" if normed else "importance"])
    c1, c2 = st.columns(2)
    columns, seconds = {}, None
    with c1, guarded("The head importance of this input"):
        one = input_importance(v.subject)
        imp = normalise_per_layer(one.importance) if normed else one.importance
        st.markdown("**This input**; click a head.")
        st.caption(objective_sentence(one.objective, one.loss, _vocab(v), _ships_mlm(v)))
        chart(head_grid(imp, colour_label="I_h", selected=(v.layer, v.head), colorscale="Viridis"), "w_imp_grid",
              selects_head=True)
        columns["importance_input"] = one.importance
        seconds = one.seconds
    with c2, guarded("The head importance over the set"):
        columns.update(_set_column(v, seconds, normed))
    if columns:
        csv_button(per_head_frame(columns), "head_importance.csv", "w_imp_csv")


def _set_column(v: View, seconds: float | None, normed: bool) -> dict:
    """The right-hand column: the mean importance over the shipped set (once computed or asked for)."""
    from bertgeom.analysis.gradients import normalise_per_layer
    from bertgeom.sets.inputs import shipped_set

    items = shipped_set(v.loaded.spec.input_kind)
    st.markdown(f"**Over the shipped set** ({len(items)} {v.kind.words.plural}), mean over inputs")
    data = shipped_set_importance(v.subject, seconds)
    if data is None:
        return {}
    if len(data.importance) == 0:
        st.warning("No input of the set could be analysed.")
        return {}
    mean = np.asarray(data.importance, dtype=float).mean(axis=0)
    shown = normalise_per_layer(mean) if normed else mean
    st.caption(set_task_sentence(data))
    chart(head_grid(shown, colour_label="mean I_h", selected=(v.layer, v.head), colorscale="Viridis"),
          "w_imp_set_grid", selects_head=True)
    return {"importance_set": mean, "importance_set_per_layer_l2": normalise_per_layer(mean)}


def gradient_tab(v: View) -> None:
    _attention_gradient_part(v)
    _head_importance_part(v)


def _attention_gradient_part(v: View) -> None:
    layer, head = v.layer, v.head
    st.caption("**What this shows:** whether the loss depends on where a head looks. For every attention weight α, "
               "|∂L/∂α| is how much the loss would change if that weight moved (Clark et al. 2019 §3.2). Heads that "
               "put much attention on [SEP] or [CLS] while the gradient there is tiny are parking attention: a no-op.")
    if not v.loaded.labels:
        from bertgeom.models import REGISTRY

        # name no other model: say whether this server has one with a classifier
        others = any(spec.is_classifier for spec in REGISTRY.values())
        from bertgeom.analysis.gradients import no_loss_sentence
        from bertgeom.architectures import adapter_of

        st.info(no_loss_sentence(adapter_of(v.loaded)) + " "
                + ("Pick a classifier in the sidebar's model list: its loss is the cross-entropy of its classes."
                   if others else "No installed model here has one.")
                + " The head importance below uses a masked-word loss instead.")
        return
    labels = list(v.loaded.labels)
    pred = int(np.argmax(v.trace.logits))
    target = st.selectbox("Loss L = −log p(class)", list(range(len(labels))), index=pred, key="w_grad_target",
                          format_func=lambda i: class_name(labels[i]) + (" (predicted)" if i == pred else ""))
    res = cached_gradients(v.subject, int(target))
    kinds = res.kinds
    names = [k[5:] for k in kinds if k.startswith("grad ")]
    kind = st.radio("Keys", names, horizontal=True, key="w_grad_kind",
                    index=names.index("[SEP]") if "[SEP]" in names else 0)
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
    st.markdown(f"#### {head_label(layer, head)}: |∂L/∂α| of every weight (loss {res.gradients.loss:.3g})")
    axis = v.trace.axis_labels
    st.caption("A confident prediction has a small loss and small gradients everywhere; pick another class to see "
               "what the model would need to change. In the last layer only the [CLS] row can matter (the classifier "
               "reads [CLS] alone).")
    chart(fh.attention_map(res.gradients.grad[layer, head], axis, colour_label="|∂L/∂α|", colorscale="Viridis"),
          "w_grad_map")
    csv_button(per_head_frame(kinds), f"attention_gradients_{labels[int(target)]}.csv", "w_grad_csv")
