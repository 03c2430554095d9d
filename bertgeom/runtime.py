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
from pathlib import Path
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
_PACKAGE_LOCKS: dict[str, threading.RLock] = {}

#: What a server imports in the background once its first page is drawn: torch, then transformers'
#: BERT modules (the modelling module pulls in most of transformers). Every page but Home and Methods
#: loads a model; on a freshly started 2-core server these imports took ~1.5 s and ~3.6 s of the first
#: model's load (Intel Xeon, 2026-12-02), which a visitor who reads the home page no longer waits for.
SERVER_WARM_IMPORTS = ("torch", "transformers.models.bert.modeling_bert")


def package_import_lock(module: str) -> threading.RLock:
    """The one lock of ``module``'s top-level package in this process. transformers' lazy module is
    not safe to import from two threads at once, so the background imports (:func:`import_in_background`)
    and the model loader (:func:`bertgeom.models.load_model`) import it holding this lock: one thread
    at a time imports it, and a click that needs a model waits for an import in flight instead of
    racing it."""
    with _IMPORTS_LOCK:
        return _PACKAGE_LOCKS.setdefault(module.split(".")[0], threading.RLock())


def import_in_background(*modules: str) -> bool:
    """Import ``modules`` once per process, in order, in a daemon thread (False when they were all
    asked for already), each under its package's :func:`package_import_lock`: a page that will need
    them soon (torch and transformers after the first page, captum on the classifier page) starts the
    import while the visitor reads, instead of on their next click. A module that fails to import is
    left for the code that needs it to report, in its own words."""
    import importlib

    with _IMPORTS_LOCK:
        todo = [m for m in modules if m not in _BACKGROUND_IMPORTS]
        _BACKGROUND_IMPORTS.update(todo)
    if not todo:
        return False

    def run() -> None:
        for name in todo:
            try:
                with package_import_lock(name):
                    importlib.import_module(name)
            except Exception:  # noqa: BLE001 - reported where the module is used
                pass

    threading.Thread(target=run, name="bertgeom-import-" + todo[0].split(".")[0], daemon=True).start()
    return True


_MACHINE: dict | None = None


def _cpu_identity() -> tuple[str, str, set[str]]:
    """``(vendor, model name, flags)`` of this CPU from ``/proc/cpuinfo`` (Linux), else from
    :mod:`platform` with no flags. The model name carries x86's family and model numbers (a virtual
    machine may report only "AMD EPYC": family 25 model 17 says Zen 4)."""
    import platform

    vendor, model, flags = "", "", set()
    family = number = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value
                elif key == "model name" and not model:
                    model = value
                elif key == "cpu family" and not family:
                    family = value
                elif key == "model" and not number:
                    number = value
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                if vendor and model and flags:
                    break
    except OSError:
        pass
    if model and family and number:
        model = f"{model} (family {family} model {number})"
    return vendor or platform.machine(), model or platform.processor() or platform.machine(), flags


def machine(refresh: bool = False) -> dict:
    """What this machine is, for every benchmark line and speed table: CPU vendor and model name,
    usable cores, the instruction set torch dispatches to (``torch.backends.cpu.get_cpu_capability()``),
    the CPU's AVX2/AVX-512/bf16/VNNI/AMX flags, whether oneDNN's bf16 kernels are available
    (``bf16_units``: what :func:`bertgeom.forward.bf16_supported` reads), the GPU torch sees, and the
    versions of Python, torch and the optional runtimes. Computed once per process."""
    global _MACHINE
    if _MACHINE is not None and not refresh:
        return dict(_MACHINE)
    import importlib.metadata
    import platform

    import torch

    vendor, model, flags = _cpu_identity()
    try:
        isa = str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - an older torch
        isa = "unknown"
    try:
        mkldnn_bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # noqa: BLE001
        mkldnn_bf16 = False
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for pkg in ("openvino", "onnxruntime", "onnx"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    info = {
        "vendor": vendor,
        "model": model,
        "cores": usable_cores(),
        "isa": isa,
        "avx2": "avx2" in flags,
        "avx512": "avx512f" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "avx512_vnni": "avx512_vnni" in flags,
        "amx": bool({"amx_bf16", "amx_tile"} & flags),
        "mkldnn_bf16": mkldnn_bf16,
        "bf16_units": isa.upper().startswith(("AVX512", "AMX")) and mkldnn_bf16,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "",
        "versions": versions,
    }
    _MACHINE = info
    return dict(info)


def machine_line(info: dict | None = None) -> str:
    """One line naming the machine, e.g. ``AuthenticAMD AMD EPYC, 2 cores, torch ISA AVX512 (avx512_bf16,
    avx512_vnni, no AMX; oneDNN bf16 yes), torch 2.13.0, openvino 2026.4.1``."""
    m = machine() if info is None else info
    units = [u for u in ("avx512_bf16", "avx512_vnni") if m.get(u)]
    units.append("AMX" if m.get("amx") else "no AMX")
    if not m.get("avx512"):
        units.insert(0, "AVX2 only" if m.get("avx2") else "no AVX2")
    versions = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items() if k != "python")
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ""
    return (f"{m.get('vendor', '?')} {m.get('model', '?')}, {m.get('cores', '?')} cores, torch ISA {m.get('isa', '?')} "
            f"({', '.join(units)}; oneDNN bf16 {'yes' if m.get('mkldnn_bf16') else 'no'}){gpu}; {versions}")


def cache_dir() -> Path:
    """Where disk caches live: the prepared set views, the on-demand set caches, the measured backend
    choices and the exported classifier graphs. ``$BERTGEOM_CACHE_DIR`` when set; else
    ``$XDG_CACHE_HOME/bertgeom`` when that is an absolute path (the XDG Base Directory rule: a relative
    one is ignored); else ``~/.cache/bertgeom``. Read at every call, so a process that changes the
    variables (a test session, a server started with them) is followed at once."""
    own = os.environ.get("BERTGEOM_CACHE_DIR")
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "bertgeom"
    return Path.home() / ".cache" / "bertgeom"
