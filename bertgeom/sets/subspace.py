"""The Subspace Directions page's computations over inputs (UI-free).

D1-D3 of every head for one trace, from the model's attention or the official code's
hand-made one (:func:`data_geometry`), and the reduction that follows one head over a set of
inputs (:func:`head_set_reducer`, stacked by :func:`collect_set_result`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bertgeom import attention as att
from bertgeom.analysis import subspace as sub
from bertgeom.sets.inputs import InputItem, SetResult
from bertgeom.trace import Trace
from bertgeom.weights import LayerWeights

#: Token sets offered for the data-space quantities (of :data:`bertgeom.tokens.TOKEN_SETS`).
SUBSPACE_TOKEN_SETS = ("all", "content")

#: Per-input quantities kept by the across-inputs reduction (each ``[N, 2]``: correct, faithful).
ACROSS_KEYS = ("delta_A", "attn_rank", "attn_rank_norm", "out_energy_top1", "delta_out")
MODES = ("correct", "faithful")


def token_rows(trace, token_set: str) -> np.ndarray | None:
    """Boolean ``[T]`` token selection for ``token_set`` of a trace (or anything with its
    ``encoded`` input, e.g. a padded pass); ``None`` = all positions, also when the set would be empty."""
    rows = trace.encoded.token_rows(token_set)
    return None if rows.all() or not rows.any() else rows


#: The official code's fixed input length (its eigenvalue, rank and k90 analyses ran on 512 positions).
FAITHFUL_PAD_TO = 512


def faithful_input(hidden_states, layer: int, *, next_layer: bool = True) -> np.ndarray:
    """The matrix the official code fed to layer ``layer``'s hand-made attention: the *next*
    layer's output ``hidden_states[layer + 1]`` (its off-by-one, docs/methods.md §8.3), or the
    layer's true input ``hidden_states[layer]`` with ``next_layer=False``."""
    return np.asarray(hidden_states[layer + 1 if next_layer else layer])


