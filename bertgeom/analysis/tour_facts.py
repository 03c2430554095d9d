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

from bertgeom.tables import head_label

__all__ = ["HeadFact", "behaviour_note", "cone_summary", "isoscore_rank_note", "layer_ranking", "one_back_note",
           "special_heads_note", "strongest_head", "sink_summary", "tour_facts"]

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
    head_word = lambda n: "head" if n == 1 else "heads"  # noqa: E731
    text = (f"the strongest [CLS] head is **{cls.label}** ({cls.value:.2f} of its attention) and "
            f"{cls.n_above} {head_word(cls.n_above)} of {cls.n_heads} pass 0.6; the strongest [SEP] head is "
            f"**{sep.label}** ({sep.value:.2f}) and {sep.n_above} {head_word(sep.n_above)} pass 0.6.")
    if sep.n_above == 0 and cls.n_above > 0:
        text += (" Here the resting place is **[CLS]**, not [SEP] as in BERT-base (Clark et al. 2019 found "
                 "over half of the attention of its layers 6–10 on [SEP]).")
    elif sep.n_above > 0 and sep.n_above >= cls.n_above:
        text += " As Clark et al. (2019) found in BERT-base, [SEP] is where idle heads rest."
    elif sep.n_above == 0 and cls.n_above == 0:
        text += " No head of this model parks most of its attention on a special token for this input."
    return text


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
            f"{f.n_above} of {f.n_heads} heads pass {f.threshold:g}")


def one_back_note(attention, unit: str = "token") -> str:
    """How often a map's darkest cell of a row sits just left of the diagonal (on the token before):
    counted over the rows after the first, on the map as drawn (tokens, or words when merged)."""
    A = np.asarray(attention, dtype=np.float64)
    rows = np.arange(1, A.shape[0])
    hits = int((A[rows].argmax(axis=1) == rows - 1).sum())
    share = hits / max(rows.size, 1)
    return (f"in {hits} of the {rows.size} rows after the first ({share:.0%}) the darkest cell sits just left of "
            f"the diagonal, on the {unit} before")


def special_heads_note(table) -> tuple[str, tuple[int, int]]:
    """How many heads put half or more of their attention on [CLS] and [SEP] together, and the head
    that puts the most there (0-based): the Model view's caption and the tour's step on it."""
    special = np.asarray(table["cls"], dtype=np.float64) + np.asarray(table["sep"], dtype=np.float64)
    layer, head = (int(x) for x in np.unravel_index(int(np.argmax(special)), special.shape))
    n = int((special >= 0.5).sum())
    return (f"{n} of {special.size} heads put half or more of their attention on [CLS] or [SEP] (a dark stripe at the "
            f"left or right edge), most of all **{head_label(layer, head)}** ({special[layer, head]:.2f})",
            (layer, head))


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
        return (f"{m} token vectors in {d} dimensions. With no more vectors than dimensions the sample covariance "
                f"has rank ≤ {m - 1}, so IsoScore cannot exceed about {(m - 1) / d:.2f} here even for random "
                "directions (IsoScore*, I-STAR's shrinkage toward a reference covariance, lifts that limit).")
    return (f"{m} token vectors in {d} dimensions: more vectors than dimensions, so the sample covariance can have "
            "full rank and IsoScore can reach 1 for directions spread evenly (fewer vectors would cap it at "
            "about (m − 1)/d).")


def cone_summary(cone, iso, m: int) -> str:
    """One sentence on a cloud's cone index ``I/m`` per layer (``cone``, embeddings first) beside its
    IsoScore per layer (``iso``): the numbers the Cone Index page's IsoScore section and the tour's
    cone step both show (computed once here, so the two cannot disagree)."""
    cone, iso = np.asarray(cone, dtype=np.float64), np.asarray(iso, dtype=np.float64)
    trend = "narrower" if cone[-1] > cone[0] else "wider"
    return (f"Through the layers the {m} token vectors bunch into a {trend} cone: I/m goes from {cone[0]:.2f} "
            f"(embeddings) to {cone[-1]:.2f} (layer {len(cone) - 1}); unrelated directions would give "
            f"1/√m = {1 / np.sqrt(max(m, 1)):.2f}. IsoScore, which ignores the shared direction, stays between "
            f"{iso.min():.3f} and {iso.max():.3f}: the two measures answer different questions.")
