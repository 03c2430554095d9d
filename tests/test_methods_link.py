"""Every "docs/methods.md §x" the UI prints is a link to the in-app Methods page, and every section a
link names exists in docs/methods.md."""

from __future__ import annotations

import re
from pathlib import Path

from bertgeom.ui.methods_link import METHODS_PATH, find_section, linked

ROOT = Path(__file__).resolve().parents[1]


def test_a_reference_becomes_a_link_once():
    text = "Paper recipe (docs/methods.md §5): see docs/methods.md §3–§4 and docs/methods.md."
    out = linked(text)
    assert "[docs/methods.md §5](/?view=methods&section=5)" in out
    assert "[docs/methods.md §3–§4](/?view=methods&section=3)" in out
    assert out.endswith("[docs/methods.md](/?view=methods).")
    assert linked(out) == out  # an existing link is left alone


def test_every_linked_section_exists():
    doc = METHODS_PATH.read_text(encoding="utf-8")
    ui = [p for folder in ("bertgeom/ui", "app_pages") for p in (ROOT / folder).rglob("*")
          if p.suffix in {".py", ".md"}]
    sections = set()
    for p in ui:
        sections |= set(re.findall(r"view=methods&section=([\d.]+)", p.read_text(encoding="utf-8")))
    assert {"4", "5", "8", "9"} <= sections
    missing = [s for s in sections if find_section(doc, s) is None]
    assert not missing, missing
    title, body = find_section(doc, "9")
    assert title.startswith("9.") and "Cone index" in body
