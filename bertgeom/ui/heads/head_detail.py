"""Attention Heads tab *Head detail*: the selected head's map with a threshold θ, its strongest links,
a line view of short inputs and every feature of the head; word pieces or words (Clark §4.1).

References: Clark et al. 2019 (arXiv:1906.04341) §4.1 (word-level maps).
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.tour_facts import map_columns, map_note
from bertgeom.analysis.heads import feature_doc
from bertgeom.figures import heads as fh
from bertgeom.figures.base import token_lines
from bertgeom.tables import arcs_frame, head_label
from bertgeom.ui.heads.view import View, hover_labels
from bertgeom.ui.names import arc_table
from bertgeom.ui.widgets import chart, csv_button


def word_view(trace, layer: int, head: int, loaded) -> tuple[np.ndarray, list[str], list[str], np.ndarray | None]:
    """The selected head's map, its axis labels and tokens: word pieces, or words when the toggle is on
    (Clark §4.1: attention to a word = sum over its pieces, from a word = mean over its pieces); and the
    word of every piece (``None`` on the token map)."""
    from bertgeom.analysis.words import word_groups, word_level
    from bertgeom.architectures import specials_of

    tok = loaded.tokenizer
    special_ids = set(getattr(tok, "all_special_ids", None) or [])
    group, words = word_groups(trace.tokens, specials=specials_of(tok, loaded.config),
                               is_special=[int(i) in special_ids for i in np.asarray(trace.encoded.input_ids)])
    split = len(words) < len(trace.tokens)
    on = st.toggle("Words instead of word pieces", key="w_words",
                   help="Clark et al. §4.1: attention to a word is the sum over its pieces, attention from a word "
                        "the mean over its pieces, so every row still sums to 1.")
    if not on:
        return trace.attentions[layer, head], trace.axis_labels, list(trace.tokens), None
    if not split:
        st.caption("No word of this input is split into pieces: the word map is the token map.")
    return (word_level(trace.attentions[layer, head], group), [f"{i}:{w}" for i, w in enumerate(words)], words,
            group)


def head_detail_tab(v: View) -> None:
    trace, model_id, text, layer, head, kind, table, domains = (v.trace, v.model_id, v.text, v.layer, v.head, v.kind,
                                                                v.table, v.domains)
    attention, axis, tokens, group = word_view(trace, layer, head, v.loaded) if kind.can("words") \
        else (trace.attentions[layer, head], trace.axis_labels, trace.tokens, None)
    st.markdown(f"#### {head_label(layer, head)} — who attends to whom")
    st.caption("Rows are queries (the token that looks), columns are keys (the token looked at); each row sums to 1."
               + (f" {kind.words.token_note}" if kind.words.token_note else ""))
    input_key = (model_id, text)
    if st.session_state.get("_theta_input") != input_key:  # a new input: a θ that does not blank its maps
        st.session_state["_theta_input"] = input_key
        if not st.session_state.pop("_theta_from_link", False):
            # the help's promise: a new input restarts θ (the slider's own value would otherwise win)
            st.session_state["_theta_kept"] = st.session_state["w_theta"] = fh.default_theta(trace.attentions)
    if "w_theta" not in st.session_state:  # Streamlit forgets an undrawn widget's value
        st.session_state["w_theta"] = st.session_state.get("_theta_kept", 0.3)
    theta = st.slider("Threshold θ (hide weights below)", 0.0, 1.0, step=0.01, key="w_theta",
                      help="Entries below θ are hidden; for each new input θ starts at 0.3, or lower when fewer "
                           "than 1% of its weights reach 0.3 (long inputs spread attention thin) or when a head's "
                           "largest weight is below it (so no head's map opens blank). The 2025 paper's heatmaps "
                           "hid entries below 0.01; θ = 0.3 is the threshold of its thresholded class sum "
                           "([docs/methods.md §5](/?view=methods&section=5)).")
    st.session_state["_theta_kept"] = theta
    if float(attention.max()) < theta:
        st.info(f"No weight of this head reaches θ = {theta:.2f} (its largest is {attention.max():.3f}): "
                "lower θ to see the map.")
    chart(fh.attention_map(attention, axis, hover_labels=hover_labels(axis, domains), theta=theta), "w_heatmap")
    if attention.shape[0] > 1:  # what the map shows of the behaviour the page labels this head with
        behaviour = str(v.labels["clark"].labels[layer, head]) if v.labels else "other"
        note = map_note(attention, behaviour, **map_columns(trace.encoded, group),
                        unit="token" if group is None else "word")
        st.caption(f"In this map {note}.")
    arcs = arcs_frame(attention, axis, theta=theta, domains=domains)
    with st.expander(f"Strongest links (weight ≥ {theta:.2f}): {len(arcs)}", expanded=False):
        if len(arcs):
            st.dataframe(arc_table(arcs), hide_index=True, width="stretch")
            csv_button(arcs, f"arcs_L{layer + 1}H{head + 1}.csv", "w_arcs_csv")
        else:
            st.write("No link reaches the threshold; lower θ to see weaker ones.")
    if len(tokens) <= 40:
        with st.expander("Line view (each line: a query token on the left reading a key on the right)"):
            chart(token_lines(attention, tokens, theta=max(theta, 0.05)), "w_lines")
    with st.expander("Every feature of this head"):
        rows = [{"feature": n, "value": round(float(table[n][layer, head]), 4), **feature_doc(n)._asdict()}
                for n in table.names + table.hist_labels]
        fdf = pd.DataFrame(rows)
        st.dataframe(fdf, hide_index=True, width="stretch")
        csv_button(fdf, f"features_L{layer + 1}H{head + 1}.csv", "w_head_feat_csv")
