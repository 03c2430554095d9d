"""Attention Heads: every head at a glance, and the selected head's attention map."""

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom import figures
from bertgeom.heads import FEATURE_DOCS
from bertgeom.ui.cache import cached_head_features
from bertgeom.ui.sidebar import current_model_and_trace
from bertgeom.ui.state import select_head

st.title("Attention Heads")
st.caption(
    "Each square is one head (row = layer, column = head, numbered from 1). Click a square or "
    "use the boxes to open a head; colour the grid by any per-head statistic."
)

loaded, trace = current_model_and_trace()
model_id = st.session_state["model_id"]
text = st.session_state["genome_value" if loaded.spec.input_kind == "spike" else "text_value"]
table = cached_head_features(model_id, text.strip())
L, H = trace.num_layers, trace.num_heads


def _on_grid_select() -> None:
    picked = figures.picked_head(st.session_state.get("w_grid"))
    if picked is not None:
        select_head(*picked)


def _on_widget_select() -> None:
    select_head(st.session_state["w_layer"] - 1, st.session_state["w_head"] - 1)


names = [n for n in table.names if n in FEATURE_DOCS]
default_feature = "prev" if "prev" in names else names[0]
left, right = st.columns([5, 4], gap="large")
with left:
    if st.session_state.get("w_feature") not in names:
        st.session_state["w_feature"] = default_feature
    feature = st.selectbox(
        "Colour the grid by",
        names,
        key="w_feature",
        format_func=lambda n: f"{FEATURE_DOCS[n][0]} ({n})",
    )
    label, formula, source = FEATURE_DOCS[feature]
    st.caption(f"**{label}** = `{formula}` — {source}")
    layer, head = st.session_state["layer"], st.session_state["head"]
    grid = figures.head_grid(table[feature], colour_label=feature, selected=(layer, head))
    st.plotly_chart(grid, key="w_grid", on_select=_on_grid_select, selection_mode="points",
                    config=figures.PLOTLY_CONFIG)

with right:
    st.session_state["w_layer"], st.session_state["w_head"] = layer + 1, head + 1
    c1, c2 = st.columns(2)
    c1.number_input("Layer", min_value=1, max_value=L, step=1, key="w_layer", on_change=_on_widget_select)
    c2.number_input("Head", min_value=1, max_value=H, step=1, key="w_head", on_change=_on_widget_select)
    theta = st.slider("Threshold θ (hide weights below)", 0.0, 1.0, 0.3, 0.01, key="w_theta",
                      help="The 2025 paper masks attention below θ = 0.3 in its maps.")
    st.markdown(f"#### {figures.head_label(layer, head)}")
    values = {n: float(table[n][layer, head]) for n in ("prev", "next", "self", "cls", "sep", "entropy_norm", "max_weight") if n in table}
    st.dataframe(
        pd.DataFrame({"statistic": [FEATURE_DOCS[n][0] for n in values], "value": list(values.values())}),
        hide_index=True, width="stretch",
    )

attention = trace.attentions[layer, head]
labels = trace.axis_labels
st.markdown(f"#### {figures.head_label(layer, head)} — who attends to whom")
st.caption("Rows are queries (the token that looks), columns are keys (the token looked at); each row sums to 1.")
if float(attention.max()) < theta:
    st.info(f"No weight of this head reaches θ = {theta:.2f} (its largest is {attention.max():.3f}): lower θ to see the map.")
st.plotly_chart(
    figures.attention_heatmap(attention, labels, theta=theta),
    key="w_heatmap", config=figures.PLOTLY_CONFIG,
)
arcs = figures.top_arcs(attention, labels, theta=theta)
with st.expander(f"Strongest links (weight ≥ {theta:.2f}): {len(arcs)}", expanded=False):
    if arcs:
        st.dataframe(pd.DataFrame(arcs), hide_index=True, width="stretch")
    else:
        st.write("No link reaches the threshold; lower θ to see weaker ones.")
if len(trace.tokens) <= 40:
    with st.expander("Line view (each line: a query token on the left reading a key on the right)"):
        st.plotly_chart(figures.token_lines(attention, trace.tokens, theta=max(theta, 0.05)), key="w_lines",
                        config=figures.PLOTLY_CONFIG)
