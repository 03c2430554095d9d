"""The driver of a precompute run: plan, resume, feed shards to an engine, write, finalise."""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertgeom.safety import write_atomically, write_bytes_atomically
from bertgeom.precompute.core import (
    ClsBasis,
    ModelDims,
    PrecomputeConfig,
    PrecomputeError,
    PrecomputeModelError,
    PrecomputeOutputError,
    ShardComputer,
    cls_of_records,
    load_npz_bytes,
    pca_basis,
    precompute_spec,
    random_basis,
    shard_input,
)
from bertgeom.precompute.store import (
    FORMAT_VERSION,
    MapAccumulator,
    ResultsDir,
    fold_partial_file,
    sha256_file,
    under_root,
)
from bertgeom.tables import counted, word_for

#: For tests that interrupt a run: a FIFO the driver reads after each finished shard, so the run
#: waits there (in progress, its shard on disk) until the test opens the FIFO or sends Ctrl+C.
GATE_ENV = "BERTGEOM_PRECOMPUTE_GATE"


@dataclass
class RunSummary:
    out: Path
    status: str  # "complete" or "partial"
    n_records: int
    n_shards: int
    shards_skipped: int  # done by an earlier run
    shards_computed: int
    seconds: float
    engine: str
    workers: int | None

    def line(self) -> str:
        return (f"{self.status}: {counted(self.shards_computed, 'shard')} computed, {self.shards_skipped} already "
                f"done, {self.n_shards} in all ({self.n_records} records) in {self.seconds:.1f} s -> {self.out}")


def default_model_id() -> str:
    """The model precompute loads when none is named: the default of the first registered input kind
    that supports precompute (``PrecomputeSpec.default_model``)."""
    from bertgeom.inputs import INPUT_KINDS

    for kind in INPUT_KINDS.values():
        if kind.precompute is not None and kind.precompute.default_model:
            return kind.precompute.default_model
    raise PrecomputeModelError("no installed input kind supports precompute: name a model with --model.")


def load_precompute_model(model: str | None, device: str = "cpu"):
    """The classifier ``model`` (default: :func:`default_model_id`) on ``device``, whose input kind
    supports precompute; else :class:`PrecomputeModelError` with one sentence."""
    from bertgeom.models import ModelLoadError, load_model

    name = model or default_model_id()
    try:
        loaded = load_model(name, device=device)
    except ModelLoadError as exc:
        raise PrecomputeModelError(str(exc)) from None
    except ValueError as exc:  # an unavailable --device
        raise PrecomputeError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a damaged config, vocabulary or weights file
        raise PrecomputeModelError(f"the model '{name}' could not be loaded ({type(exc).__name__}: "
                                   f"{str(exc)[:200]}).") from None
    precompute_spec(loaded)  # its input kind reads precompute's input files, or one sentence
    if not loaded.labels:
        raise PrecomputeModelError(f"'{loaded.spec.id}' is not a classifier (it has no classes); precompute needs one.")
    return loaded


def count_records(path: Path, spec) -> int:
    """Records in the input (read by the input kind's :class:`~bertgeom.inputs.PrecomputeSpec`); a
    truncated or unreadable compressed file is refused (a run must see the whole input: its checksum
    and shard plan are recorded in the manifest)."""
    n = 0
    for rec in spec.read_records(path):
        if getattr(rec, "stream_error", False):
            raise PrecomputeError(f"'{path}': {rec.message.replace('; the records before it were read.', '')}; "
                                  "precompute needs the whole file (repair or re-download it).")
        n += 1
    return n


def _key(loaded, dims: ModelDims, cfg: PrecomputeConfig, inp: dict, labels: dict) -> dict:
    """The part of the manifest a resumed run must match."""
    import bertgeom

    return {
        "format": FORMAT_VERSION,
        "bertgeom_version": bertgeom.__version__,
        "model": {"id": loaded.spec.id, "weights_hash": loaded.weights_hash, "labels": list(dims.labels),
                  "layers": dims.layers, "heads": dims.heads, "hidden": dims.hidden},
        "params": {**cfg.to_dict(), "map_tokens": dims.map_tokens},
        "input": inp,
        "labels": labels,
    }


