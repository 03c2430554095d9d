"""Session state shared by all pages, and the shareable URL (page, model, layer, head, colour,
θ and the input).

Widget state is deleted by Streamlit when a widget is not drawn in a run (for example
one input kind's box while a model of another kind is picked). Values that must survive live in
plain session keys (``STORE``) and widgets copy them in and out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import streamlit as st

from bertgeom.inputs import INPUT_KINDS, InputError
from bertgeom.models import REGISTRY, custom_models_allowed
from bertgeom.tables import counted, head_label, word_for

#: Persistent session keys and their defaults.
STORE = {
    "model_id": None,  # filled with REGISTRY.default_id at first use
    "text_value": "The cat sat on the mat because it was tired.",
    "layer": 0,  # 0-based
    "head": 0,  # 0-based
}


def url_index(value: str | None) -> int | None:
    """0-based index from a 1-based URL number (``"3"`` -> 2); anything else -> None. Only ASCII
    digits count: ``"²".isdigit()`` is True but ``int("²")`` raises."""
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > 6:
        return None
    n = int(value)
    return n - 1 if n >= 1 else None


def init_state() -> None:
    """Fill defaults once per session and read a shared link's query parameters."""
    for key, default in {**{k: "" for k in input_value_keys()}, **STORE}.items():  # STORE's defaults win
        if key not in st.session_state:
            st.session_state[key] = default if key != "model_id" else REGISTRY.default_id
    if not st.session_state.get("_query_read"):
        st.session_state["_query_read"] = True
        qp = st.query_params
        model = qp.get("model")
        if model and (model in REGISTRY or custom_models_allowed()):
            st.session_state["model_id"] = model
        for name in ("layer", "head"):
            value = qp.get(name)
            index = url_index(value)
            if index is not None:
                st.session_state[name] = index
        _read_link_settings(qp)
        _drop_ignored_link_values(qp)


#: The longest typed text a share link carries (longer inputs are reported as not in the link).
LINK_TEXT_MAX = 300
#: The app's own link parameters and the longest value it reads of each (a longer one is ignored).
#: (Each input kind's ``link_param`` carries an example's number, as ``example`` does: see :func:`link_value_max`.)
LINK_VALUE_MAX = {"model": 256, "layer": 8, "head": 8, "text": LINK_TEXT_MAX, "colour": 80, "theta": 8,
                  "input": 16, "example": 8, "source": 16, "records": 16, "section": 80}


def link_value_max() -> dict[str, int]:
    """:data:`LINK_VALUE_MAX` with each registered input kind's ``link_param`` (an example's number)."""
    return {**{k.link_param: LINK_VALUE_MAX["example"] for k in INPUT_KINDS.values()}, **LINK_VALUE_MAX}


def _drop_ignored_link_values(qp) -> None:
    """Take out of the address bar every value of the app's own parameters that is longer than the
    app reads (:func:`link_value_max`): it was ignored, and a 30 kB payload must not stay in the URL a
    user copies (issue 46). The page's own values are written back by :func:`write_query_params`."""
    for key, longest in link_value_max().items():
        if key in qp and len(str(qp.get(key) or "")) > longest:
            del qp[key]


def _read_link_settings(qp) -> None:
    """The input, colour-by and θ of a shared link (see :func:`share_query`). A link that names
    an input this server cannot show, or says its input was left out, leaves a note for the
    sidebar instead of silently showing another input."""
    colour = qp.get("colour")
    if colour and len(colour) <= 80:
        st.session_state["w_feature"] = colour  # the page checks it against its options
    theta = qp.get("theta")
    try:
        value = float(theta) if theta is not None and len(theta) <= 8 else None
    except ValueError:
        value = None
    if value is not None and 0.0 <= value <= 1.0:
        st.session_state["w_theta"] = st.session_state["_theta_kept"] = round(value, 2)
        st.session_state["_theta_from_link"] = True
    missing = ("The shared link did not carry its input (it was too long or not an example); you see this server's "
               "current input instead.")
    for kind in INPUT_KINDS.values():
        if kind.link_param in qp:
            examples = kind.examples()
            index = url_index(qp.get(kind.link_param))
            if index is not None and index < len(examples):
                st.session_state[kind.session_key] = st.session_state[widget_key(kind)] = examples[index].text
            else:
                _note(f"The shared link names an example {kind.words.noun} this server does not have.")
            return
    if "text" in qp:
        text = str(qp.get("text") or "")[:LINK_TEXT_MAX]
        if text.strip():
            st.session_state["text_value"] = st.session_state["w_text"] = text
    elif qp.get("input") == "missing":
        kind = _link_kind()
        if kind is not None and not kind.link_text:
            # nothing computed from another input: the box stays empty (no example is filled in)
            st.session_state["_link_input_missing"] = True
            index = url_index(qp.get("records"))  # a count read as a 1-based number: its last index + 1
            _note(missing_input_note(kind, qp.get("source"), None if index is None else index + 1))
        else:
            _note(missing)


