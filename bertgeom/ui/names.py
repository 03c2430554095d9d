"""The names a user reads on screen, one per thing (issue #14): a class's display name, a per-head
feature's plain-word title (its variable name and formula go to the hover only), and the notes on
how a pasted input was read, the same on every page that accepts the same paste."""

from __future__ import annotations

import re

from bertgeom.analysis.heads import feature_doc
from bertgeom.inputs import INPUT_KINDS

#: A code identifier with an underscore (``attn_rank_norm``, ``k90_frac``, ``delta_A``): never an
#: axis title, legend entry or option on screen. One-letter subscripts (``n_v``, ``r_ε``) are maths.
VARIABLE_NAME = re.compile(r"\b[a-z][a-z0-9]+_[A-Za-z0-9_]+\b")


_GREEK = {"alpha": "α", "beta": "β", "delta": "δ", "theta": "θ", "lambda": "λ", "sigma": "σ", "kappa": "κ"}
_GREEK_SUBSCRIPT = re.compile(r"\b(" + "|".join(_GREEK) + r")_(?=\w)")


def symbols(label: str) -> str:
    """A documentation label as shown: a spelled-out Greek symbol with a subscript (``alpha_h``) is
    written as the symbol (``α_h``), so it never reads as a variable name."""
    return _GREEK_SUBSCRIPT.sub(lambda m: _GREEK[m.group(1)] + "_", label)


def class_name(c: str) -> str:
    """The one display name of a class (``gh`` -> ``GH / pre-VOC``); other strings unchanged."""
    return INPUT_KINDS.class_name(c)


def class_names(classes) -> list[str]:
    return [class_name(c) for c in classes]


def feature_label(name: str) -> str:
    """Plain-word title of a per-head feature (``k90_frac`` -> ``k90 median / real tokens``)."""
    try:
        return feature_doc(name).label
    except (KeyError, ValueError):
        return name


def feature_hover(name: str) -> str:
    """The hover line of a per-head feature: its variable name and formula, then its source."""
    try:
        doc = feature_doc(name)
    except (KeyError, ValueError):
        return name
    return f"{name} = {doc.formula}<br>{doc.source}"


#: Plain titles of a links table's columns (:func:`bertgeom.tables.arcs_frame`; the CSV keeps the names).
ARC_COLUMNS = {"query_pos": "query position", "key_pos": "key position", "query_domain": "query's domain",
               "key_domain": "key's domain"}


def arc_table(df):
    """A links table with plain column titles, for the screen."""
    return df.rename(columns=ARC_COLUMNS)


#: Plain titles of the per-head table's label columns (the labels' own column names stay in the CSV).
_LABEL_COLUMNS = {"layer": "layer", "head": "head", "kovaleva": "Kovaleva class",
                  "kovaleva_conf": "Kovaleva confidence",
                  "gate": "Bonino gate", "gate_conf": "gate confidence", "clark": "Clark behaviour",
                  "clark_conf": "Clark confidence"}


def column_title(name: str) -> str:
    """A table column's title on screen: a feature's plain-word label, a label column's title, or the
    name with spaces for underscores (never a variable name)."""
    if name in _LABEL_COLUMNS:
        return _LABEL_COLUMNS[name]
    label = feature_label(name)
    return label if label != name else name.replace("_", " ")


def column_config(columns) -> dict:
    """``st.dataframe(column_config=...)`` giving each column its plain title and, in the header's
    tooltip, its CSV name (and a feature's formula): the screen reads words, the CSV keeps names."""
    import streamlit as st

    out = {}
    for c in columns:
        about = feature_hover(c).replace("<br>", " · ") if feature_label(c) != c else c  # "name = formula · source"
        out[c] = st.column_config.Column(column_title(c), help=f"CSV column: {about}")
    return out


def input_notes(trace_notes, record_notes=()) -> list[str]:
    """The notes shown above a page's analysis of a pasted input, in one order and one wording on
    every page: how the text was read (``RNA input: U read as T``, digits removed, …), then what the
    pipeline did (alignment, [UNK] k-mers). ``record_notes`` are the reading notes of the record a
    page analyses when it feeds the model a cleaned copy (the Variant Classifier's one-record
    FASTA, which no longer holds the U); a note already in ``trace_notes`` is not repeated."""
    out: list[str] = []
    for note in (*record_notes, *trace_notes):
        if note and note not in out:
            out.append(str(note))
    return out


def note_line(note: str) -> str:
    """A note as its caption text (markdown-escaped: notes can quote user input)."""
    from bertgeom.safety import plain

    return f"ℹ️ {plain(note)}"


def no_content_sentence(text: str) -> str:
    """Why an input has no content token (only [CLS] and [SEP]): the tokenizer dropped every
    character of it, e.g. a zero-width space, a direction mark or NUL; names the first few."""
    import unicodedata

    shown = []
    for ch in dict.fromkeys(text):
        if len(shown) == 3:
            break
        shown.append(f"U+{ord(ch):04X} {unicodedata.name(ch, 'control character').lower()}")
    what = f" (it holds {', '.join(shown)})" if shown else ""
    return ("This input has no content token: the tokenizer keeps nothing of it" + what
            + ", so no head can be analysed. Type or pick a sentence in the sidebar.")
