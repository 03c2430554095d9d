"""Latency of the app as a user meets it, in a real browser (Playwright driving Debian's Chromium).

Every scenario is one user action timed from the action to the moment its result is on screen and
the page's script has finished (the text it waits for is in a visible element, every visible chart
has been drawn, and Streamlit's script state is idle), as the page itself saw it: the times are the
browser's own ``performance.now()`` at the action and at the first animation frame where the page was
complete (see :data:`COMPLETE`). The benchmark's waiting is cheap on purpose: Playwright's text
locators re-ran their selector engine over the whole page every frame, which on 2 cores took up to
half of the browser's main thread during a batch (a Chrome trace: 0.56 s of ``v8.callFunction`` in
a 0.9 s rerun) and slowed the very page it timed; and the 150 ms the benchmark waits to see that no
second rerun follows are not counted (a rerun that does follow is, up to its end).

Scenarios: home page complete after the server starts, a head clicked in the grid, a tab switched, a
genome pasted, a batch of 20 genomes, integrated gradients, each set view opened for the first time
(with the shipped sets prepared by ``python -m bertgeom prepare-sets``, which is timed too),
attention flow and the checkpoint comparison. Every scenario times one click: the feature
distributions are timed from the click on their option, the set tab opened (untimed) before.

* **cold**: the first time on a freshly started server (nothing computed in its memory; the set
  summaries prepared on disk, as after the project's set-up or the background preparation);
* **warm**: the same action again, in a new browser session on the same server.

Each scenario runs in its own browser context (a new session). p50 and p95 are over the repeats
(cold: one fresh server per repeat). The figures are wall-clock seconds on the machine it runs on,
beside the figures the issue measured before (``BEFORE``) on the 2-core development machine.

**Not prepared** (:func:`unprepared_scenarios`): every view that is usually prepared or computes over
a set, opened for the first time on a server whose cache is empty and whose background preparation
is off (``BERTGEOM_PREPARE_SETS=0``), one fresh server per repeat: the tour's first step from Home (the
server has loaded no model yet), then each set view with its model already loaded (the page is opened,
untimed, before the action that starts the computation: a tab, or the view's own *Run* switch). Two
times per view: from the action to the first frame a progress bar is visible (``—``: the view showed
none), and to its result on screen. The default model is MiniLM (its 24 sentences: minutes); ``--unprepared-model
sars-cov-2-variant`` measures the genome model (much longer: its sets are genomes of 1,273 codons).

Usage: ``python bench/bench_latency.py [--quick] [--repeats N] [--unprepared-repeats N] [--update-readme]``
(``--quick``: one cold server, two warm repeats, the subspace view's default head only, no
head-disabling view, one not-prepared pass: 11.8 minutes on 2 cores, 2026-12-02, prepare-sets 4 of
them; the full run about 40; ``--only-unprepared --unprepared-repeats 1``: 11.9 minutes on a busy
2-core machine). Results go to ``bench/out/latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
OUT = ROOT / "bench" / "out"
SPIKE = "sars-cov-2-variant"

#: What the issue measured before this work (seconds, 2-core machine, first use in Chromium).
BEFORE = {
    "home page complete after start": 9.4,
    "head click": 1.6,
    "Attention Heads: over a set of inputs": 63.0,
    "Cone Index: per class over a set": 63.0,
    "Subspace: across inputs, one head": 99.0,
    "integrated gradients (default genome)": 43.0,
    "attention flow (spike model)": 22.0,
    "compare checkpoints": 16.0,
}


#: Installed in every page before its scripts: the times Streamlit's script state changed.
WATCH_STATE = """
window.__bench = {states: []};
(function watch() {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app) { requestAnimationFrame(watch); return; }
  const log = () => window.__bench.states.push([performance.now(), app.getAttribute('data-test-script-state')]);
  log();
  new MutationObserver(log).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
})();
"""

#: Installed in the not-prepared runs too: the first frame (page clock) a progress bar is visible since
#: ``window.__bench.bar`` was last set to null (a cheap attribute query per frame, no text search).
WATCH_BAR = """
window.__bench = window.__bench || {states: []};
window.__bench.bar = null;
(function bars() {
  if (window.__bench.bar === null) {
    for (const b of document.querySelectorAll("[data-testid='stProgress']")) {
      if (b.checkVisibility()) { window.__bench.bar = performance.now(); break; }
    }
  }
  requestAnimationFrame(bars);
})();
"""

#: ``({texts, exact}) -> bool``, run once per animation frame while waiting: every text is in a
#: visible text node (``exact``: the node's whole trimmed text), every visible chart is drawn, and the
#: script is idle. The first frame where it holds is kept in ``window.__bench.complete``.
COMPLETE = """({texts, exact}) => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const left = new Set(texts);
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n && left.size; n = walk.nextNode()) {
    for (const t of left) {
      const hit = exact ? n.nodeValue.trim() === t : n.nodeValue.includes(t);
      if (hit && n.parentElement && n.parentElement.checkVisibility()) left.delete(t);
    }
  }
  if (left.size) return false;
  for (const c of document.querySelectorAll("[data-testid='stPlotlyChart']")) {
    if (c.checkVisibility() && !c.querySelector('.main-svg')) return false;
  }
  if (window.__bench.complete === undefined) window.__bench.complete = performance.now();
  return true;
}"""


def _now(page) -> float:
    """The page's clock (ms since its navigation started), read just before an action."""
    return page.evaluate("performance.now()")


