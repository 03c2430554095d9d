"""The suite and a used app's cache (issue 47): the tests never read or write the user's
``~/.cache/bertgeom`` (tests/conftest.py gives each session its own folder), and the modules whose
pages change with what the cache holds pass on a filled one.

Before, the README's test command failed after the app had been used: the Across inputs tab of
Subspace Directions draws no on-switch once its set is prepared (``KeyError: 'w_sub_across_on'``), and
the batch table's bf16 caption was held to the shipped model's backend choice, which a measurement in
the cache can set apart from the CPU rule that the page's tiny model follows."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

from cli_run import bertgeom_cli

ROOT = Path(__file__).resolve().parent.parent

#: The modules whose pages draw something else once the cache holds a result (run whole, on a filled cache).
CACHE_SENSITIVE = ("tests/test_page_registries.py", "tests/test_variant_page.py")


def test_the_session_has_its_own_cache_folder():
    from bertgeom.runtime import cache_dir

    assert cache_dir() == Path(os.environ["BERTGEOM_TEST_CACHE_DIR"])
    users = {Path.home() / ".cache" / "bertgeom"}
    if os.path.isabs(os.environ.get("XDG_CACHE_HOME", "")):
        users.add(Path(os.environ["XDG_CACHE_HOME"]) / "bertgeom")
    assert cache_dir() not in users


def _fill(folder: Path, monkeypatch) -> None:
    """What a used app leaves in its cache that changed these modules' pages: the shipped set's D1-D3
    of tiny-random's first head, prepared ahead (``prepare-sets``, as a server does in the background),
    and a measured backend choice for the shipped variant model whose precision is not the CPU rule's
    (on the issue's machine bf16 measured no faster than fp32, so ``auto`` ran fp32 there)."""
    from bertgeom.backends import MeasuredChoice, choose_backend, store_choice, stored_choice
    from bertgeom.models import load_model
    from bertgeom.runtime import machine_line
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    r = bertgeom_cli("prepare-sets", "--model", "tiny-random", "--no-sweeps", "--subspace-heads", "1",
                     env={"BERTGEOM_CACHE_DIR": str(folder)})
    assert r.returncode == 0 and "failed 0" in r.stdout, r.stdout + r.stderr
    with monkeypatch.context() as m:
        m.setenv("BERTGEOM_CACHE_DIR", str(folder))
        _, rule = choose_backend("auto", "cpu", "auto")  # no weights: the rule from what the CPU reports
        other = "fp32" if rule == "bf16" else "bf16"
        weights = load_model(VARIANT_MODEL_ID).weights_hash
        store_choice(MeasuredChoice("torch", other, (), machine_line(), "2026-12-03 00:00 UTC"), weights, "cpu")
        assert stored_choice(weights, "cpu").precision == other


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_the_cache_sensitive_modules_pass_on_a_filled_cache_and_leave_the_users_alone(tmp_path, monkeypatch):
    """The modules run in a pytest of their own on a filled session cache, with a home folder whose
    ``.cache/bertgeom`` (``$XDG_CACHE_HOME``) is filled the same way: they pass, and not a file of the
    user's cache is added, changed or removed."""
    session, home = tmp_path / "session", tmp_path / "home"
    _fill(session, monkeypatch)
    _fill(home / ".cache" / "bertgeom", monkeypatch)
    users = _snapshot(home / ".cache" / "bertgeom")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "BERTGEOM_CACHE_DIR"))}
    env.update(BERTGEOM_TEST_CACHE_DIR=str(session), HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               PYTHONUSERBASE=site.getuserbase())  # the same user site-packages under the other home
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", *CACHE_SENSITIVE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
    assert _snapshot(home / ".cache" / "bertgeom") == users
    assert (session / "prepared" / "status.json").is_file()  # the session's folder was used, and kept
