"""Set views prepared ahead: the shipped sets are fixed, so their summaries are computed once per
model version and read from disk afterwards (``python -m bertgeom prepare-sets``, or the app's
background preparation at first server start).

Every summary is stored by :mod:`bertgeom.cache` under the *same key* the page reads (one
:class:`~bertgeom.cache.CacheKey` per view, built in :mod:`bertgeom.sets.keys`: the weights hash, the
set's fingerprint, every parameter and a format version per analysis), so a prepared result is the
page's own cache entry: a page never recomputes what is on disk, and a changed model, set or format
simply misses.

Tasks, in the order a visitor meets them (:func:`prepare_tasks`):

* the Attention Heads page's statistics over the set (:func:`bertgeom.sets.heads.compute_set_arrays`);
* the Cone Index page's per-class profiles with the page's default token set (content tokens,
  unpadded; :func:`bertgeom.sets.cone.cone_profiles_over_set`);
* the class-mean maps of the correctly predicted inputs, of every class and of all of them
  (:func:`bertgeom.sets.heads.class_mean_over_set`);
* the Subspace page's D1-D3 across inputs for every head (:func:`bertgeom.sets.subspace.head_set_reducer`
  on one padded forward pass per input, shared by all heads);
* the model's examples at the pages' defaults: attention flow and rollout into token 0, and the
  comparison with every same-shape checkpoint (:func:`bertgeom.analysis.flow.flow_view`,
  :func:`bertgeom.analysis.ablation.checkpoint_cosines`);
* head disabling over the page's default subset (one input per class, :mod:`bertgeom.sets.ablation`);
* Dong et al.'s rank-collapse curves (the cone page's content tokens, their composite norm) and Michel et al.'s head
  importance with the set's task (:mod:`bertgeom.sets.collapse`).
* the mixing ratios over the set (:func:`bertgeom.sets.context_mixing.mixing_over_set`); each example's
  context mixing (:func:`bertgeom.analysis.context_mixing.context_mixing_view`) is prepared with its
  attention flow;
* ALTI's reductions over the set (:func:`bertgeom.sets.context_mixing.alti_over_set`), last: the
  costliest per input (seconds per genome).

A status file (:func:`status_path`) tells the app what is queued, running and done, so a page can
show "being prepared: k of n" and read the result when it lands; a task written meanwhile by
someone else is skipped, and a wish file (:func:`wish_path`) moves a task to the front.

References: the analyses are those of docs/methods.md §3-§5 (heads), §8 (subspace), §9 (cone)
and Kovaleva et al. 2019 §4.6 (disabling).
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertgeom.cache import CacheKey, on_disk, write_arrays
from bertgeom.runtime import cache_dir
from bertgeom.safety import error_text
from bertgeom.sets.heads import SetSummary
from bertgeom.sets.inputs import InputItem, shipped_set
from bertgeom.sets.keys import example_views_key
from bertgeom.sets.views import (ALTI_SET, CLASS_MEAN, COMPARE, CONE_SET, CONTEXT_MIXING, CONTEXT_MIXING_SET, FLOW,
                                 HEAD_IMPORTANCE_SET, HEAD_SWEEP, HEADS_SET, RANK_COLLAPSE_SET, SUBSPACE_ACROSS, View)

#: Bump when the list of prepared tasks or the status file's layout changes.
FORMAT_VERSION = 1
#: The pages' default parameters that the prepared views use.
CONE_TOKEN_SET = "content"
SUBSPACE_EPS = 1e-3
SUBSPACE_TOKEN_SET = "all"
SWEEP_PER_CLASS = 1
SWEEP_TEXT_INPUTS = 8
#: The order in which several models' tasks run: every model's quick views first.
GROUP_ORDER = ("heads-set", "cone-set", "class-mean", "examples", "subspace-across", "head-sweep",
               "rank-collapse", "head-importance", "context-mixing-set", "alti-set")
#: The rank-collapse view's defaults that the prepared curves use.
COLLAPSE_TOKEN_SET = CONE_TOKEN_SET  # the Cone Index page's default, so the cone index sits beside it
COLLAPSE_NORM = "l1_inf"


# -------------------------------------------------------------------------------------------
# The views' keys and computations are declared once, in bertgeom.sets.views
# -------------------------------------------------------------------------------------------
def key_id(key) -> str:
    """The short name of a key (its file's stem), used in the status and wish files."""
    return key.digest


def is_on_disk(key) -> bool:
    return on_disk(key)


def class_mean_names(summary: SetSummary) -> dict:
    """``{class or None: names}`` of the inputs each class-mean map averages: the correctly predicted
    inputs of each class (all inputs for an encoder), as the page's class picker chooses them."""
    names = np.asarray(summary.names)
    out = {None: tuple(str(x) for x in names[summary.mask(None)])}
    for c in (summary.classes() if summary.classifier else []):
        out[c] = tuple(str(x) for x in names[summary.mask(c)])
    return {c: n for c, n in out.items() if n}


# -------------------------------------------------------------------------------------------
# Tasks
# -------------------------------------------------------------------------------------------
Progress = Callable[[int, int], None]


@dataclass
class PreparedTask:
    """One summary to prepare: its disk key, a title for the status line, and how to compute it
    (``run(progress)`` writes the result to disk under ``key`` and returns nothing). ``views`` are
    the views (:mod:`bertgeom.sets.views`) whose entries ``run`` writes, each through its own
    computation."""

    key: CacheKey
    title: str
    run: Callable[[Progress], None]
    group: str = ""  # tasks that belong to one view (e.g. the heads of the subspace view)
    model_id: str = ""
    views: tuple[View, ...] = ()

    @property
    def id(self) -> str:
        return key_id(self.key)


def view_task(view: View, args: tuple, title: str, *, model_id: str = "", group: str = "",
              given: Callable[[], dict] | None = None) -> PreparedTask:
    """The task that writes ``view``'s entry for ``args`` (``given()``: shared inputs of its computation)."""

    def run(progress: Progress) -> None:
        view.prepare(*args, progress=progress, **(given() if given is not None else {}))

    return PreparedTask(view.key_of(*args), title, run, group=group or view.name, model_id=model_id, views=(view,))


@dataclass
class _Context:
    """What every task of one model shares."""

    model_id: str
    loaded: object
    items: tuple

    @property
    def fingerprint(self) -> str:
        """The set's fingerprint (the set views' keys read it)."""
        from bertgeom.sets.inputs import set_fingerprint

        return set_fingerprint(self.items)

    @property
    def layer_weights(self):
        """The model's shared read-only layer weights."""
        from bertgeom.weights import layer_weights_of

        return layer_weights_of(self.loaded.model)


def prepare_tasks(model_id: str, loaded=None, *, subspace: bool = True, sweeps: bool = True,
                  items: Sequence[InputItem] | None = None, subspace_heads: int | None = None,
                  examples: bool = True) -> list[PreparedTask]:
    """The summaries of ``model_id``'s shipped set (or of ``items``), most visited view first (see
    module docstring).

    Tasks whose result is already on disk are included (a runner skips them), so the list is the
    same on every call and the status counts "k of n" over the whole preparation. ``subspace_heads``
    keeps the first N heads of the subspace view (L1 H1 first, the page's default)."""
    if loaded is None:
        from bertgeom.models import load_model

        loaded = load_model(model_id)
    items = tuple(items) if items is not None else shipped_set(loaded.spec.input_kind)
    ctx = _Context(model_id, loaded, items)
    tasks = [view_task(HEADS_SET, (loaded, items), f"statistics over the {len(items)} inputs (Attention Heads)",
                       model_id=model_id),
             view_task(CONE_SET, (loaded, items, CONE_TOKEN_SET, None),
                       f"cone index per class over the {len(items)} inputs (Cone Index)", model_id=model_id)]
    tasks += _class_mean_tasks(ctx)
    if examples:
        tasks += _example_tasks(ctx)
    if subspace:
        tasks += _subspace_tasks(ctx)[:subspace_heads]
    if sweeps:
        tasks += [view_task(HEAD_SWEEP, (loaded, it), f"disabling every head on {it.name} (Attention Heads)",
                            model_id=model_id) for it in sweep_subset(loaded, items)]
    tasks += _collapse_tasks(ctx)
    tasks.append(_context_mixing_set_task(ctx))
    tasks.append(_alti_set_task(ctx))
    unique: dict[str, PreparedTask] = {}
    for t in tasks:  # e.g. one class holding every correct input: its map is the all-classes map
        unique.setdefault(t.id, t)
    return list(unique.values())


def _context_mixing_set_task(ctx: _Context) -> PreparedTask:
    return view_task(CONTEXT_MIXING_SET, (ctx.loaded, ctx.items),
                     f"mixing ratios over the {len(ctx.items)} inputs (Attention Heads)", model_id=ctx.model_id,
                     group="context-mixing-set")


def _alti_set_task(ctx: _Context) -> PreparedTask:
    return view_task(ALTI_SET, (ctx.loaded, ctx.items),
                     f"ALTI over the {len(ctx.items)} inputs (Attention Heads)", model_id=ctx.model_id,
                     group="alti-set")


def _class_mean_tasks(ctx: _Context) -> list[PreparedTask]:
    """One task per class-mean map; the names come from the heads-set summary (prepared first)."""
    from bertgeom.sets.heads import SET_THETA

    if not HEADS_SET.ready(ctx.loaded, ctx.items):
        # which inputs are correct is only known after the set's pass: one task that does the pass's
        # work (cheap when the heads-set task has run: it reads the file) and then every class
        def run_all(progress):
            groups = class_mean_names(HEADS_SET.get(ctx.loaded, ctx.items))
            for k, names in enumerate(groups.values()):
                CLASS_MEAN.prepare(ctx.loaded, ctx.items, names, SET_THETA)
                progress(k + 1, len(groups))

        summary_key = HEADS_SET.key_of(ctx.loaded, ctx.items)
        return [PreparedTask(CacheKey.of("class-means-of", inputs=summary_key.digest),
                             "class-mean maps of every class (Attention Heads)",
                             run_all, group="class-mean", model_id=ctx.model_id, views=(HEADS_SET, CLASS_MEAN))]
    groups = class_mean_names(HEADS_SET.get(ctx.loaded, ctx.items))
    return [view_task(CLASS_MEAN, (ctx.loaded, ctx.items, names, SET_THETA),
                      f"class-mean map of {cls or 'all inputs'} ({len(names)} inputs)", model_id=ctx.model_id)
            for cls, names in groups.items()]


def same_shape_models(model_id: str, loaded) -> list:
    """The other registered models (loaded) with ``loaded``'s shape: the checkpoints the Attention
    Heads page offers to compare with it (none that fails to load)."""
    from bertgeom.models import REGISTRY, ModelLoadError, load_model

    out = []
    for mid in REGISTRY:
        if mid == model_id:
            continue
        try:
            other = load_model(mid)
        except ModelLoadError:
            continue
        if other.shape == loaded.shape:
            out.append(other)
    return out


def _example_tasks(ctx: _Context) -> list[PreparedTask]:
    """The model's examples at the pages' defaults: attention flow and rollout into token 0 (the
    Attention Heads page's *Attention flow* tab) and the comparison with every same-shape checkpoint
    (*Compare checkpoints*), one task per example (one forward pass serves both views)."""
    from bertgeom.analysis.flow import FLOW_RESIDUAL, flow_window
    from bertgeom.inputs import INPUT_KINDS

    partners: list = []

    def run_for(text: str, key: CacheKey):
        def run(progress):
            from bertgeom.inputs import normalise_text
            from bertgeom.trace import run_trace

            if not partners:
                partners.append(same_shape_models(ctx.model_id, ctx.loaded))
            tr = run_trace(ctx.loaded, normalise_text(text))
            n = flow_window(tr.encoded.n_tokens)
            # the page's defaults: r = FLOW_RESIDUAL, into token 0 ([CLS]), each layer normalised
            FLOW.prepare(ctx.loaded, text, n, FLOW_RESIDUAL, 0, True, trace=tr)
            CONTEXT_MIXING.prepare(ctx.loaded, text, trace=tr)
            for other in partners[0]:
                COMPARE.prepare(ctx.loaded, other, text, trace=tr)
            write_arrays(key, {"done": np.ones(1)}, strict=True)  # the task's own mark: the runner skips it next time
            progress(1, 1)
        return run

    tasks = []
    for k, ex in enumerate(INPUT_KINDS.of(ctx.loaded.spec).examples()):
        key = example_views_key(ctx.loaded, ex.text)
        tasks.append(PreparedTask(key, f"attention flow, checkpoint comparison and context mixing of example {k + 1}",
                                  run_for(ex.text, key), group="examples", model_id=ctx.model_id,
                                  views=(FLOW, COMPARE, CONTEXT_MIXING)))
    return tasks


def _subspace_tasks(ctx: _Context) -> list[PreparedTask]:
    """D1-D3 across inputs of every head: the padded passes are run once (kept in memory while the
    heads are reduced one after another), so each head's result lands as soon as it is done."""
    from bertgeom.sets.subspace import padded_passes

    L, H = ctx.loaded.num_layers, ctx.loaded.num_heads
    passes: dict = {}

    def the_passes(progress, last: bool):
        if "res" not in passes:
            passes["res"] = padded_passes(ctx.loaded, ctx.items, progress)
        res = passes["res"]
        if last:
            passes.clear()  # the last head: free the hidden states
        return {"passes": res}

    tasks = []
    for layer in range(L):
        for head in range(H):
            args = (ctx.loaded, ctx.items, layer, head, SUBSPACE_EPS, SUBSPACE_TOKEN_SET)
            task = view_task(SUBSPACE_ACROSS, args, f"D1-D3 across inputs of L{layer + 1} H{head + 1} (Subspace)",
                             model_id=ctx.model_id)
            last = layer == L - 1 and head == H - 1

            def run(progress, args=args, last=last):
                SUBSPACE_ACROSS.prepare(*args, progress=progress, **the_passes(progress, last))

            task.run = run
            tasks.append(task)
    return tasks


def sweep_subset(loaded, items: Sequence[InputItem]) -> tuple[InputItem, ...]:
    """The disabling view's default subset: one input per class for a classifier, else the first few."""
    from bertgeom.sets.ablation import stratified

    return stratified(items, SWEEP_PER_CLASS) if loaded.labels else tuple(items[:SWEEP_TEXT_INPUTS])


def _collapse_tasks(ctx: _Context) -> list[PreparedTask]:
    n = len(ctx.items)
    return [view_task(RANK_COLLAPSE_SET, (ctx.loaded, ctx.items, COLLAPSE_TOKEN_SET, COLLAPSE_NORM),
                      f"rank collapse of the {n} inputs, four path variants (Cone Index)", model_id=ctx.model_id,
                      group="rank-collapse"),
            view_task(HEAD_IMPORTANCE_SET, (ctx.loaded, ctx.items), f"head importance over the {n} inputs "
                      "(Attention Heads)", model_id=ctx.model_id, group="head-importance")]


# -------------------------------------------------------------------------------------------
# Running the tasks, with a status file the app reads
# -------------------------------------------------------------------------------------------
def prepared_dir() -> Path:
    return cache_dir() / "prepared"


def status_path() -> Path:
    return prepared_dir() / "status.json"


def wish_path() -> Path:
    return prepared_dir() / "wish.json"


def _write_json(path: Path, data) -> None:
    from bertgeom.safety import write_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda fh: fh.write(json.dumps(data).encode("utf-8")), sync=False)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def wish(task_id: str) -> None:
    """Ask a running preparation to do ``task_id`` next (the page waiting for it)."""
    try:
        _write_json(wish_path(), {"ids": [task_id], "at": time.time()})
    except OSError:
        pass


