"""The widget idioms every page shares, written once.

* :func:`chart` -- a plotly figure with the export toolbar; ``selects_head=True`` makes a click
  on a head (grid square, MDS point, map) select that head everywhere;
* :func:`csv_button` and :func:`table` -- a CSV download, and a table with its download;
* :func:`head_picker` -- the layer and head boxes (1-based), kept in step with clicks;
* :func:`progress` -- a progress bar as a ``(done, total)`` callback;
* :func:`waited` -- one opaque computation (a projection, a pair of forward passes) run beside a live
  wait: a spinner at once, past 3 s a bar with the time elapsed and left, and *Stop waiting*;
* :func:`open_tabs` -- lazy tabs: only the open one runs;
* :func:`guarded` -- any failure becomes one sentence, never a traceback;
* :func:`read_set_upload` -- every set uploader's one reading path: the set, or one sentence;
* :func:`errors_expander` -- the inputs of a set that could not be analysed;
* :func:`doc_caption` and :func:`doc_list` -- a metric's documentation record, as the UI shows it;
* :func:`teaching` -- the long explanatory texts of ``bertgeom/ui/texts/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pandas as pd
import streamlit as st

from bertgeom.figures.base import PLOTLY_CONFIG, picked_head
from bertgeom.inputs import InputError
from bertgeom.ui.methods_link import linked
from bertgeom.ui.url_settings import value_from_url, value_to_url
from bertgeom.ui.state import select_head
from bertgeom.safety import csv_bytes, error_text, plain
from bertgeom.tables import counted

TEXTS = Path(__file__).resolve().parent / "texts"


def _on_pick(key: str) -> None:
    picked = picked_head(st.session_state.get(key))
    if picked is not None and picked[0] >= 0 and picked[1] >= 0:
        select_head(*picked)


def chart(fig, key: str | None = None, *, selects_head: bool = False) -> None:
    """Draw ``fig`` with the export toolbar; with ``selects_head`` a click selects the head."""
    if selects_head:
        st.plotly_chart(fig, key=key, on_select=partial(_on_pick, key), selection_mode="points", config=PLOTLY_CONFIG)
    else:
        st.plotly_chart(fig, key=key, config=PLOTLY_CONFIG)


def csv_button(df: pd.DataFrame, file_name: str, key: str, label: str = "Download CSV") -> None:
    st.download_button(label, csv_bytes(df), file_name=file_name, mime="text/csv",
                       key=key, icon=":material/download:", on_click="ignore")


def table(df: pd.DataFrame, file_name: str, key: str, **kw) -> None:
    """A table and its CSV download."""
    st.dataframe(df, hide_index=True, width="stretch", **kw)
    csv_button(df, file_name, key)


def _on_head_boxes() -> None:
    select_head(st.session_state["w_layer"] - 1, st.session_state["w_head"] - 1)


def head_picker(num_layers: int, num_heads: int, columns=None) -> tuple[int, int]:
    """The layer and head number boxes (1-based) of the selected head; returns it 0-based."""
    layer, head = st.session_state["layer"], st.session_state["head"]
    st.session_state["w_layer"], st.session_state["w_head"] = layer + 1, head + 1
    c1, c2 = columns if columns is not None else st.columns(2)
    c1.number_input("Layer", min_value=1, max_value=num_layers, step=1, key="w_layer", on_change=_on_head_boxes)
    c2.number_input("Head", min_value=1, max_value=num_heads, step=1, key="w_head", on_change=_on_head_boxes)
    return layer, head


def usually_prepared_note() -> str:
    """What a set view says when it computes a result that is usually prepared ahead: whether this
    server's background preparation has not reached it yet, or is switched off."""
    from bertgeom.ui.prepared_cache import enabled

    if enabled():
        return ("This view is usually prepared in the background when the server starts; the preparation has "
                "not reached it yet on this server, so it is computed now, for you.")
    return ("This view is usually prepared ahead (python -m bertgeom prepare-sets, or in the background when a "
            "server starts); this server has not prepared it, so it is computed now, for you.")


def eta_text(done: int, total: int, elapsed_s: float) -> str:
    """An honest remaining-time estimate from the pace so far: none before the first item is done
    (nothing to go on), then ``(total - done)`` items at the mean time per item so far."""
    if done <= 0 or total <= 0:
        return "estimating the time left…"
    if done >= total:
        return "finishing…"
    left = (total - done) * elapsed_s / done
    return f"about {left:.0f} s left" if left < 90 else f"about {left / 60:.0f} min left"


#: For tests of *Cancel*: while the file this names exists, every progress bar waits at each update,
#: redrawing itself (where the rerun a *Cancel* asks for stops it), so the test's click surely comes
#: mid-computation however fast the machine. Unset in use.
HOLD_ENV = "BERTGEOM_PROGRESS_HOLD"


