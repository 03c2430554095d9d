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

from typing import Callable, NamedTuple

from bertgeom.ui.cone import distribution, entropies, isotropy, per_class, streams
from bertgeom.ui.cone.view import View


class ConeSection(NamedTuple):
    """One section of the Cone Index page: its key (in links), its title, what draws it, and when it is offered."""

    key: str
    title: str
    render: Callable[[View], None]
    available: Callable[[View], bool] | None = None


#: Every section, in the control's order (the first opens when a link names none).
SECTIONS: tuple[ConeSection, ...] = (
    ConeSection("streams", "Streams inside each layer", streams.streams_section),
    ConeSection("classes", "Per class over a set", per_class.classes_section),
    ConeSection("distribution", "Data distribution ([CLS])", distribution.distribution_section),
    ConeSection("entropy", "Attention entropies", entropies.entropy_section),
    ConeSection("isotropy", "IsoScore beside the cone", isotropy.isotropy_section),
)


def sections_for(view: View, sections: tuple[ConeSection, ...] = SECTIONS) -> list[ConeSection]:
    """The sections of ``sections`` offered for ``view``, in order: those without a predicate, and those
    whose predicate holds."""
    return [s for s in sections if s.available is None or s.available(view)]
