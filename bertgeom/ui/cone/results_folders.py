"""The precomputed results folders the Cone Index page may read (``python -m bertgeom precompute``'s
output, under one results root): which there are, one line on each, and one as the set result the
page draws. Only folders listed under the root are ever opened (a shared server never reads paths a
visitor names), and a listed folder is checked again on every read.

References: none (file handling; the set result is :class:`bertgeom.sets.cone.ConeSet`).
"""

from __future__ import annotations

import streamlit as st

from bertgeom.safety import plain
from bertgeom.sets import cone as conesets
from bertgeom.tables import counted


def results_root():
    """Where precomputed results directories are looked for: ``$BERTGEOM_RESULTS_DIR`` or ./results.

    The UI only lists directories under this root (a shared server never opens arbitrary paths)."""
    import os
    from pathlib import Path

    return Path(os.environ.get("BERTGEOM_RESULTS_DIR") or "results")


def results_dirs() -> list[str]:
    """Results directories (holding a ``manifest.json``) under :func:`results_root`, newest first.
    Only real directories inside the root count: a symlink (or anything resolving outside the root)
    is never listed, so the root's contents cannot point the server at other files."""
    from bertgeom.safety import OutsideRootError, inside_results_root

    root = results_root()
    if not root.is_dir() or root.is_symlink():
        return []
    found = []
    for p in [root, *root.iterdir()]:
        try:
            run = inside_results_root(root, *([p.name] if p != root else []))
            inside_results_root(run, "manifest.json")
        except OutsideRootError:
            continue
        if run.is_dir() and (run / "manifest.json").is_file():
            found.append(run)
    return [str(p) for p in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)]


def _listed_results(path: str):
    """``path`` when it is one of :func:`results_dirs` (re-checked on every read: a folder swapped
    for a link after it was listed is refused), as a :class:`PrecomputeError` otherwise."""
    from bertgeom.precompute.core import PrecomputeError

    if path not in results_dirs():
        raise PrecomputeError(f"'{path}' is not a results folder under the results root.")
    return path


def results_note(path: str, weights_hash: str, noun: str = "record") -> str:
    """One line on a results folder: how many records (``noun``: the input kind's word) by which model."""
    from bertgeom.precompute import load_results

    res = load_results(_listed_results(path), cls=False)
    model = res.manifest.get("model", {})
    status = "complete" if res.complete else "partial (still running or interrupted)"
    same = model.get("weights_hash") == weights_hash
    return (f"{counted(len(res.records), noun)} precomputed by model {plain(model.get('id', '?'))} ({status}). "
            + ("" if same else "⚠ These results come from different weights than the model picked in the sidebar."))


@st.cache_data(max_entries=4, show_spinner="Reading the precomputed results…")
def precomputed_set(path: str) -> conesets.ConeSet:
    """A precomputed directory as the set result the page draws (no model run)."""
    from bertgeom.precompute import load_results

    return load_results(_listed_results(path)).to_cone_set()
