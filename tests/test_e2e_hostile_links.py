"""Nothing injected from a link, a box or an upload (issue 33, items 1-4), in a real browser.

One server (custom models allowed, so their boxes are there too), one page. Every query parameter
the app reads (``bertgeom/ui/state.py``, ``url_settings.py``, every ``bind="query-params"`` widget,
``?section=``) carries a markdown/HTML payload on every page and on every tab that reads one; then
the text boxes and the Queries & keys upload get the same payload. The browser blocks and logs every
request that leaves the app's own origin: none may be made, and no link or image from the payload
may be formed, in the page or its frames."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from screenshots import IDLE, Runs, free_port, start_server  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
SHOTS = ROOT / "artifacts" / "screenshots"
BOUND_MS = 300_000  # an upper bound only: every wait ends on its event
PAYLOAD = ("![x](http://127.0.0.1:9/x.png) [Your session expired: sign in again](http://127.0.0.1:9/login) "
           "![](//0) <img src=http://127.0.0.1:9/h.png>")
#: Every query parameter the app reads: the link's own (state.py), the tab strips (url_settings),
#: the URL-bound widgets and the Methods page's section.
APP_KEYS = ("model", "layer", "head", "text", "colour", "theta", "input", "example", "genome", "section")
BOUND_KEYS = ("w_flow_r", "w_flow_n", "w_flow_t", "w_set_view", "w_hv_mode", "w_hv_min", "w_mv_importance",
              "w_qk_set", "w_qk_method", "w_qk_colour", "w_qk_search")
TAB_KEYS = ("heads_tab", "w_sub_tab", "w_cone_section")
#: The tabs whose widgets read the URL (each visited with the payload in every other parameter).
HEADS_TABS = ("Head view", "Model view", "Queries & keys over a set", "Over a set of inputs", "Attention flow")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    port = free_port()
    proc = start_server(port, {"BERTGEOM_CACHE_DIR": str(tmp_path_factory.mktemp("links_cache")),
                               "BERTGEOM_ALLOW_CUSTOM_MODELS": "1"})
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def watched(browser, app):
    """One page; every request off the app's origin is logged and aborted."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(BOUND_MS)
    page.outside = []

    def route(r) -> None:
        url = r.request.url
        if url.startswith(app + "/") or url == app or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            page.outside.append(url)
            r.abort()

    context.route("**/*", route)
    page.runs = Runs(page)
    yield page
    context.close()


def _nothing_formed(page, where: str) -> None:
    assert not page.outside, (where, page.outside)
    for frame in page.frames:
        formed = frame.locator("a[href*='127.0.0.1:9'], a[href^='//0'], img[src*='127.0.0.1:9'], img[src^='//0'], "
                               "img[src*='0.0.0.0']")
        assert formed.count() == 0, (where, frame.url)
    expect(page.get_by_test_id("stException")).to_have_count(0)


def _visit(page, url: str) -> None:
    page.runs.after(lambda: page.goto(url))
    page.wait_for_selector(IDLE, timeout=BOUND_MS)


def _query(**fixed: str) -> str:
    params = {k: PAYLOAD for k in APP_KEYS + BOUND_KEYS + TAB_KEYS}
    params.update(fixed)
    return urlencode(params)


def test_every_query_parameter_on_every_page_renders_as_text(app, watched):
    page = watched
    for view in ("home", "methods", "heads", "subspace", "cone", "classifier"):
        _visit(page, f"{app}/?{_query(view=view)}")
        _nothing_formed(page, view)
    for tab in HEADS_TABS:  # the tabs whose settings come from the URL, each opened by the link
        _visit(page, f"{app}/?{_query(view='heads', model='minilm-l6', heads_tab=tab, w_qk_set='shipped')}")
        expect(page.get_by_role("tab", name=tab, selected=True)).to_be_visible(timeout=BOUND_MS)
        _nothing_formed(page, tab)
    # a model that cannot be loaded is named in the error: the payload as a custom model id
    _visit(page, f"{app}/?{urlencode({'view': 'heads', 'model': PAYLOAD})}")
    _nothing_formed(page, "custom model id")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "hostile_links_url.png"), full_page=True)


