"""The layer contracts (tools/check_layers.py) hold on the tree, and each kind of breach is caught."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _checker():
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "tools" / "check_layers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layers"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _breaches(root: Path) -> list[str]:
    """The breaches ``tools/check_layers.py`` prints for ``root``, run as CI runs it: in a process of its
    own. In the test worker, ``ast.parse`` raised ``SystemError: AST constructor recursion depth
    mismatch`` twice in full runs, most likely while another thread of that process was building an AST
    too: CPython 3.11's AST converter keeps its depth in one per-interpreter counter (gh-106905)."""
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "check_layers.py"), str(root)],
                          capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr  # 1: breaches found; anything else is the tool failing
    return done.stdout.splitlines() if done.returncode == 1 else []


@pytest.fixture()
def tree(tmp_path):
    """A copy of the package's and pages' Python files, to plant breaches in."""
    for folder in ("bertgeom", "app_pages"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("data", "__pycache__"))
    shutil.copy(ROOT / "app.py", tmp_path / "app.py")
    return tmp_path


def test_the_tree_keeps_every_contract():
    assert _breaches(ROOT) == []


def test_ci_runs_the_layer_check_before_the_tests():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tools/check_layers.py" in ci and ci.index("tools/check_layers.py") < ci.index("pytest")


def test_the_command_fails_on_an_upward_import(tree):
    target = tree / "bertgeom" / "analysis" / "heads.py"
    target.write_text(target.read_text() + "\n\ndef _late():\n    from bertgeom.trace import run_trace\n")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "check_layers.py"), str(tree)],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "bertgeom/analysis/heads.py" in done.stdout and "runs up from floor 1 (analysis) to 2 (trace)" in done.stdout


@pytest.mark.parametrize("rel, line, rule", [
    ("bertgeom/figures/base.py", "import streamlit as st", "Streamlit outside"),
    ("bertgeom/sets/heads.py", "from bertgeom.sars_cov_2.genome import pipeline", "imports the case study"),
    ("bertgeom/sets/heads.py", "from bertgeom.sars_cov_2 import variant", "imports the case study"),
    ("bertgeom/sets/heads.py", "from bertgeom.sars_cov_2 import variant", "must not import each other"),
    ("bertgeom/sets/heads.py", "from bertgeom.sars_cov_2.variant import predict", "must not import each other"),
    ("bertgeom/analysis/cone.py", "import bertgeom", "runs up"),
])
def test_each_kind_of_breach_is_caught(tree, rel, line, rule):
    path = tree / rel
    path.write_text(line + "\n" + path.read_text())
    breaches = _breaches(tree)
    assert any(rel in b and rule in b for b in breaches), breaches


@pytest.mark.parametrize("rel, line, rule", [
    # relative imports, resolved against the file's package
    ("bertgeom/analysis/heads.py", "from ..trace import run_trace", "runs up from floor 1 (analysis) to 2 (trace)"),
    ("bertgeom/sars_cov_2/genome/fasta.py", "from ..variant import predict",
     "runs up from floor 0 (sars_cov_2.genome) to 3 (sars_cov_2.variant)"),
    ("bertgeom/sars_cov_2/genome/fasta.py", "from .. import page", "runs up from floor 0 (sars_cov_2.genome)"),
    ("bertgeom/sets/heads.py", "from .. import sars_cov_2", "imports the case study"),
    ("bertgeom/sets/__init__.py", "from ..ui import cache", "runs up from floor 3 (sets) to 6 (ui)"),
    # imports by a literal string
    ("bertgeom/sets/heads.py", "import importlib\nimportlib.import_module('bertgeom.ui.cache')", "runs up"),
    ("bertgeom/analysis/cone.py", "from importlib import import_module\nimport_module('.trace', 'bertgeom')",
     "runs up from floor 1 (analysis) to 2 (trace)"),
    ("bertgeom/figures/base.py", "st = __import__('streamlit')", "Streamlit outside"),
])
def test_a_breach_by_a_relative_import_or_a_string_is_caught(tree, rel, line, rule):
    """The case-study package holds ~90 relative imports and the model registry imports by string: a
    breach written either way is caught like an absolute import."""
    path = tree / rel
    assert _breaches(tree) == []
    path.write_text(line + "\n" + path.read_text())
    breaches = _breaches(tree)
    assert any(rel in b and rule in b for b in breaches), breaches


def test_relative_imports_inside_the_case_study_are_read():
    """The check reads the genome package's relative imports as imports of the package they name."""
    checker = _checker()
    rel = "bertgeom/sars_cov_2/genome/pipeline.py"
    import ast

    found = {m for _, m, _ in checker.imports_of(ast.parse((ROOT / rel).read_text()), rel)}
    assert "bertgeom.sars_cov_2.genome.align" in found


def test_a_pending_exception_that_is_no_longer_needed_is_reported(tree, monkeypatch):
    checker = _checker()
    rel = "bertgeom/analysis/cone.py"  # a generic file that never imported the case study
    monkeypatch.setitem(checker.PENDING_PLUGIN_EXCEPTIONS, rel, "planted")
    assert any(rel in str(b) and "remove it from PENDING_PLUGIN_EXCEPTIONS" in str(b) for b in checker.check(tree))


def test_no_generic_file_imports_the_case_study_any_more():
    """The list could only shrink, and it is empty: every generic file reaches the case study through
    a registry (pages, commands, home starts, tour steps, precompute, classify), none imports it."""
    assert _checker().PENDING_PLUGIN_EXCEPTIONS == {}  # every generic file is free of the case study
