"""The Attention Heads page's views that researchers know from bertviz, Dodrio and AttentionViz:

* **Head view** -- every head of the selected layer as token lines, one colour each, with
  toggles; hover a token to see its links (:func:`bertgeom.figures.headview.head_view_html`,
  a self-contained HTML page). Long inputs are read through a window or grouped by the input's
  token groups (for genomes, their domains);
* **Model view** -- a thumbnail of every head's pattern, optionally sized by importance
  (the effect of disabling the head, or a gradient importance); a click selects the head;
* **Queries & keys over a set** -- one head's queries and keys over a whole set, embedded
  jointly with AttentionViz's normalisation; a click opens that input; a search lists where
  the head attends most to a token.

References: Vig 2019 (arXiv:1906.05714), Wang et al. 2021 Dodrio (arXiv:2103.14625),
Yeh et al. 2023 AttentionViz (arXiv:2305.03210), Michel et al. 2019 (arXiv:1905.10650).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pandas as pd
import streamlit as st
import streamlit.components.v1 as components

from bertgeom.analysis.facts import layer_ranking, special_heads_note
from bertgeom.analysis.token_groups import contiguous_groups, group_attention, window_bounds
from bertgeom.figures import headview as hv
from bertgeom.sets.inputs import InputItem, set_fingerprint, shipped_set
from bertgeom.tables import head_label
from bertgeom.ui.cache import cached_layer_weights, cached_model
from bertgeom.inputs import input_kind_of
from bertgeom.safety import plain
from bertgeom.ui.state import PageView, widget_key
from bertgeom.ui.widgets import chart, guarded, table

#: Inputs longer than this are shown through a window or as token groups.
FULL_TOKENS = 80
WINDOW = 48
#: The most inputs a set embedding reads (a few thousand points stay clickable).
MAX_SET_INPUTS = 40


def _groups(v: PageView) -> list[str] | None:
    """One group label per token when the input kind has them (for genomes, the domains)."""
    groups = getattr(v, "domains", None)
    return list(groups) if groups is not None else None


# --- Head view ------------------------------------------------------------------------------------
def head_view_tab(v: PageView) -> None:
    trace, layer = v.trace, v.layer
    T = trace.encoded.n_tokens
    st.caption("**What this shows:** bertviz's head view — every head of layer "
               f"{layer + 1} at once, one colour per head. Each line joins a query token (left, the token that "
               "looks) to a key token (right, the token looked at); the stronger the weight, the darker the line. "
               "Tick heads on or off; **hover a token to see only its links, click it to keep them**. "
               "The layer is the selected head's (change it with the boxes above).")
    tokens = list(trace.tokens)
    A = np.asarray(trace.attentions[layer], dtype=np.float64)
    note = f"Layer {layer + 1}, {T} tokens."
    groups = _groups(v)
    if T > FULL_TOKENS:
        modes = ["A window of tokens"] + (["Token groups (whole input)"] if groups else [])
        mode = st.radio(f"This input has {T} tokens, too many lines to read at once: show", modes, horizontal=True,
                        key="w_hv_mode", bind="query-params")
        if mode.startswith("Token groups"):
            grp = contiguous_groups(groups)
            A = group_attention(A, grp)
            tokens = [f"{g.name} ({g.stop - g.start} tok.)" for g in grp]
            note = (f"Layer {layer + 1}: {T} tokens grouped into {len(grp)} runs of the same group; a line is the mean "
                    "over the group's queries of their summed weight on the other group's keys (every row still "
                    "sums to 1).")
        else:
            start = st.slider("Window start (token)", 0, T - WINDOW, 0, step=1, key="w_hv_start")
            a, b = window_bounds(T, start, WINDOW)
            A = A[:, a:b, a:b]
            tokens = [f"{i}: {t}" for i, t in zip(range(a, b), tokens[a:b])]
            note = (f"Layer {layer + 1}: tokens {a}–{b - 1} of {T} (queries and keys inside the window only; "
                    "weight on keys outside the window is not drawn).")
    min_w = st.slider("Hide links below", 0.0, 0.5, 0.02, step=0.01, key="w_hv_min", bind="query-params",
                      help="Links weaker than this are not drawn (bertviz draws all, faintly).")
    active = [h == v.head for h in range(v.H)] if st.toggle("Only the selected head at first", key="w_hv_one") else None
    page = hv.head_view_html(A, tokens, head_names=[f"H{h + 1}" for h in range(v.H)], active=active,
                             min_weight=min_w, note=note, title=f"Head view, layer {layer + 1}")
    rows = A.shape[-1]
    components.html(page, height=min(760, 22 * rows + 110), scrolling=True)
    table_ = getattr(v, "table", None)
    if table_ is not None and "prev" in table_:
        ranking = layer_ranking(table_, "prev", layer)
        st.caption(f"Attention to the previous token in layer {layer + 1}, most first: "
                   + " · ".join(f"H{h + 1} ({x:.2f})" for h, x in ranking) + ".")
    st.download_button("Download this view (HTML, works offline)", page.encode("utf-8"),
                       file_name=f"head_view_L{layer + 1}.html", mime="text/html", key="w_hv_dl",
                       icon=":material/download:", on_click="ignore")


# --- Model view -----------------------------------------------------------------------------------
IMPORTANCE = {
    "none": "no importance",
    "disable": "effect of disabling the head (1 − cos of the final [CLS])",
    "gradient": "gradient importance (Σ α·|∂L/∂α|, mean over queries)",
}


def _importance(v: PageView, kind: str) -> np.ndarray | None:
    from bertgeom.analysis.ablation import cls_cosine

    if kind == "disable":
        from bertgeom.ui.heads_cache import cached_sweep

        sweep = cached_sweep(v.model_id, v.text, "heads")
        return 1.0 - cls_cosine(sweep["cls"], sweep["base_cls"][None, None])
    if kind == "gradient":
        from bertgeom.ui.heads_more_tabs import cached_gradients

        res = cached_gradients(v.model_id, v.text, int(np.argmax(v.trace.logits)))
        return (res["attn"] * res["grad"]).sum(-1).mean(-1)
    return None


def model_view_tab(v: PageView) -> None:
    st.caption("**What this shows:** bertviz's model view — a thumbnail of every head's attention map "
               "(rows = layers, columns = heads; each scaled to its own strongest weight, long inputs pooled into "
               "blocks). Vertical stripes are heads that read one token, a diagonal reads a neighbour. "
               "**Click a thumbnail to select that head.** As in Dodrio, thumbnails can be sized and outlined by "
               "how much the head matters.")
    kinds = ["none", "disable"] + (["gradient"] if v.loaded.labels else [])
    kind = st.radio("Size by", kinds, format_func=IMPORTANCE.get, horizontal=True, key="w_mv_importance",
                    bind="query-params",
                    help="Disabling: Kovaleva et al.'s uniform-attention ablation of one head at a time, measured as "
                         "how far the final [CLS] vector turns. Gradient: Michel et al. 2019's head importance, "
                         "approximated as α·|∂L/∂α| summed over keys (needs a classifier).")
    imp = None
    with guarded("The importance"):
        imp = _importance(v, kind)
    fig = hv.model_view(v.trace.attentions, importance=imp, importance_label=IMPORTANCE[kind].split(" (")[0],
                        selected=(v.layer, v.head))
    chart(fig, "w_model_view", selects_head=True)
    table_ = getattr(v, "table", None)
    if table_ is not None and "cls" in table_ and "sep" in table_:
        note = special_heads_note(table_)[0]
        st.caption(f"On this input {note}.")
    if imp is not None:
        top = np.dstack(np.unravel_index(np.argsort(-imp, axis=None)[:3], imp.shape))[0]
        st.caption("Most important here: " + ", ".join(f"{head_label(l, h)} ({imp[l, h]:.3g})" for l, h in top)
                   + ". Small thumbnails matter least on this input.")


# --- Queries and keys over a set ------------------------------------------------------------------
@st.cache_resource(max_entries=1)
def _layer_records_memo() -> OrderedDict:
    """Process-wide LRU of each layer's records over a set (shared, read-only), in front of the model."""
    return OrderedDict()


