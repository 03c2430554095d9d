"""A bounded queue for the server's heavy computations: by priority, then first come first served.

Why: the app serves every session from one process. When several sessions classify genomes or
average sets at once, their script threads share the CPU cores and Python's interpreter lock, and a
visitor who only opens the home page waits behind all of them (on 2 cores, 6 busy sessions made a
7th client's home page take 3-11 s). Heavy work therefore runs through a few *slots* (default: half
the cores, at least 1; ``$BERTGEOM_HEAVY_SLOTS`` overrides), in arrival order; everything else
(cached reads, page layout, figures of a computed result) never waits. A waiting session sees
"Queued: N ahead of yours" and starts by itself. A batch (many records) takes one slot per chunk
at :data:`BATCH` priority, so one genome that someone waits for goes ahead of its next chunk.

Two ways to use it, both of which let only a cache *miss* take a slot (a page that reads a result
already computed stays as fast as before):

* :func:`queued` (or ``with heavy(...)``) *inside* a ``st.cache_data``/``st.cache_resource``
  function. Its notice is written with the cache's recording paused, so it is never replayed.
* :func:`free_slot_or_raise` inside the cached function and :func:`call_heavy` around its call in
  the page: the cached function creates no element at all, and a miss that must wait does so in
  the page's code, outside the cache (batches and integrated gradients do this).

A slot holder that has the server to itself (no other script run in flight, nobody queued) runs
torch on every core; otherwise on the per-request count (:func:`bertgeom.runtime.heavy_threads`).

One rule keeps the queue free of deadlocks: **code holding a slot never calls another queued cached
function**; fetch such inputs (``get_trace``) first, then take the slot for the leaf computation.
Streamlit holds a per-value lock while a cached function computes: a session waiting for a slot
inside ``cached_trace(x)`` holds the lock of ``x``, and a slot holder that then asked for
``cached_trace(x)`` would wait on it for ever. (A thread that already holds a slot passes straight
through a nested ``heavy``, so a same-thread nesting is harmless.)

References: Streamlit's caching and element replay, docs.streamlit.io/develop/concepts/architecture/caching.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Mapping
from contextlib import contextmanager, suppress

ENV_SLOTS = "BERTGEOM_HEAVY_SLOTS"


def heavy_slots(env: Mapping[str, str] | None = None, cpu_count: int | None = None) -> int:
    """Slots for heavy work: ``$BERTGEOM_HEAVY_SLOTS`` when a positive integer, else half the cores
    (at least 1), so that at least one core stays free for light requests."""
    from bertgeom.runtime import half_the_cores_or

    return half_the_cores_or(ENV_SLOTS, env, cpu_count)


#: Priorities of :meth:`WorkQueue.slot` (lower goes first): one genome or one input someone is
#: waiting to see, and one chunk of a batch (a table of many records).
INTERACTIVE, BATCH = 0, 1


class WorkQueue:
    """At most ``slots`` holders at once, admitted by priority, then in arrival order.

    ``slot(on_wait, priority)`` is a context manager; while the caller waits, ``on_wait(ahead)`` is
    called every ``poll`` seconds with the number of computations ahead of it (running + queued
    before it), outside the queue's lock. An exception raised by ``on_wait`` (a session that
    navigated away) leaves the queue cleanly. A batch takes one slot per chunk (:data:`BATCH`), so a
    single genome (:data:`INTERACTIVE`) that queued meanwhile goes ahead of the batch's next chunk
    instead of waiting for the whole table.
    """

    def __init__(self, slots: int, poll: float = 0.5, threads_for: Callable[[bool], int] | None = None):
        self.slots = max(1, int(slots))
        self.poll = poll
        #: ``threads_for(others_busy) -> n``: torch threads of a slot holder (None: left as they are)
        self.threads_for = threads_for
        self._cv = threading.Condition()
        self._waiting: list[tuple[int, int]] = []  # tickets: (priority, arrival number)
        self._arrivals = itertools.count()
        self._running = 0
        self._local = threading.local()
        self.waits = 0  # how many callers had to wait (a figure for tests and logs)

    def _ahead_of(self, ticket) -> int:  # caller holds the lock
        return self._running + sum(t < ticket for t in self._waiting)

    def _admits(self, ticket) -> bool:  # caller holds the lock
        return self._running < self.slots and not any(t < ticket for t in self._waiting)

    def ahead(self, priority: int | None = None) -> int:
        """Computations ahead of a newcomer (of ``priority``; ``None``: behind everyone)."""
        with self._cv:
            if priority is None:
                return self._running + len(self._waiting)
            return self._ahead_of((priority, float("inf")))

    @property
    def busy(self) -> int:
        with self._cv:
            return self._running

    @property
    def waiting(self) -> int:
        with self._cv:
            return len(self._waiting)

    def wait_for_waiters(self, n: int = 1, timeout: float | None = None) -> bool:
        """Block until at least ``n`` callers wait for a slot (False on timeout): lets a test, or a
        monitor, act on the moment a computation has queued instead of guessing it with a sleep."""
        with self._cv:
            return self._cv.wait_for(lambda: len(self._waiting) >= n, timeout)

    def holds_slot(self) -> bool:
        """True in a thread that is inside :meth:`slot` (nested heavy calls pass straight through)."""
        return bool(getattr(self._local, "depth", 0))

    def others_busy(self) -> bool:
        """True when another computation holds a slot, someone waits for one, or another script run
        of the server is in flight (:func:`bertgeom.runtime.script_runs_in_flight`)."""
        from bertgeom.runtime import script_runs_in_flight

        with self._cv:
            queue_busy = self._running > 1 or bool(self._waiting)
        return queue_busy or script_runs_in_flight() > 1

    @contextmanager
    def _held(self):
        self._local.depth = 1
        try:
            if self.threads_for is None:
                yield
            else:
                from bertgeom.runtime import torch_threads

                with torch_threads(self.threads_for(self.others_busy())):
                    yield
        finally:
            self._local.depth = 0
            with self._cv:
                self._running -= 1
                self._cv.notify_all()

    @contextmanager
    def _nested(self):
        self._local.depth += 1
        try:
            yield
        finally:
            self._local.depth -= 1

    @contextmanager
    def slot_if_free(self, priority: int = INTERACTIVE):
        """Yield True holding a slot when one is free now and nobody waits before ``priority``
        (or this thread already holds one); else yield False at once, holding nothing."""
        if self.holds_slot():
            with self._nested():
                yield True
            return
        with self._cv:
            free = self._admits((priority, float("inf")))  # behind every waiter of its priority
            if free:
                self._running += 1
        if not free:
            yield False
            return
        with self._held():
            yield True

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None, priority: int = INTERACTIVE):
        if self.holds_slot():  # nested heavy call in a thread that holds a slot
            with self._nested():
                yield
            return
        waited = False
        with self._cv:
            ticket = (int(priority), next(self._arrivals))
            self._waiting.append(ticket)
            self._cv.notify_all()  # wakes wait_for_waiters
        try:
            while True:
                with self._cv:
                    if self._admits(ticket):
                        self._waiting.remove(ticket)
                        self._running += 1
                        break
                    ahead = self._ahead_of(ticket)
                    if not waited:
                        self.waits += 1
                        waited = True
                if on_wait is not None:
                    on_wait(ahead)
                with self._cv:
                    if not self._admits(ticket):
                        self._cv.wait(self.poll)
        except BaseException:
            with self._cv:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
                self._cv.notify_all()
            raise
        with self._held():
            yield


_QUEUE: WorkQueue | None = None
_QUEUE_LOCK = threading.Lock()


def work_queue() -> WorkQueue:
    """The process-wide queue (one per server), sized by :func:`heavy_slots`."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None:
            from bertgeom.runtime import heavy_threads

            _QUEUE = WorkQueue(heavy_slots(), threads_for=heavy_threads)
        return _QUEUE


