"""User-supplied strings shown on screen as text, never as markup: :func:`bertgeom.safety.plain`
(kept importable from here for the pages)."""

from __future__ import annotations

from bertgeom.safety import plain

__all__ = ["plain"]
