"""bertgeom: the Streamlit entry point (frame, shared sidebar and navigation only).

Run with ``streamlit run app.py``. Pages live in ``app_pages/``, and a plug-in's own pages in its
package (registered with :func:`bertgeom.extensions.register_page`: the Variant Classifier is
``bertgeom/sars_cov_2/page.py``); all computation lives in the ``bertgeom`` package.

The folder must not be called ``pages/``: with a ``pages/`` folder beside the entry script,
Streamlit runs the *first* session after a server start in its older multipage mode, whose pages are
the folder's file names (``/variant_classifier``), so a first visitor who opens ``/classifier`` (a
bookmark, a shared link) gets a "Page not found" dialog before ``st.navigation`` takes over for the
rest of the process (``PagesManager.uses_pages_directory``; streamlit/streamlit#8860, #9992).
"""

import streamlit as st

from bertgeom.extensions import registered_pages
from bertgeom.runtime import SERVER_WARM_IMPORTS, configure_server_threads, import_in_background, script_run

from bertgeom.ui.prepared_cache import start_background
from bertgeom.ui.sidebar import render_sidebar
from bertgeom.ui.state import follow_view_link, init_state, page_available, write_query_params
from bertgeom.ui.tour import tour_bar

st.set_page_config(page_title="bertgeom · geometry of BERT attention", page_icon="🧭", layout="wide")


def main() -> None:
    """One script run: state, threads, background preparation, navigation, sidebar, the page."""
    init_state()
    configure_server_threads()  # torch threads per request, set deliberately (see bertgeom.runtime)
    # once per server: the shipped sets' summaries, prepared at low priority (bertgeom.ui.prepared_cache)
    start_background()

    PAGES = {
        "Start": [st.Page("app_pages/home.py", title="Home", icon=":material/home:", url_path="home", default=True),
                  st.Page("app_pages/methods.py", title="Methods", icon=":material/menu_book:", url_path="methods")],
        "Explore": [
            st.Page("app_pages/attention_heads.py", title="Attention Heads", icon=":material/grid_view:",
                    url_path="heads"),
            st.Page("app_pages/subspace_directions.py", title="Subspace Directions", icon=":material/explore:",
                    url_path="subspace"),
            st.Page("app_pages/cone_index.py", title="Cone Index per Layer", icon=":material/change_history:",
                    url_path="cone"),
        ],
    }
    # plug-ins' pages (bertgeom.extensions.register_page), listed only where they can work
    for page in registered_pages():
        if page_available(page.key):
            PAGES.setdefault(page.section, []).append(
                st.Page(page.script, title=page.title, icon=page.icon or None, url_path=page.url_path))

    navigation = st.navigation(PAGES)
    follow_view_link(PAGES, navigation)
    tour_bar(PAGES, navigation)  # the guided tour's page switch and its bar (bertgeom/ui/tour.py)
    share_box = render_sidebar(navigation.url_path)
    try:
        navigation.run()
        write_query_params(navigation)
    finally:  # also when the page stopped early: the link is built from the state this run left
        share_box()
    # the models' pages need torch and transformers (~5 s of imports on 2 cores): imported in the
    # background once the first page is drawn, while it is read (started before, they slowed that page
    # from 1.9 s to 3.5 s); the model loader waits for that import rather than racing it
    # (bertgeom.runtime.package_import_lock)
    import_in_background(*SERVER_WARM_IMPORTS)


with script_run():  # counted, so a heavy computation alone on the server may take every core (bertgeom.runtime)
    main()
