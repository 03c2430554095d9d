"""Attention Heads tab *Attention flow*: attention flow beside attention rollout into one output token,
layer by layer (computed in :mod:`bertgeom.analysis.flow`).

References: Abnar & Zuidema 2020 (arXiv:2005.00928).
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.flow import FLOW_MAX_TOKENS, FLOW_RESIDUAL, FLOW_WINDOW
from bertgeom.figures.base import matrix_heatmap
from bertgeom.figures.heads import token_bars
from bertgeom.sets.views import FLOW, FlowArrays
from bertgeom.subject import Subject
from bertgeom.ui.view_runner import run_view
from bertgeom.ui.heads.view import View
from bertgeom.ui.widgets import chart, csv_button


def cached_flow(subject: Subject, n: int, residual: float, target: int, normalize: bool = True) -> FlowArrays:
    """:func:`bertgeom.analysis.flow.flow_view` of the input (the ``flow`` view), read from disk where
    ``prepare-sets`` wrote it (the examples at the page's defaults), else computed in a heavy-work
    slot from the input's trace."""
    return run_view(FLOW, subject.loaded, subject.text, n, residual, target, normalize,
                    given=lambda: {"trace": subject.trace})


def flow_tab(v: View) -> None:
    trace, layer = v.trace, v.layer
    st.caption("**What this shows:** how much of one output token's state (by default [CLS], which a classifier "
               "reads) can be traced back to each input token, through all the layers below. Rollout multiplies "
               "the layers' attention (paths multiply); flow treats attention weights as pipe capacities and "
               "takes the maximum flow (a path carries at most its narrowest pipe). Both average the heads and "
               "add the residual connection (Abnar & Zuidema 2020).")
    T = trace.encoded.n_tokens
    c1, c2, c3 = st.columns(3)
    residual = c1.slider("Attention's weight against the residual (r)", 0.0, 1.0, FLOW_RESIDUAL, 0.05, key="w_flow_r",
                         bind="query-params",
                         help="Each layer's graph is r · mean-head attention + (1 − r) · identity, rows summing to 1; "
                              "0.5 as in Abnar & Zuidema (attention plus identity, renormalised).")
    if T > FLOW_MAX_TOKENS:
        n = c2.slider("Tokens in the window", 8, FLOW_MAX_TOKENS, FLOW_WINDOW, 4, key="w_flow_n", bind="query-params",
                      help="Max-flow runs once per token and layer, so long inputs use their first tokens.")
        st.info(f"This input has {T} tokens: flow and rollout are computed on its first {n} tokens, as the 2025 "
                "paper's notebook does for its genomes (their first 12 tokens). Each token's attention inside the "
                "window is renormalised to 1 first, so r stays the attention's weight against the residual.")
    else:
        n = T
    tokens = [str(t) for t in (trace.encoded.axis_labels or trace.tokens)[:n]]
    target = c3.selectbox("Output token", list(range(n)), format_func=lambda i: f"{i}: {tokens[i]}", key="w_flow_t",
                          bind="query-params")
    normalize = st.toggle("Normalise each layer's flow to sum 1 (as Abnar & Zuidema's released code)", value=True,
                          key="w_flow_norm", help="Off: the raw max-flow values. Each input token's flow is its own "
                          "max-flow problem, so raw values of a deep layer add up to several and dominate one colour "
                          "scale.")
    res = cached_flow(v.subject, n, float(residual), int(target), bool(normalize))
    st.markdown(f"**After layer {layer + 1}** (pick the layer with the head boxes above): flow and rollout into "
                f"token {target} ({tokens[target]}).")
    chart(token_bars({"flow (max-flow)": res.flow[layer], "rollout (product)": res.rollout[layer]}, tokens,
                     ylabel="into the output token"), "w_flow_bars")
    st.caption("Rollout values of one layer add up to 1 over the input tokens; so do the flow values here, each "
               "layer's max-flows divided by their sum (the released code's normalisation; see "
               "[docs/methods.md](/?view=methods))."
               if normalize else
               "Rollout values of one layer add up to 1 over the input tokens; raw flow values do not (each token's "
               "flow is its own max-flow problem, bounded by 1), so compare their shapes, not their sums.")
    c1, c2 = st.columns(2)
    rows = [f"L{i + 1}" for i in range(v.L)]
    with c1:
        chart(matrix_heatmap(res.flow, rows, [f"{i}:{t}" for i, t in enumerate(tokens)], title="Flow, every layer",
                             colour_label="flow", y_title="after layer"), "w_flow_map")
    with c2:
        chart(matrix_heatmap(res.rollout, rows, [f"{i}:{t}" for i, t in enumerate(tokens)],
                             title="Rollout, every layer", colour_label="rollout", y_title="after layer"), "w_roll_map")
    df = pd.DataFrame({"layer": np.repeat(np.arange(1, v.L + 1), n), "token_position": np.tile(np.arange(n), v.L),
                       "token": tokens * v.L, "flow": res.flow.ravel(), "rollout": res.rollout.ravel()})
    csv_button(df, f"attention_flow_to_{target}.csv", "w_flow_csv")
