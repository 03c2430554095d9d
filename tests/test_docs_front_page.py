"""The README is a front page (what it is, a picture, the two commands, where to read on) and every
link between the README and docs/ leads somewhere; the benchmark scripts find their tables in docs/."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_fits_on_a_screen_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 10_000
    commands = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    assert commands[:2] == ["python -m pip install -r requirements.txt -e . && python -m bertgeom app",
                            "python -m pip install -r requirements-dev.txt -e . && python -m pytest -q"]
    assert ".ci/run" not in commands[1] and "python -m pytest -q" in (ROOT / ".ci" / "run").read_text()


def test_every_relative_link_and_picture_resolves():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (doc.parent / target.split("#")[0]).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_readme_points_to_every_document_in_docs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f"(docs/{p.name})" not in text]
    assert missing == []


def test_generated_blocks_are_found_where_they_live(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import readme_blocks
    finally:
        sys.path.remove(str(ROOT / "bench"))
    for name in ("bench", "latency", "robustness"):
        assert readme_blocks.document_with_block(name) is not None, name
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("front\n")
    (tmp_path / "docs" / "b.md").write_text("x\n<!-- t:start -->\nold\n<!-- t:end -->\ny\n")
    target = readme_blocks.document_with_block("t", root=tmp_path)
    readme_blocks.replace_block("t", "new", readme=target)
    assert (tmp_path / "docs" / "b.md").read_text() == "x\n<!-- t:start -->\nnew\n<!-- t:end -->\ny\n"