def _held() -> bool:
    import os

    hold = os.environ.get(HOLD_ENV)
    return bool(hold) and Path(hold).exists()


def _cancel(key: str) -> None:
    st.session_state["_cancelled"] = key


def _restart(key: str) -> None:
    if st.session_state.get("_cancelled") == key:
        st.session_state.pop("_cancelled", None)


@contextmanager
def progress(text: str, *, show: bool = True, usually_prepared: bool = False, key: str | None = None,
             note: str | None = None, eta: Callable[[int, int, float], str] | None = None,
             ) -> Iterator[Callable[..., None]]:
    """A progress bar for the duration of the block, updated by the yielded ``(done, total)``
    callback (``show=False``: a silent callback, e.g. when the answer is already cached), with the
    time left estimated from the pace so far (:func:`eta_text`) and a *Cancel* button.

    *Cancel* asks Streamlit for a new run, which stops this one at its next update (the work is one
    item per update, so it stops within one item; nothing half-done is cached). The view then says
    it was cancelled and offers to start again, instead of starting by itself. ``usually_prepared``
    says on the page that this result normally comes from the background preparation
    (:func:`usually_prepared_note`; ``note`` says it in the view's own words). ``key`` names the view
    for the cancel (default: ``text``). ``eta(done, total, elapsed_s)`` replaces the pace-based
    estimate; ``update(done, total, label)`` may name the stage now running in place of ``text``.

    Written with the cache's recording paused: a bar drawn while a cached function computes is
    never replayed on its later hits (a replayed update of a bar made outside the cached function
    raises ``CacheReplayClosureError``)."""
    import hashlib
    import time

    from bertgeom.ui.workqueue import not_replayed

    key = key or text
    if show and st.session_state.get("_cancelled") == key:
        st.info(f"Cancelled: {text.rstrip('…. ')}. Nothing was kept; start it again when you are ready.",
                icon=":material/block:")
        st.button("Start it again", key="w_restart_" + hashlib.sha1(key.encode()).hexdigest()[:10],
                  on_click=_restart, args=(key,))
        st.stop()
    slot = bar = None
    with not_replayed():
        if show:
            slot = st.empty()  # the note, bar and button go away together when the work is done
            with slot.container():
                if usually_prepared or note:
                    st.caption(f"ℹ️ {note or usually_prepared_note()}")
                bar = st.progress(0.0, text=f"{text} {(eta or eta_text)(0, 1, 0.0)}")
                st.button("Cancel", key="w_cancel_" + hashlib.sha1(key.encode()).hexdigest()[:10],
                          on_click=_cancel, args=(key,), icon=":material/stop_circle:",
                          help="Stops this computation within one input; nothing half-done is kept.")
    start = time.monotonic()

    def update(done: int, total: int, label: str | None = None) -> None:
        if bar is not None:
            while True:
                with not_replayed():
                    left = (eta or eta_text)(done, total, time.monotonic() - start)
                    bar.progress(min(1.0, done / max(total, 1)), text=f"{label or text} {done}/{total} · {left}")
                if not _held():
                    break
                time.sleep(0.05)  # HOLD_ENV (tests only): the redraw above is where a Cancel stops the run

    try:
        yield update
    finally:
        if slot is not None:
            with not_replayed():
                slot.empty()


#: A computation shorter than this shows nothing (a warm click does not flash a spinner).
SPINNER_AFTER_S = 0.2
#: Past this a spinner becomes a progress bar with the time elapsed and left and *Stop waiting*.
PROGRESS_AFTER_S = 3.0
#: How long each kind of computation took last on this server (``estimate_key`` -> seconds): the
#: estimate of the next one. A process-lifetime measurement, not a cache of results.
_LAST_SECONDS: dict[str, float] = {}


def wait_text(text: str, elapsed_s: float, estimate_s: float | None, ahead: int | None = None) -> str:
    """The progress bar's line: the queue position while it waits for a heavy-work slot, else the time
    so far and, from the last run of the same kind on this server, the time left (no estimate on a
    first run: it says so instead of guessing)."""
    if ahead is not None:
        return f"{text} queued: {counted(ahead, 'heavy computation')} ahead of yours · {elapsed_s:.0f} s"
    if not estimate_s:
        return f"{text} {elapsed_s:.0f} s so far · the first on this server, so no estimate yet"
    left = estimate_s - elapsed_s
    if left <= 0:
        return f"{text} {elapsed_s:.0f} s so far · longer than last time ({estimate_s:.0f} s), finishing…"
    return f"{text} {elapsed_s:.0f} s so far · about {left:.0f} s left (last time {estimate_s:.0f} s)"


