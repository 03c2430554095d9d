"""Every cached view of bertgeom declared once: what it is called, its key, how it is computed, and
the typed result it gives.

A :class:`View` is one computation that the pages, ``prepare-sets`` (:mod:`bertgeom.sets.prepared`)
and the library ask for by the same arguments: ``view.key(*args)`` names the entry of
:mod:`bertgeom.cache` (built in :mod:`bertgeom.sets.keys`), ``view.compute(*args, progress=...)``
makes the result, and ``view.result`` is its type, which ``to_arrays()`` / ``from_arrays()`` carries
through the disk tier unchanged. :meth:`View.get` reads memory, then disk, then computes;
:meth:`View.prepare` computes and stores unless the entry is on disk. The pages run a view through
one UI wrapper (:func:`bertgeom.ui.view_runner.run_view`: spinner or progress bar, the heavy-work slot, the
wait for the background preparation), so no computation is written twice and a page always reads
what the preparation wrote.

:data:`VIEWS` holds them all by name (the key's kind); ``tests/test_views_once.py`` checks that each
key has one compute function.

References: :mod:`bertgeom.cache` (the key and its tiers); issue 47 ("views declared once").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from bertgeom.cache import CacheKey, Memo, cached_arrays, on_disk, write_arrays
from bertgeom.sets import keys
from bertgeom.sets.ablation import sweep_of_input
from bertgeom.sets.cone import ClassEntropies, ConeSet, class_entropies, cone_profiles_over_set, single_threaded
from bertgeom.sets.heads import ClassMean, SetSummary, class_mean_over_set, compute_set_arrays
from bertgeom.sets.inputs import InputItem, set_fingerprint
from bertgeom.sets.subspace import AcrossInputs, head_across_set
from bertgeom.weights import layer_weights_of

__all__ = ["View", "VIEWS", "NamedArrays", "HEADS_SET", "CLASS_MEAN", "CONE_SET", "CLASS_ENTROPY",
           "SUBSPACE_ACROSS", "FLOW", "COMPARE", "HEAD_SWEEP", "RANK_COLLAPSE_SET", "HEAD_IMPORTANCE_SET",
           "CONTEXT_MIXING_SET", "CONTEXT_MIXING", "ALTI_SET"]

Progress = Callable[[int, int], None]
R = TypeVar("R")


class Stored(Protocol):
    """A typed result that round-trips through the disk tier (plain arrays, no pickle)."""

    def to_arrays(self) -> Mapping[str, np.ndarray]: ...


@dataclass(frozen=True, eq=False)
class View(Generic[R]):
    """One cached computation.

    ``name`` is the kind of its keys; ``key(*args)`` the key; ``compute(*args, progress=None, **given)``
    the one function that makes the result (``given``: what a caller already holds and that does
    not change the result, e.g. the input's trace); ``result`` the typed result's class
    (``from_arrays``); ``title`` what the page says while it computes or waits; ``doing(*args)``
    the progress bar's text (None: a spinner with ``title``); ``usually_prepared`` when the shipped
    set's entry normally comes from ``prepare-sets``; ``memo`` the memory tier in front of the disk;
    ``prepared_together`` when ``prepare-sets`` may write it in one task with others of its kind."""

    name: str
    title: str
    key: Callable[..., CacheKey]
    compute: Callable[..., Any]
    result: Any
    memo: Memo | None = None
    doing: Callable[..., str] | None = None
    usually_prepared: bool = False
    prepared_together: bool = False  # prepare-sets may write it in a task that writes several (its group: name)

    def key_of(self, *args) -> CacheKey:
        key = self.key(*args)
        if key.kind != self.name:
            raise ValueError(f"view {self.name!r} built a key of kind {key.kind!r}")
        return key

    def in_memory(self, *args) -> bool:
        return self.memo is not None and self.key_of(*args) in self.memo

    def ready(self, *args) -> bool:
        """True when :meth:`get` would answer without computing (memory or disk)."""
        key = self.key_of(*args)
        return (self.memo is not None and key in self.memo) or on_disk(key)

    def get(self, *args, around: Callable[[], AbstractContextManager] | None = None,
            given: Callable[[], dict] | None = None) -> R:
        """The result for ``args``: from memory, else from disk, else computed once and kept in both.
        On a miss, ``given()`` supplies what the caller holds (called before ``around``), and
        ``around()`` is entered around the computation and yields the progress callback (or None)."""

        def compute() -> Mapping[str, np.ndarray]:
            extra = given() if given is not None else {}
            with (around() if around is not None else _silent()) as update:
                return self.compute(*args, progress=update, **extra).to_arrays()

        return self.result.from_arrays(cached_arrays(self.key_of(*args), compute, memo=self.memo))

    def prepare(self, *args, progress: Progress | None = None, **given) -> bool:
        """Compute and store the result unless it is on disk (``prepare-sets``); True when computed."""
        key = self.key_of(*args)
        if on_disk(key):
            return False
        # strict: a write that fails (a full disk, a read-only cache) raises, so prepare-sets reports the
        # task failed, never done without its file
        write_arrays(key, self.compute(*args, progress=progress, **given).to_arrays(), strict=True)
        return True


@contextmanager
def _silent() -> Iterator[None]:
    yield None


class NamedArrays(dict):
    """A result that is a few named arrays, read as attributes (``res.flow``) so that a renamed array
    fails where it is read, not deep in a page. Each subclass annotates the arrays it holds (what a
    page may read); ``required``, the ones :meth:`from_arrays` insists on, defaults to them. Still a
    dict: the disk tier and the memo keep the plain arrays (:meth:`to_arrays`), and pickling
    (``st.cache_data``) needs nothing more."""

    required: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "required" not in vars(cls):
            cls.required = tuple(k for k in vars(cls).get("__annotations__", {}) if not k.startswith("_"))

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} holds no array {name!r}") from None

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v) for k, v in self.items()}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]):
        missing = [k for k in cls.required if k not in arrays]
        if missing:
            raise ValueError(f"the stored result lacks {', '.join(missing)}")
        return cls({k: np.asarray(v) for k, v in arrays.items()})


class FlowArrays(NamedArrays):
    """Attention flow and rollout ``[L, n]`` into one token (:func:`bertgeom.analysis.flow.flow_view`)."""

    flow: np.ndarray
    rollout: np.ndarray


class CosineArrays(NamedArrays):
    """Two checkpoints' per-head cosines ``[L, H]`` (:func:`bertgeom.analysis.ablation.checkpoint_cosines`)."""

    required = ()


class SweepArrays(NamedArrays):
    """One input's single-head sweep (:func:`bertgeom.sets.ablation.sweep_of_input`)."""

    required = ("cos",)


# -------------------------------------------------------------------------------------------
# The views: each key built by one function of bertgeom.sets.keys, each result computed by one
# function below
# -------------------------------------------------------------------------------------------
def _heads_set(loaded, items: Sequence[InputItem], progress: Progress | None = None):
    return SetSummary.from_arrays(compute_set_arrays(loaded, items, progress))


HEADS_SET: View = View(
    "heads-set", "The statistics over the set",
    key=lambda loaded, items: keys.heads_set_key(loaded, items),
    compute=_heads_set, result=SetSummary, memo=Memo("heads-set", 4),
    doing=lambda loaded, items: "Running the model over the set…", usually_prepared=True)


def _class_mean(loaded, items: Sequence[InputItem], names: tuple[str, ...], theta: float,
                progress: Progress | None = None):
    chosen = [it for it in items if it.name in set(names)]
    cm = class_mean_over_set(loaded, chosen, theta)
    if progress is not None:
        progress(1, 1)
    return cm


CLASS_MEAN: View = View(
    "class-mean", "The class-mean maps",
    key=lambda loaded, items, names, theta: keys.class_mean_key(loaded, set_fingerprint(items), names, theta),
    compute=_class_mean, result=ClassMean, memo=Memo("class-mean", 2),  # [L, H, T, T] each: two kept
    usually_prepared=True, prepared_together=True)


def _cone_set(loaded, items: Sequence[InputItem], token_set: str, pad_to: int | None,
              progress: Progress | None = None):
    return cone_profiles_over_set(loaded, items, token_set, pad_to=pad_to, progress=progress)


CONE_SET: View = View(
    "cone-set", "The set's cone profiles",
    key=lambda loaded, items, token_set, pad_to: keys.cone_set_key(loaded.spec.id, loaded, set_fingerprint(items),
                                                                   token_set, pad_to),
    compute=_cone_set, result=ConeSet, memo=Memo("cone-set", 8),
    doing=lambda loaded, items, *_: f"Running the model over {len(items)} inputs…", usually_prepared=True)


CLASS_ENTROPY: View = View(
    "class-entropy", "The class-mean attention",
    key=lambda loaded, items, label, pad_to, correct_only: keys.class_entropy_key(
        loaded.spec.id, loaded, set_fingerprint(items), label, pad_to, correct_only),
    compute=class_entropies, result=ClassEntropies, memo=Memo("class-entropy", 8),
    doing=lambda loaded, items, label, *_: (f"Averaging the attention of {sum(it.label == label for it in items)} "
                                            f"inputs of class '{label}', then its entropies…"))


SUBSPACE_ACROSS: View = View(
    "subspace-across", "The head across inputs",
    key=lambda loaded, items, layer, head, eps, token_set: keys.across_key(
        loaded.spec.id, loaded.weights_hash, set_fingerprint(items), layer, head, eps, token_set),
    compute=head_across_set, result=AcrossInputs, memo=Memo("subspace-across", 48),
    doing=lambda loaded, items, *_: f"Running the model over {len(items)} inputs…", usually_prepared=True)


def _trace_of(loaded, text: str, trace=None):
    if trace is not None:
        return trace
    from bertgeom.inputs import normalise_text
    from bertgeom.trace import run_trace

    return run_trace(loaded, normalise_text(text))


def _flow(loaded, text: str, n: int, residual: float, target: int, normalize: bool,
          progress: Progress | None = None, trace=None):
    from bertgeom.analysis.flow import flow_view

    return FlowArrays(flow_view(_trace_of(loaded, text, trace).attentions, n, residual, target, normalize))


FLOW: View = View(
    "flow", "Solving one max-flow problem per token and layer",
    key=lambda loaded, text, n, residual, target, normalize: keys.flow_key(loaded, text, n, residual, target,
                                                                           normalize),
    compute=_flow, result=FlowArrays, memo=Memo("flow", 16))


def _compare(loaded, partner, text: str, progress: Progress | None = None, trace=None):
    from bertgeom.analysis.ablation import checkpoint_cosines

    hidden = _trace_of(loaded, text, trace).hidden_states[:-1]
    with single_threaded():  # small matrices: one thread is faster
        return CosineArrays(checkpoint_cosines(layer_weights_of(loaded.model), layer_weights_of(partner.model),
                                               hidden))


COMPARE: View = View(
    "compare-checkpoints", "Comparing the two checkpoints head by head",
    key=lambda loaded, partner, text: keys.compare_key(loaded, partner, text),
    compute=_compare, result=CosineArrays, memo=Memo("compare-checkpoints", 8))


def _sweep(loaded, item: InputItem, progress: Progress | None = None):
    out = SweepArrays(sweep_of_input(loaded, item))
    if progress is not None:
        progress(1, 1)
    return out


HEAD_SWEEP: View = View(
    "head-sweep", "Disabling every head in turn",
    key=lambda loaded, item: keys.sweep_key(loaded, item), compute=_sweep, result=SweepArrays)


class RankCollapseArrays(NamedArrays):
    """Dong et al.'s curves of every input of a set (:func:`bertgeom.sets.collapse.rank_collapse_over_set`)."""

    curves: np.ndarray  # [N, V, L+1] relative residual per input, path variant and hidden state
    variants: np.ndarray  # [V] the path variants' names
    names: np.ndarray  # [N]
    labels: np.ndarray  # [N]
    errors: np.ndarray  # the inputs that could not be analysed


class ImportanceArrays(NamedArrays):
    """Michel et al.'s head importance over a set (:func:`bertgeom.sets.collapse.head_importance_over_set`)."""

    required = ("importance",)
    importance: np.ndarray  # [N, L, H] |∂L/∂ξ_h| per input
    loss: np.ndarray  # [N]
    used_label: np.ndarray  # [N] whether the input's own label was the target
    objective: np.ndarray  # () the loss differentiated (HeadImportance.objective)
    names: np.ndarray  # [N]
    labels: np.ndarray  # [N]
    errors: np.ndarray  # [E] "name: message" of the inputs that failed


class MixingSetArrays(NamedArrays):
    """The set's mixing ratios per input, layer and head (:func:`bertgeom.sets.context_mixing.mixing_over_set`)."""

    mixing: np.ndarray  # [V, N, L], MIXING_VARIANTS' order
    head_mixing: np.ndarray  # [N, L, H]
    tokens: np.ndarray  # [N] tokens of each input read
    errors: np.ndarray  # [1] inputs that could not be read


class AltiSetArrays(NamedArrays):
    """The set's ALTI reductions per input and layer (:func:`bertgeom.sets.context_mixing.alti_over_set`)."""

    alti_self: np.ndarray  # [N, L] each input's mean self-contribution
    rollout_self: np.ndarray  # [N, L]
    attention_rollout_self: np.ndarray  # [N, L]
    rank_agreement: np.ndarray  # [N, L] Spearman, mean over the rows
    rank_agreement_first: np.ndarray  # [N, L] Spearman of the first row
    tokens: np.ndarray  # [N]
    names: np.ndarray  # [N] the inputs' names
    errors: np.ndarray  # [1]


class MixingArrays(NamedArrays):
    """One input's context mixing (:func:`bertgeom.analysis.context_mixing.context_mixing_view`)."""

    value_norms: np.ndarray  # [L, H, T]
    block_norms: np.ndarray  # [S, L, T, T], SCOPES' order
    mixing: np.ndarray  # [V, L, T], MIXING_VARIANTS' order
    head_mixing: np.ndarray  # [L, H, T]
    alti: np.ndarray  # [L, T, T]
    alti_rollout: np.ndarray  # [L, T, T]


def _rank_collapse_set(loaded, items: Sequence[InputItem], token_set: str, norm: str,
                       progress: Progress | None = None):
    from bertgeom.sets.collapse import rank_collapse_over_set

    return RankCollapseArrays(rank_collapse_over_set(loaded, items, token_set, norm=norm, progress=progress))


RANK_COLLAPSE_SET: View = View(
    "rank-collapse-set", "Rank collapse over the set",
    key=lambda loaded, items, token_set, norm: keys.rank_collapse_set_key(loaded, set_fingerprint(items),
                                                                           token_set, norm),
    compute=_rank_collapse_set, result=RankCollapseArrays, memo=Memo("rank-collapse-set", 4),
    doing=lambda loaded, items, *_: f"Running the model's four path variants over {len(items)} inputs…",
    usually_prepared=True)


def _head_importance_set(loaded, items: Sequence[InputItem], progress: Progress | None = None):
    from bertgeom.sets.collapse import head_importance_over_set

    return ImportanceArrays(head_importance_over_set(loaded, items, progress=progress))


HEAD_IMPORTANCE_SET: View = View(
    "head-importance-set", "Head importance over the set",
    key=lambda loaded, items: keys.head_importance_set_key(loaded, set_fingerprint(items)),
    compute=_head_importance_set, result=ImportanceArrays, memo=Memo("head-importance-set", 4),
    doing=lambda loaded, items: f"Differentiating the loss of {len(items)} inputs…", usually_prepared=True)


def _context_mixing_over_set(function: str, result: type[NamedArrays]):
    """The compute of a context-mixing set view: :mod:`bertgeom.sets.context_mixing`'s ``function``
    (``mixing_over_set``, ``alti_over_set``) with the model's layer weights, as ``result``."""

    def compute(loaded, items: Sequence[InputItem], progress: Progress | None = None):
        from bertgeom.sets import context_mixing

        over_set = {"mixing_over_set": context_mixing.mixing_over_set, "alti_over_set": context_mixing.alti_over_set}
        return result(over_set[function](loaded, items, progress, layer_weights_of(loaded.model)))

    return compute


CONTEXT_MIXING_SET: View = View(
    "context-mixing-set", "Mixing ratios over the set", key=keys.context_mixing_set_key,
    compute=_context_mixing_over_set("mixing_over_set", MixingSetArrays), result=MixingSetArrays,
    memo=Memo("context-mixing-set", 4), usually_prepared=True,
    doing=lambda loaded, items: f"Mixing ratios over the {len(items)} inputs…")
ALTI_SET: View = View(
    "alti-set", "ALTI over the set", key=keys.alti_set_key,
    compute=_context_mixing_over_set("alti_over_set", AltiSetArrays), result=AltiSetArrays,
    memo=Memo("alti-set", 4), usually_prepared=True, doing=lambda loaded, items: f"ALTI over the {len(items)} inputs…")


def _context_mixing(loaded, text: str, progress: Progress | None = None, trace=None):
    from bertgeom.analysis.context_mixing import context_mixing_view

    return MixingArrays(context_mixing_view(_trace_of(loaded, text, trace), weights=layer_weights_of(loaded.model),
                                            progress=progress))


CONTEXT_MIXING: View = View(
    "context-mixing", "Decomposing every layer's attention block",
    key=lambda loaded, text: keys.context_mixing_key(loaded, text),
    compute=_context_mixing, result=MixingArrays, memo=Memo("context-mixing", 16),
    doing=lambda loaded, text: "Decomposing every layer's attention block…")


#: Every view by name (the kind of its keys).
VIEWS: dict[str, View] = {v.name: v for v in (HEADS_SET, CLASS_MEAN, CONE_SET, CLASS_ENTROPY, SUBSPACE_ACROSS,
                                               FLOW, COMPARE, HEAD_SWEEP, RANK_COLLAPSE_SET, HEAD_IMPORTANCE_SET,
                                               CONTEXT_MIXING_SET, CONTEXT_MIXING, ALTI_SET)}
