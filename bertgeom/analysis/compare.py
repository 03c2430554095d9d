"""Two inputs side by side: the same head's maps, their difference, and how much every head changed.

To compare two inputs the tokens must be paired first.  :func:`pair_tokens` aligns the two token
sequences (``difflib.SequenceMatcher``): identical runs are paired, and a replaced run of the same
length on both sides (a substituted word, a mutated k-mer) is paired position by position;
inserted or deleted tokens stay unpaired.  Inputs read on a common axis (genomes on the reference gene), so
their tokens are paired by their amino-acid range and every position pairs.

Per head, the change of the map is the mean over paired query rows of the **total variation
distance** between the two rows, each row read as a distribution over keys where an unpaired key
is an outcome of its own side only:

``TV_h = mean_i ½ (Σ_{j paired} |A_h[i, j] − B_h[i', j']|``
``+ Σ_{j unpaired in A} A_h[i, j] + Σ_{j' unpaired in B} B_h[i', j'])``

0 means the head attends identically, 1 that the two rows share no mass.  This is the datapoint
comparison of interpretability tools such as LIT (Tenney et al. 2020), applied to attention: it
shows which heads react to an edit (a mutation, a changed word) and where.  Vectorised over all
layers and heads at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Sequence

import numpy as np

__all__ = ["pair_tokens", "row_change", "map_change", "paired_maps", "PairedChange", "paired_change"]


def pair_tokens(a: Sequence[str], b: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(ia, ib)`` of paired tokens of ``a`` and ``b`` (see module docstring), in order."""
    sm = SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    ia, ib = [], []
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op == "equal" or (op == "replace" and a1 - a0 == b1 - b0):
            ia.extend(range(a0, a1))
            ib.extend(range(b0, b1))
    return np.array(ia, dtype=np.int64), np.array(ib, dtype=np.int64)


def row_change(A: np.ndarray, B: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """``[..., P]`` total variation between each paired query row of ``A [..., Ta, Ta]`` and ``B [..., Tb, Tb]``
    (any leading axes, e.g. ``[L, H]`` or one head's map): where in the input a head's reading changed."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.shape[:-2] != B.shape[:-2]:
        raise ValueError(f"the two inputs come from models of different shapes: {A.shape[:-2]} vs {B.shape[:-2]}")
    ra = A[..., ia, :]  # paired query rows
    rb = B[..., ib, :]
    pa, pb = ra[..., ia], rb[..., ib]  # paired keys
    diff = np.abs(pa - pb).sum(-1)
    unpaired = (ra.sum(-1) - pa.sum(-1)) + (rb.sum(-1) - pb.sum(-1))
    return 0.5 * (diff + unpaired)


def map_change(A: np.ndarray, B: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """``[L, H]`` mean total variation between paired rows of ``A [L, H, Ta, Ta]`` and ``B [L, H, Tb, Tb]``."""
    if np.shape(A)[:2] != np.shape(B)[:2]:
        raise ValueError(f"the two inputs come from models of different shapes: {np.shape(A)[:2]} vs {np.shape(B)[:2]}")
    if ia.size == 0:
        return np.full(np.shape(A)[:2], np.nan)
    return row_change(A, B, ia, ib).mean(-1)


def paired_maps(a_map: np.ndarray, b_map: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One head's two maps restricted to the paired tokens, ``[P, P]`` each (their difference is
    ``a − b``)."""
    return np.asarray(a_map)[np.ix_(ia, ia)], np.asarray(b_map)[np.ix_(ib, ib)]


@dataclass(frozen=True)
class PairedChange:
    """Two inputs compared: the positions ``ia``, ``ib`` of their paired tokens (:func:`pair_tokens`)
    and each head's change ``tv [L, H]`` (:func:`map_change`; nan where nothing pairs)."""

    ia: np.ndarray
    ib: np.ndarray
    tv: np.ndarray


def paired_change(tokens_a: Sequence[str], tokens_b: Sequence[str], attentions_a: np.ndarray,
                  attentions_b: np.ndarray) -> PairedChange:
    """Pair the two inputs' tokens (their labels: word pieces, or positions on a common axis) and
    measure every head's change between their maps ``[L, H, T, T]``."""
    ia, ib = pair_tokens([str(x) for x in tokens_a], [str(x) for x in tokens_b])
    return PairedChange(ia, ib, map_change(attentions_a, attentions_b, ia, ib))