def _settle(page, text: str | list[str], timeout_s: float, exact: bool = False, since: float = 0.0) -> float:
    """Wait until the page is complete (see :data:`COMPLETE`) and stays so for 150 ms (no second
    rerun follows); the seconds from ``since`` (the page's clock) to the first frame it was complete."""
    arg = {"texts": [text] if isinstance(text, str) else list(text), "exact": exact}

    def first_complete_frame() -> float:
        page.evaluate("delete window.__bench.complete")
        page.wait_for_function(COMPLETE, arg=arg, polling="raf", timeout=timeout_s * 1000)
        return page.evaluate("window.__bench.complete")

    done = first_complete_frame()
    while True:
        page.wait_for_timeout(150)  # untimed: a rerun that starts right after the page looked complete
        states = page.evaluate("window.__bench.states")
        if not any(t > done for t, _ in states):
            return (done - since) / 1000
        # a rerun followed: the page is done when it ended (if it is complete then), else when it became so
        done = (max(t for t, state in states if state == "notRunning") if page.evaluate(COMPLETE, arg)
                else first_complete_frame())


#: Resolves once the browser's main thread has had an idle moment (at most 3 s).
QUIET = "() => new Promise(done => requestAnimationFrame(() => requestIdleCallback(done, {timeout: 3000})))"


def _open(page, base: str, query: str, text: str, timeout_s: float, exact: bool = False) -> float:
    """Open ``query`` and wait until complete; seconds since the navigation started. Then, untimed,
    until the browser is idle: the page can look complete while it still draws (a 427 x 427 map),
    and a click made then waited for that drawing before its rerun was even asked for (0.1-0.8 s
    between the click and the request, measured) -- a visitor reads a page before clicking in it."""
    page.goto(f"{base}/{query}")
    secs = _settle(page, text, timeout_s, exact=exact)
    page.evaluate(QUIET)
    return secs


def _tab(page, name: str) -> None:
    page.get_by_role("tab", name=name).click()


def _genomes(n: int) -> str:
    from bertgeom.sars_cov_2.variant.spec import genome_set

    return "\n".join(it.text for it in genome_set()[:n])


