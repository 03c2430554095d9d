"""Example inputs shipped with bertgeom (sentences now; genomes come with the variant model)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


@lru_cache(maxsize=1)
def example_sentences() -> tuple[str, ...]:
    """The shipped English sentences (``data/sentences.txt``), in file order."""
    lines = (DATA_DIR / "sentences.txt").read_text(encoding="utf-8").splitlines()
    return tuple(s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#"))
