"""One cache for everything bertgeom computes more than once: a typed key, a memory tier, a disk tier.

A result is asked for by a :class:`CacheKey` (what is computed and its code version, the model's
weights hash, a digest of the input, every parameter) and found in this order:

1. **memory** — a :class:`Memo`, a bounded LRU shared by every thread of the process (a server's
   sessions), with one compute lock per key: two sessions asking for the same result at once run
   it once, the second waits for the first and reads its answer;
2. **disk** — ``$BERTGEOM_CACHE_DIR`` (else ``$XDG_CACHE_HOME/bertgeom``, else ``~/.cache/bertgeom``:
   :func:`bertgeom.runtime.cache_dir`),
   one file per key named by its digest, in safe formats only: ``.npz`` of plain arrays read with
   ``allow_pickle=False``, or JSON. Never pickle. Every write goes to a temporary file unique to its
   writer that :func:`os.replace` moves into place (:class:`bertgeom.safety.AtomicFile`), so another
   process reads the old file or the whole new one; a file that cannot be read (cut short, corrupt, a
   pickle) is removed and recomputed, never an error;
3. **compute** — the function given, whose result is then kept in both tiers.

:func:`cached` does the three steps (``disk=None`` keeps a result in memory only, for objects that
are not plain arrays); :func:`cached_arrays` is the common case of a dict of arrays. The set views
prepared ahead (``python -m bertgeom prepare-sets``, :mod:`bertgeom.sets.prepared`) write the same
entries the pages read, because every key of a set view is built in one place,
:mod:`bertgeom.sets.keys`.

What else keeps results, and why it is not this module (one sentence each):

* ``st.cache_resource`` in :mod:`bertgeom.ui.cache` holds the one shared model and the read-only
  traces per server: Streamlit's per-server singleton for objects that must never be copied.
* ``st.cache_data`` around interactive per-input views in ``bertgeom/ui/`` gives the page its spinner
  and keeps small results of one input per server; anything kept on disk goes through this module.
* ``functools.lru_cache`` on loaders of shipped data (the example sentences and genomes, the shipped
  genome sets, the reference genome, clade and marker tables) holds process-lifetime constants read
  from files inside the package.
* The exported ONNX graphs (:func:`bertgeom.backends.exported_onnx`) are files a runtime opens
  by path, named by a hash of the weights, under ``$BERTGEOM_CACHE_DIR/export``.
* The precompute store (:mod:`bertgeom.precompute`) is a results directory a user asked for and
  keeps (manifest, shards, resumable), not a cache that may be thrown away.

References
----------
NumPy, ``numpy.load(allow_pickle=False)`` and the ``.npz`` format; POSIX ``rename(2)`` (atomic
replacement within one file system); issue 35 ("one cache").
"""

from __future__ import annotations

import hashlib
import json
import numbers
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np

from bertgeom.runtime import cache_dir
from bertgeom.safety import write_atomically

__all__ = ["CACHE_FORMAT", "CacheKey", "Memo", "cached", "cached_arrays", "disk_path", "on_disk", "read_arrays",
           "write_arrays", "read_json", "write_json", "as_json", "text_digest", "key_lock", "askers",
           "wait_for_askers"]

#: The layout of keys and files; bumping it misses every entry written before.
CACHE_FORMAT = 1

T = TypeVar("T")
Scalar = str | int | float | bool | None


