"""A live session on the Variant Classifier's batch table, in a real browser (#21 item 1).

Before: after a multi-record table every rerun (a row click, integrated gradients, the slider, a
download) showed "This app has encountered an error" (CacheReplayClosureError), and a second browser
pasting the same records got it at once. Upload 20 real records, click three rows (each opens its
own genome), open integrated gradients and the what-if for one, move the slider, download both CSVs,
then paste the same records in a second browser context: no error box anywhere."""

from __future__ import annotations

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
ROW_PX = 35  # st.dataframe's row (and header) height


def _records() -> list[tuple[str, str]]:
    """20 open genomes (the 8 demo examples and 12 of the validation set), renamed so that each
    name is unique and tells its row: ``r03_USA/...``."""
    from bertgeom.sars_cov_2.variant.spec import genome_set

    items = list(genome_set("demo")) + list(genome_set("validation_small"))[:12]
    out = []
    for i, it in enumerate(items):
        name = f"r{i:02d}_{it.text.splitlines()[0][1:].split()[0]}"
        out.append((name, f">{name}\n" + "\n".join(it.text.splitlines()[1:])))
    return out


@pytest.fixture(scope="module")
def server(server):
    """The session's app server (conftest), when the shipped variant model is installed."""
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    return server


def _no_error_box(page) -> None:
    expect(page.get_by_test_id("stException")).to_have_count(0)
    expect(page.get_by_text("This app has encountered an error")).to_have_count(0)


#: Every wait below is for an event (a run the page's websocket reports finished, an element), with
#: a generous bound for a busy machine: none of them orders events by a pause (issue 33, item 15).
BOUND_MS = 600_000


def _click_row(page, runs: Runs, row: int) -> None:
    """Select a row of the batch table by its row-marker cell (the grid is a canvas: by coordinates)."""
    grid = page.get_by_test_id("stDataFrame").first
    expect(grid).to_be_visible(timeout=BOUND_MS)
    box = grid.bounding_box()
    runs.after(lambda: page.mouse.click(box["x"] + 12, box["y"] + ROW_PX * (row + 1) + ROW_PX / 2))


def _shown_genome(page) -> str:
    return page.get_by_test_id("stHeading").filter(has_text="r").locator("h3").first.inner_text()


def test_a_twenty_record_batch_stays_open_through_a_session_and_in_a_second_browser(server, browser, tmp_path):
    records = _records()
    fasta = tmp_path / "twenty.fasta"
    fasta.write_text("\n".join(text for _, text in records) + "\n")

    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = ctx.new_page()
    page.set_default_timeout(BOUND_MS)
    runs = Runs(page)
    runs.after(lambda: page.goto(f"{server}/classifier"))
    upload = page.get_by_test_id("stFileUploaderDropzoneInput")
    runs.after(lambda: upload.set_input_files(str(fasta)))
    expect(page.get_by_role("heading", name="20 records")).to_be_visible(timeout=BOUND_MS)
    _no_error_box(page)
    expect(page.get_by_role("heading", name=records[0][0])).to_be_visible(timeout=BOUND_MS)  # the first record's view
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "classifier_batch.png"), full_page=True)

    for row in (3, 7, 5):  # three rows: each opens its own genome
        _click_row(page, runs, row)
        _no_error_box(page)
        expect(page.get_by_role("heading", name=records[row][0])).to_be_visible(timeout=BOUND_MS)
    page.screenshot(path=str(SHOTS / "classifier_batch_row.png"), full_page=True)

    nodes = page.get_by_test_id("stSlider").filter(has_text="nodes at most")
    nodes.get_by_role("slider").focus()
    runs.after(lambda: page.keyboard.press("Home"))  # the smallest node cap: the fastest integrated gradients
    expect(nodes.get_by_test_id("stSliderThumbValue")).to_have_text("8", timeout=BOUND_MS)
    runs.after(lambda: page.get_by_text("Integrated gradients", exact=True).click())  # the checkbox's label
    expect(page.get_by_text("Integrated gradients: attributions sum to")).to_be_visible(timeout=BOUND_MS)
    expect(page.get_by_text("with 8 quadrature nodes")).to_be_visible(timeout=BOUND_MS)
    _no_error_box(page)

    revert = page.get_by_test_id("stMultiSelect").filter(has_text="Revert")
    revert.locator("input").click()
    page.keyboard.type("D614G")  # the mutation table's name finds it
    option = page.get_by_role("option", name="D614G (A23403G)")
    expect(option).to_have_count(1, timeout=BOUND_MS)
    option.click()
    page.keyboard.press("Escape")
    expect(page.get_by_text("Prediction after 1 change")).to_be_visible(timeout=BOUND_MS)
    page.wait_for_selector(IDLE, timeout=BOUND_MS)
    _no_error_box(page)

    slider = page.get_by_test_id("stSlider").filter(has_text="Warn below this confidence")
    expect(slider.get_by_test_id("stSliderThumbValue")).to_have_text("0.90", timeout=BOUND_MS)
    slider.get_by_role("slider").focus()
    runs.after(lambda: page.keyboard.press("ArrowRight"))
    expect(slider.get_by_test_id("stSliderThumbValue")).to_have_text("0.91", timeout=BOUND_MS)
    _no_error_box(page)
    expect(page.get_by_role("heading", name=records[5][0])).to_be_visible(timeout=BOUND_MS)  # still the row picked

    for label, first_line in (("Download all predictions (CSV)", "name,original_name,predicted"),
                              ("Download result (CSV)", "name,predicted")):
        with page.expect_download() as info:
            page.get_by_role("button", name=label).click()
        text = Path(info.value.path()).read_text()
        assert text.startswith(first_line)
        if label.startswith("Download all"):
            assert sum(r[0] in text for r in records) == 20
        else:
            assert records[5][0] in text and records[3][0] not in text
        page.wait_for_selector(IDLE, timeout=BOUND_MS)
        _no_error_box(page)
    ctx.close()

    # a second browser pastes the same records: the cached chunks are read, nothing is replayed
    ctx2 = browser.new_context(viewport={"width": 1400, "height": 1000})
    page2 = ctx2.new_page()
    page2.set_default_timeout(BOUND_MS)
    runs2 = Runs(page2)
    runs2.after(lambda: page2.goto(f"{server}/classifier"))
    box = page2.get_by_role("textbox", name="Genome or spike sequence")
    box.fill(fasta.read_text())
    runs2.after(lambda: box.press("Control+Enter"))
    expect(page2.get_by_role("heading", name="20 records")).to_be_visible(timeout=BOUND_MS)
    _no_error_box(page2)
    _click_row(page2, runs2, 2)
    expect(page2.get_by_role("heading", name=records[2][0])).to_be_visible(timeout=BOUND_MS)
    _no_error_box(page2)
    ctx2.close()
