"""Where shards run: in-process, a local process pool, or Ray actors (local or on a cluster).

An engine takes an iterator of shard payloads (``(shard, bytes)``) and calls
``on_result(shard, files)`` in the driver for every finished shard, in completion order. All
engines run :func:`~bertgeom.precompute.core.prepare_shard` then
:meth:`~bertgeom.precompute.core.ShardComputer.forward_shard`, with the same torch/BLAS thread
count, on the same shard contents, so they write identical files. Ray can run the two halves apart
(split mode): alignment as CPU tasks, forwards on model actors (with ``num_gpus`` on a GPU cluster).

The model travels as its files (its input kind's ``PrecomputeSpec.model_files``; genomes:
``config.json``, ``model.safetensors``, ``kmer_vocab.json``) with the kind's name, and a worker
rebuilds it with the kind's ``model_spec``: Ray workers on other machines need neither the model nor
the input on a shared disk, and results come back to the driver, the only writer.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from bertgeom.precompute.core import (
    ClsBasis,
    PrecomputeConfig,
    PrecomputeError,
    PreparedShard,
    ShardComputer,
    precompute_spec,
    prepare_payload,
)
from bertgeom.tables import counted, word_for

Tasks = Iterable[tuple[int, bytes]]
OnResult = Callable[[int, dict[str, bytes]], None]


def model_bundle(source: str | os.PathLike, kind: str) -> dict[str, bytes]:
    """The files of a model directory of input kind ``kind``, to rebuild it on a worker."""
    p = Path(source)
    return {name: (p / name).read_bytes() for name in precompute_spec(kind).model_files}


def _device(name: str) -> str:
    from bertgeom.models import resolve_device

    try:
        return resolve_device(name)
    except ValueError as exc:
        raise PrecomputeError(str(exc)) from None


def load_bundle(bundle: dict[str, bytes], kind: str):
    """Load a model bundle of input kind ``kind`` (through a private temporary directory, removed afterwards)."""
    from bertgeom.models import load_model

    with tempfile.TemporaryDirectory(prefix="bertgeom-model-") as tmp:
        d = Path(tmp)
        for name, data in bundle.items():
            (d / name).write_bytes(data)
        return load_model(precompute_spec(kind).model_spec(d))  # everything is read into memory: the folder can go


def _computer(model_source: str, kind: str, cfg_dict: dict, basis_arrays: dict | None,
              device: str = "cpu") -> ShardComputer:
    from bertgeom.models import load_model

    loaded = load_model(precompute_spec(kind).model_spec(Path(model_source)))
    basis = ClsBasis.from_arrays(basis_arrays) if basis_arrays else None
    return ShardComputer(loaded, PrecomputeConfig.from_dict(cfg_dict), basis, device)


# ---------------------------------------------------------------------------------------------
# Local
# ---------------------------------------------------------------------------------------------
_WORKER: ShardComputer | None = None


def _init_worker(model_source: str, kind: str, cfg_dict: dict, basis_arrays: dict | None, device: str = "cpu") -> None:
    import signal

    global _WORKER
    # Ctrl+C reaches the whole process group: only the driver handles it (no traceback per worker)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _WORKER = _computer(model_source, kind, cfg_dict, basis_arrays, device)


def _run_in_worker(shard: int, payload: bytes) -> tuple[int, dict[str, bytes]]:
    assert _WORKER is not None
    return shard, _WORKER.run_payload(payload)


class LocalEngine:
    """``workers == 1``: in the calling process; more: a ``spawn`` process pool, each worker
    holding its own model, at most ``2 * workers`` shards in flight (bounded memory).
    ``device``: where every worker runs its forward passes (``auto``: a GPU when this machine has one)."""

    name = "local"

    def __init__(self, workers: int = 1, device: str = "cpu"):
        if workers < 1:
            raise PrecomputeError("--workers must be at least 1.")
        self.workers = workers
        self.device = _device(device)

    @property
    def driver_device(self) -> str:
        """Device of the driver's own computer (it runs the shards when ``workers == 1``)."""
        return self.device

    def run(self, computer: ShardComputer, model_source: str, tasks: Tasks, on_result: OnResult) -> None:
        if self.workers == 1:
            for shard, payload in tasks:
                on_result(shard, computer.run_payload(payload))
            return
        import multiprocessing as mp
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        basis = computer.basis.arrays() if computer.basis is not None else None
        ex = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                 initargs=(model_source, computer.dims.kind, computer.cfg.to_dict(), basis,
                                           self.device))
        it = iter(tasks)
        pending: set = set()
        try:
            while True:
                while len(pending) < 2 * self.workers:
                    nxt = next(it, None)
                    if nxt is None:
                        break
                    pending.add(ex.submit(_run_in_worker, *nxt))
                if not pending:
                    break
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: f.result()[0]):
                    on_result(*fut.result())
        finally:
            ex.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# Ray
