"""Screenshot Attention Heads, Subspace Directions and Cone Index on a tiny random DistilBERT, ESM-2 and
ModernBERT classifier (tests/family_models.py), to look at what the pages say for families beyond BERT.
ESM-2 reads a protein (its vocabulary is the amino acids), the others the example sentence.

Writes ``OUT_DIR/screenshot_family_<family>_<page>.png`` (family lower-case without the hyphen: distilbert,
esm2, modernbert; page: heads, subspace, cone), the names docs/guide.md shows them by.

Usage: python tools/screenshot_families.py OUT_DIR [family ...]
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from family_models import save_family_model  # noqa: E402
from playwright.sync_api import TimeoutError as PlaywrightTimeout  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from tools.screenshots import CHROMIUM_ARGS, free_port, start_server, wait_idle, watch_runs  # noqa: E402

SENTENCE = "The cat sat on the mat because it was tired."
PROTEIN = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ"  # a short made-up protein (ESM-2's input is amino acids)
#: True once the page shows at least one chart, every chart has drawn its SVG and no element is still a skeleton.
CHARTS_DRAWN = """() => {
    const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
    return charts.length > 0 && document.querySelectorAll('[data-testid="stSkeleton"]').length === 0
        && charts.every(c => c.querySelector('svg.main-svg') !== null);
}"""

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
families = sys.argv[2:] or ["DistilBERT", "ESM-2", "ModernBERT"]
root = Path(tempfile.mkdtemp(prefix="bertgeom-families-"))
dirs = {f: save_family_model(f, root / f.replace("-", ""), num_labels=2) for f in families}
port = free_port()
server = start_server(port, env={"BERTGEOM_ALLOW_CUSTOM_MODELS": "1", "BERTGEOM_PREPARE_SETS": "0"})
try:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        for fam, d in dirs.items():
            text = PROTEIN if fam == "ESM-2" else SENTENCE
            for view in ("heads", "subspace", "cone"):
                page = b.new_page(viewport={"width": 1400, "height": int(os.environ.get("SHOT_HEIGHT", "2600"))})
                page.set_default_timeout(600_000)
                watch_runs(page)  # wait_idle then waits on the page's own script runs, not on time
                page.goto(f"http://127.0.0.1:{port}/?{urlencode({'view': view, 'model': str(d), 'text': text})}")
                wait_idle(page, 600_000)
                try:  # plotly draws after the script run ends (its code loads lazily): wait for every chart's SVG
                    page.wait_for_function(CHARTS_DRAWN, timeout=180_000, polling=200)
                except PlaywrightTimeout:
                    print(f"{fam} {view}: a chart had not drawn after 180 s; taken as it is", flush=True)
                name = f"screenshot_family_{fam.replace('-', '').lower()}_{view}.png"
                page.screenshot(path=str(out / name), full_page=True)
                print(out / name, flush=True)
                page.close()
        b.close()
finally:
    server.kill()
    shutil.rmtree(root, ignore_errors=True)
