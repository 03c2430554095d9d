"""Attention Heads tab *Compare two inputs*: which heads react to a change of input, and where
(paired tokens, total-variation distance per head; :mod:`bertgeom.analysis.compare`)."""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertgeom.analysis.compare import PairedChange
from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, probability_bars
from bertgeom.figures.heads import difference_map, token_bars
from bertgeom.inputs import INPUT_KINDS
from bertgeom.probabilities import class_probabilities
from bertgeom.tables import counted, head_label, per_head_frame, word_for
from bertgeom.subject import Subject
from bertgeom.ui.cache import BY_SUBJECT, trace_of
from bertgeom.ui.heads.view import View
from bertgeom.ui.names import class_name
from bertgeom.ui.widgets import chart, csv_button, waited


#: Word pairs that make the default second input of a sentence a one-word edit.
_SWAPS = {"cat": "dog", "dog": "cat", "he": "she", "she": "he", "his": "her", "her": "his", "big": "small",
          "small": "big", "good": "bad", "bad": "good", "tired": "hungry", "man": "woman", "woman": "man"}


def _default_edit(text: str) -> str:
    words = text.split(" ")
    for i, w in enumerate(words):
        core = w.strip(".,;:!?").lower()
        if core in _SWAPS:
            new = _SWAPS[core] if w[:1].islower() else _SWAPS[core].capitalize()
            words[i] = w.replace(w.strip(".,;:!?"), new)
            return " ".join(words)
    return text


@st.cache_data(max_entries=16, show_spinner=False, hash_funcs=BY_SUBJECT)  # the wait is drawn by waited()
def cached_pair(subject: Subject, text_b: str) -> PairedChange:
    """Tokens of the subject's input paired with those of ``text_b``, and each head's map change."""
    from bertgeom.analysis.compare import paired_change

    ta, tb = subject.trace, trace_of(subject.loaded, text_b)
    # genomes: amino-acid ranges on the reference; text: word pieces
    return paired_change(ta.encoded.axis_labels or ta.tokens, tb.encoded.axis_labels or tb.tokens,
                         ta.attentions, tb.attentions)


def compare_inputs_tab(v: View) -> None:
    from bertgeom.analysis.compare import paired_maps, row_change

    layer, head, model_id = v.layer, v.head, v.model_id
    st.caption("**What this shows:** which heads react to a change of input, and where. Input A is the current "
               "input; pick or type B. Tokens are paired (genomes by position on the reference, text by aligning the "
               "word pieces; inserted tokens stay unpaired). Per head, the change is the mean total-variation distance "
               "between paired attention rows: 0 = identical, 1 = no shared mass.")
    kind = v.kind
    if kind.demo_set is not None:
        demos = kind.demo_set()
        label_of = {it.name: it.label or "" for it in demos}
        pred = v.trace.predicted
        names = [it.name for it in demos]
        if st.session_state.get("w_cmpin_b") not in names:
            st.session_state["w_cmpin_b"] = next((it.name for it in demos if it.label != pred), names[0])
        pick = st.selectbox(f"Input B (a shipped {kind.words.noun}, one per class)", names, key="w_cmpin_b",
                            format_func=lambda n: f"{kind.class_name(label_of[n])} — {n}")
        text_b = next(it.text for it in demos if it.name == pick)
    else:
        if "w_cmpin_text" not in st.session_state:
            st.session_state["w_cmpin_text"] = _default_edit(v.text)
        text_b = st.text_input("Input B (edit a word and see which heads change)", key="w_cmpin_text", max_chars=2000)
        if not text_b.strip():
            st.info("Type a second input.")
            return
    tb, res = waited(lambda: (trace_of(v.loaded, text_b), cached_pair(v.subject, text_b)),
                     text="Comparing the two inputs head by head…", key="compare-inputs",
                     estimate_key=f"compare-inputs:{model_id}")
    ia, ib, tv = res.ia, res.ib, res.tv
    if ia.size == 0:
        st.warning("The two inputs share no token, so their maps cannot be paired.")
        return
    if v.loaded.labels:
        chart(probability_bars(v.loaded.labels, {"A (current)": class_probabilities(v.loaded, v.trace.logits),
                                                         "B": class_probabilities(v.loaded, tb.logits)},
                                                         display=INPUT_KINDS.all_class_names(),
                               title=f"Predicted: A {class_name(v.trace.predicted)}, B {class_name(tb.predicted)}"),
              "w_cmpin_probs")
    n_a, n_b = v.trace.encoded.n_tokens, tb.encoded.n_tokens
    st.markdown(f"{ia.size} paired tokens (A has {n_a}, B has {n_b}). **Change of each head's map**; "
                "click a head to select it.")
    c1, c2 = st.columns([5, 4])
    with c1:
        chart(head_grid(tv, colour_label="TV distance", selected=(layer, head), colorscale="Reds",
                        zrange=(0.0, max(float(np.nanmax(tv)), 1e-9))), "w_cmpin_grid", selects_head=True)
    with c2:
        chart(fh.layer_bars(np.nanmean(tv, axis=1), title="Layer mean of the change", ylabel="TV distance"),
              "w_cmpin_layers")
    a, b = paired_maps(v.trace.attentions[layer, head], tb.attentions[layer, head], ia, ib)
    base_a = v.trace.encoded.axis_labels or v.trace.tokens
    base_b = tb.encoded.axis_labels or tb.tokens
    tok_a, tok_b = np.asarray(v.trace.tokens, dtype=object), np.asarray(tb.tokens, dtype=object)

    def pair_label(i: int, j: int) -> str:  # a changed token is marked: text old→new, genomes * (the k-mer differs)
        if tok_a[i] == tok_b[j]:
            return f"{i}:{base_a[i]}"
        return f"{i}:{base_a[i]}*" if kind.words.changed_token_note else f"{i}:{base_a[i]}→{base_b[j]}"

    labels = [pair_label(i, j) for i, j in zip(ia, ib)]
    st.markdown(f"#### {head_label(layer, head)} on the paired tokens (change {tv[layer, head]:.3f})")
    n_changed = sum(tok_a[i] != tok_b[j] for i, j in zip(ia, ib))
    st.caption(f"{counted(n_changed, 'paired token')} {word_for(n_changed, 'differs', 'differ')} between A and B"
               + (f" (marked * on the axes: {kind.words.changed_token_note})." if kind.words.changed_token_note
                  else " (marked old→new on the axes)."))
    rows = row_change(v.trace.attentions[layer, head], tb.attentions[layer, head], ia, ib)
    chart(token_bars({"change of the row (TV distance)": rows}, labels, ylabel="TV distance",
                     title="Which query tokens read differently", numbered=False), "w_cmpin_rows")
    zmax = fh.contrast_max(a, b)  # one scale for both, the largest few cells saturated
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**A (current input)**")
        chart(fh.attention_map(a, labels, zmax=zmax, max_ticks=fh.SIDE_BY_SIDE_TICKS), "w_cmpin_a")
    with c2:
        st.markdown("**B**")
        chart(fh.attention_map(b, labels, zmax=zmax, max_ticks=fh.SIDE_BY_SIDE_TICKS), "w_cmpin_b_map")
    st.markdown("**A − B** (red: more in A, blue: more in B)")
    chart(difference_map(a - b, labels, max_ticks=60), "w_cmpin_diff")
    csv_button(per_head_frame({"tv_change": tv}), "compare_inputs_per_head.csv", "w_cmpin_csv")
