"""The Cone Index per Layer page's sections, one module each (named for its section), and the registry
the page reads: :data:`SECTIONS`, in the order its *Show* control lists them.

A section is a function of the page's :class:`~bertgeom.ui.cone.view.View` (the model, the input and its
cone indices, the page's token set, padding and vector form). A new section is one module here and one
line in :data:`SECTIONS`; a section that only some models or inputs can show gives an ``available``
predicate of the view (a section without one is always shown). The keys are part of the share links
(``?w_cone_section=entropy``), so a key does not change lightly; the titles are what the control shows.

References: Bonino et al. 2025 (arXiv:2502.12033); each section's module lists its own.
"""

from __future__ import annotations

from bertgeom.ui.cone import distribution, entropies, isotropy, per_class, rank_collapse, streams
from bertgeom.ui.tabs import PageTab


#: Every section, in the control's order (the first opens when a link names none).
SECTIONS: tuple[PageTab, ...] = (
    PageTab("Streams inside each layer", streams.streams_section, key="streams"),
    PageTab("Per class over a set", per_class.classes_section, key="classes"),
    PageTab("Data distribution ([CLS])", distribution.distribution_section, key="distribution"),
    PageTab("Attention entropies", entropies.entropy_section, key="entropy"),
    PageTab("IsoScore beside the cone", isotropy.isotropy_section, key="isotropy"),
    PageTab("Rank collapse beside the cone", rank_collapse.rank_collapse_section, key="collapse"),
)
