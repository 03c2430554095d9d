"""Sets of inputs for the "over many inputs" analyses, and a batched map over them.

A set is a tuple of :class:`~bertgeom.inputs.InputItem` (name, text, label). Each input kind
ships its own default set (:attr:`bertgeom.inputs.InputKind.shipped_set`: the example sentences
for text models, the held-out real genomes for the variant models) and reads a user's uploaded
set (:attr:`~bertgeom.inputs.InputKind.read_set`). :func:`map_over_set` runs the model in batches
(one forward pass per input) and applies a *reduction* to each trace, so only small per-input results are kept, never
the full attention of every input. Results over a set are cached by :mod:`bertgeom.cache` under
the keys of :mod:`bertgeom.sets.keys`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bertgeom.models import LoadedModel
from bertgeom.inputs import TEXT, EncodedInput, InputError, InputItem, encode_input, input_kind_of
from bertgeom.trace import Trace, run_batch


def sentence_set() -> tuple[InputItem, ...]:
    """The shipped English sentences (unlabelled)."""
    return TEXT.shipped_set()


def shipped_set(input_kind: str) -> tuple[InputItem, ...]:
    """The default set of a model's input kind (what its :class:`~bertgeom.inputs.InputKind` ships)."""
    return input_kind_of(input_kind).shipped_set()


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