@contextmanager
def not_replayed():
    """Elements written inside a cached function are recorded and replayed on every later cache hit;
    a transient element (the queue's notice, a progress bar) must not be, so recording is paused while
    it is written. Outside a cached function this changes nothing."""
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


#: Per thread: where a worker of :func:`bertgeom.ui.widgets.waited` reports its place in the queue
#: (the page's own thread draws it), so :func:`heavy` draws nothing from a thread that is not the script's.
WAITER = threading.local()


@contextmanager
def heavy(what: str = "this computation", priority: int = INTERACTIVE):
    """Run the block in a slot of :func:`work_queue`, showing 'Queued: N ahead' while it waits (in a
    worker of :func:`bertgeom.ui.widgets.waited`: telling that page's wait instead)."""
    import streamlit as st

    q = work_queue()
    report = getattr(WAITER, "on_wait", None)
    if report is not None:
        with q.slot(report, priority):
            report(None)
            yield
        return
    box = []
    shown = [-1]

    def on_wait(ahead: int) -> None:
        if ahead == shown[0]:  # redraw only when the position changes (no traffic while it stands)
            return
        shown[0] = ahead
        with not_replayed():
            if not box:
                box.append(st.empty())
            box[0].info(f":material/hourglass_top: {queue_notice(ahead, q.slots)} ({what})")

    def clear() -> None:
        if box:
            with not_replayed(), suppress(Exception):  # a session that went away has nothing to clear
                box[0].empty()

    try:
        with q.slot(on_wait, priority):
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


class SlotBusy(Exception):
    """Raised inside a cached function that found no free slot: :func:`call_heavy` catches it, waits
    for a slot *outside* the cache (where its notice may be drawn) and calls the function again.
    Streamlit caches no exception, so nothing of the first call is kept."""


@contextmanager
def free_slot_or_raise(priority: int = INTERACTIVE):
    """Inside a cached function: hold a slot if one is free now (or this thread holds one already),
    else raise :class:`SlotBusy`. No Streamlit element is created, so the cached call stays pure."""
    with work_queue().slot_if_free(priority) as got:
        if not got:
            raise SlotBusy
        yield


def call_heavy(cached_fn, *args, what: str = "this computation", priority: int = INTERACTIVE, **kwargs):
    """``cached_fn(*args, **kwargs)`` whose body takes its slot with :func:`free_slot_or_raise`.

    A cache hit returns at once (no slot, no notice). A miss that finds the queue busy waits here,
    in the page's own code and outside any cache, with the 'Queued' notice, then computes holding
    the slot. This keeps every Streamlit element out of cached functions (their replay on a later
    run, or in another session, would otherwise raise ``CacheReplayClosureError``)."""
    try:
        return cached_fn(*args, **kwargs)
    except SlotBusy:
        pass
    with heavy(what, priority):
        return cached_fn(*args, **kwargs)
