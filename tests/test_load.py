"""Load: 4 browser sessions at once classify different genomes and browse heads, while a 5th,
light client keeps opening the home page (the scenario is ``tools/load_scenario.py``; the benchmark,
``bench/bench_load.py``, runs it with 6). Four keep the test a test of sessions at once (more than
the server's heavy-work slots on 2 cores) at two thirds of the work, and the whole scenario is
bounded (25 minutes, a failure guard on a busy machine; every wait inside ends on its event).

All finish, each sees only its own results, the server's memory stays bounded, and the light
client is served while they work. The working clients' browsers run at low CPU priority (a control
group with a small CPU share where the test may make one; at normal priority when other jobs already
keep the cores busy, where the median is not judged), as if on their users' own computers: on
one 2-core box they otherwise spend several times the server's CPU, and the light client's time would
measure Chromium rather than the app (the scenario's docstring says more). The time target itself (a
median under 3 s) is a benchmark figure, measured with its idle baseline by ``bench/bench_load.py``
for both browser priorities and recorded in the README; here the median is judged only against the
same client's idle time, measured in the same run. Figures are printed and written to
artifacts/load.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from load_scenario import run_load, runnable_elsewhere  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
SESSIONS = 4
BOUND_S = 1500


def test_sessions_at_once_and_a_light_client_is_served():
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    # Other jobs already keep the cores busy: the median is then recorded, not judged (below), and the
    # working browsers run at the same priority as everything else. In a low-share control group
    # behind a dozen other jobs they got almost no CPU and the scenario ran for over 20 minutes
    # instead of about 1.5, to measure a figure that is not judged.
    busy = runnable_elsewhere() > (os.cpu_count() or 2)
    d = run_load(clients_niced=not busy, sessions=SESSIONS, timeout=BOUND_S)
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "load.json").write_text(json.dumps(d))
    times, median, idle = d["light_client_home_s"], d["light_client_home_median_s"], d["idle_home_s"]
    print(f"server peak RSS with {SESSIONS} sessions: {d['server_peak_rss_mib']} MiB; light client's home page while "
          f"they work: median {median:.2f} s over {len(times)} loads {times} (idle {idle:.2f} s); CPU while working: "
          f"server {d['server_cpu_s_while_working']} s, the {SESSIONS} browsers {d['browsers_cpu_s_while_working']} s")
    assert len(d["results"]) == SESSIONS
    assert all(r["own_heading"] for r in d["results"]), d["results"]
    assert d["server_peak_rss_mib"] < 6000
    assert len(times) >= 3, times  # measured while the sessions were still working
    if busy or d["outside_load"] > (os.cpu_count() or 2):
        pytest.skip(f"the machine was busy with other jobs (load {d['outside_load']:.1f} on {os.cpu_count()} cores): "
                    f"the home page's median {median:.1f} s was recorded, not judged")
    if d["clients_priority"].startswith("control group"):
        # the six browsers cannot take the server's cores: the light client is served about as fast as idle
        # (1.2x in the benchmark's runs; before the server was made light, 4x with all browsers equal)
        assert median < 2 * idle, (times, idle)
    else:  # nice alone (no control group here): Chromium resets its renderers' priority, so only "not starved"
        assert median < 6 * idle, (times, idle)