def _layer_records(model_id: str, fingerprint: str, layer: int, with_groups: bool, _items: tuple[InputItem, ...],
                   max_memo: int = 8):
    """The layer's queries and keys over the set: from memory, else computed with a progress bar
    (time left, *Cancel*) drawn here, outside any cached function."""
    from bertgeom.analysis.qk_embedding import layer_record
    from bertgeom.sets.inputs import map_over_set
    from bertgeom.ui.widgets import progress
    from bertgeom.ui.workqueue import heavy

    key = (model_id, cached_model(model_id).weights_hash, fingerprint, layer, with_groups)
    memo = _layer_records_memo()
    if key in memo:
        memo.move_to_end(key)
        return memo[key]
    loaded = cached_model(model_id)

    def groups(trace):
        return trace.encoded.domains if with_groups else None

    with heavy("running the model over the set"), \
            progress(f"Running the model over {len(_items)} inputs for layer {layer + 1}…") as update:
        res = map_over_set(loaded, _items, lambda t, _: layer_record(t, layer, groups), progress=update)
    memo[key] = (res.items, res.results, res.errors)
    while len(memo) > max_memo:
        memo.popitem(last=False)
    return memo[key]


def _open_input(kind: str, text: str) -> None:
    spec = input_kind_of(kind)
    st.session_state[spec.session_key] = st.session_state[widget_key(spec)] = text


