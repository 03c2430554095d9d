"""Pattern labels with a confidence for every head, from a :class:`~bertgeom.analysis.heads.HeadFeatureTable`.

Three taxonomies, all rule-based on the per-head features and evaluated for all heads at once:

* **Kovaleva et al. 2019** five classes (vertical, diagonal, vertical+diagonal, block,
  heterogeneous).  The paper used a CNN trained on ~400 hand-labelled maps that was never
  released; the rules here are the **reconstruction** of docs/methods.md §4.1, not
  the authors' classifier.
* **Bonino et al. 2025** gates (closed, instance, backward / forward contextual, directional,
  cluster, open; plus mixed).  Only the gate *names* are known; the features and the
  decision rule are our **reconstruction** (docs/methods.md §4.2).
* **Clark et al. 2019** Figure-6 behaviour colouring (next, prev, broad, [CLS], [SEP],
  punctuation) with the thresholds of the official notebook.

Confidence.  Every rule condition ``x >= t`` gets a soft membership
``ramp(x, t) = clip(0.5 + (x - t) / (2 * softness), 0, 1)`` (0.5 exactly at the threshold,
1 at ``t + softness``); ``x < t`` gets ``1 - ramp``.  A class score is the minimum of the
memberships of its conditions (including "the earlier rules did not fire"); the catch-all
class (heterogeneous / mixed) scores ``1 - max(other scores)``.  The label comes from the
hard rules; its confidence is its class score, which is >= 0.5 whenever the hard rule holds
away from a tie.  ``scores`` keeps every class score and ``inputs`` the feature values the
rules read, so the UI can show why a head got its label.

Where it sits: above the per-head features (:mod:`bertgeom.analysis.heads`); the sets and the
Attention Heads page read the labels.

References
----------
* Kovaleva et al. 2019, *Revealing the Dark Secrets of BERT* (arXiv:1908.08593), §4.1.
* Bonino, Ghione & Cirrincione 2025, *The geometry of BERT* (arXiv:2502.12033): the gate names.
* Clark et al. 2019, *What Does BERT Look At?* (arXiv:1906.04341), Figure 6 and its notebook.
* docs/methods.md §4.1 (Kovaleva rules), §4.2 (gate rules), §4.3 (Clark's behaviours).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Mapping, Sequence

import numpy as np

__all__ = [
    "PatternThresholds",
    "PatternLabels",
    "KOVALEVA_CLASSES",
    "GATE_CLASSES",
    "CLARK_CLASSES",
    "DISPLAY_NAMES",
    "describe_thresholds",
    "kovaleva_labels",
    "gate_labels",
    "clark_behaviour",
    "classify_heads",
    "label_distribution",
]

KOVALEVA_CLASSES = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
GATE_CLASSES = ("closed", "instance", "backward", "forward", "directional", "cluster", "open", "mixed")
GATE_CANDIDATES = ("instance", "backward", "forward", "directional", "cluster")
CLARK_CLASSES = ("next", "prev", "broad", "cls", "sep", "punct", "other")

DISPLAY_NAMES = {
    "vertical": "Vertical",
    "diagonal": "Diagonal",
    "vertical+diagonal": "Vertical + diagonal",
    "block": "Block",
    "heterogeneous": "Heterogeneous",
    "closed": "closed gate",
    "instance": "instance gate",
    "backward": "backward contextual gate",
    "forward": "forward contextual gate",
    "directional": "directional gate",
    "cluster": "cluster head",
    "open": "open gate",
    "mixed": "mixed / unclassified",
    "next": "attend to next",
    "prev": "attend to prev",
    "broad": "attend broadly",
    "cls": "attend to [CLS]",
    "sep": "attend to [SEP]",
    "punct": "attend to . and ,",
    "other": "other",
}


def _t(default, help, lo=0.0, hi=1.0, step=0.01, group="common"):
    return field(default=default, metadata={"help": help, "min": lo, "max": hi, "step": step, "group": group})


@dataclass
class PatternThresholds:
    """Every threshold of the three rule sets, with a description and a slider range."""

    # --- Kovaleva (reconstruction, docs/methods.md §4.1) ---
    kov_v_high: float = _t(0.5, "Vertical: V = max(strongest column, [CLS]+[SEP]+punct mass) must reach this.",
                           group="kovaleva")
    kov_v_low: float = _t(0.3, "V below this counts as 'no vertical'; V+D needs V at least this.", group="kovaleva")
    kov_dg_high: float = _t(0.5, "Diagonal: Dg = self + prev + next mass must reach this.", group="kovaleva")
    kov_dg_low: float = _t(0.3, "Dg below this counts as 'no diagonal'; V+D needs Dg at least this.", group="kovaleva")
    kov_block_mass: float = _t(0.8, "Block: B = own-segment content mass (sentence pairs) or within-block mass "
                                     "(block graph, >= 2 blocks) must reach this.", group="kovaleva")
    kov_block_entropy: float = _t(0.6, "Block: rows must be fairly uniform inside the block: normalised "
                                       "entropy H/ln n at least this.", group="kovaleva")
    # --- Bonino gates (reconstruction; docs/methods.md §4.2) ---
    gate_closed: float = _t(0.5, "Closed gate: special-token mass m_spec = [CLS] + [SEP] at least this "
                                 "(Clark's sink threshold would be 0.6).", group="gates")
    gate_candidate: float = _t(0.5, "A candidate gate (instance/backward/forward/directional/cluster) wins if its "
                                    "score reaches this.", group="gates")
    gate_tie: float = _t(0.1, "Candidates within this of the winner are reported together (e.g. backward+forward).",
                         hi=0.5, group="gates")
    gate_directional_delta: float = _t(0.9, "Directional gate also needs row alignment delta_row at least this "
                                            "(rows nearly parallel, A ~ 1 pi^T).", group="gates")
    gate_cluster_min_blocks: float = _t(2, "Cluster head also needs at least this many blocks "
                                           "(components >= 3 tokens).",
                                        lo=1, hi=10, step=1, group="gates")
    gate_open_entropy: float = _t(0.8, "Open gate: normalised entropy H/ln n at least this.", group="gates")
    gate_open_k90: float = _t(0.5, "Open gate: kappa = median k90 / real tokens at least this.", group="gates")
    # --- Clark Figure 6 colouring ---
    clark_next: float = _t(0.5, "Clark: 'attend to next' if next-token mass above this.", group="clark")
    clark_prev: float = _t(0.5, "Clark: 'attend to prev' if previous-token mass above this.", group="clark")
    clark_broad_share: float = _t(0.78, "Clark: 'attend broadly' if the row entropy is above this share of the "
                                        "uniform entropy ln n (Clark's 3.8 nats at n ~ 128 is 3.8 / ln 128 = 0.78 "
                                        "of it), so a uniform head is broad at any length.", group="clark")
    clark_cls: float = _t(0.6, "Clark: '[CLS]' if [CLS] mass above this.", group="clark")
    clark_sep: float = _t(0.6, "Clark: '[SEP]' if [SEP] mass above this.", group="clark")
    clark_punct: float = _t(0.6, "Clark: '. and ,' if punctuation mass above this.", group="clark")
    # --- shared ---
    softness: float = _t(0.1, "Width of the soft ramp that turns threshold margins into confidences.",
                         lo=0.01, hi=0.5, group="common")


def describe_thresholds(thresholds: PatternThresholds | None = None) -> list[dict]:
    """One dict per threshold: name, value, default, help, min, max, step, group (for sliders)."""
    th = thresholds or PatternThresholds()
    out = []
    for f in fields(PatternThresholds):
        md = dict(f.metadata)
        out.append({"name": f.name, "value": getattr(th, f.name), "default": f.default, **md})
    return out


@dataclass
class PatternLabels:
    """Labels of one taxonomy for every head (arrays are ``[L, H]``)."""

    taxonomy: str
    classes: tuple[str, ...]
    labels: np.ndarray  # str; combined gate labels look like "backward+forward"
    primary: np.ndarray  # str; the single top class (== labels except for combined gates)
    confidence: np.ndarray
    scores: dict[str, np.ndarray]  # class -> soft score in [0, 1]
    inputs: dict[str, np.ndarray]  # the feature values the rules read
    note: str = ""

    def to_rows(self) -> list[dict]:
        L, H = self.labels.shape
        rows = []
        for l in range(L):
            for h in range(H):
                r = {
                    "layer": l + 1,
                    "head": h + 1,
                    "label": str(self.labels[l, h]),
                    "primary": str(self.primary[l, h]),
                    "confidence": float(self.confidence[l, h]),
                }
                r.update({f"score_{k}": float(v[l, h]) for k, v in self.scores.items()})
                r.update({k: float(v[l, h]) for k, v in self.inputs.items()})
                rows.append(r)
        return rows

    def counts(self, primary: bool = True) -> dict[str, int]:
        arr = self.primary if primary else self.labels
        vals, cnt = np.unique(arr.astype(str), return_counts=True)
        out = {c: 0 for c in self.classes} if primary else {}
        out.update({str(v): int(c) for v, c in zip(vals, cnt)})
        return out

    def heads_with(self, label: str) -> list[tuple[int, int]]:
        """0-based (layer, head) of the heads whose primary label is ``label``."""
        ll, hh = np.nonzero(self.primary == label)
        return [(int(a), int(b)) for a, b in zip(ll, hh)]


# ----------------------------------------------------------------------------------------


def _get(table, name: str) -> np.ndarray:
    return np.asarray(table[name], dtype=np.float64)


def _ramp(x, t, s):
    """Soft membership of ``x >= t``: 0.5 at ``t``, 1 at ``t + s``, 0 at ``t - s``."""
    return np.clip(0.5 + (np.asarray(x, dtype=np.float64) - t) / (2.0 * s), 0.0, 1.0)


def _below(x, t, s):
    """Soft membership of ``x < t``."""
    return 1.0 - _ramp(x, t, s)


def _min(*xs):
    return np.minimum.reduce([np.asarray(x, dtype=np.float64) for x in xs])


def kovaleva_labels(table, thresholds: PatternThresholds | None = None) -> PatternLabels:
    """Kovaleva's five classes by the rule-based reconstruction (docs/methods.md §4.1).

    Inputs per head:

    * ``V = max(verticality, sink)``: strongest single column, or the total mass on the
      usual stripe tokens [CLS] + [SEP] + punctuation;
    * ``Dg = self + prev + next``: main and first off-diagonals (self is the main-diagonal
      variant of Diagonal, docs/methods.md §4);
    * ``B = max(segment_mass, block_inner if n_blocks >= 2)``: within-segment content mass
      for sentence pairs, or within-block mass of the block graph;
    * ``Hn = entropy_norm``.

    Rules, in order: V >= v_high and Dg < dg_low -> vertical; Dg >= dg_high and V < v_low
    -> diagonal; V >= v_low and Dg >= dg_low -> vertical+diagonal; B >= block_mass and
    Hn >= block_entropy -> block; otherwise heterogeneous.
    """
    th = thresholds or PatternThresholds()
    s = th.softness
    V = np.maximum(_get(table, "verticality"), _get(table, "sink"))
    Dg = _get(table, "self") + _get(table, "prev") + _get(table, "next")
    nb = _get(table, "n_blocks")
    blk = np.where(nb >= 2, _get(table, "block_inner"), 0.0)
    B = np.maximum(_get(table, "segment_mass"), blk)
    Hn = _get(table, "entropy_norm")

    hard_v = (V >= th.kov_v_high) & (Dg < th.kov_dg_low)
    hard_d = (Dg >= th.kov_dg_high) & (V < th.kov_v_low)
    hard_vd = (V >= th.kov_v_low) & (Dg >= th.kov_dg_low)
    hard_b = (B >= th.kov_block_mass) & (Hn >= th.kov_block_entropy)
    labels = np.select(
        [hard_v, hard_d, hard_vd, hard_b],
        ["vertical", "diagonal", "vertical+diagonal", "block"],
        default="heterogeneous",
    ).astype(object)

    sc = {
        "vertical": _min(_ramp(V, th.kov_v_high, s), _below(Dg, th.kov_dg_low, s)),
        "diagonal": _min(_ramp(Dg, th.kov_dg_high, s), _below(V, th.kov_v_low, s)),
        "vertical+diagonal": _min(_ramp(V, th.kov_v_low, s), _ramp(Dg, th.kov_dg_low, s)),
    }
    structured = np.maximum.reduce([sc["vertical"], sc["diagonal"], sc["vertical+diagonal"]])
    sc["block"] = _min(_ramp(B, th.kov_block_mass, s), _ramp(Hn, th.kov_block_entropy, s), 1.0 - structured)
    sc["heterogeneous"] = 1.0 - np.maximum(structured, sc["block"])
    conf = _pick(sc, labels)
    return PatternLabels(
        taxonomy="kovaleva",
        classes=KOVALEVA_CLASSES,
        labels=labels,
        primary=labels.copy(),
        confidence=conf,
        scores=sc,
        inputs={"V": V, "Dg": Dg, "B": B, "entropy_norm": Hn},
        note="Rule-based reconstruction of Kovaleva et al.'s classes (their CNN was not released).",
    )


def gate_labels(table, thresholds: PatternThresholds | None = None) -> PatternLabels:
    """Bonino et al.'s gates by the reconstructed decision rule of docs/methods.md §4.2.

    1. ``m_spec = special >= gate_closed`` -> closed.
    2. Candidate scores: instance = ``self``, backward = ``bwd`` (window w), forward = ``fwd``,
       directional = ``col_content`` if ``delta_row >= gate_directional_delta`` else 0,
       cluster = ``block_mass`` if ``n_blocks >= gate_cluster_min_blocks`` else 0.
    3. If the best candidate >= gate_candidate -> that label; candidates within ``gate_tie``
       of it are reported with it ("backward+forward").
    4. Else if ``entropy_norm >= gate_open_entropy`` and ``k90_frac >= gate_open_k90`` -> open.
    5. Else mixed.
    """
    th = thresholds or PatternThresholds()
    s = th.softness
    m_spec = _get(table, "special")
    delta = _get(table, "delta_row")
    nb = _get(table, "n_blocks")
    Hn = _get(table, "entropy_norm")
    kappa = _get(table, "k90_frac")
    raw = {
        "instance": _get(table, "self"),
        "backward": _get(table, "bwd"),
        "forward": _get(table, "fwd"),
        "directional": _get(table, "col_content"),
        "cluster": _get(table, "block_mass"),
    }
    gates = {
        "directional": delta >= th.gate_directional_delta,
        "cluster": nb >= th.gate_cluster_min_blocks,
    }
    cand = {k: np.where(gates[k], v, 0.0) if k in gates else v for k, v in raw.items()}
    stack = np.stack([cand[k] for k in GATE_CANDIDATES])  # [5, L, H]
    best_i = stack.argmax(axis=0)
    best = stack.max(axis=0)
    second = np.sort(stack, axis=0)[-2]

    closed = m_spec >= th.gate_closed
    fires = ~closed & (best >= th.gate_candidate)
    is_open = ~closed & ~fires & (Hn >= th.gate_open_entropy) & (kappa >= th.gate_open_k90)
    names = np.array(GATE_CANDIDATES, dtype=object)
    primary = np.where(closed, "closed",
                       np.where(fires, names[best_i], np.where(is_open, "open", "mixed"))).astype(object)

    # combined labels: every candidate within gate_tie of the winner, best first
    labels = primary.copy()
    tie = fires & (best - second <= th.gate_tie)
    if tie.any():
        order = np.argsort(-stack, axis=0, kind="stable")
        for l, h in zip(*np.nonzero(tie)):
            members = [GATE_CANDIDATES[k] for k in order[:, l, h] if best[l, h] - stack[k, l, h] <= th.gate_tie]
            labels[l, h] = "+".join(members)

    not_closed = _below(m_spec, th.gate_closed, s)
    sc = {"closed": _ramp(m_spec, th.gate_closed, s)}
    for k in GATE_CANDIDATES:
        parts = [_ramp(raw[k], th.gate_candidate, s), not_closed]
        if k == "directional":
            parts.append(_ramp(delta, th.gate_directional_delta, s))
        if k == "cluster":
            parts.append(gates["cluster"].astype(np.float64))
        sc[k] = _min(*parts)
    any_cand = np.maximum.reduce([sc[k] for k in GATE_CANDIDATES])
    sc["open"] = _min(
        _ramp(Hn, th.gate_open_entropy, s), _ramp(kappa, th.gate_open_k90, s), not_closed, 1.0 - any_cand
    )
    sc["mixed"] = 1.0 - np.maximum.reduce([sc[k] for k in GATE_CLASSES if k != "mixed"])
    conf = _pick(sc, primary)
    inputs = {
        "m_spec": m_spec,
        **{f"score_{k}": cand[k] for k in GATE_CANDIDATES},
        "delta_row": delta,
        "n_blocks": nb,
        "entropy_norm": Hn,
        "k90_frac": kappa,
        "margin": np.where(fires, best - second, 0.0),
    }
    return PatternLabels(
        taxonomy="gates",
        classes=GATE_CLASSES,
        labels=labels,
        primary=primary,
        confidence=conf,
        scores=sc,
        inputs=inputs,
        note="Reconstructed gate rule (docs/methods.md §4.2): the paper names the gates; this decision rule is ours.",
    )


def clark_behaviour(table, thresholds: PatternThresholds | None = None) -> PatternLabels:
    """Clark et al.'s Figure-6 colouring: tests in order, a later match overrides an earlier one.

    next > 0.5, prev > 0.5, entropy > 0.78 ln n, cls > 0.6, sep > 0.6, punct > 0.6; else other.
    Clark's notebook uses a fixed 3.8 nats for segments of about 128 tokens (ln 128 = 4.85); the
    share ``entropy / ln n > 3.8 / 4.85`` keeps its meaning at any length: a uniform 40-token head
    (2.9 nats < 3.8) is still broad.  docs/methods.md §4.3.
    (Clark averages over all rows: compute the table with ``rows="all"`` for parity.)
    """
    th = thresholds or PatternThresholds()
    s = th.softness
    tests = [
        ("next", _get(table, "next"), th.clark_next, s),
        ("prev", _get(table, "prev"), th.clark_prev, s),
        ("broad", _get(table, "entropy_norm"), th.clark_broad_share, s),
        ("cls", _get(table, "cls"), th.clark_cls, s),
        ("sep", _get(table, "sep"), th.clark_sep, s),
        ("punct", _get(table, "punct"), th.clark_punct, s),
    ]
    shape = tests[0][1].shape
    labels = np.full(shape, "other", dtype=object)
    sc = {}
    for name, x, t, w in tests:
        labels = np.where(x > t, name, labels).astype(object)
        sc[name] = _ramp(x, t, w)
    # a later test overrides: a class's score is capped by "no later test fired"
    names = [t[0] for t in tests]
    for k, name in enumerate(names):
        later = [sc[m] for m in names[k + 1:]]
        if later:
            sc[name] = np.minimum(sc[name], 1.0 - np.maximum.reduce(later))
    sc["other"] = 1.0 - np.maximum.reduce([sc[n] for n in names])
    conf = _pick(sc, labels)
    return PatternLabels(
        taxonomy="clark",
        classes=CLARK_CLASSES,
        labels=labels,
        primary=labels.copy(),
        confidence=conf,
        scores=sc,
        inputs={n: x for n, x, _, _ in tests},
        note="Clark et al. 2019 Figure 6 thresholds (General_Analysis notebook).",
    )


def _pick(scores: Mapping[str, np.ndarray], labels: np.ndarray) -> np.ndarray:
    conf = np.zeros(labels.shape)
    for k, v in scores.items():
        m = labels == k
        conf[m] = v[m]
    return conf


def classify_heads(table, thresholds: PatternThresholds | None = None) -> dict[str, PatternLabels]:
    """All three taxonomies: ``{"kovaleva": ..., "gates": ..., "clark": ...}``."""
    return {
        "kovaleva": kovaleva_labels(table, thresholds),
        "gates": gate_labels(table, thresholds),
        "clark": clark_behaviour(table, thresholds),
    }


_TAXONOMIES = {"kovaleva": (kovaleva_labels, KOVALEVA_CLASSES), "gates": (gate_labels, GATE_CLASSES),
               "clark": (clark_behaviour, CLARK_CLASSES)}


def label_distribution(
    tables: Sequence, taxonomy: str = "kovaleva", thresholds: PatternThresholds | None = None
) -> tuple[tuple[str, ...], np.ndarray]:
    """Per-head class distribution over inputs (docs/methods.md §4: show distributions, not one label).

    Classifies each input's table separately and returns ``(classes, [L, H, C] fractions)``
    of the primary labels.
    """
    fn, classes = _TAXONOMIES[taxonomy]
    tables = list(tables)
    if not tables:
        raise ValueError("no tables")
    first = fn(tables[0], thresholds).primary
    out = np.zeros(first.shape + (len(classes),))
    for t in tables:
        lab = fn(t, thresholds).primary
        for c, name in enumerate(classes):
            out[..., c] += lab == name
    return classes, out / len(tables)


# ----------------------------------------------------------------------------------------
# How labels read (display names, hover text, the features behind Clark's behaviours)
# ----------------------------------------------------------------------------------------

#: The three taxonomies with their names in the UI.
TAXONOMY_NAMES = {"kovaleva": "Kovaleva class", "gates": "Bonino gate", "clark": "Clark behaviour"}

#: Clark behaviour -> (feature behind it, unit shown).
CLARK_EVIDENCE = {"next": ("next", "next-token mass"), "prev": ("prev", "previous-token mass"),
                  "cls": ("cls", "[CLS] mass"), "sep": ("sep", "[SEP] mass"), "punct": ("punct", ". , mass"),
                  "broad": ("entropy_norm", "entropy / ln n")}


def display_label(name: str) -> str:
    """Display name of a label, compound labels (``"a+b"``) included."""
    return " + ".join(DISPLAY_NAMES.get(p, p) for p in str(name).split("+"))


def display_labels(arr) -> np.ndarray:
    """Display names of an array of labels (object dtype: names are never truncated)."""
    return np.array([display_label(x) for x in np.asarray(arr).ravel()], dtype=object).reshape(np.shape(arr))


def label_hover(labels: Mapping[str, PatternLabels]) -> np.ndarray:
    """``[L, H]`` hover text with the three labels of every head (as :func:`classify_heads` gives them)."""
    kov, gate, clark = labels["kovaleva"], labels["gates"], labels["clark"]
    L, H = kov.labels.shape
    return np.array([
        [f"Kovaleva: {display_label(kov.labels[l, h])} ({kov.confidence[l, h]:.2f})"
         f"<br>gate: {display_label(gate.labels[l, h])} ({gate.confidence[l, h]:.2f})"
         f"<br>Clark: {display_label(clark.labels[l, h])}" for h in range(H)] for l in range(L)
    ], dtype=object)


def rule_marks(th: PatternThresholds) -> dict[str, float]:
    """The threshold each rule applies to a feature (drawn as ticks on a head's feature vector)."""
    return {"prev": th.clark_prev, "next": th.clark_next, "cls": th.clark_cls, "sep": th.clark_sep,
            "punct": th.clark_punct, "special": th.gate_closed, "bwd": th.gate_candidate, "fwd": th.gate_candidate,
            "self": th.gate_candidate, "col_content": th.gate_candidate, "block_mass": th.gate_candidate,
            "delta_row": th.gate_directional_delta, "entropy_norm": th.gate_open_entropy, "k90_frac": th.gate_open_k90}


def clark_findings(labels: Mapping[str, PatternLabels], feats, *, shown: int = 12) -> list[str]:
    """One markdown line per Clark behaviour: the heads that show it with the feature value behind
    each, or the strongest head when none passes the threshold."""
    from bertgeom.tables import head_label

    clark = labels["clark"]
    lines = []
    for cls_name, (feat, unit) in CLARK_EVIDENCE.items():
        heads = clark.heads_with(cls_name)
        vals = np.asarray(feats[feat])
        if not heads and not np.any(vals):  # the input has no such token (a genome has no '.' or ','): no line
            continue
        if heads:
            listed = ", ".join(f"{head_label(l, h)} ({vals[l, h]:.2f})" for l, h in heads[:shown])
            more = f" and {len(heads) - shown} more" if len(heads) > shown else ""
            lines.append(f"- **{DISPLAY_NAMES[cls_name]}** ({unit}): {listed}{more}")
        else:
            l, h = np.unravel_index(int(np.argmax(vals)), vals.shape)
            lines.append(f"- {DISPLAY_NAMES[cls_name]}: no head passes the threshold "
                         f"(strongest {unit}: {head_label(l, h)}, {vals[l, h]:.2f})")
    return lines


def labels_frame(labels: Mapping[str, PatternLabels], feats, feature_names: Sequence[str]):
    """One row per head: the three labels with their confidence, then the named features."""
    from bertgeom.tables import per_head_frame

    cols = {}
    for tax, short in (("kovaleva", "kovaleva"), ("gates", "gate"), ("clark", "clark")):
        cols[short] = labels[tax].labels
        cols[f"{short}_conf"] = np.round(labels[tax].confidence.astype(float), 3)
    cols.update({n: np.asarray(feats[n], dtype=float) for n in feature_names})
    return per_head_frame(cols)
