"""Attention rollout and attention flow (Abnar & Zuidema 2020), on one input's attention.

Both read the attention of a layer as a graph with residual connections: the *raw attention
graph* of layer l is ``Â_l = r · mean_h A_l + (1 - r) · I`` with rows renormalised (r = 0.5,
the residual stream carrying half of each token's information up unchanged).  Nodes are
(layer, token) pairs, layer 0 being the input embeddings; the edge from token j at layer l-1
to token i at layer l has capacity / weight ``Â_l[i, j]``.

* **Rollout** multiplies the layers, ``R_l = Â_l ⋯ Â_1``: ``R_l[t, j]`` is the share of token
  t's layer-l state that traces back to input j when mixing is assumed to be linear along
  every path (paths multiply, parallel paths add).
* **Flow** treats the weights as pipe capacities instead, and takes the maximum flow from the
  input node (0, j) to the node (l, t) (Edmonds-Karp, on a dense capacity matrix; the same values
  as :func:`networkx.maximum_flow_value` on :func:`flow_graph`, which the tests check).
  A path carries at most its narrowest edge, so flow is never more than any single layer
  allows and spreads more evenly over the inputs than rollout.

Both come from Abnar & Zuidema, "Quantifying Attention Flow in Transformers" (ACL 2020, §3);
Bonino et al. 2025 (arXiv:2502.12033, §4) compute both beside the attention maps.  Rollout is a
handful of matrix products; flow is one max-flow problem per (input token, layer), so long inputs
prune weak edges (``min_weight``) and the caller reports it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["residual_attention", "rollout", "attention_flow", "flow_graph", "flow_view", "flow_window",
           "FLOW_MAX_TOKENS", "FLOW_WINDOW", "FLOW_RESIDUAL"]

#: Inputs longer than this get flow and rollout on a window of their first tokens (one max-flow
#: problem per token and layer); :data:`FLOW_WINDOW` tokens by default, as the 2025 paper's notebook
#: does for its genomes (their first 12 tokens).
FLOW_MAX_TOKENS = 48
FLOW_WINDOW = 24
#: The attention's weight against the residual by default (Abnar & Zuidema: attention plus identity).
FLOW_RESIDUAL = 0.5

#: Residual capacity below which a pipe counts as full (rounding left over by earlier augmentations;
#: without it, paths carrying ~1e-17 would be augmented one by one).
_EPS = 1e-13


def residual_attention(attentions: np.ndarray, residual: float = FLOW_RESIDUAL) -> np.ndarray:
    """``[L, T, T]`` raw attention graph ``Â_l = r · mean_h A_l + (1 - r) I``, rows renormalised.

    ``attentions`` is ``[L, H, T, T]`` (one input); ``residual`` is r, the weight of attention
    against the identity (1: attention alone, 0: the identity alone)."""
    a = np.asarray(attentions)
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attentions must be [L, H, T, T], got {a.shape}")
    if not 0.0 <= residual <= 1.0:
        raise ValueError("residual must lie in [0, 1]")
    # the head mean accumulates in float64 without a float64 copy of all maps (105 MB for a genome)
    m = residual * a.mean(axis=1, dtype=np.float64) + (1.0 - residual) * np.eye(a.shape[-1])[None]
    return m / m.sum(axis=-1, keepdims=True)


def rollout(attentions: np.ndarray, residual: float = FLOW_RESIDUAL) -> np.ndarray:
    """``[L, T, T]`` rollout after every layer, ``R_l = Â_l ⋯ Â_1`` (rows: output tokens, columns:
    input tokens; every row sums to 1)."""
    m = residual_attention(attentions, residual)
    out = np.empty_like(m)
    acc = np.eye(m.shape[-1])
    for l in range(m.shape[0]):  # L products of whole matrices
        acc = m[l] @ acc
        out[l] = acc
    return out


def rollout_row(attentions: np.ndarray, row: int = 0, residual: float = FLOW_RESIDUAL) -> np.ndarray:
    """``[L, T]``: row ``row`` of the rollout after every layer, ``e_row^T Â_l ⋯ Â_1`` (what one output
    token, [CLS] by default, has gathered from every input token).

    The row is pushed through from the left, vector-matrix products only: O(L^2 T^2) instead of the
    O(L T^3) of :func:`rollout`'s whole products (a 427-token genome: ~20x less work)."""
    m = residual_attention(attentions, residual)
    L, t = m.shape[0], m.shape[-1]
    if not 0 <= row < t:
        raise ValueError(f"row must lie in [0, {t}), got {row}")
    rows = np.empty((L, t))
    for layer in range(L):  # L^2 / 2 vector-matrix products: a handful, not a hot loop
        v = m[layer, row]
        for earlier in range(layer - 1, -1, -1):
            v = v @ m[earlier]
        rows[layer] = v
    return rows


def flow_graph(attentions: np.ndarray, residual: float = FLOW_RESIDUAL, *, min_weight: float = 0.0):
    """The layered :class:`networkx.DiGraph` of :func:`residual_attention`: node ``(l, i)``, edge
    ``(l-1, j) -> (l, i)`` with ``capacity = Â_l[i, j]``; edges below ``min_weight`` are left out."""
    import networkx as nx

    m = residual_attention(attentions, residual)
    L, T, _ = m.shape
    l, i, j = np.nonzero(m >= max(min_weight, 1e-12))
    g = nx.DiGraph()
    g.add_nodes_from((a, b) for a in range(L + 1) for b in range(T))
    g.add_weighted_edges_from(
        zip(zip(l.tolist(), j.tolist()), zip((l + 1).tolist(), i.tolist()), m[l, i, j].tolist()), weight="capacity"
    )
    return g


