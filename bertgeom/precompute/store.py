"""The results directory: shard files, done markers, the class-map accumulator, the manifest,
and :func:`load_results`, the reader the dashboard uses.

Layout (``N`` records, ``L`` layers, ``H`` heads, ``T`` tokens of an input, ``K`` [CLS] width)::

    manifest.json                 model hash, parameters, input/labels checksums, status, summary
    shards/shard-000000.parquet   one row per record of the shard (input order)
    shards/shard-000000.cls.npy   [n, L+1, K] float32 [CLS] vectors (NaN rows for unreadable records)
    shards/shard-000000.maps.npz  per-class fixed-point map sums of the shard (until folded)
    shards/shard-000000.done      written last: the shard is complete
    maps_accum.npz                running class-map sums + the shards folded into them
    cls_basis.npz                 the [CLS] reduction (only with --cls-dims)
    maps/{class}.npy              class-mean attention, float32 [L,T,T] (layer-mean) or [L,H,T,T]
    maps/index.json               classes, counts, mode, T; maps/keep.npy: rows/cols kept ([SEP] off)

Every file is written to a temporary name and renamed, so an interruption leaves either the old
state or the new one. A shard is *done* when its ``.parquet`` and ``.cls.npy`` exist with the sizes
its ``.done`` marker records, and its map sums are either in ``.maps.npz`` or already folded into
``maps_accum.npz`` (whose list of folded shards is saved atomically with the sums).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertgeom.safety import write_atomically, write_bytes_atomically
from bertgeom.precompute.core import MAP_SCALE, PrecomputeError, load_npz_bytes, shard_stem

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
SHARD_FILES = ("parquet", "cls.npy")


def inside_root(root: Path, path: Path) -> bool:
    """True when ``path`` resolves (symlinks followed) to ``root`` or somewhere below it."""
    try:
        path.resolve(strict=True).relative_to(Path(root).resolve(strict=True))
    except (OSError, ValueError):
        return False
    return True


def under_root(root: Path, *parts: str) -> Path:
    """``root/parts`` through :func:`bertgeom.safety.inside_results_root` (no symbolic link at any
    level below ``root``, nothing outside it), as a :class:`PrecomputeError` sentence otherwise."""
    from bertgeom.safety import OutsideRootError, inside_results_root

    try:
        return inside_results_root(root, *parts)
    except OutsideRootError as exc:
        raise PrecomputeError(f"the results folder is refused: {exc}") from None


def safe_class_name(name: object) -> str:
    """A class name from ``maps/index.json`` that is safe in a file name (letters, digits, ``_-.``,
    no leading dot, at most 64 characters); anything else raises :class:`PrecomputeError`."""
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", name) or ".." in name:
        raise PrecomputeError(f"the results index names an invalid class {str(name)[:40]!r}.")
    return name


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ResultsDir:
    """Writer side of a results directory (only the driver process writes)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.shards = self.root / "shards"

    def prepare(self) -> None:
        self.shards.mkdir(parents=True, exist_ok=True)

    def path(self, shard: int, suffix: str) -> Path:
        """A shard's file, refused when ``shards/`` or the file is a symbolic link."""
        return under_root(self.root, "shards", f"{shard_stem(shard)}.{suffix}")

    # -- manifest ------------------------------------------------------------------------------
    def read_manifest(self) -> dict | None:
        p = under_root(self.root, MANIFEST)
        return json.loads(p.read_text()) if p.is_file() else None

    def write_manifest(self, manifest: dict) -> None:
        write_bytes_atomically(self.root / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode(),
                               sync=False)

    # -- shards --------------------------------------------------------------------------------
    def write_shard(self, shard: int, files: dict[str, bytes]) -> None:
        """Write a shard's files, then its done marker (last). Each file is written whole or not at all,
        without fsync: a shard a crash cuts short has no valid marker and is computed again."""
        for suffix in (*SHARD_FILES, "maps.npz"):
            write_bytes_atomically(self.path(shard, suffix), files[suffix], sync=False)
        marker = {"shard": shard, "sizes": {s: len(files[s]) for s in SHARD_FILES}, "time": time.time()}
        write_bytes_atomically(self.path(shard, "done"), json.dumps(marker).encode(), sync=False)

    def shard_complete(self, shard: int) -> bool:
        """Done marker present and the files it lists have the recorded sizes."""
        m = self.path(shard, "done")
        if not m.is_file():
            return False
        try:
            sizes = json.loads(m.read_text())["sizes"]
        except (ValueError, KeyError):
            return False
        return all(self.path(shard, s).is_file() and self.path(shard,
                                                               s).stat().st_size == sizes[s] for s in SHARD_FILES)

    def undo_shard(self, shard: int) -> None:
        for suffix in ("done", *SHARD_FILES, "maps.npz"):
            self.path(shard, suffix).unlink(missing_ok=True)

    def done_shards(self, n_shards: int) -> set[int]:
        return {i for i in range(n_shards) if self.shard_complete(i)}

    def clear_outputs(self) -> None:
        """Remove the final maps of a previous complete run (they are rewritten at the end)."""
        d = under_root(self.root, "maps")
        if d.is_dir():
            for p in d.iterdir():
                under_root(self.root, "maps", p.name).unlink()