def _on_qk_click(items_key: str, kind: str) -> None:
    event = st.session_state.get("w_qk_map")
    try:
        point = event["selection"]["points"][0]
        item = int(point["customdata"][0])
        position = int(point["customdata"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return
    items = st.session_state.get(items_key) or []
    if 0 <= item < len(items):
        _open_input(kind, items[item].text)
        st.session_state["_qk_opened"] = (items[item].name, position)


def _choose_set(v: PageView) -> tuple[InputItem, ...] | None:
    kind = v.loaded.spec.input_kind
    src = st.radio("Set", ["shipped", "own"], horizontal=True, key="w_qk_set", bind="query-params",
                   format_func={"shipped": "the shipped set", "own": "my own inputs"}.get)
    if src == "shipped":
        return shipped_set(kind)[:MAX_SET_INPUTS]
    spec = input_kind_of(kind)
    if spec.read_set is not None and spec.labelled_uploads:  # a labelled file, as the Cone page's own set
        from bertgeom.ui.cone_cache import uploaded_set

        up = st.file_uploader(spec.set_upload_label.capitalize(), type=list(spec.set_upload_types), key="w_qk_fasta")
        if up is None:
            st.info(f"Upload a file to embed your own {spec.plural}.")
            return None
        items = uploaded_set(kind, up.getvalue(), None)
    else:
        text = st.text_area("One input per line", key="w_qk_lines", height=120,
                            placeholder="The cat sat on the mat.\nA dog barked.")
        lines = [s.strip() for s in (text or "").splitlines() if s.strip()]
        if not lines:
            st.info("Type a few sentences, one per line.")
            return None
        items = tuple(InputItem(f"line {i + 1}", s) for i, s in enumerate(lines))
    if len(items) > MAX_SET_INPUTS:
        st.caption(f"Only the first {MAX_SET_INPUTS} of {len(items)} inputs are embedded.")
    return tuple(items[:MAX_SET_INPUTS])


def qk_set_tab(v: PageView) -> None:
    from bertgeom.analysis.qk_embedding import collect_head_qk, dot_distance_correlation, embed_qk, token_search

    layer, head = v.layer, v.head
    st.caption(f"**What this shows:** AttentionViz's joint view of {v.HL} — the query (○) and key (×) of every token "
               "of every input in a set, in one map. Before projecting, queries are scaled by c and keys by 1/c "
               "so both have the same mean norm, and keys are moved onto the queries' centre: neither changes any "
               "attention weight, and afterwards a key close to a query is a key that query attends to "
               "(Yeh et al. 2023, arXiv:2305.03210, §4; see Methods). **Click a point to open its input** "
               "in the sidebar.")
    items = _choose_set(v)
    if not items:
        return
    c1, c2, c3 = st.columns(3)
    method = c1.radio("Projection", ["pca", "umap", "tsne"], horizontal=True, key="w_qk_method", bind="query-params",
                      format_func={"pca": "PCA", "umap": "UMAP", "tsne": "t-SNE"}.get)
    normalise = c2.toggle("Query-key normalisation (AttentionViz)", value=True, key="w_qk_norm")
    groups = _groups(v) is not None
    labelled = any(it.label for it in items)
    colour_opts = ["kind", "role"] + (["group"] if groups else []) + (["label"] if labelled else [])
    colour_by = c3.selectbox("Colour by", colour_opts, key="w_qk_colour",
                             index=colour_opts.index("group" if groups else "kind"), bind="query-params",
                             format_func={"kind": "token kind ([CLS], [SEP], punctuation, other)",
                                          "role": "query or key", "group": "domain of the token",
                                          "label": "class of the input"}.get)
    fp = set_fingerprint(items)
    with guarded("Embedding the set"):
        ok_items, records, errors = _layer_records(v.model_id, fp, layer, groups, items)
        if errors:
            st.caption(f"{len(errors)} input(s) could not be read and are left out: "
                       + plain("; ".join(f"{n}: {e}" for n, e in errors[:3])))
        if not records:
            st.warning("No input of the set could be read.")
            return
        st.session_state["_qk_items"] = ok_items
        qk = collect_head_qk(records, cached_layer_weights(v.model_id), layer, head,
                             labels=[it.label for it in ok_items], names=[it.name for it in ok_items],
                             texts=[it.text for it in ok_items])
        frame, c = embed_qk(qk, method, normalise=normalise)
        search = st.text_input("Search a token or k-mer (exact, case-insensitive)", key="w_qk_search",
                               bind="query-params", placeholder="e.g. cat, or a 12-mer")
        hits = token_search(qk, search) if search.strip() else None
        mark = None
        if hits is not None and len(hits):
            keyed = set(zip(hits["item"], hits["position"]))
            mark = np.array([(i, p) in keyed and r == "key" for i, p, r in
                             zip(frame["item"], frame["position"], frame["role"])])
        n_tok = len(qk.rows)
        shown = (frame["role"] == "query").sum()
        title = (f"{v.HL}: {n_tok} tokens of {len(ok_items)} inputs" + (f" ({shown} drawn, chosen at random)"
                 if shown < n_tok else "") + (f"; c = {c:.2f}" if normalise else "; unnormalised"))
        st.plotly_chart(hv.qk_set_scatter(frame, colour_by, title=title, highlight=mark), key="w_qk_map",
                        on_select=lambda: _on_qk_click("_qk_items", v.loaded.spec.input_kind),
                        selection_mode="points")
        opened = st.session_state.get("_qk_opened")
        if opened:
            st.success(f"Opened **{plain(opened[0])}** (token {opened[1]}) in the sidebar: every tab now reads it.")
        if hits is not None:
            if hits.empty:
                st.info(f"No token of the set is '{plain(search.strip())}'.")
            else:
                st.markdown(f"**Where {v.HL} attends most to '{plain(search.strip())}'** (as a key: mean weight "
                            "over its input's queries; the strongest query's position beside it)")
                shown_hits = hits.rename(columns={"received_mean": "mean attention received",
                                                  "received_max": "largest weight", "strongest_query":
                                                  "from query at"}).drop(columns=["item"])
                table(shown_hits.round(4), f"search_{v.HL.replace(' ', '')}.csv", "w_qk_hits_csv")
        r_norm, r_raw = dot_distance_correlation(qk, normalise=True), dot_distance_correlation(qk, normalise=False)
        st.caption(f"How well distance reads as attention here (AttentionViz's check): the correlation of q·k with "
                   f"‖q − k‖ over every query-key pair of the same input is {r_norm:.2f} normalised and {r_raw:.2f} "
                   "unnormalised (−1 = distance mirrors attention exactly; the 2-D map keeps only part of it).")
        by = pd.DataFrame({"kind": qk.rows["kind"], "received": qk.rows["received_mean"]}).groupby("kind")["received"]
        st.caption("Mean attention a key receives, by token kind: "
                   + ", ".join(f"{k} {m:.3f}" for k, m in by.mean().items()) + ".")


TABS = {"Head view": head_view_tab, "Model view": model_view_tab, "Queries & keys over a set": qk_set_tab}
