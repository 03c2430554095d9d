"""Screenshots of the rank-collapse section, the head-to-head affinity tab, head confidence and importance
(the grid's colours, this input's and the shipped set's) and the Context mixing tab (issue 44), on the
genome model and on MiniLM, with MiniLM's set parts computed, at 1400 px.

Usage: python tools/screenshot_collapse_affinity_importance.py OUT_DIR [STEP ...]   (default: every step)
"""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from playwright.sync_api import sync_playwright  # noqa: E402

from tools.screenshots import CHROMIUM_ARGS, free_port, start_server, wait_idle  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
only = set(sys.argv[2:])


def shot(page, name, height=None):
    wait_idle(page, 900_000)
    page.wait_for_timeout(2500)
    page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    print(name, flush=True)


def press_compute(page):
    button = page.locator("[data-testid='stButton'] button").filter(has_text="Compute over the")
    if button.count():
        button.first.click(timeout=60_000)
        page.wait_for_timeout(1500)


def colour_by(page, option):
    box = page.locator("[data-testid='stSelectbox']").filter(has_text="Colour the grid by").first
    box.click()
    page.keyboard.type(option)
    page.keyboard.press("Enter")
    page.wait_for_timeout(800)


STEPS = [  # (name, url, action)
    ("collapse_genome", "?view=cone&w_cone_section=collapse", None),
    ("collapse_minilm_set", "?view=cone&model=minilm-l6&w_cone_section=collapse", press_compute),
    ("affinity_genome", "?view=subspace&w_sub_tab=Head-to-head+affinity", None),
    ("affinity_minilm", "?view=subspace&model=minilm-l6&w_sub_tab=Head-to-head+affinity", None),
    ("importance_grid_genome", "?view=heads", lambda p: colour_by(p, "head importance")),
    ("confidence_grid_minilm", "?view=heads&model=minilm-l6", lambda p: colour_by(p, "head confidence")),
    ("importance_tab_minilm_set", "?view=heads&model=minilm-l6&heads_tab=Gradient+importance", press_compute),
    ("importance_tab_genome", "?view=heads&heads_tab=Gradient+importance", None),
    ("importance_set_grid_minilm", "?view=heads&model=minilm-l6&colour=importance%3Amichel-set", press_compute),
    ("context_mixing_minilm", "?view=heads&model=minilm-l6&layer=3&head=10&heads_tab=Context+mixing", None),
    ("context_mixing_genome", "?view=heads&layer=5&heads_tab=Context+mixing", None),
]

#: Steps whose page is longer than the default 2400 px viewport (Streamlit scrolls inside the page, so a
#: full-page shot holds only the viewport).
HEIGHT = {"context_mixing_minilm": 3200, "context_mixing_genome": 4200}

port = free_port()
server = start_server(port)
try:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=CHROMIUM_ARGS)
        for name, url, action in STEPS:
            if only and name not in only:
                continue
            page = b.new_page(viewport={"width": 1400, "height": HEIGHT.get(name, 2400)})
            page.set_default_timeout(900_000)
            try:
                page.goto(f"http://127.0.0.1:{port}/{url}")
                wait_idle(page, 900_000)
                if action:
                    action(page)
                shot(page, name)
            except Exception as e:  # noqa: BLE001 - a failed step is printed and skipped
                print("FAILED", name, type(e).__name__, str(e)[:200], flush=True)
            page.close()
        b.close()
finally:
    server.terminate()
    server.wait(timeout=20)
