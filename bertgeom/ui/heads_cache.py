"""Cached computations of the Attention Heads page (Streamlit caches around pure library code).

* Current input: Jensen-Shannon distances between heads, MDS, k-means, head disabling and
  checkpoint comparisons, cached per (model, input, parameters) with ``st.cache_data``.
* Over a set of inputs: :func:`set_summary` runs the model once over the shipped set and keeps
  small per-input reductions (per-head features, k90 rows, Clark's JS sums, spike-domain
  attention masses).  The arrays are cached on disk (``disk_cached_arrays``, keyed by the
  model's weights hash, the set's fingerprint and the parameters) and in a small in-process
  LRU, so a second visit -- or another session on the same server -- is instant.  Per-class
  mean maps (the paper's recipe) are recomputed on demand for one class from its correctly
  classified inputs and kept with ``st.cache_resource`` (read-only, float16).

The pure helpers (:func:`compute_set_arrays`, :func:`js_rows_for`) run without a Streamlit
session, so the tests call them directly.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

from bertgeom.heads import TokenKinds, head_features
from bertgeom.inputsets import InputItem, disk_cached_arrays, map_over_set, set_fingerprint, shipped_set
from bertgeom.ui.cache import cached_model, get_trace

#: Bump when the layout of the set arrays changes (invalidates old disk caches).
SET_VERSION = 1
#: The paper's THETA for "high-confidence" attention (config/general_config.yaml).
SET_THETA = 0.3
#: Clark's JS distance sums over query rows; inputs longer than this use evenly spaced rows.
JS_MAX_ROWS = 16

CLS_DOMAIN = "[CLS]"


def js_rows_for(encoded, max_rows: int = JS_MAX_ROWS) -> np.ndarray | None:
    """Query rows entering the JS distance: all rows of a short input (None), else ``max_rows``
    evenly spaced content rows (an unbiased, cheaper estimate of the same sum, up to scale)."""
    n = int(encoded.n_tokens)
    if n <= 2 * max_rows + 16:
        return None
    content = np.flatnonzero(~(np.asarray(encoded.is_cls) | np.asarray(encoded.is_sep)))
    idx = np.unique(np.linspace(0, content.size - 1, max_rows).round().astype(int))
    return content[idx]


def _kinds(encoded) -> TokenKinds:
    return TokenKinds(is_cls=encoded.is_cls, is_sep=encoded.is_sep, is_punct=encoded.is_punct)


def _domain_names() -> list[str]:
    from bertgeom.genome.reference import DOMAIN_ORDER

    return list(DOMAIN_ORDER) + [CLS_DOMAIN]


def _keep_before_first_sep(encoded) -> np.ndarray:
    """Positions kept by the paper's recipe: everything before the first [SEP] ([CLS] kept)."""
    sep = np.flatnonzero(encoded.is_sep)
    keep = np.ones(encoded.n_tokens, dtype=bool)
    if sep.size:
        keep[sep[0]:] = False
    return keep


def domain_masses(attn: np.ndarray, encoded, theta: float = SET_THETA) -> tuple[np.ndarray, np.ndarray]:
    """Attention mass falling on each spike domain, per head: ``([L, H, D], [L, H, D])`` for all
    weights and for weights ``> theta`` only, on the paper's zeroed map ([SEP] onwards removed).

    Summed over queries and keys of the domain; the class proportion is the ratio of sums over
    inputs (= paper_spec §2.3 ``prop_attention`` on the class-mean map)."""
    names = _domain_names()
    doms = [d or CLS_DOMAIN for d in encoded.extra.get("domains", [""] * encoded.n_tokens)]
    onehot = np.zeros((encoded.n_tokens, len(names)), dtype=np.float64)
    for j, d in enumerate(doms):
        if d in names:
            onehot[j, names.index(d)] = 1.0
    keep = _keep_before_first_sep(encoded).astype(np.float32)
    Z = np.asarray(attn, dtype=np.float32) * keep[:, None] * keep[None, :]
    col = Z.sum(axis=2, dtype=np.float64)  # [L, H, T]: mass received by each key
    col_hi = np.where(Z > theta, Z, 0.0).sum(axis=2, dtype=np.float64)
    return col @ onehot, col_hi @ onehot


