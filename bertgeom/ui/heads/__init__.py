"""The Attention Heads page's tabs, one module each (named for its tab), and the registry the page
reads: :data:`TABS`, in the order the tab strip shows them.

A tab is a function of the page's :class:`~bertgeom.ui.heads.view.View` (the model, the input, its
per-head features and labels, the selected head). A new tab is one module here and one line in
:data:`TABS`; a tab that only some models or inputs can show gives an ``available`` predicate of the
view (a tab without one is always shown; :class:`bertgeom.ui.tabs.PageTab`). The titles are part of the share links
(``?heads_tab=Model+view``), so a title does not change lightly.

References: the papers behind each tab are listed in its module.
"""

from __future__ import annotations

from bertgeom.ui.heads import (
    all_heads,
    attention_flow,
    compare_checkpoints,
    compare_inputs,
    context_mixing,
    disable_heads,
    gradient_importance,
    head_detail,
    head_similarity,
    head_view,
    model_view,
    over_a_set,
    queries_keys,
)
from bertgeom.ui.tabs import PageTab


#: Every tab, in the tab strip's order (the first opens when a link names none).
TABS: tuple[PageTab, ...] = (
    PageTab("Head detail", head_detail.head_detail_tab),
    PageTab("Head view", head_view.head_view_tab),
    PageTab("Model view", model_view.model_view_tab),
    PageTab("All heads", all_heads.all_heads_tab),
    PageTab("Queries & keys over a set", queries_keys.qk_set_tab),
    PageTab("Over a set of inputs", over_a_set.set_tab),
    PageTab("Head similarity", head_similarity.similarity_tab),
    PageTab("Disable heads", disable_heads.disable_tab),
    PageTab("Compare checkpoints", compare_checkpoints.compare_tab),
    PageTab("Attention flow", attention_flow.flow_tab),
    PageTab("Context mixing", context_mixing.context_mixing_tab),
    PageTab("Compare two inputs", compare_inputs.compare_inputs_tab),
    PageTab("Gradient importance", gradient_importance.gradient_tab),
)
