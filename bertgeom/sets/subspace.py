"""The Subspace Directions page's computations over inputs (UI-free).

D1-D3 of every head for one trace, from the model's attention or the official code's
hand-made one (:func:`data_geometry`), and the reduction that follows one head over a set of
inputs (:func:`head_set_reducer`, stacked by :func:`collect_set_result`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from bertgeom import attention as att
from bertgeom.analysis import subspace as sub
from bertgeom.sets.inputs import InputItem, SetResult
from bertgeom.trace import Trace
from bertgeom.weights import LayerWeights

#: Token sets offered for the data-space quantities (of :data:`bertgeom.inputs.TOKEN_SETS`).
SUBSPACE_TOKEN_SETS = ("all", "content")

#: Per-input quantities kept by the across-inputs reduction (each ``[N, 2]``: correct, faithful).
ACROSS_KEYS = ("delta_A", "attn_rank", "attn_rank_norm", "out_energy_top1", "delta_out")
MODES = ("correct", "faithful")


def token_rows(trace: Trace, token_set: str) -> np.ndarray | None:
    """Boolean ``[T]`` token selection for ``token_set`` (``None`` = all positions, also when the
    set would be empty)."""
    rows = trace.encoded.token_rows(token_set)
    return None if rows.all() or not rows.any() else rows


def faithful_stack(hidden_states: np.ndarray, layer_weights: Sequence[LayerWeights]) -> tuple[np.ndarray, np.ndarray]:
    """The official code's attention and head outputs for every layer:
    ``A_f [L, H, T, T]`` and ``Z_f = A_f V_f [L, H, T, d_head]`` (float32), with transposed
    head slices, no bias and no mask (:func:`bertgeom.analysis.subspace.faithful_qkv`)."""
    A, Z = [], []
    for l, lw in enumerate(layer_weights):  # one batched call per layer (all heads at once)
        Af = att.faithful_attention(hidden_states[l], lw)
        V = att.faithful_qkv(hidden_states[l], lw)[2]
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
) -> tuple[sub.DataGeometry, dict[str, np.ndarray] | None]:
    """D1-D3 of every head for one trace, from the model's attention (``faithful=False``) or
    from the official code's hand-made attention (``faithful=True``; then also returns the
    per-head deviation ``{"mean_abs", "max_abs", "row_tv"}`` ``[L, H]`` from the model's)."""
    rows = token_rows(trace, token_set)
    if faithful:
        A, Z = faithful_stack(trace.hidden_states, layer_weights)
        dev = sub.attention_deviation(A, trace.attentions, rows=rows)
    else:
        A = trace.attentions
        Z = sub.compute_head_outputs(trace.hidden_states, layer_weights, attentions=A)
        dev = None
    return sub.head_data_geometry(A, Z, rows, eps=eps), dev


def head_set_reducer(
    layer_weights: Sequence[LayerWeights], layer: int, head: int, *, eps: float = 1e-3, token_set: str = "all"
) -> Callable[[Trace, InputItem], dict[str, np.ndarray]]:
    """A :func:`bertgeom.sets.inputs.map_over_set` reduction: D1-D3 of head ``(layer, head)``
    for one input, with the model's attention and with the faithful one (``[2]`` each), the
    number of tokens used and the faithful-vs-correct row TV distance."""
    lw = layer_weights[layer]

    def reduce(trace: Trace, _item: InputItem) -> dict[str, np.ndarray]:
        rows = token_rows(trace, token_set)
        X = trace.hidden_states[layer]
        _, _, V = att.project_qkv(X, lw, bias=True)
        Af = att.faithful_attention(X, lw)[head]
        Vf = att.faithful_qkv(X, lw)[2]
        A = trace.attentions[layer, head].astype(np.float64)
        Z = A @ V[head]
        Zf = Af @ Vf[head]
        g = sub.head_data_geometry(np.stack([A, Af])[None], np.stack([Z, Zf])[None], rows, eps=eps)
        out = {k: np.asarray(g.scalars[k][0], dtype=np.float64) for k in ACROSS_KEYS}
        out["n_tokens"] = np.asarray(g.n_tokens, dtype=np.float64)
        out["row_tv"] = np.asarray(sub.attention_deviation(Af, A, rows=rows)["row_tv"], dtype=np.float64)
        return out

    return reduce


def collect_set_result(res: SetResult) -> dict[str, np.ndarray]:
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
    return out