#: How a link's input that it could not carry came in (``source=``): pasted into the box or uploaded.
SOURCES = ("paste", "upload")


def missing_input_note(kind, source: str | None, records: int | None) -> str:
    """What a receiver reads when a link says its input stayed with its sender: how it came in
    (``source``: pasted or uploaded, as the sender's :func:`share_query` wrote it) and how many
    records it held; a link that does not say (made before links said it) is told so, not guessed."""
    n = records if records and records > 0 else None
    things = counted(n, kind.words.noun, kind.words.plural) if n else None
    it = word_for(n or 1, "it", "them")
    if source == "upload":
        what = f"an uploaded file of {things}" if n and n > 1 else f"an uploaded {kind.words.noun}"
        return (f"The shared link was made on {what}, which a link cannot carry: upload the file to see the view it "
                "shows.")
    if source == "paste":
        what = f"{things} pasted into the box" if n and n > 1 else f"a pasted {kind.words.noun}"
        return (f"The shared link was made on {what}, which a link cannot carry: paste or upload {it} to see the "
                "view it shows.")
    return (f"The shared link was made on an input of its sender's own (not one of the example {kind.words.plural}), "
            "which a link cannot carry: paste or upload it to see the view it shows.")


def _link_kind():
    """The input kind of the link's model (``None`` when the model cannot be resolved)."""
    from bertgeom.models import ModelLoadError, resolve_spec

    try:
        return INPUT_KINDS.of(resolve_spec(st.session_state.get("model_id") or REGISTRY.default_id))
    except (ModelLoadError, InputError):
        return None


def _note(text: str) -> None:
    """A note for the sidebar, shown while the session keeps the input it had when the link opened."""
    st.session_state["_link_note"] = (text, current_inputs())


def input_value_keys() -> list[str]:
    """The session keys that keep each registered input kind's current input (``text_value``, ...)."""
    return list(dict.fromkeys(kind.session_key for kind in INPUT_KINDS.values()))


def widget_key(kind) -> str:
    """The key of the input box of ``kind`` (``w_text`` for text): its session key's stem."""
    return "w_" + kind.session_key.removesuffix("_value")


def uploaded_key(kind) -> str:
    """The session key holding the fingerprint (``hash``) of the text the uploader of ``kind`` read last."""
    return f"_{widget_key(kind)}_uploaded"


def current_inputs() -> tuple:
    """Every kind's current input, to tell when the user has changed any of them."""
    return tuple(st.session_state.get(k) for k in input_value_keys())


def share_query(view: str, model_id: str, layer: int, head: int, *, input_kind: str, text: str,
                colour: str | None = None, theta: float | None = None,
                origin: tuple[str, int] | None = None) -> tuple[dict[str, str], str | None]:
    """The query of a link that reopens this view, and a note when the input cannot travel in it.

    The input goes in as an example's number (``example=3``, 1-based, under the input kind's
    ``link_param``), or as the text itself when it is short (``LINK_TEXT_MAX`` characters) and
    the kind lets text travel; otherwise ``input=missing`` tells the receiver the link does not hold
    it, with ``source`` (pasted or uploaded) and ``records`` (how many) when ``origin`` says them
    (:func:`input_origin`), so both notes say what the input was. Layer and head are 1-based like the
    papers' "L11 H1"."""

    q = {"view": view, "model": str(model_id), "layer": str(int(layer) + 1), "head": str(int(head) + 1)}
    if colour:
        q["colour"] = str(colour)
    if theta is not None:
        q["theta"] = f"{float(theta):g}"
    note = None
    clean = (text or "").strip()
    kind = INPUT_KINDS.of(input_kind)
    texts = [e.text.strip() for e in kind.examples()]
    if not clean:
        pass  # an empty box: nothing to carry, nothing to warn about
    elif clean in texts:
        q[kind.link_param] = str(texts.index(clean) + 1)
    elif kind.link_text and len(clean) <= LINK_TEXT_MAX:
        q["text"] = clean
    else:
        q["input"] = "missing"
        if kind.link_text:
            note = f"The text is longer than {LINK_TEXT_MAX} characters, so the link does not hold it: send it along."
        else:
            source, n = origin if origin is not None else ("paste", 1)
            if source in SOURCES:
                q["source"], q["records"] = source, str(max(int(n), 1))
            note = _missing_here_note(kind, source, max(int(n), 1))
    return q, note


