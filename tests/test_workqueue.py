"""The server's heavy-work queue (bertgeom.ui.workqueue): bounded, first come first served, clean
when a waiting session goes away, and in the app a cache miss waits for a slot while a cache hit
never does."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from bertgeom.ui.workqueue import (
    BATCH,
    INTERACTIVE,
    WorkQueue,
    heavy_slots,
    queue_notice,
    work_queue,
)

APP = str(Path(__file__).resolve().parent.parent / "app.py")

#: Upper bound of a wait on an event (a thread inside a slot, a caller queued): a failure guard
#: sized for a busy machine, never the ordering.
BOUND_S = 600


def test_slots_from_the_environment_or_half_the_cores():
    assert heavy_slots({}, cpu_count=2) == 1 and heavy_slots({}, cpu_count=16) == 8
    assert heavy_slots({}, cpu_count=1) == 1
    assert heavy_slots({"BERTGEOM_HEAVY_SLOTS": "3"}, cpu_count=2) == 3
    assert heavy_slots({"BERTGEOM_HEAVY_SLOTS": "0"}, cpu_count=4) == 2  # not a positive integer: ignored
    assert heavy_slots({"BERTGEOM_HEAVY_SLOTS": "²"}, cpu_count=4) == 2


def test_a_slot_holder_alone_gets_every_core_and_shares_them_when_others_are_busy():
    """heavy_threads: all cores when nothing else runs, the per-request count otherwise or when the
    operator fixed it; a slot holder runs with that count and the thread's own count comes back."""
    import torch

    from bertgeom.runtime import heavy_threads

    assert heavy_threads(False, {}, cpu_count=2) == 2 and heavy_threads(True, {}, cpu_count=2) == 1
    assert heavy_threads(False, {"BERTGEOM_TORCH_THREADS": "1"}, cpu_count=8) == 1
    assert heavy_threads(True, {}, cpu_count=16) == 8

    suite_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _slot_threads_seen(WorkQueue(2, poll=0.01, threads_for=lambda busy: 1 if busy else 3))
    finally:
        torch.set_num_threads(suite_threads)


def _slot_threads_seen(q: WorkQueue) -> None:
    import torch

    from bertgeom.runtime import script_run, script_runs_in_flight

    seen = {}
    with script_run():  # this script run alone
        with q.slot():
            seen["alone"] = torch.get_num_threads()
        with script_run():  # a second script run in flight (another session)
            assert script_runs_in_flight() == 2
            with q.slot():
                seen["shared"] = torch.get_num_threads()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with q.slot():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(5)
    with q.slot_if_free() as got:  # another computation holds the other slot
        seen["beside another"] = torch.get_num_threads() if got else None
    release.set()
    t.join()
    assert seen == {"alone": 3, "shared": 1, "beside another": 1}
    assert torch.get_num_threads() == 1 and script_runs_in_flight() == 0


def test_one_slot_runs_one_at_a_time_in_arrival_order_and_reports_who_is_ahead():
    q = WorkQueue(1, poll=0.01)
    order, seen, running, peak = [], {}, [0], [0]
    lock = threading.Lock()
    first_inside, release_first = threading.Event(), threading.Event()

    def job(i: int) -> None:
        def on_wait(ahead: int) -> None:
            seen.setdefault(i, ahead)

        with q.slot(on_wait):
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            order.append(i)
            if i == 0:
                first_inside.set()
                assert release_first.wait(BOUND_S)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=job, args=(i,)) for i in range(4)]
    threads[0].start()
    assert first_inside.wait(BOUND_S)
    for i in (1, 2, 3):  # arrive in order 1, 2, 3: each starts once the one before it has queued
        threads[i].start()
        assert q.wait_for_waiters(i, timeout=BOUND_S)
    release_first.set()
    for t in threads:
        t.join(BOUND_S)
    assert order == [0, 1, 2, 3] and peak[0] == 1
    assert seen == {1: 1, 2: 2, 3: 3}  # 1 running + those queued before it
    assert q.waits == 3 and q.busy == 0 and q.ahead() == 0


