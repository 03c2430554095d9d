"""Cached computations of the Attention Heads page (Streamlit caches around pure library code).

* Current input: Jensen-Shannon distances between heads, MDS, k-means, head disabling and
  checkpoint comparisons, cached per (model, input, parameters) with ``st.cache_data``.
* Over a set of inputs: :func:`set_summary` runs the model once over the shipped set and keeps
  small per-input reductions (per-head features, k90 rows, Clark's JS sums, token-domain
  attention masses).  The arrays are prepared ahead (:mod:`bertgeom.sets.prepared`) and kept by
  :mod:`bertgeom.cache` (memory, then disk, under :func:`bertgeom.sets.keys.heads_set_key`; two
  sessions asking at once run the model once).  Per-class mean maps (the paper's recipe, from the
  correctly classified inputs of one class) are prepared and kept the same way, the last two read
  in memory (read-only).

The computations themselves live in :mod:`bertgeom.sets.heads` (UI-free); this module keeps
them cached.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

from bertgeom.cache import Memo, cached_arrays
from bertgeom.sets import keys, prepared
from bertgeom.sets.inputs import InputItem, set_fingerprint, shipped_set
from bertgeom.sets.heads import (
    JS_MAX_ROWS,
    SET_THETA,
    SetSummary,
    compute_set_arrays,
    js_rows_for,
)
from bertgeom.ui.cache import cached_layer_weights, cached_model, get_trace
from bertgeom.ui.workqueue import heavy

#: The shipped sets' summaries read last (small arrays), in front of the disk.
SET_MEMO = Memo("heads-set", 4)
#: The class-mean maps read last (``[L, H, T, T]`` float16 each: only two are kept).
CLASS_MEAN_MEMO = Memo("class-mean", 2)


def set_items(input_kind: str) -> tuple[InputItem, ...]:
    return shipped_set(input_kind)


def set_summary(model_id: str, progress: Callable[[int, int], None] | None = None) -> SetSummary:
    """The shipped set's reductions for ``model_id`` (memory, then disk, then a model pass)."""
    loaded = cached_model(model_id)
    items = set_items(loaded.spec.input_kind)
    key = keys.heads_set_key(loaded, items)

    def compute():
        with heavy("the shipped set's model pass"):
            return compute_set_arrays(loaded, items, progress)

    arrays = cached_arrays(key, compute, memo=SET_MEMO)
    return SetSummary(arrays, classifier=bool(loaded.labels), class_order=tuple(loaded.labels))


def set_key(model_id: str):
    """The cache key of :func:`set_summary`'s arrays (shared with ``prepare-sets``)."""
    loaded = cached_model(model_id)
    return keys.heads_set_key(loaded, set_items(loaded.spec.input_kind))


def set_is_ready(model_id: str) -> bool:
    """True when :func:`set_summary` would answer from memory (no model pass, no disk read)."""
    return set_key(model_id) in SET_MEMO


def class_mean_key(model_id: str, names: tuple[str, ...], theta: float = SET_THETA):
    loaded = cached_model(model_id)
    return keys.class_mean_key(loaded, set_fingerprint(set_items(loaded.spec.input_kind)), names, theta)


def class_mean(model_id: str, weights_hash: str, names: tuple[str, ...], theta: float = SET_THETA) -> dict:
    """:func:`bertgeom.sets.heads.class_mean_over_set` of the named inputs of the shipped set: from
    memory, else from disk (prepared ahead, or written by an earlier visit), else computed."""
    from bertgeom.ui.prepared_cache import wait_for

    key = class_mean_key(model_id, names, theta)
    wait_for(key, "The class-mean maps", group="class-mean", model_id=model_id)
    loaded = cached_model(model_id)
    items = [it for it in set_items(loaded.spec.input_kind) if it.name in set(names)]

    def compute():
        with heavy("averaging the class's attention maps"):
            return prepared.class_mean_arrays(loaded, items, theta)

    if key in CLASS_MEAN_MEMO:
        return prepared.class_mean_from_arrays(CLASS_MEAN_MEMO.get(key))
    with st.spinner("Averaging the class's attention maps…"):  # drawn here: no cached function around it
        return prepared.class_mean_from_arrays(cached_arrays(key, compute, memo=CLASS_MEAN_MEMO))


# ----------------------------------------------------------------------------------------
# Current input
# ----------------------------------------------------------------------------------------


