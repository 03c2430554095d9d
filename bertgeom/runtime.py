"""Process-level settings of the server: how many torch threads one request may use.

On a shared 2-core server, concurrent sessions each running torch with two intra-op threads
oversubscribe OpenMP; one thread per request measured 10-30x faster there. The app therefore sets
the count deliberately on every script run (``torch.set_num_threads`` applies to the calling thread,
and Streamlit runs each session's script in its own thread).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_THREADS = "BERTGEOM_TORCH_THREADS"


def half_the_cores_or(name: str, env: Mapping[str, str] | None = None, cpu_count: int | None = None) -> int:
    """``$name`` when it is a positive integer (ASCII digits only: ``"²"`` is not one), else half the
    cores, at least 1: the server's rule for sizing its thread and work pools."""
    env = os.environ if env is None else env
    raw = (env.get(name) or "").strip()
    if raw.isascii() and raw.isdigit() and int(raw) > 0:
        return int(raw)
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 2)
    return max(1, cores // 2)


def server_threads(env: Mapping[str, str] | None = None, cpu_count: int | None = None) -> int:
    """Threads per request: ``$BERTGEOM_TORCH_THREADS`` when it is a positive integer, else half
    the cores (at least 1)."""
    return half_the_cores_or(ENV_THREADS, env, cpu_count)


def configure_server_threads() -> int:
    """Apply :func:`server_threads` to the current thread's torch and return it."""
    import torch

    n = server_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