def _next_task(pending: list[PreparedTask]) -> PreparedTask:
    w = read_json(wish_path()) or {}
    wanted = set(w.get("ids", []))
    for t in pending:
        if t.id in wanted:
            return t
    return pending[0]


def run_tasks(tasks: list[PreparedTask], *, log: Callable[[str], None] | None = None,
              status: bool = True, failures: list[str] | None = None) -> dict[str, int]:
    """Run every task whose result is not on disk yet, a wished-for task first, keeping
    :func:`status_path` up to date (``{"tasks": [{id, title, group, model, state, done, total}]}``).
    A task that fails (its computation, or writing its file) is marked ``failed`` with its message and
    named in ``failures`` (when given); the others still run."""
    rows = {t.id: {"id": t.id, "title": t.title, "group": t.group, "model": t.model_id,
                   "state": "done" if is_on_disk(t.key) else "queued", "done": 0, "total": 0} for t in tasks}
    counts = {"done_before": sum(r["state"] == "done" for r in rows.values()), "computed": 0, "failed": 0}
    last = [0.0]

    def publish(force: bool = False) -> None:
        if not status or (not force and time.time() - last[0] < 0.5):
            return
        last[0] = time.time()
        try:
            _write_json(status_path(), {"format": FORMAT_VERSION, "pid": os.getpid(), "updated": time.time(),
                                        "tasks": list(rows.values())})
        except OSError:
            pass

    pending = [t for t in tasks if rows[t.id]["state"] == "queued"]
    publish(True)
    while pending:
        task = _next_task(pending)
        pending.remove(task)
        row = rows[task.id]
        if is_on_disk(task.key):  # written meanwhile (a page that did not wait for its turn)
            row["state"] = "done"
            counts["done_before"] += 1
            continue
        row["state"] = "running"
        publish(True)

        def progress(done: int, total: int, row=row) -> None:
            row["done"], row["total"] = int(done), int(total)
            publish()

        t0 = time.perf_counter()
        try:
            task.run(progress)
            row["state"] = "done"
            counts["computed"] += 1
        except Exception as exc:  # one failed summary never stops the others (the page computes it itself)
            row["state"], row["error"] = "failed", f"{type(exc).__name__}: {exc}"[:300]
            counts["failed"] += 1
            if failures is not None:
                failures.append(f"{task.model_id}: {task.title} "
                                f"({getattr(exc, 'strerror', None) or error_text(exc, 120)})")
        if log:
            log(f"{row['state']:6s} {time.perf_counter() - t0:6.1f} s  {task.model_id}: {task.title}")
        publish(True)
    return counts


