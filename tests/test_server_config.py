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
        "for t in threading.enumerate():\n"
        "    if t.name.startswith('bertgeom-import-torch'):\n"
        "        t.join(300)\n"
        "assert 'torch' in sys.modules and hasattr(sys.modules['torch'], 'tensor')\n"
        "assert hasattr(sys.modules['transformers.models.bert.modeling_bert'], 'BertModel')\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def test_a_background_import_holds_its_packages_import_lock_until_it_ends(tmp_path, monkeypatch):
    """While the background thread imports a module, its package's import lock (the one the model
    loader takes for transformers) is held: another thread cannot take it until the import has ended,
    and then finds the module imported. Every module of one package shares one lock."""
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
    lock = rt.package_import_lock("slowpkg_bertgeom")
    assert rt.package_import_lock("slowpkg_bertgeom.inner") is lock
    assert rt.package_import_lock("transformers") is not lock
    assert rt.import_in_background("slowpkg_bertgeom.inner")
    assert not rt.import_in_background("slowpkg_bertgeom.inner")  # once per process
    assert started.wait(60)
    assert not lock.acquire(blocking=False)  # the import in flight holds it
    gate.set()
    assert lock.acquire(timeout=60)
    try:
        assert sys.modules["slowpkg_bertgeom.inner"].VALUE == 1
    finally:
        lock.release()
