"""Links from the UI to docs/methods.md: every "docs/methods.md §x" the pages print becomes a
link to the app's own Methods page (``?view=methods&section=x``), which renders the file from
the repository, so the link works offline and on any server.

:func:`linked` rewrites a text; :func:`methods_sections` splits the document by its headings so
the Methods page can open on the section a link names.
"""

from __future__ import annotations

import re
from pathlib import Path

METHODS_PATH = Path(__file__).resolve().parents[2] / "docs" / "methods.md"

#: "docs/methods.md", optionally followed by a section: "§5", "§3.4", "§3–§4", "§5, after …".
_DOC = "docs/methods.md"
_REF = re.compile(r"(?<!\[)" + re.escape(_DOC)
                  + r"(?:,? (\u00a7\s?(\d+(?:\.\d+)?))(?:\s?[\u2013-]\s?\u00a7?(\d+(?:\.\d+)?))?)?")


def methods_url(section: str | None = None) -> str:
    """The app-relative address of the Methods page, opened on ``section`` (e.g. ``"3.4"``)."""
    return "/?view=methods" + (f"&section={section}" if section else "")


def linked(text: str) -> str:
    """``text`` with every "docs/methods.md §x" turned into a markdown link to the Methods page."""

    def repl(m: re.Match) -> str:
        label = m.group(0)
        return f"[{label}]({methods_url(m.group(2))})"

    return _REF.sub(repl, str(text))


_HEADING = re.compile(r"^(#{2,3}) (.+)$", re.M)


def methods_sections(markdown: str) -> list[tuple[str, str, str]]:
    """``(number, title, body)`` of each ``##``/``###`` section, in order; ``number`` is the heading's
    leading "5" / "3.4" (without the trailing dot), or "" for unnumbered sections."""
    heads = list(_HEADING.finditer(markdown))
    out = []
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(markdown)
        title = h.group(2).strip()
        num = re.match(r"(\d+(?:\.\d+)?)\.?\s", title)
        out.append((num.group(1) if num else "", title, markdown[h.start():end]))
    return out


def find_section(markdown: str, section: str) -> tuple[str, str] | None:
    """``(title, text)`` of section ``section`` (a number like "9" or "3.4": its subsections are included)."""
    sections = methods_sections(markdown)
    for k, (num, title, _body) in enumerate(sections):
        if num == section:
            level = 2 if "." not in num else 3
            parts = [sections[k][2]]
            for num2, _t, body2 in sections[k + 1:]:
                if level == 2 and num2.startswith(f"{section}."):
                    parts.append(body2)
                else:
                    break
            return title, "".join(parts)
    return None
