"""Cached computations of the Subspace Directions page.

* layer weights: once per model (``st.cache_resource``: read-only numpy arrays, shared);
* weight geometry (D4): once per model and threshold setting (``st.cache_data``);
* data geometry (D1-D3) of every head: per (model, input, ε, token set, correct/faithful);
* across inputs: per (model, set fingerprint, layer, head, ε, token set), with a progress bar
  and a disk cache (:func:`bertgeom.inputsets.disk_cached_arrays`), so a head computed once is
  shown at once afterwards, also after a server restart.

The pure parts (:func:`token_rows`, :func:`faithful_stack`, :func:`data_geometry`,
:func:`head_set_reducer`, :func:`collect_set_result`) take plain arrays and can be tested
without a Streamlit runtime.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import streamlit as st

from bertgeom import attention as att
from bertgeom import subspace as sub
from bertgeom.inputsets import InputItem, SetResult, disk_cached_arrays, map_over_set, set_fingerprint
from bertgeom.trace import Trace
from bertgeom.ui.cache import cached_model, get_trace
from bertgeom.weights import LayerWeights, extract_layer_weights

#: Token sets offered for the data-space quantities.
TOKEN_SETS: dict[str, str] = {
    "all": "all tokens, [CLS] and [SEP] included (the official code's choice)",
    "content": "content tokens only ([CLS] and [SEP] left out)",
}

#: Per-input quantities kept by the across-inputs reduction (each ``[N, 2]``: correct, faithful).
ACROSS_KEYS = ("delta_row", "attn_rank", "attn_rank_norm", "out_energy_top1", "delta_out")
MODES = ("correct", "faithful")
_ACROSS_VERSION = "subspace-across/v1"


# -------------------------------------------------------------------------------------------
# Pure helpers
# -------------------------------------------------------------------------------------------
def token_rows(trace: Trace, token_set: str) -> np.ndarray | None:
    """Boolean ``[T]`` token selection for ``token_set`` (``None`` = all positions)."""
    if token_set == "all":
        return None
    if token_set == "content":
        rows = np.asarray(trace.encoded.content_mask, dtype=bool)
        return rows if rows.any() else None
    raise ValueError(f"unknown token set {token_set!r}")


def faithful_stack(hidden_states: np.ndarray, layer_weights: Sequence[LayerWeights]) -> tuple[np.ndarray, np.ndarray]:
    """The official code's attention and head outputs for every layer:
    ``A_f [L, H, T, T]`` and ``Z_f = A_f V_f [L, H, T, d_head]`` (float32), with transposed
    head slices, no bias and no mask (:func:`bertgeom.subspace.faithful_qkv`)."""
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
    """A :func:`bertgeom.inputsets.map_over_set` reduction: D1-D3 of head ``(layer, head)``
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


# -------------------------------------------------------------------------------------------
# Streamlit caches
# -------------------------------------------------------------------------------------------
@st.cache_resource(max_entries=4, show_spinner="Reading the layer weights…")
def cached_layer_weights(model_id: str, weights_hash: str) -> list[LayerWeights]:
    """The model's per-layer weights as numpy arrays (shared, read-only)."""
    return extract_layer_weights(cached_model(model_id).model)


@st.cache_data(max_entries=8, show_spinner="Computing the weight geometry of every head…")
def cached_weight_geometry(model_id: str, weights_hash: str, rank_rtol: float | None, sym_rtol: float) -> sub.WeightGeometry:
    """D4 and the weight spectra of every head (no input needed)."""
    lws = cached_layer_weights(model_id, weights_hash)
    return sub.weight_geometry(lws, rank_rtol=rank_rtol, sym_rtol=sym_rtol)


@st.cache_data(max_entries=16, show_spinner="Computing D1–D3 for every head…")
def cached_data_geometry(
    model_id: str, weights_hash: str, text: str, eps: float, token_set: str, faithful: bool
) -> tuple[sub.DataGeometry, dict[str, np.ndarray] | None]:
    """:func:`data_geometry` of the current input (the trace comes from the shared cache)."""
    trace = get_trace(model_id, text)
    return data_geometry(trace, cached_layer_weights(model_id, weights_hash), eps=eps, token_set=token_set,
                         faithful=faithful)


@st.cache_data(max_entries=16, show_spinner=False)
def cached_faithful_layer(model_id: str, weights_hash: str, text: str, layer: int) -> np.ndarray:
    """The official code's attention ``[H, T, T]`` (float32) of one layer for the current input."""
    trace = get_trace(model_id, text)
    lw = cached_layer_weights(model_id, weights_hash)[layer]
    return att.faithful_attention(trace.hidden_states[layer], lw).astype(np.float32)


@st.cache_data(max_entries=32, show_spinner=False)
def cached_joint_qk(model_id: str, weights_hash: str, text: str, layer: int, head: int, normalize: bool,
                    faithful: bool) -> sub.JointQKProjection:
    """Joint 2-D PCA of one head's queries and keys (correct, or the faithful projections)."""
    trace = get_trace(model_id, text)
    lw = cached_layer_weights(model_id, weights_hash)[layer]
    X = trace.hidden_states[layer]
    Q, K, _ = att.faithful_qkv(X, lw) if faithful else att.project_qkv(X, lw, bias=True)
    return sub.joint_qk_pca(Q[head], K[head], n_components=2, normalize=normalize)


@st.cache_resource(max_entries=1)
def _across_memo() -> OrderedDict:
    """Process-wide LRU of across-inputs results (small arrays), in front of the disk cache."""
    return OrderedDict()


def across_inputs(
    model_id: str,
    weights_hash: str,
    items: Sequence[InputItem],
    layer: int,
    head: int,
    *,
    eps: float = 1e-3,
    token_set: str = "all",
    max_memo: int = 48,
) -> dict[str, np.ndarray]:
    """D1-D3 of head ``(layer, head)`` over a set of inputs (see :func:`collect_set_result`).

    Runs the model over the set in batches with a progress bar the first time; afterwards
    the result comes from memory or from the disk cache.
    """
    fingerprint = set_fingerprint(items)
    key = (_ACROSS_VERSION, model_id, weights_hash, fingerprint, int(layer), int(head), float(eps), token_set)
    memo = _across_memo()
    if key in memo:
        memo.move_to_end(key)
        return memo[key]
    loaded = cached_model(model_id)
    lws = cached_layer_weights(model_id, weights_hash)
    bar = st.progress(0.0, text=f"Running the model over {len(items)} inputs…")

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"{done} of {total} inputs analysed…")

    def compute() -> dict[str, np.ndarray]:
        reducer = head_set_reducer(lws, layer, head, eps=eps, token_set=token_set)
        return collect_set_result(map_over_set(loaded, items, reducer, progress=progress))

    try:
        arrays = disk_cached_arrays(key, compute)
    finally:
        bar.empty()
    memo[key] = arrays
    while len(memo) > max_memo:
        memo.popitem(last=False)
    return arrays
