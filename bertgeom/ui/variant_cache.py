"""Cached computations of the Variant Classifier page."""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertgeom.ui.cache import cached_model, get_trace
from bertgeom.ui.workqueue import heavy, queued


@st.cache_data(max_entries=8, show_spinner="Reading the records…")
def split_records(text: str) -> list[tuple[str, str]]:
    """``(name, single-record FASTA)`` for every record of the input; a bad record among several
    keeps its place with an empty text (its error shows in the batch table); input-level errors,
    and a single bad record, raise."""
    from bertgeom.genome.fasta import RecordError, SequenceInputError, parse_sequences
    from bertgeom.variant import MAX_GENOME_INPUT_BYTES

    recs = parse_sequences(text, max_bytes=MAX_GENOME_INPUT_BYTES, tolerant=True)
    if len(recs) == 1 and isinstance(recs[0], RecordError):
        raise SequenceInputError(recs[0].message)
    return [(r.name, "" if isinstance(r, RecordError) else f">{r.name}\n{r.sequence}") for r in recs]


#: Records one request classifies on the page (the CLI has no limit): ~2 s each on a 2-core server.
MAX_BATCH_RECORDS = 200


@st.cache_data(max_entries=8, show_spinner=False)
@queued("classifying the records")
def classify_records(model_id: str, text: str, limit: int = MAX_BATCH_RECORDS, _progress=None) -> list[dict]:
    """One CSV-ready row per record, the first ``limit`` records (bad records carry their error);
    ``_progress(i, n)`` is called after each record (not part of the cache key)."""
    from bertgeom.genome.fasta import parse_sequences
    from bertgeom.variant import MAX_GENOME_INPUT_BYTES
    from bertgeom.variant.predict import classify_stream, fast_classifier

    loaded = cached_model(model_id)
    records = parse_sequences(text, max_bytes=MAX_GENOME_INPUT_BYTES, tolerant=True)[:limit]
    precision = fast_classifier(loaded, "cpu").precision  # the policy's (bf16 on a CPU with bf16 units)
    rows = []
    for i, p in enumerate(classify_stream(loaded, records, batch_size=8, precision=precision), 1):
        rows.append(p.row(loaded.labels, loaded.weights_hash, precision))
        if _progress is not None:
            _progress(i, len(records))
    return rows


@st.cache_data(max_entries=16, show_spinner="Integrated gradients (a few forward and backward passes)…")
def integrated_gradients_for(model_id: str, text: str, target: int, steps: int) -> tuple[np.ndarray, str, bool]:
    """``(attributions, completeness summary, complete)``: see ``integrated_gradients_checked``."""
    from bertgeom.variant.explain import integrated_gradients_checked

    trace = get_trace(model_id, text)  # before taking a slot (see bertgeom.ui.workqueue)
    with heavy("integrated gradients"):
        res = integrated_gradients_checked(cached_model(model_id), trace.encoded.input_ids, target, steps=steps)
    return res.attributions, res.summary(), res.complete


@st.cache_data(max_entries=64, show_spinner=False)
def probabilities_for(model_id: str, aligned_spike: str) -> np.ndarray:
    from bertgeom.variant.explain import probabilities_for_spike

    return probabilities_for_spike(cached_model(model_id), aligned_spike)
