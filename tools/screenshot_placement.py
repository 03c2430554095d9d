"""Screenshots of the Variant Classifier's placement on Nextclade's reference tree (issue 42): a
spike-only XBB (called, lineage and resolution note, the breakpoint on the spike track), a genome
whose spike is all N ("spike not read", no call), a Delta/Omicron recombinant (the recombinant line,
the breakpoint band on the genome track) and a batch with its lineage and recombinant columns.

Usage: python tools/screenshot_placement.py OUT_DIR [--port PORT]
With ``--port`` it uses the server already running there (``python -m streamlit run app.py
--server.headless true --server.port PORT``); without, it starts one and stops it. Writes
``screenshot_variant_spike_xbb.png``, ``screenshot_variant_no_spike_read.png``,
``screenshot_variant_recombinant.png`` and ``screenshot_variant_batch_lineages.png`` at 1400 px wide.
The sequences are tools/placement_cases.py's, uploaded as FASTA files as a visitor would.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import placement_cases  # noqa: E402
from screenshots import BOUND_MS, CHROMIUM_ARGS, Runs, free_port, start_server, wait_idle, watch_runs  # noqa: E402

#: (file name, case, the heading the shot ends above)
SHOTS = (
    ("screenshot_variant_spike_xbb.png", "spike_only_xbb", "What if? In-silico mutagenesis"),
    ("screenshot_variant_no_spike_read.png", "all_n_spike", "Download result (JSON)"),
    ("screenshot_variant_recombinant.png", "delta_omicron_recombinant", "Mutations by gene"),
    ("screenshot_variant_batch_lineages.png", "batch", "Quality control (spike)"),
)
#: The page's scrolling container: the document itself does not scroll, so the viewport is grown to it.
MAIN = "[data-testid='stMain']"


def _open_classifier(page, port: int) -> None:
    page.goto(f"http://127.0.0.1:{port}/")
    wait_idle(page, BOUND_MS)
    page.get_by_role("link", name="Variant Classifier").click()
    wait_idle(page, BOUND_MS)


def _upload(page, fasta: Path, shown: str) -> None:
    """Upload ``fasta`` and wait for the run it starts (not the example's view before it) to show ``shown``."""
    Runs(page).after(lambda: page.set_input_files("input[type=file]", str(fasta)), BOUND_MS)
    page.get_by_text(shown, exact=True).first.wait_for(timeout=BOUND_MS)
    page.get_by_text("Quality control (spike)", exact=True).first.wait_for(timeout=BOUND_MS)


def _grow_to_content(page) -> None:
    """The viewport as tall as the page's content, every chart drawn in it."""
    height = page.evaluate(f"document.querySelector(\"{MAIN}\").scrollHeight")
    page.set_viewport_size({"width": 1400, "height": int(min(height, 12_000))})
    wait_idle(page, BOUND_MS)
    for chart in page.locator(".js-plotly-plot").all():  # drawn, not only placed (or in a closed expander)
        chart.locator(".main-svg").first.wait_for(state="attached", timeout=BOUND_MS)


def _top_of(page, text: str) -> float | None:
    loc = page.get_by_text(text, exact=True).first
    if not loc.count():
        return None
    box = loc.bounding_box()
    return box["y"] - 12 if box else None


def main(out_dir: str, port: int | None = None) -> None:
    from playwright.sync_api import sync_playwright

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp())
    server = None
    if port is None:
        port = free_port()
        server = start_server(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                        args=["--headless", *CHROMIUM_ARGS])
            for name, case, end in SHOTS:
                text = getattr(placement_cases, case)()
                fasta = tmp / f"{case}.fasta"
                fasta.write_text(text + "\n")
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(BOUND_MS)
                watch_runs(page)
                _open_classifier(page, port)
                n = text.count(">")
                _upload(page, fasta, f"{n} records" if n > 1 else text[1:].split("\n", 1)[0])
                _grow_to_content(page)
                bottom = _top_of(page, end) or page.viewport_size["height"]
                page.screenshot(path=str(out / name), clip={"x": 0, "y": 0, "width": 1400, "height": bottom})
                print(out / name, int(bottom))
                page.close()
            browser.close()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)


if __name__ == "__main__":
    args = sys.argv[1:]
    port_arg = int(args[args.index("--port") + 1]) if "--port" in args else None
    main(args[0] if args and not args[0].startswith("--") else "artifacts/shots", port_arg)
