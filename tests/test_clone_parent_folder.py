"""A clone named ``bertgeom``, used from its parent folder (issue 47): ``import bertgeom`` is the real
package there, ``python -m bertgeom`` runs, and ``classify`` reads its data files and writes its CSV.

From the parent folder the current directory comes first on ``sys.path``, so Python takes the clone's
folder for the ``bertgeom`` package before the installed one; the repository root's ``__init__.py``
loads the package inside the clone in its place. Before it, the folder was an empty namespace package:
``bertgeom.__file__`` None, no ``load_model``, and ``classify`` stopped on ``MultiplexedPath.joinpath()``
in ``reference.data_path``. The commands run in real processes here: the import from the current
directory is the subject."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import bertgeom_cli

ROOT = Path(__file__).resolve().parent.parent


def _tracked_files() -> list[str]:
    """The checkout's files as a clone would hold them: tracked ones and new ones not ignored."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    return [f for f in done.stdout.split("\0") if f]


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    """A folder holding a copy of this checkout named ``bertgeom`` (plain files, no links), like the
    parent folder of ``git clone ... bertgeom``."""
    parent = tmp_path_factory.mktemp("parent")
    clone = parent / "bertgeom"
    for rel in _tracked_files():
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():  # a file deleted in the working tree is not copied
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    assert (clone / "bertgeom" / "__init__.py").is_file()
    return parent


def _python(parent: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=parent, capture_output=True, text=True, timeout=600)


def test_import_bertgeom_from_the_parent_folder_is_the_clones_package(parent):
    done = _python(parent, "-c", "import bertgeom, sys; print(bertgeom.__file__); "
                   "print(bertgeom.load_model.__module__); import bertgeom.sars_cov_2.genome.reference as r; "
                   "print(r.data_path('reference').is_dir()); print(sys.modules['bertgeom'].__spec__.origin)")
    assert done.returncode == 0, done.stderr
    file, module, data, origin = done.stdout.split()
    inner = parent / "bertgeom" / "bertgeom" / "__init__.py"
    assert Path(file) == inner and Path(origin) == inner  # the package, not the clone's root folder
    assert module == "bertgeom.models" and data == "True"


def test_python_m_bertgeom_runs_from_the_parent_folder(parent):
    done = _python(parent, "-m", "bertgeom", "--help")
    assert done.returncode == 0, done.stderr
    assert "classify" in done.stdout and "prepare-sets" in done.stdout


def test_classify_from_the_parent_folder_writes_its_csv_and_nothing_else(parent, tiny_variant_dir):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    (parent / "x.fasta").write_text(genome_set("demo")[0].text + "\n")
    before = {p.name for p in parent.iterdir()}
    done = _python(parent, "-m", "bertgeom", "classify", "x.fasta", "--out", "y.csv", "--model", str(tiny_variant_dir))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((parent / "y.csv").open(newline="")))
    assert len(rows) == 1 and rows[0]["name"] == genome_set("demo")[0].name and not rows[0]["error"]
    assert rows[0]["clade"]  # placed on the shipped Nextclade dataset: the data files were found
    assert {p.name for p in parent.iterdir()} - before == {"y.csv"}  # no .partial, no .lock


def test_a_classify_that_fails_unexpectedly_leaves_no_partial_file(tmp_path, tiny_variant_dir, monkeypatch):
    """An error none of classify's own answers covers (here a data file that cannot be read, as the
    namespace import made happen) goes up as a traceback and leaves OUT as it was, with no
    ``OUT.<random>.partial`` and no side output beside it."""
    import bertgeom.sars_cov_2.variant.predict as predict
    from bertgeom.sars_cov_2.variant.spec import genome_set

    def broken(*args, **kw):
        raise TypeError("MultiplexedPath.joinpath() takes 2 positional arguments but 4 were given")
        yield  # a generator, like the real one

    monkeypatch.setattr(predict, "classify_stream", broken)
    (tmp_path / "x.fasta").write_text(genome_set("demo")[0].text + "\n")
    (tmp_path / "y.csv").write_text("previous results\n")
    r = bertgeom_cli("classify", "x.fasta", "--out", "y.csv", "--output-tsv", "y.tsv", "--output-ndjson", "y.ndjson",
                     "--model", tiny_variant_dir, cwd=tmp_path)
    assert r.returncode == 1 and "TypeError: MultiplexedPath" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.fasta", "y.csv"]
    assert (tmp_path / "y.csv").read_text() == "previous results\n"