# ---------------------------------------------------------------------------------------------
class RayForwardActor:
    """Split mode's model actor (Ray core, ``num_gpus`` on a GPU cluster): loads the model once for
    the whole run, then turns prepared shards (from the CPU tasks) into files."""

    def __init__(self, model_ref, kind: str, cfg_dict: dict, basis_arrays: dict | None, device: str = "cpu"):
        import ray

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        bundle = ray.get(model_ref[0])  # wrapped in a list: passed through untouched by Ray
        loaded = load_bundle(bundle, kind)
        basis = ClsBasis.from_arrays(basis_arrays) if basis_arrays else None
        self.computer = ShardComputer(loaded, PrecomputeConfig.from_dict(cfg_dict), basis, device)

    def forward(self, prepared: PreparedShard) -> tuple[int, dict[str, bytes]]:
        return prepared.shard, self.computer.forward_shard(prepared)


class RayShardActor(RayForwardActor):
    """Ray Data callable class: loads the model once per actor, then one whole shard per row."""

    def __call__(self, batch: dict) -> dict:
        shards, out = [], {"parquet": [], "cls.npy": [], "maps.npz": []}
        for shard, payload in zip(batch["shard"], batch["payload"]):
            files = self.computer.run_payload(bytes(payload))
            shards.append(int(shard))
            for k in out:
                out[k].append(files[k])
        res = {"shard": np.asarray(shards, np.int64)}
        res.update({k: np.asarray(v, dtype=object) for k, v in out.items()})
        return res


def _ship_code_env() -> dict:
    """runtime_env that uploads this bertgeom package to the cluster (model files excluded)."""
    pkg = Path(__file__).resolve().parents[1]  # bertgeom/, from this file (bertgeom.__file__ may be None)
    return {"py_modules": [str(pkg)], "excludes": ["data/variant_model", "__pycache__", "*.pyc"]}


