"""Cached access to models and traces for the app.

The model is loaded once per server process (``st.cache_resource``: a shared object that
nobody mutates). A paste is read once into records by its input kind (:func:`paste_records`, per
(input kind, normalised paste)); traces are cached per (model id, record digest), bounded, so
picking another layer or head, or another page showing the same record, never re-runs the model;
they too are shared read-only objects (``st.cache_resource`` and
:meth:`~bertgeom.trace.Trace.read_only`), because ``st.cache_data`` would pickle a genome's
52 MB of attention on every write and unpickle a fresh copy on *every read*, holding the
interpreter lock that all sessions share (a sixth of the server's busy time under 6 sessions).
Everything else a page computes more than once is a view of :mod:`bertgeom.sets.views` (memory, then
disk), which every page runs through :func:`bertgeom.ui.view_runner.run_view`; see
docs/development.md (Caching: one cache).
"""

from __future__ import annotations

import streamlit as st

from bertgeom.models import LoadedModel, load_model
from bertgeom.inputs import Record, input_kind_of, normalise_text
from bertgeom.subject import Subject
from bertgeom.trace import Trace, run_trace
from bertgeom.ui.workqueue import call_heavy, free_slot_or_raise, heavy


@st.cache_resource(show_spinner="Loading the model (once per server)…", max_entries=4)
def cached_model(model_id: str) -> LoadedModel:
    """The shared, eval-mode model for ``model_id``.

    After loading, the objects alive so far (modules, weights, libraries) are moved out of the
    garbage collector's reach (``gc.freeze``): they live as long as the server, and a full collection
    would otherwise walk all of them while every session's script waits for the interpreter lock.
    """
    import gc

    loaded = load_model(model_id)
    gc.freeze()
    return loaded


@st.cache_resource(max_entries=8, show_spinner="Reading the records…")
def cached_records(kind_name: str, text: str) -> tuple[Record, ...]:
    """The paste ``text`` read into records by the input kind ``kind_name``
    (:attr:`~bertgeom.inputs.InputKind.parse`), once; frozen records, shared read-only. An input
    nothing can be read of raises :class:`~bertgeom.inputs.InputError` (not cached)."""
    return input_kind_of(kind_name).parse(text)


def paste_records(loaded: LoadedModel, text: str) -> tuple[Record, ...]:
    """The records of the paste ``text`` as ``loaded``'s input kind reads them, parsed once per
    (kind, normalised paste): every page, the trace, the batch table and the notes read these."""
    return cached_records(loaded.spec.input_kind, normalise_text(text))


#: How the Streamlit caches hash a loaded model: by its registry id and weights hash, never the
#: model itself (a cached function takes the model the page resolved, not its id to resolve again).
BY_MODEL = {LoadedModel: lambda m: (m.spec.id, m.weights_hash)}


@st.cache_resource(max_entries=24, show_spinner="Running the model…", hash_funcs=BY_MODEL)
def cached_trace(loaded: LoadedModel, digest: str, _record: Record) -> Trace:
    """One forward pass for (model, record), keyed by the model (:data:`BY_MODEL`) and the record's
    ``digest`` (the record itself is not hashed again), shared read-only; later reruns read it from
    the cache. Pure: it takes a free slot or raises ``SlotBusy``; call it through
    :func:`get_record_trace`."""
    with free_slot_or_raise():
        return run_trace(loaded, _record).read_only()


def get_record_trace(loaded: LoadedModel, record: Record) -> Trace:
    """Trace of one record of a paste (:func:`paste_records`) under the model the page resolved,
    keyed by the record's digest. A miss that finds the queue busy waits here, outside the cache,
    with the 'Queued' notice (see bertgeom.ui.workqueue)."""
    return call_heavy(cached_trace, loaded, record.digest, record, what="running the model on this input")


def trace_of(loaded: LoadedModel, text: str) -> Trace:
    """Trace of the first record of the paste ``text`` under ``loaded`` (the view every generic page
    shows of a paste; :func:`bertgeom.inputs.records_note` says so when the paste holds more)."""
    return get_record_trace(loaded, paste_records(loaded, text)[0])


def get_trace(model_id: str, text: str) -> Trace:
    """:func:`trace_of` under the registered model ``model_id`` (the tour, which opens its own)."""
    return trace_of(cached_model(model_id), text)


def subject_of(model_id: str, text: str) -> Subject:
    """The :class:`~bertgeom.subject.Subject` of the paste ``text`` under ``model_id``: the model
    (resolved here, once), the paste's first record and its trace, each from its cache
    (:func:`paste_records`, :func:`get_record_trace`). A page resolves it once and hands it to every tab."""
    loaded = cached_model(model_id)
    record = paste_records(loaded, text)[0]
    return Subject(loaded, record, get_record_trace(loaded, record), model_id, text)


#: How the Streamlit caches hash a subject: by its key (weights hash, record digest), never the
#: model or the trace themselves.
BY_SUBJECT = {Subject: lambda s: s.key}


@st.cache_data(max_entries=24, show_spinner="Computing per-head features…", hash_funcs=BY_SUBJECT)
def cached_head_features(subject: Subject):
    """All per-head features (:func:`bertgeom.analysis.heads.head_features`) of the subject's record."""
    from bertgeom.analysis.heads import head_features

    with heavy("per-head features"):
        return head_features(subject.trace.attentions, subject.trace.encoded)
