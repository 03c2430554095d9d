"""A page's tabs (or sections) as data: what each is called, what draws it and when it is offered.

Attention Heads (:mod:`bertgeom.ui.heads`), Subspace Directions (:mod:`bertgeom.ui.subspace`) and Cone
Index per Layer (:mod:`bertgeom.ui.cone`) each keep a tuple of :class:`PageTab`, one module per tab,
and draw what :func:`offered_tabs` returns for the page's view. The names a tab is reached by in a link
(its title, or its ``key`` where one is given) do not change lightly.

References: none (page plumbing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


class PageTab(NamedTuple):
    """One tab or section of a page: its title, what draws it from the page's view, when it is offered
    (``None``: always) and, where links name it otherwise than by its title, its ``key``
    (``?w_cone_section=entropy``)."""

    title: str
    render: Callable[[Any], None]
    available: Callable[[Any], bool] | None = None
    key: str = ""


def offered_tabs(tabs: Sequence[PageTab], view: Any) -> list[PageTab]:
    """The tabs of ``tabs`` offered for ``view``, in order: those without a predicate, and those whose
    predicate holds."""
    return [t for t in tabs if t.available is None or t.available(view)]
