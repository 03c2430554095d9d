"""Sets of inputs for the "over many inputs" analyses, and a batched, disk-cached map over them.

A set is a tuple of :class:`InputItem` (name, text, label). The shipped sets are the example
sentences (no labels) for text models and the held-out real genomes of
``validation_small`` (labelled with the 8 classes) for spike models; users may upload a
labelled FASTA. :func:`map_over_set` runs the model in batches (one forward pass per input)
and applies a *reduction* to each trace, so only small per-input results are kept, never
the full attention of every input.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertgeom.models import LoadedModel
from bertgeom.inputs import EncodedInput, InputError, encode_input
from bertgeom.trace import Trace, run_batch


@dataclass(frozen=True)
class InputItem:
    """One input of a set: a display name, the text the model reads, an optional class label."""

    name: str
    text: str
    label: str | None = None


def sentence_set() -> tuple[InputItem, ...]:
    """The shipped English sentences (unlabelled)."""
    from bertgeom.examples import example_sentences

    return tuple(InputItem(f"s{i + 1}", s, None) for i, s in enumerate(example_sentences()))


def genome_set(which: str = "validation_small") -> tuple[InputItem, ...]:
    """Shipped real genomes with their class: ``validation_small`` (~35) or ``demo`` (one per class)."""
    from bertgeom.genome.dataset import load_demo_genomes, load_validation_small

    pairs = load_validation_small() if which == "validation_small" else load_demo_genomes()
    return tuple(InputItem(rec.name, f">{rec.name}\n{rec.sequence}", meta.get("class") or None) for rec, meta in pairs)


def shipped_set(input_kind: str) -> tuple[InputItem, ...]:
    """The default set for a model's input kind."""
    return genome_set() if input_kind == "spike" else sentence_set()


def labelled_fasta_set(fasta: bytes | str, labels_tsv: bytes | str | None = None) -> tuple[InputItem, ...]:
    """A user's set: FASTA records, labelled from a TSV (``name`` + ``label``/``class`` columns)
    or, without a TSV, from a ``|label`` suffix in each header (``>seq1|omicron``)."""
    import csv
    import io

    from bertgeom.genome.classes import label_to_class
    from bertgeom.genome.fasta import SequenceInputError, parse_sequences

    try:
        records = parse_sequences(fasta)
    except SequenceInputError as exc:
        raise InputError(str(exc)) from None
    labels: dict[str, str] = {}
    if labels_tsv:
        text = labels_tsv.decode("utf-8", "replace") if isinstance(labels_tsv, bytes) else labels_tsv
        reader = csv.DictReader(io.StringIO(text), delimiter="\t")
        col = next((c for c in ("label", "class", "cls") if c in (reader.fieldnames or [])), None)
        if "name" not in (reader.fieldnames or []) or col is None:
            raise InputError("The labels file needs a 'name' column and a 'label' (or 'class') column, tab-separated.")
        labels = {row["name"]: row[col] for row in reader}
    items = []
    for rec in records:
        raw = labels.get(rec.name) or (rec.name.rsplit("|", 1)[1] if "|" in rec.name else None)
        label = None
        if raw:
            try:
                label = raw.strip().lower() if raw.strip().lower() in _classes() else label_to_class(raw.strip())
            except ValueError:
                raise InputError(
                    f"'{raw.strip()[:40]}' (record '{rec.name[:40]}') is not one of the classes "
                    f"{', '.join(_classes())} nor a known dataset label."
                ) from None
        items.append(InputItem(rec.name, f">{rec.name}\n{rec.sequence}", label))
    return tuple(items)


def _classes() -> tuple[str, ...]:
    from bertgeom.genome.classes import CLASSES

    return CLASSES


def set_fingerprint(items: Sequence[InputItem]) -> str:
    """Content hash of a set (names, texts, labels), for cache keys and manifests."""
    h = hashlib.sha256()
    for it in items:
        h.update(it.name.encode())
        h.update(b"\0")
        h.update(it.text.encode())
        h.update(b"\0")
        h.update((it.label or "").encode())
        h.update(b"\1")
    return h.hexdigest()[:16]


