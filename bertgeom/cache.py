"""One cache for everything bertgeom computes more than once: a typed key, a memory tier, a disk tier.

A result is asked for by a :class:`CacheKey` (what is computed and its code version, the model's
weights hash, a digest of the input, every parameter) and found in this order:

1. **memory** — a :class:`Memo`, a bounded LRU shared by every thread of the process (a server's
   sessions), with one compute lock per key: two sessions asking for the same result at once run
   it once, the second waits for the first and reads its answer;
2. **disk** — ``$BERTGEOM_CACHE_DIR`` (else ``$XDG_CACHE_HOME/bertgeom``, else ``~/.cache/bertgeom``:
   :func:`bertgeom.runtime.cache_dir`),
   one file per key named by its digest, in safe formats only: ``.npz`` of plain arrays (read member
   by member from their ``.npy`` headers, never unpickled), or JSON. Never pickle. Every entry carries
   its key and (``.npz``) each array's shape, dtype and NaN count; a read opens the file without
   following a link (``O_NOFOLLOW``), stops before decompressing more than :func:`max_entry_bytes`, and
   refuses a file that does not match its key or its own description (:func:`read_arrays`). Every
   write goes to a temporary file unique to its writer that :func:`os.replace` moves into place
   (:class:`bertgeom.safety.AtomicFile`), so another process reads the old file or the whole new one;
   a file that cannot be read or is refused (cut short, corrupt, a pickle, a link, another key's
   entry, wrong shapes, missing arrays, NaN, a bomb) is removed, recomputed and replaced, never an error;
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
NumPy, the ``.npy``/``.npz`` format (``numpy.lib.format``: magic, header, then the raw data);
``open(2)`` ``O_NOFOLLOW``; POSIX ``rename(2)`` (atomic replacement within one file system); issue 35
("one cache"); issue 46 (an entry checked against its key, the decompression bound).
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import stat
import threading
import zipfile
import zlib
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

__all__ = ["ENTRY_MEMBER", "MAX_ENTRY_BYTES", "max_entry_bytes",
           "CACHE_FORMAT", "CacheKey", "Memo", "cached", "cached_arrays", "disk_path", "on_disk", "read_arrays",
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
    """Whether ``key`` has a file of its own (a regular file, never a link: a link is not an entry)."""
    try:
        return stat.S_ISREG(os.lstat(disk_path(key, fmt)).st_mode)
    except OSError:
        return False


#: The name of the entry's own description inside an ``.npz`` (its key, and every array's shape,
#: dtype and count of NaN): what a read checks the file against.
ENTRY_MEMBER = "__bertgeom_entry__"
#: Overrides :data:`MAX_ENTRY_BYTES` (bytes).
MAX_ENTRY_ENV = "BERTGEOM_CACHE_MAX_ENTRY_BYTES"
#: The most bytes one entry's arrays may take once decompressed (the largest set view is a few hundred
#: MB): a file that declares more (an ``.npz`` bomb) is refused after reading its headers, never
#: decompressed whole.
MAX_ENTRY_BYTES = 1 << 30


def max_entry_bytes() -> int:
    """:data:`MAX_ENTRY_BYTES`, or ``$BERTGEOM_CACHE_MAX_ENTRY_BYTES`` when set."""
    try:
        return int(os.environ.get(MAX_ENTRY_ENV, "") or MAX_ENTRY_BYTES)
    except ValueError:
        return MAX_ENTRY_BYTES


class EntryRejected(ValueError):
    """A cache file that is not a faithful entry of its key (why, in one phrase)."""


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)  # a link is removed itself, never its target
    except OSError:
        pass  # a read-only cache: the next read fails the same way and recomputes again


@contextmanager
def _open_entry(path: Path) -> Iterator[IO[bytes] | None]:
    """The entry's file opened without following a link (``O_NOFOLLOW``), or None when there is none;
    a link, a folder or a device raises :class:`EntryRejected`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        raise EntryRejected(f"cannot be opened as a file of its own ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise EntryRejected("is not a regular file")
        yield fh


def _nan_count(a: np.ndarray) -> int:
    return int(np.isnan(a).sum()) if a.dtype.kind in "fc" else 0


def _describe(key: CacheKey, arrays: Mapping[str, np.ndarray]) -> dict:
    described = {k: {"shape": list(v.shape), "dtype": v.dtype.str, "nan": _nan_count(v)} for k, v in arrays.items()}
    return {"key": key.canonical(), "arrays": described}


def _read_member(zf: zipfile.ZipFile, name: str, budget: list[int]) -> np.ndarray:
    """One ``.npy`` member, read from its header on: the bytes its shape declares are checked against
    what is left of the entry's budget before they are decompressed, and only those are read."""
    with zf.open(name) as fh:
        version = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(fh, max_header_size=10_000)
        if dtype.hasobject:
            raise EntryRejected(f"array '{name}' holds Python objects")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        nbytes = count * dtype.itemsize
        if nbytes > budget[0]:
            raise EntryRejected(f"declares more than {max_entry_bytes():,} bytes once decompressed")
        budget[0] -= nbytes
        raw = bytearray(nbytes)
        view, got = memoryview(raw), 0
        while got < nbytes:
            n = fh.readinto(view[got:]) if hasattr(fh, "readinto") else 0
            if not n:
                break
            got += n
        if got != nbytes:
            raise EntryRejected(f"array '{name}' is cut short")
        arr = np.frombuffer(raw, dtype=dtype, count=count)
        return arr.reshape(shape, order="F" if fortran else "C")


def read_arrays(key: CacheKey) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``, or None when there are none or the file is not a faithful entry
    of ``key``: a link (never followed), a file cut short or corrupt, a pickle, an entry of another
    key, arrays missing, added or of other shapes or dtypes than the entry recorded, NaN where there
    was none, or more than :func:`max_entry_bytes` once decompressed (read no further). Such a file is
    removed, so the caller recomputes and replaces it."""
    path = disk_path(key, "npz")
    try:
        with _open_entry(path) as fh:
            if fh is None:
                return None
            with zipfile.ZipFile(fh) as zf:
                names = zf.namelist()
                if f"{ENTRY_MEMBER}.npy" not in names:
                    raise EntryRejected("carries no description of its key and arrays")
                budget = [1 << 20]
                entry = json.loads(_read_member(zf, f"{ENTRY_MEMBER}.npy", budget).tobytes().decode("utf-8"))
                if entry.get("key") != key.canonical():
                    raise EntryRejected("is the entry of another key")
                described = entry.get("arrays") or {}
                stored = sorted(n[:-4] for n in names if n.endswith(".npy") and n != f"{ENTRY_MEMBER}.npy")
                if stored != sorted(described) or len(stored) + 1 != len(names):
                    raise EntryRejected("holds other arrays than it describes")
                budget = [max_entry_bytes()]
                out = {}
                for name in stored:
                    a = _read_member(zf, f"{name}.npy", budget)
                    want = described[name]
                    if list(a.shape) != list(want["shape"]) or a.dtype.str != want["dtype"]:
                        raise EntryRejected(f"array '{name}' has another shape or dtype than it describes")
                    if _nan_count(a) != int(want.get("nan", 0)):
                        raise EntryRejected(f"array '{name}' holds NaN it was not written with")
                    out[name] = a
                return out
    except (EntryRejected, OSError, ValueError, EOFError, KeyError, TypeError, AttributeError,
            zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, zlib.error, UnicodeDecodeError):
        _discard(path)
        return None


def _atomic_write(path: Path, write: Callable[[IO[bytes]], None], *, strict: bool = False) -> bool:
    """``write`` into a file unique to this writer beside ``path``, moved onto ``path`` in one step
    (:func:`bertgeom.safety.write_atomically`): readers see the old file or the whole new one; a link at
    ``path`` is replaced, never written through. No fsync: a file a crash cut short is read as damaged
    and recomputed. False when the cache is not writable (full, read-only); ``strict`` raises the
    ``OSError`` instead (``prepare-sets``, which must say what it could not write)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, write, sync=False)
        return True
    except OSError:
        if strict:
            raise
        return False  # a read-only home still works, just without the disk tier


