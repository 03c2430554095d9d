"""One head's queries and keys over a whole set of inputs, embedded jointly (AttentionViz).

For a head (layer l, head h) every token of every input gives a query ``q = x W_q,h^T + b_q,h``
and a key ``k = x W_k,h^T + b_k,h`` (``x`` = the layer's input hidden state). Yeh et al. embed
all queries and keys of a head over a data set in one 2-D map; before that they make distance
read as attention with two transformations that leave every attention row unchanged:

* **scaling**: queries times ``c`` and keys divided by ``c`` (dot products unchanged), with ``c``
  chosen so that queries and keys have the same mean norm;
* **translation**: keys shifted so that their centroid is the queries' centroid
  (``q·(k + t) = q·k + q·t`` is the same for every key of a row, so the softmax is unchanged).

Then ``‖q − k‖² = ‖q‖² + ‖k‖² − 2 q·k``: with comparable norms, a key close to a query gets a
large score. (Yeh et al. also show an unnormalised view; ``normalise=False`` gives it.)

Everything is vectorised over tokens: the set's hidden states are stacked once and multiplied
by the head's weights in one product.

References: Yeh, Chen, Wong, Hu, Gliwa, Neubig, Wattenberg 2023, "AttentionViz: A Global View of
Transformer Attention", arXiv:2305.03210 (§4 joint embedding, query-key normalisation);
exBERT (Hoover et al. 2020, arXiv:1910.05276) for searching a corpus for the contexts a head matches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "LayerRecord", "SetQK", "attentionviz_normalise", "collect_head_qk", "dot_distance_correlation", "embed_qk",
    "layer_record", "token_search",
]


@dataclass
class SetQK:
    """A head's queries and keys over a set, one row per token (queries and keys share rows).

    ``Q``, ``K``: ``[N, d_head]``; per row: ``item`` (index of the input), ``position`` (token
    index in its input), ``token``, ``kind`` ([CLS]/[SEP]/punctuation/other), ``group`` (the
    caller's label, e.g. a domain; "" when none), ``label`` (the input's class or ""), and the
    attention the token *receives* as a key: ``received_mean`` (mean over its input's queries)
    and ``received_max`` with ``strongest_query`` (position of the query that gives the most).
    ``names`` are the inputs' names, ``texts`` their texts.
    """

    layer: int
    head: int
    Q: np.ndarray
    K: np.ndarray
    rows: pd.DataFrame
    names: list[str]
    texts: list[str]


def _kinds(encoded) -> np.ndarray:
    kinds = np.full(encoded.n_tokens, "other", dtype=object)
    kinds[np.asarray(encoded.is_punct, dtype=bool)] = "punctuation"
    kinds[np.asarray(encoded.is_sep, dtype=bool)] = "[SEP]"
    kinds[np.asarray(encoded.is_cls, dtype=bool)] = "[CLS]"
    return kinds


@dataclass
class LayerRecord:
    """What one input keeps for one layer: its layer-input hidden states ``[T, d]``, token
    columns, and per head the attention each key receives (mean, max over queries; the argmax
    query). Small, so a set's records stay in memory while the user changes heads."""

    hidden: np.ndarray
    tokens: list[str]
    kinds: np.ndarray
    groups: list[str]
    received_mean: np.ndarray  # [H, T]
    received_max: np.ndarray  # [H, T]
    strongest_query: np.ndarray  # [H, T]


def layer_record(trace, layer: int,
                 token_groups: Callable[[object], Sequence[str] | None] | None = None) -> LayerRecord:
    """The :class:`LayerRecord` of one trace. ``token_groups(trace)`` may give one label per token
    (for genomes, each token's domain), supplied by the caller so this module stays independent
    of the input kind."""
    enc = trace.encoded
    A = np.asarray(trace.attentions[layer], dtype=np.float64)  # [H, T, T]
    groups = token_groups(trace) if token_groups is not None else None
    return LayerRecord(
        hidden=np.asarray(trace.hidden_states[layer], dtype=np.float32).copy(),
        tokens=[str(x) for x in enc.tokens],
        kinds=_kinds(enc),
        groups=[str(g or "") for g in groups] if groups is not None else [""] * enc.n_tokens,
        received_mean=A.mean(axis=1).astype(np.float32),
        received_max=A.max(axis=1).astype(np.float32),
        strongest_query=A.argmax(axis=1).astype(np.int32),
    )


def collect_head_qk(
    records: Sequence[LayerRecord],
    layer_weights,
    layer: int,
    head: int,
    *,
    labels: Sequence[str | None] | None = None,
    names: Sequence[str] | None = None,
    texts: Sequence[str] | None = None,
) -> SetQK:
    """Queries, keys and received attention of head ``(layer, head)`` (0-based) over a set's
    :class:`LayerRecord` of that layer; ``layer_weights`` is the model's list of
    :class:`~bertgeom.weights.LayerWeights`. One matrix product for all tokens of the set."""
    lw = layer_weights[layer]
    s = slice(head * lw.head_dim, (head + 1) * lw.head_dim)
    X = np.concatenate([r.hidden for r in records], axis=0).astype(np.float64)
    Q = X @ lw.W_q[s].T.astype(np.float64) + lw.b_q[s]
    K = X @ lw.W_k[s].T.astype(np.float64) + lw.b_k[s]
    sizes = [len(r.tokens) for r in records]
    cat = np.concatenate
    rows = pd.DataFrame({
        "item": np.repeat(np.arange(len(records)), sizes),
        "position": cat([np.arange(n) for n in sizes]),
        "token": [t for r in records for t in r.tokens],
        "kind": cat([r.kinds for r in records]),
        "group": [g for r in records for g in r.groups],
        "label": np.repeat([(labels[i] if labels is not None else None) or "" for i in range(len(records))], sizes),
        "received_mean": cat([r.received_mean[head] for r in records]),
        "received_max": cat([r.received_max[head] for r in records]),
        "strongest_query": cat([r.strongest_query[head] for r in records]),
    })
    return SetQK(layer, head, Q, K, rows,
                 list(names) if names is not None else [f"input {i + 1}" for i in range(len(records))],
                 list(texts) if texts is not None else [""] * len(records))


def attentionviz_normalise(Q, K) -> tuple[np.ndarray, np.ndarray, float]:
    """``(Q', K', c)``: queries scaled by ``c``, keys by ``1/c`` (equal mean norms), then keys
    translated onto the queries' centroid. Within any input every attention row is unchanged."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    qn = np.linalg.norm(Q, axis=1).mean()
    kn = np.linalg.norm(K, axis=1).mean()
    c = float(np.sqrt(kn / qn)) if qn > 0 and kn > 0 else 1.0
    Qs, Ks = Q * c, K / c
    return Qs, Ks - Ks.mean(axis=0) + Qs.mean(axis=0), c


def dot_distance_correlation(qk: SetQK, *, normalise: bool = True) -> float:
    """Pearson correlation of ``q·k`` with ``‖q − k‖`` over every (query, key) pair of the same input,
    in the head's full space: AttentionViz's criterion (the closer to −1, the better distance reads as
    attention). One matrix product per input."""
    Q, K = (attentionviz_normalise(qk.Q, qk.K)[:2]) if normalise else (qk.Q, qk.K)
    items = qk.rows["item"].to_numpy()
    dots, dists = [], []
    for i in np.unique(items):
        sel = items == i
        q, k = Q[sel], K[sel]
        d = q @ k.T
        sq = (q * q).sum(1)[:, None] + (k * k).sum(1)[None, :] - 2 * d
        dots.append(d.ravel())
        dists.append(np.sqrt(np.maximum(sq, 0.0)).ravel())
    x, y = np.concatenate(dots), np.concatenate(dists)
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def embed_qk(qk: SetQK, method: str = "pca", *, normalise: bool = True, max_points: int = 2000,
             seed: int = 0) -> tuple[pd.DataFrame, float]:
    """A joint 2-D embedding of the head's queries and keys: a frame with one row per point
    (``x, y, role`` = query/key, and the token's columns of ``qk.rows``) and the scale ``c``.

    With more than ``max_points`` points a random (seeded) subset of tokens is embedded, each
    with both its query and its key, so the map stays responsive; ``method`` is pca, umap or
    tsne (:func:`bertgeom.analysis.projections.project`).
    """
    from bertgeom.analysis.projections import project

    Q, K, c = (*attentionviz_normalise(qk.Q, qk.K),) if normalise else (qk.Q, qk.K, 1.0)
    n = Q.shape[0]
    keep = np.arange(n)
    if 2 * n > max_points:
        keep = np.sort(np.random.default_rng(seed).choice(n, size=max(1, max_points // 2), replace=False))
    X = np.concatenate([Q[keep], K[keep]], axis=0)
    kwargs = {"random_state": seed} if method in ("umap", "tsne") else {}
    coords = project(X, method, 2, **kwargs).coords
    rows = qk.rows.iloc[keep].reset_index(drop=True)
    frame = pd.concat([rows.assign(role="query"), rows.assign(role="key")], ignore_index=True)
    frame["x"], frame["y"] = coords[:, 0], coords[:, 1]
    frame["row"] = np.concatenate([keep, keep])
    return frame, c


def token_search(qk: SetQK, query: str, *, limit: int = 20) -> pd.DataFrame:
    """Where the head attends most to a token: every occurrence (as a key) of a token equal to
    ``query`` (case-insensitive; a k-mer or word piece, "##" ignored), ranked by the attention it
    receives (mean over its input's queries), with the query that gives it the most."""
    needle = query.strip().lower().removeprefix("##")
    if not needle:
        return qk.rows.iloc[:0]
    toks = qk.rows["token"].str.lower().str.removeprefix("##")
    hits = qk.rows[toks == needle].sort_values("received_mean", ascending=False).head(limit)
    out = hits[["item", "position", "token", "received_mean", "received_max", "strongest_query"]].copy()
    out.insert(0, "input", [qk.names[i] for i in hits["item"]])
    return out.reset_index(drop=True)
