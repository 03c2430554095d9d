"""Attention Heads: the head atlas (Clark, Kovaleva, Guan-style, Bonino gates).

Top: the grid of every head (colour = a feature or a pattern label) and the selected head's
labels with the feature values behind them.  Below, lazy tabs (only the open one runs): the
selected head's map and the table of all heads here; statistics over a set of inputs, head
similarity, head disabling and a checkpoint comparison in :mod:`bertgeom.ui.heads_tabs`.  The
selected head lives in ``session_state["layer"/"head"]`` (0-based) and every clickable chart sets it.
"""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, token_lines
from bertgeom.analysis.facts import behaviour_note, one_back_note
from bertgeom.analysis.heads import FEATURE_DOCS, feature_doc
from bertgeom.analysis.patterns import (
    DISPLAY_NAMES,
    TAXONOMY_NAMES,
    classify_heads,
    display_label,
    display_labels,
    label_hover,
    labels_frame,
    rule_marks,
)
from bertgeom.inputs import input_kind_of
from bertgeom.tables import arcs_frame, head_label, per_head_frame
from bertgeom.ui.cache import cached_head_features
from bertgeom.ui.heads_more_tabs import TABS as MORE_TABS, word_view
from bertgeom.ui.heads_views_tabs import TABS as VIEW_TABS
from bertgeom.ui.heads_tabs import TABS, View, hover_labels, show_clark_findings, threshold_sliders, thresholds
from bertgeom.ui.names import arc_table, column_config, column_title, no_content_sentence
from bertgeom.ui.sidebar import current_input_text, current_model_and_trace
from bertgeom.ui.widgets import chart, csv_button, doc_caption, head_picker, open_tabs

#: Features the label rules read, shown as the selected head's feature vector.
VECTOR = ["self", "prev", "next", "bwd", "fwd", "cls", "sep", "punct", "special", "verticality", "col_content",
          "delta_row", "max_weight", "entropy_norm", "k90_frac", "block_mass", "segment_mass", "template_residual"]
CAVEAT = (
    "**How to read the labels.** They come from deterministic rules on the features, not from the papers' "
    "own classifiers: Kovaleva et al. 2019 (arXiv:1908.08593) labelled maps with a CNN that was never "
    "released, and Bonino et al. 2025 (arXiv:2502.12033) name their gates without a rule a program can apply, "
    "so both rule sets here are *reconstructions* ([docs/methods.md §4](/?view=methods&section=4)) whose thresholds you can move. "
    "Clark et al. 2019 (arXiv:1906.04341) behaviour thresholds are those of their notebook, with the "
    "'broad' entropy cut as a share of ln n. Confidence is a soft margin to the thresholds (0.5 = on the edge)."
)

st.title("Attention Heads")
st.caption(
    "Each square is one head (row = layer, column = head, numbered from 1). Click a square, a point in any "
    "head map below, or use the boxes to select a head; colour the grid by any per-head statistic or label."
)

loaded, trace = current_model_and_trace()
model_id = st.session_state["model_id"]
kind = input_kind_of(loaded)
text = current_input_text(loaded)
if not trace.encoded.content_mask.any():  # e.g. only a zero-width space, a direction mark or NUL
    st.warning(no_content_sentence(text))
    st.stop()
table = cached_head_features(model_id, text)
L, H = trace.num_layers, trace.num_heads


# ------------------------------------------------------------------------------------------
# labels, grid and the selected head
# ------------------------------------------------------------------------------------------

th = thresholds()
labels = classify_heads(table, th)
grid_hover = label_hover(labels)

feature_names = [n for n in table.names if n in FEATURE_DOCS]
colour_options = feature_names + [f"label:{t}" for t in TAXONOMY_NAMES]


def _colour_name(opt: str) -> str:
    if opt.startswith("label:"):
        return f"Pattern label: {TAXONOMY_NAMES[opt[6:]]}"
    return FEATURE_DOCS[opt].label  # plain words on screen; the variable name is in the hover


left, right = st.columns([5, 4], gap="large")
with right:
    layer, head = head_picker(L, H)
with left:
    current = st.session_state.get("w_feature")
    if current not in colour_options:
        current = "prev" if "prev" in feature_names else feature_names[0]
    # set on every run: a selectbox that missed a run (the input box emptied) otherwise comes back
    # showing its first option while the grid, caption and URL keep the kept value (issue #36)
    st.session_state["w_feature"] = current
    colour = st.selectbox("Colour the grid by", colour_options, key="w_feature", format_func=_colour_name)
    if colour.startswith("label:"):
        lab = labels[colour[6:]]
        st.caption(f"**{TAXONOMY_NAMES[colour[6:]]}** per head; hover for all three labels. {lab.note}")
        grid = head_grid(lab.confidence, categories=display_labels(lab.primary), colour_label="confidence",
                         selected=(layer, head), hover_text=grid_hover)
    else:
        doc_caption(FEATURE_DOCS[colour])
        if colour in ("prev", "next", "cls", "sep"):  # Clark's behaviours: the clause the tour reads from here too
            note = behaviour_note(table, colour)
            st.caption(note[0].upper() + note[1:] + ("" if note.endswith(".") else "."))
        grid = head_grid(table[colour], colour_label=FEATURE_DOCS[colour].label, selected=(layer, head),
                         hover_text=grid_hover)
    chart(grid, "w_grid", selects_head=True)