def compute_set_arrays(
    loaded,
    items,
    progress: Callable[[int, int], None] | None = None,
    *,
    theta: float = SET_THETA,
    js_max_rows: int = JS_MAX_ROWS,
) -> dict[str, np.ndarray]:
    """One batched pass over ``items`` keeping small per-input reductions (see module docstring)."""
    from bertgeom.headsim import JSAccumulator

    acc = JSAccumulator()
    state: dict = {}

    def reduce(trace, item):
        enc = trace.encoded
        table = head_features(trace.attentions, _kinds(enc))
        cols = table.names + table.hist_labels
        state.setdefault("cols", cols)
        out = {
            "feats": np.stack([np.asarray(table[c], dtype=np.float32) for c in state["cols"]], axis=-1),
            "k90": table.k90_rows.astype(np.int16),
            "ntok": enc.n_tokens,
            "nv": int(table.params["n_content"]),
        }
        rows = js_rows_for(enc, js_max_rows)
        acc.update(trace.attentions, rows=rows)
        out["js_rows"] = enc.n_tokens if rows is None else rows.size
        if "domains" in enc.extra:
            out["dom"], out["dom_hi"] = domain_masses(trace.attentions, enc, theta)
        return out

    res = map_over_set(loaded, items, reduce, batch_size=4, progress=progress)
    if not res.results:
        raise ValueError("no input of the set could be analysed: " + "; ".join(m for _, m in res.errors[:3]))
    r = res.results
    arrays = {
        "names": np.array([it.name for it in res.items], dtype=str),
        "labels": np.array([it.label or "" for it in res.items], dtype=str),
        "predicted": np.array([p or "" for p in res.predicted], dtype=str),
        "correct": res.correct,
        "feature_names": np.array(state["cols"], dtype=str),
        "feats": np.stack([x["feats"] for x in r]),
        "k90": np.concatenate([x["k90"] for x in r], axis=-1),
        "k90_owner": np.concatenate([np.full(x["k90"].shape[-1], i, dtype=np.int32) for i, x in enumerate(r)]),
        "ntok": np.array([x["ntok"] for x in r], dtype=np.int32),
        "nv": np.array([x["nv"] for x in r], dtype=np.int32),
        "js": acc.distance,
        "js_rows": np.array([x["js_rows"] for x in r], dtype=np.int32),
        "err_names": np.array([n for n, _ in res.errors], dtype=str),
        "err_msgs": np.array([m for _, m in res.errors], dtype=str),
        "theta": np.array(theta),
    }
    if all("dom" in x for x in r):
        arrays["domain_names"] = np.array(_domain_names(), dtype=str)
        arrays["dom"] = np.stack([x["dom"] for x in r]).astype(np.float32)
        arrays["dom_hi"] = np.stack([x["dom_hi"] for x in r]).astype(np.float32)
    return arrays