@dataclass
class SetResult:
    """Per-input reductions over a set, with the inputs that could not be analysed."""

    items: list[InputItem]  # analysed inputs, in set order
    results: list  # reduction output per analysed input
    predicted: list[str | None]  # predicted class per analysed input (None for encoders)
    errors: list[tuple[str, str]]  # (name, message) of inputs that failed

    @property
    def labels(self) -> list[str | None]:
        return [it.label for it in self.items]

    @property
    def correct(self) -> np.ndarray:
        """True where a labelled input was predicted right (False for unlabelled)."""
        return np.array([p is not None and p == it.label for p, it in zip(self.predicted, self.items)], dtype=bool)


def map_over_set(
    loaded: LoadedModel,
    items: Sequence[InputItem],
    reduce: Callable[[Trace, InputItem], object],
    *,
    batch_size: int = 8,
    progress: Callable[[int, int], None] | None = None,
    runner: Callable[[LoadedModel, list[EncodedInput]], list] | None = None,
    max_tokens: int | None = None,
) -> SetResult:
    """Run every input once (batched) and keep ``reduce(result, item)`` of each.

    ``runner(loaded, encoded_batch)`` makes one result per input (default
    :func:`~bertgeom.trace.run_batch`: a :class:`Trace`); any result with a ``predicted``
    attribute works. Inputs that cannot be encoded (bad sequence, failed alignment, longer
    than ``max_tokens``) are listed in ``errors``; they never stop the run.
    """
    runner = runner or run_batch
    ok_items: list[InputItem] = []
    results: list = []
    predicted: list[str | None] = []
    errors: list[tuple[str, str]] = []
    pending: list[tuple[InputItem, EncodedInput]] = []
    done = 0

    def flush() -> None:
        nonlocal done
        if not pending:
            return
        traces = runner(loaded, [e for _, e in pending])
        for (item, _), trace in zip(pending, traces):
            ok_items.append(item)
            results.append(reduce(trace, item))
            predicted.append(trace.predicted)
        done += len(pending)
        pending.clear()
        if progress:
            progress(done + len(errors), len(items))

    for item in items:
        try:
            enc = encode_input(loaded, item.text)
            if max_tokens is not None and enc.n_tokens > max_tokens:
                raise InputError(f"{enc.n_tokens} tokens do not fit in {max_tokens} positions.")
            pending.append((item, enc))
        except InputError as exc:
            errors.append((item.name, str(exc)))
        if len(pending) >= batch_size:
            flush()
    flush()
    if progress:
        progress(len(items), len(items))
    return SetResult(ok_items, results, predicted, errors)


def cache_dir() -> Path:
    """Where disk caches live (``$BERTGEOM_CACHE_DIR`` or ``~/.cache/bertgeom``)."""
    return Path(os.environ.get("BERTGEOM_CACHE_DIR") or Path.home() / ".cache" / "bertgeom")


def disk_cache_path(key_parts: Iterable) -> Path:
    """The ``.npz`` file of :func:`disk_cached_arrays` for ``key_parts`` (a hash of their strings)."""
    key = hashlib.sha256(json.dumps([str(p) for p in key_parts]).encode()).hexdigest()[:24]
    return cache_dir() / f"{key}.npz"


def disk_cached_arrays(key_parts: Iterable, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Return ``compute()`` (a dict of numpy arrays), cached on disk as ``.npz`` under a key.

    The key is a hash of ``key_parts`` (include the model's weights hash, the set's
    fingerprint and every parameter). Files are read with ``allow_pickle=False``.
    """
    path = disk_cache_path(key_parts)
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
    arrays = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.{os.urandom(4).hex()}.tmp.npz")  # unique per writer
        np.savez_compressed(tmp, **arrays)
        os.replace(tmp, path)  # atomic: readers see the old file or the whole new one
    except OSError:
        pass  # a read-only home still works, just without the disk cache
    return arrays
