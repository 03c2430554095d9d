"""The Attention Heads page's statistics over a set of inputs (UI-free).

:func:`compute_set_arrays` runs the model once over a set and keeps small per-input reductions
(per-head features, k90 rows, Clark's JS sums, attention masses per token domain); a
:class:`SetSummary` selects inputs (the paper's recipe keeps correct predictions) and averages.
:func:`class_mean_over_set` builds the class-mean maps of docs/methods.md §5.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bertgeom.attention import kept_tokens
from bertgeom.analysis.heads import head_features
from bertgeom.sets.inputs import map_over_set

#: Bump when the layout of the set arrays changes (invalidates old disk caches).
SET_VERSION = 4  # 4: the arrays name the model's classes; 3: k90_frac divides by the real tokens k90 counts among
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


def domain_names(encoded, domains=None) -> list[str]:
    """The token domains counted over a set, ``[CLS]`` last (it counts as its own domain): the input
    kind's ``domains`` in order, or (without them) those of ``encoded`` in order of appearance."""
    if domains is None:
        domains = dict.fromkeys(d for d in encoded.domains or () if d)
    return [str(d) for d in domains] + [CLS_DOMAIN]


def _domain_onehot(encoded, domains=None) -> np.ndarray:
    """``[T, D]``: 1 where token ``t`` lies in domain ``d`` (``[CLS]`` counts as its own domain)."""
    names = domain_names(encoded, domains)
    doms = [d or CLS_DOMAIN for d in encoded.domains or ("",) * encoded.n_tokens]
    onehot = np.zeros((encoded.n_tokens, len(names)), dtype=np.float64)
    for j, d in enumerate(doms):
        if d in names:
            onehot[j, names.index(d)] = 1.0
    return onehot


def domain_masses(attn: np.ndarray, encoded, theta: float = SET_THETA, *,
                  domains=None) -> tuple[np.ndarray, np.ndarray]:
    """Attention mass falling on each token domain (:func:`domain_names`), per head: ``([L, H, D], [L, H, D])`` for all
    weights and for weights ``> theta`` only, on the paper's zeroed map ([SEP] onwards removed).

    Summed over queries and keys of the domain; the class proportion is the ratio of sums over
    inputs (= Vig 2021's ``prop_attention``, docs/methods.md §5 on the class-mean map)."""
    onehot = _domain_onehot(encoded, domains)
    keep = kept_tokens(encoded.is_sep, "first_sep").astype(np.float32)
    Z = np.asarray(attn, dtype=np.float32) * keep[:, None] * keep[None, :]
    col = Z.sum(axis=2, dtype=np.float64)  # [L, H, T]: mass received by each key
    col_hi = np.where(Z > theta, Z, 0.0).sum(axis=2, dtype=np.float64)
    return col @ onehot, col_hi @ onehot


def domain_counts(attn: np.ndarray, encoded, theta: float = SET_THETA, *,
                  domains=None) -> tuple[np.ndarray, np.ndarray]:
    """Counts for the top-head domain test (:mod:`bertgeom.analysis.domain_ztest`): ``[L, H, D]``
    number of strong entries (``A_ij > theta`` on the zeroed map) whose key lies in each domain,
    and ``[D]`` number of kept tokens (the map's rows after zeroing) in each domain."""
    onehot = _domain_onehot(encoded, domains)
    keep = kept_tokens(encoded.is_sep, "first_sep")
    strong = (np.asarray(attn) > theta) & keep[:, None] & keep[None, :]
    return strong.sum(axis=2, dtype=np.float64) @ onehot, keep.astype(np.float64) @ onehot


def compute_set_arrays(
    loaded,
    items,
    progress: Callable[[int, int], None] | None = None,
    *,
    theta: float = SET_THETA,
    js_max_rows: int = JS_MAX_ROWS,
) -> dict[str, np.ndarray]:
    """One batched pass over ``items`` keeping small per-input reductions (see module docstring)."""
    from bertgeom.analysis.headsim import JSAccumulator
    from bertgeom.inputs import input_kind_of

    acc = JSAccumulator()
    domains = input_kind_of(loaded).domains or None
    state: dict = {}

    def reduce(trace, item):
        enc = trace.encoded
        table = head_features(trace.attentions, enc)
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
        if domains and enc.domains is not None:  # the kind names its domains: one [D] layout for the set
            out["dom"], out["dom_hi"] = domain_masses(trace.attentions, enc, theta, domains=domains)
            out["dom_cnt"], out["dom_tok"] = domain_counts(trace.attentions, enc, theta, domains=domains)
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
        "classifier": np.array(bool(loaded.labels)),
        "class_order": np.array([str(c) for c in loaded.labels or ()], dtype=str),
    }
    if all("dom" in x for x in r):
        arrays["domain_names"] = np.array(domain_names(None, domains), dtype=str)
        arrays["dom"] = np.stack([x["dom"] for x in r]).astype(np.float32)
        arrays["dom_hi"] = np.stack([x["dom_hi"] for x in r]).astype(np.float32)
        arrays["dom_cnt"] = np.stack([x["dom_cnt"] for x in r]).astype(np.int32)
        arrays["dom_tok"] = np.stack([x["dom_tok"] for x in r]).astype(np.int32)
    return arrays


