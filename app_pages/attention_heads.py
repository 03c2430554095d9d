"""Attention Heads: the head atlas (Clark, Kovaleva, Guan-style, Bonino gates).

Top: the grid of every head (colour = a feature or a pattern label) and the selected head's
labels with the feature values behind them.  Below, lazy tabs (only the open one runs), one module
each under :mod:`bertgeom.ui.heads`, drawn in the order of its registry (``TABS``).  The
selected head lives in ``session_state["layer"/"head"]`` (0-based) and every clickable chart sets it.
"""

from __future__ import annotations

import streamlit as st

from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid
from bertgeom.analysis.tour_facts import behaviour_note
from bertgeom.analysis.heads import FEATURE_DOCS
from bertgeom.analysis.patterns import (TAXONOMY_NAMES, classify_heads, display_label, display_labels, label_hover,
                                       rule_marks)
from bertgeom.inputs import input_kind_of
from bertgeom.tables import head_label
from bertgeom.ui.cache import cached_head_features
from bertgeom.ui.heads import TABS
from bertgeom.ui.heads.gradient_importance import (IMPORTANCE_OPTION, IMPORTANCE_SET_OPTION, input_importance,
                                                  objective_sentence, set_task_sentence, shipped_set_importance)
from bertgeom.ui.tabs import offered_tabs
from bertgeom.ui.heads.pattern_labels import threshold_sliders, thresholds
from bertgeom.ui.heads.view import View
from bertgeom.ui.names import no_content_sentence
from bertgeom.ui.sidebar import current_subject
from bertgeom.ui.widgets import chart, doc_caption, head_picker, open_tabs

#: Features the label rules read, shown as the selected head's feature vector.
VECTOR = ["self", "prev", "next", "bwd", "fwd", "cls", "sep", "punct", "special", "verticality", "col_content",
          "delta_row", "max_weight", "entropy_norm", "k90_frac", "block_mass", "segment_mass", "template_residual"]

st.title("Attention Heads")
st.caption(
    "Each square is one head (row = layer, column = head, numbered from 1). Click a square, a point in any "
    "head map below, or use the boxes to select a head; colour the grid by any per-head statistic or label."
)

subject = current_subject()  # the model and the input, resolved once for every tab
loaded, trace, text = subject.loaded, subject.trace, subject.text
kind = input_kind_of(loaded)
if not trace.encoded.content_mask.any():  # e.g. only a zero-width space, a direction mark or NUL
    st.warning(no_content_sentence(text))
    st.stop()
table = cached_head_features(subject)
L, H = trace.num_layers, trace.num_heads


# ------------------------------------------------------------------------------------------
# labels, grid and the selected head
# ------------------------------------------------------------------------------------------

th = thresholds()
labels = classify_heads(table, th)
grid_hover = label_hover(labels)

feature_names = [n for n in table.names if n in FEATURE_DOCS]
colour_options = feature_names + [IMPORTANCE_OPTION, IMPORTANCE_SET_OPTION] + [f"label:{t}" for t in TAXONOMY_NAMES]


def _colour_name(opt: str) -> str:
    if opt == IMPORTANCE_OPTION:
        return "head importance |∂L/∂ξ| (Michel 2019)"
    if opt == IMPORTANCE_SET_OPTION:
        return "head importance over the shipped set, the set's task (Michel 2019)"
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
    elif colour == IMPORTANCE_OPTION:  # a backward pass: computed only when picked
        from bertgeom.analysis.gradients import IMPORTANCE_DOCS
        from bertgeom.architectures import adapter_of

        imp = input_importance(subject)
        doc_caption(IMPORTANCE_DOCS["importance"])
        st.caption(objective_sentence(imp.objective, imp.loss, getattr(loaded.config, "vocab_size", None),
                                      adapter_of(loaded).masked_lm)
                   + " Over a set: the *Gradient importance* tab.")
        grid = head_grid(imp.importance, colour_label="|∂L/∂ξ|", selected=(layer, head), hover_text=grid_hover)
    elif colour == IMPORTANCE_SET_OPTION:  # the set view: prepared ahead for the bundled models, else a button
        from bertgeom.analysis.gradients import IMPORTANCE_DOCS

        doc_caption(IMPORTANCE_DOCS["importance"])
        data = shipped_set_importance(subject, place="grid")
        grid = None
        if data is not None and len(data.importance) == 0:
            st.warning("No input of the shipped set could be analysed.")
        elif data is not None:
            n = len(data.importance)
            st.caption(f"Mean over the {n} {kind.words.plural if n != 1 else kind.words.noun} of the shipped "
                       f"set. {set_task_sentence(data)} Per layer normalised: the *Gradient importance* tab.")
            grid = head_grid(data.importance.astype(float).mean(axis=0), colour_label="mean |∂L/∂ξ|",
                             selected=(layer, head), hover_text=grid_hover)
    else:
        doc_caption(FEATURE_DOCS[colour])
        if colour in ("prev", "next", "cls", "sep"):  # Clark's behaviours: the clause the tour reads from here too
            note = behaviour_note(table, colour)
            st.caption(note[0].upper() + note[1:] + ("" if note.endswith(".") else "."))
        grid = head_grid(table[colour], colour_label=FEATURE_DOCS[colour].label, selected=(layer, head),
                         hover_text=grid_hover)
    if grid is not None:  # None: the set's importance waits for its Compute button, drawn above
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

view = View(subject, layer, head, table=table, labels=labels, th=th)
offered = offered_tabs(TABS, view)
render = {t.title: t.render for t in offered}
for name, tab in open_tabs(list(render), key="heads_tab"):
    with tab:
        render[name](view)