@st.cache_data(max_entries=16, show_spinner="Comparing every pair of heads (Jensen-Shannon)…")
def cached_js_input(model_id: str, text: str) -> tuple[np.ndarray, int]:
    """Clark's JS distance ``[L*H, L*H]`` on the current input, and the number of query rows used."""
    from bertgeom.analysis.headsim import JSAccumulator

    trace = get_trace(model_id, text)
    rows = js_rows_for(trace.encoded, 6 * JS_MAX_ROWS)  # one input: afford more rows than per set input
    acc = JSAccumulator().update(trace.attentions, rows=rows)
    return acc.distance, trace.encoded.n_tokens if rows is None else int(rows.size)


@st.cache_data(max_entries=32, show_spinner="Embedding the heads in 2-D (MDS)…")
def cached_mds(D: np.ndarray, method: str, sqrt: bool) -> np.ndarray:
    from bertgeom.analysis.headsim import mds_embedding

    if method == "metric":  # Clark's SMACOF settings, fewer restarts to stay interactive
        return mds_embedding(D, method="metric", sqrt=sqrt, n_init=4, max_iter=500, eps=1e-9)
    return mds_embedding(D, method="classical", sqrt=sqrt)


@st.cache_data(max_entries=32, show_spinner="Clustering the heads (k-means)…")
def cached_clusters(X: np.ndarray, k: int, names: tuple[str, ...]):
    from bertgeom.analysis.headsim import cluster_heads

    return cluster_heads(X, k=k, feature_names=list(names), n_init=10)


@st.cache_data(max_entries=16, show_spinner="Running the model with the heads disabled…")
def cached_ablation(model_id: str, text: str, heads: tuple[tuple[int, int], ...]) -> dict:
    """Before/after a Kovaleva ablation of ``heads`` (0-based pairs) on the current input."""
    from bertgeom.analysis.ablation import disabled_mask, forward_with_disabled_heads

    loaded = cached_model(model_id)
    ids = get_trace(model_id, text).encoded.input_ids  # before the slot: see bertgeom.ui.workqueue
    mask = disabled_mask(loaded.num_layers, loaded.num_heads, heads=heads)
    with heavy("running the model with heads disabled"):
        base = forward_with_disabled_heads(loaded, ids)
        after = forward_with_disabled_heads(loaded, ids, mask)
    return {"cls_before": base.cls[0], "cls_after": after.cls[0],
            "logits_before": None if base.logits is None else base.logits[0],
            "logits_after": None if after.logits is None else after.logits[0]}


@st.cache_data(max_entries=8, show_spinner="Disabling every head in turn…")
def cached_sweep(model_id: str, text: str, kind: str) -> dict:
    """Kovaleva's Figure 8 (``kind="heads"``) or 9 (``"layers"``) on the current input."""
    from bertgeom.analysis.ablation import sweep_layers, sweep_single_heads

    loaded = cached_model(model_id)
    ids = get_trace(model_id, text).encoded.input_ids
    with heavy("disabling every head in turn"):
        return sweep_single_heads(loaded, ids) if kind == "heads" else sweep_layers(loaded, ids)


def model_shape(model_id: str) -> tuple[int, int, int]:
    return cached_model(model_id).shape


@st.cache_data(max_entries=8, show_spinner="Comparing the two checkpoints head by head…")
def cached_compare(model_id: str, partner_id: str, text: str) -> dict:
    """Weight-space cosines (QK, OV) and map cosine on shared layer inputs, each ``[L, H]``
    (:func:`bertgeom.analysis.ablation.checkpoint_cosines`), read from disk where ``prepare-sets`` wrote
    it (the examples), else computed in a heavy-work slot."""
    from bertgeom.analysis.ablation import checkpoint_cosines
    from bertgeom.sets.cone import single_threaded
    from bertgeom.sets.keys import compare_key

    def compute() -> dict:  # only on a miss: a prepared result needs no trace
        wa, wb = cached_layer_weights(model_id), cached_layer_weights(partner_id)
        X = get_trace(model_id, text).hidden_states[:-1]
        with heavy("comparing the two checkpoints"), single_threaded():  # small matrices: 1 thread is faster
            return checkpoint_cosines(wa, wb, X)

    return cached_arrays(compare_key(cached_model(model_id), cached_model(partner_id), text), compute)


@st.cache_data(max_entries=8, show_spinner=False)
def cached_compare_layer(model_id: str, partner_id: str, text: str, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Both checkpoints' maps ``[H, T, T]`` of one layer on the current model's layer input."""
    from bertgeom.attention import attention_from_weights

    from bertgeom.sets.cone import single_threaded

    wa, wb = cached_layer_weights(model_id), cached_layer_weights(partner_id)
    X = get_trace(model_id, text).hidden_states[layer][None]
    with single_threaded():
        a = attention_from_weights([wa[layer]], X)[0].astype(np.float32)
        b = attention_from_weights([wb[layer]], X)[0].astype(np.float32)
    return a, b