with right:
    st.markdown(f"#### {head_label(layer, head)}")
    kov, gate, clark = labels["kovaleva"], labels["gates"], labels["clark"]
    st.markdown(
        f"Kovaleva: **{display_label(kov.labels[layer, head])}** ({kov.confidence[layer, head]:.2f})  \n"
        f"Bonino gate: **{display_label(gate.labels[layer, head])}** ({gate.confidence[layer, head]:.2f})  \n"
        f"Clark: **{display_label(clark.labels[layer, head])}** ({clark.confidence[layer, head]:.2f})"
    )
    ki = kov.inputs
    st.caption(
        f"Kovaleva's rule reads V = {ki['V'][layer, head]:.2f} (strongest column or sink mass), "
        f"Dg = {ki['Dg'][layer, head]:.2f} (self + prev + next), B = {ki['B'][layer, head]:.2f} (block mass); "
        f"gates read m_spec = {gate.inputs['m_spec'][layer, head]:.2f}. Confidence in brackets; "
        "the caveat is under *All heads*."
    )
    vec = [n for n in VECTOR if n in table]
    chart(fh.feature_bars(vec, [float(table[n][layer, head]) for n in vec],
                           labels=[FEATURE_DOCS[n].label for n in vec],
                           hover=[f"{n} = {FEATURE_DOCS[n].formula}<br>{FEATURE_DOCS[n].source}" for n in vec],
                           marks=rule_marks(th), title="Feature vector (red ticks: rule thresholds)"), "w_vector")
    with st.expander("Thresholds of the pattern rules"):
        threshold_sliders()

# ------------------------------------------------------------------------------------------
# tabs (lazy: only the open tab runs)
# ------------------------------------------------------------------------------------------

domains = trace.encoded.domains if kind.has_domains else None


# --- Head detail --------------------------------------------------------------------------
def head_detail_tab() -> None:
    attention, axis, tokens = word_view(trace, layer, head) if kind.can("words") \
        else (trace.attentions[layer, head], trace.axis_labels, trace.tokens)
    st.markdown(f"#### {head_label(layer, head)} — who attends to whom")
    st.caption("Rows are queries (the token that looks), columns are keys (the token looked at); each row sums to 1."
               + (f" {kind.token_note}" if kind.token_note else ""))
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
                           "than 1% of its weights reach 0.3 (long inputs spread attention thin). The 2025 paper's heatmaps hid entries below 0.01; θ = 0.3 is the threshold of its thresholded class sum ([docs/methods.md §5](/?view=methods&section=5)).")
    st.session_state["_theta_kept"] = theta
    if float(attention.max()) < theta:
        st.info(f"No weight of this head reaches θ = {theta:.2f} (its largest is {attention.max():.3f}): "
                "lower θ to see the map.")
    chart(fh.attention_map(attention, axis, hover_labels=hover_labels(axis, domains), theta=theta), "w_heatmap")
    if attention.shape[0] > 1:
        words_on = kind.can("words") and bool(st.session_state.get("w_words"))
        st.caption(f"In this map {one_back_note(attention, 'word' if words_on else 'token')}.")
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


# --- All heads ----------------------------------------------------------------------------
def all_heads_tab() -> None:
    st.info(CAVEAT)
    show_clark_findings(labels, table)
    c1, c2 = st.columns(2)
    with c1:
        chart(fh.label_counts(labels["kovaleva"].counts(), display=DISPLAY_NAMES, title="Kovaleva classes"), "w_counts_kov")
    with c2:
        chart(fh.label_counts(labels["gates"].counts(), display=DISPLAY_NAMES, title="Bonino gates"), "w_counts_gate")
    st.markdown("##### Every head: labels and features")
    df = labels_frame(labels, table, [n for n in table.names if n in FEATURE_DOCS])
    default_cols = ["layer", "head", "kovaleva", "kovaleva_conf", "gate", "gate_conf", "clark", "clark_conf",
                    "prev", "next", "self", "cls", "sep", "punct", "entropy", "entropy_norm", "max_weight",
                    "verticality", "k90_median", "mean_dist"]
    cols = st.multiselect("Columns", list(df.columns), default=[c for c in default_cols if c in df.columns],
                          key="w_table_cols", persist_state="session", format_func=column_title)
    st.caption("Click a column header to sort; hover it for the CSV column's name and formula. The CSV holds every "
               "column, including the distance histogram.")
    shown = cols or ["layer", "head"]
    st.dataframe(df[shown].round(4), hide_index=True, width="stretch", height=420,  # no 0.0000000000003
                 column_config=column_config(shown))
    full = df.join(per_head_frame({n: table[n] for n in table.hist_labels}).drop(columns=["layer", "head"]))
    csv_button(full, "head_features.csv", "w_table_csv", "Download the table (CSV)")
    with st.expander("Class scores behind each label"):
        tax = st.radio("Taxonomy", list(TAXONOMY_NAMES), format_func=TAXONOMY_NAMES.get, horizontal=True,
                       key="w_scores_tax")
        sdf = pd.DataFrame(labels[tax].to_rows()).round(4)  # no 0.0000000003 on screen
        st.dataframe(sdf, hide_index=True, width="stretch", height=300, column_config=column_config(sdf.columns))
        csv_button(sdf, f"labels_{tax}.csv", "w_scores_csv")


view = View(loaded, trace, model_id, text, layer, head, table=table, labels=labels, th=th)
_tab = {k: partial(f, view) for k, f in {**VIEW_TABS, **TABS, **MORE_TABS}.items()}
RENDER = {"Head detail": head_detail_tab, "Head view": _tab.pop("Head view"), "Model view": _tab.pop("Model view"),
          "All heads": all_heads_tab, **_tab}
for name, tab in open_tabs(list(RENDER), key="heads_tab"):
    with tab:
        RENDER[name]()
