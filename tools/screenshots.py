"""Take headless-Chromium screenshots of the app's pages (for the README and reviews).

Usage: python tools/screenshots.py OUT_DIR [PATH_AND_QUERY ...]
Starts ``streamlit run app.py`` on a free port, opens each path (default: home and the
Attention Heads page with the example sentence) and saves full-page PNGs.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true"]
    log_path = Path(os.environ.get("BERTGEOM_SERVER_LOG", "/tmp/bertgeom-streamlit.log"))
    log = open(log_path, "ab")  # server output, for debugging a failed browser run
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 600  # an upper bound for a busy machine: the loop ends when the server answers
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("streamlit did not become healthy (exited, or not within 600 s)")


#: Upper bound of a browser test's wait on a busy 2-core machine: every wait ends on its event (an
#: element, a finished run), this only turns a hang into a failure.
BOUND_MS = 600_000

#: The app's state attribute once a script run has finished and no other is running.
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def _finished_run(payload) -> bool:
    """Whether a websocket frame from the server is a ``script_finished`` message of a run that
    ended (not one cut short by a newer rerun)."""
    if isinstance(payload, str):
        return False
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    msg = ForwardMsg()
    try:
        msg.ParseFromString(payload)
    except Exception:  # noqa: BLE001 - not a ForwardMsg
        return False
    return (msg.WhichOneof("type") == "script_finished"
            and msg.script_finished != ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN)


class Runs:
    """The app's script runs as the page's own websocket reports them: waits for *the* run an
    action starts, however busy the machine, instead of guessing with a pause. Attach before the
    first ``goto``."""

    def __init__(self, page):
        self.page = page
        self.finished = 0
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if _finished_run(payload):
            self.finished += 1

    def after(self, action, timeout_ms: int = 600_000) -> None:
        """Do ``action`` (a ``goto``, a click that reruns the script...), then wait until a run that
        the page asked for after the action began has finished and the app is idle.

        On a page that counts its runs (``watch_runs``) the request itself is seen, in the page, so
        a run asked for late (a slider's debounce) or a previous run's late finish cannot satisfy
        the wait; elsewhere, a finished run reported after the action (the page's websocket as
        Playwright relays it)."""
        if self.page.evaluate("() => window.__bertgeomRuns !== undefined"):
            before = self.page.evaluate("() => [window.__bertgeomRuns.page, window.__bertgeomRuns.seq]")
            action()
            self.page.wait_for_function(
                """([idle, page, seq]) => { const r = window.__bertgeomRuns;
                     if (r === undefined) return false;
                     const asked = r.page === page ? r.requested > seq : r.requested > 0;  // a new document
                     return asked && r.finished > r.requested && document.querySelector(idle) !== null; }""",
                arg=[IDLE, *before], timeout=timeout_ms, polling=50)
            return
        seen = self.finished
        action()
        self._wait_after(seen, timeout_ms)

    def choose(self, box, option_name: str, timeout_ms: int = 600_000, *, typed: str | None = None) -> None:
        """Pick ``option_name`` in a selectbox or multiselect (``box``: its combobox or input; ``typed``:
        text to type first, to filter a long list), then wait for the run it asks for, as ``after``.

        On a busy machine a click can land while the menu re-renders: the menu stays open, the option
        stays unselected and no run is asked for, so a plain ``after`` waits for ever. The page's own
        state right after the click tells the two apart (a click's handler and React's commit run in
        the click's own task, before the next evaluate): a run asked for, or the box showing the option,
        is the pick; anything else is a click that did nothing, made again. Needs
        ``watch_runs``."""
        option = self.page.get_by_role("option", name=option_name, exact=True)
        first = self.page.evaluate("() => window.__bertgeomRuns.seq")
        for _ in range(50):  # a bound that turns a page that never takes the click into a failure
            if not option.is_visible():
                box.click()
                if typed:
                    self.page.keyboard.type(typed)
            seq = self.page.evaluate("() => window.__bertgeomRuns.seq")
            option.click()
            asked = self.page.evaluate("(seq) => window.__bertgeomRuns.requested > seq", seq)
            if asked or box.input_value() == option_name:
                self._wait_for_run(first, timeout_ms)
                return
        raise TimeoutError(f"the option {option_name!r} never took a click")

    def _wait_for_run(self, seq: int, timeout_ms: int) -> None:
        """Wait until a run the page asked for after its sequence number ``seq`` has finished and the
        app is idle (``watch_runs``)."""
        self.page.wait_for_function(
            """([idle, seq]) => { const r = window.__bertgeomRuns;
                 return r.requested > seq && r.finished > r.requested && document.querySelector(idle) !== null; }""",
            arg=[IDLE, seq], timeout=timeout_ms, polling=50)

    def _wait_after(self, seen: int, timeout_ms: int) -> None:
        """Without ``watch_runs``: wait for a finished run reported after ``seen`` of them, then idle."""
        deadline = time.monotonic() + timeout_ms / 1000
        while self.finished <= seen:  # Playwright delivers the socket's frames while it waits
            if time.monotonic() > deadline:
                raise TimeoutError(f"no script run finished within {timeout_ms / 1000:.0f} s of the action")
            self.page.wait_for_timeout(50)
        self.page.wait_for_selector(IDLE, timeout=timeout_ms)


#: Installed in a page before its own scripts (``add_init_script``): the page's websocket counts, in
#: one sequence, each script run the page asks for (a ``BackMsg`` carrying ``rerun_script``, field 11)
#: and each run the server reports finished (a ``ForwardMsg`` carrying ``script_finished``, field 6,
#: other than ``FINISHED_EARLY_FOR_RERUN``, 2). The request is counted in the same JavaScript task as
#: the click or key press that makes it, so a wait that starts after the action cannot miss it.
WATCH_RUNS_JS = """(() => {
  if (window.__bertgeomRuns) return;
  const runs = window.__bertgeomRuns = {page: Math.random(), seq: 0, requested: 0, finished: 0};
  const varint = (b, i) => {
    let v = 0, s = 0, c;
    do { c = b[i++]; v += (c & 127) * 2 ** s; s += 7; } while (c & 128 && i < b.length);
    return [v, i];
  };
  const fields = (b) => {  // the message's top-level fields as [number, varint value or null]
    const out = []; let i = 0;
    try {
      while (i < b.length) {
        let t, v = null; [t, i] = varint(b, i);
        const w = t & 7;
        if (w === 0) [v, i] = varint(b, i);
        else if (w === 2) { let n; [n, i] = varint(b, i); i += n; }
        else if (w === 1) i += 8; else if (w === 5) i += 4; else break;
        out.push([Math.floor(t / 8), v]);
      }
    } catch (e) { /* not a protobuf message: counts nothing */ }
    return out;
  };
  const bytes = (d) => d instanceof ArrayBuffer ? new Uint8Array(d)
    : ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : null;
  const Native = window.WebSocket;
  class Watched extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (e) => {
        const b = bytes(e.data);
        if (b && fields(b).some(([n, v]) => n === 6 && v !== 2)) runs.finished = ++runs.seq;
      });
    }
    send(data) {
      const b = bytes(data);
      if (b && fields(b).some(([n]) => n === 11)) runs.requested = ++runs.seq;
      return super.send(data);
    }
  }
  window.WebSocket = Watched;
})();"""


#: Installed like WATCH_RUNS_JS: per script run (the app's ``data-test-script-state``, polled every 50 ms),
#: its length in ms and when a spinner (``stSpinner``) or progress bar (``stProgress``) was first
#: visible (``seen``, null when never; ``view``: the same, leaving out the run-wide sign in the corner,
#: app.py's ``run_sign``, so a view's own spinner or bar), under the label the driver set last
#: (``__bertgeomWaits.label``). ``awake`` and ``seenAwake`` are the same times counting only what the
#: page's own thread was free for: a poll that comes more than 150 ms after the last one counts 150 ms,
#: since in the rest the browser could draw nothing, a sign or any other (Chromium starved on a busy
#: machine, or busy drawing), which no page can change.
#: Read by the walk of waits (tests/test_e2e_waits.py) and bench/bench_waits.py.
WAIT_WATCH_JS = """(() => {
  if (window.__bertgeomWaits) return;
  const w = window.__bertgeomWaits = {runs: [], cur: null, label: window.__bertgeomWaitLabel || "", last: null};
  const shown = (views) => [...document.querySelectorAll('[data-testid="stSpinner"], [data-testid="stProgress"]')]
      .some(e => { const r = e.getBoundingClientRect();
                   return r.width > 0 && r.height > 0 && !(views && e.closest('.st-key-run_sign')); });
  setInterval(() => {
    const now = performance.now();
    const step = w.last === null ? 50 : Math.min(now - w.last, 150);
    w.last = now;
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app) return;
    const running = app.getAttribute('data-test-script-state') === 'running';
    if (running && w.cur === null) w.cur = {label: w.label, start: now, seen: null, view: null, awake: 0,
                                            seenAwake: null};
    else if (w.cur !== null) w.cur.awake += step;
    if (w.cur !== null && w.cur.seen === null && shown(false)) {
      w.cur.seen = now - w.cur.start; w.cur.seenAwake = w.cur.awake;
    }
    if (w.cur !== null && w.cur.view === null && shown(true)) w.cur.view = now - w.cur.start;
    if (!running && w.cur !== null) {
      w.cur.ms = now - w.cur.start; w.runs.push(w.cur); w.cur = null;
    }
  }, 50);
})();"""


def watch_runs(target) -> None:
    """Count the script runs of every page ``target`` (a Playwright page or browser context) opens
    from now on, for ``wait_idle``. Call before the first ``goto``."""
    target.add_init_script(script=WATCH_RUNS_JS)


def wait_idle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the last script run the page asked for has finished and the app is idle: an event
    (the page's websocket, ``watch_runs``), never a pause, so a busy machine only makes it slower.
    ``timeout_ms`` is an upper bound that turns a hang into a failure.

    A page opened without ``watch_runs`` (some screenshot tools) falls back to the idle state seen
    twice, 800 ms apart."""
    if not page.evaluate("() => window.__bertgeomRuns !== undefined"):
        page.wait_for_selector(IDLE, timeout=timeout_ms)
        page.wait_for_timeout(800)
        page.wait_for_selector(IDLE, timeout=timeout_ms)
        return
    page.wait_for_function(
        """(idle) => { const r = window.__bertgeomRuns;
                       return r.requested > 0 && r.finished > r.requested
                              && document.querySelector(idle) !== null; }""",
        arg=IDLE, timeout=timeout_ms, polling=50)


def main(out_dir: str, paths: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = start_server(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
            height = int(os.environ.get("SHOT_HEIGHT", "1000"))  # taller viewports capture long pages whole
            page = browser.new_page(viewport={"width": 1400, "height": height})
            watch_runs(page)
            for i, path in enumerate(paths):
                page.goto(f"http://127.0.0.1:{port}/{path.lstrip('/')}")
                wait_idle(page)
                page.wait_for_timeout(int(os.environ.get("SHOT_SETTLE_MS", "3000")))  # charts draw after the run
                name = path.strip("/").split("?")[0].replace("/", "_") or "home"
                page.screenshot(path=str(out / f"{i:02d}_{name}.png"), full_page=True)
                print(out / f"{i:02d}_{name}.png")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["", "heads?model=minilm-l6&layer=3&head=10"])
