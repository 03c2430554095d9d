"""Layout of #45 item 6, measured in Chromium at 1400 px on the Variant Classifier page: the share
link's text clear of the copy icon (it covered the port's digits), the what-if Revert box showing
every chip it holds (side by side with the Add box it showed one of two) and the genome box's
character counter hidden ("30001/20971520" read as an error). Geometry is read from the page
(bounding boxes, the text's own line boxes), never from a picture; every wait is for an event.

The item's other layout findings have their checks elsewhere: the across-inputs legend in
tests/test_figures_subspace.py, the model names in tests/test_plugins.py; the batch and mutation
tables (a canvas grid, whose cells the page does not expose) in the screenshots named in #45's
closing note."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from screenshots import IDLE, Runs  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
SHOTS = ROOT / "artifacts" / "screenshots"
BOUND_MS = 600_000


def _overlap(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def _inside(inner: dict, outer: dict, slack: float = 1.0) -> bool:
    return (inner["x"] >= outer["x"] - slack and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
            and inner["width"] > 0 and inner["height"] > 0)


@pytest.fixture()
def classifier(server, browser):
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    runs = Runs(page)
    runs.after(lambda: page.goto(f"{server}/?view=classifier&model={VARIANT_MODEL_ID}&genome=4"), BOUND_MS)  # Alpha
    yield page, runs
    ctx.close()


#: In the page, on the Revert box's input: the texts of its list's options and the one the keyboard is on,
#: once the list is open and drawn; "closed" once it is not open (never opened, or closed again).
LIST_STATE_JS = """e => {
  if (!e.isConnected || e !== document.activeElement || e.getAttribute('aria-expanded') !== 'true') return 'closed';
  const list = document.getElementById(e.getAttribute('aria-controls') || '');
  const options = list ? [...list.querySelectorAll('[role=option]')] : [];
  if (!options.length) return false;
  const active = document.getElementById(e.getAttribute('aria-activedescendant') || '');
  return {names: options.map(o => o.innerText.trim()), active: active ? active.innerText.trim() : null};
}"""


#: In the page: a run asked for after the sequence number ``seq`` has finished and the app is idle (as
#: ``Runs.choose`` waits, tools/screenshots.py).
RUN_DONE_JS = """([idle, seq]) => { const r = window.__bertgeomRuns;
  return r.requested > seq && r.finished > r.requested && document.querySelector(idle) !== null; }"""


def _open_list(page, box) -> dict:
    """Open the Revert box's list from the keyboard and return what it shows (LIST_STATE_JS).

    Why not a click: no rerun and no fragment moves the box (after the page's run, recorded frame by
    frame, no rerun was asked for and no message arrived), but the browser draws a finished run after
    the app reports it idle: the what-if section was mounted 0.4 s after the wait for the run ended on
    a quiet machine, later on a busy one, and the charts above it draw and size themselves after that,
    so the box moves under a click's stability check, and a list opened meanwhile was once found closed
    again (React Aria closes its popover when the page under it scrolls). So the input is focused
    (which waits for the element, not for it to stop moving), ArrowDown opens the list, and the page
    itself says whether the list is open and drawn (its options) or closed, in which case it is opened
    again: each try ends on the page's own state, never on a pause."""
    for _ in range(50):  # a bound that turns a list that never stays open into a failure
        box.focus()
        page.keyboard.press("ArrowDown")
        state = page.wait_for_function(f"e => ({LIST_STATE_JS})(e)", arg=box.element_handle(),
                                       timeout=BOUND_MS, polling="raf").json_value()
        if state != "closed":
            return state
    raise AssertionError("the Revert list never stayed open")


def _pick(page, box, name: str) -> None:
    """Pick ``name`` in the Revert box from the keyboard (ArrowDown to it, Enter), then wait for the run
    the pick asks for. The request is counted in the key press's own task (``watch_runs``), so right after
    Enter the page says whether it was a pick; a list that closed under the keys is opened again."""
    first = page.evaluate("() => window.__bertgeomRuns.seq")
    for _ in range(50):  # the same bound as _open_list's
        state = _open_list(page, box)
        assert name in state["names"], (name, state)
        for _ in range(len(state["names"]) + 1):  # ArrowDown walks the list, wrapping at its end
            if not isinstance(state, dict) or state["active"] == name:
                break
            page.keyboard.press("ArrowDown")
            state = box.evaluate(LIST_STATE_JS)
        if not isinstance(state, dict) or state["active"] != name:  # the list closed under the keys
            continue
        seq = page.evaluate("() => window.__bertgeomRuns.seq")
        page.keyboard.press("Enter")
        if page.evaluate("(seq) => window.__bertgeomRuns.requested > seq", seq):
            page.wait_for_function(RUN_DONE_JS, arg=[IDLE, first], timeout=BOUND_MS, polling=50)
            return
    raise AssertionError(f"the option {name!r} was never picked")


def test_share_link_revert_chips_and_genome_box_fit_their_boxes(classifier):
    page, runs = classifier
    sidebar = page.get_by_test_id("stSidebar")
    # the run drawn to its end: the browser mounts a finished run's elements after the app reports it idle
    expect(page.get_by_test_id("stExpander").filter(has_text="Model card")).to_be_attached(timeout=BOUND_MS)

    # the share link: no line of its text under the copy icon
    sidebar.get_by_text("Share this view").click()
    code = sidebar.get_by_test_id("stCode")
    expect(code).to_be_visible(timeout=BOUND_MS)
    code.hover()  # the icon shows on hover
    icon = code.get_by_role("button", name="Copy to clipboard")
    expect(icon).to_be_visible()
    lines = code.evaluate("""e => { const r = document.createRange(); r.selectNodeContents(e.querySelector('code'));
                                    return [...r.getClientRects()].map(q => ({x: q.x, y: q.y, width: q.width,
                                                                             height: q.height})); }""")
    assert len(lines) >= 2, lines  # the link wraps: its first line runs to the right edge, where the icon sits
    under = [q for q in lines if _overlap(q, icon.bounding_box())]
    assert not under, f"link text under the copy icon: {under}"

    # the what-if Revert box: two entries, both chips whole inside the box
    revert = page.get_by_test_id("stMultiSelect").filter(has_text="Revert")
    box = revert.locator("input")
    names = [n for n in _open_list(page, box)["names"] if n != "Select all"][:2]  # Alpha's changes
    assert len(names) == 2, names
    page.keyboard.press("Escape")
    for name in names:
        _pick(page, box, name)
        page.keyboard.press("Escape")
    expect(page.get_by_text(re.compile(r"Prediction after \d+ changes"))).to_be_visible(timeout=BOUND_MS)
    tags = revert.locator("[data-tag]")
    expect(tags).to_have_count(2)
    holder = revert.get_by_test_id("stMultiSelectTagsContainer").bounding_box()
    clipped = [t.inner_text() for t in tags.all() if not _inside(t.bounding_box(), holder)]
    assert not clipped, f"chips cut by the Revert box: {clipped}"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "layout_45_share_and_revert.png"), full_page=True)

    # the genome box: edited, Streamlit writes its instructions and character counter; none is shown
    text = sidebar.locator("textarea").first
    text.fill(text.input_value() + "\n")
    instructions = sidebar.get_by_test_id("InputInstructions")
    expect(instructions).not_to_have_count(0)  # the counter exists (max_chars) ...
    assert not any(i.is_visible() for i in instructions.all())  # ... and is not on screen
