"""A bounded, first-come-first-served queue for the server's heavy computations.

Why: the app serves every session from one process. When several sessions classify genomes or
average sets at once, their script threads share the CPU cores and Python's interpreter lock, and a
visitor who only opens the home page waits behind all of them (on 2 cores, 6 busy sessions made a
7th client's home page take 3-11 s). Heavy work therefore runs through a few *slots* (default: half
the cores, at least 1; ``$BERTGEOM_HEAVY_SLOTS`` overrides), in arrival order; everything else
(cached reads, page layout, figures of a computed result) never waits. A waiting session sees
"Queued: N ahead of yours" and starts by itself.

Use :func:`queued` (or ``with heavy(...)``) *inside* ``st.cache_data``/``st.cache_resource``
functions, so that only a cache *miss* takes a slot: a page that reads a result already computed
stays as fast as before.

One rule keeps the queue free of deadlocks: **code holding a slot never calls another queued cached
function**; fetch such inputs (``get_trace``) first, then take the slot for the leaf computation.
Streamlit holds a per-value lock while a cached function computes: a session waiting for a slot
inside ``cached_trace(x)`` holds the lock of ``x``, and a slot holder that then asked for
``cached_trace(x)`` would wait on it for ever. (A thread that already holds a slot passes straight
through a nested ``heavy``, so a same-thread nesting is harmless.)
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import contextmanager, suppress

ENV_SLOTS = "BERTGEOM_HEAVY_SLOTS"


def heavy_slots(env: Mapping[str, str] | None = None, cpu_count: int | None = None) -> int:
    """Slots for heavy work: ``$BERTGEOM_HEAVY_SLOTS`` when a positive integer, else half the cores
    (at least 1), so that at least one core stays free for light requests."""
    from bertgeom.runtime import half_the_cores_or

    return half_the_cores_or(ENV_SLOTS, env, cpu_count)


class WorkQueue:
    """At most ``slots`` holders at once, admitted in arrival order (no overtaking).

    ``slot(on_wait)`` is a context manager; while the caller waits, ``on_wait(ahead)`` is called
    every ``poll`` seconds with the number of computations ahead of it (running + queued before it),
    outside the queue's lock. An exception raised by ``on_wait`` (a session that navigated away)
    leaves the queue cleanly.
    """

    def __init__(self, slots: int, poll: float = 0.5):
        self.slots = max(1, int(slots))
        self.poll = poll
        self._cv = threading.Condition()
        self._waiting: deque = deque()
        self._running = 0
        self._local = threading.local()
        self.waits = 0  # how many callers had to wait (a figure for tests and logs)

    def ahead(self, ticket=None) -> int:
        """Computations ahead of ``ticket`` (or of a newcomer when ``None``)."""
        with self._cv:
            queued = self._waiting.index(ticket) if ticket is not None and ticket in self._waiting else len(self._waiting)
            return self._running + queued

    @property
    def busy(self) -> int:
        with self._cv:
            return self._running

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None):
        if getattr(self._local, "depth", 0):  # nested heavy call in a thread that holds a slot
            self._local.depth += 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        ticket = object()
        waited = False
        with self._cv:
            self._waiting.append(ticket)
        try:
            while True:
                with self._cv:
                    if self._running < self.slots and self._waiting[0] is ticket:
                        self._waiting.popleft()
                        self._running += 1
                        break
                    ahead = self._running + self._waiting.index(ticket)
                    if not waited:
                        self.waits += 1
                        waited = True
                if on_wait is not None:
                    on_wait(ahead)
                with self._cv:
                    if not (self._running < self.slots and self._waiting[0] is ticket):
                        self._cv.wait(self.poll)
        except BaseException:
            with self._cv:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
                self._cv.notify_all()
            raise
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cv:
                self._running -= 1
                self._cv.notify_all()


_QUEUE: WorkQueue | None = None
_QUEUE_LOCK = threading.Lock()


def work_queue() -> WorkQueue:
    """The process-wide queue (one per server), sized by :func:`heavy_slots`."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None:
            _QUEUE = WorkQueue(heavy_slots())
        return _QUEUE


@contextmanager
def _not_replayed():
    """Elements written inside a cached function are recorded and replayed on every later cache hit;
    the queue's notice must not be, so recording is paused while it is written."""
    try:
        from streamlit.runtime.caching.cached_message_replay import in_cached_function
    except ImportError:  # pragma: no cover - another Streamlit layout: the notice may replay (harmless)
        yield
        return
    token = in_cached_function.set(False)
    try:
        yield
    finally:
        in_cached_function.reset(token)


def queue_notice(ahead: int, slots: int) -> str:
    runs = "one at a time" if slots == 1 else f"{slots} at a time"
    return (f"Queued: {ahead} heavy computation{'s' if ahead != 1 else ''} ahead of yours. Heavy work runs "
            f"{runs} so that the app stays quick for everyone; yours starts by itself.")


@contextmanager
def heavy(what: str = "this computation"):
    """Run the block in a slot of :func:`work_queue`, showing 'Queued: N ahead' while it waits."""
    import streamlit as st

    q = work_queue()
    box = []
    shown = [-1]

    def on_wait(ahead: int) -> None:
        if ahead == shown[0]:  # redraw only when the position changes (no traffic while it stands)
            return
        shown[0] = ahead
        with _not_replayed():
            if not box:
                box.append(st.empty())
            box[0].info(f":material/hourglass_top: {queue_notice(ahead, q.slots)} ({what})")

    def clear() -> None:
        if box:
            with _not_replayed(), suppress(Exception):  # a session that went away has nothing to clear
                box[0].empty()

    try:
        with q.slot(on_wait):
            clear()
            yield
    finally:
        clear()


def queued(what: str):
    """Decorator: the function's body runs in a heavy-work slot (put it *under* the cache decorator,
    so cache hits never queue)."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with heavy(what):
                return fn(*args, **kwargs)

        return run

    return wrap
