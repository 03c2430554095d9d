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

from bertgeom.ui.subspace import across_inputs, faithful_vs_correct, head_affinity, this_input, weights
from bertgeom.ui.tabs import PageTab


#: Every tab, in the tab strip's order (the first opens when a link names none).
TABS: tuple[PageTab, ...] = (
    PageTab("Weights (D4)", weights.weights_tab),
    PageTab("This input (D1–D3)", this_input.data_tab),
    PageTab("Across inputs", across_inputs.across_tab),
    PageTab("Faithful vs correct", faithful_vs_correct.faithful_tab),
    PageTab("Head-to-head affinity", head_affinity.affinity_tab),
)
