"""Server defaults (issue 16 item 10, issue 15 item 4): local-only address, deliberate torch threads."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_server_listens_on_localhost_unless_told_otherwise():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    assert config["server"]["fileWatcherType"] == "none"
    assert "--server.address 0.0.0.0" in (ROOT / "README.md").read_text()


def test_threads_per_request_come_from_the_environment_or_half_the_cores():
    from bertgeom.runtime import server_threads

    assert server_threads({"BERTGEOM_TORCH_THREADS": "3"}, cpu_count=2) == 3
    assert server_threads({}, cpu_count=2) == 1 and server_threads({}, cpu_count=16) == 8
    for bad in ("0", "-1", "two", "²", ""):
        assert server_threads({"BERTGEOM_TORCH_THREADS": bad}, cpu_count=4) == 2


def test_the_app_configures_threads_on_every_run():
    source = (ROOT / "app.py").read_text()
    assert "configure_server_threads()" in source