# -------------------------------------------------------------------------------------------
# Command line: python -m bertgeom prepare-sets
# -------------------------------------------------------------------------------------------
def _lock():
    """An exclusive lock on the preparation (one process per cache directory), or None when held."""
    import fcntl

    prepared_dir().mkdir(parents=True, exist_ok=True)
    # never through a link (O_NOFOLLOW: a planted link fails with ELOOP instead of being written)
    fh = os.fdopen(os.open(prepared_dir() / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644), "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def prepare_models(model_ids: Sequence[str], *, subspace: bool = True, sweeps: bool = True,
                   subspace_heads: int | None = None, log: Callable[[str], None] | None = print) -> int:
    """Prepare every task of every model (in order); returns 0, 1 when another process holds the lock,
    2 when the lock cannot be made, and 3 when a summary could not be written (each one named)."""
    try:
        held = _lock()
    except OSError as exc:
        if log:
            if exc.errno == errno.ELOOP:
                log(f"error: the preparation lock in {prepared_dir()} is a symbolic link, which is never "
                    "followed: remove it and rerun.")
            else:
                log(f"error: the preparation lock in {prepared_dir()} cannot be created ({exc.strerror or exc}): "
                    "the cache folder is not writable here (set BERTGEOM_CACHE_DIR to a writable folder).")
        return 2
    if held is None:
        if log:
            log(f"another preparation is running on {prepared_dir()}; nothing to do")
        return 1
    try:
        from bertgeom.models import load_model

        tasks: list[PreparedTask] = []
        for mid in model_ids:
            loaded = load_model(mid)
            tasks += prepare_tasks(mid, loaded, subspace=subspace, sweeps=sweeps,
                                   subspace_heads=subspace_heads)
            from bertgeom.backends import export_ahead
            from bertgeom.inputs import INPUT_KINDS

            ahead = INPUT_KINDS.of(loaded.spec).prepare_ahead
            if ahead is not None:  # the kind's own work ahead (the case study: which backend classifies fastest)
                ahead(loaded, log)
            export_ahead(loaded, log)  # the classifier's graph for the fast backend: the first batch does not wait
        # the quick views of every model before the long ones (a stable sort keeps the model order)
        tasks.sort(key=lambda t: GROUP_ORDER.index(t.group) if t.group in GROUP_ORDER else len(GROUP_ORDER))
        if log:
            log(f"{len(tasks)} summaries for {', '.join(model_ids)} in {cache_dir()}")
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):  # small matrices: threaded BLAS only spins (see sets.cone.single_threaded)
            failed: list[str] = []
            counts = run_tasks(tasks, log=log, failures=failed)
        if log:
            log(f"computed {counts['computed']}, already on disk {counts['done_before']}, failed {counts['failed']}")
        if counts["failed"]:
            if log:
                shown = "; ".join(failed[:5]) + (f"; and {len(failed) - 5} more" if len(failed) > 5 else "")
                log(f"error: {counts['failed']} summaries could not be prepared in {cache_dir()}: {shown}")
            return 3
        return 0
    finally:
        held.close()


