"""Sidebar input for input kinds that read records (genomes, say): paste, upload or pick an example.

Everything about the kind (its examples, its upload reader, its size limit, its box label) comes
from its :class:`~bertgeom.inputs.InputKind`; the widget keys follow the kind's session key
(``genome_value`` -> ``w_genome``, ``w_genome_example``, ``w_genome_upload``).
"""

from __future__ import annotations

import streamlit as st

from bertgeom.safety import MAX_INPUT_BYTES, plain
from bertgeom.tables import counted

from bertgeom.inputs import InputKind
from bertgeom.ui.state import uploaded_key, widget_key

#: Largest upload file (compressed or not; config.toml's server.maxUploadSize says the same 20 MB).
MAX_UPLOAD_BYTES = MAX_INPUT_BYTES  # the one input limit of every uploader (bertgeom.safety)
#: Uploads longer than this stay on the server and are not copied into the text box (a browser
#: text area holding megabytes of sequence slows every rerun).
BOX_SHOW_LIMIT = 200_000


def counter_hidden_css(key: str) -> str:
    """CSS that hides the character counter of the text box with widget ``key`` (the app's own key)."""
    if not key.replace("_", "").isalnum():
        raise ValueError(f"not a widget key: {key!r}")
    return f"<style>.st-key-{key} [data-testid='InputInstructions'] {{ display: none; }}</style>"


def _stem(kind: InputKind) -> str:
    return kind.session_key.removesuffix("_value")


def _set_value(kind: InputKind, text: str) -> None:
    st.session_state[kind.session_key] = text
    st.session_state[widget_key(kind)] = text


def _on_change(kind: InputKind) -> None:
    st.session_state[kind.session_key] = st.session_state[widget_key(kind)]
    st.session_state.pop(f"{_stem(kind)}_upload_note", None)


def _on_example(kind: InputKind) -> None:
    idx = st.session_state.get(f"{widget_key(kind)}_example")
    if idx is not None and idx >= 0:
        _set_value(kind, kind.examples()[idx].text)


def read_upload(kind: InputKind, name: str, data: bytes) -> tuple[str, str]:
    """``(text, problem)`` of an uploaded file, read by the kind's upload reader. Never raises."""
    if len(data) > MAX_UPLOAD_BYTES:
        return "", f"'{name}' is larger than {MAX_UPLOAD_BYTES // 10**6} MB ({MAX_UPLOAD_BYTES:,} bytes)."
    return kind.upload_reader(name, data)


def _on_upload(kind: InputKind) -> None:
    stem = _stem(kind)
    up = st.session_state.get(f"{widget_key(kind)}_upload")
    if up is None:
        return
    st.session_state.pop(f"{stem}_upload_note", None)
    text, problem = read_upload(kind, up.name, up.getvalue())
    if problem:
        st.session_state[f"{stem}_upload_error"] = problem
    else:
        st.session_state.pop(f"{stem}_upload_error", None)
    if not text:
        return
    st.session_state[uploaded_key(kind)] = hash(text)  # a share link says it came from a file (bertgeom.ui.state)
    if len(text) <= BOX_SHOW_LIMIT:
        _set_value(kind, text)
        return
    # large: processed on the server, never pushed into the browser's text box
    st.session_state[kind.session_key] = text
    st.session_state[widget_key(kind)] = ""
    records = counted(text.count(">"), "record")
    st.session_state[f"{stem}_upload_note"] = (f"Using the upload '{plain(up.name)}': {records}, "
                                               f"{len(text) / 1e6:.1f} M characters, kept on the server (too large "
                                               "for the box). Type or pick an example to replace it.")


def sequence_input_box(kind: InputKind) -> str:
    """Text area + upload + example picker for ``kind``; returns the current input text."""
    stem, key = _stem(kind), widget_key(kind)
    examples = kind.examples()
    started = f"_{stem}_started"
    if not st.session_state.get(started):  # once per session: a box emptied later stays empty
        st.session_state[started] = True
        if not st.session_state.get(kind.session_key) and examples and not st.session_state.get("_link_input_missing"):
            st.session_state[kind.session_key] = examples[-1].text  # the last example: a rich first view
    st.session_state.setdefault(kind.session_key, "")
    if key not in st.session_state:
        st.session_state[key] = st.session_state[kind.session_key]
    # the picker shows the example in the box, or none for the user's own input (a link's genome=8 too)
    current = (st.session_state.get(kind.session_key) or "").strip()
    st.session_state[f"{key}_example"] = next((i for i, e in enumerate(examples) if e.text.strip() == current), -1)
    st.selectbox(kind.words.examples_label or f"Example {kind.words.plural}", [-1] + list(range(len(examples))),
                 key=f"{key}_example",
                 format_func=lambda i: f"— pick an example {kind.words.noun} —" if i < 0 else examples[i].title,
                 on_change=_on_example, args=(kind,),
                 help=kind.words.examples_help or None)
    # the box's character counter ("30001/20971520") is hidden: it read as an error, and the size
    # limit is said in one sentence when it is reached (the kind's reader, and the box's help)
    st.html(counter_hidden_css(key))
    st.text_area(kind.words.box_label, key=key, on_change=_on_change, args=(kind,), height=120,
                 max_chars=kind.max_input_chars, help=kind.words.box_help or None)
    if kind.upload_reader is not None:
        st.file_uploader(kind.words.upload_label or "…or upload a file", type=list(kind.upload_types),
                         key=f"{key}_upload", on_change=_on_upload, args=(kind,))
    if st.session_state.get(f"{stem}_upload_note"):
        st.caption(st.session_state[f"{stem}_upload_note"])
    if st.session_state.get(f"{stem}_upload_error"):
        st.error(plain(st.session_state[f"{stem}_upload_error"]))
    return st.session_state[kind.session_key]
