"""Session state shared by all pages, and the shareable URL (model, layer, head).

Widget state is deleted by Streamlit when a widget is not drawn in a run (for example
the genome box while an English model is picked). Values that must survive live in
plain session keys (``STORE``) and widgets copy them in and out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from bertgeom.models import DEFAULT_MODEL_ID, REGISTRY, custom_models_allowed
from bertgeom.tables import head_label

#: Persistent session keys and their defaults.
STORE = {
    "model_id": None,  # filled with DEFAULT_MODEL_ID at first use
    "text_value": "The cat sat on the mat because it was tired.",
    "genome_value": "",
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
    for key, default in STORE.items():
        if key not in st.session_state:
            st.session_state[key] = default if key != "model_id" else DEFAULT_MODEL_ID
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


def spike_model_available() -> bool:
    """True when a genome (spike) model is registered or is the session's current model."""
    from bertgeom.models import ModelLoadError, resolve_spec

    if any(spec.input_kind == "spike" for spec in REGISTRY.values()):
        return True
    try:
        return resolve_spec(st.session_state.get("model_id") or DEFAULT_MODEL_ID).input_kind == "spike"
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

    Shared links point at the root URL with ``?view=<page>`` because Streamlit shows a
    spurious "Page not found" dialog when a browser's first request is a page path
    (streamlit/streamlit#8860); the page path itself still works.
    """
    if st.session_state.get("_view_followed"):
        return
    st.session_state["_view_followed"] = True
    view = st.query_params.get("view")
    if not view or view == current.url_path:
        return
    for page in (p for group in pages.values() for p in group):
        if page.url_path == view:
            st.switch_page(page)


def share_link(url_path: str) -> str:
    """Relative link that reopens the current view (page, model, layer, head)."""
    return (
        f"/?view={url_path}&model={st.session_state['model_id']}"
        f"&layer={int(st.session_state['layer']) + 1}&head={int(st.session_state['head']) + 1}"
    )


def write_query_params(current=None) -> None:
    """Mirror page, model, layer and head into the URL so the view can be shared as a link."""
    wanted = {
        "model": str(st.session_state["model_id"]),
        "layer": str(int(st.session_state["layer"]) + 1),
        "head": str(int(st.session_state["head"]) + 1),
    }
    if current is not None:
        wanted["view"] = current.url_path
    if any(st.query_params.get(k) != v for k, v in wanted.items()):
        st.query_params.update(wanted)


@dataclass
class PageView:
    """What a page's tabs and sections read: the model, the current input with its trace, and the
    selected head (0-based). Pages extend it with their own settings."""

    loaded: Any
    trace: Any
    model_id: str
    text: str
    layer: int
    head: int

    @property
    def L(self) -> int:
        return self.trace.num_layers

    @property
    def H(self) -> int:
        return self.trace.num_heads

    @property
    def is_spike(self) -> bool:
        return self.loaded.spec.input_kind == "spike"

    @property
    def domains(self) -> list[str] | None:
        """The spike domain of each token (genome inputs), else None."""
        return self.trace.encoded.extra.get("domains") if self.is_spike else None

    @property
    def HL(self) -> str:
        """The selected head's label (``L8 H10``)."""
        return head_label(self.layer, self.head)
