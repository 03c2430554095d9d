"""Load: 8 browser sessions at once classify different genomes and browse heads.

All finish, each sees only its own results, and the server's memory stays bounded
(peak RSS is printed and written to artifacts/load.json)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from screenshots import CHROMIUM_ARGS, free_port, start_server  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
SESSIONS = 8
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _session(browser, base: str, genome_text: str, name: str, layer: int, head: int) -> dict:
    ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
    page = await ctx.new_page()
    page.set_default_timeout(240_000)
    await page.goto(f"{base}/?view=classifier")
    await page.wait_for_selector(IDLE)
    box = page.get_by_role("textbox", name="Genome or spike sequence")
    await box.fill(genome_text)
    await box.press("Control+Enter")
    try:  # the page first shows the default genome: wait for this session's own record
        await page.get_by_role("heading", name=name, exact=True).wait_for(timeout=240_000)
        heading = 1
    except Exception:  # noqa: BLE001 - playwright's TimeoutError: reported as "not its own"
        heading = 0
    await page.get_by_text("Verdict:").first.wait_for()
    await page.goto(f"{base}/?view=heads&layer={layer}&head={head}")
    await page.wait_for_selector(IDLE)
    await page.get_by_text(f"L{layer} H{head} — who attends to whom").wait_for()
    await ctx.close()
    return {"name": name, "own_heading": heading > 0}


def test_eight_sessions_at_once(tmp_path):
    from playwright.async_api import async_playwright

    from bertgeom.sets.inputs import genome_set
    from bertgeom.variant import VARIANT_MODEL_ID
    from bertgeom.models import REGISTRY

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    genomes = list(genome_set("demo"))
    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}"

    async def run():
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
            jobs = [_session(browser, base, g.text, g.name, 1 + i % 6, 1 + (i * 5) % 12) for i, g in enumerate(genomes[:SESSIONS])]
            out = await asyncio.gather(*jobs)
            await browser.close()
            return out

    try:
        results = asyncio.run(asyncio.wait_for(run(), timeout=600))
        peak = _peak_rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert len(results) == SESSIONS
    assert all(r["own_heading"] for r in results), results
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "load.json").write_text(json.dumps({"sessions": SESSIONS, "server_peak_rss_mib": peak}))
    print(f"server peak RSS with {SESSIONS} sessions: {peak:.0f} MiB")
    assert peak < 6000
