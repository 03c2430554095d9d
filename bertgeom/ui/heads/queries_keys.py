"""Attention Heads tab *Queries & keys over a set*: one head's queries and keys over a whole set,
embedded jointly with AttentionViz's normalisation; a click opens that input; a search lists where
the head attends most to a token.

References: Yeh et al. 2023 AttentionViz (arXiv:2305.03210).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.cache import Memo, cached
from bertgeom.figures import headview as hv
from bertgeom.inputs import input_kind_of
from bertgeom.sets.inputs import InputItem, set_fingerprint, shipped_set
from bertgeom.ui.heads.view import View, token_groups
from bertgeom.safety import plain
from bertgeom.ui.state import widget_key
from bertgeom.ui.widgets import guarded, read_set_upload, table, waited
from bertgeom.tables import counted, word_for


#: The most inputs a set embedding reads (a few thousand points stay clickable).
MAX_SET_INPUTS = 40


#: Each layer's records over a set (shared by the sessions, read-only), in front of the model.
LAYER_RECORDS_MEMO = Memo("qk-layer-records", 8)
#: Each head's 2-D map over a set (shared by the sessions, read-only): a UMAP or t-SNE fit is kept.
QK_MAP_MEMO = Memo("qk-map", 32)


def _qk_map(key, qk, method: str, normalise: bool):
    """The head's map (:func:`bertgeom.analysis.qk_embedding.embed_qk`) from memory, else fitted in a
    heavy-work slot; pure (no Streamlit element), for :func:`bertgeom.ui.widgets.waited`."""
    from bertgeom.analysis.qk_embedding import embed_qk
    from bertgeom.ui.workqueue import free_slot_or_raise

    def compute():
        with free_slot_or_raise():
            return embed_qk(qk, method, normalise=normalise)

    return cached(key, compute, memo=QK_MAP_MEMO, disk=None)


def _layer_records(loaded, fingerprint: str, layer: int, with_groups: bool, _items: tuple[InputItem, ...]):
    """The layer's queries and keys over the set: from memory, else computed with a progress bar
    (time left, *Cancel*) drawn here, outside any cached function."""
    from bertgeom.analysis.qk_embedding import layer_record
    from bertgeom.sets.inputs import map_over_set
    from bertgeom.sets.keys import layer_records_key
    from bertgeom.ui.widgets import progress
    from bertgeom.ui.workqueue import heavy

    def groups(trace):
        return trace.encoded.domains if with_groups else None

    def compute():
        with heavy("running the model over the set"), \
                progress(f"Running the model over {len(_items)} inputs for layer {layer + 1}…") as update:
            res = map_over_set(loaded, _items, lambda t, _: layer_record(t, layer, groups), progress=update)
        return res.items, res.results, res.errors

    key = layer_records_key(loaded.spec.id, loaded.weights_hash, fingerprint, layer, with_groups)
    return cached(key, compute, memo=LAYER_RECORDS_MEMO, disk=None)


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


def _choose_set(v: View) -> tuple[InputItem, ...] | None:
    kind = v.loaded.spec.input_kind
    src = st.radio("Set", ["shipped", "own"], horizontal=True, key="w_qk_set", bind="query-params",
                   format_func={"shipped": "the shipped set", "own": "my own inputs"}.get)
    if src == "shipped":
        return shipped_set(kind)[:MAX_SET_INPUTS]
    spec = input_kind_of(kind)
    if spec.read_set is not None and spec.labelled_uploads:  # a labelled file, as the Cone page's own set
        up = st.file_uploader(spec.words.set_upload_label.capitalize(), type=list(spec.set_upload_types),
                              key="w_qk_set_upload")
        if up is None:
            st.info(f"Upload a file to embed your own {spec.words.plural}.")
            return None
        items = read_set_upload(spec, up.name, up.getvalue())  # one sentence when unreadable
        if not items:
            if items is not None:
                st.warning(f"'{plain(up.name)}' holds no {spec.words.noun}.")
            return None
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


def qk_set_tab(v: View) -> None:
    from bertgeom.analysis.qk_embedding import collect_head_qk, dot_distance_correlation, token_search

    layer, head = v.layer, v.head
    st.caption(f"**What this shows:** AttentionViz's joint view of {v.HL} — the query (○) and key (×) of every token "
               "of every input in a set, in one map. Before projecting, queries are scaled by c and keys by 1/c "
               "so both have the same mean norm, and keys are moved onto the queries' centre: neither changes any "
               "attention weight (Yeh et al. 2023, arXiv:2305.03210, §4; see Methods). Closeness reads as attention "
               "only as far as the norms of queries and keys are alike: the correlation below says how far it "
               "holds for this head, normalised and not. **Click a point to open its input** "
               "in the sidebar.")
    if any(lw.rotary for lw in v.loaded.layer_weights):
        st.info("This model rotates queries and keys by position (rotary embeddings), so q·k of two tokens also "
                "depends on how far apart they are. The points are the queries and keys before that rotation "
                "(W_Q x + b, W_K x + b): their distances read as attention only for tokens at the same offset.",
                icon=":material/info:")
    items = _choose_set(v)
    if not items:
        return
    c1, c2, c3 = st.columns(3)
    method = c1.radio("Projection", ["pca", "umap", "tsne"], horizontal=True, key="w_qk_method", bind="query-params",
                      format_func={"pca": "PCA", "umap": "UMAP", "tsne": "t-SNE"}.get)
    normalise = c2.toggle("Query-key normalisation (AttentionViz)", value=True, key="w_qk_norm")
    groups = token_groups(v) is not None
    labelled = any(it.label for it in items)
    colour_opts = ["kind", "role"] + (["group"] if groups else []) + (["label"] if labelled else [])
    colour_by = c3.selectbox("Colour by", colour_opts, key="w_qk_colour",
                             index=colour_opts.index("group" if groups else "kind"), bind="query-params",
                             format_func={"kind": "token kind ([CLS], [SEP], punctuation, other)",
                                          "role": "query or key", "group": "domain of the token",
                                          "label": "class of the input"}.get)
    fp = set_fingerprint(items)
    with guarded("Embedding the set"):
        ok_items, records, errors = _layer_records(v.loaded, fp, layer, groups, items)
        if errors:
            st.caption(f"{counted(len(errors), 'input')} could not be read and {word_for(len(errors), 'is', 'are')} "
                       "left out: "
                       + plain("; ".join(f"{n}: {e}" for n, e in errors[:3])))
        if not records:
            st.warning("No input of the set could be read.")
            return
        st.session_state["_qk_items"] = ok_items
        qk = collect_head_qk(records, v.loaded.layer_weights, layer, head,
                             labels=[it.label for it in ok_items], names=[it.name for it in ok_items],
                             texts=[it.text for it in ok_items])
        from bertgeom.sets.keys import qk_map_key

        map_key = qk_map_key(v.model_id, v.loaded.weights_hash, fp, layer, head, groups, method, normalise)
        name = {"pca": "PCA", "umap": "UMAP", "tsne": "t-SNE"}[method]
        frame, c = waited(_qk_map, map_key, qk, method, normalise, text=f"Fitting the {name} map of {len(qk.rows)} "
                          "tokens…", key=f"qk-map-{method}", estimate_key=f"qk-map:{method}:{v.model_id}")
        tokens = [str(t) for t in v.trace.tokens[1:-1]] or [""]  # an example in this kind's own tokens
        search = st.text_input("Search a token (exact, case-insensitive)", key="w_qk_search",
                               bind="query-params", placeholder=f"e.g. {tokens[len(tokens) // 2]}")
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
