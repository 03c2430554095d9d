"""Screenshots of the Variant Classifier for the README: one genome (per-gene mutation table, QC score)
and a batch (the table with nearest clade and QC score).

Usage: python tools/screenshot_classifier.py OUT_DIR
Writes ``screenshot_classifier.png`` (the default Omicron genome, the S table on screen) and
``screenshot_classifier_batch.png`` (the 8 demo genomes uploaded as one FASTA) at 1400 px wide.
The page is reached from the home page's navigation, as a visitor does.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from screenshots import CHROMIUM_ARGS, Runs, free_port, start_server, watch_runs  # noqa: E402

#: Upper bound of each wait (a model load on a busy 2-core machine); every wait ends on its event.
BOUND_MS = 900_000


def _demo_fasta(path: Path) -> None:
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

    with open(path, "w") as fh:
        for rec, _meta in load_demo_genomes():
            fh.write(f">{rec.name}\n{rec.sequence}\n")


def main(out_dir: str) -> None:
    from playwright.sync_api import sync_playwright

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fasta = Path(tempfile.mkdtemp()) / "demo_genomes.fasta"
    _demo_fasta(fasta)
    port = free_port()
    server = start_server(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            watch_runs(page)
            runs = Runs(page)  # waits for the run each action starts (a busy machine only makes it slower)
            runs.after(lambda: page.goto(f"http://127.0.0.1:{port}/"), BOUND_MS)
            runs.after(lambda: page.get_by_role("link", name="Variant Classifier").click(), BOUND_MS)
            page.get_by_text("Mutations by gene").scroll_into_view_if_needed(timeout=BOUND_MS)
            page.wait_for_timeout(3000)  # a picture only: the charts and the canvas grid paint after the run
            page.screenshot(path=str(out / "screenshot_classifier.png"), full_page=True)
            runs.after(lambda: page.set_input_files("input[type=file]", str(fasta)), BOUND_MS)
            page.wait_for_timeout(3000)
            page.set_viewport_size({"width": 1400, "height": 1000})
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(out / "screenshot_classifier_batch.png"))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    print(out / "screenshot_classifier.png", out / "screenshot_classifier_batch.png")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "artifacts/shots")
