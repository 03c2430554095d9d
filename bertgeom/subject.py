"""What a page studies: one model and one input record, with the record's forward pass.

A :class:`Subject` is resolved once per script run by the page (the model loaded, the paste read into
records, the first record traced) and handed to every tab, so no tab resolves a model or a trace
again from strings. It is frozen and named by what it depends on: the model's weights hash and the
record's digest (:attr:`Subject.key`), which is also how caches hash it (the model and the trace
themselves are never hashed or copied).

References: issue 47 ("a house with one currency").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Subject"]


@dataclass(frozen=True, eq=False)
class Subject:
    """One loaded model and one record of its input kind, with the record's trace.

    ``model_id`` is the registry id the model was loaded by (for links and the preparation's
    status); ``text`` the paste the record was read from (what the sidebar holds)."""

    loaded: Any  # bertgeom.models.LoadedModel
    record: Any  # bertgeom.inputs.Record
    trace: Any = field(repr=False)  # bertgeom.trace.Trace of ``record``
    model_id: str = ""
    text: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """``(weights hash, record digest)``: equal keys mean the same model on the same record."""
        return self.loaded.weights_hash, self.record.digest

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Subject) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)
