"""The live session, round two (#45), in Chromium: widgets show the state the page computes from
after each transition (Examples after a typed paragraph and after an ``example=17`` link, the
custom-model box after switching back, the address bar after a failed custom load), and the
single-genome downloads carry what the screen says (reading notes, model and dataset, what-if).

Every wait is for an event: the run an action starts (``tools/screenshots.Runs``) or an element."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from screenshots import Runs, free_port, start_server  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
SHOTS = ROOT / "artifacts" / "screenshots"
BOUND_MS = 600_000
PLACEHOLDER = "— pick an example sentence —"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """A server that lets the page load custom models (the box under the model picker)."""
    port = free_port()
    proc = start_server(port, {"BERTGEOM_CACHE_DIR": str(tmp_path_factory.mktemp("live_state_cache")),
                               "BERTGEOM_ALLOW_CUSTOM_MODELS": "1"})
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=60)


def _page(browser, **kw):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, **kw)
    page = ctx.new_page()
    return ctx, page, Runs(page)


def _examples_box(page):
    """The Examples picker: its shown choice is the combobox's value (the placeholder for none)."""
    return page.get_by_test_id("stSidebar").get_by_role("combobox", name="Examples")


def _pick(page, runs, box, option_text: str) -> None:
    runs.choose(box, option_text)  # Runs.choose: a click that lands while the menu re-renders is made again


def test_examples_show_the_text_the_page_reads(app, browser):
    from bertgeom.examples import example_sentences

    examples = list(example_sentences())
    ctx, page, runs = _page(browser)
    runs.after(lambda: page.goto(f"{app}/?view=heads&model=minilm-l6"))
    _pick(page, runs, _examples_box(page), examples[2])
    expect(_examples_box(page)).to_have_value(examples[2])
    box = page.get_by_test_id("stSidebar").locator("textarea").first
    expect(box).to_have_value(examples[2])
    box.fill("My own paragraph about a heron that waited by the river all morning.")
    runs.after(lambda: box.press("Control+Enter"))
    expect(_examples_box(page)).to_have_value(PLACEHOLDER)  # not the old example
    ctx.close()

    ctx, page, runs = _page(browser)  # a shared link names example 17: the box and the picker both show it
    runs.after(lambda: page.goto(f"{app}/?view=heads&model=minilm-l6&example=17"))
    expect(page.get_by_test_id("stSidebar").locator("textarea").first).to_have_value(examples[16])
    expect(_examples_box(page)).to_have_value(examples[16])
    ctx.close()


def test_custom_box_and_address_bar_name_the_model_the_page_uses(app, browser, tiny_bert_dir):
    ctx, page, runs = _page(browser)
    runs.after(lambda: page.goto(f"{app}/?view=heads&model=minilm-l6"))
    custom = page.get_by_test_id("stSidebar").get_by_role("textbox", name="…or a Hugging Face id / local directory")
    custom.fill(str(tiny_bert_dir))
    runs.after(lambda: custom.press("Enter"))
    assert parse_qs(urlparse(page.url).query)["model"] == [str(tiny_bert_dir)]
    _pick(page, runs, page.get_by_test_id("stSidebar").get_by_role("combobox", name="Model"),
          "MiniLM-L6 (English, pretrained)")
    expect(custom).to_have_value("")  # an old path left there would swap the model back on Enter
    assert parse_qs(urlparse(page.url).query)["model"] == ["minilm-l6"]

    missing = str(tiny_bert_dir) + "_missing"
    custom.fill(missing)
    runs.after(lambda: custom.press("Enter"))
    expect(page.get_by_test_id("stAlert").first).to_be_visible()  # one sentence: it could not be loaded
    assert parse_qs(urlparse(page.url).query)["model"] == [missing]  # the model the page names, not the previous
    expect(custom).to_have_value(missing)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "live_state_failed_custom.png"), full_page=True)
    ctx.close()


def _reverse_complement(seq: str) -> str:
    return seq.translate(str.maketrans("ACGTNacgtn", "TGCANtgcan"))[::-1]


def test_single_genome_downloads_carry_notes_versions_and_the_what_if(app, browser):
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.sars_cov_2.variant.spec import genome_set

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    alpha = next(it for it in genome_set("demo") if it.label == "alpha")
    header, *lines = alpha.text.splitlines()
    flipped = f"{header}\n{_reverse_complement(''.join(lines))}\n"
    ctx, page, runs = _page(browser, accept_downloads=True)
    runs.after(lambda: page.goto(f"{app}/?view=classifier&model={VARIANT_MODEL_ID}"))
    box = page.get_by_test_id("stSidebar").locator("textarea").first
    box.fill(flipped)
    runs.after(lambda: box.press("Control+Enter"))
    expect(page.get_by_text("reverse complement detected", exact=False).first).to_be_visible()
    add = page.get_by_role("textbox", name="Add changes (e.g. A23063T, 22577GG, 21765-21770)")
    add.fill("A23063T")
    runs.after(lambda: add.press("Enter"))
    expect(page.get_by_text("Prediction after 1 change:", exact=False)).to_be_visible()
    got = {}
    for label in ("Download result (CSV)", "Download result (JSON)"):
        with page.expect_download() as info:
            page.get_by_role("button", name=label).click()
        got[label] = Path(info.value.path()).read_text()
    row = next(csv.DictReader(io.StringIO(got["Download result (CSV)"])))
    assert "reverse complement detected" in row["notes"]
    assert row["what_if"] == "A23063T" and row["predicted_after_what_if"] and row["p_after_what_if"]
    assert row["model_hash"] and row["nextclade_dataset"].startswith("Nextclade dataset")
    record = json.loads(got["Download result (JSON)"])
    assert any("reverse complement detected" in n for n in record["notes"])
    assert record["what_if"]["added"] == "A23063T" and record["what_if"]["n_changes"] == 1
    assert record["what_if"]["predicted_after"] == row["predicted_after_what_if"]
    assert record["manifest"]["model_hash"] == row["model_hash"]
    assert record["manifest"]["nextclade_dataset"] == row["nextclade_dataset"]
    ctx.close()