@dataclass
class SetSummary:
    """Per-input reductions over a set, with helpers to select inputs and average."""

    arrays: dict
    classifier: bool
    class_order: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return int(self.arrays["names"].size)

    @property
    def names(self) -> list[str]:
        return [str(x) for x in self.arrays["names"]]

    @property
    def labels(self) -> list[str]:
        return [str(x) for x in self.arrays["labels"]]

    @property
    def correct(self) -> np.ndarray:
        return np.asarray(self.arrays["correct"], dtype=bool)

    @property
    def feature_names(self) -> list[str]:
        return [str(x) for x in self.arrays["feature_names"]]

    @property
    def has_domains(self) -> bool:
        return "dom" in self.arrays

    @property
    def errors(self) -> list[tuple[str, str]]:
        return list(zip(map(str, self.arrays["err_names"]), map(str, self.arrays["err_msgs"])))

    def usable(self) -> np.ndarray:
        """Inputs the paper's recipe keeps: correct predictions for a classifier, all otherwise."""
        return self.correct if self.classifier else np.ones(self.n, dtype=bool)

    def classes(self) -> list[str]:
        """Classes with at least one usable input, in the model's label order."""
        labs = np.asarray(self.labels)
        ok = self.usable()
        present = {str(c) for c in labs[ok] if c}
        order = [c for c in self.class_order if c in present] + sorted(present - set(self.class_order))
        return order

    def mask(self, cls: str | None) -> np.ndarray:
        """Usable inputs of class ``cls`` (None: every usable input)."""
        m = self.usable()
        if cls is not None:
            m = m & (np.asarray(self.labels) == cls)
        return m

    def feature(self, name: str) -> np.ndarray:
        """``[N, L, H]`` values of one feature over the inputs."""
        return self.arrays["feats"][..., self.feature_names.index(name)]

    def mean_table(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Equal-weight mean ``{feature: [L, H]}`` over the masked inputs."""
        f = self.arrays["feats"][np.asarray(mask, dtype=bool)].astype(np.float64).mean(axis=0)
        return {n: f[..., i] for i, n in enumerate(self.feature_names)}

    def per_input_tables(self, mask: np.ndarray) -> list[dict[str, np.ndarray]]:
        f = self.arrays["feats"][np.asarray(mask, dtype=bool)].astype(np.float64)
        return [{n: x[..., i] for i, n in enumerate(self.feature_names)} for x in f]

    def k90_rows(self, mask: np.ndarray, layer: int, head: int) -> np.ndarray:
        owners = np.flatnonzero(np.asarray(mask, dtype=bool))
        sel = np.isin(self.arrays["k90_owner"], owners)
        return self.arrays["k90"][layer, head, sel].astype(np.int32)

    def domain_proportions(self, mask: np.ndarray, high: bool = False) -> np.ndarray:
        """``[L, H, D]`` share of the (zeroed) class-mean attention on each domain."""
        m = np.asarray(mask, dtype=bool)
        mass = self.arrays["dom_hi" if high else "dom"][m].astype(np.float64).sum(axis=0)
        tot = mass.sum(axis=-1, keepdims=True)
        return np.divide(mass, tot, out=np.full(mass.shape, np.nan), where=tot > 0)


_MEMO: OrderedDict = OrderedDict()
_MEMO_LOCK = threading.Lock()
_MEMO_MAX = 4
_COMPUTE_LOCKS: dict = {}  # one lock per set key: two sessions never run the same pass at once


def set_items(input_kind: str) -> tuple[InputItem, ...]:
    return shipped_set(input_kind)


def set_summary(model_id: str, progress: Callable[[int, int], None] | None = None) -> SetSummary:
    """The shipped set's reductions for ``model_id`` (memory, then disk, then a model pass)."""
    loaded = cached_model(model_id)
    items = set_items(loaded.spec.input_kind)
    key = _set_key(loaded, items)

    def from_memo():
        with _MEMO_LOCK:
            if key in _MEMO:
                _MEMO.move_to_end(key)
                return _MEMO[key]
        return None

    arrays = from_memo()
    if arrays is None:
        with _MEMO_LOCK:
            lock = _COMPUTE_LOCKS.setdefault(key, threading.Lock())
        with lock:  # a second session waits for the first one's pass instead of repeating it
            arrays = from_memo()
            if arrays is None:
                arrays = disk_cached_arrays(key, lambda: compute_set_arrays(loaded, items, progress))
                with _MEMO_LOCK:
                    _MEMO[key] = arrays
                    while len(_MEMO) > _MEMO_MAX:
                        _MEMO.popitem(last=False)
    return SetSummary(arrays, classifier=bool(loaded.labels), class_order=tuple(loaded.labels))


def _set_key(loaded, items) -> tuple:
    return ("heads-set", SET_VERSION, loaded.weights_hash, set_fingerprint(items), SET_THETA, JS_MAX_ROWS)


def set_is_ready(model_id: str) -> bool:
    """True when :func:`set_summary` would answer from memory (no model pass, no disk read)."""
    loaded = cached_model(model_id)
    key = _set_key(loaded, set_items(loaded.spec.input_kind))
    with _MEMO_LOCK:
        return key in _MEMO


@st.cache_resource(max_entries=2, show_spinner="Averaging the class's attention maps…")
def class_mean(model_id: str, weights_hash: str, names: tuple[str, ...], theta: float = SET_THETA) -> dict:
    """Paper_spec §2.3 class-mean maps of the named set inputs (all layers, float16, read-only).

    Each map is zeroed from the first [SEP] on ([SEP] and [PAD] removed, [CLS] kept), padded to
    the longest input and averaged; ``theta_sum`` is the paper's *sum* of ``A * 1[A >= theta]``.
    """
    from bertgeom.heads import class_mean_maps
    from bertgeom.inputs import encode_input

    loaded = cached_model(model_id)
    items = [it for it in set_items(loaded.spec.input_kind) if it.name in set(names)]
    encoded = [encode_input(loaded, it.text) for it in items]
    T = max(e.n_tokens for e in encoded)
    longest = max(encoded, key=lambda e: e.n_tokens)
    L, H = loaded.num_layers, loaded.num_heads
    total = np.zeros((L, H, T, T), dtype=np.float32)
    tsum = np.zeros((L, H, T, T), dtype=np.float32)

    def reduce(trace, item):
        mean, ts, _ = class_mean_maps([trace.attentions], _kinds(trace.encoded), theta=theta, dtype=np.float32)
        t = mean.shape[-1]
        total[..., :t, :t] += mean
        tsum[..., :t, :t] += ts
        return t

    res = map_over_set(loaded, items, reduce, batch_size=2)
    n = max(1, len(res.results))
    if loaded.spec.input_kind == "spike":
        labels = list(longest.axis_labels or longest.tokens)
        doms = [d or "" for d in longest.extra.get("domains", [""] * T)]
    else:
        labels = [f"pos {i}" for i in range(T)]
        doms = [""] * T
    mean = (total / n).astype(np.float16)
    tsum16 = tsum.astype(np.float16)
    mean.setflags(write=False)
    tsum16.setflags(write=False)
    return {"mean": mean, "theta_sum": tsum16, "n": len(res.results), "labels": labels, "domains": doms}


# ----------------------------------------------------------------------------------------
# Current input
# ----------------------------------------------------------------------------------------


@st.cache_data(max_entries=16, show_spinner="Comparing every pair of heads (Jensen-Shannon)…")
def cached_js_input(model_id: str, text: str) -> tuple[np.ndarray, int]:
    """Clark's JS distance ``[L*H, L*H]`` on the current input, and the number of query rows used."""
    from bertgeom.headsim import JSAccumulator

    trace = get_trace(model_id, text)
    rows = js_rows_for(trace.encoded, 6 * JS_MAX_ROWS)  # one input: afford more rows than per set input
    acc = JSAccumulator().update(trace.attentions, rows=rows)
    return acc.distance, trace.encoded.n_tokens if rows is None else int(rows.size)


@st.cache_data(max_entries=32, show_spinner="Embedding the heads in 2-D (MDS)…")
def cached_mds(D: np.ndarray, method: str, sqrt: bool) -> np.ndarray:
    from bertgeom.headsim import mds_embedding

    if method == "metric":  # Clark's SMACOF settings, fewer restarts to stay interactive
        return mds_embedding(D, method="metric", sqrt=sqrt, n_init=4, max_iter=500, eps=1e-9)
    return mds_embedding(D, method="classical", sqrt=sqrt)


@st.cache_data(max_entries=32, show_spinner="Clustering the heads (k-means)…")
def cached_clusters(X: np.ndarray, k: int, names: tuple[str, ...]):
    from bertgeom.headsim import cluster_heads

    return cluster_heads(X, k=k, feature_names=list(names), n_init=10)


@st.cache_data(max_entries=16, show_spinner="Running the model with the heads disabled…")
def cached_ablation(model_id: str, text: str, heads: tuple[tuple[int, int], ...]) -> dict:
    """Before/after a Kovaleva ablation of ``heads`` (0-based pairs) on the current input."""
    from bertgeom.ablation import disabled_mask, forward_with_disabled_heads

    loaded = cached_model(model_id)
    ids = get_trace(model_id, text).encoded.input_ids
    mask = disabled_mask(loaded.num_layers, loaded.num_heads, heads=heads)
    base = forward_with_disabled_heads(loaded, ids)
    after = forward_with_disabled_heads(loaded, ids, mask)
    return {"cls_before": base.cls[0], "cls_after": after.cls[0],
            "logits_before": None if base.logits is None else base.logits[0],
            "logits_after": None if after.logits is None else after.logits[0]}


@st.cache_data(max_entries=8, show_spinner="Disabling every head in turn…")
def cached_sweep(model_id: str, text: str, kind: str) -> dict:
    """Kovaleva's Figure 8 (``kind="heads"``) or 9 (``"layers"``) on the current input."""
    from bertgeom.ablation import sweep_layers, sweep_single_heads

    loaded = cached_model(model_id)
    ids = get_trace(model_id, text).encoded.input_ids
    return sweep_single_heads(loaded, ids) if kind == "heads" else sweep_layers(loaded, ids)


@st.cache_resource(max_entries=4, show_spinner="Reading the checkpoint's weights…")
def cached_layer_weights(model_id: str):
    """Per-layer weights (:func:`bertgeom.weights.extract_layer_weights`), shared read-only."""
    from bertgeom.weights import extract_layer_weights

    return extract_layer_weights(cached_model(model_id).model)


def model_shape(model_id: str) -> tuple[int, int, int]:
    cfg = cached_model(model_id).config
    return int(cfg.num_hidden_layers), int(cfg.num_attention_heads), int(cfg.hidden_size)


@st.cache_data(max_entries=8, show_spinner="Comparing the two checkpoints head by head…")
def cached_compare(model_id: str, partner_id: str, text: str) -> dict:
    """Weight-space cosines (QK, OV) and map cosine on shared layer inputs, each ``[L, H]``."""
    from bertgeom.ablation import map_cosine_on_shared_inputs, weight_cosine

    wa, wb = cached_layer_weights(model_id), cached_layer_weights(partner_id)
    out = weight_cosine(wa, wb)
    X = get_trace(model_id, text).hidden_states[:-1]
    out["maps"] = map_cosine_on_shared_inputs(wa, wb, X)["cos"]
    return out


@st.cache_data(max_entries=8, show_spinner=False)
def cached_compare_layer(model_id: str, partner_id: str, text: str, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Both checkpoints' maps ``[H, T, T]`` of one layer on the current model's layer input."""
    from bertgeom.attention import attention_from_weights

    wa, wb = cached_layer_weights(model_id), cached_layer_weights(partner_id)
    X = get_trace(model_id, text).hidden_states[layer][None]
    a = attention_from_weights([wa[layer]], X)[0].astype(np.float32)
    b = attention_from_weights([wb[layer]], X)[0].astype(np.float32)
    return a, b
