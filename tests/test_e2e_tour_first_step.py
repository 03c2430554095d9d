"""The tour's first step on a server that has computed nothing yet (issue #36, item 6): it never
leaves a visitor waiting in silence. A progress bar names the stage it runs (loading the model, the
input's pass, the features, the numbers) with the time left and says that this is usually ready at
once; *Cancel* stops it (the tour's buttons stay), *Start it again* finishes it without an error.

Its own module, so its server is fresh (the tour test's server has every step computed). The server
holds every progress bar while a file exists (``widgets.HOLD_ENV``): on a warm machine the whole step
took less than the test needs to reach *Cancel*, so the click missed the bar and waited for ever."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from screenshots import wait_idle  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
ERRORS = "[data-testid='stException'], [data-testid='stAlertContentError']"


@pytest.fixture(scope="module")
def hold(tmp_path_factory) -> Path:
    """The file whose presence holds the server's progress bars at their current stage."""
    return tmp_path_factory.mktemp("hold") / "hold"


@pytest.fixture(scope="module")
def own_server_env(hold) -> dict:
    from bertgeom.ui.widgets import HOLD_ENV

    return {HOLD_ENV: str(hold)}


@pytest.fixture(scope="module")
def server(own_server):
    """This module's own server with an empty disk cache: a process that has computed no tour step."""
    return own_server


def test_first_tour_step_shows_progress_with_a_cancel_and_finishes_after_start_again(server, browser, hold):
    from bertgeom.models import REGISTRY

    if "minilm-l6" not in REGISTRY:
        pytest.skip("the tour needs the bundled MiniLM")
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.goto(server)
    wait_idle(page)
    hold.touch()  # the step stops at its first stage until the test lets it go
    page.get_by_role("button", name="Start the tour").click()
    bar = page.locator(".st-key-tour_bar")
    # the first stage (loading the model) takes seconds on any machine: the bar is seen while it runs
    expect(bar.get_by_text("A tour step usually opens at once", exact=False)).to_be_visible(timeout=120_000)
    expect(bar.get_by_test_id("stProgress")).to_be_visible()
    expect(bar.get_by_test_id("stProgress")).to_contain_text("Loading MiniLM")
    (ROOT / "artifacts").mkdir(exist_ok=True)
    bar.screenshot(path=str(ROOT / "artifacts" / "tour_first_step_progress.png"))
    bar.get_by_role("button", name="Cancel").click()
    expect(bar.get_by_text("Cancelled", exact=False)).to_be_visible(timeout=300_000)
    wait_idle(page, 300_000)
    expect(bar.get_by_role("button", name="End")).to_be_visible()  # the tour can still be left
    expect(page.get_by_text("who attends to whom")).to_have_count(0)  # the page waits for the restart
    hold.unlink()
    bar.get_by_role("button", name="Start it again").click()
    wait_idle(page, 600_000)
    expect(bar.get_by_text("strongest previous-token head is", exact=False)).to_be_visible(timeout=300_000)
    expect(page.get_by_text("who attends to whom", exact=False).first).to_be_visible(timeout=120_000)
    expect(page.locator(ERRORS)).to_have_count(0)
    ctx.close()
