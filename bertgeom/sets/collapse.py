"""Over a set: Dong et al.'s rank-collapse curves of every input (four path variants) and Michel et
al.'s head importance with the set's task, each in padded batches with a ``(done, total)`` progress
callback, as arrays the cache keeps (:func:`bertgeom.sets.keys.rank_collapse_set_key`,
:func:`bertgeom.sets.keys.head_importance_set_key`) and the background preparation writes.

The task behind the importance: for a classifier, the cross-entropy of each input's own label (the
variant class of a labelled genome), or of the predicted class where an input has no label the model
knows; for an encoder without a classifier, the masked-word loss of
:func:`bertgeom.analysis.gradients.head_importance`.

References: Dong et al. 2021 (arXiv:2103.03404) Fig. 2 (mean ± std over a batch of texts); Michel et
al. 2019 (arXiv:1905.10650) §4.1 (the expectation over the data); docs/methods.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from bertgeom.inputs import InputError, InputItem, encode_input

__all__ = ["rank_collapse_over_set", "head_importance_over_set", "BATCH"]

#: Inputs per padded forward.
BATCH = 8
Progress = Callable[[int, int], None]


def _batches(loaded, items: Sequence[InputItem], errors: list, batch: int) -> Iterator[list]:
    """Lists of ``(item, encoded)`` of up to ``batch`` inputs; inputs that cannot be read go to ``errors``."""
    pending = []
    for item in items:
        try:
            pending.append((item, encode_input(loaded, item.text)))
        except InputError as exc:
            errors.append((item.name, str(exc)))
        if len(pending) >= batch:
            yield pending
            pending = []
    if pending:
        yield pending


def _padded(loaded, encoded) -> tuple[np.ndarray, np.ndarray]:
    from bertgeom.trace import pad_batch

    ids, mask = pad_batch(loaded, encoded)
    return ids.numpy(), mask.numpy()


def rank_collapse_over_set(loaded, items: Sequence[InputItem], token_set: str = "all", *, norm: str = "l1_inf",
                           progress: Progress | None = None, batch: int = BATCH) -> dict[str, np.ndarray]:
    """``curves [N, V, L+1]`` (the ratio per input, variant and hidden state; variants in the order of
    :data:`~bertgeom.analysis.collapse.PATH_VARIANTS`), ``variants``, ``names``, ``labels`` of the
    analysed inputs and ``errors`` (name: message) of the others."""
    from bertgeom.analysis.collapse import PATH_VARIANTS, rank_collapse_curves

    errors: list = []
    curves, names, labels = [], [], []
    done = 0
    for chunk in _batches(loaded, items, errors, batch):
        encoded = [e for _, e in chunk]
        ids, mask = _padded(loaded, encoded)
        rows = np.stack([e.token_rows(token_set, ids.shape[1]) for e in encoded]) & mask.astype(bool)
        res = rank_collapse_curves(loaded, ids, mask, row_mask=rows, norm=norm)
        curves.append(np.stack([res[v] for v in PATH_VARIANTS], axis=1))
        names += [it.name for it, _ in chunk]
        labels += [it.label or "" for it, _ in chunk]
        done += len(chunk)
        if progress:
            progress(done + len(errors), len(items))
    if progress:
        progress(len(items), len(items))
    return {"curves": np.concatenate(curves) if curves else np.zeros((0, len(PATH_VARIANTS), 0)),
            "variants": np.array(list(PATH_VARIANTS)), "names": np.array(names, dtype=str),
            "labels": np.array(labels, dtype=str),
            "errors": np.array([f"{n}: {m}" for n, m in errors], dtype=str)}


def head_importance_over_set(loaded, items: Sequence[InputItem], *, progress: Progress | None = None,
                             batch: int = BATCH) -> dict[str, np.ndarray]:
    """``importance [N, L, H]`` (``|∂L/∂ξ_h|`` per input), ``loss [N]``, ``used_label [N]`` (whether the
    input's own label was the target), the ``objective``, ``names``, ``labels`` and ``errors``. The
    set's importance is the mean over inputs (Michel's expectation)."""
    from bertgeom.analysis.gradients import head_importance

    classes = list(loaded.labels or ())
    errors: list = []
    imps, losses, used, names, labels = [], [], [], [], []
    objective = ""
    done = 0
    for chunk in _batches(loaded, items, errors, batch):
        encoded = [e for _, e in chunk]
        ids, mask = _padded(loaded, encoded)
        # a classifier: each input's own label; one the model does not know takes its predicted class
        targets = [classes.index(it.label) if it.label in classes else -1 for it, _ in chunk] if classes else None
        content = np.zeros(ids.shape, dtype=bool)
        for b, e in enumerate(encoded):
            content[b, :e.n_tokens] = e.content_mask
        if targets is not None and any(t < 0 for t in targets):
            res = _importance_mixed(loaded, ids, mask, targets)
        else:
            res = head_importance(loaded, ids, mask, targets=targets, content_mask=content)
        objective = res.objective
        imps.append(res.importance)
        losses.append(res.loss)
        used += [targets is not None and t >= 0 for t in (targets or [-1] * len(chunk))]
        names += [it.name for it, _ in chunk]
        labels += [it.label or "" for it, _ in chunk]
        done += len(chunk)
        if progress:
            progress(done + len(errors), len(items))
    if progress:
        progress(len(items), len(items))
    L, H = loaded.num_layers, loaded.num_heads
    return {"importance": np.concatenate(imps) if imps else np.zeros((0, L, H)),
            "loss": np.concatenate(losses) if losses else np.zeros(0),
            "used_label": np.array(used, dtype=bool), "objective": np.array(objective),
            "names": np.array(names, dtype=str), "labels": np.array(labels, dtype=str),
            "errors": np.array([f"{n}: {m}" for n, m in errors], dtype=str)}


def _importance_mixed(loaded, ids, mask, targets):
    """Importance of a batch where some inputs have a known label and some do not: the unknown ones
    take their predicted class (one forward without gradients to read it)."""
    from bertgeom.analysis.gradients import head_importance
    from bertgeom.forward import run_forward

    logits = run_forward(loaded, ids, mask, logits_only=True).logits.float().cpu().numpy()
    filled = [t if t >= 0 else int(np.argmax(lg)) for t, lg in zip(targets, logits)]
    return head_importance(loaded, ids, mask, targets=filled)
