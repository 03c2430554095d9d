"""Write a generated block into the README between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``
(the benchmark scripts' ``--update-readme``); a missing block is appended with ``heading``."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def replace_block(name: str, body: str, heading: str = "", readme: Path = README) -> None:
    text = readme.read_text()
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body}\n{end}"
    if start in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text += "\n" + (heading + "\n\n" if heading else "") + block + "\n"
    readme.write_text(text)