def _check_same(old: dict, new: dict, out: Path) -> None:
    diffs = []
    for section in ("format", "bertgeom_version", "model", "params", "input", "labels"):
        if section == "params" and isinstance(old.get(section), dict):  # runs from before --precision were fp32
            old = {**old, "params": {"precision": "fp32", **old["params"]}}
        if old.get(section) != new.get(section):
            if section == "model" and isinstance(old.get(section), dict):
                a, b = old[section], new[section]
                diffs += [f"model.{k}" for k in b if a.get(k) != b.get(k) and k != "id"]
            elif isinstance(new.get(section), dict) and isinstance(old.get(section), dict):
                a, b = old[section], new[section]
                diffs += [f"{section}.{k}" for k in b if a.get(k) != b.get(k) and k != "path"]
            else:
                diffs.append(section)
    if diffs:
        raise PrecomputeError(
            f"'{out}' holds a run with a different {', '.join(diffs)}; resume it with the same inputs, "
            "model and parameters, or write to a new --out directory."
        )


def _shard_payloads(path: Path, cfg: PrecomputeConfig, truth: dict, skip: set[int],
                    limit: int | None, kind: str) -> Iterator[tuple[int, bytes]]:
    """Stream the input once, grouped into shards by record position; done shards are skipped."""
    n_sent = 0
    buf: list = []
    shard = 0
    for rec in precompute_spec(kind).read_records(path):
        buf.append(rec)
        if len(buf) == cfg.shard_size:
            if shard not in skip:
                if limit is not None and n_sent >= limit:
                    return
                yield shard, shard_input(shard, shard * cfg.shard_size, buf, truth, kind).encode()
                n_sent += 1
            buf, shard = [], shard + 1
    if buf and shard not in skip and (limit is None or n_sent < limit):
        yield shard, shard_input(shard, shard * cfg.shard_size, buf, truth, kind).encode()


def _pilot_records(path: Path, n_records: int, size: int, spec) -> list:
    want = set(np.unique(np.linspace(0, max(n_records - 1, 0), min(size, n_records)).round().astype(int)).tolist())
    out = []
    for i, rec in enumerate(spec.read_records(path)):
        if i in want:
            out.append(rec)
        if len(out) == len(want):
            break
    return out


def _basis(rd: ResultsDir, loaded, dims: ModelDims, cfg: PrecomputeConfig, inp: Path,
           n_records: int) -> ClsBasis | None:
    if cfg.cls_dims == 0 or cfg.cls_dims >= dims.hidden:
        return None
    p = rd.root / "cls_basis.npz"
    if p.is_file():
        return ClsBasis.from_arrays(load_npz_bytes(p.read_bytes()))
    if cfg.cls_reduce == "random":
        basis = random_basis(dims, cfg.cls_dims, cfg.seed)
    else:
        from bertgeom.precompute.core import limited_threads

        with limited_threads(cfg.threads):
            pilot = _pilot_records(inp, n_records, cfg.pca_pilot, precompute_spec(loaded))
            x = cls_of_records(loaded, pilot, cfg.batch_size)
        basis = pca_basis(x, cfg.cls_dims)
    write_atomically(p, lambda fh: np.savez(fh, **basis.arrays()))
    return basis