def test_two_slots_run_two_at_once():
    q = WorkQueue(2, poll=0.01)
    inside = threading.Barrier(2, timeout=BOUND_S)  # both must be inside at the same time, or this breaks

    def job():
        with q.slot():
            inside.wait()

    ts = [threading.Thread(target=job) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(BOUND_S)
    assert not inside.broken and q.waits == 0


def test_a_waiter_that_goes_away_leaves_the_queue_and_nesting_passes_through():
    q = WorkQueue(1, poll=0.01)

    class Gone(Exception):
        pass

    def leave(ahead):
        raise Gone

    with q.slot():
        with q.slot():  # the same thread again: no deadlock
            assert q.busy == 1
        with pytest.raises(Gone):
            # another thread's waiter navigates away while waiting
            err = []
            t = threading.Thread(target=lambda: _catch(lambda: q.slot(leave).__enter__(), err))
            t.start()
            t.join(5)
            raise err[0]
        assert q.ahead() == 1  # only the holder: the waiter is gone
    assert q.busy == 0
    with q.slot():  # and the queue still works
        pass


def _catch(fn, out):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        out.append(exc)


def test_notice_says_how_many_are_ahead():
    assert queue_notice(1, 1).startswith("Queued: 1 heavy computation ahead of yours")
    assert "one at a time" in queue_notice(1, 1)
    assert "3 heavy computations ahead" in queue_notice(3, 2) and "2 at a time" in queue_notice(3, 2)


def test_in_the_app_a_cache_miss_waits_for_a_slot_and_a_hit_does_not():
    from streamlit.testing.v1 import AppTest

    q = work_queue()
    sentence = f"A sentence nobody has traced yet, number {time.time_ns()}."
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = "tiny-random"
    at.session_state["text_value"] = sentence
    at.run()  # the home page draws without a trace; the Attention Heads page needs one
    before = q.waits
    done = threading.Event()

    def run():
        at.switch_page("app_pages/attention_heads.py").run()
        done.set()

    runner = threading.Thread(target=run)
    with q.slot():  # another session's heavy work holds a slot
        held = [q.slot() for _ in range(q.slots - 1)]  # ... and every other one
        for h in held:
            h.__enter__()
        runner.start()
        # the event: the script queues behind us (the bound only turns a hang into a failure)
        assert q.wait_for_waiters(1, timeout=600)
        assert q.ahead() == q.slots + 1 and not done.is_set()  # it waits: its trace is not computed
        for h in held:
            h.__exit__(None, None, None)
    runner.join(240)
    assert done.is_set() and not at.exception, [e.value for e in at.exception]
    assert q.waits >= before + 1
    assert not [i for i in at.info if i.value.startswith(":material/hourglass_top: Queued")]  # cleared
    # the same input again: a cache hit, no slot needed even while one is held elsewhere
    with q.slot():
        waits = q.waits
        t = threading.Thread(target=at.run)
        t.start()
        t.join(60)
        assert not t.is_alive() and q.waits == waits
    assert not [i for i in at.info if "Queued" in i.value]


def test_a_single_genome_that_waits_goes_ahead_of_a_batchs_next_chunk():
    """#25 item 9: one user's 200-genome batch made another's single genome wait for the whole table.
    A batch takes one slot per chunk at BATCH priority; a single genome queued meanwhile goes first."""
    q = WorkQueue(1, poll=0.01)
    order: list[str] = []
    chunk_1_running, release_chunk_1, single_waits = threading.Event(), threading.Event(), threading.Event()

    def batch() -> None:
        with q.slot(priority=BATCH):
            chunk_1_running.set()
            assert release_chunk_1.wait(BOUND_S)
            order.append("chunk 1")
        with q.slot(priority=BATCH):  # the next chunk asks at once
            order.append("chunk 2")

    def single() -> None:
        with q.slot(lambda ahead: single_waits.set()):
            order.append("single")

    tb = threading.Thread(target=batch)
    tb.start()
    assert chunk_1_running.wait(BOUND_S)
    ts = threading.Thread(target=single)
    ts.start()
    assert single_waits.wait(BOUND_S) and q.waiting == 1
    release_chunk_1.set()
    tb.join(BOUND_S)
    ts.join(BOUND_S)
    assert order == ["chunk 1", "single", "chunk 2"]
    assert q.busy == 0 and q.waiting == 0


def test_batch_chunks_keep_arrival_order_among_themselves_and_a_free_slot_is_taken_only_when_nobody_waits():
    q = WorkQueue(1, poll=0.01)
    with q.slot_if_free(BATCH) as got:
        assert got and q.busy == 1
        with q.slot_if_free(BATCH) as nested:  # the same thread: passes through
            assert nested and q.busy == 1
        other: list[bool] = []

        def try_now() -> None:
            with q.slot_if_free(INTERACTIVE) as got_it:
                other.append(got_it)

        t = threading.Thread(target=try_now)
        t.start()
        t.join(BOUND_S)
        assert other == [False] and q.busy == 1 and q.waiting == 0  # it holds nothing and left no ticket
        order: list[int] = []
        first_waits = threading.Event()

        def chunk(i: int, on_wait=None) -> None:
            with q.slot(on_wait, priority=BATCH):
                order.append(i)

        t1 = threading.Thread(target=chunk, args=(1, lambda a: first_waits.set()))
        t1.start()
        assert first_waits.wait(BOUND_S)
        t2 = threading.Thread(target=chunk, args=(2,))
        t2.start()
        assert q.wait_for_waiters(2, timeout=BOUND_S)
    t1.join(BOUND_S)
    t2.join(BOUND_S)
    assert order == [1, 2] and q.busy == 0


def test_in_the_app_a_batch_waits_outside_the_cache_and_reruns_never_queue(tiny_variant_dir, monkeypatch):
    """The batch table's chunks are pure cached calls: a miss that finds the queue busy waits in the
    page (its notice is the page's, cleared after), and every later run reads the cache without a slot
    even while another session holds every slot; reruns replay nothing (#21: CacheReplayClosureError)."""
    from streamlit.testing.v1 import AppTest

    from bertgeom.sars_cov_2.variant.spec import genome_set

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    q = work_queue()
    demo = [g.text for g in genome_set("demo")]
    nonce = f">batch_{time.time_ns()}"  # records nobody has classified in this process
    text = "\n".join(g.replace(">", nonce + "_", 1) for g in demo[:3])
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = text
    at.run()
    done = threading.Event()

    def run():
        at.switch_page("bertgeom/sars_cov_2/page.py").run()
        done.set()

    runner = threading.Thread(target=run)
    held = [q.slot() for _ in range(q.slots)]  # another session's heavy work holds every slot
    for h in held:
        h.__enter__()
    try:
        runner.start()
        assert q.wait_for_waiters(1, timeout=120)  # the batch's first chunk queued behind us
        assert not done.is_set()
    finally:
        for h in held:
            h.__exit__(None, None, None)
    runner.join(240)
    assert done.is_set() and not at.exception, [e.value for e in at.exception]
    assert any("3 records" in s.value for s in at.subheader) and len(at.dataframe[0].value) == 3
    assert not [i for i in at.info if "Queued" in i.value]  # the page's notice was cleared
    with q.slot():  # cache hits: no slot needed while one is held elsewhere, and no replay error
        waits = q.waits
        t = threading.Thread(target=at.run)
        t.start()
        t.join(120)
        assert not t.is_alive() and q.waits == waits
    assert not at.exception, [e.value for e in at.exception]


def _script_with_a_bar_inside_and_outside_a_cache():
    import streamlit as st

    from bertgeom.ui.widgets import progress

    @st.cache_data
    def slow_sum(n: int, _update=None) -> int:
        with progress("inside the cache") as update:
            for i in range(n):
                update(i + 1, n)
                if _update is not None:
                    _update(i + 1, n)  # a bar made outside, driven from inside
        return n * (n - 1) // 2

    with progress("outside the cache") as outer:
        st.session_state["total"] = slow_sum(5, _update=outer)
    st.write(f"total {st.session_state['total']}")


def test_progress_bars_in_a_cached_function_are_never_replayed():
    """widgets.progress writes with the cache's recording paused: neither a bar made inside a cached
    function nor one made outside and driven from inside is replayed on a later hit (the second case
    raised CacheReplayClosureError on every rerun of the batch table, #21)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_script_with_a_bar_inside_and_outside_a_cache, default_timeout=600)
    at.run()
    assert not at.exception and at.markdown[0].value == "total 10"
    at.run()  # a cache hit
    assert not at.exception, [e.value for e in at.exception]
    assert at.markdown[0].value == "total 10" and not at.get("progress")


def _script_with_a_cancellable_bar():
    import streamlit as st

    from bertgeom.ui.widgets import progress

    st.session_state.setdefault("runs_of_the_body", 0)
    with progress("Running the model over 3 inputs…", usually_prepared=True) as update:
        st.session_state["runs_of_the_body"] += 1
        for i in range(3):
            update(i + 1, 3)
    st.write("done")


def test_a_cancelled_set_view_says_so_and_waits_for_the_user():
    """A set view's bar has a Cancel button; once cancelled, the view says so and offers to start
    again instead of starting by itself (issue #36), and the note says it is usually prepared."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_script_with_a_cancellable_bar, default_timeout=600)
    at.run()
    assert not at.exception and at.session_state["runs_of_the_body"] == 1 and at.markdown[-1].value == "done"
    # the Cancel button's callback (the button itself is gone once the bar finished: AppTest cannot
    # click in the middle of a run, the browser's click asks Streamlit for a new run which stops this one)
    at.session_state["_cancelled"] = "Running the model over 3 inputs…"
    at.run()
    assert at.session_state["runs_of_the_body"] == 1  # not started again by itself
    assert "Cancelled" in at.info[0].value and at.button[0].label == "Start it again"
    at.button[0].click().run()
    assert at.session_state["runs_of_the_body"] == 2 and at.markdown[-1].value == "done"


def test_time_left_comes_from_the_pace_so_far():
    from bertgeom.ui.widgets import eta_text

    assert eta_text(0, 10, 5.0) == "estimating the time left…"
    assert eta_text(2, 10, 10.0) == "about 40 s left"
    assert eta_text(1, 40, 10.0) == "about 6 min left"
    assert eta_text(10, 10, 50.0) == "finishing…"


def test_no_cached_function_of_the_app_takes_a_progress_callback():
    """A bar driven from inside an ``st.cache_*`` function is an element made inside it: its replay
    crashes when another widget reruns the page. Bars stay outside the caches (the faithful geometry
    computes outside and keeps its result per process)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for path in [*(root / "bertgeom").rglob("*.py"), *(root / "app_pages").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            cached = any("cache_" in ast.unparse(d) for d in node.decorator_list)
            args = [a.arg for a in node.args.args + node.args.kwonlyargs]
            if cached and any("progress" in a or "update" in a or "callback" in a for a in args):
                offenders.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert offenders == []
