"""Cached computations of the Subspace Directions page.

* layer weights: once per model (``st.cache_resource``: read-only numpy arrays, shared);
* weight geometry (D4): once per model and threshold setting (``st.cache_data``);
* data geometry (D1-D3) of every head: per (model, input, ε, token set, correct/faithful);
* across inputs: the ``subspace-across`` view (:mod:`bertgeom.sets.views`; per model, set, layer,
  head, ε and token set, the faithful values on each input padded to 512 positions as for one
  input) through :func:`bertgeom.ui.view_runner.run_view`, so a head computed once is shown at once
  afterwards, also after a server restart; for the shipped set every head is prepared ahead.

The computations themselves live in :mod:`bertgeom.sets.subspace` (UI-free).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

from bertgeom import attention as att
from bertgeom.analysis import subspace as sub
from bertgeom.cache import Memo, cached
from bertgeom.sets.inputs import InputItem
from bertgeom.sets.keys import faithful_geometry_key
from bertgeom.sets.subspace import AcrossInputs, data_geometry, faithful_input, padded_hidden_states
from bertgeom.sets.views import SUBSPACE_ACROSS
from bertgeom.subject import Subject
from bertgeom.ui.cache import BY_SUBJECT
from bertgeom.ui.view_runner import run_view
from bertgeom.ui.widgets import progress
from bertgeom.ui.workqueue import heavy


# -------------------------------------------------------------------------------------------
# Streamlit caches
# -------------------------------------------------------------------------------------------
@st.cache_data(max_entries=8, show_spinner="Computing the weight geometry of every head…")
def cached_weight_geometry(_lws, weights_hash: str, rank_rtol: float | None,
                           sym_rtol: float) -> sub.WeightGeometry:
    """D4 and the weight spectra of every head of the page's layer weights ``_lws`` (no input needed;
    keyed by the model's weights hash, the weights themselves never hashed)."""
    return sub.weight_geometry(_lws, rank_rtol=rank_rtol, sym_rtol=sym_rtol)


def _data_geometry(subject: Subject, eps: float, token_set: str, faithful: bool, progress=None):
    """:func:`data_geometry` of the subject's input, uncached; ``progress(done, total)`` hears each layer done."""
    trace = subject.trace
    lws = subject.loaded.layer_weights
    with heavy("D1–D3 of every head"):
        padded = padded_hidden_states(subject.loaded, trace) if faithful else None
        if progress is not None:
            progress(0, len(lws))  # counted in layers: the padded pass is quicker than one, so it is not a step
        return data_geometry(trace, lws, eps=eps, token_set=token_set, faithful=faithful, padded_hidden=padded,
                             progress=progress)


@st.cache_data(max_entries=16, show_spinner=False, hash_funcs=BY_SUBJECT)  # the wait: widgets.waited, in the tab
def cached_data_geometry(
    subject: Subject, eps: float, token_set: str, faithful: bool
) -> tuple[sub.DataGeometry, dict[str, np.ndarray] | None]:
    """:func:`_data_geometry`, cached (the correct mode: seconds, a spinner is enough)."""
    return _data_geometry(subject, eps, token_set, faithful)


#: Faithful geometries kept per process (each a minute or more to compute on 2 cores; read-only once stored).
FAITHFUL_KEPT = 16
FAITHFUL_MEMO = Memo("subspace-faithful", FAITHFUL_KEPT)


def data_geometry_for(subject: Subject, eps: float, token_set: str,
                      faithful: bool) -> tuple[sub.DataGeometry, dict[str, np.ndarray] | None]:
    """:func:`cached_data_geometry` for the correct mode; the faithful one (a pass padded to 512
    positions, then the hand-made attention of every layer) is computed outside any Streamlit cache
    under a progress bar with the time left and *Cancel* (:func:`bertgeom.ui.widgets.progress`; no
    element is ever made inside a cached function, whose replay would crash), then kept per process."""
    if not faithful:
        return cached_data_geometry(subject, eps, token_set, faithful)

    def compute():
        with progress("Faithful mode: the model on the input padded to 512 positions, then the official code's "
                      "attention layer by layer…") as update:
            return _data_geometry(subject, eps, token_set, True, progress=update)

    key = faithful_geometry_key(subject.model_id, subject.loaded.weights_hash, subject.text, eps, token_set)
    return cached(key, compute,
                  memo=FAITHFUL_MEMO, disk=None)


@st.cache_data(max_entries=16, show_spinner=False, hash_funcs=BY_SUBJECT)
def cached_faithful_layer(subject: Subject, layer: int) -> np.ndarray:
    """The official code's attention ``[H, T, T]`` (float32) of one layer for the current input,
    from the next layer's output as that code read it (unpadded, to sit beside the model's map)."""
    trace = subject.trace
    lw = subject.loaded.layer_weights[layer]
    return att.faithful_attention(faithful_input(trace.hidden_states, layer), lw).astype(np.float32)


@st.cache_data(max_entries=32, show_spinner=False, hash_funcs=BY_SUBJECT)
def cached_joint_qk(subject: Subject, layer: int, head: int, normalize: bool, faithful: bool) -> sub.JointQKProjection:
    """Joint 2-D PCA of one head's queries and keys (correct, or the faithful projections)."""
    trace = subject.trace
    lw = subject.loaded.layer_weights[layer]
    if faithful:
        Q, K, _ = att.faithful_qkv(faithful_input(trace.hidden_states, layer), lw)
    else:
        Q, K, _ = att.project_qkv(trace.hidden_states[layer], lw, bias=True)
    return sub.joint_qk_pca(Q[head], K[head], n_components=2, normalize=normalize)


def across_inputs(loaded, items: Sequence[InputItem], layer: int, head: int, *, eps: float = 1e-3,
                  token_set: str = "all") -> AcrossInputs:
    """D1-D3 of head ``(layer, head)`` over a set of inputs (the ``subspace-across`` view): the model
    runs over the set with a progress bar the first time; afterwards the result comes from memory
    or from the disk cache (for the shipped set at the defaults, prepared ahead)."""
    return run_view(SUBSPACE_ACROSS, *_across_args(loaded, items, layer, head, eps, token_set))


def _across_args(loaded, items, layer: int, head: int, eps: float, token_set: str) -> tuple:
    return loaded, tuple(items), int(layer), int(head), float(eps), token_set


def across_ready(loaded, items: Sequence[InputItem], layer: int, head: int, *,
                 eps: float = 1e-3, token_set: str = "all") -> bool:
    """True when :func:`across_inputs` would answer without running the model (memory or disk)."""
    return SUBSPACE_ACROSS.ready(*_across_args(loaded, items, layer, head, eps, token_set))


def across_pending(loaded, items: Sequence[InputItem], layer: int, head: int, *,
                   eps: float = 1e-3, token_set: str = "all") -> bool:
    """True when the background preparation is going to write this head's result."""
    from bertgeom.ui.prepared_cache import pending

    return pending(SUBSPACE_ACROSS.key_of(*_across_args(loaded, items, layer, head, eps, token_set)))
