"""The suite's two tiers (tests/conftest.py SLOW_TIER): every entry names a test that exists, so a renamed
test cannot slip from the slow tier into the README's run unnoticed, and CI runs both tiers."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import SLOW_TIER

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_every_slow_tier_entry_names_an_existing_test():
    missing = []
    for entry in SLOW_TIER:
        module, _, test = entry.partition("::")
        path = TESTS / module
        if not path.is_file():
            missing.append(entry)
            continue
        name = test.split("[")[0]
        if name and not re.search(rf"^def {re.escape(name)}\(", path.read_text(encoding="utf-8"), flags=re.M):
            missing.append(entry)
    assert missing == []


def test_the_readme_run_leaves_the_slow_tier_out_and_ci_runs_it():
    ini = (ROOT / "pytest.ini").read_text(encoding="utf-8")
    assert re.search(r'^addopts = .*-m "not slow"', ini, flags=re.M)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q -m slow" in ci
