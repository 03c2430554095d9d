"""The slow views of #45 in Chromium, cold and warm, with the time their first sign of work appeared.

Usage: ``python bench/bench_waits.py [--models minilm-l6 sars-cov-2-variant] [--update-docs]``

Starts a server on a fresh cache (background preparation on, as a user's server runs), then per
model opens each view once on that server (cold: first use, nothing computed yet) and once more in
a new browser session (warm: the server has it). Each action is timed from the action to the end of
the script runs it started, from the page's own run state (``tools/screenshots.WAIT_WATCH_JS``,
no pauses), with the time the page's spinner or progress bar first showed. The targets (#45):
a warm click within 2 s; a first view within 5 s, or behind a sign of work shown within 1.5 s.
``--update-docs`` writes the table into docs/benchmarks.md between ``<!-- waits:start -->`` and
``<!-- waits:end -->``, naming the machine (``bertgeom.runtime.machine_line()``).
"""

from __future__ import annotations

import argparse
import shutil
from contextlib import contextmanager
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
from screenshots import CHROMIUM_ARGS, WAIT_WATCH_JS, Runs, free_port, start_server  # noqa: E402

BOUND_MS = 1_200_000
QK = "Queries+%26+keys+over+a+set"


@contextmanager
def fresh_server(prefix: str):
    """A server on a fresh disk cache (background preparation on, as a user's server runs) and Chromium:
    ``(base URL, browser)``; both stopped and the cache removed afterwards."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    cache = tempfile.mkdtemp(prefix=prefix)
    server = start_server(port, {"BERTGEOM_CACHE_DIR": cache})
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
            yield f"http://127.0.0.1:{port}", browser
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(cache, ignore_errors=True)


def _radio(page, group: str, option: str):
    return lambda: page.get_by_test_id("stRadio").filter(has_text=group).get_by_text(option, exact=True).click()


def views(model: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """``(name, url query, [(step name, radio option), ...])``: a view opened by its link, then clicked."""
    return [
        ("Queries & keys over a set, first open (PCA)", f"view=heads&model={model}&heads_tab={QK}",
         [("its UMAP", "UMAP"), ("its t-SNE", "t-SNE")]),
        ("Cone Index: IsoScore beside the cone", f"view=cone&model={model}&w_cone_section=isotropy", []),
        ("Compare two inputs", f"view=heads&model={model}&heads_tab=Compare+two+inputs", []),
        ("Subspace: This input (D1–D3)", f"view=subspace&model={model}&w_sub_tab=This+input+%28D1%E2%80%93D3%29", []),
    ]


def _measure(page, runs: Runs, action) -> tuple[float, float | None]:
    """Seconds from ``action`` to the end of the runs it started, and to the first sign of work."""
    before = page.evaluate("() => window.__bertgeomWaits.runs.length")
    t0 = time.monotonic()
    runs.after(action, BOUND_MS)
    total = time.monotonic() - t0
    new = page.evaluate("(n) => window.__bertgeomWaits.runs.slice(n)", before)
    seen = [r["seen"] / 1000 for r in new if r["seen"] is not None]
    return total, (min(seen) if seen else None)


def run(models: list[str], views_of=None) -> list[dict]:
    """Each model's views (``views_of(model)``, default :func:`views`) cold, then warm, on one server."""
    views_of = views_of or views
    rows = []
    with fresh_server("bench_waits_") as (base, browser):
        for model in models:
            warmup = browser.new_page()
            Runs(warmup).after(lambda: warmup.goto(f"{base}/?view=heads&model={model}"), BOUND_MS)  # model loaded
            warmup.close()
            for label in ("cold", "warm"):
                for name, query, steps in views_of(model):
                    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                    ctx.add_init_script(script=WAIT_WATCH_JS)
                    page = ctx.new_page()
                    page.set_default_timeout(BOUND_MS)
                    runs = Runs(page)
                    done = [(name, *_measure(page, runs, lambda: page.goto(f"{base}/?{query}")))]
                    for step, option in steps:
                        done.append((f"{name.split(',')[0]}: {step}",
                                     *_measure(page, runs, _radio(page, "Projection", option))))
                    for view_name, total, seen in done:
                        rows.append({"model": model, "view": view_name, "when": label, "s": total, "sign": seen})
                        print(f"{model:20s} {label} {total:6.1f} s  sign {seen}  {view_name}", flush=True)
                    ctx.close()
    return rows


def table(rows: list[dict]) -> str:
    from bertgeom.runtime import machine_line

    by = {}
    for r in rows:
        by.setdefault((r["model"], r["view"]), {})[r["when"]] = r
    out = ["| model | view | first view (cold) | sign of work at | warm (new session) | targets |",
           "|---|---|---|---|---|---|"]
    for (model, view), w in by.items():
        cold, warm = w.get("cold"), w.get("warm")
        sign = "—" if cold is None or cold["sign"] is None else f"{cold['sign']:.1f} s"
        first_ok = cold is not None and (cold["s"] <= 5 or (cold["sign"] is not None and cold["sign"] <= 1.5))
        warm_ok = warm is not None and warm["s"] <= 2
        verdict = ("first " + ("within 5 s" if cold and cold["s"] <= 5 else "behind progress" if first_ok else "MISSED")
                   + "; warm " + ("within 2 s" if warm_ok else "MISSED"))
        out.append(f"| {model} | {view} | {cold['s']:.1f} s | {sign} | {warm['s']:.1f} s | {verdict} |"
                   if cold and warm else f"| {model} | {view} | — | — | — | not measured |")
    out.append("")
    out.append(f"Seconds in Chromium from the action to the end of the script runs it started; machine: "
               f"{machine_line()}, {time.strftime('%Y-%m-%d')}; cold = first use on a freshly started server "
               "(fresh cache, background preparation on), warm = again in a new session. "
               "`python bench/bench_waits.py --update-docs`.")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["minilm-l6", "sars-cov-2-variant"])
    ap.add_argument("--update-docs", action="store_true")
    args = ap.parse_args()
    text = table(run(args.models))
    print(text)
    if args.update_docs:
        write_docs_table("waits", "Waits with a sign of work (#45)", text)


def write_docs_table(marker: str, heading: str, text: str) -> None:
    """Put ``text`` into docs/benchmarks.md between ``<!-- MARKER:start -->`` and ``<!-- MARKER:end -->``,
    or append it under ``heading`` when the markers are not there yet."""
    doc = ROOT / "docs" / "benchmarks.md"
    body = doc.read_text()
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    if start in body:
        body = body[: body.index(start) + len(start)] + "\n" + text + "\n" + body[body.index(end):]
    else:
        body += f"\n## {heading}\n\n{start}\n{text}\n{end}\n"
    doc.write_text(body)


if __name__ == "__main__":
    main()