def scenarios(quick: bool) -> list[tuple[str, object]]:
    """``(name, run(page, base, timeout) -> seconds)`` in the order a visitor might meet them."""
    from bertgeom.sars_cov_2.variant.spec import genome_set

    heads = f"?view=heads&model={SPIKE}&layer=1&head=1"

    def home(page, base, to):
        return _open(page, base, "", "Start here", to)

    def head_click(page, base, to):
        _open(page, base, heads, "L1 H1 — who attends to whom", to)
        grid = page.get_by_test_id("stPlotlyChart").first
        point = grid.locator(".scatterlayer .trace").first.locator(".point").nth(2 * 12 + 4)
        point.wait_for(state="visible", timeout=to * 1000)
        page.wait_for_timeout(1000)  # untimed: plotly has finished drawing and the page stopped moving
        box = point.bounding_box()
        t0 = _now(page)
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        return _settle(page, "L3 H5 — who attends to whom", to, since=t0)

    def tab_switch(page, base, to):
        _open(page, base, heads, "L1 H1 — who attends to whom", to)
        t0 = _now(page)
        _tab(page, "All heads")
        return _settle(page, "Every head: labels and features", to, since=t0)

    def paste(page, base, to, text=None, expect="Alpha —"):
        _open(page, base, f"?view=classifier&model={SPIKE}", "Verdict:", to)
        box = page.get_by_role("textbox", name="Genome or spike sequence")
        box.fill(text or genome_set("demo")[3].text)
        t0 = _now(page)
        box.press("Control+Enter")
        return _settle(page, expect, to, since=t0)

    def batch(page, base, to):
        return paste(page, base, to, _genomes(20), "20 records")

    def ig(page, base, to):
        _open(page, base, f"?view=classifier&model={SPIKE}", "Verdict:", to)
        t0 = _now(page)
        page.locator("[data-testid='stCheckbox'] label").filter(has_text="Integrated gradients").first.click()
        return _settle(page, "attributions sum to", to, since=t0)  # the completeness line under the track

    def heads_tab(tab, expect, radio=None, tab_done=None):
        """The tab clicked (timed), or with ``radio``: the tab opened untimed until ``tab_done`` is on
        screen and drawn, then the radio option clicked (timed): one click per scenario."""
        def run(page, base, to):
            _open(page, base, heads, "L1 H1 — who attends to whom", to)
            if radio:
                _tab(page, tab)
                _settle(page, tab_done, to)
                page.evaluate(QUIET)
            t0 = _now(page)
            if radio:
                page.locator("[data-testid='stRadio'] label").filter(has_text=radio).first.click()
            else:
                _tab(page, tab)
            return _settle(page, expect, to, exact=expect in ("Feature",), since=t0)
        return run

    def heads_set(page, base, to):
        return heads_tab("Over a set of inputs", "mean map of")(page, base, to)

    def cone_set(page, base, to):
        _open(page, base, f"?view=cone&model={SPIKE}", "Token set", to, exact=True)
        t0 = _now(page)
        page.locator("[data-testid='stButtonGroup'] button").filter(has_text="Per class over a set").first.click()
        return _settle(page, ["How the cone evolves for each class", "Stream"], to, since=t0)

    def subspace_set(page, base, to):
        _open(page, base, f"?view=subspace&model={SPIKE}&layer=1&head=1", "Weights (D4)", to)
        t0 = _now(page)
        _tab(page, "Across inputs")
        return _settle(page, "predicted correctly", to, since=t0)

    def disable_set(page, base, to):
        _open(page, base, heads, "L1 H1 — who attends to whom", to)
        t0 = _now(page)
        _tab(page, "Disable heads")
        page.locator("[data-testid='stRadio'] label").filter(has_text="Each head, over the set").first.click()
        return _settle(page, "Accuracy, all heads", to, since=t0)

    def tour(page, base, to):
        _open(page, base, "", "Start here", to)
        # untimed: the visitor reads the home page first (TOUR_READ_S), while the server imports torch
        # and transformers in the background; clicked at once on a just-started server, the tour waits
        # for those imports (~5 s on 2 cores: docs/benchmarks.md)
        page.wait_for_timeout(TOUR_READ_S * 1000)
        t0 = _now(page)
        page.get_by_role("button", name="Start the tour").click()
        return _settle(page, TOUR_DONE, to, since=t0)

    # the tour right after the home page, as a visitor meets it: on a cold server it loads MiniLM (later,
    # compare checkpoints finds that same-shape checkpoint loaded)
    out = [("home page complete after start", home), ("the tour's first step (MiniLM, home read 5 s)", tour),
           ("head click", head_click), ("tab switch", tab_switch),
           ("paste a genome", paste), ("batch of 20 genomes", batch),
           ("integrated gradients (default genome)", ig),
           ("Attention Heads: over a set of inputs", heads_set),
           ("Attention Heads: feature distributions over the set",
            heads_tab("Over a set of inputs", "Feature", radio="Feature distributions", tab_done="mean map of")),
           ("Cone Index: per class over a set", cone_set),
           ("Subspace: across inputs, one head", subspace_set)]
    if not quick:
        out.append(("Attention Heads: disabling over the set", disable_set))
    out += [("attention flow (spike model)", heads_tab("Attention flow", "After layer")),
            ("compare checkpoints", heads_tab("Compare checkpoints", "Cosine per head"))]
    return out


#: Seconds the tour scenario reads the home page before it clicks *Start the tour*.
TOUR_READ_S = 5

#: What the tour's first step shows when it is done: its sentence and the head's map below.
TOUR_DONE = ["strongest previous-token head is", "who attends to whom"]