def _stop_waiting(key: str) -> None:
    st.session_state["_stopped_waiting"] = key


def _wait_again(key: str) -> None:
    if st.session_state.get("_stopped_waiting") == key:
        st.session_state.pop("_stopped_waiting", None)


def waited(fn: Callable[..., object], *args, text: str, key: str | None = None,
           estimate_key: str | None = None, priority: int | None = None, **kwargs):
    """``fn(*args, **kwargs)`` -- a pure computation (a cached function, or one that takes its
    heavy-work slot with :func:`~bertgeom.ui.workqueue.free_slot_or_raise`) -- run in a worker thread
    while this script thread keeps the page alive: nothing for the first 0.2 s (a warm click), then a
    spinner with the seconds so far, and past 3 s a progress bar with the time elapsed and the time
    left (from the last computation of ``estimate_key`` on this server) and a *Stop waiting* button.

    Streamlit's own running indicator is hidden (``toolbarMode = "minimal"``), so this is the page's
    only sign of work. *Stop waiting* (or any click elsewhere) reruns the page at once: the computation
    itself cannot be interrupted halfway (a UMAP fit has no stopping point), so it finishes in the
    background and is kept, and the view says so and offers to show it. Every Streamlit element is
    drawn here, in the script thread, never inside a cached function. Errors reach the caller."""
    import hashlib
    import threading
    import time

    from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

    from bertgeom.ui.workqueue import INTERACTIVE, WAITER, SlotBusy, not_replayed, work_queue

    key = key or text
    estimate_key = estimate_key or key
    tag = hashlib.sha1(key.encode()).hexdigest()[:10]
    if st.session_state.get("_stopped_waiting") == key:
        st.info(f"Stopped waiting: {text.rstrip('…. ')}. It goes on in the background and is kept, so showing "
                "it later is quicker (at once once it is done).", icon=":material/block:")
        st.button("Show it", key="w_wait_again_" + tag, on_click=_wait_again, args=(key,))
        st.stop()
    done = threading.Event()
    out: dict = {}
    ahead: list[int | None] = [None]

    def on_wait(n: int | None) -> None:  # the worker's place in the heavy-work queue (None: running)
        ahead[0] = n

    def work() -> None:
        start = time.monotonic()
        WAITER.on_wait = on_wait  # heavy() in this thread tells the page instead of drawing
        try:
            try:
                out["value"] = fn(*args, **kwargs)
            except SlotBusy:  # wait for a slot here, in the worker; the page shows the position
                with work_queue().slot(on_wait, INTERACTIVE if priority is None else priority):
                    ahead[0] = None
                    out["value"] = fn(*args, **kwargs)
            if time.monotonic() - start > SPINNER_AFTER_S:  # a computation, not a cache hit
                _LAST_SECONDS[estimate_key] = time.monotonic() - start
        except BaseException as exc:  # noqa: BLE001 - handed to the script thread, which raises it
            out["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name=f"bertgeom-wait-{tag}", daemon=True)
    ctx = get_script_run_ctx()
    if ctx is not None:
        add_script_run_ctx(worker, ctx)
    start = time.monotonic()
    worker.start()
    if not done.wait(SPINNER_AFTER_S):
        estimate = _LAST_SECONDS.get(estimate_key)
        with not_replayed():
            slot = st.empty()
            with slot.container(), st.spinner(text, show_time=True):
                done.wait(max(0.0, PROGRESS_AFTER_S - (time.monotonic() - start)))
            bar = None
            while not done.wait(0.5):
                elapsed = time.monotonic() - start
                line = wait_text(text, elapsed, estimate, ahead[0])
                share = min(0.95, elapsed / estimate) if estimate else min(0.9, elapsed / (elapsed + 30))
                if bar is None:
                    with slot.container():
                        bar = st.progress(share, text=line)
                        st.button("Stop waiting", key="w_stop_wait_" + tag, on_click=_stop_waiting, args=(key,),
                                  icon=":material/stop_circle:",
                                  help="Gives the page back now; the computation goes on in the background and "
                                       "is kept for the next time.")
                else:  # each update is also where a click's rerun stops this run
                    bar.progress(share, text=line)
            slot.empty()
    if "error" in out:
        raise out["error"]
    return out.get("value")


#: Wrap a long tab strip onto a second line instead of clipping it behind scroll arrows.
TAB_STRIP_CSS = """<style>
.stTabs [role="tablist"] { flex-wrap: wrap; row-gap: 2px; overflow: visible; }
</style>"""


def open_tabs(names: list[str], key: str) -> Iterator[tuple[str, object]]:
    """``(name, container)`` of the open tab(s) only: the others do not run."""
    st.html(TAB_STRIP_CSS)  # every tab name stays visible (a wrapped strip, not a clipped one)
    value_from_url(key, names)  # a link's tab opens; the open tab goes into the URL and share links
    tabs = st.tabs(names, key=key, on_change="rerun")
    value_to_url(key)
    for name, tab in zip(names, tabs):
        if tab.open is not False:  # None (no state tracking) counts as open
            yield name, tab


@contextmanager
def guarded(what: str):
    """Turn any failure into one sentence (never a traceback)."""
    try:
        yield
    except InputError as exc:
        st.error(plain(exc))
    except Exception as exc:  # noqa: BLE001 - the page must not show tracebacks
        st.error(f"{what} failed: {plain(error_text(exc))}")


def read_set_upload(kind, name: str, data: bytes, labels_tsv: bytes | None = None):
    """The set an uploaded file holds, read by the input kind's reader (``kind.read_set``), or None
    after one sentence on the page: the one reading path of every set uploader (Cone, Subspace, Queries
    & keys), so an empty, binary, compressed-bomb, oversized or mislabelled file is answered the same way
    everywhere, never with the crash box. A label the reader does not know names the classes."""
    try:
        if labels_tsv is None:
            return kind.read_set(data) if kind.read_set is not None else None
        return kind.read_set(data, labels_tsv)
    except InputError as exc:
        st.error(f"'{plain(name)}' could not be read: {plain(error_text(exc, 400))}")
    except ValueError as exc:  # an unknown class label
        names = ", ".join(getattr(kind, "class_names", ()) or ()) or "the model's class names"
        st.error(f"The labels of '{plain(name)}' could not be read: {plain(error_text(exc))} (use {plain(names)}).")
    except MemoryError:
        st.error(f"'{plain(name)}' is too large to read on this server.")
    except Exception as exc:  # noqa: BLE001 - any reader failure is one sentence, never a traceback
        st.error(f"'{plain(name)}' could not be read: {plain(error_text(exc))}")
    return None


def errors_expander(errors: Iterable[tuple[str, str]]) -> None:
    """The inputs of a set that could not be analysed, with the reason (nothing when none)."""
    errors = list(errors)
    if errors:
        with st.expander(f"{counted(len(errors), 'input')} could not be analysed"):
            st.dataframe(pd.DataFrame(errors, columns=["input", "reason"]), hide_index=True, width="stretch")


def doc_caption(doc, *, formula: str | None = None) -> None:
    """``label = formula — source`` of a metric's documentation record."""
    st.caption(f"**{doc.label}** = `{formula or doc.formula}` — {linked(doc.source)}"
               + symbol_legend(formula or doc.formula))


#: Symbols the feature formulas use, explained where a formula on screen contains them.
SYMBOLS = {
    "n_v": "n_v = number of content tokens (not [CLS], [SEP] or padding)",
    "ln n": "n = number of tokens",
    "offset": "offset = key position − query position",
    "tau": "tau = threshold in units of the uniform weight 1/n_v",
    "in V": "V = the content tokens (not [CLS], [SEP] or padding)",
    "E_U": "E_U = the same quantity under uniform attention",
}


def symbol_legend(formula: str) -> str:
    """" (n_v = …; …)" for the symbols of :data:`SYMBOLS` that ``formula`` uses, else ""."""
    used = [text for sym, text in SYMBOLS.items() if sym in formula]
    return f" ({'; '.join(used)})" if used else ""


def doc_list(docs: Iterable) -> None:
    """A bulleted list of documentation records."""
    st.markdown("\n".join(f"* **{d.label}** = `{d.formula}` — {linked(d.source)}" for d in docs))


def teaching(name: str, title: str, **kw) -> None:
    """An expander holding the long text ``bertgeom/ui/texts/<name>.md``."""
    with st.expander(title, **kw):
        st.markdown(linked(text(name)))


def text(name: str) -> str:
    return (TEXTS / f"{name}.md").read_text(encoding="utf-8")


def restore_widgets(store: str, defaults: dict) -> None:
    """Put back the page's widget values that Streamlit forgot (it drops a widget's value when the
    widget is not drawn: another page, a closed tab); see :func:`remember_widgets`."""
    kept = st.session_state.setdefault(store, {})
    for k, v in defaults.items():
        if k not in st.session_state:
            st.session_state[k] = kept.get(k, v)


def remember_widgets(store: str, keys: Iterable[str]) -> None:
    """Keep a copy of the page's widget values for :func:`restore_widgets`."""
    st.session_state[store] = {k: st.session_state[k] for k in keys if k in st.session_state}
