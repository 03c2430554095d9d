"""A pipe inside a code span of a Markdown table row splits the cell (GitHub and the Methods page
both render GFM tables), so a formula such as `|j − i|` in a table is written `\\|j − i\\|`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def unescaped_pipes_in_table_code(text: str) -> list[tuple[int, str]]:
    """``(line number, code span)`` of each code span in a table row that holds a bare ``|``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("|"):
            found += [(n, m.group()) for m in re.finditer(r"`[^`]*`", line) if re.search(r"(?<!\\)\|", m.group())]
    return found


def test_the_check_sees_a_bare_pipe_and_accepts_an_escaped_one():
    assert unescaped_pipes_in_table_code("| distance | `mean_i |j − i|` |") == [(1, "`mean_i |j − i|`")]
    assert unescaped_pipes_in_table_code("| distance | `mean_i \\|j − i\\|` |") == []
    assert unescaped_pipes_in_table_code("outside a table `|x|` is fine") == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_no_table_cell_is_split_by_a_pipe_in_its_formula(path):
    assert not unescaped_pipes_in_table_code(path.read_text(encoding="utf-8"))
