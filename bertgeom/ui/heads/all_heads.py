"""Attention Heads tab *All heads*: how to read the labels, Clark's findings, the label counts and
the table of every head's labels and features, with the class scores behind each label.

References: Kovaleva et al. 2019 (arXiv:1908.08593), Bonino et al. 2025 (arXiv:2502.12033),
Clark et al. 2019 (arXiv:1906.04341).
"""

from __future__ import annotations


import pandas as pd
import streamlit as st

from bertgeom.analysis.heads import FEATURE_DOCS
from bertgeom.analysis.patterns import DISPLAY_NAMES, TAXONOMY_NAMES, labels_frame
from bertgeom.figures import heads as fh
from bertgeom.tables import per_head_frame
from bertgeom.ui.heads.pattern_labels import show_clark_findings
from bertgeom.ui.heads.view import View
from bertgeom.ui.names import column_config, column_title
from bertgeom.ui.widgets import chart, csv_button


CAVEAT = (
    "**How to read the labels.** They come from deterministic rules on the features, not from the papers' "
    "own classifiers: Kovaleva et al. 2019 (arXiv:1908.08593) labelled maps with a CNN that was never "
    "released, and Bonino et al. 2025 (arXiv:2502.12033) name their gates without a rule a program can apply, "
    "so both rule sets here are *reconstructions* ([docs/methods.md §4](/?view=methods&section=4)) whose thresholds "
    "you can move. Clark et al. 2019 (arXiv:1906.04341) behaviour thresholds are those of their notebook, with the "
    "'broad' entropy cut as a share of ln n. Confidence is a soft margin to the thresholds (0.5 = on the edge)."
)


def all_heads_tab(v: View) -> None:
    labels, table = v.labels, v.table
    st.info(CAVEAT)
    show_clark_findings(labels, table)
    c1, c2 = st.columns(2)
    with c1:
        chart(fh.label_counts(labels["kovaleva"].counts(), display=DISPLAY_NAMES, title="Kovaleva classes"),
              "w_counts_kov")
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