def _since_bar(page, t0: float) -> float | None:
    """Seconds from ``t0`` (page clock) to the first visible progress bar after it, None if none was."""
    bar = page.evaluate("window.__bench.bar")
    return None if bar is None else max(0.0, (bar - t0) / 1000)


def unprepared_scenarios(model: str, quick: bool) -> list[tuple[str, object]]:
    """``(name, run(page, base, timeout) -> (seconds to the first progress bar or None, seconds to the
    result))``: the views usually prepared, or computed over a set, on a server that has prepared
    nothing. The tour comes first (it loads its model on this fresh server); every other view's page is
    opened untimed first, so its model is loaded and the time is the view's own work."""
    heads = f"?view=heads&model={model}&layer=1&head=1"
    subspace = f"?view=subspace&model={model}&layer=1&head=1"
    encoder = model != SPIKE

    def timed(page, action, expect, to, exact=False):
        page.evaluate("window.__bench.bar = null")
        t0 = _now(page)
        action()
        result = _settle(page, expect, to, exact=exact, since=t0)
        return _since_bar(page, t0), result

    def tour(page, base, to):
        _open(page, base, "", "Start here", to)
        return timed(page, lambda: page.get_by_role("button", name="Start the tour").click(), TOUR_DONE, to)

    def heads_set(page, base, to):
        _open(page, base, heads, "L1 H1 — who attends to whom", to)
        return timed(page, lambda: _tab(page, "Over a set of inputs"), "mean map of", to)

    def qk_set(page, base, to):
        _open(page, base, heads, "L1 H1 — who attends to whom", to)
        return timed(page, lambda: _tab(page, "Queries & keys over a set"), "How well distance reads as attention", to)

    def cone_set(page, base, to):
        _open(page, base, f"?view=cone&model={model}", "Token set", to, exact=True)
        button = page.locator("[data-testid='stButtonGroup'] button").filter(has_text="Per class over a set").first
        return timed(page, button.click, "Histograms per layer", to)

    def subspace_set(page, base, to):
        _open(page, base, subspace, "Weights (D4)", to)
        _tab(page, "Across inputs")
        switch = page.locator("[data-testid='stCheckbox'] label").filter(has_text="Compute for L1 H1 over")
        switch.first.wait_for(state="visible", timeout=to * 1000)
        return timed(page, switch.first.click, "Per-input values", to)

    def faithful(page, base, to):
        _open(page, base, subspace, "Weights (D4)", to)
        return timed(page, lambda: _tab(page, "Faithful vs correct"), "Faithful vs model, every head", to)

    def disable_set(page, base, to):
        _open(page, base, heads, "L1 H1 — who attends to whom", to)
        _tab(page, "Disable heads")
        page.locator("[data-testid='stRadio'] label").filter(has_text="Each head, over the set").first.click()
        run = page.get_by_role("button", name="Run over the set")
        run.wait_for(state="visible", timeout=to * 1000)
        done = "Heads whose loss moves [CLS] most" if encoder else "Accuracy, all heads"
        return timed(page, run.click, done, to)

    out = [("the tour's first step (MiniLM, model not loaded yet, clicked at once)", tour),
           ("Attention Heads: over a set of inputs", heads_set),
           ("Attention Heads: queries & keys over a set", qk_set),
           ("Cone Index: per class over a set", cone_set),
           ("Subspace: across inputs, one head", subspace_set),
           ("Subspace: faithful vs correct (one input, padded to 512)", faithful)]
    if not quick:
        out.append(("Attention Heads: disabling over the set", disable_set))
    return out


def run_unprepared_pass(model: str, quick: bool, timeout_s: float, log) -> dict[str, tuple]:
    """One fresh server on an empty cache with the background preparation off: every view of
    :func:`unprepared_scenarios` once, in its own browser session. ``{name: (bar_s, result_s)}``."""
    from playwright.sync_api import sync_playwright
    from screenshots import CHROMIUM_ARGS, free_port, start_server

    cache = Path(tempfile.mkdtemp(prefix="bertgeom-latency-unprepared-"))
    port = free_port()
    server = start_server(port, env={"BERTGEOM_CACHE_DIR": str(cache), "BERTGEOM_PREPARE_SETS": "0"})
    base = f"http://127.0.0.1:{port}"
    out: dict[str, tuple] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                        args=CHROMIUM_ARGS)
            for name, run in unprepared_scenarios(model, quick):
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                ctx.add_init_script(WATCH_STATE)
                ctx.add_init_script(WATCH_BAR)
                page = ctx.new_page()
                try:
                    out[name] = run(page, base, timeout_s)
                    bar, res = out[name]
                    log(f"not prepared: bar {'—' if bar is None else f'{bar:.2f} s'}, result {res:7.2f} s  {name}")
                except Exception as exc:  # a failed view is reported, the others still run
                    log(f"not prepared:  FAILED  {name}: {type(exc).__name__}: {str(exc)[:160]}")
                finally:
                    ctx.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(cache, ignore_errors=True)
    return out