def _missing_here_note(kind, source: str, n: int) -> str:
    """The sender's note under a link that does not hold its input: what it leaves out, and what to send."""
    it, are = word_for(n, "it", "them"), word_for(n, "is", "are")
    if source == "upload":
        what = (f"The uploaded file's {counted(n, kind.words.noun, kind.words.plural)}" if n > 1
                else f"The uploaded {kind.words.noun}")
        send = "the file"
    else:
        what = f"These {counted(n, kind.words.noun, kind.words.plural)}" if n > 1 else f"This {kind.words.noun}"
        send = kind.words.link_send or it
    among = "one of the examples" if n == 1 else "among the examples"
    return f"{what} {are} not {among}, so the link does not hold {it}: send {send} along."


def input_origin(kind, text: str) -> tuple[str, int]:
    """``(source, records)`` of the current input of ``kind``: ``"upload"`` when it is the file the
    sidebar's uploader read last (:mod:`bertgeom.ui.sequence_input` keeps its fingerprint), else
    ``"paste"``; and how many records the kind reads in it (parsed once per input, remembered for the
    session by the text's hash, so a rerun costs nothing)."""
    fingerprint = hash(text)
    memo = st.session_state.get("_input_origin")
    if memo and memo[0] == (kind.name, fingerprint):
        return memo[1]
    uploaded = st.session_state.get(uploaded_key(kind))
    source = "upload" if uploaded == fingerprint else "paste"
    from bertgeom.inputs import normalise_text
    from bertgeom.ui.cache import cached_records

    try:  # the page's own cached read of this paste: no second parse
        n = len(cached_records(kind.name, normalise_text(text)))
    except (InputError, ValueError):
        n = 1  # unreadable as records: one input, as the page reads it
    st.session_state["_input_origin"] = ((kind.name, fingerprint), (source, n))
    return source, n


def share_url(query: dict[str, str], page_url: str | None = None) -> str:
    """A full URL (scheme, host and path prefix of ``page_url``, the browser's address) for ``query``."""
    base = ""
    if page_url:
        parts = urlsplit(page_url)
        if parts.scheme and parts.netloc:
            # the app's root: drop the page's own path segment (multipage URLs are /<page>)
            root = parts.path.rsplit("/", 1)[0] if parts.path.count("/") >= 1 else ""
            base = f"{parts.scheme}://{parts.netloc}{root}"
    return f"{base}/?{urlencode(query)}"


def page_available(page: str) -> bool:
    """True when a registered model, or the session's current one, reads an input kind that enables
    ``page`` (its :attr:`~bertgeom.inputs.InputKind.pages`, e.g. ``"classifier"``)."""
    from bertgeom.models import ModelLoadError, resolve_spec

    def enables(spec) -> bool:
        kind = INPUT_KINDS.get(spec.input_kind)
        return kind is not None and page in kind.pages

    if any(enables(spec) for spec in REGISTRY.values()):
        return True
    try:
        return enables(resolve_spec(st.session_state.get("model_id") or REGISTRY.default_id))
    except ModelLoadError:
        return False


def clamp_selection(num_layers: int, num_heads: int) -> tuple[int, int]:
    """Keep the selected (layer, head) inside the current model's shape."""
    layer = min(max(int(st.session_state.get("layer", 0)), 0), num_layers - 1)
    head = min(max(int(st.session_state.get("head", 0)), 0), num_heads - 1)
    st.session_state["layer"], st.session_state["head"] = layer, head
    return layer, head


def select_head(layer: int, head: int) -> None:
    """Make (layer, head) the selected head everywhere (widgets follow on the next run)."""
    st.session_state["layer"], st.session_state["head"] = int(layer), int(head)
    st.session_state["w_layer"], st.session_state["w_head"] = int(layer) + 1, int(head) + 1


def follow_view_link(pages: dict, current) -> None:
    """Open the page named by ``?view=`` once, on the first run of a session.

    Shared links point at the root URL with ``?view=<page>``, which reopens the page behind any
    proxy path. Each page's own path (``/classifier``) opens too: its "Page not found" dialog for a
    server's first visitor came from a ``pages/`` folder beside app.py (streamlit/streamlit#8860;
    the pages now live in ``app_pages/``, see app.py).
    """
    if st.session_state.get("_view_followed"):
        return
    st.session_state["_view_followed"] = True
    view = st.query_params.get("view")
    if not view or view == current.url_path:
        return
    for page in (p for group in pages.values() for p in group):
        if page.url_path == view:  # keep the link's other parameters: the tab and settings bound to the URL
            st.switch_page(page, query_params={k: v for k, v in st.query_params.to_dict().items() if k != "view"})


