"""Head disabling over a set of inputs (Kovaleva et al. 2019 §4.6, Figure 8, on a set).

Every head is disabled on its own (its attention replaced by the uniform ``1/L`` over real tokens,
:func:`bertgeom.analysis.ablation.sweep_single_heads`) on every input of a labelled set, and the
model's answers are kept per (input, head).  Over the set, per head ``(l, h)``:

* ``accuracy[l, h] = mean_n 1[argmax p_n^{(l,h)} = y_n]`` and its change from the intact model;
* ``true_prob[l, h] = mean_n p_n^{(l,h)}(y_n)``, the mean probability of the true class, and its
  change (a softer measure that moves before any prediction flips).

For an encoder without a classifier the measure is ``mean_n (1 − cos(CLS_n^{(l,h)}, CLS_n))``, how
far the final [CLS] vector moves.  Kovaleva report that disabling single heads rarely hurts and
sometimes helps; this grid shows which heads of this model are the exceptions.

Cost: one pass per head per input (batched, resuming at the disabled layer).  Through the
``head-sweep`` view (:data:`bertgeom.sets.views.HEAD_SWEEP`) each input's sweep is cached on disk by
(model weights, input), so enlarging the set reuses what was computed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from bertgeom.analysis.ablation import cls_cosine, sweep_single_heads
from bertgeom.inputs import InputError, encode_input
from bertgeom.sets.inputs import InputItem

__all__ = ["sweep_of_input", "sweep_over_set", "summarise_sweeps", "stratified"]


def stratified(items: Sequence[InputItem], per_class: int) -> tuple[InputItem, ...]:
    """The first ``per_class`` inputs of every label, in set order (unlabelled inputs count as one class)."""
    seen: dict = {}
    out = []
    for it in items:
        if seen.get(it.label, 0) < per_class:
            seen[it.label] = seen.get(it.label, 0) + 1
            out.append(it)
    return tuple(out)


def sweep_of_input(loaded, item: InputItem) -> dict[str, np.ndarray]:
    """One input's single-head sweep, computed (the ``head-sweep`` view's computation): ``probs [L, H, C]``
    and ``base_probs [C]`` for a classifier, ``cos [L, H]`` (final [CLS] cosine to the intact model's)
    in every case."""
    from bertgeom.probabilities import class_probabilities

    enc = encode_input(loaded, item.text)
    sw = sweep_single_heads(loaded, enc.input_ids)
    out = {"cos": cls_cosine(sw.cls, sw.base_cls[None, None]).astype(np.float32)}
    if sw.logits is not None:
        out["probs"] = class_probabilities(loaded, sw.logits).astype(np.float32)  # calibrated
        out["base_probs"] = class_probabilities(loaded, sw.base_logits).astype(np.float32)
    return out


def sweep_over_set(loaded, items: Sequence[InputItem], progress: Callable[[int, int], None] | None = None,
                   *, sweep: Callable[..., Mapping[str, np.ndarray]] = sweep_of_input,
                   around: Callable[[], AbstractContextManager] = nullcontext) -> dict[str, np.ndarray]:
    """Stack ``sweep(loaded, item)`` (default :func:`sweep_of_input`; the ``head-sweep`` view's
    ``HEAD_SWEEP.get`` keeps each on disk) over ``items`` (inputs that cannot be encoded are listed
    in ``err_names``); ``around()`` is entered around each input's sweep (e.g. a slot of a work
    queue, so a long set never holds one for minutes)."""
    sweeps, names, labels, errors = [], [], [], []
    for i, it in enumerate(items):
        try:
            with around():
                sweeps.append(sweep(loaded, it))
            names.append(it.name)
            labels.append(it.label or "")
        except InputError as exc:
            errors.append((it.name, str(exc)))
        if progress:
            progress(i + 1, len(items))
    if not sweeps:
        raise ValueError("no input of the set could be analysed")
    arrays = {"names": np.array(names, dtype=str), "labels": np.array(labels, dtype=str),
              "cos": np.stack([s["cos"] for s in sweeps]),
              "err_names": np.array([n for n, _ in errors], dtype=str),
              "err_msgs": np.array([m for _, m in errors], dtype=str)}
    if "probs" in sweeps[0]:
        arrays["probs"] = np.stack([s["probs"] for s in sweeps])
        arrays["base_probs"] = np.stack([s["base_probs"] for s in sweeps])
    return arrays


def summarise_sweeps(arrays: dict, class_order: Sequence[str] = ()) -> dict[str, np.ndarray | float]:
    """Per-head set measures from :func:`sweep_over_set`'s arrays (see module docstring).

    Classifier: ``accuracy``, ``d_accuracy``, ``true_prob``, ``d_true_prob`` (``[L, H]``) and the
    intact model's ``base_accuracy`` and ``base_true_prob``; always ``d_cls = mean (1 − cos)``."""
    out: dict = {"d_cls": (1.0 - arrays["cos"].astype(np.float64)).mean(axis=0), "n": int(arrays["cos"].shape[0])}
    if "probs" not in arrays or not class_order:
        return out
    order = list(class_order)
    labels = [str(x) for x in arrays["labels"]]
    if any(lab not in order for lab in labels):
        raise ValueError("every input needs one of the model's classes as its label")
    y = np.array([order.index(lab) for lab in labels])
    P = arrays["probs"].astype(np.float64)  # [N, L, H, C]
    B = arrays["base_probs"].astype(np.float64)  # [N, C]
    n = np.arange(y.size)
    correct = P.argmax(-1) == y[:, None, None]
    true_p = np.take_along_axis(P, y[:, None, None, None], -1)[..., 0]
    out["base_accuracy"] = float((B.argmax(-1) == y).mean())
    out["base_true_prob"] = float(B[n, y].mean())
    out["accuracy"] = correct.mean(axis=0)
    out["true_prob"] = true_p.mean(axis=0)
    out["d_accuracy"] = out["accuracy"] - out["base_accuracy"]
    out["d_true_prob"] = out["true_prob"] - out["base_true_prob"]
    return out
