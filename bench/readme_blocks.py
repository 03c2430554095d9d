"""Write a generated block between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in the document that
holds it (the benchmark scripts' ``--update-readme``): README.md or one of docs/*.md, wherever the block
lives now (the benchmark tables are in docs/benchmarks.md, the robustness table in docs/case_study.md).
A block found nowhere is appended to ``default`` (docs/benchmarks.md) under ``heading``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def document_with_block(name: str, root: Path = ROOT) -> Path | None:
    """The README or docs/*.md file that holds block ``name``, if any."""
    start = f"<!-- {name}:start -->"
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        if path.is_file() and start in path.read_text(encoding="utf-8"):
            return path
    return None


def replace_block(name: str, body: str, heading: str = "", readme: Path | None = None,
                  default: Path = BENCHMARKS) -> None:
    target = readme or document_with_block(name) or default
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body}\n{end}"
    if start in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text += "\n" + (heading + "\n\n" if heading else "") + block + "\n"
    target.write_text(text, encoding="utf-8")