def share_link(url_path: str, input_kind: str = "text") -> tuple[str, str | None]:
    """Full link that reopens the current view (page, model, layer, head, colour-by, θ, input) and
    the note of :func:`share_query`."""
    text = st.session_state.get(INPUT_KINDS.of(input_kind).session_key) or ""
    query, note = share_query(url_path, st.session_state["model_id"], st.session_state["layer"],
                              st.session_state["head"], input_kind=input_kind, text=text,
                              colour=st.session_state.get("w_feature"), theta=st.session_state.get("w_theta"),
                              origin=_origin_if_needed(INPUT_KINDS.of(input_kind), text))
    query.update(bound_settings(query))
    try:
        page_url = st.context.url
    except Exception:  # noqa: BLE001 - no browser context (bare runs): a relative link
        page_url = None
    return share_url(query, page_url), note


def bound_settings(query: dict[str, str]) -> dict[str, str]:
    """The address bar's parameters that Streamlit's URL-bound widgets wrote (``bind="query-params"``:
    the open tab and that tab's settings), other than those ``query`` already has."""
    return {k: v for k, v in st.query_params.to_dict().items() if k not in query and k not in input_keys()}


def input_keys() -> tuple[str, ...]:
    """Query keys that say which input a link holds (one at a time: ``text``, or an example's number
    under each input kind's ``link_param``), and how an input it left out came in."""
    return tuple(dict.fromkeys(("example", "text", *(k.link_param for k in INPUT_KINDS.values()),
                                "input", "source", "records")))


def _origin_if_needed(kind, text: str) -> tuple[str, int] | None:
    """:func:`input_origin` where a link would leave the input out (a kind whose text never travels,
    an input that is no example), else ``None`` (no parse for an example or a short text)."""
    clean = (text or "").strip()
    if kind.link_text or not clean or clean in (e.text.strip() for e in kind.examples()):
        return None
    return input_origin(kind, text)


def write_query_params(current=None) -> None:
    """Mirror page, model, layer, head, colour-by, θ and the input (or ``input=missing``) into the
    address bar, so the URL a teacher copies reopens the same view (as the share link does)."""
    wanted = {
        "model": str(st.session_state["model_id"]),
        "layer": str(int(st.session_state["layer"]) + 1),
        "head": str(int(st.session_state["head"]) + 1),
    }
    if current is not None:
        wanted["view"] = current.url_path
        try:
            from bertgeom.models import resolve_spec

            kind = resolve_spec(st.session_state["model_id"]).input_kind
        except Exception:  # noqa: BLE001 - an unknown model: the URL keeps what it has
            kind = None
        if kind is not None:
            text = st.session_state.get(INPUT_KINDS.of(kind).session_key) or ""
            query, _ = share_query(current.url_path, st.session_state["model_id"], 0, 0, input_kind=kind, text=text,
                                   colour=st.session_state.get("w_feature"), theta=st.session_state.get("w_theta"),
                                   origin=_origin_if_needed(INPUT_KINDS.of(kind), text))
            for k in input_keys():
                if k not in query and k in st.query_params:
                    del st.query_params[k]
            wanted.update({k: v for k, v in query.items() if k in input_keys() + ("colour", "theta")})
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.update(wanted)


@dataclass
class PageView:
    """What a page's tabs and sections read: the :class:`~bertgeom.subject.Subject` the page resolved
    once (the model, the current input's record and its trace) and the selected head (0-based). Pages
    extend it with their own settings. ``loaded``, ``trace``, ``model_id`` and ``text`` are the
    subject's; a tab hands ``subject`` itself to a cached computation, never the strings."""

    subject: Any  # bertgeom.subject.Subject
    layer: int
    head: int

    @property
    def loaded(self):
        return self.subject.loaded

    @property
    def trace(self):
        return self.subject.trace

    @property
    def model_id(self) -> str:
        return self.subject.model_id

    @property
    def text(self) -> str:
        return self.subject.text

    @property
    def L(self) -> int:
        return self.trace.num_layers

    @property
    def H(self) -> int:
        return self.trace.num_heads

    @property
    def kind(self):
        """The :class:`~bertgeom.inputs.InputKind` of the model's input (what the pages may offer)."""
        return INPUT_KINDS.of(self.loaded)

    @property
    def domains(self) -> tuple[str, ...] | None:
        """The token domain of each token when the input kind has domains, else None."""
        return self.trace.encoded.domains if self.kind.has_domains else None

    @property
    def HL(self) -> str:
        """The selected head's label (``L8 H10``)."""
        return head_label(self.layer, self.head)
