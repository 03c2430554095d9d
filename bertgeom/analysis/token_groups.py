"""Token groups: contiguous runs of tokens that share a label (a genome's domains, a sentence's
segments), and attention aggregated from token level to group level.

Long inputs (a few hundred tokens) cannot be read as token-to-token lines; grouping them by a
label the input kind supplies (for genomes the domain of each token) keeps every link, summed.
The labels come from the caller, so nothing here knows what a domain is.

References: bertviz's head view draws token lines (Vig 2019, arXiv:1906.05714); aggregating
attention to spans as here follows Clark et al. 2019 (arXiv:1906.04341, §4, word-level maps:
sum over the keys of a span, mean over its queries).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["TokenGroup", "contiguous_groups", "group_attention", "window_bounds"]


class TokenGroup(NamedTuple):
    """Tokens ``start`` (inclusive) to ``stop`` (exclusive) that share ``name``."""

    name: str
    start: int
    stop: int


def contiguous_groups(labels: Sequence[str | None]) -> list[TokenGroup]:
    """Runs of equal consecutive labels (``None``/empty labels form runs of their own, named "—")."""
    groups: list[TokenGroup] = []
    start = 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            groups.append(TokenGroup(str(labels[start] or "—"), start, i))
            start = i
    return groups


def group_attention(attention, groups: Sequence[TokenGroup]) -> np.ndarray:
    """``[..., T, T]`` attention -> ``[..., G, G]``: entry (a, b) is the mean over group a's query
    rows of the weight they put on group b's keys (sum over its columns). When the groups cover
    every token, each group row still sums to 1."""
    a = np.asarray(attention, dtype=np.float64)
    T = a.shape[-1]
    member = np.zeros((len(groups), T))
    for g, grp in enumerate(groups):
        member[g, grp.start:grp.stop] = 1.0
    sizes = member.sum(axis=1)
    rows = member / np.maximum(sizes, 1.0)[:, None]  # mean over the group's queries
    return rows @ a @ member.T


def window_bounds(n_tokens: int, start: int, width: int) -> tuple[int, int]:
    """``(start, stop)`` of a window of at most ``width`` tokens inside ``n_tokens``, clamped."""
    width = max(1, min(int(width), n_tokens))
    start = min(max(int(start), 0), n_tokens - width)
    return start, start + width
