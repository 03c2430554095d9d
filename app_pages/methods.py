"""Methods: docs/methods.md rendered in the app (the target of every "docs/methods.md §x" link on
the other pages), opened on the section a link names."""

import re

import streamlit as st

from bertgeom.safety import plain
from bertgeom.ui.methods_link import METHODS_PATH, find_section, methods_sections

st.title("Methods")
text = METHODS_PATH.read_text(encoding="utf-8")
section = str(st.query_params.get("section") or st.session_state.get("_methods_section") or "")[:8]
found = find_section(text, section) if section else None
if section and found is None:
    st.info(f"docs/methods.md has no section {plain(section)}; the whole document follows.")
if found:
    st.session_state["_methods_section"] = section
    with st.container(border=True):
        st.caption(f"You followed a link to docs/methods.md §{plain(section)}:")
        st.markdown(re.sub(r"^#{2,3} ", "#### ", found[1], flags=re.M))  # smaller headings in the excerpt
    st.divider()
    st.markdown("#### The whole document")
titles = [t for _, t, _ in methods_sections(text)]
st.caption(f"{len(titles)} sections; this page shows the file docs/methods.md of this copy of bertgeom.")
st.markdown(text)
