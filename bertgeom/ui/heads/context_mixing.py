"""Attention Heads tab *Context mixing*: how much each token takes from the others once the value
vectors, the residual and LayerNorm are counted, beside the raw attention weights: norm-based
attention per head, the mixing ratio per layer and per head, whole-block contributions and ALTI, and
ALTI's rollout beside attention rollout (computed in :mod:`bertgeom.analysis.context_mixing`); over
the model's shipped set, the mixing ratios and, behind its own toggle (costly), ALTI's reductions
(:mod:`bertgeom.sets.context_mixing`).

References: Kobayashi et al. 2020 (arXiv:2004.10102); Kobayashi et al. 2021 (arXiv:2109.07152);
Ferrando et al. 2022 (arXiv:2203.04212); Abnar & Zuidema 2020 (arXiv:2005.00928) for rollout.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.context_mixing import MIXING_DOCS, MIXING_VARIANTS, SCOPES
from bertgeom.figures import context_mixing as fcm
from bertgeom.sets.views import (ALTI_SET, CONTEXT_MIXING, CONTEXT_MIXING_SET, AltiSetArrays, MixingArrays,
                                 MixingSetArrays)
from bertgeom.tables import head_label
from bertgeom.ui.heads.view import View, hover_labels
from bertgeom.ui.view_runner import run_view
from bertgeom.ui.widgets import chart, csv_button, doc_caption


#: Inputs up to this many tokens get their two maps side by side; longer ones one above the other.
SIDE_BY_SIDE_TOKENS = 48

#: The token-to-token maps the layer view offers: label -> (array in the view, scope index or None).
LAYER_MAPS = {
    "attention norms ‖Σ_h α f_h(x_j)‖": ("block_norms", SCOPES.index("attn")),
    "attention + residual": ("block_norms", SCOPES.index("attn+res")),
    "whole block ‖T_i(x_j)‖ (attention + residual + LayerNorm)": ("block_norms", SCOPES.index("attn+res+ln")),
    "ALTI (rows sum to 1)": ("alti", None),
}


def mixing_view(v: View) -> MixingArrays:
    """The input's :func:`~bertgeom.analysis.context_mixing.context_mixing_view`: from memory, from disk,
    else computed in a heavy-work slot behind a progress bar with the time left."""
    # the trace is resolved by the page, before the slot (see bertgeom.ui.workqueue)
    return run_view(CONTEXT_MIXING, v.loaded, v.text, given=lambda: {"trace": v.trace})


def mixing_over_shipped_set(loaded) -> MixingSetArrays:
    """:func:`bertgeom.sets.context_mixing.mixing_over_set` of the model's shipped set: from memory,
    from disk (``prepare-sets`` writes it), else computed behind a progress bar with the time left."""
    from bertgeom.sets.inputs import shipped_set

    return run_view(CONTEXT_MIXING_SET, loaded, shipped_set(loaded.spec.input_kind))


def alti_over_shipped_set(loaded) -> AltiSetArrays:
    """:func:`bertgeom.sets.context_mixing.alti_over_set` of the model's shipped set: from memory, from
    disk (``prepare-sets`` writes it), else computed one input at a time behind a progress bar with the
    time left."""
    from bertgeom.sets.inputs import shipped_set

    return run_view(ALTI_SET, loaded, shipped_set(loaded.spec.input_kind))


def _set_section(v: View) -> None:
    st.markdown("#### Over the shipped set")
    if st.toggle("Show the mixing ratios over the shipped set of inputs", key="w_mix_set",
                 help="One forward pass per input and the two cheap measures (no ALTI); prepared ahead by "
                      "prepare-sets for the bundled models."):
        _mixing_set(v)
    _alti_set_section(v)


def _mixing_set(v: View) -> None:
    res = mixing_over_shipped_set(v.loaded)
    n = int(res.tokens.size)
    if n == 0:
        st.info("No input of the shipped set could be read by this model.")
        return
    c1, c2 = st.columns([3, 2])
    with c1:
        chart(fcm.mixing_ratio_lines(res.mixing.transpose(0, 2, 1), MIXING_VARIANTS,
                                     title=f"Mean over {n} inputs (each its tokens' mean)"), "w_mix_set_lines")
    with c2:
        chart(fcm.head_mixing_grid(res.head_mixing.transpose(1, 2, 0), selected=(v.layer, v.head),
                                   title="Each head's mixing ratio over the set"), "w_mix_set_heads", selects_head=True)
    if int(res.errors[0]):
        st.caption(f"{int(res.errors[0])} inputs of the set could not be read and are left out.")


#: Measured seconds of ALTI over each bundled model's shipped set (``bench/bench_context_mixing.py --sets``,
#: docs/benchmarks.md), what the toggle quotes before anything runs; the progress bar then estimates the
#: time left from the pace itself.
ALTI_SET_COST = ("measured on a quiet 2-core AMD EPYC (Zen 4): about 1 s for MiniLM's 24 sentences, about 1.5 "
                 "minutes for the genome model's 35 spike genomes of 427 tokens, 5x the mixing ratios")


def _alti_set_section(v: View) -> None:
    from bertgeom.sets.inputs import shipped_set

    items = shipped_set(v.loaded.spec.input_kind)
    ready = ALTI_SET.ready(v.loaded, items)
    if not st.toggle("Show ALTI over the shipped set of inputs", key="w_alti_set",
                     help=("Prepared ahead on this server: opens at once." if ready else
                           "ALTI is costly: it builds every (token, token) vector of every layer, one input at a "
                           f"time ({ALTI_SET_COST}); a progress bar shows the time left and can cancel. Prepared "
                           "ahead by prepare-sets for the bundled models.")):
        st.caption("ALTI over the set: " + ("prepared, opens at once." if ready else
                                            f"not prepared on this server; costly ({len(items)} inputs, "
                                            f"{ALTI_SET_COST})."))
        return
    res = alti_over_shipped_set(v.loaded)
    n = int(res.tokens.size)
    if n == 0:
        st.info("No input of the shipped set could be read by this model.")
        return
    mixing = mixing_over_shipped_set(v.loaded)
    c1, c2, c3 = st.columns(3)
    with c1:
        chart(fcm.alti_mixing_share_lines(res.alti_self, mixing.mixing, MIXING_VARIANTS,
                                          title=f"ALTI (± sd) beside the mixing ratios, {n} inputs"),
              "w_alti_set_share")
        doc_caption(MIXING_DOCS["alti_mixing_share"])
    with c2:
        chart(fcm.rank_agreement_lines(res.rank_agreement, res.rank_agreement_first,
                                       first_token=str(v.trace.tokens[0]),
                                       title="Does ALTI rank the sources as attention does?"), "w_alti_set_rank")
        doc_caption(MIXING_DOCS["alti_rank_agreement"])
    with c3:
        chart(fcm.rollout_self_lines(res.rollout_self, res.attention_rollout_self,
                                     title="What a token keeps of itself, over layers"), "w_alti_set_self")
        doc_caption(MIXING_DOCS["rollout_self"])
    last = res.rank_agreement[:, -1].astype(float)
    st.caption(f"Each input counts once (its tokens' mean), then mean ± sd over the {n} inputs. After the last "
               f"layer ALTI rollout and attention rollout rank each token's sources with ρ = "
               f"{np.nanmean(last):.2f} on average (1: the same order). Reconstructed: ALTI divides by LayerNorm's "
               "own scale and gives the biases to no token (as above); the rank agreement is this tool's "
               "comparison, not the paper's: Spearman over the input tokens of each output token's row, then "
               "the mean over the rows, special tokens included; attention rollout adds the "
               "identity with r = 0.5, as the bars above.")
    if int(res.errors[0]):
        st.caption(f"{int(res.errors[0])} inputs of the set could not be read and are left out.")
    L = res.alti_self.shape[1]
    names = [str(x) for x in res.names]
    df = pd.DataFrame({"input": np.repeat(names, L), "tokens": np.repeat(res.tokens, L),
                       "layer": np.tile(np.arange(1, L + 1), n),
                       "alti_self_contribution": res.alti_self.ravel(),
                       "alti_mixing_share": 1.0 - res.alti_self.ravel(),
                       "alti_rollout_self": res.rollout_self.ravel(),
                       "attention_rollout_self": res.attention_rollout_self.ravel(),
                       "rank_agreement_mean_over_rows": res.rank_agreement.ravel(),
                       "rank_agreement_first_row": res.rank_agreement_first.ravel()})
    csv_button(df, "alti_over_set.csv", "w_alti_set_csv")


def _row_normalised(m: np.ndarray) -> np.ndarray:
    s = m.sum(axis=-1, keepdims=True)
    return np.divide(m, s, out=np.zeros_like(m), where=s > 0)


def context_mixing_tab(v: View) -> None:
    trace, layer, head = v.trace, v.layer, v.head
    st.caption("**What this shows:** an attention weight says where a head looks, not how much it moves. What "
               "token j adds to token i is α·f(x_j), a vector whose size depends on j's value vector, and the "
               "residual and LayerNorm then keep much of token i itself. Norm-based attention (Kobayashi et al. "
               "2020) weighs each α by ‖f(x_j)‖; the mixing ratio (Kobayashi et al. 2021) is the share of a "
               "token's block output that comes from the other tokens; ALTI (Ferrando et al. 2022) measures each "
               "token's contribution to the whole block's output by distance and follows it through the layers.")
    st.caption("Reconstructed from the trace and the weights: the biases (b_O, LayerNorm's β) are attributed to "
               "no token; the feed-forward block is not decomposed (it mixes no tokens). ALTI divides by "
               "LayerNorm's own scale, where the authors' released code uses the unbiased std of the state plus "
               "ε ([docs/methods.md](/?view=methods), \"Context mixing\").")
    res = mixing_view(v)
    tokens = [str(t) for t in (trace.encoded.axis_labels or trace.tokens)]
    axis = trace.axis_labels
    hover = hover_labels(axis, v.domains)
    T = len(tokens)

    st.markdown("#### Mixing ratio per layer")
    c1, c2 = st.columns([3, 2])
    with c1:
        chart(fcm.mixing_ratio_lines(res.mixing, MIXING_VARIANTS,
                                     title="Mean over tokens: share taken from the other tokens"), "w_mix_lines")
    with c2:
        means = {var: float(100 * res.mixing[k].mean()) for k, var in enumerate(MIXING_VARIANTS)}
        st.dataframe(pd.DataFrame({"variant": list(means), "mean over layers and tokens (%)":
                                   [round(x, 2) for x in means.values()]}), hide_index=True)
        st.caption("W: read from the attention weights; N: from the vector norms. For bert-base-uncased on "
                   "Wikipedia the authors report 96.41 % (Attn-W) against 18.75 % (AttnResLn-N).")
    with st.expander("Formulas"):
        for name in MIXING_VARIANTS:
            doc_caption(MIXING_DOCS[name])

    st.markdown(f"#### After layer {layer + 1}: who contributes to whom")
    which = st.radio("Measure beside raw attention", list(LAYER_MAPS), index=2, horizontal=True, key="w_mix_map")
    name, scope = LAYER_MAPS[which]
    measure = getattr(res, name)[scope, layer] if scope is not None else getattr(res, name)[layer]
    normalise = st.toggle("Scale each row to sum 1 (compare shapes with attention)", value=name != "alti",
                          key="w_mix_rows", disabled=name == "alti")
    shown = _row_normalised(measure) if normalise and name != "alti" else measure
    raw = np.asarray(trace.attentions[layer], dtype=np.float64).mean(axis=0)
    # side by side while the token labels fit half the width; one above the other for long inputs
    c1, c2 = st.columns(2) if T <= SIDE_BY_SIDE_TOKENS else (st.container(), st.container())
    with c1:
        chart(fcm.contribution_map(raw, axis, hover_labels=hover, colour_label="weight",
                                   title=f"Raw attention, mean of the heads (L{layer + 1})"), "w_mix_raw")
    with c2:
        chart(fcm.contribution_map(shown, axis, hover_labels=hover, title=f"{which} (L{layer + 1})",
                                   colour_label="share" if normalise or name == "alti" else "norm",
                                   colorscale="Oranges"), "w_mix_measure")
    doc_caption(MIXING_DOCS["alti" if name == "alti" else "block_norm"])

    st.markdown(f"#### {head_label(layer, head)}: weight against norm")
    c1, c2 = st.columns([2, 3]) if T <= SIDE_BY_SIDE_TOKENS else (st.container(), st.container())
    with c1:
        st.markdown("**Mixing ratio of each head** (norms, mean over tokens); click a head.")
        chart(fcm.head_mixing_grid(res.head_mixing, selected=(layer, head)), "w_mix_heads", selects_head=True)
        doc_caption(MIXING_DOCS["head_mixing"])
    with c2:
        alpha = np.asarray(trace.attentions[layer, head], dtype=np.float64)
        normed = alpha * res.value_norms[layer, head][None, :]
        chart(fcm.contribution_map(normed, axis, hover_labels=hover, colour_label="‖α f(x_j)‖",
                                   title=f"Norm-based attention of {head_label(layer, head)}", colorscale="Oranges"),
              "w_mix_head_norm")
        doc_caption(MIXING_DOCS["norm_attention"])
        norms = res.value_norms[layer, head]
        low = int(np.argmin(norms))
        st.caption(f"‖f(x_j)‖ of this head runs from {norms.min():.3g} (token {low}: {tokens[low]}) to "
                   f"{norms.max():.3g}: a key with a small ‖f(x_j)‖ takes weight without moving much (compare "
                   "the raw map in *Head detail*).")

    st.markdown("#### Over the layers: into one output token")
    target = st.selectbox("Output token", list(range(T)), format_func=lambda i: f"{i}: {tokens[i]}",
                          key="w_mix_target")
    from bertgeom.analysis.flow import FLOW_RESIDUAL, rollout_row

    attention_rollout = rollout_row(np.asarray(trace.attentions), int(target), FLOW_RESIDUAL)
    chart(fcm.rollout_bars({"ALTI rollout": res.alti_rollout[layer, int(target)],
                            "attention rollout (r = 0.5)": attention_rollout[layer]}, tokens,
                           title=f"What token {target} holds after layer {layer + 1}, by input token"), "w_mix_roll")
    doc_caption(MIXING_DOCS["alti_rollout"])

    L = v.L
    df = pd.DataFrame({"layer": np.repeat(np.arange(1, L + 1), T), "token_position": np.tile(np.arange(T), L),
                       "token": tokens * L,
                       **{f"mixing_{var}": res.mixing[k].ravel() for k, var in enumerate(MIXING_VARIANTS)},
                       f"alti_rollout_into_{target}": res.alti_rollout[:, int(target)].ravel()})
    csv_button(df, "context_mixing.csv", "w_mix_csv")
    _set_section(v)
