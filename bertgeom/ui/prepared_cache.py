"""The app's background preparation of the shipped sets' summaries, and the pages' wait for them.

At the server's first script run, :func:`start_background` starts (once per process) a thread that
runs ``python -m bertgeom prepare-sets`` as a child process at the lowest CPU priority with one
thread (``nice 19``): it never holds this server's interpreter lock or work slots, and on a busy
machine it only gets the cycles nobody else wants. It writes each summary to the disk cache under
the key the page reads (:mod:`bertgeom.sets.prepared`) and keeps a status file up to date.

A page that needs a summary calls :func:`wait_for` first: when the file is on disk it returns at
once; when the preparation is computing it right now, the page shows "being prepared in the
background: k of n" until it lands; otherwise (still queued, preparation switched off or failed, a
user's own set) it returns and the page computes it as before, at the server's normal priority,
and the preparation skips it when its turn comes. No Streamlit element is
created inside a cached function here.

``$BERTGEOM_PREPARE_SETS=0`` switches the background preparation off (the tests do).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import streamlit as st

from bertgeom.sets import prepared

ENV = "BERTGEOM_PREPARE_SETS"
#: A status file not rewritten for this long belongs to a preparation that stopped.
STALE_S = 180.0

_STARTED = threading.Event()
_LOCK = threading.Lock()
_CHILD: list = []


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


def start_background() -> bool:
    """Start the preparation once per server process (no-op when switched off or already started)."""
    if not enabled() or _STARTED.is_set():
        return False
    with _LOCK:
        if _STARTED.is_set():
            return False
        _STARTED.set()
    threading.Thread(target=_run_child, name="bertgeom-prepare-sets", daemon=True).start()
    return True


def _run_child() -> None:
    log_dir = prepared.prepared_dir()
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        log = open(log_dir / "background.log", "ab")
    except OSError:
        return  # no writable cache: the pages compute on demand as before
    cmd = [sys.executable, "-m", "bertgeom", "prepare-sets", "--nice", "19", "--threads", "1", "--with-parent"]
    root = str(Path(prepared.__file__).resolve().parents[2])  # the directory holding the bertgeom package
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH", "")) if x)}
    try:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL, cwd=root)
    except OSError:
        log.close()
        return
    _CHILD.append(proc)
    proc.wait()
    log.close()


def _rows() -> dict[str, dict]:
    data = prepared.read_json(prepared.status_path()) or {}
    if not data or time.time() - float(data.get("updated", 0)) > STALE_S and not _child_running():
        return {}
    return {r["id"]: r for r in data.get("tasks", [])}


def _child_running() -> bool:
    return bool(_CHILD) and _CHILD[0].poll() is None


def _alive(data_rows: dict) -> bool:
    if _child_running():
        return True
    data = prepared.read_json(prepared.status_path()) or {}
    pid = int(data.get("pid", 0) or 0)
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # a preparation run by hand (prepare-sets) in another process
    except OSError:
        return False
    return time.time() - float(data.get("updated", 0)) <= STALE_S


def _task_for(key, group: str | None, model_id: str | None, rows: dict) -> dict | None:
    row = rows.get(prepared.key_id(key))
    if row is not None:
        return row
    if group:  # a task that writes this key among others (e.g. every class-mean map at once)
        for r in rows.values():
            if r.get("group") == group and (model_id is None or r.get("model") == model_id) \
                    and r.get("state") == "running":
                return r
    return None


def pending(key, *, group: str | None = None, model_id: str | None = None) -> bool:
    """True when ``key`` is not on disk and the background preparation is computing it now.

    Only a running task is waited for: one still in the queue is computed by the page itself at the
    server's normal priority (the preparation, at the lowest, then finds it on disk and skips it)."""
    if prepared.is_on_disk(key):
        return False
    rows = _rows()
    row = _task_for(key, group, model_id, rows)
    return row is not None and row.get("state") == "running" and _alive(rows)


def wait_for(key, what: str, *, group: str | None = None, model_id: str | None = None) -> bool:
    """Wait (with a progress bar) while the background preparation writes ``key``; True when it is
    on disk afterwards. Returns at once when it is already there or nobody is preparing it."""
    if prepared.is_on_disk(key):
        return True
    if not pending(key, group=group, model_id=model_id):
        return False
    rows = _rows()
    row = _task_for(key, group, model_id, rows)
    bar = st.progress(0.0, text=f"{what}: being prepared in the background…")
    try:
        while not prepared.is_on_disk(key):
            rows = _rows()
            row = _task_for(key, group, model_id, rows) or row
            if row.get("state") != "running" or not _alive(rows):
                break
            done, total = int(row.get("done", 0)), int(row.get("total", 0))
            bar.progress(min(1.0, done / total) if total else 0.0,
                         text=f"{what}: being prepared in the background: {done} of {total}")
            time.sleep(0.4)
    finally:
        bar.empty()
    return prepared.is_on_disk(key)


def overview(model_id: str) -> tuple[int, int, bool]:
    """``(done, total, running)`` summaries of ``model_id`` in the background preparation's status."""
    rows = [r for r in _rows().values() if r.get("model") == model_id]
    return sum(r.get("state") == "done" for r in rows), len(rows), _alive(_rows()) and any(
        r.get("state") in ("queued", "running") for r in rows)
