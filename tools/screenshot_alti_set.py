"""Screenshot of the Context mixing tab's ALTI section over MiniLM's shipped set (issue 44), at 1400 px:
the tab opened by its link, the ALTI toggle switched on, the section from its heading down.

Usage: python tools/screenshot_alti_set.py OUT.png
"""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from playwright.sync_api import sync_playwright  # noqa: E402

from tools.screenshots import CHROMIUM_ARGS, free_port, start_server, wait_idle, watch_runs  # noqa: E402

URL = "?view=heads&model=minilm-l6&layer=3&head=10&heads_tab=Context+mixing"

out = Path(sys.argv[1])
port = free_port()
server = start_server(port, env={"BERTGEOM_PREPARE_SETS": "0"})
try:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = b.new_page(viewport={"width": 1400, "height": 1400})
        page.set_default_timeout(900_000)
        watch_runs(page)
        page.goto(f"http://127.0.0.1:{port}/{URL}")
        wait_idle(page, 900_000)
        page.locator("[data-testid='stCheckbox']").filter(has_text="Show ALTI over the shipped set").first.click()
        wait_idle(page, 900_000)
        page.wait_for_timeout(3000)  # the charts draw after the run
        # Streamlit scrolls inside its own container: bring the heading to the top, then shoot the viewport
        heading = page.get_by_text("Over the shipped set", exact=True).first
        heading.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(1000)
        top = max(0.0, heading.bounding_box()["y"] - 16)
        end = page.locator("[data-testid='stDownloadButton']").last.bounding_box()
        page.screenshot(path=str(out), clip={"x": 300, "y": top, "width": 1100,
                                             "height": end["y"] + end["height"] + 20 - top})
        print(out, flush=True)
        b.close()
finally:
    server.terminate()
    server.wait(timeout=20)
