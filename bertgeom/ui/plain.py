"""User-supplied strings shown on screen as text, never as markup.

Streamlit renders markdown (links, images, ``:red[...]`` colour directives, ``$...$`` LaTeX) in
headers, captions and alerts. A FASTA header such as ``![p](http://host/p.png)`` would make the
browser fetch that URL. :func:`plain` backslash-escapes every ASCII punctuation character
(CommonMark allows escaping any of them, and the escape is read before links, images, directives
or math are recognised) and folds line breaks, so the string shows exactly as typed.
"""

from __future__ import annotations

import string

_ESCAPES = {ord(c): "\\" + c for c in string.punctuation}
_ESCAPES.update({ord("\n"): " ", ord("\r"): " ", ord("\t"): " "})


def plain(text: object) -> str:
    """``text`` as markdown source that renders to exactly ``text`` (on one line)."""
    return str(text).translate(_ESCAPES)
