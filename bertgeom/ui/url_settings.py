"""A widget's value mirrored in the address bar: read from the URL once (when a link opens a new
session) and written back after every run, so a copied URL or a share link reopens the same tab or
section (``?heads_tab=Attention+flow``).

Streamlit's own ``bind="query-params"`` makes the URL win over the session on every run, which
fights code that sets a widget's value (a tour step, a test); this mirror lets the session win.
"""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st


def value_from_url(key: str, valid: Iterable[str]) -> None:
    """Before the widget ``key`` is drawn: take its value from the URL when the session has none
    yet and the URL's value is one of ``valid`` (anything else is ignored)."""
    value = st.query_params.get(key)
    if key not in st.session_state and value is not None and value in set(valid):
        st.session_state[key] = value


def value_to_url(key: str) -> None:
    """After the widget is drawn: write its current value into the URL (when it has one)."""
    value = st.session_state.get(key)
    if value is not None and st.query_params.get(key) != str(value):
        st.query_params[key] = str(value)
