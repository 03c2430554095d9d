"""A warm switch between tabs in one browser session, for the views of issue 44 whose warm time in a
*new* session (``bench/bench_followups_waits.py``) is mostly the page load: the Attention Heads page's
*Context mixing* tab, its head grid coloured by head importance, and the Subspace page's *Head-to-head
affinity* tab, on each model.

Each tab is opened once (its first use, not timed: computed, or read from what the server prepared),
then the page goes back to its baseline tab and to the view again, ``--repeats`` times; the seconds are
from the click to the end of the script run it started (``tools/screenshots.Runs``), the baseline tab's
switch timed the same way in the same run. The CPU is named beside the table.

Usage: ``python bench/bench_tab_switch.py [--models minilm-l6 sars-cov-2-variant] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_waits import fresh_server  # noqa: E402
from screenshots import Runs, watch_runs  # noqa: E402

BOUND_MS = 900_000
#: (page query, baseline tab, view tab)
SWITCHES = [("view=heads", "Head detail", "Context mixing"),
            ("view=subspace", "Weights (D4)", "Head-to-head affinity")]


def _switch(page, runs: Runs, tab: str) -> float:
    t0 = time.monotonic()
    runs.after(lambda: page.get_by_role("tab", name=tab).click(), BOUND_MS)
    return time.monotonic() - t0


#: The head grid's colour-by box, its first colour and the head-importance colour (a third warm switch).
COLOUR_BOX, FIRST_COLOUR, IMPORTANCE_COLOUR = ("Colour the grid by", "attention to previous token",
                                               "head importance |∂L/∂ξ| (Michel 2019)")


def _colour(page, runs: Runs, option: str) -> float:
    t0 = time.monotonic()
    runs.choose(page.get_by_role("combobox", name=COLOUR_BOX), option, BOUND_MS, typed=option[:12])
    return time.monotonic() - t0


def run(models: list[str], repeats: int) -> list[tuple[str, str, float, float]]:
    """``(model, view tab, median view switch s, median baseline switch s)`` per model and switch."""
    rows = []
    with fresh_server("bench_tab_switch_") as (base, browser):
        for model in models:
            for query, base_tab, view_tab in SWITCHES:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(BOUND_MS)
                watch_runs(page)
                runs = Runs(page)
                runs.after(lambda: page.goto(f"{base}/?{query}&model={model}"), BOUND_MS)
                _switch(page, runs, view_tab)  # first use: not timed
                view, back = [], []
                for _ in range(repeats):
                    back.append(_switch(page, runs, base_tab))
                    view.append(_switch(page, runs, view_tab))
                rows.append((model, view_tab, statistics.median(view), statistics.median(back)))
                print(f"{model:20s} {view_tab:24s} {rows[-1][2]:.2f} s (baseline {base_tab}: {rows[-1][3]:.2f} s)",
                      flush=True)
                if query == "view=heads":  # the grid coloured by head importance, and back
                    _colour(page, runs, IMPORTANCE_COLOUR)  # first use: not timed
                    view, back = [], []
                    for _ in range(repeats):
                        back.append(_colour(page, runs, FIRST_COLOUR))
                        view.append(_colour(page, runs, IMPORTANCE_COLOUR))
                    rows.append((model, "grid coloured by head importance", statistics.median(view),
                                 statistics.median(back)))
                    print(f"{model:20s} importance colour        {rows[-1][2]:.2f} s (back: {rows[-1][3]:.2f} s)",
                          flush=True)
                page.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["minilm-l6", "sars-cov-2-variant"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = run(args.models, args.repeats)
    from bertgeom.runtime import machine_line

    print("\n| model | view | warm switch to it (median) | switch back to the baseline tab (median) |")
    print("|---|---|---|---|")
    for model, tab, view_s, base_s in rows:
        print(f"| {model} | {tab} | {view_s:.2f} s | {base_s:.2f} s |")
    print(f"\n{machine_line()}; median of {args.repeats} switches in one browser session, from the click to the end "
          "of the script run it started.")


if __name__ == "__main__":
    main()
