"""The Attention Heads page's tabs, one module each (named for its tab), and the registry the page
reads: :data:`TABS`, in the order the tab strip shows them.

A tab is a function of the page's :class:`~bertgeom.ui.heads.view.View` (the model, the input, its
per-head features and labels, the selected head). A new tab is one module here and one line in
:data:`TABS`; a tab that only some models or inputs can show gives an ``available`` predicate of the
view (a tab without one is always shown). The titles are part of the share links
(``?heads_tab=Model+view``), so a title does not change lightly.

References: the papers behind each tab are listed in its module.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from bertgeom.ui.heads import (
    all_heads,
    attention_flow,
    compare_checkpoints,
    compare_inputs,
    disable_heads,
    gradient_importance,
    head_detail,
    head_similarity,
    head_view,
    model_view,
    over_a_set,
    queries_keys,
)
from bertgeom.ui.heads.view import View


class HeadsTab(NamedTuple):
    """One tab of the Attention Heads page: its title, what draws it, and when it is offered."""

    title: str
    render: Callable[[View], None]
    available: Callable[[View], bool] | None = None


#: Every tab, in the tab strip's order (the first opens when a link names none).
TABS: tuple[HeadsTab, ...] = (
    HeadsTab("Head detail", head_detail.head_detail_tab),
    HeadsTab("Head view", head_view.head_view_tab),
    HeadsTab("Model view", model_view.model_view_tab),
    HeadsTab("All heads", all_heads.all_heads_tab),
    HeadsTab("Queries & keys over a set", queries_keys.qk_set_tab),
    HeadsTab("Over a set of inputs", over_a_set.set_tab),
    HeadsTab("Head similarity", head_similarity.similarity_tab),
    HeadsTab("Disable heads", disable_heads.disable_tab),
    HeadsTab("Compare checkpoints", compare_checkpoints.compare_tab),
    HeadsTab("Attention flow", attention_flow.flow_tab),
    HeadsTab("Compare two inputs", compare_inputs.compare_inputs_tab),
    HeadsTab("Gradient importance", gradient_importance.gradient_tab),
)


def tabs_for(view: View, tabs: tuple[HeadsTab, ...] = TABS) -> list[HeadsTab]:
    """The tabs of ``tabs`` offered for ``view``, in order: those without a predicate, and those whose
    predicate holds."""
    return [t for t in tabs if t.available is None or t.available(view)]
