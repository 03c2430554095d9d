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


def test_the_home_page_needs_no_torch_and_torch_and_transformers_come_in_the_background_after_it():
    """The home page's first run imports no torch (threads are configured once something imported it);
    after the page, torch and transformers' BERT modules are imported by a background thread, so the
    next page does not wait for them, and loading a model then waits for that thread's import."""
    import subprocess
    import sys

    code = (
        "import os, sys, threading\n"
        "os.environ['BERTGEOM_PREPARE_SETS'] = '0'\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({str(ROOT / 'app.py')!r}, default_timeout=600)\n"
        "import bertgeom.runtime as rt\n"
        "rt.configure_server_threads()\n"
        "assert 'torch' not in sys.modules, 'configuring threads imported torch'\n"
        "asked = []\n"
        "real, rt.import_in_background = rt.import_in_background, lambda *m: asked.extend(m)\n"
        "at.run()\n"
        "assert not at.exception, at.exception\n"
        "assert 'Start here' in [h.value for h in at.subheader]\n"
        "assert 'torch' not in sys.modules, 'the home page imported torch'\n"
        "assert asked == ['torch', 'transformers.models.bert.modeling_bert'], asked\n"
        "rt.import_in_background = real\n"
        "at.run()\n"
        "assert 'transformers.models.bert.modeling_bert' in rt._BACKGROUND_IMPORTS\n"
        "assert rt.await_background_import('transformers', timeout=300)\n"
        "assert 'torch' in sys.modules and hasattr(sys.modules['torch'], 'tensor')\n"
        "assert hasattr(sys.modules['transformers.models.bert.modeling_bert'], 'BertModel')\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def test_await_background_import_waits_for_the_import_in_flight(tmp_path, monkeypatch):
    """A package whose import is in flight in the background thread is waited for (False while it runs,
    True once it ended and the module is there); a package nobody asked for is not waited for."""
    import builtins
    import sys
    import threading

    import bertgeom.runtime as rt

    gate, started = threading.Event(), threading.Event()
    monkeypatch.setattr(builtins, "_bertgeom_test_gate", (started, gate), raising=False)
    pkg = tmp_path / "slowpkg_bertgeom"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "inner.py").write_text("import builtins\nstarted, gate = builtins._bertgeom_test_gate\n"
                                  "started.set()\ngate.wait(60)\nVALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert rt.await_background_import("slowpkg_bertgeom", timeout=0)  # nothing asked yet: no wait
    assert rt.import_in_background("slowpkg_bertgeom.inner")
    assert not rt.import_in_background("slowpkg_bertgeom.inner")  # once per process
    assert started.wait(60)
    assert not rt.await_background_import("slowpkg_bertgeom", timeout=0)  # still importing
    gate.set()
    assert rt.await_background_import("slowpkg_bertgeom", timeout=60)
    assert sys.modules["slowpkg_bertgeom.inner"].VALUE == 1
    assert rt.await_background_import("slowpkg_bertgeom_other", timeout=0)
