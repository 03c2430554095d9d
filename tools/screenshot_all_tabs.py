"""Screenshot every tab of every page at 1400 px, to look at before a change lands.

Usage: python tools/screenshot_all_tabs.py OUT_DIR [home heads subspace cone classifier methods rna across minilm]
Starts the app on a free port, opens each page of PLAN (below) on the default models, clicks
through its tabs and switches (the tabs and sections read from each page's registry), and saves one
full-page PNG per step (``SHOT_HEIGHT`` px tall, default 3000). ``rna`` pastes a genome written with
U and visits every page (the reading note must read the same on each). A step that fails is printed
and skipped.
"""
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.screenshots import CHROMIUM_ARGS, free_port, start_server, wait_idle
from playwright.sync_api import sync_playwright

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
only = set(sys.argv[2:])
from bertgeom.sars_cov_2.variant.spec import genome_set
_g = genome_set("demo")[3].text.splitlines()
RNA = "\n".join([_g[0]] + [ln.replace("T", "U") for ln in _g[1:]])
#: A step's first character -> what it clicks (the rest of the step is the element's text).
CLICKABLE = {"@": "[data-testid='stRadio'] label", "#": "[data-testid='stButtonGroup'] button",
             "!": "[data-testid='stCheckbox'] label", ">": "[data-testid='stSidebarNav'] a"}

def shot(page, name):
    wait_idle(page, 600_000)
    page.wait_for_timeout(2500)
    page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    print(name, flush=True)

def tab(page, name):
    page.get_by_role("tab", name=name).click()
    page.wait_for_timeout(500)

from bertgeom.ui.cone import SECTIONS as CONE_SECTIONS
from bertgeom.ui.heads import TABS as HEADS_TABS
from bertgeom.ui.subspace import TABS as SUBSPACE_TABS

# Every tab and section comes from its page's registry, so a new one is photographed without an edit here.
HEADS_STEPS = [t.title for t in HEADS_TABS]
HEADS_STEPS[HEADS_STEPS.index("Over a set of inputs") + 1:1] = ["@Feature distributions", "@Domain proportions"]
PLAN = {
  "home": [("?view=home", [])],
  "heads": [("?view=heads", HEADS_STEPS)],
  "subspace": [("?view=subspace", [t.title for t in SUBSPACE_TABS])],
  "cone": [("?view=cone", [f"#{s.title}" for s in CONE_SECTIONS])],
  "classifier": [("?view=classifier", ["!Integrated gradients"])],
  "methods": [("?view=methods", [])],
  "rna": [("?view=classifier", ["rna", ">Attention Heads", ">Cone Index per Layer", ">Variant Classifier"])],
  "across": [("?view=subspace", ["Across inputs", "!Compute for"])],
  "minilm": [("?view=heads&model=minilm-l6&layer=3&head=10", ["Head detail", "Over a set of inputs",
                                                              "@Feature distributions"])],
}
port = free_port(); server = start_server(port)
try:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        for key, items in PLAN.items():
            if only and key not in only:
                continue
            for path, steps in items:
                page = b.new_page(viewport={"width": 1400, "height": int(os.environ.get("SHOT_HEIGHT", "3000"))})
                page.set_default_timeout(600_000)
                page.goto(f"http://127.0.0.1:{port}/{path}")
                shot(page, f"{key}_00_page")
                for i, s in enumerate(steps, 1):
                    t0 = time.time()
                    try:
                        if s[:1] in CLICKABLE:
                            page.locator(CLICKABLE[s[:1]]).filter(has_text=s[1:]).first.click(timeout=30000)
                        elif s.startswith("rna"):
                            box = page.locator("[data-testid='stSidebar'] textarea").first
                            box.fill(RNA)
                            box.press("Control+Enter")
                        else:
                            page.get_by_role("tab", name=s).click(timeout=30000)
                        shot(page, f"{key}_{i:02d}_" + "".join(c if c.isalnum() else "_" for c in s.strip("@#"))[:40])
                    except Exception as e:
                        print("FAILED", key, s, type(e).__name__, str(e)[:200], flush=True)
                    print(f"  {time.time()-t0:.0f}s", flush=True)
                page.close()
        b.close()
finally:
    server.terminate(); server.wait(timeout=20)
