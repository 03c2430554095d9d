"""Further analyses on the Attention Heads page: attention flow beside rollout, two inputs compared,
head disabling over a set, and the top-head domain test.  Widgets in, figures out; the
computations live in :mod:`bertgeom.analysis.flow`, :mod:`bertgeom.analysis.compare`,
:mod:`bertgeom.sets.ablation` and :mod:`bertgeom.analysis.domain_ztest`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.flow import FLOW_MAX_TOKENS, FLOW_RESIDUAL, FLOW_WINDOW
from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, matrix_heatmap, probability_bars
from bertgeom.figures.further import difference_map, significance_grid, token_bars
from bertgeom.tables import head_label, per_head_frame
from bertgeom.inputs import INPUT_KINDS
from bertgeom.ui.cache import cached_model, get_trace
from bertgeom.ui.names import class_name
from bertgeom.ui.state import PageView
from bertgeom.ui.widgets import chart, csv_button, errors_expander, progress
from bertgeom.ui.workqueue import heavy
from bertgeom.probabilities import class_probabilities

#: Seconds one input's single-head sweep takes on this 2-core machine (shown as an estimate).
#: Word pairs that make the default second input of a sentence a one-word edit.
_SWAPS = {"cat": "dog", "dog": "cat", "he": "she", "she": "he", "his": "her", "her": "his", "big": "small",
          "small": "big", "good": "bad", "bad": "good", "tired": "hungry", "man": "woman", "woman": "man"}


# --- Word-level maps ------------------------------------------------------------------------------


def word_view(trace, layer: int, head: int) -> tuple[np.ndarray, list[str], list[str]]:
    """The selected head's map, its axis labels and tokens: word pieces, or words when the toggle is on
    (Clark §4.1: attention to a word = sum over its pieces, from a word = mean over its pieces)."""
    from bertgeom.analysis.words import word_groups, word_level

    group, words = word_groups(trace.tokens)
    split = len(words) < len(trace.tokens)
    on = st.toggle("Words instead of word pieces", key="w_words",
                   help="Clark et al. §4.1: attention to a word is the sum over its pieces, attention from a word "
                        "the mean over its pieces, so every row still sums to 1.")
    if not on:
        return trace.attentions[layer, head], trace.axis_labels, list(trace.tokens)
    if not split:
        st.caption("No word of this input is split into pieces: the word map is the token map.")
    return word_level(trace.attentions[layer, head], group), [f"{i}:{w}" for i, w in enumerate(words)], words


# --- Attention flow -------------------------------------------------------------------------------


@st.cache_data(max_entries=16, show_spinner="Solving one max-flow problem per token and layer…")
def cached_flow(model_id: str, text: str, n: int, residual: float, target: int, normalize: bool = True) -> dict:
    """:func:`bertgeom.analysis.flow.flow_view` of the input, read from disk where ``prepare-sets``
    wrote it (the examples at the page's defaults), else computed in a heavy-work slot."""
    from bertgeom.analysis.flow import flow_view
    from bertgeom.sets.inputs import disk_cached_arrays
    from bertgeom.sets.prepared import flow_key

    def compute() -> dict:  # only on a miss: a prepared result needs no trace
        full = get_trace(model_id, text).attentions  # before the slot (see bertgeom.ui.workqueue)
        with heavy("solving the max-flow problems"):
            return flow_view(full, n, residual, target, normalize)

    return disk_cached_arrays(flow_key(cached_model(model_id), text, n, residual, target, normalize), compute)


def flow_tab(v: PageView) -> None:
    trace, layer = v.trace, v.layer
    st.caption("**What this shows:** how much of one output token's state (by default [CLS], which a classifier "
               "reads) can be traced back to each input token, through all the layers below. Rollout multiplies "
               "the layers' attention (paths multiply); flow treats attention weights as pipe capacities and "
               "takes the maximum flow (a path carries at most its narrowest pipe). Both average the heads and "
               "add the residual connection (Abnar & Zuidema 2020).")
    T = trace.encoded.n_tokens
    c1, c2, c3 = st.columns(3)
    residual = c1.slider("Attention's weight against the residual (r)", 0.0, 1.0, FLOW_RESIDUAL, 0.05, key="w_flow_r", bind="query-params",
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
    res = cached_flow(v.model_id, v.text, n, float(residual), int(target), bool(normalize))
    st.markdown(f"**After layer {layer + 1}** (pick the layer with the head boxes above): flow and rollout into "
                f"token {target} ({tokens[target]}).")
    chart(token_bars({"flow (max-flow)": res["flow"][layer], "rollout (product)": res["rollout"][layer]}, tokens,
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
        chart(matrix_heatmap(res["flow"], rows, [f"{i}:{t}" for i, t in enumerate(tokens)], title="Flow, every layer",
                             colour_label="flow", y_title="after layer"), "w_flow_map")
    with c2:
        chart(matrix_heatmap(res["rollout"], rows, [f"{i}:{t}" for i, t in enumerate(tokens)],
                             title="Rollout, every layer", colour_label="rollout", y_title="after layer"), "w_roll_map")
    df = pd.DataFrame({"layer": np.repeat(np.arange(1, v.L + 1), n), "token_position": np.tile(np.arange(n), v.L),
                       "token": tokens * v.L, "flow": res["flow"].ravel(), "rollout": res["rollout"].ravel()})
    csv_button(df, f"attention_flow_to_{target}.csv", "w_flow_csv")


# --- Compare two inputs ---------------------------------------------------------------------------


def _default_edit(text: str) -> str:
    words = text.split(" ")
    for i, w in enumerate(words):
        core = w.strip(".,;:!?").lower()
        if core in _SWAPS:
            new = _SWAPS[core] if w[:1].islower() else _SWAPS[core].capitalize()
            words[i] = w.replace(w.strip(".,;:!?"), new)
            return " ".join(words)
    return text


@st.cache_data(max_entries=16, show_spinner="Comparing the two inputs head by head…")
def cached_pair(model_id: str, text_a: str, text_b: str) -> dict:
    from bertgeom.analysis.compare import map_change, pair_tokens

    ta, tb = get_trace(model_id, text_a), get_trace(model_id, text_b)
    key_a = ta.encoded.axis_labels or ta.tokens  # genomes: amino-acid ranges on the reference; text: word pieces
    key_b = tb.encoded.axis_labels or tb.tokens
    ia, ib = pair_tokens([str(x) for x in key_a], [str(x) for x in key_b])
    return {"ia": ia, "ib": ib, "tv": map_change(ta.attentions, tb.attentions, ia, ib)}


def compare_inputs_tab(v: PageView) -> None:
    from bertgeom.analysis.compare import paired_maps, row_change

    layer, head, model_id = v.layer, v.head, v.model_id
    st.caption("**What this shows:** which heads react to a change of input, and where. Input A is the current "
               "input; pick or type B. Tokens are paired (genomes by position on the reference, text by aligning the word "
               "pieces; inserted tokens stay unpaired). Per head, the change is the mean total-variation distance "
               "between paired attention rows: 0 = identical, 1 = no shared mass.")
    kind = v.kind
    if kind.demo_set is not None:
        demos = kind.demo_set()
        label_of = {it.name: it.label or "" for it in demos}
        pred = v.trace.predicted
        names = [it.name for it in demos]
        if st.session_state.get("w_cmpin_b") not in names:
            st.session_state["w_cmpin_b"] = next((it.name for it in demos if it.label != pred), names[0])
        pick = st.selectbox(f"Input B (a shipped {kind.noun}, one per class)", names, key="w_cmpin_b",
                            format_func=lambda n: f"{kind.class_name(label_of[n])} — {n}")
        text_b = next(it.text for it in demos if it.name == pick)
    else:
        if "w_cmpin_text" not in st.session_state:
            st.session_state["w_cmpin_text"] = _default_edit(v.text)
        text_b = st.text_input("Input B (edit a word and see which heads change)", key="w_cmpin_text", max_chars=2000)
        if not text_b.strip():
            st.info("Type a second input.")
            return
    tb = get_trace(model_id, text_b)
    res = cached_pair(model_id, v.text, text_b)
    ia, ib, tv = res["ia"], res["ib"], res["tv"]
    if ia.size == 0:
        st.warning("The two inputs share no token, so their maps cannot be paired.")
        return
    if v.loaded.labels:
        chart(probability_bars(v.loaded.labels, {"A (current)": class_probabilities(v.loaded, v.trace.logits),
                                                         "B": class_probabilities(v.loaded, tb.logits)}, display=INPUT_KINDS.all_class_names(),
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
        return f"{i}:{base_a[i]}*" if kind.changed_token_note else f"{i}:{base_a[i]}→{base_b[j]}"

    labels = [pair_label(i, j) for i, j in zip(ia, ib)]
    st.markdown(f"#### {head_label(layer, head)} on the paired tokens (change {tv[layer, head]:.3f})")
    n_changed = sum(tok_a[i] != tok_b[j] for i, j in zip(ia, ib))
    st.caption(f"{n_changed} paired token(s) differ between A and B"
               + (f" (marked * on the axes: {kind.changed_token_note})." if kind.changed_token_note
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


# --- Head disabling over a set --------------------------------------------------------------------


def set_disable_section(v: PageView) -> None:
    """Kovaleva's single-head sweep over the shipped set (drawn inside the *Disable heads* tab)."""
    from bertgeom.sets.ablation import stratified, summarise_sweeps, sweep_over_set
    from bertgeom.sets.inputs import shipped_set

    loaded, layer, head = v.loaded, v.layer, v.head
    classifier = bool(loaded.labels)
    st.caption("**What this shows:** how much the model needs each head, measured over many inputs instead of "
               "one: every head is disabled alone (uniform attention) on every input"
               + (", and the accuracy and mean probability of the true class are compared with the intact model."
                  if classifier else ", and the final [CLS] vector's movement (1 − cosine) is averaged."))
    items = shipped_set(loaded.spec.input_kind)
    if classifier:
        per_class = st.slider(f"{v.kind.plural.capitalize()} per class (of the shipped set)", 1, 5, 1,
                              key="w_abl_set_n")
        chosen = stratified(items, per_class)
    else:
        k = st.slider(v.kind.plural.capitalize(), 2, len(items), min(8, len(items)), key="w_abl_set_n")
        chosen = tuple(items[:k])
    secs = v.kind.sweep_seconds * len(chosen)
    req = (v.model_id, tuple(it.name for it in chosen))
    from bertgeom.sets.prepared import is_on_disk, sweep_key
    from bertgeom.ui.prepared_cache import pending

    keys = [sweep_key(loaded, it) for it in chosen]
    prepared_now = all(is_on_disk(k) for k in keys)
    being_prepared = not prepared_now and all(is_on_disk(k) or pending(k) for k in keys)
    if being_prepared and st.session_state.get("abl_set_req") != req:
        from bertgeom.ui.prepared_cache import wait_for

        for k, it in zip(keys, chosen):
            wait_for(k, f"Disabling every head on {it.name}", model_id=v.model_id)
        prepared_now = all(is_on_disk(k) for k in keys)
    if not prepared_now and st.session_state.get("abl_set_req") != req:
        st.caption(f"{len(chosen)} inputs × {v.L * v.H} heads; about {secs / 60:.1f} min the first time on 2 cores "
                   "(each input's sweep is then cached on disk, so a larger set reuses it).")
        st.button("Run over the set", key="w_abl_set_run", type="primary",
                  on_click=lambda: st.session_state.update(abl_set_req=req))
        return
    with progress("Disabling every head on every input…", usually_prepared=being_prepared) as update:
        arrays = sweep_over_set(cached_model(v.model_id), chosen, update,
                                around=lambda: heavy("disabling every head on one input"))
    errors_expander(zip(map(str, arrays["err_names"]), map(str, arrays["err_msgs"])))
    s = summarise_sweeps(arrays, loaded.labels)
    if classifier:
        c1, c2 = st.columns(2)
        c1.metric("Accuracy, all heads", f"{s['base_accuracy']:.1%}")
        c2.metric("Mean true-class probability, all heads", f"{s['base_true_prob']:.3f}")
        what = st.radio("Show", ["change of mean true-class probability", "change of accuracy"], horizontal=True,
                        key="w_abl_set_what")
        grid = s["d_true_prob"] if what.startswith("change of mean") else s["d_accuracy"]
        st.markdown(f"**{what.capitalize()}** over {s['n']} {v.kind.plural} when each head alone is disabled; click a head.")
        c1, c2 = st.columns([5, 4])
        with c1:
            chart(fh.diverging_grid(grid, colour_label="Δ", selected=(layer, head)), "w_abl_set_grid",
                  selects_head=True)
        df = per_head_frame({"accuracy": s["accuracy"], "d_accuracy": s["d_accuracy"], "true_prob": s["true_prob"],
                             "d_true_prob": s["d_true_prob"], "d_cls": s["d_cls"]})
        with c2:
            st.markdown("Heads whose loss hurts most")
            st.dataframe(df.sort_values("d_true_prob")[["layer", "head", "d_true_prob", "d_accuracy"]].head(8).round(4)
                         .rename(columns={"d_true_prob": "Δ true-class probability", "d_accuracy": "Δ accuracy"}),
                         hide_index=True, width="stretch")
    else:
        st.markdown(f"**Mean 1 − cosine of the final [CLS]** over {s['n']} sentences; click a head.")
        df = per_head_frame({"d_cls": s["d_cls"]})
        c1, c2 = st.columns([5, 4])
        with c1:
            chart(head_grid(s["d_cls"], colour_label="1 − cos", selected=(layer, head), colorscale="Reds",
                            zrange=(0.0, max(float(np.nanmax(s["d_cls"])), 1e-9))), "w_abl_set_grid",
                  selects_head=True)
        with c2:
            st.markdown("Heads whose loss moves [CLS] most")
            st.dataframe(df.sort_values("d_cls", ascending=False).head(8).round(4)
                         .rename(columns={"d_cls": "1 − cos of the final [CLS]"}), hide_index=True, width="stretch")
    csv_button(df, "head_disabling_over_set.csv", "w_abl_set_csv")


# --- Top-head domain test -------------------------------------------------------------------------


def domain_test_section(summary, mask: np.ndarray, dom: str, v: PageView, who: str) -> None:
    """The z-test of ``dom`` under the domain proportions (input kinds with token domains, over the set)."""
    t = summary.domain_test(mask, dom)
    st.markdown(f"##### Top heads for {dom}: which heads attend to it more than its share of the tokens?")
    st.caption(f"**What this shows:** a head is starred when its strong attention (weights > 0.3) lands on {dom} "
               f"more often than {dom}'s share of the tokens ({t.background:.1%}) would explain: a one-sided "
               f"two-proportion z-test over {class_name(who)}, Bonferroni-corrected over all {t.z.size} heads "
               f"(p < {t.alpha_heads:.1e}). Grey: a head with no weight above 0.3.")
    c1, c2 = st.columns([5, 4])
    with c1:
        chart(significance_grid(t.z, t.significant, t.p, selected=(v.layer, v.head)), "w_dom_z_grid",
              selects_head=True)
    df = per_head_frame(t.rows())
    with c2:
        st.markdown(f"**{int(t.significant.sum())}** significant head(s)")
        top = df[df["significant"]].sort_values("z", ascending=False).head(10)
        if len(top):
            shown = top[["layer", "head", "share_on_domain", "z", "p_value"]].round(3)
            shown["p_value"] = [f"{x:.1e}" for x in top["p_value"]]  # tiny p-values would round to 0
            st.dataframe(shown.rename(columns={"share_on_domain": f"share on {dom}", "p_value": "p-value"}),
                         hide_index=True, width="stretch")  # words on screen; the CSV keeps the column names
    csv_button(df, f"domain_test_{dom}_{who}.csv", "w_dom_z_csv", "Download the z-test per head (CSV)")


# --- Gradient importance --------------------------------------------------------------------------


@st.cache_data(max_entries=8, show_spinner="Differentiating the loss with respect to every attention weight…")
def cached_gradients(model_id: str, text: str, target: int | None) -> dict:
    from bertgeom.analysis.gradients import attention_gradients, gradient_by_key_kind

    enc = get_trace(model_id, text).encoded  # before the slot (see bertgeom.ui.workqueue)
    loaded = cached_model(model_id)
    with heavy("differentiating the loss"):
        res = dict(vars(attention_gradients(loaded, enc.input_ids, target)))
    res["kinds"] = gradient_by_key_kind(res["grad"], res["attn"], enc.is_cls, enc.is_sep)
    return res


def gradient_tab(v: PageView) -> None:
    layer, head = v.layer, v.head
    st.caption("**What this shows:** whether the loss depends on where a head looks. For every attention weight α, "
               "|∂L/∂α| is how much the loss would change if that weight moved (Clark et al. 2019 §3.2). Heads that "
               "put much attention on [SEP] or [CLS] while the gradient there is tiny are parking attention: a no-op.")
    if not v.loaded.labels:
        st.info("This model has no classification head (MiniLM ships neither a classifier nor its masked-word "
                "head), so there is no loss to differentiate. Pick the SARS-CoV-2 variant model in the sidebar: "
                "its loss is the classifier's cross-entropy.")
        return
    labels = list(v.loaded.labels)
    pred = int(np.argmax(v.trace.logits))
    target = st.selectbox("Loss L = −log p(class)", list(range(len(labels))), index=pred, key="w_grad_target",
                          format_func=lambda i: class_name(labels[i]) + (" (predicted)" if i == pred else ""))
    res = cached_gradients(v.model_id, v.text, int(target))
    kinds = res["kinds"]
    names = [k[5:] for k in kinds if k.startswith("grad ")]
    kind = st.radio("Keys", names, horizontal=True, key="w_grad_kind", index=names.index("[SEP]") if "[SEP]" in names else 0)
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
    st.markdown(f"#### {head_label(layer, head)}: |∂L/∂α| of every weight (loss {res['loss']:.3g})")
    axis = v.trace.axis_labels
    st.caption("A confident prediction has a small loss and small gradients everywhere; pick another class to see "
               "what the model would need to change. In the last layer only the [CLS] row can matter (the classifier "
               "reads [CLS] alone).")
    chart(fh.attention_map(res["grad"][layer, head], axis, colour_label="|∂L/∂α|", colorscale="Viridis"),
          "w_grad_map")
    csv_button(per_head_frame(kinds), f"attention_gradients_{labels[int(target)]}.csv", "w_grad_csv")


TABS = {"Attention flow": flow_tab, "Compare two inputs": compare_inputs_tab, "Gradient importance": gradient_tab}
