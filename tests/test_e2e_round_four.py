"""Issue 46 in a real browser (Debian's Chromium): every unreadable file given to Queries & keys ->
"my own inputs" and every model id the OS cannot stat (300 characters, ``~nouser/x``; from a link
or the custom box) is answered with one sentence on every page, never the crash box."""

from __future__ import annotations

import bz2
import gzip
import io
import shutil
import sys
import zipfile
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
QK_TAB = "Queries+%26+keys+over+a+set"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    port = free_port()
    proc = start_server(port, {"BERTGEOM_CACHE_DIR": str(tmp_path_factory.mktemp("round_four_cache")),
                               "BERTGEOM_ALLOW_CUSTOM_MODELS": "1"})
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def page(browser, app):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(BOUND_MS)
    pg.runs = Runs(pg)
    yield pg
    context.close()


def _visit(page, url: str) -> None:
    page.runs.after(lambda: page.goto(url))
    page.wait_for_selector(IDLE, timeout=BOUND_MS)


def _no_crash_box(page, where: str) -> None:
    assert page.get_by_test_id("stException").count() == 0, where


def _unreadable_files(genome: str) -> dict[str, bytes]:
    """The probe's unreadable files that reach the app (the one over 20 MB is Streamlit's own refusal,
    before the app: :func:`test_a_file_over_20_mb_is_streamlits_one_sentence`)."""
    fasta = f">a|omicron\n{genome}\n>b|delta\n{genome}\n".encode()
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("x.fasta", fasta)
    gz = gzip.compress(fasta)
    return {
        "empty.fasta": b"",
        "binary.fasta": bytes(range(256)) * 64,
        "nul.fasta": b">a|omicron\n" + b"ACGT\x00" * 200,
        "nulheader.fasta": b">a\x00b|omicron\n" + genome.encode() + b"\n",  # a NUL in the (first) header
        "bomb.fasta.gz": gzip.compress(b"A" * (40 << 20)),
        "bomb.fasta.xz": __import__("lzma").compress(b"A" * (40 << 20)),
        "bomb.fasta.bz2": bz2.compress(b"A" * (40 << 20)),
        "zip.fasta": zipped.getvalue(),
        "label.fasta": f">x|martian\n{genome}\n".encode(),
        "cut.fasta.gz": gz[: len(gz) // 3],
        "corrupt.fasta.gz": gz[:20] + b"\xff" * 200 + gz[220:],
        "many.fasta": b">r\nACGTACGTAC\n" * 100_001,
    }


def test_every_unreadable_file_for_queries_and_keys_is_one_sentence(app, page):
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

    genome = load_demo_genomes()[0][0].sequence
    _visit(page, f"{app}/?view=heads&model={VARIANT_MODEL_ID}&heads_tab={QK_TAB}&w_qk_set=my+own+inputs")
    main = page.get_by_test_id("stMain")
    upload = main.get_by_test_id("stFileUploaderDropzoneInput").first
    for name, data in _unreadable_files(genome).items():
        page.runs.after(lambda name=name, data=data: upload.set_input_files(
            {"name": name, "mimeType": "application/octet-stream", "buffer": data}))
        _no_crash_box(page, name)
        alert = main.get_by_test_id("stAlert").filter(has_text=name.split(".")[0])
        expect(alert.first).to_be_visible(timeout=BOUND_MS)
        text = alert.first.inner_text()
        assert "Traceback" not in text and text.count("\n") <= 1, (name, text)
        if name in ("bomb.fasta.gz", "label.fasta"):
            SHOTS.mkdir(parents=True, exist_ok=True)
            alert.first.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / f"round_four_qk_upload_{name.split('.')[0]}.png"))


@pytest.mark.parametrize("model_id", ["a" * 300, "~nouser/x"])
def test_a_model_id_the_os_cannot_stat_is_one_sentence_on_every_page(app, page, model_id):
    for view in ("home", "heads", "subspace", "cone", "classifier", "methods"):
        _visit(page, f"{app}/?{urlencode({'view': view, 'model': model_id})}")
        _no_crash_box(page, f"{view}: {model_id[:20]}")
    _visit(page, f"{app}/?{urlencode({'view': 'heads', 'model': model_id})}")
    alert = page.get_by_test_id("stMain").get_by_test_id("stAlert").first
    expect(alert).to_be_visible(timeout=BOUND_MS)
    assert ("characters long" in alert.inner_text()) if len(model_id) > 256 else ("names no user" in alert.inner_text())
    SHOTS.mkdir(parents=True, exist_ok=True)
    alert.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"round_four_model_id_{'long' if len(model_id) > 256 else 'nouser'}.png"))


def test_a_model_id_typed_in_the_custom_box_is_one_sentence(app, page):
    _visit(page, f"{app}/?view=heads&model=minilm-l6")
    box = page.get_by_test_id("stSidebar").get_by_role("textbox", name="Hugging Face id", exact=False)
    box.fill("~nouser/x")
    page.runs.after(lambda: box.press("Enter"))
    _no_crash_box(page, "custom box")
    expect(page.get_by_text("names no user", exact=False).first).to_be_visible(timeout=BOUND_MS)
    page.screenshot(path=str(SHOTS / "round_four_custom_box.png"))


def test_a_file_over_20_mb_is_streamlits_one_sentence(app, page):
    """20.5 MB (Streamlit's megabytes: 1,000,000 bytes): refused by Streamlit's uploader in one sentence
    before the app reads it; the app's own limit is the same number of bytes
    (``tests/test_round_four.py::test_the_upload_limit_is_streamlits_megabytes``)."""
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    _visit(page, f"{app}/?view=heads&model={VARIANT_MODEL_ID}&heads_tab={QK_TAB}&w_qk_set=my+own+inputs")
    main = page.get_by_test_id("stMain")
    upload = main.get_by_test_id("stFileUploaderDropzoneInput").first
    data = b">a|omicron\n" + b"ACGT" * (20_500_000 // 4)
    upload.set_input_files({"name": "big.fasta", "mimeType": "application/octet-stream", "buffer": data})  # no run
    expect(main.get_by_text("must be 20.0MB or smaller", exact=False).first).to_be_visible(timeout=BOUND_MS)
    _no_crash_box(page, "big.fasta")
