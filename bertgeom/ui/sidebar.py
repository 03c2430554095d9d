"""The shared sidebar: model picker and input, kept across pages in session state."""

from __future__ import annotations

import streamlit as st

from bertgeom.models import REGISTRY, ModelLoadError, custom_models_allowed, resolve_spec
from bertgeom.inputs import INPUT_KINDS, TEXT, InputError, InputKind, records_note
from bertgeom.subject import Subject
from bertgeom.trace import Trace
from bertgeom.ui.cache import cached_model, get_record_trace, paste_records
from bertgeom.ui.state import clamp_selection, current_inputs, share_link, write_query_params
from bertgeom.ui.names import input_notes, note_line
from bertgeom.safety import plain


def _on_model_change() -> None:
    st.session_state["model_id"] = st.session_state["w_model"]


def _on_custom_model() -> None:
    value = (st.session_state.get("w_custom_model") or "").strip()
    if value:
        st.session_state["model_id"] = value


def _on_text_change() -> None:
    st.session_state["text_value"] = st.session_state["w_text"]


def _on_example_sentence() -> None:
    choice = st.session_state.get("w_example")
    if choice:
        st.session_state["text_value"] = choice
        st.session_state["w_text"] = choice


def model_picker() -> str:
    """Selectbox over the registry (plus a free id/path box when the server allows it)."""
    options = list(REGISTRY)
    current = st.session_state["model_id"]
    if current not in options:
        options.append(current)
    st.session_state["w_model"] = current
    st.selectbox(
        "Model",
        options,
        key="w_model",
        format_func=lambda mid: REGISTRY[mid].display_name if mid in REGISTRY else f"{mid} (custom)",
        on_change=_on_model_change,
        help="Bundled models load offline. Layer and head selections are kept when possible.",
    )
    if custom_models_allowed():
        # the box names the custom model in use, and nothing once a bundled one is picked (an old path
        # left there would swap the model back on the next Enter)
        st.session_state["w_custom_model"] = "" if current in REGISTRY else current
        st.text_input(
            "…or a Hugging Face id / local directory",
            key="w_custom_model",
            on_change=_on_custom_model,
            placeholder="bert-base-uncased or /path/to/model",
            help="Needs a network for hub ids; only safetensors weights are read.",
        )
    return st.session_state["model_id"]


def text_input_box(kind: InputKind = TEXT) -> str:
    """Text area for English input with one-click example sentences."""
    if "w_text" not in st.session_state:
        st.session_state["w_text"] = st.session_state["text_value"]
    st.text_area(kind.words.box_label, key="w_text", on_change=_on_text_change, height=100,
                 help="Press Ctrl+Enter (or click outside) to analyse.")
    examples = [e.text for e in kind.examples()]
    # Examples shows the example the page reads, or none when the text is the user's own (a typed
    # paragraph, an edited example); a link's example=17 opens with that example shown
    current = (st.session_state.get("text_value") or "").strip()
    st.session_state["w_example"] = next((e for e in examples if e.strip() == current), "")
    st.selectbox("Examples", [""] + examples, key="w_example", on_change=_on_example_sentence,
                 format_func=lambda s: s or f"— pick an example {kind.words.noun} —")
    return st.session_state["text_value"]


def input_box(input_kind: str) -> str:
    """The input widget that fits the model's input kind: a text box, or a box for records
    (paste, upload, examples) when the kind reads uploads."""
    kind = INPUT_KINDS.get(input_kind, TEXT)
    if kind.session_key != TEXT.session_key:
        from bertgeom.ui.sequence_input import sequence_input_box

        return sequence_input_box(kind)
    return text_input_box(kind)


#: The link's text keeps clear of the copy icon drawn over the code block's top right corner (it
#: covered the port's digits).
SHARE_CODE_CSS = """<style>
.st-key-share_link pre { padding-right: 2.6rem !important; }
</style>"""


def render_sidebar(url_path: str = ""):
    """Draw the shared sidebar (called by ``app.py`` on every page). Returns a function that draws
    the share box into its place in the sidebar; ``app.py`` calls it after the page has run."""
    with st.sidebar:
        model_id = model_picker()
        try:
            kind = resolve_spec(model_id).input_kind
        except ModelLoadError:
            kind = "text"
        input_box(kind)
        note = st.session_state.get("_link_note")
        if note and note[1] == current_inputs():
            st.warning(note[0], icon=":material/link_off:")  # until the input changes
        slot = st.container() if url_path else None

    def share_box() -> None:
        """The *Share this view* box, drawn into its sidebar slot after the page ran: the page's
        tabs and sections write their values while it runs, so a link built before it would name the
        previous tab (issue #36)."""
        if slot is None:
            return
        with slot, st.expander("Share this view"):
            link, missing = share_link(url_path, kind)
            st.caption("Page, model, layer, head, colour-by, θ and the input; the copy icon copies it.")
            st.html(SHARE_CODE_CSS)
            with st.container(key="share_link"):
                st.code(link, language=None, wrap_lines=True)
            if missing:
                st.caption(f"⚠️ {missing}")

    return share_box


def current_input_text(loaded) -> str:
    """The sidebar's current input for ``loaded``'s input kind, stripped."""
    return (st.session_state.get(INPUT_KINDS.of(loaded).session_key) or "").strip()


def current_subject() -> Subject:
    """The current model and input, resolved once for the page (the paste read once, its first
    record traced), or explain what is wrong and stop the page."""
    model_id = st.session_state["model_id"]
    if model_id not in REGISTRY and not custom_models_allowed():
        st.error(f"Model '{plain(model_id)}' is not one of the bundled models ({', '.join(REGISTRY)}).")
        st.stop()
    try:
        loaded = cached_model(model_id)
    except ModelLoadError as exc:
        st.error(plain(exc))
        # the address bar names the model this error is about (after st.stop() no element is written,
        # so app.py's own write at the end of the run would not reach the browser)
        write_query_params()
        st.stop()
    text = current_input_text(loaded)
    if not (text or "").strip():
        st.info("Type or pick an input in the sidebar to start.")
        st.stop()
    try:
        records = paste_records(loaded, text)  # the paste read once; every page views its first record
        trace = get_record_trace(loaded, records[0])
    except InputError as exc:
        st.error(plain(exc))
        st.stop()
    clamp_selection(trace.num_layers, trace.num_heads)
    for note in input_notes(trace.encoded.notes, [records_note(records)]):
        st.caption(note_line(note))
    return Subject(loaded, records[0], trace, model_id, text)


def current_model_and_trace() -> tuple[object, Trace]:
    """:func:`current_subject`'s model and trace."""
    subject = current_subject()
    return subject.loaded, subject.trace
