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
