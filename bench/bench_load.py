"""The load figure: a light client's home page while 6 sessions classify and browse.

Runs ``tools/load_scenario.py`` twice on fresh servers: with the six working clients' browsers at
low CPU priority (as if on their users' own computers: the figure for the app) and at normal
priority (all seven browsers competing with the server on this box). Each run's baseline is the
same client's home page with nobody working, measured in that run. Writes ``bench/out/load.json``,
read by ``bench/run_all.py`` for the README table.

Usage: ``python bench/bench_load.py``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
OUT = ROOT / "bench" / "out"


def main() -> int:
    from load_scenario import run_load

    runs = []
    for niced in (True, False):
        d = run_load(clients_niced=niced)
        d.pop("results")
        runs.append(d)
        print(json.dumps(d), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "load.json").write_text(json.dumps({"runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