def write_arrays(key: CacheKey, arrays: Mapping[str, np.ndarray], *, strict: bool = False) -> bool:
    """Store a dict of plain arrays under ``key`` (``.npz``) with the entry's description (its key and
    each array's shape, dtype and NaN count, :data:`ENTRY_MEMBER`), which a read checks; an object
    array (which only pickle could store) is refused with a TypeError. True when the file was written;
    ``strict``: an ``OSError`` when it was not."""
    plain = {str(k): np.asarray(v) for k, v in arrays.items()}
    bad = [k for k, v in plain.items() if v.dtype.hasobject]
    if bad:
        raise TypeError(f"cache entry {key}: arrays {bad} hold Python objects; only plain arrays are stored")
    if ENTRY_MEMBER in plain:
        raise ValueError(f"cache entry {key}: '{ENTRY_MEMBER}' is the entry's own description")
    entry = np.frombuffer(json.dumps(_describe(key, plain)).encode("utf-8"), dtype=np.uint8)
    return _atomic_write(disk_path(key, "npz"), lambda fh: np.savez_compressed(fh, **plain, **{ENTRY_MEMBER: entry}),
                         strict=strict)


#: The most bytes a JSON entry may hold (a backend choice, a few facts).
MAX_JSON_ENTRY_BYTES = 16 << 20


def read_json(key: CacheKey) -> Any | None:
    """The JSON value stored under ``key``, or None: missing, a link, unreadable, over
    :data:`MAX_JSON_ENTRY_BYTES`, or the entry of another key (then removed, so it is recomputed)."""
    path = disk_path(key, "json")
    try:
        with _open_entry(path) as fh:
            if fh is None:
                return None
            data = fh.read(MAX_JSON_ENTRY_BYTES + 1)
            if len(data) > MAX_JSON_ENTRY_BYTES:
                raise EntryRejected("is larger than a JSON entry may be")
            entry = json.loads(data.decode("utf-8"))
            if not isinstance(entry, dict) or entry.get("key") != key.canonical() or "value" not in entry:
                raise EntryRejected("is not the entry of its key")
            return entry["value"]
    except (EntryRejected, OSError, ValueError, UnicodeDecodeError):
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


def write_json(key: CacheKey, value: Any, *, strict: bool = False) -> bool:
    """Store a JSON-serialisable value under ``key`` (``{"key": its canonical form, "value": ...}``,
    so a read knows the file is this key's); True when the file was written."""
    text = json.dumps({"key": key.canonical(), "value": value}, default=_json_default)  # TypeError: not plain data
    return _atomic_write(disk_path(key, "json"), lambda fh: fh.write(text.encode("utf-8")), strict=strict)


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
