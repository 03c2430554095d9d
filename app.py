"""bertgeom: the Streamlit entry point (frame, shared sidebar and navigation only).

Run with ``streamlit run app.py``. Pages live in ``pages/``; all computation lives in the
``bertgeom`` package.
"""

import streamlit as st

from bertgeom.runtime import configure_server_threads

from bertgeom.ui.prepared_cache import start_background
from bertgeom.ui.sidebar import render_sidebar
from bertgeom.ui.state import follow_view_link, init_state, spike_model_available, write_query_params

st.set_page_config(page_title="bertgeom · geometry of BERT attention", page_icon="🧭", layout="wide")
init_state()
configure_server_threads()  # torch threads per request, set deliberately (see bertgeom.runtime)
start_background()  # once per server: the shipped sets' summaries, prepared at low priority (bertgeom.ui.prepared_cache)

PAGES = {
    "Start": [st.Page("pages/home.py", title="Home", icon=":material/home:", url_path="home", default=True)],
    "Explore": [
        st.Page("pages/attention_heads.py", title="Attention Heads", icon=":material/grid_view:", url_path="heads"),
        st.Page("pages/subspace_directions.py", title="Subspace Directions", icon=":material/explore:", url_path="subspace"),
        st.Page("pages/cone_index.py", title="Cone Index per Layer", icon=":material/change_history:", url_path="cone"),
    ],
}
if spike_model_available():  # only pages that can work are listed
    PAGES["Classify"] = [
        st.Page("pages/variant_classifier.py", title="Variant Classifier", icon=":material/coronavirus:",
                url_path="classifier"),
    ]

navigation = st.navigation(PAGES)
follow_view_link(PAGES, navigation)
render_sidebar(navigation.url_path)
navigation.run()
write_query_params(navigation)
