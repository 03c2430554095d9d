"""Cached computations of the Attention Heads page (Streamlit caches around pure library code).

* Current input: Jensen-Shannon distances between heads, MDS, k-means, head disabling and
  checkpoint comparisons, cached per (model, input, parameters) with ``st.cache_data``.
* Over a set of inputs: :func:`set_summary` and :func:`class_mean` run the ``heads-set`` and
  ``class-mean`` views (:mod:`bertgeom.sets.views`: one key, one computation, a typed result,
  prepared ahead by ``prepare-sets``) through :func:`bertgeom.ui.view_runner.run_view`.

The computations themselves live in :mod:`bertgeom.sets.heads` (UI-free).
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertgeom.analysis.ablation import Ablation, Sweep
from bertgeom.sets.inputs import InputItem, shipped_set
from bertgeom.sets.heads import JS_MAX_ROWS, SET_THETA, ClassMean, SetSummary, js_rows_for
from bertgeom.sets.views import COMPARE, CLASS_MEAN, HEADS_SET, CosineArrays
from bertgeom.subject import Subject
from bertgeom.ui.cache import BY_SUBJECT, cached_model
from bertgeom.ui.view_runner import run_view
from bertgeom.ui.workqueue import heavy

def set_items(input_kind: str) -> tuple[InputItem, ...]:
    return shipped_set(input_kind)


def set_args(loaded) -> tuple:
    """The arguments of :data:`~bertgeom.sets.views.HEADS_SET` for ``loaded``'s shipped set."""
    return loaded, set_items(loaded.spec.input_kind)


def set_summary(loaded) -> SetSummary:
    """The shipped set's reductions for the model ``loaded`` (memory, then disk, then a model pass with a
    progress bar): the ``heads-set`` view through :func:`bertgeom.ui.view_runner.run_view`."""
    return run_view(HEADS_SET, *set_args(loaded))


def set_is_ready(loaded) -> bool:
    """True when :func:`set_summary` would answer from memory (no model pass, no disk read)."""
    return HEADS_SET.in_memory(*set_args(loaded))


def class_mean(loaded, names: tuple[str, ...], theta: float = SET_THETA) -> ClassMean:
    """The class-mean maps of the named inputs of the shipped set (the ``class-mean`` view): from
    memory, else from disk (prepared ahead, or written by an earlier visit), else computed."""
    return run_view(CLASS_MEAN, *set_args(loaded), tuple(names), float(theta))


# ----------------------------------------------------------------------------------------
# Current input
# ----------------------------------------------------------------------------------------


@st.cache_data(max_entries=16, show_spinner="Comparing every pair of heads (Jensen-Shannon)…", hash_funcs=BY_SUBJECT)
def cached_js_input(subject: Subject) -> tuple[np.ndarray, int]:
    """Clark's JS distance ``[L*H, L*H]`` on the current input, and the number of query rows used."""
    from bertgeom.analysis.headsim import JSAccumulator

    trace = subject.trace
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


@st.cache_data(max_entries=16, show_spinner="Running the model with the heads disabled…", hash_funcs=BY_SUBJECT)
def cached_ablation(subject: Subject, heads: tuple[tuple[int, int], ...]) -> Ablation:
    """Before/after a Kovaleva ablation of ``heads`` (0-based pairs) on the current input."""
    from bertgeom.analysis.ablation import ablate

    loaded, ids = subject.loaded, subject.trace.encoded.input_ids
    with heavy("running the model with heads disabled"):
        return ablate(loaded, ids, heads)


@st.cache_data(max_entries=8, show_spinner="Disabling every head in turn…", hash_funcs=BY_SUBJECT)
def cached_sweep(subject: Subject, kind: str) -> Sweep:
    """Kovaleva's Figure 8 (``kind="heads"``) or 9 (``"layers"``) on the current input."""
    from bertgeom.analysis.ablation import sweep_layers, sweep_single_heads

    loaded, ids = subject.loaded, subject.trace.encoded.input_ids
    with heavy("disabling every head in turn"):
        return sweep_single_heads(loaded, ids) if kind == "heads" else sweep_layers(loaded, ids)


def cached_compare(subject: Subject, partner_id: str) -> CosineArrays:
    """Weight-space cosines (QK, OV) and map cosine on shared layer inputs, each ``[L, H]`` (the
    ``compare-checkpoints`` view), read from disk where ``prepare-sets`` wrote it (the examples), else
    computed in a heavy-work slot from the input's trace."""
    return run_view(COMPARE, subject.loaded, cached_model(partner_id), subject.text,
                    given=lambda: {"trace": subject.trace})


def model_shape(model_id: str) -> tuple[int, int, int]:
    """``(layers, heads, width)`` of another registered model (a partner to compare with)."""
    return cached_model(model_id).shape


@st.cache_data(max_entries=8, show_spinner=False, hash_funcs=BY_SUBJECT)
def cached_compare_layer(subject: Subject, partner_id: str, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Both checkpoints' maps ``[H, T, T]`` of one layer on the current model's layer input."""
    from bertgeom.attention import attention_from_weights

    from bertgeom.sets.cone import single_threaded

    wa, wb = subject.loaded.layer_weights, cached_model(partner_id).layer_weights
    X = subject.trace.hidden_states[layer][None]
    with single_threaded():
        a = attention_from_weights([wa[layer]], X)[0].astype(np.float32)
        b = attention_from_weights([wb[layer]], X)[0].astype(np.float32)
    return a, b
