"""Per-head names and tables, one format for all of bertgeom, and the wording of numbers in sentences.

Arrays are 0-based ``[layer, head]``; what users read is 1-based, as in the papers:
:func:`head_label` gives ``"L8 H10"`` for ``(7, 9)``, and :func:`per_head_frame` turns ``[L, H]``
arrays into one row per head with 1-based ``layer`` and ``head`` columns (what every CSV holds).

Every generated sentence words its numbers with the two helpers at the end (issue #45): a count
with its noun (:func:`counted`: ``1 link``, ``3 links``; :func:`word_for` for a verb that agrees
with it) and a change between two numbers (:func:`change_phrase`: *rises 1.8-fold*, *falls by 43%*,
*stays at 0.61*), judged at the precision the sentence prints, so the verb never contradicts the
numbers beside it. They live here, on the ground floor, because the analyses' sentences
(:mod:`bertgeom.analysis.tour_facts`), the figures and the pages all word numbers the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd


def head_label(layer: int, head: int) -> str:
    """1-based display name of the 0-based head ``(layer, head)``: ``(7, 9) -> "L8 H10"``."""
    return f"L{int(layer) + 1} H{int(head) + 1}"


def head_labels(num_layers: int, num_heads: int) -> list[str]:
    """Labels of every head, layer by layer (the order of ``array.reshape(L * H)``)."""
    return [head_label(l, h) for l in range(num_layers) for h in range(num_heads)]


def per_head_frame(columns: Mapping[str, np.ndarray], *, prefix: str = "") -> pd.DataFrame:
    """One row per head (1-based ``layer`` and ``head``), one column per ``[L, H]`` array."""
    first = np.asarray(next(iter(columns.values())))
    L, H = first.shape[:2]
    cols = {"layer": np.repeat(np.arange(1, L + 1), H), "head": np.tile(np.arange(1, H + 1), L)}
    cols.update({prefix + k: np.asarray(v).reshape(L * H) for k, v in columns.items()})
    return pd.DataFrame(cols)


def top_arcs(attention: np.ndarray, labels, *, theta: float = 0.3, limit: int = 50) -> list[dict]:
    """Entries ``A[i, j] >= theta`` sorted by weight: the head's strongest links."""
    a = np.asarray(attention)
    i, j = np.nonzero(a >= theta)
    order = np.argsort(-a[i, j], kind="stable")[:limit]
    return [
        {"query": labels[i[k]], "key": labels[j[k]], "query_pos": int(i[k]), "key_pos": int(j[k]),
         "offset": int(j[k] - i[k]), "weight": float(a[i[k], j[k]])}
        for k in order
    ]


def arcs_frame(attention: np.ndarray, labels, *, theta: float = 0.3, limit: int = 200, domains=None) -> pd.DataFrame:
    """:func:`top_arcs` as a table; with ``domains`` (one per token) the query's and key's domains too."""
    df = pd.DataFrame(top_arcs(attention, labels, theta=theta, limit=limit))
    if domains is not None and len(df):
        df.insert(2, "query_domain", [domains[i] or "-" for i in df["query_pos"]])
        df.insert(3, "key_domain", [domains[j] or "-" for j in df["key_pos"]])
    return df


# ---- the wording of numbers in sentences ------------------------------------------------------
_ES_ENDINGS = ("s", "x", "z", "ch", "sh")


def word_for(n: int, one: str, many: str | None = None) -> str:
    """The form of a word that agrees with the count ``n``: ``one`` for exactly 1, else ``many``
    (default: ``one`` with the English plural ending; pass ``many`` for verbs and irregular nouns,
    ``word_for(n, "passes", "pass")``)."""
    if n == 1:
        return one
    if many is not None:
        return many
    if one.endswith(_ES_ENDINGS):
        return one + "es"
    if len(one) > 1 and one.endswith("y") and one[-2] not in "aeiou":
        return one[:-1] + "ies"
    return one + "s"


def counted(n: int, one: str, many: str | None = None) -> str:
    """A count with its noun in the number it takes: ``1 link``, ``3 links``, ``1,204 token vectors``."""
    return f"{int(n):,} {word_for(int(n), one, many)}"


def noun_forms(one: str, many: str | None = None) -> tuple[str, str]:
    """``(singular, plural)`` of a noun, as :func:`word_for` spells them: for a count made in a
    browser script (the head view counts the links a hover shows), which picks one by the same rule."""
    return one, word_for(2, one, many)


def shown(x: float, digits: int) -> str:
    """``x`` as a sentence prints it, ``digits`` decimals (no ``-0.00``)."""
    text = f"{float(x):.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def change_direction(a: float, b: float, digits: int = 2) -> int:
    """+1 when ``b`` is larger than ``a`` as printed with ``digits`` decimals, -1 when smaller, 0 when
    the two print the same (a change invisible at the shown precision is no change)."""
    if shown(a, digits) == shown(b, digits):
        return 0
    return 1 if float(b) > float(a) else -1


def _size_of_change(a: float, b: float) -> str:
    """``1.8-fold`` or ``170-fold`` (one and a half times or more), ``by 12%`` (less), or ``""`` when a
    ratio has no meaning (a value at or below zero). Measured on the numbers themselves, not as printed."""
    a, b = float(a), float(b)
    if a <= 0 or b <= 0:
        return ""
    ratio = max(a, b) / min(a, b)
    if ratio >= 10:
        return f"{float(f'{ratio:.2g}'):,.0f}-fold"
    if ratio >= 1.5:
        return f"{ratio:.1f}-fold"
    pct = abs(b - a) / a * 100
    return f"by {pct:.0f}%" if pct >= 0.5 else "by less than 1%"


def change_phrase(a: float, b: float, digits: int = 2, *, start: str = "", end: str = "") -> str:
    """How a number goes from ``a`` (at ``start``) to ``b`` (at ``end``), worded by its numbers as
    printed with ``digits`` decimals: ``rises 1.8-fold, from 0.41 (embeddings) to 0.72 (layer 6)``,
    ``falls by 12%, from …``, or ``stays at 0.61 (embeddings to layer 6)`` when the two print the
    same. The one wording of a change in every generated sentence."""
    direction = change_direction(a, b, digits)
    if direction == 0:
        where = f" ({start} to {end})" if start and end else ""
        return f"stays at {shown(b, digits)}{where}"
    verb = "rises" if direction > 0 else "falls"
    size = _size_of_change(a, b)
    at_start, at_end = (f" ({start})" if start else ""), (f" ({end})" if end else "")
    return (f"{verb}{' ' + size + ',' if size else ''} from {shown(a, digits)}{at_start} "
            f"to {shown(b, digits)}{at_end}")