@dataclass
class MapAccumulator:
    """Per-class integer sums of the class maps and the set of shards folded into them."""

    sums: dict[str, np.ndarray] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    folded: set[int] = field(default_factory=set)

    FILE = "maps_accum.npz"

    def fold(self, shard: int, partial: dict[str, np.ndarray]) -> None:
        if shard in self.folded:
            return
        for key, arr in partial.items():
            if not key.startswith("sum__"):
                continue
            c = key[5:]
            if c in self.sums:
                self.sums[c] += arr
            else:
                self.sums[c] = arr.astype(np.int64, copy=True)
            self.counts[c] = self.counts.get(c, 0) + int(partial[f"count__{c}"])
        self.folded.add(shard)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.sums.values())

    def save(self, root: Path) -> None:
        arrays = {f"sum__{c}": a for c, a in self.sums.items()}
        arrays.update({f"count__{c}": np.asarray(n, np.int64) for c, n in self.counts.items()})
        arrays["folded"] = np.asarray(sorted(self.folded), np.int64)
        write_atomically(root / self.FILE, lambda fh: np.savez(fh, **arrays))

    @classmethod
    def load(cls, root: Path) -> "MapAccumulator":
        p = under_root(root, cls.FILE)
        acc = cls()
        if not p.is_file():
            return acc
        with np.load(p, allow_pickle=False) as z:
            for k in z.files:
                if k.startswith("sum__"):
                    acc.sums[k[5:]] = z[k].astype(np.int64)
                elif k.startswith("count__"):
                    acc.counts[k[7:]] = int(z[k])
            acc.folded = set(int(x) for x in z["folded"])
        return acc

    def means(self, heads: int, mode: str) -> dict[str, np.ndarray]:
        """Class-mean maps (float32): sum / (count * scale), also over heads in layer-mean mode."""
        div = MAP_SCALE * (heads if mode == "layer-mean" else 1)
        return {c: (self.sums[c].astype(np.float64) / (self.counts[c] * div)).astype(np.float32)
                for c in sorted(self.sums) if self.counts.get(c)}


def fold_partial_file(results: ResultsDir, acc: MapAccumulator, shard: int) -> bool:
    """Fold a done shard's ``.maps.npz`` into ``acc``; False when it is missing (shard must be redone)."""
    p = results.path(shard, "maps.npz")
    if shard in acc.folded:
        return True
    if not p.is_file():
        return False
    acc.fold(shard, load_npz_bytes(p.read_bytes()))
    return True