@dataclass
class SetSummary:
    """Per-input reductions over a set, with helpers to select inputs and average (the typed result
    of the ``heads-set`` view: :meth:`to_arrays` / :meth:`from_arrays` round-trip it through the disk)."""

    arrays: dict
    classifier: bool
    class_order: tuple[str, ...] = ()

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The plain arrays stored on disk (the model's classes among them)."""
        return {**self.arrays, "classifier": np.array(self.classifier),
                "class_order": np.array(list(self.class_order), dtype=str)}

    @classmethod
    def from_arrays(cls, arrays) -> SetSummary:
        """A summary stored by :meth:`to_arrays` (or made by :func:`compute_set_arrays`)."""
        arrays = dict(arrays)
        return cls(arrays, classifier=bool(arrays.get("classifier", False)),
                   class_order=tuple(str(c) for c in arrays.get("class_order", ())))

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

    @property
    def labelled(self) -> np.ndarray:
        """``[N]`` True where the input carries a class label (a user's own set may carry none)."""
        return np.asarray(self.arrays["labels"]).astype(str) != ""

    def usable(self) -> np.ndarray:
        """Inputs the paper's recipe keeps: a classifier's correct predictions among the labelled inputs,
        and every input without a label (there is nothing to judge it by); every input of an encoder."""
        if not self.classifier:
            return np.ones(self.n, dtype=bool)
        return self.correct | ~self.labelled

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

    def domain_test(self, mask: np.ndarray, domain: str, alpha: float = 0.05):
        """Top-head z-test (:func:`bertgeom.analysis.domain_ztest.domain_ztest`) of ``domain`` over the
        masked inputs: strong-attention counts per head against the domain's share of the tokens."""
        from bertgeom.analysis.domain_ztest import domain_ztest

        m = np.asarray(mask, dtype=bool)
        d = [str(x) for x in self.arrays["domain_names"]].index(domain)
        cnt = self.arrays["dom_cnt"][m].astype(np.float64).sum(axis=0)  # [L, H, D]
        tok = self.arrays["dom_tok"][m].astype(np.float64).sum(axis=0)  # [D]
        return domain_ztest(cnt[..., d], cnt.sum(axis=-1), float(tok[d]), float(tok.sum()), alpha)


@dataclass(frozen=True, eq=False)  # arrays: equality would be element-wise
class ClassMean:
    """Class-mean maps of some inputs of a set (the ``class-mean`` view's typed result): ``mean`` and
    ``theta_sum`` ``[L, H, T, T]`` float16 (read-only), ``n`` the inputs averaged, ``labels`` and
    ``domains`` one string per position (``""`` where an input kind has no domains)."""

    mean: np.ndarray
    theta_sum: np.ndarray
    n: int
    labels: tuple[str, ...]
    domains: tuple[str, ...]

    def __post_init__(self) -> None:
        for a in (self.mean, self.theta_sum):
            a.setflags(write=False)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays that ``numpy.savez`` stores without pickle (what :meth:`from_arrays` reads)."""
        return {"mean": self.mean, "theta_sum": self.theta_sum, "n": np.asarray(self.n),
                "labels": np.array(self.labels, dtype=str), "domains": np.array(self.domains, dtype=str)}

    @classmethod
    def from_arrays(cls, arrays) -> ClassMean:
        return cls(np.asarray(arrays["mean"]), np.asarray(arrays["theta_sum"]), int(arrays["n"]),
                   tuple(str(x) for x in arrays["labels"]), tuple(str(x) for x in arrays["domains"]))


def class_mean_over_set(loaded, items, theta: float = SET_THETA) -> ClassMean:
    """Class-mean maps of ``items`` (all layers, float16, read-only).

    Each map is zeroed from the first [SEP] on ([SEP] and [PAD] removed, [CLS] kept), padded to
    the longest input and averaged; ``theta_sum`` is the paper's *sum* of ``A * 1[A >= theta]``.
    """
    from bertgeom.analysis.heads import class_mean_maps
    from bertgeom.inputs import encode_input

    encoded = [encode_input(loaded, it.text) for it in items]
    T = max(e.n_tokens for e in encoded)
    longest = max(encoded, key=lambda e: e.n_tokens)
    L, H = loaded.num_layers, loaded.num_heads
    total = np.zeros((L, H, T, T), dtype=np.float32)
    tsum = np.zeros((L, H, T, T), dtype=np.float32)

    def reduce(trace, item):
        mean, ts, _ = class_mean_maps([trace.attentions], trace.encoded, theta=theta, dtype=np.float32)
        t = mean.shape[-1]
        total[..., :t, :t] += mean
        tsum[..., :t, :t] += ts
        return t

    res = map_over_set(loaded, items, reduce, batch_size=2)
    n = max(1, len(res.results))
    if longest.axis_labels:  # inputs with their own coordinates (e.g. amino-acid ranges)
        labels = list(longest.axis_labels)
        doms = list(longest.domains or ("",) * T)
    else:
        labels = [f"pos {i}" for i in range(T)]
        doms = [""] * T
    return ClassMean((total / n).astype(np.float16), tsum.astype(np.float16), len(res.results),
                     tuple(str(x) for x in labels), tuple(str(x) for x in doms))