def _canonical(value: Any, where: str):
    """``value`` as a JSON-stable scalar or tuple (numpy scalars and lists included); anything else
    (an array, an object) has no stable digest and is refused."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (tuple, list)):
        return tuple(_canonical(v, where) for v in value)
    raise TypeError(f"cache key {where}: {type(value).__name__} has no stable digest (use str, int, float, bool, "
                    "None or a tuple of them; digest an input with text_digest)")


@dataclass(frozen=True)
class CacheKey:
    """What a cached result depends on; equal keys mean the same result, in any process.

    ``kind`` names the computation and ``version`` its code version (bump it when the stored result
    changes meaning); ``weights`` is the model's weights hash ("" when no model is involved);
    ``inputs`` a digest of the input (a set's fingerprint, :func:`text_digest` of one text);
    ``params`` every other setting, as sorted ``(name, value)`` pairs of scalars.
    """

    kind: str
    version: str | int = ""
    weights: str = ""
    inputs: str = ""
    params: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.kind or not isinstance(self.kind, str):
            raise TypeError("cache key: kind must be a non-empty string")
        pairs = self.params.items() if isinstance(self.params, Mapping) else self.params
        norm = tuple(sorted((str(k), _canonical(v, f"parameter {k!r}")) for k, v in pairs))
        object.__setattr__(self, "params", norm)
        object.__setattr__(self, "version", _canonical(self.version, "version"))

    @classmethod
    def of(cls, kind: str, version: str | int = "", *, weights: str = "", inputs: str = "", **params: Any) -> CacheKey:
        """``CacheKey.of("cone-set", "cone-v1", weights=h, inputs=fp, token_set="content")``."""
        return cls(kind, version, weights, inputs, tuple(params.items()))

    @property
    def param(self) -> dict[str, Any]:
        """The parameters by name."""
        return dict(self.params)

    def canonical(self) -> str:
        """The key as one JSON string (sorted, compact): what :attr:`digest` hashes."""
        return json.dumps({"format": CACHE_FORMAT, "kind": self.kind, "version": self.version,
                           "weights": self.weights, "inputs": self.inputs,
                           "params": [list(p) for p in self.params]}, sort_keys=True, separators=(",", ":"))

    @cached_property
    def digest(self) -> str:
        """A stable 24-hex-digit name of the key (its file's stem; the same in every process and run)."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:24]

    def __str__(self) -> str:
        return f"{self.kind}:{self.digest}"


def text_digest(text: str) -> str:
    """A 16-hex-digit digest of one text, for :attr:`CacheKey.inputs`."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -------------------------------------------------------------------------------------------
# One compute lock per key (process-wide)
# -------------------------------------------------------------------------------------------
_LOCKS: dict[str, list] = {}  # digest -> [RLock, number of holders and waiters]
_LOCKS_CHANGED = threading.Condition(threading.Lock())


@contextmanager
def key_lock(key: CacheKey) -> Iterator[None]:
    """Hold ``key``'s compute lock: one thread at a time computes (or writes) one key. Re-entrant;
    the lock is forgotten when nobody holds or waits for it, so the table never grows."""
    with _LOCKS_CHANGED:
        entry = _LOCKS.setdefault(key.digest, [threading.RLock(), 0])
        entry[1] += 1
        _LOCKS_CHANGED.notify_all()
    try:
        with entry[0]:
            yield
    finally:
        with _LOCKS_CHANGED:
            entry[1] -= 1
            if entry[1] == 0:
                _LOCKS.pop(key.digest, None)
            _LOCKS_CHANGED.notify_all()


def askers(key: CacheKey) -> int:
    """How many threads hold or wait for ``key``'s compute lock now."""
    with _LOCKS_CHANGED:
        entry = _LOCKS.get(key.digest)
        return entry[1] if entry else 0


def wait_for_askers(key: CacheKey, n: int, timeout: float | None = None) -> bool:
    """Wait until ``n`` threads hold or wait for ``key``'s lock (True), or ``timeout`` seconds (False):
    how a test sees a second asker queued behind the first without sleeping."""
    with _LOCKS_CHANGED:
        return _LOCKS_CHANGED.wait_for(lambda: (_LOCKS.get(key.digest) or [None, 0])[1] >= n, timeout)


# -------------------------------------------------------------------------------------------
# Memory tier
# -------------------------------------------------------------------------------------------
_MISSING = object()


class Memo:
    """A bounded, thread-safe LRU of results by :class:`CacheKey`, shared by a process's threads.

    Values are shared, not copied: treat them as read-only. ``max_entries`` bounds the number of
    results kept (the least recently used goes first)."""

    def __init__(self, name: str, max_entries: int):
        if max_entries < 1:
            raise ValueError("a memo keeps at least one entry")
        self.name, self.max_entries = name, int(max_entries)
        self._data: OrderedDict[CacheKey, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: CacheKey, default: Any = None) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return default

    def put(self, key: CacheKey, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __repr__(self) -> str:
        return f"Memo({self.name!r}, {len(self)}/{self.max_entries})"


# -------------------------------------------------------------------------------------------
# Disk tier (safe formats, atomic writes)
# -------------------------------------------------------------------------------------------
def disk_path(key: CacheKey, fmt: str = "npz") -> Path:
    """The file of ``key`` in format ``fmt`` (``"npz"`` or ``"json"``) under ``$BERTGEOM_CACHE_DIR``."""
    if fmt not in ("npz", "json"):
        raise ValueError(f"unknown cache format {fmt!r} (npz or json)")
    return cache_dir() / f"{key.digest}.{fmt}"


def on_disk(key: CacheKey, fmt: str = "npz") -> bool:
    return disk_path(key, fmt).is_file()


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only cache: the next read fails the same way and recomputes again


def read_arrays(key: CacheKey) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``, or None when there are none or they cannot be read safely
    (a cut-off or corrupt file, a pickled object: removed, so the next caller recomputes)."""
    path = disk_path(key, "npz")
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}  # read every array now: a truncated member fails here
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        _discard(path)
        return None


def _atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> bool:
    """``write`` into a file unique to this writer beside ``path``, moved onto ``path`` in one step
    (:func:`bertgeom.safety.write_atomically`): readers see the old file or the whole new one. No
    fsync: a file a crash cut short is read as damaged and recomputed. False when the cache is not
    writable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, write, sync=False)
        return True
    except OSError:
        return False  # a read-only home still works, just without the disk tier


def write_arrays(key: CacheKey, arrays: Mapping[str, np.ndarray]) -> bool:
    """Store a dict of plain arrays under ``key`` (``.npz``); an object array (which only pickle could
    store) is refused with a TypeError. True when the file was written."""
    plain = {str(k): np.asarray(v) for k, v in arrays.items()}
    bad = [k for k, v in plain.items() if v.dtype.hasobject]
    if bad:
        raise TypeError(f"cache entry {key}: arrays {bad} hold Python objects; only plain arrays are stored")
    return _atomic_write(disk_path(key, "npz"), lambda fh: np.savez_compressed(fh, **plain))


def read_json(key: CacheKey) -> Any | None:
    """The JSON value stored under ``key``, or None (missing or unreadable: removed)."""
    path = disk_path(key, "json")
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        _discard(path)
        return None


def _json_default(value: Any):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not plain data (JSON)")


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (numpy scalars and arrays as numbers and lists, tuples as
    lists); a TypeError for anything that is not plain data."""
    return json.loads(json.dumps(value, default=_json_default))


def write_json(key: CacheKey, value: Any) -> bool:
    """Store a JSON-serialisable value under ``key``; True when the file was written."""
    text = json.dumps(value, default=_json_default)  # a TypeError here: the value is not plain data
    return _atomic_write(disk_path(key, "json"), lambda fh: fh.write(text.encode("utf-8")))


_READ = {"npz": read_arrays, "json": read_json}
_WRITE = {"npz": write_arrays, "json": write_json}


# -------------------------------------------------------------------------------------------
# Memory -> disk -> compute
# -------------------------------------------------------------------------------------------
def cached(key: CacheKey, compute: Callable[[], T], *, memo: Memo | None = None, disk: str | None = "npz") -> T:
    """``compute()``'s result for ``key``: from ``memo``, else from disk (format ``disk``; None for
    memory only), else computed once (under ``key``'s lock, so concurrent askers wait for one
    computation) and kept in both tiers."""
    if memo is not None:
        hit = memo.get(key, _MISSING)
        if hit is not _MISSING:
            return hit
    with key_lock(key):
        if memo is not None:  # another thread may have finished while this one waited
            hit = memo.get(key, _MISSING)
            if hit is not _MISSING:
                return hit
        value = _READ[disk](key) if disk else None
        if value is None:
            value = compute()
            if disk == "json":
                value = as_json(value)  # a fresh result is what a later read gives back
            if disk:
                _WRITE[disk](key, value)
        if memo is not None:
            memo.put(key, value)
    return value


def cached_arrays(key: CacheKey, compute: Callable[[], Mapping[str, np.ndarray]], *,
                  memo: Memo | None = None) -> dict[str, np.ndarray]:
    """:func:`cached` for a dict of numpy arrays kept as ``.npz`` (values made arrays, so a fresh result
    looks like one read from disk)."""
    return cached(key, lambda: {str(k): np.asarray(v) for k, v in compute().items()}, memo=memo, disk="npz")
