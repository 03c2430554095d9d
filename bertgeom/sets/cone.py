"""Cone index, streams, [CLS] vectors and attention entropies for one input or over a set.

This is the batch layer of the *Cone Index per Layer* page (Bonino 2025 (arXiv:2502.12033); docs/methods.md §9):

* :func:`input_cones`: cone index of every stream per layer for one input (current input);
* :func:`cone_profiles_over_set`: one batched pass over a set of inputs that keeps, per input,
  the cone-index curve over ``hidden_states[0..L]``, the stream indices, the [CLS] and
  mean-pooled vectors of every layer and the prediction (small arrays only);
* :func:`class_mean_attention` + :func:`entropy_curves`: the official code's entropy recipe
  (class-mean attention zeroed from the first [SEP] on, optionally 512 x 512) next to properly
  normalised entropies;
* :func:`padded_forward`: the model run on inputs padded to a fixed length, so that the
  official code's "all 512 rows, padding included" token set can be reproduced.

Everything returns numpy arrays (no Streamlit). A set's profiles are one typed result,
:class:`ConeSet`, made by one producer, :func:`cone_set`, whether the model ran here
(:func:`cone_profiles_over_set`) or a precompute run is read back
(:meth:`bertgeom.precompute.store.PrecomputeResults.to_cone_set`); :meth:`ConeSet.to_arrays` and
:meth:`ConeSet.from_arrays` store it with ``numpy.savez`` without pickle (files written before the
type existed hold the same keys and still load).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from bertgeom.attention import kept_tokens
from bertgeom.analysis.cone import (
    attention_entropies,
    hidden_state_cone_curve,
    shannon_value_entropy_code,
    stream_cone_indices,
)
from bertgeom.sets.inputs import InputItem, map_over_set
from bertgeom.models import LoadedModel
from bertgeom.inputs import EncodedInput
from bertgeom.trace import forward, pad_batch
from bertgeom.tables import word_for

__all__ = [
    "single_threaded",
    "STREAMS",
    "STREAM_LABELS",
    "rows_for",
    "padded_forward",
    "padded_runner",
    "input_cones",
    "ConeSet",
    "cone_set",
    "cone_profiles_over_set",
    "group_stats",
    "class_mean_attention",
    "attention_code_matrix",
    "entropy_curves",
    "FAITHFUL_ENTROPIES",
    "PROPER_ENTROPIES",
    "stream_values",
    "subset",
]

#: Per-layer streams, in the order the page shows them (layer-level; heads are ``[L, H]``).
STREAMS = ("layer_input", "head_output", "post_attention", "layer_output", "multihead_faithful",
           "head_output_faithful")

#: Short display names of the streams (Bonino 2025 (arXiv:2502.12033); docs/methods.md §9).
STREAM_LABELS = {
    "hidden": "hidden_states[l]",
    "layer_input": "layer input X",
    "head_output": "head output Z_h (mean over heads)",
    "post_attention": "after W_O + LayerNorm (U)",
    "layer_output": "layer output Y (after MLP)",
    "multihead_faithful": "'multihead output' (official code)",
    "head_output_faithful": "head output (official code, mean over heads)",
}

FAITHFUL_ENTROPIES = ("vn_code", "shannon_code")
PROPER_ENTROPIES = ("vn_l1", "sv_entropy", "row_entropy")


@contextmanager
def single_threaded():
    """Run numpy/BLAS and torch with one thread inside the block.

    The matrices here are small (a few hundred rows); on a busy machine multi-threaded
    OpenBLAS/torch spin-wait and run 10-30x *slower* (measured: eigenvalues of 72 attention
    matrices 40 s with 2 threads vs 3.4 s with 1 on a loaded 2-core box).
    """
    import torch
    from threadpoolctl import threadpool_limits

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(n)


# -------------------------------------------------------------------------------------------
# Token sets and padded forward passes
# -------------------------------------------------------------------------------------------
def rows_for(encoded: EncodedInput, token_set: str = "content", n: int | None = None) -> np.ndarray:
    """Token-set rows ``[n]`` (bool) of one encoded input, padded with PAD rows to ``n``.

    [CLS] and [SEP] are read from the encoding (not guessed); rows beyond the input's tokens
    are padding (selected only by ``token_set="all"``).
    """
    return encoded.token_rows(token_set, n)


@dataclass
class PaddedPass:
    """One input's share of :func:`padded_forward` (what :func:`map_over_set` hands a reduction)."""

    encoded: EncodedInput
    hidden: np.ndarray  # [L+1, pad_to, D], PAD rows included
    attention_mask: np.ndarray  # [pad_to]
    logits: np.ndarray | None
    labels: tuple[str, ...] = ()

    @property
    def predicted(self) -> str | None:
        if self.logits is None or not self.labels:
            return None
        return self.labels[int(np.argmax(self.logits))]


