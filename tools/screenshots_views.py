"""Screenshots (1400 px wide) of the views of issue 24 for docs/ and the README.

Usage: python tools/screenshots_views.py [OUT_DIR] [NAME ...]   (default OUT_DIR: docs)
Starts ``streamlit run app.py`` on a free port, opens each view by its URL (tabs and settings are
in the URL), does what the view is about (hover a token, search a token, walk the tour) and saves
``screenshot_<name>.png`` with the view's part of the page on screen.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from screenshots import CHROMIUM_ARGS, free_port, start_server, wait_idle  # noqa: E402

HEADS = "/?view=heads&model=minilm-l6&layer=2&head=3&example=1"


def _top(page, locator) -> None:
    """Scroll so ``locator`` sits near the top of the viewport."""
    locator.first.scroll_into_view_if_needed()
    page.evaluate("(y) => document.querySelector('[data-testid=stMain]').scrollBy(0, y)", 0)
    locator.first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(600)


def head_view(page, base):
    page.goto(base + HEADS + "&heads_tab=Head+view")
    wait_idle(page)
    _top(page, page.get_by_role("tablist"))
    frame = page.frame_locator("iframe[title='st.iframe']").first
    frame.locator("g.token[data-side=q][data-i='3']").hover()
    page.wait_for_timeout(400)


def model_view(page, base):
    from urllib.parse import quote

    from bertgeom.ui.heads.model_view import IMPORTANCE

    page.goto(base + HEADS + "&heads_tab=Model+view&w_mv_importance=" + quote(IMPORTANCE["disable"]))
    wait_idle(page, 300_000)
    _top(page, page.get_by_role("tablist"))


def qk_set(page, base):
    page.goto(base + HEADS + "&heads_tab=Queries+%26+keys+over+a+set&w_qk_search=the")
    wait_idle(page, 300_000)
    _top(page, page.get_by_text("Search a token or k-mer"))


def isoscore(page, base):
    page.goto(base + "/?view=cone&model=minilm-l6&example=1&w_cone_section=isotropy")
    wait_idle(page, 300_000)
    _top(page, page.get_by_text("IsoScore beside the cone index"))


def methods(page, base):
    page.goto(base + "/?view=methods&section=5")
    wait_idle(page)


def tour_home(page, base):
    page.goto(base + "/")
    wait_idle(page)


def tour_genome(page, base):
    page.goto(base + "/")
    wait_idle(page)
    page.get_by_role("button", name="Start the tour").click()
    wait_idle(page)
    while page.get_by_role("button", name="Next ▶").count():
        page.get_by_role("button", name="Next ▶").click()
        wait_idle(page, 600_000)


def tour_genome_whatif(page, base):
    tour_genome(page, base)
    _top(page, page.get_by_text("What if? In-silico mutagenesis"))


def domain_proportions(page, base):
    page.goto(base + "/?view=heads&model=sars-cov-2-variant&genome=8&heads_tab=Over+a+set+of+inputs"
              "&w_set_view=Domain+proportions")
    wait_idle(page, 900_000)
    _top(page, page.get_by_role("tablist"))


SHOTS = {f.__name__: f for f in (head_view, model_view, qk_set, isoscore, methods, tour_home, tour_genome,
                                 tour_genome_whatif, domain_proportions)}


def main(out_dir: str = "docs", names: list[str] | None = None) -> None:
    from playwright.sync_api import sync_playwright

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
            for name in names or list(SHOTS):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(120_000)
                SHOTS[name](page, base)
                page.wait_for_timeout(2500)  # charts draw after the run
                page.screenshot(path=str(out / f"screenshot_{name}.png"))
                print(out / f"screenshot_{name}.png")
                page.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs", sys.argv[2:] or None)