def prepare(cache: Path, quick: bool) -> float:
    """``prepare-sets`` for the spike model into ``cache`` (timed, seconds)."""
    cmd = [sys.executable, "-m", "bertgeom", "prepare-sets", "--model", SPIKE]
    if quick:
        cmd += ["--subspace-heads", "1", "--no-sweeps"]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, env={**os.environ, "BERTGEOM_CACHE_DIR": str(cache)},
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def run_server_pass(cache: Path, plan, warm_repeats: int, timeout_s: float, log) -> dict[str, dict[str, list]]:
    """One fresh server: every scenario once cold, then ``warm_repeats`` times warm."""
    from playwright.sync_api import sync_playwright
    from screenshots import CHROMIUM_ARGS, free_port, start_server

    port = free_port()
    server = start_server(port, env={"BERTGEOM_CACHE_DIR": str(cache), "BERTGEOM_PREPARE_SETS": "0"})
    base = f"http://127.0.0.1:{port}"
    times: dict[str, dict[str, list]] = {name: {"cold": [], "warm": []} for name, _ in plan}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                        args=CHROMIUM_ARGS)
            for rep in range(1 + warm_repeats):
                mode = "cold" if rep == 0 else "warm"
                for name, run in plan:
                    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                    ctx.add_init_script(WATCH_STATE)
                    page = ctx.new_page()
                    try:
                        secs = run(page, base, timeout_s)
                        times[name][mode].append(secs)
                        log(f"{mode:4s} {secs:7.2f} s  {name}")
                    except Exception as exc:  # a failed step is reported, the others still run
                        log(f"{mode:4s}  FAILED  {name}: {type(exc).__name__}: {str(exc)[:160]}")
                    finally:
                        ctx.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return times


def percentile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    import numpy as np

    return float(np.percentile(np.asarray(xs), q))


def summarise(all_times: dict, prepare_s: float) -> dict:
    rows = []
    for name, modes in all_times.items():
        row = {"view": name, "before_s": BEFORE.get(name)}
        for mode in ("cold", "warm"):
            xs = modes[mode]
            row[mode] = {"n": len(xs), "p50": percentile(xs, 50), "p95": percentile(xs, 95)}
        rows.append(row)
    from bertgeom.runtime import machine_line

    return {"rows": rows, "prepare_sets_s": prepare_s, "machine": f"machine: {machine_line()}",
            "date": time.strftime("%Y-%m-%d")}


def summarise_unprepared(passes: list[dict[str, tuple]], model: str) -> dict:
    """Per view: the first progress bar and the result, p50 and p95 over the fresh servers."""
    names = list(dict.fromkeys(n for p in passes for n in p))
    rows = []
    for name in names:
        got = [p[name] for p in passes if name in p]
        bars = [b for b, _ in got if b is not None]
        rows.append({"view": name, "n": len(got), "bars_shown": len(bars),
                     "bar_p50": percentile(bars, 50), "bar_p95": percentile(bars, 95),
                     "p50": percentile([r for _, r in got], 50), "p95": percentile([r for _, r in got], 95)})
    return {"model": model, "rows": rows}