def _own_set(page) -> None:
    """Queries & keys over a set: choose "my own inputs" (when not chosen yet)."""
    own = page.get_by_test_id("stRadio").filter(has_text="my own inputs").get_by_text("my own inputs")
    expect(own).to_be_visible(timeout=BOUND_MS)
    if not page.get_by_role("radio", name="my own inputs").is_checked():
        page.runs.after(own.click)


def _type(page, box, text: str, submit: str = "Enter") -> None:
    box.fill(text)
    page.runs.after(lambda: box.press(submit))


def test_every_text_box_renders_a_payload_as_text(app, watched):
    page = watched
    _visit(page, f"{app}/?view=heads&model=minilm-l6&heads_tab=Queries+%26+keys+over+a+set")
    sidebar = page.get_by_test_id("stSidebar")
    _type(page, sidebar.get_by_role("textbox", name="Input sentence"), f"The cat sat. {PAYLOAD}", "Control+Enter")
    _nothing_formed(page, "sidebar text")
    _own_set(page)
    lines = page.get_by_role("textbox", name="One input per line")
    _type(page, lines, f"A dog barked.\n{PAYLOAD}", "Control+Enter")
    search = page.get_by_role("textbox", name="Search a token")
    _type(page, search, PAYLOAD)
    expect(page.get_by_text("No token of the set is", exact=False)).to_be_visible(timeout=BOUND_MS)
    _nothing_formed(page, "Q&K lines and search")

    _visit(page, f"{app}/?view=heads&model=minilm-l6&heads_tab=Compare+two+inputs")
    _type(page, page.get_by_role("textbox", name="Input B", exact=False), f"The cat ran. {PAYLOAD}")
    _nothing_formed(page, "compare two inputs")
    _visit(page, f"{app}/?view=heads&model=minilm-l6&heads_tab=Compare+checkpoints")
    _type(page, page.get_by_role("textbox", name="another checkpoint", exact=False), PAYLOAD)
    _nothing_formed(page, "compare checkpoints")
    custom = page.get_by_test_id("stSidebar").get_by_role("textbox", name="Hugging Face id", exact=False)
    _type(page, custom, PAYLOAD)
    _nothing_formed(page, "sidebar custom model")


def test_the_queries_and_keys_upload_and_the_what_if_box_render_a_payload_as_text(app, watched):
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

    page = watched
    junk = "ACGTTGCA" * 40  # aligns nowhere: each record lands in the error caption
    genome = load_demo_genomes()[0][0].sequence
    fasta = f">{PAYLOAD}|omicron\n{junk}\n>ok|alpha\n{genome}\n>{PAYLOAD} 2|delta\n{genome}\n".encode()
    _visit(page, f"{app}/?view=heads&model={VARIANT_MODEL_ID}&heads_tab=Queries+%26+keys+over+a+set")
    _own_set(page)
    upload = page.get_by_test_id("stMain").get_by_test_id("stFileUploaderDropzoneInput").first
    page.runs.after(lambda: upload.set_input_files({"name": f"{PAYLOAD}.fasta", "mimeType": "text/plain",
                                                     "buffer": fasta}))
    left_out = re.compile(r"could not be read and (is|are) left out")  # the verb agrees with the count (issue #45)
    expect(page.get_by_text(left_out)).to_be_visible(timeout=BOUND_MS)
    _nothing_formed(page, "Q&K upload")

    _visit(page, f"{app}/?view=classifier&model={VARIANT_MODEL_ID}&example=0")
    _type(page, page.get_by_role("textbox", name="Add changes", exact=False), PAYLOAD)
    _nothing_formed(page, "what-if box")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "hostile_links_boxes.png"), full_page=True)