# ---------------------------------------------------------------------------------------------
# Reader
# ---------------------------------------------------------------------------------------------
@dataclass
class PrecomputeResults:
    """A results directory opened for reading (see :func:`load_results`).

    ``records``: one row per record (pandas, input order); ``cls``: ``[N, L+1, K]`` float32 aligned
    with ``records``; ``maps``: class -> mean map (memory-mapped ``.npy``); ``map_counts``: records
    per class map; ``keep``: ``[T]`` rows/columns of the maps that are not zeroed.
    """

    root: Path
    manifest: dict
    records: object  # pandas.DataFrame
    cls: np.ndarray
    maps: dict[str, np.ndarray]
    map_counts: dict[str, int]
    keep: np.ndarray | None

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"

    @property
    def labels(self) -> list[str]:
        return list(self.manifest["model"]["labels"])

    @property
    def num_layers(self) -> int:
        return int(self.manifest["model"]["layers"])

    @property
    def num_heads(self) -> int:
        return int(self.manifest["model"]["heads"])

    def ok(self) -> np.ndarray:
        """``[N]`` bool: records that were analysed (no error)."""
        return (self.records["error"].fillna("") == "").to_numpy(dtype=bool, copy=True)

    def head_feature(self, name: str) -> np.ndarray:
        """``[N, L, H]`` values of one stored per-head feature (NaN for unreadable records)."""
        from bertgeom.precompute.core import head_column

        L, H = self.num_layers, self.num_heads
        cols = [head_column(name, l, h) for l in range(L) for h in range(H)]
        missing = [c for c in cols if c not in self.records.columns]
        if missing:
            raise KeyError(f"feature '{name}' was not precomputed (stored: "
                           f"{', '.join(self.manifest['params']['features'])})")
        return self.records[cols].to_numpy(np.float64).reshape(-1, L, H)

    def cone_curves(self, normalized: bool = True) -> np.ndarray:
        """``[N, L+1]`` cone index of ``hidden_states[0..L]`` (I/m, or I with ``normalized=False``)."""
        pre = "cone_" if normalized else "cone_raw_"
        return self.records[[f"{pre}{l}" for l in range(self.num_layers + 1)]].to_numpy(np.float64)

    def class_curves(self, normalized: bool = True, *, by: str = "label", correct_only: bool = False) -> dict:
        """Per-class mean, sd and count of the cone curves (``by`` = ``label`` or ``predicted``)."""
        from bertgeom.sets.cone import group_stats

        keep = self.ok()
        if correct_only:
            keep &= self.records["correct"].to_numpy(dtype=bool)
        groups = self.records[by].fillna("").to_numpy(str)
        keep &= groups != ""
        return group_stats(self.cone_curves(normalized)[keep], groups[keep], order=self.labels)

    def to_cone_set(self):
        """The analysed genomes as a :class:`bertgeom.sets.cone.ConeSet` (made by the same producer as
        :func:`bertgeom.sets.cone.cone_profiles_over_set`: ``hidden [N, L+1]``, ``m``, ``cls``,
        ``probs``, no streams), so the Cone Index page can show a precomputed set without running
        the model. Unreadable records are its errors."""
        from bertgeom.sets.cone import cone_set

        ok = self.ok()
        g, errs = self.records[ok], self.records[~ok]
        cls = np.asarray(self.cls[ok]) if self.cls.size else None
        return cone_set(
            g["name"].to_numpy(str), g["label"].fillna("").to_numpy(str), g["predicted"].fillna("").to_numpy(str),
            hidden=g[[f"cone_raw_{l}" for l in range(self.num_layers + 1)]].to_numpy(np.float64),
            m=g["cone_m"].to_numpy(np.int64), cls=cls,
            probs=g[[f"p_{c}" for c in self.labels]].to_numpy(np.float32),
            errors=zip(errs["name"].astype(str).tolist(), errs["error"].astype(str).tolist()))


def _shard_ids(root: Path) -> list[int]:
    ids = []
    for p in under_root(root, "shards").glob("shard-*.done"):
        try:
            ids.append(int(p.name[6:12]))
        except ValueError:
            continue
    return sorted(ids)


def load_results(root: str | os.PathLike, *, allow_partial: bool = True, mmap: bool = True,
                 columns: list[str] | None = None, cls: bool = True) -> PrecomputeResults:
    """Open a results directory written by ``python -m bertgeom precompute``.

    Reads every done shard (rows in input order) and, for a complete run, the class-mean maps
    (memory-mapped with ``mmap``). A partial (interrupted) run opens with the shards done so far
    and no maps unless ``allow_partial=False``, which raises instead. For very large runs, read
    only some ``columns`` (``name``, ``label``, ``predicted``, ``correct`` and ``error`` are always
    read) and skip the [CLS] vectors with ``cls=False``.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    root = Path(root)
    rd = ResultsDir(root)
    manifest = rd.read_manifest()
    if manifest is None:
        raise PrecomputeError(f"'{root}' is not a precompute results directory (no {MANIFEST}).")
    if manifest.get("format") != FORMAT_VERSION:
        raise PrecomputeError(f"'{root}' was written by another results format ({manifest.get('format')}).")
    if manifest.get("status") != "complete" and not allow_partial:
        raise PrecomputeError(f"the run in '{root}' is not complete ({manifest.get('status')}); rerun it to resume.")
    ids = [i for i in _shard_ids(root) if rd.shard_complete(i)]
    if ids:
        import pyarrow as pa

        cols = None
        if columns is not None:
            base = ["index", "name", "label", "predicted", "correct", "error"]
            cols = base + [c for c in columns if c not in base]
        tables = [pq.read_table(rd.path(i, "parquet"), columns=cols) for i in ids]
        genomes = pa.concat_tables(tables).to_pandas()
        vecs = np.concatenate([np.load(rd.path(i, "cls.npy"), allow_pickle=False) for i in ids]) if cls else None
    else:
        genomes = pd.DataFrame()
        vecs = None
    if vecs is None:
        vecs = np.zeros((len(genomes), 0, 0), np.float32)
    maps, counts, keep = {}, {}, None
    index = under_root(root, "maps", "index.json")
    if manifest.get("status") == "complete" and index.is_file():
        meta = json.loads(index.read_text())
        counts = {safe_class_name(c): int(n) for c, n in meta["counts"].items()}
        for c in counts:
            maps[c] = np.load(under_root(root, "maps", f"{c}.npy"), mmap_mode="r" if mmap else None, allow_pickle=False)
        keep = np.load(under_root(root, "maps", "keep.npy"), allow_pickle=False)
    return PrecomputeResults(root, manifest, genomes, vecs, maps, counts, keep)
