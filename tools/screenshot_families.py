"""Screenshot Attention Heads, Subspace Directions and Cone Index on a tiny random DistilBERT, ESM-2 and
ModernBERT (tests/family_models.py), to look at what the pages say for families beyond BERT.

Usage: python tools/screenshot_families.py OUT_DIR [family ...]
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from family_models import save_family_model  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from tools.screenshots import CHROMIUM_ARGS, free_port, start_server, wait_idle  # noqa: E402

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
            for view in ("heads", "subspace", "cone"):
                page = b.new_page(viewport={"width": 1400, "height": int(os.environ.get("SHOT_HEIGHT", "2400"))})
                page.set_default_timeout(600_000)
                page.goto(f"http://127.0.0.1:{port}/?view={view}&model={quote(str(d))}")
                wait_idle(page, 600_000)
                page.wait_for_timeout(2500)
                name = f"{fam.replace('-', '')}_{view}.png"
                page.screenshot(path=str(out / name), full_page=True)
                print(name, flush=True)
                page.close()
        b.close()
finally:
    server.kill()