def padded_runner(pad_to: int):
    """A :func:`~bertgeom.sets.inputs.map_over_set` runner: each batch through :func:`padded_forward`,
    one :class:`PaddedPass` per input (no attention weights are copied out)."""

    def run(model: LoadedModel, encs: list[EncodedInput]) -> list[PaddedPass]:
        hidden, mask, lg = padded_forward(model, encs, pad_to)
        return [PaddedPass(enc, hidden[b], mask[b], None if lg is None else lg[b], model.labels)
                for b, enc in enumerate(encs)]

    return run


def padded_forward(loaded: LoadedModel, encoded: Sequence[EncodedInput], pad_to: int):
    """Run the model on inputs padded to ``pad_to`` positions (PAD keys masked, as the official
    code did with its fixed 512-token inputs).

    Returns ``hidden [B, L+1, pad_to, D]`` (float32, PAD rows included), ``attention_mask
    [B, pad_to]`` and ``logits [B, C]`` (or ``None`` for an encoder).
    """
    import torch

    ids, mask = pad_batch(loaded, list(encoded), int(pad_to))
    out = forward(loaded, ids, mask, attentions=False)
    hidden = torch.stack(out.hidden_states, dim=1).float().cpu().numpy()  # on the model's device until here
    logits = getattr(out, "logits", None)
    return hidden, mask.numpy(), (None if logits is None else logits.float().cpu().numpy())


# -------------------------------------------------------------------------------------------
# One input
# -------------------------------------------------------------------------------------------
@single_threaded()
def input_cones(
    hidden_states,
    layer_weights,
    rows,
    *,
    attention_mask=None,
    attentions=None,
    faithful: bool = True,
    unit_rows: bool = True,
) -> dict[str, np.ndarray]:
    """Cone index of every stream for one input: raw ``I`` and normalised values.

    ``hidden_states [L+1, T, d]``; ``rows [T]`` the token set; ``attention_mask [T]`` (1 valid,
    0 PAD) for the model's masked attention; ``attentions [L, H, T, T]`` the model's attention
    (recomputed from the weights when omitted). ``unit_rows=True`` is the official code's form
    (rows scaled to unit length first; normalised = ``I/m``); ``False`` is the paper's literal
    ``||sum x||`` (normalised = ``I / sum ||x||``).

    Returns ``hidden [L+1]``, ``layer_input/post_attention/layer_output [L]``,
    ``head_output [L, H]``, faithful ``multihead_faithful [L]``/``head_output_faithful [L, H]``
    when ``faithful``, each also as ``<name>_norm``, and ``m`` (rows counted).
    """
    kw = dict(attention_mask=attention_mask, rows=rows, attentions=attentions, faithful=faithful)
    sc = stream_cone_indices(hidden_states, layer_weights, raw=not unit_rows, **kw)
    out = {k: np.asarray(v, dtype=np.float64) for k, v in sc.as_dict().items()}
    m = int(np.asarray(rows, bool).sum())
    if unit_rows:
        norm = {f"{k}_norm": v / m if m else v * np.nan for k, v in out.items()}
    else:
        sn = stream_cone_indices(hidden_states, layer_weights, raw=True, normalized=True, **kw)
        norm = {f"{k}_norm": np.asarray(v, dtype=np.float64) for k, v in sn.as_dict().items()}
    out.update(norm)
    out["m"] = np.asarray(m)
    return out


# -------------------------------------------------------------------------------------------
# The typed result of a set (one producer: cone_set)
# -------------------------------------------------------------------------------------------
#: Per-input vectors a set may hold, with the names the Cone Index page shows for them.
VECTORS = {"cls": "[CLS] vector", "mean": "mean of the content tokens",
           "logits": "logits (pre-softmax, the classifier's output)"}