class RayEngine:
    """Ray Data ``map_batches`` over shards with an actor pool of ``workers`` model actors, or (split
    mode) Ray CPU tasks that parse/align/tokenise feeding ``workers`` model actors.

    ``address=None`` starts a local Ray instance (``ray.init(num_cpus=workers * threads)``);
    ``address="auto"`` or ``"ray://head:10001"`` joins a cluster. Shards are fed in windows of
    ``window`` shards (default ``max(8 * workers, 16)``) so the driver's memory stays bounded; the actor
    pool is rebuilt per window (one model load per actor per window).

    ``device``: ``cpu``; ``cuda`` (the cluster must have GPUs) or ``auto`` (``cuda`` when the cluster
    reports GPUs): each actor then asks Ray for ``min(1, GPUs / workers)`` of a GPU (``num_gpus``) and
    runs its forward passes there; the per-head statistics stay on its CPUs.

    ``split_prepare``: parse, alignment and tokenisation run as ``num_cpus=1`` Ray tasks, whose
    results (token ids and per-record metadata, :class:`~bertgeom.precompute.core.PreparedShard`) go
    through the object store to the model actors, so a GPU actor is not idle while its CPU aligns.
    ``None`` (default): on when the forwards run on GPUs; ``True`` forces it (also on CPUs, e.g. to
    test it), ``False`` keeps one actor doing both. In split mode the actors live for the whole run,
    ``workers`` defaults to the GPU count (on CPUs: ``CPUs // (threads + 1)``), the CPUs the actors do
    not hold run the tasks, and at most ``window`` shards are in flight (preparing, prepared or in an
    actor); a local instance gets one extra CPU per actor for them.
    """

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, *, window: int | None = None,
                 ship_code: bool | None = None, init_kwargs: dict | None = None, device: str = "cpu",
                 split_prepare: bool | None = None):
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise PrecomputeError(
                "the Ray engine needs Ray: pip install -r requirements-cluster.txt (or use --engine local)."
            )
        if workers is not None and workers < 1:
            raise PrecomputeError("--workers must be at least 1.")
        self.workers = workers
        self.address = address
        self.window = window
        self.ship_code = (address is not None) if ship_code is None else ship_code
        self.init_kwargs = dict(init_kwargs or {})
        self.requested_device = (device or "cpu").strip().lower()
        if self.requested_device not in ("auto", "cpu", "cuda"):
            raise PrecomputeError(f"unknown device {device!r}: use auto, cpu or cuda.")
        self.device = "cpu" if self.requested_device == "cpu" else self.requested_device  # resolved in run()
        self.split_prepare = split_prepare
        self.split = bool(split_prepare)  # resolved in run(), like the device

    driver_device = "cpu"  # the driver only plans and writes; actors compute

    def _cluster_device(self, gpus: float) -> str:
        if self.requested_device == "cuda" and gpus <= 0:
            raise PrecomputeError("--device cuda was asked for, but the Ray cluster reports no GPU.")
        return "cuda" if self.requested_device in ("auto", "cuda") and gpus > 0 else "cpu"

    def _split(self, device: str) -> bool:
        return (device == "cuda") if self.split_prepare is None else bool(self.split_prepare)

    def _maybe_split(self) -> bool:
        """Whether the split mode may be chosen on this machine (sizes a local instance before run()
        knows the cluster's GPUs)."""
        if self.split_prepare is not None or self.requested_device == "cpu":
            return bool(self.split_prepare)
        import torch

        return torch.cuda.is_available()

    def _init(self, threads: int) -> bool:
        """Start or join Ray; True when this call started it (and must shut it down)."""
        import ray

        if ray.is_initialized():
            return False
        env = _ship_code_env() if self.ship_code else {}
        env.setdefault("env_vars", {})["TOKENIZERS_PARALLELISM"] = "false"
        if self.address is None:  # a private local instance, sized to the workers
            root = str(Path(__file__).resolve().parents[2])
            env["env_vars"]["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
            w = self.workers or 1
            kw = dict(num_cpus=w * threads + (w if self._maybe_split() else 0), include_dashboard=False,
                      log_to_driver=False, configure_logging=False)
        else:  # join a running cluster (its head's resources and dashboard are its own business)
            kw = dict(address=self.address, log_to_driver=False)
        kw["runtime_env"] = env
        kw.update(self.init_kwargs)
        ray.init(**kw)
        return True

    def run(self, computer: ShardComputer, model_source: str, tasks: Tasks, on_result: OnResult) -> None:
        import ray

        started = self._init(computer.cfg.threads)
        try:
            resources = ray.cluster_resources()
            cpus, gpus = float(resources.get("CPU", 1)), float(resources.get("GPU", 0))
            self.device = self._cluster_device(gpus)
            self.split = self._split(self.device)
            run = self._run_split if self.split else self._run_data
            run(computer, model_source, tasks, on_result, cpus, gpus)
        finally:
            if started:
                ray.shutdown()

    def _actor_kwargs(self, computer: ShardComputer, model_source: str) -> dict:
        import ray

        basis = computer.basis.arrays() if computer.basis is not None else None
        kind = computer.dims.kind
        return {"model_ref": [ray.put(model_bundle(model_source, kind))], "kind": kind,
                "cfg_dict": computer.cfg.to_dict(), "basis_arrays": basis, "device": self.device}

    def _run_data(self, computer: ShardComputer, model_source: str, tasks: Tasks, on_result: OnResult,
                  cpus: float, gpus: float) -> None:
        """One Ray Data actor per shard does everything (pool rebuilt per window)."""
        import logging

        import ray
        import ray.data

        threads = computer.cfg.threads
        data_log = logging.getLogger("ray.data")
        level = data_log.level
        try:
            data_log.setLevel(logging.ERROR)
            ctx = ray.data.DataContext.get_current()
            ctx.enable_progress_bars = False
            ctx.enable_operator_progress_bars = False
            ctx.enable_auto_log_stats = False
            ctx.verbose_stats_logs = False
            workers = self.workers or max(1, int(cpus // threads))
            gpu_share = min(1.0, gpus / workers) if self.device == "cuda" else 0
            window = self.window or max(8 * workers, 16)
            kwargs = self._actor_kwargs(computer, model_source)
            it = iter(tasks)
            while True:
                chunk = list(itertools.islice(it, window))
                if not chunk:
                    break
                ds = ray.data.from_items([{"shard": s, "payload": p} for s, p in chunk],
                                         override_num_blocks=len(chunk))
                pool = ray.data.ActorPoolStrategy(size=min(workers, len(chunk)), max_tasks_in_flight_per_actor=1)
                out = ds.map_batches(RayShardActor, batch_size=1, batch_format="numpy", compute=pool,
                                     num_cpus=threads, num_gpus=gpu_share or None, fn_constructor_kwargs=kwargs)
                for batch in out.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=0):
                    for i, shard in enumerate(batch["shard"]):
                        on_result(int(shard), {k: bytes(batch[k][i]) for k in ("parquet", "cls.npy", "maps.npz")})
        finally:
            data_log.setLevel(level)

    def _run_split(self, computer: ShardComputer, model_source: str, tasks: Tasks, on_result: OnResult,
                   cpus: float, gpus: float) -> None:
        """Prepare as CPU tasks, forwards on long-lived actors; the driver only hands object refs from
        one to the other (it never fetches a prepared shard) and writes the results."""
        import ray

        threads = computer.cfg.threads
        workers = self.workers or (max(1, int(gpus)) if self.device == "cuda" else max(1, int(cpus // (threads + 1))))
        if workers * threads >= cpus:
            raise PrecomputeError(f"split prepare needs CPUs for the alignment tasks besides the {workers} model "
                                  f"{word_for(workers, 'actor')} x {counted(threads, 'thread')}, "
                                  f"and the Ray cluster has {cpus:g}: ask for "
                                  "fewer --workers or --threads.")
        gpu_share = min(1.0, gpus / workers) if self.device == "cuda" else 0
        window = self.window or max(8 * workers, 16)
        prepare = ray.remote(num_cpus=1)(prepare_payload)
        vocab_ref = ray.put(computer.loaded.tokenizer)
        max_tokens = computer.loaded.max_tokens
        kwargs = self._actor_kwargs(computer, model_source)
        actor_cls = ray.remote(RayForwardActor).options(num_cpus=threads, num_gpus=gpu_share)
        actors = [actor_cls.remote(**kwargs) for _ in range(workers)]
        load = [0] * workers  # forward calls queued per actor (<= 2: one running, one waiting)
        preparing: dict = {}  # prepare ref -> shard
        prepared: deque = deque()  # prepare refs that are done, waiting for an actor
        forwarding: dict = {}  # forward ref -> actor index
        it = iter(tasks)
        try:
            while True:
                while len(preparing) + len(prepared) + len(forwarding) < window:
                    nxt = next(it, None)
                    if nxt is None:
                        break
                    preparing[prepare.remote(nxt[1], vocab_ref, max_tokens, threads)] = nxt[0]
                while prepared and min(load) < 2:
                    a = load.index(min(load))
                    forwarding[actors[a].forward.remote(prepared.popleft())] = a
                    load[a] += 1
                if not preparing and not forwarding:
                    break
                ready, _ = ray.wait([*preparing, *forwarding], num_returns=1, fetch_local=False)
                for ref in ready:
                    if ref in preparing:
                        del preparing[ref]
                        prepared.append(ref)
                    else:
                        load[forwarding.pop(ref)] -= 1
                        on_result(*ray.get(ref))
        finally:
            for actor in actors:
                ray.kill(actor)


def make_engine(name: str, workers: int | None = None, address: str | None = None, *, device: str = "cpu", **kw):
    if name == "local":
        return LocalEngine(workers or 1, device)
    if name == "ray":
        return RayEngine(workers, address, device=device, **kw)
    raise PrecomputeError(f"unknown engine '{name}' (local or ray).")