def attention_flow(
    attentions: np.ndarray,
    target: int = 0,
    residual: float = FLOW_RESIDUAL,
    *,
    layers: list[int] | None = None,
    min_weight: float = 0.0,
    normalize: bool = True,
    progress=None,
) -> np.ndarray:
    """``[L, T]`` attention flow from every input token j to the output token ``target`` of each
    layer: ``F[l, j] = maxflow((0, j) -> (l + 1, target))`` on :func:`flow_graph` (0-based layer l
    means after layer l + 1).  Layers not in ``layers`` (0-based; default all) are NaN.

    ``normalize`` (default, as Abnar & Zuidema's released code does) divides each layer's flows by
    their sum, so every row is a distribution over the input tokens like rollout's; each token's
    max-flow is its own problem, so the raw values of a deep layer add up to several (6.0-9.7 after
    layer 6 of MiniLM to [CLS] over the shipped sentences, fp32: ``tools/methods_numbers.py --only flow``)
    and one colour scale would be dominated by the deep layers. ``normalize=False`` gives the raw max-flow values.

    The max-flows are solved by :func:`_max_flow_dense` (Edmonds-Karp on the layered graph's dense
    capacity matrix), which gives the values of :func:`networkx.maximum_flow_value` on
    :func:`flow_graph` (the same maximum, to rounding) several times faster: no graph objects, and
    one capacity matrix per layer shared by its T problems.

    ``progress(done, total)`` is called after every layer (one max-flow per input token)."""
    a = np.asarray(attentions)
    L, T = a.shape[0], a.shape[-1]
    if not 0 <= target < T:
        raise IndexError(f"target token {target} outside an input of {T} tokens")
    todo = list(range(L)) if layers is None else sorted({int(x) for x in layers})
    m = residual_attention(a, residual)
    m = np.where(m >= max(min_weight, 1e-12), m, 0.0)  # the edges flow_graph keeps
    out = np.full((L, T), np.nan)
    for k, l in enumerate(todo):
        cap = _layered_capacities(m[: l + 1], target)
        sink = cap.shape[0] - 1
        out[l] = [_max_flow_dense(cap, j, sink) for j in range(T)]
        if normalize:
            total = out[l].sum()
            out[l] = out[l] / total if total > 0 else out[l]
        if progress:
            progress(k + 1, len(todo))
    return out


def _layered_capacities(m: np.ndarray, target: int) -> np.ndarray:
    """Dense capacities ``[N, N]`` of the graph from the inputs (layer 0) up to ``(len(m), target)``:
    node ``k * T + i`` is token i at layer k, ``cap[(k-1)T + j, kT + i] = m[k-1][i, j]``; the top layer
    keeps only the target (its last node), since the other top nodes lead nowhere."""
    n_layers, T, _ = m.shape
    N = n_layers * T + 1
    cap = np.zeros((N, N))
    for k in range(n_layers - 1):
        cap[k * T:(k + 1) * T, (k + 1) * T:(k + 2) * T] = m[k].T
    cap[(n_layers - 1) * T:n_layers * T, N - 1] = m[n_layers - 1][target]
    return cap


def _max_flow_dense(cap: np.ndarray, source: int, sink: int) -> float:
    """Maximum flow value from ``source`` to ``sink`` over dense capacities ``cap[u, v]`` (Edmonds-Karp:
    augment along a shortest path of the residual graph, found by a breadth-first search that expands
    a whole frontier per numpy step, until none is left)."""
    r = cap.copy()  # residual capacities: forward r[u, v] = c - f, backward r[v, u] = f
    N = r.shape[0]
    total = 0.0
    while True:
        parent = np.full(N, -1)
        parent[source] = source
        frontier = np.array([source])
        while frontier.size and parent[sink] < 0:
            reach = r[frontier] > _EPS
            found = np.flatnonzero(reach.any(axis=0) & (parent < 0))
            if not found.size:
                break
            parent[found] = frontier[reach[:, found].argmax(axis=0)]
            frontier = found
        if parent[sink] < 0:
            return total
        us, vs = [], []
        v = sink
        while v != source:
            us.append(parent[v])
            vs.append(v)
            v = parent[v]
        bottleneck = r[us, vs].min()
        r[us, vs] -= bottleneck
        r[vs, us] += bottleneck
        total += bottleneck


def flow_window(n_tokens: int) -> int:
    """The tokens flow and rollout use by default: all of a short input, the first
    :data:`FLOW_WINDOW` of one longer than :data:`FLOW_MAX_TOKENS`."""
    return int(n_tokens) if n_tokens <= FLOW_MAX_TOKENS else FLOW_WINDOW


def flow_view(attentions: np.ndarray, n: int, residual: float = FLOW_RESIDUAL, target: int = 0,
              normalize: bool = True) -> dict[str, np.ndarray]:
    """``{"flow": [L, n], "rollout": [L, n]}`` into token ``target`` on the first ``n`` tokens of one
    input's ``[L, H, T, T]`` attention (what the Attention Heads page draws). In a window (``n < T``)
    each query's attention inside it is renormalised to 1 first, so that r stays the attention's weight
    against the residual (unrenormalised, the little mass left in 24 of 427 tokens made the identity
    weigh ~0.87 instead of 1 - r)."""
    full = np.asarray(attentions)
    a = np.asarray(full[:, :, :n, :n], dtype=np.float64)
    if n < full.shape[-1]:
        a = a / np.maximum(a.sum(axis=-1, keepdims=True), 1e-12)
    return {"flow": attention_flow(a, target=target, residual=residual, normalize=normalize),
            "rollout": rollout(a, residual=residual)[:, target, :]}
