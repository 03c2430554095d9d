"""Cached computations of the Attention Heads page (Streamlit caches around pure library code).

* Current input: Jensen-Shannon distances between heads, MDS, k-means, head disabling and
  checkpoint comparisons, cached per (model, input, parameters) with ``st.cache_data``.
* Over a set of inputs: :func:`set_summary` and :func:`class_mean` run the ``heads-set`` and
  ``class-mean`` views (:mod:`bertgeom.sets.views`: one key, one computation, a typed result,
  prepared ahead by ``prepare-sets``) through :func:`bertgeom.ui.cache.run_view`.

The computations themselves live in :mod:`bertgeom.sets.heads` (UI-free).
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertgeom.sets.inputs import InputItem, shipped_set
from bertgeom.sets.heads import JS_MAX_ROWS, SET_THETA, ClassMean, SetSummary, js_rows_for
from bertgeom.sets.views import COMPARE, CLASS_MEAN, HEADS_SET
from bertgeom.ui.cache import cached_layer_weights, cached_model, get_trace, run_view
from bertgeom.ui.workqueue import heavy

def set_items(input_kind: str) -> tuple[InputItem, ...]:
    return shipped_set(input_kind)


def set_args(model_id: str) -> tuple:
    """The arguments of :data:`~bertgeom.sets.views.HEADS_SET` for ``model_id``'s shipped set."""
    loaded = cached_model(model_id)
    return loaded, set_items(loaded.spec.input_kind)


def set_summary(model_id: str) -> SetSummary:
    """The shipped set's reductions for ``model_id`` (memory, then disk, then a model pass with a
    progress bar): the ``heads-set`` view through :func:`bertgeom.ui.cache.run_view`."""
    return run_view(HEADS_SET, *set_args(model_id))


def set_is_ready(model_id: str) -> bool:
    """True when :func:`set_summary` would answer from memory (no model pass, no disk read)."""
    return HEADS_SET.in_memory(*set_args(model_id))


def class_mean(model_id: str, names: tuple[str, ...], theta: float = SET_THETA) -> ClassMean:
    """The class-mean maps of the named inputs of the shipped set (the ``class-mean`` view): from
    memory, else from disk (prepared ahead, or written by an earlier visit), else computed."""
    return run_view(CLASS_MEAN, *set_args(model_id), tuple(names), float(theta))


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


def cached_compare(model_id: str, partner_id: str, text: str) -> dict:
    """Weight-space cosines (QK, OV) and map cosine on shared layer inputs, each ``[L, H]`` (the
    ``compare-checkpoints`` view), read from disk where ``prepare-sets`` wrote it (the examples), else
    computed in a heavy-work slot from the input's trace."""
    return run_view(COMPARE, cached_model(model_id), cached_model(partner_id), text,
                    given=lambda: {"trace": get_trace(model_id, text)})


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