def _readme_commands() -> list[str]:
    import re

    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)[:2]


def _from_the_parent(pip_part: str) -> list[str]:
    """A README ``pip install`` as the README says to type it from the folder above the clone
    (``-r bertgeom/…``, ``-e bertgeom``), as a dry run that installs nothing and reads no index."""
    words = pip_part.split()
    assert words[:4] == ["python", "-m", "pip", "install"] and "-e" in words, pip_part
    args = [("bertgeom/" + w if words[i - 1] == "-r" else "bertgeom" if w == "." and words[i - 1] == "-e" else w)
            for i, w in enumerate(words)][1:]
    return [*args, "--dry-run", "--no-deps", "--no-index", "--no-build-isolation", "--quiet"]


def test_the_readme_set_up_installs_from_the_parent_folder(parent):
    """Both README commands' ``pip install`` halves, typed from the parent folder, resolve: no path in the
    requirements files is read from the current folder (a ``-e .`` there once named the parent)."""
    for command in _readme_commands():
        done = _python(parent, *_from_the_parent(command.split(" && ")[0]))
        assert done.returncode == 0, done.stderr
        assert "does not appear to be a Python project" not in done.stderr


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (Linux's ``/proc/net/tcp``, ``tcp6``)."""
    import ipaddress

    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            pytest.skip("no /proc/net/tcp: the listening address cannot be read here")
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                # the kernel writes each 32-bit word in host (little-endian) order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(str(ipaddress.ip_address(raw)))
    return found


def test_the_app_command_starts_the_clones_app_with_its_settings_from_the_parent_folder(parent):
    """``python -m bertgeom app`` from the parent folder (the README's app command) serves the clone's app
    with the checkout's settings: Streamlit would read ``.streamlit/config.toml`` only from the current
    folder, so without them the server would listen on every interface."""
    import time
    import urllib.request

    sys.path.insert(0, str(ROOT / "tools"))
    from screenshots import free_port

    assert _readme_commands()[0].endswith("&& python -m bertgeom app")
    shown = _python(parent, "-m", "bertgeom", "app", "--print-command", "--server.port", "8600")
    assert shown.returncode == 0, shown.stderr
    command = shown.stdout.split()
    assert command[command.index("run") + 1] == str(parent / "bertgeom" / "app.py")
    assert "--server.address=127.0.0.1" in command and "--server.fileWatcherType=none" in command
    assert command[-2:] == ["--server.port", "8600"]  # the user's flags last: they win

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bertgeom", "app", "--server.port", str(port)], cwd=parent,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600  # a bound for a busy machine: the loop ends when the server answers
        healthy = False
        while not healthy and time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    healthy = r.read().strip() == b"ok"
            except OSError:
                time.sleep(0.5)
        assert healthy, f"the app did not start from the parent folder (exit {proc.poll()})"
        listening = _listening_addresses(port)
        assert listening and all(a in ("127.0.0.1", "::1") for a in listening), listening  # not 0.0.0.0 or ::
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_server_started_without_the_settings_says_so():
    from bertgeom.launch import GUARDED_SETTINGS, settings_not_read

    assert settings_not_read(GUARDED_SETTINGS.get) == []
    streamlit_defaults = {"server.address": None, "server.fileWatcherType": "auto", "client.showErrorDetails": "full"}
    assert settings_not_read(streamlit_defaults.get) == list(GUARDED_SETTINGS)
