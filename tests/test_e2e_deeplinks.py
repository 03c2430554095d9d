"""Every page's own address opens for the *first* visitor after a server start (#21 item 6).

With a ``pages/`` folder beside app.py, Streamlit ran a process's first session in its older
multipage mode (pages named by file), so the first visitor of ``/classifier`` got a "Page not found"
dialog over the page; later visitors did not. So each address gets a fresh server of its own.
(Home is the default page: Streamlit serves it at ``/``.)"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from screenshots import BOUND_MS, free_port, start_server, wait_idle  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")

PAGES = [("", "bertgeom — the geometry of BERT's attention"), ("heads", "Attention Heads"),
         ("subspace", "Subspace Directions"), ("cone", "Cone Index per Layer"), ("classifier", "Variant Classifier")]


def test_the_app_declares_these_addresses():
    """The core pages are declared in app.py; a plug-in's page (the classifier) by its registration."""
    from bertgeom.extensions import registered_pages

    app = (ROOT / "app.py").read_text()
    plugged = {page.url_path for page in registered_pages()}
    for path, _ in PAGES[1:]:
        assert f'url_path="{path}"' in app or path in plugged, path


@pytest.mark.parametrize(("path", "title"), PAGES, ids=[p or "home" for p, _ in PAGES])
def test_a_pages_address_opens_without_a_dialog_for_the_first_visitor(browser, path, title):
    if path == "classifier":
        from bertgeom.models import REGISTRY
        from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

        if VARIANT_MODEL_ID not in REGISTRY:
            pytest.skip("the shipped variant model is not installed (the page is not listed)")
    port = free_port()
    server = start_server(port)  # fresh: this visitor is the process's first session
    try:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        # the English pages on the tiny random model (fast); the dialog came from the path alone
        query = "?model=tiny-random" if path in ("heads", "subspace", "cone") else ""
        page.goto(f"http://127.0.0.1:{port}/{path}{query}")
        wait_idle(page, BOUND_MS)
        expect(page.get_by_role("heading", name=title, exact=True).first).to_be_visible(timeout=BOUND_MS)
        expect(page.get_by_text("Page not found")).to_have_count(0)
        expect(page.get_by_role("dialog")).to_have_count(0)
        assert urlsplit(page.url).path == f"/{path}"  # still on its own address
        context.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