@dataclass(frozen=True, eq=False)  # arrays: equality would be element-wise; compare fields instead
class ConeSet:
    """Cone-index profiles of the inputs of a set (``N`` analysed inputs, ``L`` layers, ``H`` heads,
    ``D`` width), made by :func:`cone_set` only.

    ``names, labels, predicted [N]`` (str, ``""`` when absent) and ``correct [N]`` (bool: predicted
    and equal to the label); ``hidden [N, L+1]`` the cone index ``I`` of ``hidden_states[0..L]``
    (rows unit-normalised as in the official code, float64) and ``m [N]`` the rows counted;
    ``streams``: the per-layer streams of :data:`STREAMS` that were computed (``[N, L]``, per-head
    ones ``[N, L, H]``; empty for a precomputed set, which stores ``hidden`` only); ``cls`` and
    ``mean`` ``[N, L+1, D]`` float32 (``None`` when not kept); ``logits`` / ``probs`` ``[N, C]`` of a
    classifier (``None`` otherwise); ``error_names`` / ``error_messages``: the inputs that could not
    be analysed, with the reason.
    """

    names: np.ndarray
    labels: np.ndarray
    predicted: np.ndarray
    correct: np.ndarray
    hidden: np.ndarray
    m: np.ndarray
    streams: Mapping[str, np.ndarray] = field(default_factory=dict)
    cls: np.ndarray | None = None
    mean: np.ndarray | None = None
    logits: np.ndarray | None = None
    probs: np.ndarray | None = None
    error_names: np.ndarray = field(default_factory=lambda: np.zeros(0, str))
    error_messages: np.ndarray = field(default_factory=lambda: np.zeros(0, str))

    def __len__(self) -> int:
        return len(self.names)

    @property
    def labelled(self) -> bool:
        """True when at least one input has a class label."""
        return bool(np.any(self.labels != ""))

    def has(self, key: str) -> bool:
        """True when the set holds the stream (``"hidden"`` or one of :data:`STREAMS`) or vector
        (:data:`VECTORS`) ``key``."""
        if key == "hidden":
            return True
        if key in VECTORS:
            return getattr(self, key) is not None
        return key in self.streams

    def stream(self, key: str) -> np.ndarray:
        """``hidden`` or one stream of :data:`STREAMS`, as stored (``I``, not normalised)."""
        if key == "hidden":
            return self.hidden
        if key not in self.streams:
            raise KeyError(f"the set result has no stream {key!r}")
        return self.streams[key]

    def vectors(self, key: str) -> np.ndarray:
        """One kind of per-input vectors of :data:`VECTORS` (``cls``, ``mean`` or ``logits``)."""
        if key not in VECTORS or getattr(self, key) is None:
            raise KeyError(f"the set result holds no {key!r} vectors")
        return getattr(self, key)

    def stream_values(self, key: str, *, head: int | None = None, normalized: bool = True):
        """Per-input values ``[N, K]`` and layer numbers ``[K]`` of one stream.

        ``key``: ``"hidden"`` (layers 0..L) or a stream of :data:`STREAMS` (layers 1..L); per-head
        streams give the mean over heads, or head ``head`` (0-based) when given. ``normalized``
        divides by each input's ``m`` (``I/m``).
        """
        v = np.asarray(self.stream(key), dtype=np.float64)
        if v.ndim == 3:
            v = v.mean(-1) if head is None else v[:, :, int(head)]
        if normalized:
            m = np.asarray(self.m, dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                v = v / np.where(m > 0, m, np.nan)[:, None]
        x = np.arange(v.shape[1]) if key == "hidden" else np.arange(1, v.shape[1] + 1)
        return v, x

    def subset(self, keep) -> "ConeSet":
        """The inputs ``keep`` (bool ``[N]``); the list of errors is kept whole."""
        keep = np.asarray(keep, bool)
        if keep.shape != (len(self),):
            raise ValueError(f"the selection has {keep.size} entries for a set of {len(self)} inputs")

        def rows(a):
            return None if a is None else a[keep]

        return replace(self, names=self.names[keep], labels=self.labels[keep], predicted=self.predicted[keep],
                       correct=self.correct[keep], hidden=self.hidden[keep], m=self.m[keep],
                       streams={k: v[keep] for k, v in self.streams.items()}, cls=rows(self.cls),
                       mean=rows(self.mean), logits=rows(self.logits), probs=rows(self.probs))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Flat arrays for ``numpy.savez`` (no pickle): the keys :meth:`from_arrays` reads."""
        out = {"names": self.names, "labels": self.labels, "predicted": self.predicted, "correct": self.correct,
               "hidden": self.hidden, "m": self.m, "error_names": self.error_names,
               "error_messages": self.error_messages, **self.streams}
        out.update({k: getattr(self, k) for k in (*VECTORS, "probs") if getattr(self, k) is not None})
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "ConeSet":
        """A set stored by :meth:`to_arrays` (or by the dict-returning code before it: same keys)."""
        names = arrays.get("names")
        missing = [k for k in ("names", "hidden", "m") if k not in arrays and (names is None or len(names))]
        if missing:
            raise ValueError(f"the stored cone set lacks {', '.join(missing)}: compute it again")
        return cone_set(names, arrays.get("labels"), arrays.get("predicted"), hidden=arrays.get("hidden"),
                        m=arrays.get("m"), streams={k: arrays[k] for k in STREAMS if k in arrays},
                        cls=arrays.get("cls"), mean=arrays.get("mean"), logits=arrays.get("logits"),
                        probs=arrays.get("probs"),
                        errors=zip(np.asarray(arrays.get("error_names", [])).tolist(),
                                   np.asarray(arrays.get("error_messages", [])).tolist()))


def _strings(values, n: int) -> np.ndarray:
    if values is None:
        return np.full(n, "", dtype=str) if n else np.zeros(0, str)
    out = np.asarray(["" if v is None else str(v) for v in np.asarray(values, dtype=object).tolist()], dtype=str)
    return out if len(out) else np.zeros(0, str)


def cone_set(
    names: Sequence[str],
    labels: Sequence[str | None] | None,
    predicted: Sequence[str | None] | None,
    *,
    hidden=None,
    m=None,
    streams: Mapping[str, np.ndarray] | None = None,
    cls=None,
    mean=None,
    logits=None,
    probs=None,
    errors: Iterable[tuple[str, str]] = (),
) -> ConeSet:
    """The one producer of :class:`ConeSet`: types and shapes made uniform, ``correct`` derived.

    ``labels`` / ``predicted`` may hold ``None`` (absent: stored as ``""``); ``correct`` is
    ``predicted == label`` where both are given. Every per-input array must have ``N`` rows;
    a stream outside :data:`STREAMS` is refused. ``hidden`` and ``m`` may be omitted only when no
    input was analysed (``N = 0``).
    """
    names = _strings(names, 0)
    n = len(names)
    labels, predicted = _strings(labels, n), _strings(predicted, n)
    correct = (predicted != "") & (predicted == labels)
    streams = {k: np.asarray(v, dtype=np.float64) for k, v in (streams or {}).items()}
    unknown = sorted(set(streams) - set(STREAMS))
    if unknown:
        raise ValueError(f"unknown {word_for(len(unknown), 'stream')} {', '.join(unknown)}; "
                         f"known: {', '.join(STREAMS)}")

    def opt(a, dtype):
        return None if a is None else np.asarray(a, dtype=dtype)

    errors = list(errors)
    out = ConeSet(names=names, labels=labels, predicted=predicted, correct=correct,
                  hidden=np.zeros((0, 0)) if hidden is None and not n else np.asarray(hidden, dtype=np.float64),
                  m=np.zeros(0, np.int64) if m is None and not n else np.asarray(m, dtype=np.int64), streams=streams,
                  cls=opt(cls, np.float32), mean=opt(mean, np.float32), logits=opt(logits, np.float32),
                  probs=opt(probs, np.float32),
                  error_names=_strings([e[0] for e in errors], 0), error_messages=_strings([e[1] for e in errors], 0))
    if out.hidden.ndim != 2 or out.m.ndim != 1:
        raise ValueError(f"hidden must be [N, L+1] and m [N]; got {out.hidden.shape} and {out.m.shape}")
    bad = [k for k, v in (("labels", labels), ("predicted", predicted), ("hidden", out.hidden), ("m", out.m),
                          *out.streams.items(),
                          *((k, getattr(out, k)) for k in (*VECTORS, "probs")))
           if v is not None and len(v) != n]
    if bad:
        raise ValueError(f"{', '.join(bad)} must have one row per input ({n})")
    return out


# -------------------------------------------------------------------------------------------
# Over a set (one batched pass)
# -------------------------------------------------------------------------------------------
def _profile(hidden, layer_weights, rows, content, attention_mask, attentions, streams, faithful) -> dict:
    """Per-input reduction: small arrays only (the full hidden states are dropped)."""
    hidden = np.asarray(hidden)
    res: dict[str, np.ndarray] = {}
    if streams:
        sc = stream_cone_indices(hidden, layer_weights, attention_mask=attention_mask, rows=rows,
                                 attentions=attentions, faithful=faithful)
        res.update({k: np.asarray(v, dtype=np.float64) for k, v in sc.as_dict().items()})
    else:
        res["hidden"] = np.asarray(hidden_state_cone_curve(hidden, rows), dtype=np.float64)
    res["m"] = np.asarray(int(np.asarray(rows, bool).sum()))
    res["cls"] = hidden[:, 0, :].astype(np.float32)
    c = np.asarray(content, bool)
    res["mean"] = (hidden[:, c, :].mean(1) if c.any() else hidden.mean(1)).astype(np.float32)
    return res


def _stack_results(names, labels, predicted, per_item: list[dict], logits, errors) -> ConeSet:
    """The per-input reductions of :func:`_profile` stacked into a :class:`ConeSet`."""

    def stacked(key):
        return np.stack([r[key] for r in per_item]) if per_item and key in per_item[0] else None

    keep_logits = bool(logits) and all(x is not None for x in logits)
    return cone_set(names, labels, predicted, hidden=stacked("hidden"), m=stacked("m"),
                    streams={k: stacked(k) for k in STREAMS if stacked(k) is not None}, cls=stacked("cls"),
                    mean=stacked("mean"), logits=np.stack(logits) if keep_logits else None, errors=errors)


@single_threaded()
def cone_profiles_over_set(
    loaded: LoadedModel,
    items: Sequence[InputItem],
    token_set: str = "content",
    *,
    pad_to: int | None = None,
    streams: bool = True,
    faithful: bool = True,
    layer_weights=None,
    batch_size: int = 8,
    progress: Callable[[int, int], None] | None = None,
    timings: dict | None = None,
) -> ConeSet:
    """Cone-index profiles, streams and [CLS]/mean-pooled vectors of every input of a set.

    One batched forward pass per ``batch_size`` inputs (through
    :func:`bertgeom.sets.inputs.map_over_set`, or :func:`padded_forward` when ``pad_to`` is given
    so that PAD rows exist, as in the official code). Inputs that cannot be encoded are
    listed in ``error_names``/``error_messages`` and never stop the run.

    Returns a :class:`ConeSet` (``N`` analysed inputs, ``L`` layers, ``H`` heads, ``D`` width) with
    ``hidden [N, L+1]``, ``m [N]``, with ``streams`` the streams
    ``layer_input, post_attention, layer_output [N, L]``, ``head_output [N, L, H]`` and with
    ``faithful`` ``multihead_faithful [N, L]``, ``head_output_faithful [N, L, H]``;
    ``cls, mean [N, L+1, D]`` (float32); ``logits [N, C]`` for a classifier.
    ``timings``: a dict that receives ``profile_s``, the seconds spent in the per-input
    reductions (cone indices, streams, vectors), for benchmarks.
    """
    import time

    clock = {"profile_s": 0.0}

    def profile(*args):
        t0 = time.perf_counter()
        res = _profile(*args)
        clock["profile_s"] += time.perf_counter() - t0
        return res

    if layer_weights is None and streams:
        layer_weights = loaded.layer_weights  # the shared read-only copy
    per_item: list[dict] = []
    logits: list = []

    def reduce(trace, item):
        enc = trace.encoded
        per_item.append(profile(trace.hidden_states, layer_weights, rows_for(enc, token_set), enc.content_mask,
                                np.ones(enc.n_tokens, np.int64), trace.attentions, streams, faithful))
        logits.append(trace.logits)

    def reduce_padded(p: PaddedPass, item: InputItem):
        per_item.append(profile(p.hidden, layer_weights, rows_for(p.encoded, token_set, pad_to),
                                rows_for(p.encoded, "content", pad_to), p.attention_mask, None, streams, faithful))
        logits.append(p.logits)

    sr = map_over_set(loaded, items, reduce if pad_to is None else reduce_padded, batch_size=batch_size,
                      progress=progress, runner=padded_runner(pad_to) if pad_to else None, max_tokens=pad_to)
    if timings is not None:
        timings.update(clock)
    return _stack_results([it.name for it in sr.items], sr.labels, sr.predicted, per_item, logits, sr.errors)


def group_stats(values, groups, order: Sequence[str] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Mean, sd (ddof=0) and count of ``values [N, ...]`` per group label ``groups [N]``.

    Groups are returned in ``order`` (groups absent from the data are skipped), else sorted.
    """
    v = np.asarray(values, dtype=np.float64)
    g = np.asarray(groups).astype(str)
    keys = [k for k in order if k in set(g.tolist())] if order is not None else sorted(set(g.tolist()))
    out = {}
    for k in keys:
        sel = v[g == k]
        out[k] = {"mean": np.nanmean(sel, 0), "sd": np.nanstd(sel, 0), "n": np.asarray(len(sel))}
    return out


# -------------------------------------------------------------------------------------------
# Entropies of attention (Bonino 2025 (arXiv:2502.12033); docs/methods.md §9)
# -------------------------------------------------------------------------------------------
def attention_code_matrix(attentions, is_sep, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The official code's matrix for the entropies: ``[..., n, n]`` with every row and column
    from the first [SEP] on zeroed (the class-mean recipe, ``A[:, s:] = A[s:, :] = 0``: [SEP], a
    second segment and padding go, [CLS] stays) and zero PAD rows/columns up to ``n`` (512 in the
    code), and ``keep [n]``: the rows before the first [SEP]. docs/methods.md §5, §9."""
    A = np.asarray(attentions, dtype=np.float64)
    T = A.shape[-1]
    n = T if n is None else int(n)
    if n < T:
        raise ValueError(f"cannot pad {T} tokens to {n}")
    keep = np.zeros(n, bool)
    keep[:T] = kept_tokens(is_sep, "first_sep")
    out = np.zeros(A.shape[:-2] + (n, n))
    out[..., :T, :T] = A
    out = out * keep[:, None] * keep[None, :]
    return out, keep


@single_threaded()
def entropy_curves(A_code, keep, *, dtype=np.float32) -> dict[str, np.ndarray]:
    """Faithful and properly normalised entropies of ``A_code [L, H, n, n]``: each ``[L, H]``.

    * faithful (the official code): ``vn_code`` (|eigenvalues| L2-normalised) and ``shannon_code``
      (20 equal-width bins of all ``n^2`` entries, zeros included) on the whole matrix;
    * proper (our addition): ``vn_l1`` (|eigenvalues| L1-normalised), ``sv_entropy`` (sigma^2
      normalised) and ``row_entropy`` (mean row entropy, rows renormalised) on the ``keep``
      block. Also ``*_max``: ``ln n_keep`` (the largest value a proper entropy can reach).

    The eigenvalues of the zero-padded matrix are those of the ``keep`` block plus zeros, which
    the code's entropy ignores, so ``vn_code`` is computed on the block (same value, faster).
    """
    A = np.asarray(A_code, dtype=np.float64)
    keep = np.asarray(keep, bool)
    res = attention_entropies(A, rows=keep, dtype=dtype)
    res["shannon_code"] = np.asarray(shannon_value_entropy_code(A))
    out = {k: np.asarray(res[k], dtype=np.float64) for k in FAITHFUL_ENTROPIES + PROPER_ENTROPIES}
    out["ln_n"] = np.asarray(np.log(max(int(keep.sum()), 1)))
    return out


@single_threaded()
def class_mean_attention(
    loaded: LoadedModel,
    items: Sequence[InputItem],
    *,
    pad_to: int | None = None,
    correct_only: bool = False,
    batch_size: int = 4,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, np.ndarray]:
    """Mean attention ``[L, H, n, n]`` over a set, the official code's way (docs/methods.md §5, §9).

    Each input's attention has its rows/columns from the first [SEP] on zeroed and is zero-padded to ``n``
    (``pad_to``, else the longest input); inputs are aligned by token index. With
    ``correct_only`` only correctly classified inputs count (as the code). Returns ``mean``
    (float32), ``keep [n]`` (positions that are a real, non-[SEP] token in at least one input)
    and ``n_used``.
    """
    state: dict = {"acc": None, "keep": None, "n": 0}

    def reduce(trace, item):
        if correct_only and (trace.predicted is None or trace.predicted != item.label):
            return None
        A, keep = attention_code_matrix(trace.attentions, trace.encoded.is_sep, pad_to)
        A = A.astype(np.float32)
        acc = state["acc"]
        if acc is None:
            state["acc"], state["keep"] = A, keep
        else:
            n = max(acc.shape[-1], A.shape[-1])
            if acc.shape[-1] < n:
                acc = np.pad(acc, [(0, 0)] * (acc.ndim - 2) + [(0, n - acc.shape[-1])] * 2)
                state["keep"] = np.pad(state["keep"], (0, n - len(state["keep"])))
            if A.shape[-1] < n:
                A = np.pad(A, [(0, 0)] * (A.ndim - 2) + [(0, n - A.shape[-1])] * 2)
                keep = np.pad(keep, (0, n - len(keep)))
            acc += A
            state["acc"] = acc
            state["keep"] = state["keep"] | keep
        state["n"] += 1
        return None

    sr = map_over_set(loaded, items, reduce, batch_size=batch_size, progress=progress)
    if state["acc"] is None:
        return {"mean": np.zeros((0,), np.float32), "keep": np.zeros(0, bool), "n_used": np.asarray(0),
                "n_errors": np.asarray(len(sr.errors))}
    return {"mean": state["acc"] / state["n"], "keep": state["keep"], "n_used": np.asarray(state["n"]),
            "n_errors": np.asarray(len(sr.errors))}



# -------------------------------------------------------------------------------------------
# Reading set results
# -------------------------------------------------------------------------------------------
def stream_values(data: ConeSet, key: str, *, head: int | None = None, normalized: bool = True):
    """:meth:`ConeSet.stream_values` (kept as a function for callers of the library)."""
    return data.stream_values(key, head=head, normalized=normalized)


def subset(data: ConeSet, keep) -> ConeSet:
    """:meth:`ConeSet.subset` (kept as a function for callers of the library)."""
    return data.subset(keep)


# -------------------------------------------------------------------------------------------
# Entropies of one class's mean attention (the Cone Index page's *Attention entropies*)
# -------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)  # arrays: equality would be element-wise
class ClassEntropies:
    """The ``class-entropy`` view's typed result: ``n_used`` inputs averaged (``n_errors`` unread),
    and, when any was, ``curves`` of :func:`entropy_curves` (each ``[L, H]``, ``ln_n`` a scalar)."""

    n_used: int
    n_errors: int
    curves: Mapping[str, np.ndarray] = field(default_factory=dict)

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"n_used": np.asarray(self.n_used), "n_errors": np.asarray(self.n_errors), **self.curves}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> "ClassEntropies":
        return cls(int(arrays["n_used"]), int(arrays["n_errors"]),
                   {k: np.asarray(v) for k, v in arrays.items() if k not in ("n_used", "n_errors")})


def class_entropies(loaded: LoadedModel, items: Sequence[InputItem], label: str, pad_to: int | None,
                    correct_only: bool, progress: Callable[[int, int], None] | None = None) -> ClassEntropies:
    """Entropies ``[L, H]`` of the mean attention of the inputs labelled ``label`` (the official code's
    recipe: :func:`class_mean_attention`, then :func:`entropy_curves`)."""
    chosen = [it for it in items if it.label == label]
    mean = class_mean_attention(loaded, chosen, pad_to=pad_to, correct_only=correct_only, progress=progress)
    n_used = int(mean["n_used"])
    if n_used == 0:
        return ClassEntropies(0, int(mean["n_errors"]))
    if progress is not None:
        progress(len(chosen), len(chosen))
    return ClassEntropies(n_used, int(mean["n_errors"]), entropy_curves(mean["mean"], mean["keep"]))
