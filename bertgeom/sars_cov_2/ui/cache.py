"""Cached computations of the Variant Classifier page.

Every function here is a pure cached call: none creates or updates a Streamlit element (a cached
function's elements are replayed on each cache hit, and one that wrote into an element made outside
it raised ``CacheReplayClosureError`` on every rerun after a batch table, and at once in a second
browser). Progress bars and the queue's notice belong to the page; heavy work takes its slot with
:func:`~bertgeom.ui.workqueue.free_slot_or_raise` and the page calls it through
:func:`~bertgeom.ui.workqueue.call_heavy`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import streamlit as st

from bertgeom.inputs import Record
from bertgeom.models import LoadedModel
from bertgeom.ui.cache import BY_MODEL
from bertgeom.ui.workqueue import BATCH, free_slot_or_raise

#: Records one request classifies on the page (the CLI has no limit): ~2 s each on a 2-core server.
MAX_BATCH_RECORDS = 200
#: Records per cached chunk: one padded forward pass, and one heavy-work slot, each.
BATCH_CHUNK = 8


def batch_chunks(records: Sequence[Record], limit: int = MAX_BATCH_RECORDS,
                 size: int = BATCH_CHUNK) -> list[tuple[Record, ...]]:
    """The first ``limit`` records of a paste (:func:`~bertgeom.ui.cache.paste_records`) in chunks
    of ``size``: what :func:`classify_chunk` classifies at once."""
    head = list(records[:limit])
    return [tuple(head[i:i + size]) for i in range(0, len(head), size)]


def digests(chunk: Sequence[Record]) -> tuple[str, ...]:
    """The key of a chunk's rows: its records' digests, in order."""
    return tuple(r.digest for r in chunk)


@st.cache_data(max_entries=256, show_spinner=False, hash_funcs=BY_MODEL)
def classify_chunk(loaded: LoadedModel, chunk_digests: tuple[str, ...], _chunk: tuple[Record, ...]) -> list[dict]:
    """One CSV-ready row per record of ``_chunk`` (bad records carry their error; the reading notes
    of the others are in their ``notes``), keyed by the records' digests (:func:`digests`), computed
    in a heavy-work slot of :data:`~bertgeom.ui.workqueue.BATCH` priority, so a single genome that
    waits goes first between two chunks. Call it through ``call_heavy``."""
    from bertgeom.sars_cov_2.genome.fasta import RecordError, SequenceRecord
    from bertgeom.sars_cov_2.variant.predict import classify_stream, fast_classifier

    if chunk_digests != digests(_chunk):
        raise ValueError("classify_chunk's key is not its records' digests")
    recs = [RecordError(r.name, i, r.error) if r.error else SequenceRecord(r.name, r.content, list(r.notes))
            for i, r in enumerate(_chunk)]
    fc = fast_classifier(loaded, "cpu")  # the policy's backend and precision for this CPU (docs/speed.md)
    precision, backend = fc.precision, fc.backend
    with free_slot_or_raise(BATCH):
        import torch

        streams = max(1, torch.get_num_threads())  # the slot's threads (every core when alone), one per stream
        return [p.row(loaded.labels, loaded.weights_hash, precision, backend)
                for p in classify_stream(loaded, recs, batch_size=len(recs), precision=precision, streams=streams,
                                         backend=backend)]


def name_rows_apart(rows: list[dict]) -> tuple[list[dict], str]:
    """Batch rows whose names an earlier record already had, told apart (``name#2``; the header's
    name stays in ``original_name``), as in the CLI: run over the whole table, after its chunks.
    Returns the rows and the one sentence on the renamed ones (empty when none)."""
    from bertgeom.safety import NameDeduper

    names = NameDeduper()
    return [names.row(dict(r)) for r in rows], names.notice()


@st.cache_data(max_entries=16, show_spinner="Integrated gradients (a few forward and backward passes)…",
               hash_funcs=BY_MODEL)
def integrated_gradients_for(loaded: LoadedModel, input_ids: np.ndarray, target: int, steps: int,
                             max_steps: int = 128) -> tuple[np.ndarray, str, bool]:
    """``(attributions, completeness summary, complete)`` of the record's token ids: see
    ``integrated_gradients_checked`` (``steps`` nodes first, refined up to ``max_steps``). Keyed by
    the ids, not the text, so it calls no other queued cached function while it holds a slot (see
    bertgeom.ui.workqueue). Call it through ``call_heavy``."""
    from bertgeom.analysis.attributions import integrated_gradients_checked

    with free_slot_or_raise():
        res = integrated_gradients_checked(loaded, input_ids, target, steps=steps, max_steps=max(steps, max_steps))
    return res.attributions, res.summary(), res.complete


@st.cache_data(max_entries=64, show_spinner=False, hash_funcs=BY_MODEL)
def logits_for(loaded: LoadedModel, aligned_spike: str) -> np.ndarray:
    """Logits ``[C]`` of an edited aligned spike (the what-if; one light forward pass): the page
    turns them into calibrated probabilities and log-odds (:mod:`bertgeom.sars_cov_2.variant.predict`)."""
    from bertgeom.sars_cov_2.variant.predict import logits_for_ids

    ids, _ = loaded.tokenizer.encode(aligned_spike, max_length=None)
    return logits_for_ids(loaded, ids[None, :])[0]
