"""The load scenario shared by ``tests/test_load.py`` and ``bench/bench_load.py``.

Six browser sessions at once each classify a different demo genome and then open a head of the
Attention Heads page, while a seventh, *light* client keeps opening the home page. Measured: the
light client's home-page times (open to finished run), the same page with nobody working (idle),
whether each session saw its own record, the server's peak memory, and the CPU seconds the server
and the six working browsers spent while they worked.

Why the working clients' browsers can run at low CPU priority (``clients_niced``): in use, each
visitor's browser runs on the visitor's own computer. Here all seven run on the server's box, and
the six working browsers rendering their pages spend several times the server's CPU (measured on
2 cores: ~60-110 CPU-s of Chromium against ~8-12 CPU-s of server in one run), so without it the light
client's time mostly measures Chromium, not the app. Deprioritised (a control group with a small CPU
share where one can be made, as root; ``nice`` alone does not hold, since Chromium resets its
renderers' priority), they still do all their work, but the server and the light client come first,
as they would if the browsers were elsewhere. Both settings are measured by the benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import CHROMIUM_ARGS, free_port, start_server  # noqa: E402

SESSIONS = 6
HOME_TITLE = "bertgeom — the geometry of BERT's attention"
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
CLIENT_NICENESS = 10


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            rest = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(rest[1]), []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def runnable_elsewhere(seconds: float = 2.0) -> float:
    """Processes other jobs keep running, averaged over ``seconds`` (``procs_running`` of /proc/stat,
    less this sampler): the CPU demand already on the machine *now*. The 1-minute load average would
    still carry a run that just ended (e.g. the benchmark's previous scenario)."""
    samples = []
    for _ in range(max(1, int(seconds / 0.1))):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running"):
                samples.append(int(line.split()[1]) - 1)
        time.sleep(0.1)
    return sum(samples) / len(samples) if samples else 0.0


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")


def low_priority_group() -> Path | None:
    """A fresh CPU control group with a small share of the CPU (``cpu.shares`` 64 of the default 1024, or
    ``cpu.weight`` 6 of 100), when this process may make one (root, cgroup v1 or v2); else ``None``.

    Why not ``nice`` alone: Chromium resets the priority of the renderers it starts, and they do the
    rendering; a control group holds every process the browser ever starts.
    """
    name = f"bertgeom-load-clients-{os.getpid()}"
    for root, knob, value in ((CGROUP_V1, "cpu.shares", "64"), (CGROUP_V2, "cpu.weight", "6")):
        if not (root / knob).exists() and not (root / "cgroup.controllers").exists():
            continue
        group = root / name
        try:
            group.mkdir(exist_ok=True)
            (group / knob).write_text(value)
            return group
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
    return None


def low_priority_chromium(folder: Path, group: Path | None) -> str:
    """A launcher that starts Debian's chromium in ``group`` (when there is one) and at low ``nice``
    priority (Playwright's pipes pass through ``exec``)."""
    launcher = folder / "chromium-low-priority"
    join = f'echo $$ > "{group / "cgroup.procs"}"\n' if group is not None else ""
    launcher.write_text(f'#!/bin/sh\n{join}exec nice -n {CLIENT_NICENESS} {shutil.which("chromium")} "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def remove_group(group: Path | None) -> None:
    """Remove the control group once its processes are gone (they are, after the browser closed)."""
    if group is None:
        return
    for _ in range(50):
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)


#: Upper bound of any one wait on a busy machine: every wait ends on its event (an element, the
#: idle state), this only turns a hang into a failure.
BOUND_MS = 900_000


async def working_session(browser, base: str, genome_text: str, name: str, layer: int, head: int,
                          submitted: asyncio.Event | None = None, keep_working: asyncio.Event | None = None,
                          started: dict | None = None) -> dict:
    """Classify one genome on the Variant Classifier page, then open one head on Attention Heads
    (and, while ``keep_working`` is set, the next heads). ``started`` counts the sessions whose
    genome is submitted (``{"need": n, "done": k}``); ``submitted`` is set when all n have."""
    ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
    page = await ctx.new_page()
    page.set_default_timeout(BOUND_MS)
    await page.goto(f"{base}/?view=classifier")
    await page.wait_for_selector(IDLE)
    box = page.get_by_role("textbox", name="Genome or spike sequence")
    await box.fill(genome_text)
    await box.press("Control+Enter")
    if started is not None:
        started["done"] += 1
        if submitted is not None and started["done"] >= started["need"]:
            submitted.set()
    try:  # the page first shows the default genome: wait for this session's own record
        await page.get_by_role("heading", name=name, exact=True).wait_for(timeout=BOUND_MS)
        own = True
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: reported as "not its own"
        own = False
    await page.get_by_text("Verdict:").first.wait_for()
    step = 0
    while True:  # the light client measures while the sessions work: they go on until it has
        await page.goto(f"{base}/?view=heads&layer={layer}&head={1 + (head - 1 + step) % 12}")
        await page.wait_for_selector(IDLE)
        await page.get_by_text(f"L{layer} H{1 + (head - 1 + step) % 12} — who attends to whom").wait_for()
        step += 1
        if keep_working is None or not keep_working.is_set() or step >= 40:
            break
    await ctx.close()
    return {"name": name, "own_heading": own}


async def home_page_seconds(browser, base: str) -> float:
    """Seconds from opening the home page in a new session to its finished run (title shown, idle)."""
    ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
    page = await ctx.new_page()
    page.set_default_timeout(BOUND_MS)
    t0 = time.perf_counter()
    await page.goto(f"{base}/")
    await page.get_by_role("heading", name=HOME_TITLE).wait_for()
    await page.wait_for_selector(IDLE)
    dt = time.perf_counter() - t0
    await ctx.close()
    return dt


def run_load(*, clients_niced: bool, sessions: int = SESSIONS, timeout: float = 3600, min_loads: int = 3) -> dict:
    """Run the scenario once on a fresh server; return its figures (see the module docstring)."""
    from playwright.async_api import async_playwright

    from bertgeom.sars_cov_2.variant.spec import genome_set

    genomes = list(genome_set("demo"))[:sessions]
    outside_load = runnable_elsewhere()  # other jobs' CPU demand before this run adds its own
    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}"
    home_times: list[float] = []
    cpu: dict[str, float] = {}
    seen: dict[int, float] = {}  # CPU seconds last seen per working-browser process (renderers exit)

    group = low_priority_group() if clients_niced else None

    async def run(tmp: Path):
        async with async_playwright() as p:
            light = await p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
            workers_exe = low_priority_chromium(tmp, group) if clients_niced else shutil.which("chromium")
            before = set(descendants(os.getpid()))
            workers = await p.chromium.launch(executable_path=workers_exe, args=CHROMIUM_ARGS)
            roots = set(descendants(os.getpid())) - before  # the working browser's first processes

            def workers_cpu() -> float:
                """CPU seconds of the working browser: its first processes and everything they start
                (renderers included, kept after they exit), never the light client's browser."""
                for pid in roots | {d for r in roots for d in descendants(r)}:
                    seen[pid] = max(seen.get(pid, 0.0), cpu_seconds(pid))
                return sum(seen.values())

            warm = await home_page_seconds(light, base)  # the first visit loads the models: not light
            idle = [await home_page_seconds(light, base) for _ in range(2)]  # the same page, nobody working
            working = asyncio.Event()
            working.set()
            submitted, keep_working = asyncio.Event(), asyncio.Event()
            keep_working.set()
            started = {"need": sessions, "done": 0}
            cpu["server0"], cpu["browsers0"] = cpu_seconds(server.pid), workers_cpu()
            t0 = time.perf_counter()

            async def all_sessions():
                jobs = [working_session(workers, base, g.text, g.name, 1 + i % 6, 1 + (i * 5) % 12,
                                        submitted, keep_working, started) for i, g in enumerate(genomes)]
                try:
                    return await asyncio.gather(*jobs)
                finally:
                    working.clear()
                    cpu["seconds"] = time.perf_counter() - t0
                    cpu["server"] = cpu_seconds(server.pid) - cpu["server0"]
                    cpu["browsers"] = workers_cpu() - cpu["browsers0"]

            async def light_client():
                await submitted.wait()  # every session has sent its genome: the server is busy
                try:
                    while working.is_set() and len(home_times) < 6:
                        home_times.append(await home_page_seconds(light, base))
                        if len(home_times) >= min_loads:
                            keep_working.clear()  # enough measured while they worked: let them finish
                        await asyncio.sleep(1)
                finally:
                    keep_working.clear()

            async def sample():
                while working.is_set():
                    workers_cpu()
                    await asyncio.sleep(0.5)

            out, _, _ = await asyncio.gather(all_sessions(), light_client(), sample())
            await workers.close()
            await light.close()
            return out, warm, statistics.median(idle)

    try:
        with tempfile.TemporaryDirectory(prefix="bertgeom-load-") as tmp:
            results, warm, idle = asyncio.run(asyncio.wait_for(run(Path(tmp)), timeout=timeout))
        peak = peak_rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
        remove_group(group)
    median = statistics.median(home_times) if home_times else float("nan")
    return {
        "sessions": sessions, "working_clients_niced": clients_niced, "results": results,
        "clients_priority": ("control group (small CPU share) + nice" if group is not None else "nice")
        if clients_niced else "equal",
        "light_client_home_s": [round(t, 2) for t in home_times], "light_client_home_median_s": round(median, 2),
        "idle_home_s": round(idle, 2), "first_home_s": round(warm, 2), "server_peak_rss_mib": round(peak),
        "outside_load": round(outside_load, 2), "working_seconds": round(cpu.get("seconds", float("nan")), 1),
        "server_cpu_s_while_working": round(cpu.get("server", float("nan")), 1),
        "browsers_cpu_s_while_working": round(cpu.get("browsers", float("nan")), 1),
    }
