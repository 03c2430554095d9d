"""Cached computations of the Cone Index per Layer page.

* per input (model id, input, token set, padding, row form): the cone index of every stream
  and the attention entropies (``st.cache_data``; the model's trace comes from the shared
  trace cache, so the model is not run again unless the input is padded to 512);
* per set: the ``cone-set`` and ``class-entropy`` views (:mod:`bertgeom.sets.views`: one key, one
  computation, a typed result; the first prepared ahead for the shipped set) through
  :func:`bertgeom.ui.view_runner.run_view`;
* projections of the per-layer [CLS] / mean-pooled vectors (keyed by the data themselves).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertgeom.analysis.probe import ProbeScores
from bertgeom.analysis.projections import Separability
from bertgeom.sets import cone as conesets
from bertgeom.sets.inputs import InputItem
from bertgeom.sets.views import CLASS_ENTROPY, CONE_SET
from bertgeom.subject import Subject
from bertgeom.ui.cache import BY_SUBJECT
from bertgeom.ui.view_runner import run_view
from bertgeom.ui.workqueue import heavy


def _encoded_and_hidden(subject: Subject, pad_to: int | None):
    """(encoded input, hidden [L+1, n, D], attention mask [n], attentions or None)."""
    trace = subject.trace
    enc = trace.encoded
    if not pad_to:
        return enc, trace.hidden_states, np.ones(enc.n_tokens, np.int64), trace.attentions
    hidden, mask, _ = conesets.padded_forward(subject.loaded, [enc], pad_to)
    return enc, hidden[0], mask[0], None


@st.cache_data(max_entries=32, show_spinner="Computing the cone index of every stream…", hash_funcs=BY_SUBJECT)
def input_cones(subject: Subject, token_set: str, pad_to: int | None, unit_rows: bool = True) -> dict:
    """Cone index per layer and stream of the subject's input (see :func:`bertgeom.sets.cone.input_cones`)."""
    enc, hidden, mask, attentions = _encoded_and_hidden(subject, pad_to)
    rows = conesets.rows_for(enc, token_set, hidden.shape[1])
    res = conesets.input_cones(hidden, subject.loaded.layer_weights, rows, attention_mask=mask,
                               attentions=attentions, faithful=True, unit_rows=unit_rows)
    res["n_positions"] = np.asarray(hidden.shape[1])
    return res


@st.cache_data(max_entries=16, show_spinner="Computing attention entropies (eigenvalues of every head)…",
               hash_funcs=BY_SUBJECT)
def input_entropies(subject: Subject, pad_to: int | None) -> dict:
    """Faithful and properly normalised attention entropies ``[L, H]`` of the subject's input."""
    trace = subject.trace
    A, keep = conesets.attention_code_matrix(trace.attentions, trace.encoded.is_sep, pad_to)
    return conesets.entropy_curves(A, keep)


def set_cones(loaded, items: tuple[InputItem, ...], token_set: str, pad_to: int | None) -> conesets.ConeSet:
    """Per-input cone profiles, streams and [CLS]/mean vectors over a set (the ``cone-set`` view):
    from memory, else from disk (prepared ahead for the shipped set, or written by an earlier visit),
    else computed with a progress bar (drawn by :func:`bertgeom.ui.view_runner.run_view`)."""
    return run_view(CONE_SET, loaded, tuple(items), token_set, pad_to)


def class_entropies(loaded, items: tuple[InputItem, ...], label: str, pad_to: int | None,
                    correct_only: bool) -> conesets.ClassEntropies:
    """Entropies ``[L, H]`` of the class-mean attention (the official code's recipe; the
    ``class-entropy`` view), from memory or disk when computed before, else computed with a progress bar."""
    return run_view(CLASS_ENTROPY, loaded, tuple(items), label, pad_to, bool(correct_only))


@st.cache_data(max_entries=64, show_spinner="Projecting the vectors…")
def projection(X: np.ndarray, method: str, n_components: int):
    """Seeded PCA / UMAP / t-SNE of ``X [N, D]`` (keyed by the data)."""
    from bertgeom.analysis.projections import project

    with heavy(f"the {method} projection"), conesets.single_threaded():
        return project(X, method, n_components)


@st.cache_data(max_entries=32, show_spinner=False)
def separability(features: np.ndarray, labels: np.ndarray) -> Separability:
    """Silhouette and between/within variance ratio per layer of ``features [L+1, N, D]``."""
    from bertgeom.analysis.projections import separability_per_layer

    with conesets.single_threaded():
        return separability_per_layer(features, labels)


@st.cache_data(max_entries=16, show_spinner="Training one small probe per layer (held out)…")
def probe(features: np.ndarray, labels: np.ndarray, positive: str) -> ProbeScores:
    """:func:`bertgeom.analysis.probe.one_vs_all_probe` of ``features [L+1, N, D]``, cached."""
    from bertgeom.analysis.probe import one_vs_all_probe

    with heavy("training the probes"), conesets.single_threaded():
        return one_vs_all_probe(features, labels, positive)


@st.cache_data(max_entries=32, show_spinner=False)
def pareto(X: np.ndarray, n_components: int) -> np.ndarray:
    from bertgeom.analysis.projections import pca_pareto

    with conesets.single_threaded():
        return pca_pareto(X, n_components)[0]
