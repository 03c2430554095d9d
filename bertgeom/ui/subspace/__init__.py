"""The Subspace Directions page's tabs, one module each (named for its tab), and the registry the page
reads: :data:`TABS`, in the order the tab strip shows them.

A tab is a function of the page's :class:`~bertgeom.ui.subspace.view.View` (the model, the input, the
selected head, the page's thresholds and token set, the layer weights). A new tab is one module here and
one line in :data:`TABS`; a tab that only some models or inputs can show gives an ``available`` predicate
of the view (a tab without one is always shown). The titles are part of the share links
(``?w_sub_tab=Across+inputs``), so a title does not change lightly.

References: Bonino, Ghione & Cirrincione 2025 (arXiv:2502.12033); each tab's module lists its own.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from bertgeom.ui.subspace import across_inputs, faithful_vs_correct, this_input, weights
from bertgeom.ui.subspace.view import View


class SubspaceTab(NamedTuple):
    """One tab of the Subspace Directions page: its title, what draws it, and when it is offered."""

    title: str
    render: Callable[[View], None]
    available: Callable[[View], bool] | None = None


#: Every tab, in the tab strip's order (the first opens when a link names none).
TABS: tuple[SubspaceTab, ...] = (
    SubspaceTab("Weights (D4)", weights.weights_tab),
    SubspaceTab("This input (D1–D3)", this_input.data_tab),
    SubspaceTab("Across inputs", across_inputs.across_tab),
    SubspaceTab("Faithful vs correct", faithful_vs_correct.faithful_tab),
)


def tabs_for(view: View, tabs: tuple[SubspaceTab, ...] = TABS) -> list[SubspaceTab]:
    """The tabs of ``tabs`` offered for ``view``, in order: those without a predicate, and those whose
    predicate holds."""
    return [t for t in tabs if t.available is None or t.available(view)]