def precompute(
    input_path: str | os.PathLike,
    labels_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    model: str | None = None,
    config: PrecomputeConfig | None = None,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    max_shards: int | None = None,
    checkpoint_every: int = 64,
    progress: Callable[[int, int, int], None] | None = None,
    on_shard: Callable[[int], None] | None = None,
    engine_kwargs: dict | None = None,
    loaded=None,
    device: str = "cpu",
    wait: bool = False,
    on_wait: Callable[[dict], None] | None = None,
) -> RunSummary:
    """Precompute per-record results and class-mean maps of a labelled input file (resumable).

    The model's input kind reads the file (its :class:`~bertgeom.inputs.PrecomputeSpec`; genomes: a
    FASTA file, plain, .gz or .xz); a model whose kind has none is refused with one sentence.

    ``engine``: ``"local"`` (``workers`` processes; 1 = in this process) or ``"ray"`` (``workers``
    model actors; ``address`` joins a cluster, else a local Ray instance is started;
    ``engine_kwargs={"split_prepare": True}`` runs the alignment as separate CPU tasks, see
    :class:`~bertgeom.precompute.engines.RayEngine`).
    ``max_shards``: compute at most that many new shards, then stop (status ``partial``; a rerun
    resumes). ``progress(shards_done, n_shards, genomes_done)`` after each shard; ``on_shard(shard)``
    after a shard's files are written (an exception there interrupts the run cleanly).
    ``loaded``: an already loaded classifier (else ``model`` is loaded). ``checkpoint_every``:
    the running class-map sums are saved at least every that many shards.
    ``device``: where the forward passes run (``auto``, ``cpu``, ``cuda``; see
    :meth:`ShardComputer.forward`). One run at a time per ``out_dir`` (:class:`~bertgeom.precompute.lock.RunLock`):
    a second one raises :class:`~bertgeom.precompute.lock.LockBusy`, or with ``wait`` waits for the
    first (``on_wait(holder)`` is called once when it starts waiting).
    """
    from bertgeom.precompute.engines import make_engine

    t0 = time.perf_counter()
    inp, lab, out = Path(input_path), Path(labels_path), Path(out_dir)
    for p in (inp, lab):
        if not p.is_file():
            raise PrecomputeError(f"no file at '{p}'.")
    cfg = config or PrecomputeConfig()
    loaded = loaded or load_precompute_model(model, "cpu")  # the driver's copy: the [CLS] PCA pilot
    dims = ModelDims.of(loaded)
    bad = [c for c in dims.labels if not re.fullmatch(r"[A-Za-z0-9_.-]+", c)]
    if bad:
        raise PrecomputeModelError(f"{word_for(len(bad), 'class name')} unusable as file names: {bad}")
    eng = make_engine(engine, workers, address, device=device, **(engine_kwargs or {}))
    if out.exists() and not out.is_dir():
        raise PrecomputeOutputError(f"--out '{out}' is a file; give a directory for the results.")
    from bertgeom.precompute.lock import RunLock

    with RunLock(out, wait=wait, on_wait=on_wait):
        return _precompute_locked(inp, lab, out, loaded, dims, cfg, eng, t0, workers=workers, address=address,
                                  max_shards=max_shards, checkpoint_every=checkpoint_every, progress=progress,
                                  on_shard=on_shard)


def _precompute_locked(inp: Path, lab: Path, out: Path, loaded, dims: ModelDims, cfg: PrecomputeConfig, eng,
                       t0: float, *, workers, address, max_shards, checkpoint_every, progress,
                       on_shard) -> RunSummary:
    """The run itself, under the directory's lock (see :func:`precompute`)."""
    from bertgeom.precompute.lock import LOCK_NAME

    spec = precompute_spec(loaded)
    n_records = count_records(inp, spec)
    n_shards = math.ceil(n_records / cfg.shard_size)
    in_meta = {"path": str(inp.resolve()), "sha256": sha256_file(inp), "bytes": inp.stat().st_size,
               "n_records": n_records}
    lab_meta = {"path": str(lab.resolve()), "sha256": sha256_file(lab)}
    key = _key(loaded, dims, cfg, in_meta, lab_meta)
    rd = ResultsDir(out)
    old = rd.read_manifest() if out.is_dir() else None
    if old is not None:
        _check_same(old, key, out)
        manifest = old
    else:
        if out.is_dir() and any(p.name != LOCK_NAME for p in out.iterdir()):
            raise PrecomputeError(f"'{out}' exists and is not a precompute results directory; choose another --out.")
        manifest = {**key, "runs": []}
    rd.prepare()
    manifest.update(status="running", n_shards=n_shards)
    rd.write_manifest(manifest)

    basis = _basis(rd, loaded, dims, cfg, inp, n_records)
    computer = ShardComputer(loaded, cfg, basis, eng.driver_device)
    truth = spec.read_labels(lab)

    acc = MapAccumulator.load(rd.root)
    done = rd.done_shards(n_shards)
    for s in sorted(done):
        if not fold_partial_file(rd, acc, s):
            rd.undo_shard(s)  # its map sums were lost: redo it
            done.discard(s)
    skipped = len(done)
    if skipped:
        acc.save(rd.root)
        for s in done:
            rd.path(s, "maps.npz").unlink(missing_ok=True)
    computed: list[int] = []
    genomes_done = [sum(min(cfg.shard_size, n_records - s * cfg.shard_size) for s in done)]
    unsaved: list[int] = []
    unsaved_bytes = [0]

    def checkpoint() -> None:
        acc.save(rd.root)
        for s in unsaved:
            rd.path(s, "maps.npz").unlink(missing_ok=True)
        unsaved.clear()
        unsaved_bytes[0] = 0

    def on_result(shard: int, files: dict[str, bytes]) -> None:
        rd.write_shard(shard, files)
        acc.fold(shard, load_npz_bytes(files["maps.npz"]))
        unsaved.append(shard)
        unsaved_bytes[0] += len(files["maps.npz"])
        done.add(shard)
        computed.append(shard)
        # save the running sums once the shards' partial sums on disk outweigh them (bounded extra
        # disk and at most ~2x the map bytes written), or every ``checkpoint_every`` shards
        if len(unsaved) >= checkpoint_every or unsaved_bytes[0] >= max(acc.nbytes(), 32 << 20):
            checkpoint()
        genomes_done[0] += min(cfg.shard_size, n_records - shard * cfg.shard_size)
        if progress:
            progress(len(done), n_shards, genomes_done[0])
        if on_shard:
            on_shard(shard)
        if gate:  # a test's gate: the run is known to be in progress until the test opens the FIFO
            Path(gate).read_bytes()

    gate = os.environ.get(GATE_ENV)
    run_info = {"engine": eng.name, "workers": workers, "address": address, "started": time.time()}
    model_source = str(loaded.spec.source)
    tasks = _shard_payloads(inp, cfg, truth, set(done), max_shards, dims.kind)
    todo = n_shards - len(done) if max_shards is None else min(max_shards, n_shards - len(done))
    if eng.name == "local" and eng.workers > max(1, todo):  # a worker per shard at most: start-up is 15-30 s each
        eng.workers = max(1, todo)
    if eng.name == "local":
        run_info["workers_used"] = eng.workers
    try:
        eng.run(computer, model_source, tasks, on_result)
    finally:
        checkpoint()
        run_info.update(finished=time.time(), shards_computed=len(computed), device=eng.device,
                        attentions=computer.needs_attentions)
        if hasattr(eng, "split"):  # Ray: alignment as CPU tasks apart from the model actors, or not
            run_info["split_prepare"] = eng.split
        manifest["runs"] = manifest.get("runs", []) + [run_info]
        manifest["status"] = "partial"
        rd.write_manifest(manifest)

    status = "partial"
    if len(done) == n_shards:
        _finalise(rd, acc, manifest, dims, cfg, computer.keep)
        status = "complete"
    return RunSummary(out, status, n_records, n_shards, skipped, len(computed), time.perf_counter() - t0,
                      eng.name, workers)


