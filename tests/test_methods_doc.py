"""The project stands alone: every section citation names a paper or docs/methods.md, no path leaves the
repository, and docs/methods.md covers what the pages cite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "docs" / "methods.md"

#: A section citation must say whose section it is: this project's docs/methods.md, or a paper
#: (author, year or arXiv id) named before the first "§" on its line.
NAMED_SOURCE = re.compile(r"docs/methods\.md|methods\.md|\b(?:19|20)\d\d\b|arXiv|et al\.|Bonino|Clark|Kovaleva|Guan")
#: Paths that leave the repository for data or documents: a parent folder or an absolute machine path
#: (scratch files under /tmp are not documents).
OUTSIDE_PATH = re.compile(r"(?<![.\w])\.\./|(?<![\w.])/(?:work|root|home|mnt)/")


def unsourced_citations(text: str, own_sections: bool = False) -> list[str]:
    """Lines citing a section (``§``) without naming the document it belongs to (``own_sections``:
    the text is docs/methods.md itself, whose bare ``§`` are its own sections)."""
    if own_sections:
        return []
    return [line.strip() for line in text.splitlines()
            if "§" in line and not NAMED_SOURCE.search(line.split("§", 1)[0])]


def _project_texts():
    """Every text file a user or a developer reads: code, page texts, docs, README."""
    paths = [ROOT / "app.py", ROOT / "README.md"]
    for folder in ("bertgeom", "app_pages", "docs", "tools"):
        base = ROOT / folder
        if base.is_dir():
            paths += [p for p in base.rglob("*") if p.suffix in {".py", ".md", ".txt", ".toml", ".yml", ".yaml"}]
    return sorted(p for p in paths if p.is_file() and "__pycache__" not in p.parts)


def test_scanner_sees_the_pages_and_the_library():
    names = {p.relative_to(ROOT).as_posix() for p in _project_texts()}
    assert "app_pages/attention_heads.py" in names
    assert "bertgeom/analysis/patterns.py" in names
    assert "bertgeom/ui/texts/cone_index.md" in names
    assert "docs/methods.md" in names


def test_the_checks_catch_what_they_must():
    for bad in ("see notes §2.3", "(the notes f10, §1.7)", "as in §4 of the brief"):
        assert unsourced_citations(bad), bad
    for good in ("docs/methods.md §5", "Clark et al. 2019 §3 and §6", "Bonino 2025 (arXiv:2502.12033) §5",
                 "no section"):
        assert not unsourced_citations(good), good
    for bad in ("../data/genomes.fasta", "open /work/data/x.tsv", "/root/models"):
        assert OUTSIDE_PATH.search(bad), bad
    for good in ("USA/GA-CDC-.../2021", "docs/methods.md", "bertgeom/data/reference/MN908947.3.fasta"):
        assert not OUTSIDE_PATH.search(good), good


@pytest.mark.parametrize("path", _project_texts(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_text_points_to_a_document_outside_the_repository(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    unsourced = unsourced_citations(text, own_sections=path == METHODS)
    assert not unsourced, f"{path.relative_to(ROOT)} cites sections of an unnamed document: {unsourced[:5]}"
    outside = [m.group(0) for m in OUTSIDE_PATH.finditer(text)]
    assert not outside, f"{path.relative_to(ROOT)} points outside the repository: {outside[:5]}"


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
    """Each analysis page links the methods document, in its own file or in the tab modules it draws
    (Attention Heads' tabs live in bertgeom/ui/heads/, one module each)."""
    drawn_by = {"app_pages/attention_heads.py": sorted((ROOT / "bertgeom" / "ui" / "heads").glob("*.py"))}
    for page in ("app_pages/attention_heads.py", "app_pages/subspace_directions.py", "app_pages/cone_index.py"):
        texts = ([(ROOT / page).read_text(encoding="utf-8")]
                 + [f.read_text(encoding="utf-8") for f in drawn_by.get(page, [])])
        assert any("docs/methods.md" in t for t in texts), page
    label_rules = (ROOT / "bertgeom" / "ui" / "heads" / "all_heads.py").read_text(encoding="utf-8")
    assert "docs/methods.md §4" in label_rules  # the reconstructed pattern rules say where they are defined
