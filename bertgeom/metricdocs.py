"""What each metric means, as a small typed record the UI and the docs read.

Every analysis module keeps a table ``name -> MetricDoc`` next to the code that computes the
metric (``heads.FEATURE_DOCS``, ``subspace.WEIGHT_FEATURE_DOCS``, ``cone.STREAM_DOCS``…), so a
formula is written once, beside its implementation, and shown by every page that plots it.
"""

from __future__ import annotations

from typing import NamedTuple

#: How a metric's source names the case study's paper (Bonino, Ghione & Cirrincione 2025).
BONINO_2025 = "Bonino 2025 (arXiv:2502.12033)"


class MetricDoc(NamedTuple):
    """A metric's short label, its formula (plain text) and its source (paper and section, or
    ``our addition`` / ``reconstruction`` for our own rules; docs/methods.md)."""

    label: str
    formula: str
    source: str


def doc_table(entries: dict[str, tuple[str, str, str]]) -> dict[str, MetricDoc]:
    """A documentation table from ``name -> (label, formula, source)`` triples."""
    return {name: MetricDoc(*entry) for name, entry in entries.items()}
