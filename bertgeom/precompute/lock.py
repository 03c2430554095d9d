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

import json
import os
import socket
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
    """Exclusive lock of a results directory for one precompute run (a context manager).

    ``acquire(wait=False)`` raises :class:`LockBusy` when another process holds it;
    ``wait=True`` retries every ``poll`` seconds, calling ``on_wait(holder)`` once before waiting.
    """

    def __init__(self, out: str | os.PathLike, *, wait: bool = False, poll: float = 1.0,
                 on_wait: Callable[[dict], None] | None = None):
        self.path = Path(out) / LOCK_NAME
        self.wait, self.poll, self.on_wait = wait, poll, on_wait
        self._fd: int | None = None
        self.took_over: dict | None = None  # the holder recorded by a dead run whose lock was taken over

    def holder(self) -> dict:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def _try(self) -> bool:
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        try:  # the holder may have removed the file between our open and our flock: retry on the new one
            same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return self._try()
        previous = os.read(fd, 4096)
        if previous.strip():
            try:
                self.took_over = json.loads(previous)
            except ValueError:
                self.took_over = {}
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(me).encode())
        os.fsync(fd)
        self._fd = fd
        return True

    def acquire(self) -> "RunLock":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            told = False
            while not self._try():
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
            raise PrecomputeOutputError(f"'{self.path.parent}' cannot be written ({exc.strerror or exc}).") from None
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        try:
            self.path.unlink(missing_ok=True)  # still ours: nobody else can hold it while we do
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

