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

import threading
from contextlib import contextmanager

import streamlit as st

st.set_page_config(page_title="bertgeom · geometry of BERT attention", page_icon="🧭", layout="wide")

#: The page's sign of work for the whole script run, in the top right corner where Streamlit's own
#: running indicator would be (``toolbarMode = "minimal"`` hides it): a spinner with the seconds so far
#: that appears once a run has lasted RUN_SIGN_AFTER_S (so a quick click shows nothing) and goes when
#: the run ends or is stopped. Drawn before any bertgeom import, so even a server's first run, which
#: imports the package, shows it. A view's own spinner or progress bar (``waited``, ``progress``) says
#: what it computes; this one says only that the page works (#45: a walk of waits on a busy 2-core
#: machine found views of 1.5-3 s, a different few each time, with nothing on screen).
RUN_SIGN_CSS = """<style>
.st-key-run_sign { position: fixed; top: 0.7rem; right: 4rem; z-index: 999990; width: auto; }
</style>"""
#: As ``waited``'s first sign (bertgeom.ui.widgets.SPINNER_AFTER_S); ``st.spinner``'s own delay is a
#: fixed 0.5 s, after which a run that the browser, on a busy machine, takes 1 s to show was often over
#: before its spinner was painted.
RUN_SIGN_AFTER_S = 0.2
st.html(RUN_SIGN_CSS)
RUN_SIGN = st.container(key="run_sign")


@contextmanager
def run_sign(text: str):
    """RUN_SIGN's spinner for the block, drawn as ``st.spinner`` draws its own (a transient element that
    a timer shows and the block's end clears, never left behind by a stopped run), with the delay
    RUN_SIGN_AFTER_S; ``st.spinner`` itself (0.5 s) where Streamlit's internals differ."""
    try:
        from streamlit.proto.Element_pb2 import Element
        from streamlit.runtime.scriptrunner import add_script_run_ctx, enqueue_message

        element = Element()
        element.spinner.text = text
        element.spinner.show_time = True
        create, clear = RUN_SIGN._transient(element)
    except Exception:  # noqa: BLE001 - another Streamlit: its public spinner
        create = None
    if create is None:
        with RUN_SIGN.spinner(text, show_time=True):
            yield
        return
    lock, shown = threading.Lock(), {"on": True}

    def show() -> None:
        with lock:
            if shown["on"]:
                enqueue_message(create())

    timer = threading.Timer(RUN_SIGN_AFTER_S, show)
    add_script_run_ctx(timer)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            shown["on"] = False
            enqueue_message(clear())


def main() -> None:
    """One script run: state, threads, background preparation, navigation, sidebar, the page."""
    from bertgeom.extensions import registered_pages
    from bertgeom.runtime import SERVER_WARM_IMPORTS, configure_server_threads, import_in_background
    from bertgeom.ui.prepared_cache import start_background
    from bertgeom.ui.sidebar import render_sidebar
    from bertgeom.ui.state import follow_view_link, init_state, page_available, write_query_params
    from bertgeom.ui.tour import tour_bar

    init_state()
    _say_when_started_without_the_settings()
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


def _say_when_started_without_the_settings() -> None:
    """A notice on every page when the server runs without the checkout's ``.streamlit/config.toml``
    (Streamlit reads it only from the folder it was started in: ``streamlit run bertgeom/app.py`` from
    the folder above a clone): it then listens on every network interface and shows visitors tracebacks."""
    from bertgeom.launch import settings_not_read

    missing = settings_not_read(st.get_option)
    if missing:
        st.warning("This server was started without the app's settings (Streamlit reads `.streamlit/config.toml` "
                   f"only from the folder it is started in), so these differ: {', '.join(missing)}. It may "
                   "listen on every network interface and show error details to visitors. Stop it and start "
                   "it with `python -m bertgeom app` (from any folder) or `streamlit run app.py` from the "
                   "repository root.", icon=":material/warning:")


def counted_run() -> None:
    from bertgeom.runtime import script_run

    with script_run():  # counted, so a heavy computation alone on the server may take every core (bertgeom.runtime)
        main()


with run_sign("Working…"):
    counted_run()
