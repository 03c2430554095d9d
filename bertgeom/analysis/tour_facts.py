"""The tour's numbers and prose: sentences about *this* model on *this* input, computed from its
per-head features (the home tour reads them, and the pages its steps open quote the same sentences).

Teaching texts must not claim what the model on screen does not do: "many middle-layer heads
attend to [SEP]" is true of BERT-base (Clark et al. 2019 §3.2, arXiv:1906.04341) and false of
MiniLM, whose heads park on [CLS]. Every claim a page makes about "which heads do X" is built
here from a :class:`~bertgeom.analysis.heads.HeadFeatureTable` (vectorised ``argmax`` and counts
over the ``[L, H]`` arrays), so it names heads that exist and numbers that can be checked on
the grid. Thresholds are Clark's (0.5 for previous/next, 0.6 for [CLS]/[SEP]); see
docs/methods.md §4.3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertgeom.tables import change_direction, change_phrase, counted, head_label, shown, word_for

__all__ = ["HeadFact", "behaviour_note", "cone_summary", "isoscore_rank_note", "layer_ranking", "map_columns",
           "map_note", "one_back_note", "special_heads_note", "strongest_head", "sink_summary", "tour_facts"]

#: feature -> (what the head does, Clark's threshold)
BEHAVIOURS = {
    "prev": ("attention to the previous token", 0.5),
    "next": ("attention to the next token", 0.5),
    "cls": ("attention to [CLS]", 0.6),
    "sep": ("attention to [SEP]", 0.6),
    "punct": ("attention to . and ,", 0.6),
}


@dataclass(frozen=True)
class HeadFact:
    """The strongest head for one feature, and how many heads pass the threshold."""

    feature: str
    layer: int  # 0-based
    head: int  # 0-based
    value: float
    threshold: float
    n_above: int
    n_heads: int

    @property
    def label(self) -> str:
        return head_label(self.layer, self.head)


def strongest_head(table, feature: str, threshold: float | None = None) -> HeadFact:
    """The head with the largest ``feature`` (first in layer-major order on ties) and the number
    of heads whose value exceeds ``threshold`` (Clark's, by default)."""
    values = np.asarray(table[feature], dtype=np.float64)
    if threshold is None:
        threshold = BEHAVIOURS[feature][1]
    flat = int(np.argmax(values))
    layer, head = np.unravel_index(flat, values.shape)
    return HeadFact(feature, int(layer), int(head), float(values.flat[flat]), float(threshold),
                    int((values > threshold).sum()), int(values.size))


def sink_summary(table) -> str:
    """Where this model's heads park their attention: [CLS] or [SEP], with the strongest head of
    each and the number of heads past Clark's 0.6 threshold."""
    cls, sep = strongest_head(table, "cls"), strongest_head(table, "sep")
    text = (f"the strongest [CLS] head is **{cls.label}** ({cls.value:.2f} of its attention) and "
            f"{_passing(cls)}; the strongest [SEP] head is **{sep.label}** ({sep.value:.2f}) and {_passing(sep)}.")
    if sep.n_above == 0 and cls.n_above > 0:
        text += (" Here the resting place is **[CLS]**, not [SEP] as in BERT-base (Clark et al. 2019 found "
                 "over half of the attention of its layers 6–10 on [SEP]).")
    elif sep.n_above > 0 and sep.n_above >= cls.n_above:
        text += " As Clark et al. (2019) found in BERT-base, [SEP] is where idle heads rest."
    elif sep.n_above == 0 and cls.n_above == 0:
        text += " No head of this model parks most of its attention on a special token for this input."
    return text


def _passing(f: HeadFact) -> str:
    """``3 of 72 heads pass 0.6`` / ``1 of 72 heads passes 0.6``: the count of heads past the threshold."""
    return f"{f.n_above} of {counted(f.n_heads, 'head')} {word_for(f.n_above, 'passes', 'pass')} {f.threshold:g}"


def tour_facts(table) -> dict[str, str]:
    """One sentence per tour step, each about the model and input the table was computed on.

    Keys: ``prev`` (the strongest previous-token head), ``next``, ``sink`` (see
    :func:`sink_summary`), and ``prev_head`` / ``sink_head`` as ``"layer,head"`` (0-based) for
    buttons that select the head named in the sentence."""
    prev = strongest_head(table, "prev")
    cls, sep = strongest_head(table, "cls"), strongest_head(table, "sep")
    sink = cls if cls.value >= sep.value else sep
    return {
        "prev": behaviour_note(table, "prev"),
        "next": behaviour_note(table, "next"),
        "sink": sink_summary(table),
        "prev_head": f"{prev.layer},{prev.head}",
        "sink_head": f"{sink.layer},{sink.head}",
    }


#: The words :func:`behaviour_note` uses for a head that reads one neighbour.
_NEIGHBOUR = {"prev": "previous-token", "next": "next-token"}


def behaviour_note(table, feature: str) -> str:
    """The strongest head of one of Clark's behaviours and how many heads pass his threshold: the
    clause the tour says and the Attention Heads grid prints under its colour (computed once here, so
    the two cannot disagree). ``cls``/``sep`` give :func:`sink_summary` (both special tokens)."""
    if feature in ("cls", "sep"):
        return sink_summary(table)
    f = strongest_head(table, feature)
    what = _NEIGHBOUR.get(feature, BEHAVIOURS[feature][0])
    return (f"in this model the strongest {what} head is **{f.label}** ({f.value:.2f} of each token's attention); "
            f"{_passing(f)}")


def one_back_note(attention, unit: str = "token") -> str:
    """How often a map's darkest cell of a row sits just left of the diagonal (on the token before):
    counted over the rows after the first, on the map as drawn (tokens, or words when merged)."""
    A = np.asarray(attention, dtype=np.float64)
    rows = np.arange(1, A.shape[0])
    hits = int((A[rows].argmax(axis=1) == rows - 1).sum())
    return (f"in {hits} of the {counted(rows.size, 'row')} after the first ({_share(hits, rows.size)}) the darkest "
            f"cell sits just left of the diagonal, on the {unit} before")


def _share(hits: int, n: int) -> str:
    return f"{hits / max(n, 1):.0%}"


#: Where a row's darkest cell sits, as :func:`map_note` words it ({unit}: token or word).
_LANDINGS = {
    "self": "on the diagonal, on the {unit} itself",
    "prev": "just left of the diagonal, on the {unit} before",
    "next": "just right of the diagonal, on the {unit} after",
    "cls": "in the [CLS] column",
    "sep": "in a [SEP] column",
    "punct": "on a . or ,",
}


def _landing_hits(top: np.ndarray, masks: dict) -> dict[str, np.ndarray]:
    """Per landing of :data:`_LANDINGS`: which rows' darkest cell (``top``, the argmax of each row) sits there."""
    rows = np.arange(top.size)
    hits = {"self": top == rows, "prev": top == rows - 1, "next": top == rows + 1}
    for name in ("cls", "sep", "punct"):
        mask = masks.get(name)
        if mask is not None and np.asarray(mask).any():
            hits[name] = np.asarray(mask, dtype=bool)[top]
    return hits


def map_columns(encoded, group: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The [CLS], [SEP] and punctuation columns of a map (``encoded``'s token masks, or word masks
    through ``group``, the word of every piece, on a word map): :func:`map_note`'s ``cls``, ``sep``
    and ``punct``."""
    masks = {"cls": encoded.is_cls, "sep": encoded.is_sep, "punct": encoded.is_punct}
    if group is None:
        return {k: np.asarray(m, dtype=bool) for k, m in masks.items()}
    out = {}
    for k, m in masks.items():
        words = np.zeros(int(group.max()) + 1 if group.size else 0, dtype=bool)
        words[group[np.asarray(m, dtype=bool)]] = True  # a word holding such a piece
        out[k] = words
    return out


def map_note(attention, behaviour: str, *, cls=None, sep=None, punct=None, unit: str = "token") -> str:
    """What a head's map, as drawn, shows of the behaviour the page labels the head with (Clark's,
    :func:`bertgeom.analysis.patterns.clark_behaviour`, docs/methods.md §4.3), counted on the map's
    rows: where each row's darkest cell sits. A previous-token head is :func:`one_back_note`; a
    next-token head counts the token after; a [CLS], [SEP] or punctuation head counts the rows whose
    darkest cell is in that column; a broad head says how little its darkest cells hold; any other
    head names the place its darkest cells sit most often. ``cls``, ``sep`` and ``punct`` mark the
    map's columns holding those tokens (``[T]`` booleans, or ``[W]`` on a word map). The clause
    follows "In this map" on the Attention Heads page, under the map it counts."""
    A = np.asarray(attention, dtype=np.float64)
    n = A.shape[0]
    if behaviour == "prev":
        return one_back_note(A, unit)
    top = A.argmax(axis=1)
    hits = _landing_hits(top, {"cls": cls, "sep": sep, "punct": punct})
    if behaviour == "next":
        rows = np.arange(n - 1)
        k = int(hits["next"][rows].sum())
        return (f"in {k} of the {counted(rows.size, 'row')} before the last ({_share(k, rows.size)}) the darkest cell "
                f"sits {_LANDINGS['next'].format(unit=unit)}")
    if behaviour in ("cls", "sep", "punct") and behaviour in hits:
        k = int(hits[behaviour].sum())
        return f"in {k} of the {counted(n, 'row')} ({_share(k, n)}) the darkest cell sits {_LANDINGS[behaviour]}"
    if behaviour == "broad":
        mean_top = float(A.max(axis=1).mean())
        return (f"no cell stands out: a row's darkest cell holds {mean_top:.2f} of its attention on average "
                f"({1 / max(A.shape[1], 1):.2f} if spread evenly over its {counted(A.shape[1], unit)})")
    counts = {name: int(h.sum()) for name, h in hits.items()}
    best = max(counts, key=counts.get)  # ties: the order of _LANDINGS
    if counts[best] == 0:
        return (f"no row's darkest cell sits on the diagonal, on a neighbouring {unit} or on a special token: "
                "this head follows none of Clark's behaviours here")
    return (f"this head follows none of Clark's behaviours; its darkest cell sits most often "
            f"{_LANDINGS[best].format(unit=unit)}: in {counts[best]} of the {counted(n, 'row')} "
            f"({_share(counts[best], n)})")


def special_heads_note(table) -> tuple[str, tuple[int, int]]:
    """How many heads put half or more of their attention on [CLS] and [SEP] together, and the head
    that puts the most there (0-based): the Model view's caption and the tour's step on it."""
    special = np.asarray(table["cls"], dtype=np.float64) + np.asarray(table["sep"], dtype=np.float64)
    layer, head = (int(x) for x in np.unravel_index(int(np.argmax(special)), special.shape))
    n = int((special >= 0.5).sum())
    return (f"{n} of {counted(special.size, 'head')} {word_for(n, 'puts', 'put')} half or more of "
            f"{word_for(n, 'its', 'their')} attention on [CLS] or [SEP] (a dark stripe at the left or right edge), "
            f"most of all **{head_label(layer, head)}** ({special[layer, head]:.2f})", (layer, head))


def layer_ranking(table, feature: str, layer: int) -> list[tuple[int, float]]:
    """``(head, value)`` of one layer's heads, largest ``feature`` first (ties by head number)."""
    values = np.asarray(table[feature], dtype=np.float64)[layer]
    order = sorted(range(values.size), key=lambda h: (-values[h], h))
    return [(h, float(values[h])) for h in order]


def isoscore_rank_note(m: int, d: int) -> str:
    """What ``m`` token vectors in ``d`` dimensions allow IsoScore to reach (Rudman et al. 2022,
    arXiv:2108.07344): with ``m <= d`` the centred sample covariance has rank ``<= m - 1``, so
    IsoScore stays below about ``(m - 1) / d`` even for random directions; with ``m > d`` it can
    have full rank and IsoScore can reach 1. The sentence says which case this input is."""
    if m <= d:
        return (f"{counted(m, 'token vector')} in {d} dimensions. With no more vectors than dimensions the sample "
                f"covariance has rank ≤ {m - 1}, so IsoScore cannot exceed about {(m - 1) / d:.2f} here even for "
                "random directions (IsoScore*, I-STAR's shrinkage toward a reference covariance, lifts that limit).")
    return (f"{counted(m, 'token vector')} in {d} dimensions: more vectors than dimensions, so the sample covariance "
            "can have full rank and IsoScore can reach 1 for directions spread evenly (fewer vectors would cap it at "
            "about (m − 1)/d).")


def cone_summary(cone, iso, m: int) -> str:
    """One sentence on a cloud's cone index ``I/m`` per layer (``cone``, embeddings first) beside its
    IsoScore per layer (``iso``): the numbers the Cone Index page's IsoScore section and the tour's
    cone step both show (computed once here, so the two cannot disagree). Each measure's verb
    follows its own first and last values as printed (:func:`bertgeom.tables.change_phrase`): I/m
    with 2 decimals, IsoScore with 3; the range a curve crosses on the way is added when it reaches
    beyond both ends."""
    cone, iso = np.asarray(cone, dtype=np.float64), np.asarray(iso, dtype=np.float64)
    where = {"start": "embeddings", "end": f"layer {len(cone) - 1}"}
    cloud = {1: "bunch into a narrower cone", -1: "spread into a wider cone",
             0: "keep the width of their cone"}[change_direction(cone[0], cone[-1], 2)]
    return (f"Through the layers the {counted(m, 'token vector')} {cloud}: I/m "
            f"{change_phrase(cone[0], cone[-1], 2, **where)}{_on_the_way(cone, 2)}; unrelated directions would "
            f"give 1/√m = {1 / np.sqrt(max(m, 1)):.2f}. IsoScore, which ignores the shared direction, "
            f"{change_phrase(iso[0], iso[-1], 3, **where)}{_on_the_way(iso, 3)}: the two measures answer "
            "different questions.")


def _on_the_way(values: np.ndarray, digits: int) -> str:
    """``, between 0.010 and 0.030 on the way`` when a curve reaches beyond both its ends as printed, else ``""``."""
    lo, hi = shown(values.min(), digits), shown(values.max(), digits)
    ends = sorted((shown(values[0], digits), shown(values[-1], digits)), key=float)
    return "" if (lo, hi) == tuple(ends) else f", between {lo} and {hi} on the way"