def _exit_with_parent(parent: int) -> None:
    """Stop this process when ``parent`` (the app server that started it) has gone: a background
    preparation must not outlive the server."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(2.0)
        os._exit(0)  # files are written atomically: a cut-off task leaves nothing half-written

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _cmd_prepare_sets(args) -> int:
    from bertgeom.models import REGISTRY

    ids = args.models or [REGISTRY.default_id] + [m for m in REGISTRY if m != REGISTRY.default_id]
    if args.with_parent:
        _exit_with_parent(os.getppid())
    if args.nice:
        os.nice(args.nice)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rc = prepare_models(ids, subspace=not args.no_subspace, sweeps=not args.no_sweeps,
                        subspace_heads=args.subspace_heads)
    return 0 if rc in (0, 1) else rc


def register(sub) -> None:
    p = sub.add_parser("prepare-sets", help="compute the shipped sets' summaries ahead, so set views open at once")
    p.add_argument("--model", action="append", dest="models", metavar="ID",
                   help="model id (repeatable; default: every bundled model)")
    p.add_argument("--no-subspace", action="store_true", help="skip D1-D3 across inputs of every head")
    p.add_argument("--subspace-heads", type=int, default=None, metavar="N",
                   help="only the first N heads of D1-D3 across inputs (default: every head)")
    p.add_argument("--no-sweeps", action="store_true", help="skip head disabling over the set")
    p.add_argument("--nice", type=int, default=0, help="lower this process's priority by N (background use)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    p.add_argument("--with-parent", action="store_true", help="exit when the process that started this one exits")
    p.set_defaults(func=_cmd_prepare_sets)
