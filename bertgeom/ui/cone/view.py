"""What every section of the Cone Index page reads (:class:`View`: the page view with the page's
settings and the current input's cone indices)."""

from __future__ import annotations

from dataclasses import dataclass

from bertgeom.ui.state import PageView


@dataclass
class View(PageView):
    """What every section reads: the page view with the page's settings and the input's cones."""

    token_set: str
    pad_to: int | None
    unit: bool
    max_pos: int
    cur: dict
    section: str  #: the shown section's key (the set sections keep their own "correct only" box by it)

    @property
    def m(self) -> int:
        """Rows of the current input in the token set."""
        return int(self.cur["m"])

    @property
    def norm_label(self) -> str:
        """How the cone index is normalised: by m (unit rows) or by the sum of the norms (raw rows)."""
        return "I / m" if self.unit else "I / Σ‖x‖"

    @property
    def display(self) -> dict:
        """Class label -> its name on screen ("" names the whole set)."""
        if self.kind.class_names:
            return {**self.kind.class_names, "": "all inputs"}
        return {"": "all inputs (unlabelled)"}
