"""Process-level settings: how many torch threads one request, one heavy computation and one
classification stream may use.

On a shared 2-core server, concurrent sessions each running torch with two intra-op threads
oversubscribe OpenMP; one thread per request measured 10-30x faster there. The app therefore sets
the count deliberately on every script run (``torch.set_num_threads`` applies to the calling thread,
and Streamlit runs each session's script in its own thread). A heavy computation that has the server
to itself (no other script run in flight, nobody queued) takes every core instead
(:func:`heavy_threads`): one visitor's integrated gradients on 2 cores measured 2.7 s against 5.1 s
with one thread.

References: PyTorch, "CPU threading and TorchScript inference" (intra-op threads are per calling
thread under OpenMP), pytorch.org/docs/stable/notes/cpu_threading_torchscript_inference.html.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

ENV_THREADS = "BERTGEOM_TORCH_THREADS"


def positive_count(name: str, env: Mapping[str, str] | None = None) -> int | None:
    """``$name`` when it is a positive integer (ASCII digits only: ``"²"`` is not one), else None."""
    env = os.environ if env is None else env
    raw = (env.get(name) or "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() and int(raw) > 0 else None


def half_the_cores_or(name: str, env: Mapping[str, str] | None = None, cpu_count: int | None = None) -> int:
    """``$name`` when it is a positive integer, else half the cores, at least 1: the server's rule for
    sizing its thread and work pools."""
    n = positive_count(name, env)
    if n is not None:
        return n
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 2)
    return max(1, cores // 2)


def server_threads(env: Mapping[str, str] | None = None, cpu_count: int | None = None) -> int:
    """Threads per request: ``$BERTGEOM_TORCH_THREADS`` when it is a positive integer, else half
    the cores (at least 1)."""
    return half_the_cores_or(ENV_THREADS, env, cpu_count)


def configure_server_threads() -> int:
    """Apply :func:`server_threads` to the current thread's torch and return it. Before anything
    has imported torch there is nothing to configure (a page that needs no model, the home page,
    then never waits ~1 s for the import). A run that imports torch later keeps torch's default
    count for the rest of that run; heavy work sets its own (:func:`heavy_threads`)."""
    import sys

    n = server_threads()
    if "torch" not in sys.modules:
        return n
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it, else ``os.cpu_count``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return max(1, os.cpu_count() or 1)


@contextmanager
def torch_threads(n: int) -> Iterator[int]:
    """The calling thread's torch intra-op threads set to ``n`` (at least 1) inside the block and
    restored afterwards; other threads keep theirs."""
    import torch

    before = torch.get_num_threads()  # also fixes this thread's own count before it is changed
    n = max(1, int(n))
    if n != before:
        torch.set_num_threads(n)
    try:
        yield n
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


_RUNS_LOCK = threading.Lock()
_RUNS_IN_FLIGHT = 0


@contextmanager
def script_run() -> Iterator[None]:
    """Marks one script run of the server (``app.py`` wraps the page in it), so a heavy computation
    can tell whether it has the server to itself (:func:`script_runs_in_flight`)."""
    global _RUNS_IN_FLIGHT
    with _RUNS_LOCK:
        _RUNS_IN_FLIGHT += 1
    try:
        yield
    finally:
        with _RUNS_LOCK:
            _RUNS_IN_FLIGHT -= 1


def script_runs_in_flight() -> int:
    """Script runs of the server in progress now (0 outside the app)."""
    with _RUNS_LOCK:
        return _RUNS_IN_FLIGHT


def heavy_threads(others_busy: bool, env: Mapping[str, str] | None = None, cpu_count: int | None = None) -> int:
    """Torch threads for a heavy computation that holds a work slot: every usable core when nothing
    else runs on the server (``others_busy`` False), else the per-request count
    (:func:`server_threads`). ``$BERTGEOM_TORCH_THREADS``, when set, is the count in both cases."""
    if others_busy or positive_count(ENV_THREADS, env) is not None:
        return server_threads(env, cpu_count)
    return max(1, cpu_count if cpu_count is not None else usable_cores())


_IMPORTS_LOCK = threading.Lock()
_BACKGROUND_IMPORTS: set[str] = set()


def import_in_background(*modules: str) -> bool:
    """Import ``modules`` once per process in a daemon thread (False when they were already asked
    for): a page that will need them soon (torch after the home page, captum on the classifier page)
    starts the import while the visitor reads, instead of on their next click. A module that fails
    to import is left for the code that needs it to report, in its own words."""
    import importlib

    with _IMPORTS_LOCK:
        todo = [m for m in modules if m not in _BACKGROUND_IMPORTS]
        _BACKGROUND_IMPORTS.update(todo)
    if not todo:
        return False

    def run() -> None:
        for name in todo:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - reported where the module is used
                pass

    threading.Thread(target=run, name="bertgeom-import-" + todo[0].split(".")[0], daemon=True).start()
    return True
