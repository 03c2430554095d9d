"""The project stands alone: every citation points to a paper or to docs/methods.md, never to a
document that is not in the repository; and docs/methods.md covers what the pages cite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "docs" / "methods.md"

#: Names of documents that exist outside the repository only, and phrases that only made sense
#: next to them.
FOREIGN = re.compile(
    r"paper_spec|seed_methods_spec|seed[ _]spec|anchors\.md|shared/docs|in the spec\b|spec §"
    r"|body text could not be read|paper's text was unavailable",
    re.IGNORECASE,
)


def _project_texts():
    """Every text file a user or a developer reads: code, page texts, docs, README."""
    paths = [ROOT / "app.py", ROOT / "README.md"]
    for folder in ("bertgeom", "pages", "docs", "tools"):
        base = ROOT / folder
        if base.is_dir():
            paths += [p for p in base.rglob("*") if p.suffix in {".py", ".md", ".txt", ".toml", ".yml", ".yaml"}]
    return sorted(p for p in paths if p.is_file() and "__pycache__" not in p.parts)


def test_scanner_sees_the_pages_and_the_library():
    names = {p.relative_to(ROOT).as_posix() for p in _project_texts()}
    assert "pages/attention_heads.py" in names
    assert "bertgeom/analysis/patterns.py" in names
    assert "bertgeom/ui/texts/cone_index.md" in names
    assert "docs/methods.md" in names


def test_the_pattern_catches_what_it_must():
    for bad in ("see paper_spec §2.3", "seed_methods_spec §1.7", "(seed spec f10)", "PROPOSED in the spec",
                "The paper's body text could not be read."):
        assert FOREIGN.search(bad), bad
    for good in ("docs/methods.md §5", "Bonino 2025 (arXiv:2502.12033)", "the spectrum of A"):
        assert not FOREIGN.search(good), good


@pytest.mark.parametrize("path", _project_texts(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_text_points_to_a_document_outside_the_repository(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    hits = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in FOREIGN.finditer(text)]
    assert not hits, f"{path.relative_to(ROOT)} cites a document that is not in the repository: {hits}"


def test_methods_doc_cites_every_paper_by_identifier():
    doc = METHODS.read_text(encoding="utf-8")
    for ident in ("arXiv:2502.12033", "arXiv:1906.04341", "arXiv:1908.08593", "arXiv:2011.00943"):
        assert ident in doc, ident
    assert "reconstruction" in doc.lower()


def test_every_methods_section_cited_in_the_code_exists():
    """A citation 'docs/methods.md §8.2' must name a heading of the document."""
    doc = METHODS.read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,4} (\d+(?:\.\d+)?)\.? ", doc, flags=re.MULTILINE))
    assert {"1", "5", "8.2", "9"} <= headings
    cited = set()
    for p in _project_texts():
        for m in re.finditer(r"docs/methods\.md §(\d+(?:\.\d+)?)", p.read_text(encoding="utf-8", errors="replace")):
            cited.add((m.group(1), p.relative_to(ROOT).as_posix()))
    assert cited, "no code cites docs/methods.md"
    missing = sorted((sec, where) for sec, where in cited if sec not in headings)
    assert not missing, f"citations of sections that docs/methods.md lacks: {missing}"


def test_pages_link_to_the_methods_document():
    for page in ("pages/attention_heads.py", "pages/subspace_directions.py", "pages/cone_index.py"):
        assert "docs/methods.md" in (ROOT / page).read_text(encoding="utf-8"), page