def faithful_stack(
    hidden_states: np.ndarray, layer_weights: Sequence[LayerWeights], *, next_layer: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The official code's attention and head outputs for every layer:
    ``A_f [L, H, T, T]`` and ``Z_f = A_f V_f [L, H, T, d_head]`` (float32), with transposed
    head slices, no bias and no mask (:func:`bertgeom.analysis.subspace.faithful_qkv`), each
    layer reading :func:`faithful_input` (the next layer's output, as the official code did)."""
    A, Z = [], []
    for l, lw in enumerate(layer_weights):  # one batched call per layer (all heads at once)
        X = faithful_input(hidden_states, l, next_layer=next_layer)
        Af = att.faithful_attention(X, lw)
        V = att.faithful_qkv(X, lw)[2]
        A.append(Af.astype(np.float32))
        Z.append(sub.head_outputs(Af, V).astype(np.float32))
    return np.stack(A), np.stack(Z)


def data_geometry(
    trace: Trace,
    layer_weights: Sequence[LayerWeights],
    *,
    eps: float = 1e-3,
    token_set: str = "all",
    faithful: bool = False,
    padded_hidden: np.ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[sub.DataGeometry, dict[str, np.ndarray] | None]:
    """D1-D3 of every head for one trace, from the model's attention (``faithful=False``) or
    from the official code's hand-made attention (``faithful=True``; then also returns the
    per-head deviation ``{"mean_abs", "max_abs", "row_tv"}`` ``[L, H]`` from the model's).

    Faithful mode reproduces the official code: each layer reads the next layer's output, and
    with ``padded_hidden`` (``[L+1, P, d]``, the model run on the input padded to P = 512
    positions, :func:`padded_hidden_states`) every one of the P positions counts, PAD rows and
    columns included, so a nearly rank-one head shows about P - 1 singular values below ε. The
    token set "all" then means all P positions; "content" keeps the content tokens only. The
    deviation compares the first T rows over all P keys with the model's attention (its PAD
    columns are 0), so attention the faithful map puts on padding counts as deviation.

    Faithful mode works one layer at a time (the same numbers as all layers at once) and calls
    ``progress(done_layers, L)`` after each, so a page can show how far it is."""
    rows = token_rows(trace, token_set)
    if faithful:
        hidden = trace.hidden_states if padded_hidden is None else padded_hidden
        L = len(layer_weights)
        parts, devs = [], []
        for layer in range(L):
            A, Z = faithful_stack(hidden[layer:layer + 2], layer_weights[layer:layer + 1])  # reads hidden[layer + 1]
            model_att = trace.attentions[layer:layer + 1]
            T, P = model_att.shape[-1], A.shape[-1]
            layer_rows = rows
            if P > T:
                Ac = np.zeros(model_att.shape[:-2] + (T, P), np.float32)
                Ac[..., :T] = model_att
                devs.append(sub.attention_deviation(A[..., :T, :], Ac, rows=rows))
                if rows is not None:
                    layer_rows = np.concatenate([rows, np.zeros(P - T, bool)])
            else:
                devs.append(sub.attention_deviation(A, model_att, rows=rows))
            parts.append(sub.head_data_geometry(A, Z, layer_rows, eps=eps))
            if progress is not None:
                progress(layer + 1, L)
        dev = {k: np.concatenate([d[k] for d in devs]) for k in devs[0]}
        merged = sub.DataGeometry(scalars={k: np.concatenate([g.scalars[k] for g in parts]) for k in parts[0].scalars},
                                  spectra={k: np.concatenate([g.spectra[k] for g in parts]) for k in parts[0].spectra},
                                  n_tokens=parts[0].n_tokens, eps=eps)
        return merged, dev
    else:
        A = trace.attentions
        Z = sub.compute_head_outputs(trace.hidden_states, layer_weights, attentions=A)
        dev = None
    return sub.head_data_geometry(A, Z, rows, eps=eps), dev


def padded_hidden_states(loaded, trace: Trace, pad_to: int = FAITHFUL_PAD_TO) -> np.ndarray | None:
    """``hidden_states [L+1, P, d]`` of the model run on ``trace``'s input padded to
    ``P = min(pad_to, the model's limit)`` positions (PAD keys masked, as in the official code's
    forward pass), or ``None`` when the input already fills P."""
    from bertgeom.sets.cone import padded_forward

    P = min(int(pad_to), int(loaded.max_tokens))
    if trace.encoded.n_tokens >= P:
        return None
    hidden, _, _ = padded_forward(loaded, [trace.encoded], P)
    return hidden[0]


def head_set_reducer(
    layer_weights: Sequence[LayerWeights], layer: int, head: int, *, eps: float = 1e-3, token_set: str = "all",
) -> Callable[[object, InputItem], dict[str, np.ndarray]]:
    """A :func:`bertgeom.sets.inputs.map_over_set` reduction: D1-D3 of head ``(layer, head)``
    for one input, with the model's attention and with the faithful one (``[2]`` each), the
    number of tokens used and the faithful-vs-correct row TV distance.

    It reads only hidden states: a :class:`~bertgeom.trace.Trace`, or a
    :class:`~bertgeom.sets.cone.PaddedPass` (runner :func:`~bertgeom.sets.cone.padded_runner`, the
    input padded to 512 positions with PAD keys masked). The model's attention of the head is
    rebuilt from the real tokens' rows (:func:`bertgeom.attention.correct_attention`, equal to the
    model's own to ~1e-6), so one padded forward pass without attention weights serves both modes.
    The faithful values read the next layer's output as the official code did, over every position
    the pass has: padded, they are the single-input tab's faithful values input by input."""
    lw = layer_weights[layer]

    def reduce(result, _item: InputItem) -> dict[str, np.ndarray]:
        hidden = result.hidden if hasattr(result, "hidden") else result.hidden_states  # [L+1, P, d], P >= T
        rows = token_rows(result, token_set)
        T, P = result.encoded.n_tokens, hidden.shape[1]
        X = hidden[layer, :T]
        A = att.correct_attention(X, lw)[head]
        Z = A @ att.project_qkv(X, lw, bias=True)[2][head]
        Xf = faithful_input(hidden, layer)  # the official code's next-layer input
        Af = att.faithful_attention(Xf, lw)[head]
        Zf = Af @ att.faithful_qkv(Xf, lw)[2][head]
        if P == T:
            g = sub.head_data_geometry(np.stack([A, Af])[None], np.stack([Z, Zf])[None], rows, eps=eps)
            out = {k: np.asarray(g.scalars[k][0], dtype=np.float64) for k in ACROSS_KEYS}
            n_tokens = g.n_tokens
            row_tv = sub.attention_deviation(Af, A, rows=rows)["row_tv"]
        else:  # padded: the faithful geometry counts all P positions; the deviation compares T rows over P keys
            rows_f = None if rows is None else np.concatenate([rows, np.zeros(P - T, bool)])
            gc = sub.head_data_geometry(A[None, None], Z[None, None], rows, eps=eps)
            gf = sub.head_data_geometry(Af[None, None], Zf[None, None], rows_f, eps=eps)
            out = {k: np.array([gc.scalars[k][0, 0], gf.scalars[k][0, 0]], dtype=np.float64) for k in ACROSS_KEYS}
            n_tokens = gc.n_tokens
            Ac = np.zeros((T, P))
            Ac[:, :T] = A
            row_tv = sub.attention_deviation(Af[:T], Ac, rows=rows)["row_tv"]
        out["n_tokens"] = np.asarray(n_tokens, dtype=np.float64)
        out["row_tv"] = np.asarray(row_tv, dtype=np.float64)
        return out

    return reduce


def collect_set_result(res: SetResult) -> AcrossInputs:
    """Stack a :class:`SetResult` of :func:`head_set_reducer` outputs into plain arrays
    (``npz``-safe: no objects): ``ACROSS_KEYS`` ``[N, 2]``, ``n_tokens``/``row_tv`` ``[N]``,
    ``names``/``labels``/``predicted`` ``[N]`` strings, ``errors`` ``[E]`` strings."""
    n = len(res.results)
    out: dict[str, np.ndarray] = {}
    for k in ACROSS_KEYS:
        out[k] = np.stack([r[k] for r in res.results]) if n else np.zeros((0, 2))
    for k in ("n_tokens", "row_tv"):
        out[k] = np.array([float(r[k]) for r in res.results], dtype=np.float64)
    out["names"] = np.array([it.name for it in res.items], dtype=str)
    out["labels"] = np.array([it.label or "" for it in res.items], dtype=str)
    out["predicted"] = np.array([p or "" for p in res.predicted], dtype=str)
    out["errors"] = np.array([f"{name}: {msg}" for name, msg in res.errors], dtype=str)
    return AcrossInputs.from_arrays(out)


@dataclass(frozen=True, eq=False)  # arrays: equality would be element-wise
class AcrossInputs:
    """One head's D1-D3 across the inputs of a set (the ``subspace-across`` view's typed result):
    ``measures[k]`` ``[N, 2]`` (correct, faithful) for each of :data:`ACROSS_KEYS`, ``n_tokens`` and
    ``row_tv`` ``[N]``, ``names``/``labels``/``predicted`` ``[N]`` and ``errors`` ``[E]`` strings."""

    measures: Mapping[str, np.ndarray]
    n_tokens: np.ndarray
    row_tv: np.ndarray
    names: np.ndarray
    labels: np.ndarray
    predicted: np.ndarray
    errors: np.ndarray

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {**self.measures, "n_tokens": self.n_tokens, "row_tv": self.row_tv, "names": self.names,
                "labels": self.labels, "predicted": self.predicted, "errors": self.errors}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> AcrossInputs:
        return cls({k: np.asarray(arrays[k]) for k in ACROSS_KEYS}, *(np.asarray(arrays[k]) for k in (
            "n_tokens", "row_tv", "names", "labels", "predicted", "errors")))


def padded_passes(loaded, items: Sequence[InputItem], progress: Callable[[int, int], None] | None = None) -> SetResult:
    """The forward passes over ``items`` padded to :data:`FAITHFUL_PAD_TO` (or the model's limit) that
    :func:`head_across_set` reduces: one padded pass per input serves the correct and faithful modes,
    and one list of passes serves every head."""
    from bertgeom.sets.cone import padded_runner
    from bertgeom.sets.inputs import map_over_set

    pad_to = min(FAITHFUL_PAD_TO, int(loaded.max_tokens))
    return map_over_set(loaded, items, lambda r, _it: r, progress=progress, runner=padded_runner(pad_to),
                        max_tokens=pad_to)


def head_across_set(loaded, items: Sequence[InputItem], layer: int, head: int, eps: float, token_set: str,
                    progress: Callable[[int, int], None] | None = None, *,
                    passes: SetResult | None = None) -> AcrossInputs:
    """D1-D3 of head ``(layer, head)`` over ``items`` (:func:`head_set_reducer` on each padded pass):
    the passes are run here, or taken from ``passes`` (:func:`padded_passes`, shared by every head)."""
    from threadpoolctl import threadpool_limits

    from bertgeom.sets.cone import padded_runner
    from bertgeom.sets.inputs import map_over_set
    from bertgeom.weights import layer_weights_of

    reducer = head_set_reducer(layer_weights_of(loaded.model), layer, head, eps=eps, token_set=token_set)

    def reduce(result, item):
        with threadpool_limits(limits=1):  # small matrices: threaded BLAS only spins (40x slower measured)
            return reducer(result, item)

    if passes is not None:
        reduced = [reduce(p, it) for p, it in zip(passes.results, passes.items)]
        return collect_set_result(SetResult(passes.items, reduced, passes.predicted, passes.errors))
    pad_to = min(FAITHFUL_PAD_TO, int(loaded.max_tokens))
    return collect_set_result(map_over_set(loaded, items, reduce, progress=progress, runner=padded_runner(pad_to),
                                           max_tokens=pad_to))