def _finalise(rd: ResultsDir, acc: MapAccumulator, manifest: dict, dims: ModelDims, cfg: PrecomputeConfig,
              keep: np.ndarray) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    maps_dir = under_root(rd.root, "maps")
    maps_dir.mkdir(exist_ok=True)
    rd.clear_outputs()
    counts = {}
    if cfg.maps != "none":
        for c, mean in acc.means(dims.heads, cfg.maps).items():
            write_atomically(maps_dir / f"{c}.npy", lambda fh, mean=mean: np.save(fh, mean, allow_pickle=False))
            counts[c] = acc.counts[c]
        write_atomically(maps_dir / "keep.npy", lambda fh: np.save(fh, keep, allow_pickle=False))
        shape = {"layer-mean": ["L", "T", "T"], "heads": ["L", "H", "T", "T"]}[cfg.maps]
        write_bytes_atomically(maps_dir / "index.json", json.dumps(
            {"mode": cfg.maps, "shape": shape, "tokens": dims.map_tokens, "counts": counts,
             "recipe": "mean over correctly classified genomes; rows/columns from the first [SEP] on zeroed "
                       "([CLS] kept); fixed-point sums (2^-32), exact merge"}, indent=1).encode(), sync=False)
    cols = ["label", "predicted", "correct", "error", "qc"]
    t = pa.concat_tables([pq.read_table(rd.path(s, "parquet"), columns=cols) for s in range(manifest["n_shards"])])
    g = t.to_pandas()
    ok = g["error"].fillna("") == ""
    labelled = ok & (g["label"].fillna("") != "")
    manifest["summary"] = {
        "n_records": int(len(g)), "n_errors": int((~ok).sum()), "n_labelled": int(labelled.sum()),
        "n_correct": int(g["correct"][labelled].sum()),
        "accuracy": float(g["correct"][labelled].mean()) if labelled.any() else None,
        "qc": {k: int(v) for k, v in g["qc"][ok].value_counts().items()},
        "per_class": {c: int(v) for c, v in g["label"][labelled].value_counts().items()},
        "map_counts": counts,
    }
    manifest["status"] = "complete"
    rd.write_manifest(manifest)
