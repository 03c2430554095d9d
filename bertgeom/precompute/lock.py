"""One precompute run per results directory: an advisory lock on ``OUT/precompute.lock``.

Two runs writing the same ``--out`` would compute the same shards twice and overwrite each other's
manifest entry. The driver therefore holds an exclusive ``flock`` on ``OUT/precompute.lock`` for the
whole run and writes its pid, host and start time into the file (for the message the second run
prints). The kernel drops a ``flock`` when its process dies, however it dies: a lock file left by a
killed run (a dead pid) is simply taken over by the next run, with no stale-lock guessing.

A second run either fails at once with :class:`LockBusy` (one sentence naming the holder) or, with
``wait=True``, polls until the holder is gone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from bertgeom.precompute.core import PrecomputeOutputError

LOCK_NAME = "precompute.lock"


class LockBusy(PrecomputeOutputError):
    """Another run holds the lock of this results directory (``holder``: its pid, host, start)."""

    def __init__(self, message: str, holder: dict):
        super().__init__(message)
        self.holder = holder


def _describe(holder: dict) -> str:
    started = holder.get("started")
    when = time.strftime(" since %Y-%m-%d %H:%M UTC", time.gmtime(started)) if isinstance(started, (int, float)) else ""
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}{when}"


class RunLock:
    """Exclusive lock of a results directory for one precompute run (a context manager), on
    :class:`bertgeom.safety.ExclusiveLock` (the lock file is never followed as a link).

    ``acquire(wait=False)`` raises :class:`LockBusy` when another process holds it;
    ``wait=True`` retries every ``poll`` seconds, calling ``on_wait(holder)`` once before waiting.
    """

    def __init__(self, out: str | os.PathLike, *, wait: bool = False, poll: float = 1.0,
                 on_wait: Callable[[dict], None] | None = None):
        from bertgeom.safety import ExclusiveLock

        self.path = Path(out) / LOCK_NAME
        self.wait, self.poll, self.on_wait = wait, poll, on_wait
        self._lock = ExclusiveLock(self.path)

    @property
    def took_over(self) -> dict | None:
        """The holder recorded by a dead run whose lock was taken over."""
        return self._lock.took_over

    def holder(self) -> dict:
        from bertgeom.safety import read_lock_holder

        return read_lock_holder(self.path)

    def acquire(self) -> "RunLock":
        import errno

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            told = False
            while not self._lock.try_acquire():
                holder = self.holder()
                if not self.wait:
                    raise LockBusy(
                        f"another precompute run ({_describe(holder)}) is writing '{self.path.parent}'; "
                        "let it finish, or rerun with --wait to start when it does.", holder)
                if not told and self.on_wait is not None:
                    self.on_wait(holder)
                    told = True
                time.sleep(self.poll)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PrecomputeOutputError(f"'{self.path}' is a symbolic link; a results folder's files are never "
                                            "followed as links: remove it and rerun.") from None
            raise PrecomputeOutputError(f"'{self.path.parent}' cannot be written ({exc.strerror or exc}).") from None
        return self

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