def readme_block(res: dict, command: str) -> str:
    def f(x):
        return "—" if x is None else f"{x:.1f} s"

    lines = ["| first use | measured before | cold p50 / p95 | warm p50 / p95 | repeats (cold, warm) |",
             "|---|---|---|---|---|"]
    for r in res["rows"]:
        c, w = r["cold"], r["warm"]
        lines.append(f"| {r['view']} | {f(r['before_s'])} | {f(c['p50'])} / {f(c['p95'])} | "
                     f"{f(w['p50'])} / {f(w['p95'])} | {c['n']}, {w['n']} |")
    lines.append("")
    prep = (f"{res['prepare_sets_s']:.0f} s for the spike model in this run" if res.get("prepared_fresh", True)
            else "reused from an earlier run")
    lines.append(f"Seconds in Chromium from the action to its result on screen, {res['machine']}, {res['date']}; "
                 "cold = first use on a freshly started server, warm = again in a new session. The set views "
                 f"read the summaries `python -m bertgeom prepare-sets` wrote ({prep}). `{command}`.")
    un = res.get("unprepared")
    if un and un["rows"]:
        lines += ["", "| not prepared (first use, empty cache) | first progress bar p50 / p95 | result p50 / p95 | "
                      "servers (bar shown) |", "|---|---|---|---|"]
        for r in un["rows"]:
            lines.append(f"| {r['view']} | {f(r['bar_p50'])} / {f(r['bar_p95'])} | {f(r['p50'])} / {f(r['p95'])} | "
                         f"{r['n']} ({r['bars_shown']}) |")
        lines.append("")
        lines.append(f"The same views on a server that has prepared nothing ({un['model']}; empty cache, background "
                     f"preparation off), {res['machine']}: seconds from the action that starts the work to the first "
                     "frame a progress bar is visible (— where none was), and to the result on screen. The tour "
                     "comes first on a fresh server, so it includes loading its model; every other view's page was "
                     "opened (untimed) before, so its model was loaded. Every bar shows the time left and a "
                     "*Cancel*.")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one cold server, two warm repeats (< 10 min on 2 cores)")
    ap.add_argument("--repeats", type=int, default=None, help="cold servers (default 3, quick 1)")
    ap.add_argument("--warm", type=int, default=None, help="warm repeats per server (default 3, quick 2)")
    ap.add_argument("--cache-dir", default=None, help="a prepared cache to reuse (default: a fresh one, prepared here)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds one step may take")
    ap.add_argument("--unprepared-model", default="minilm-l6",
                    help="the model of the not-prepared views (default MiniLM; the genome model takes much longer)")
    ap.add_argument("--unprepared-repeats", type=int, default=None,
                    help="fresh servers for the not-prepared views (default 3, quick 1; 0 skips them)")
    ap.add_argument("--only-unprepared", action="store_true",
                    help="only the not-prepared views (no prepare-sets, no prepared table; nothing written to docs)")
    ap.add_argument("--update-readme", action="store_true")
    args = ap.parse_args(argv)
    cold = args.repeats or (1 if args.quick else 3)
    warm = args.warm if args.warm is not None else (2 if args.quick else 3)

    def log(msg):
        print(msg, flush=True)

    tmp = None
    if args.cache_dir:
        cache = Path(args.cache_dir)
    else:
        tmp = tempfile.mkdtemp(prefix="bertgeom-latency-")
        cache = Path(tmp)
    unprepared = args.unprepared_repeats if args.unprepared_repeats is not None else (1 if args.quick else 3)
    t_start = time.perf_counter()
    try:
        all_times: dict = {}
        prepare_s = 0.0
        if not args.only_unprepared:
            prepare_s = prepare(cache, args.quick)
            log(f"prepare-sets: {prepare_s:.1f} s")
            plan = scenarios(args.quick)
            all_times = {name: {"cold": [], "warm": []} for name, _ in plan}
            for _ in range(cold):
                for name, modes in run_server_pass(cache, plan, warm, args.timeout, log).items():
                    for m in modes:
                        all_times[name][m] += modes[m]
        res = summarise(all_times, prepare_s)
        res["prepared_fresh"] = tmp is not None
        passes = [run_unprepared_pass(args.unprepared_model, args.quick, args.timeout * 3, log)
                  for _ in range(unprepared)]
        res["unprepared"] = summarise_unprepared(passes, args.unprepared_model)
        res["runtime_s"] = time.perf_counter() - t_start
        log(f"benchmark runtime: {res['runtime_s'] / 60:.1f} min")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latency.json").write_text(json.dumps(res, indent=2))
    command = "python bench/bench_latency.py" + (" --quick" if args.quick else "") + " --update-readme"
    block = readme_block(res, command)
    print(res["machine"])
    print(block)
    if args.update_readme and args.only_unprepared:
        print("--only-unprepared writes no docs (the block needs the prepared table too)")
    elif args.update_readme:
        from bench.readme_blocks import replace_block

        replace_block("latency", block, heading="### Latency in the browser")
    return 0


if __name__ == "__main__":
    sys.exit(main())
