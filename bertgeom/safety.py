"""The shared guards between what a user supplies and what the tool renders or writes.

One home for each rule, so every site calls the same code:

* :func:`plain` - a user string (FASTA header, file name, manifest field, error text) as markdown
  that renders exactly that text: no link, image, colour directive, emoji shortcode or formula.
* :func:`plotly_text`, :func:`plotly_texts` - a user's or a model's string (class label, token, record
  name) as plotly text: shown as written, never as the HTML subset plotly renders (a link, a style).
* :func:`csv_cell`, :func:`csv_bytes` - CSV cells a spreadsheet will not run as a formula.
* :class:`AtomicFile` - an output file that replaces the previous one only when the run succeeds,
  written under a name unique to the run, never through a link.
* :class:`ExclusiveLock`, :func:`output_lock` - one run writes an output (or a results folder) at a
  time; the lock file is never followed as a link.
* :func:`inside_results_root` - a path under a results root, refused when any part of it is a
  symbolic link or resolves outside the root.
* :class:`NameDeduper` - records that share a name told apart in outputs (``name``, ``name#2``).
* :func:`error_text` - an exception's first line, read safely (an empty ``MemoryError`` included).
* :data:`MAX_INPUT_BYTES` - the one limit on a user's input, pasted or uploaded.

No Streamlit here: the library, the CLI and the pages share it.

References
----------
* CommonMark 0.31, section 2.4 (backslash escapes: any ASCII punctuation may be escaped).
* GitHub Flavored Markdown, "Autolinks (extension)": bare ``www.``, ``http://`` and e-mail
  addresses become links, recognised in the text after escapes are resolved.
* plotly.js, "Styling and formatting text" (``svg_text_utils``): titles, tick labels, legend names,
  annotations and hover text render ``<a href>``, ``<b>``, ``<i>``, ``<br>``, ``<span style>``,
  ``<sub>``, ``<sup>`` and decode ``&lt; &gt; &amp;`` and numeric entities.
* OWASP, "CSV Injection": cells starting with ``= + - @``, tab or carriage return are prefixed
  with an apostrophe.
* POSIX ``open(2)``: ``O_EXCL`` with ``O_CREAT`` fails on an existing name, a link included;
  ``O_NOFOLLOW`` fails with ``ELOOP`` when the last component is a symbolic link. ``flock(2)``.
"""

from __future__ import annotations

import os
import re
import string
from pathlib import Path

#: The one limit on a user's input, pasted or uploaded (after decompression), on every page and
#: set uploader: 20 MB = 20,000,000 bytes, what ``server.maxUploadSize = 20`` in
#: ``.streamlit/config.toml`` lets through: Streamlit's uploader counts megabytes of 1,000,000 bytes
#: (1,024² only on Windows), so a limit of 20 MiB promised files of 20.0-20.97 MB that it refuses.
MAX_INPUT_BYTES = 20 * 1000 * 1000
#: How the limit is written in sentences and labels.
MAX_INPUT_WORDS = "20 MB"

# ---- markdown --------------------------------------------------------------------------------
_ESCAPES = {ord(c): "\\" + c for c in string.punctuation}
_ESCAPES.update({ord("\n"): " ", ord("\r"): " ", ord("\t"): " "})
#: U+2060 WORD JOINER: invisible, and not a word character, so it breaks the patterns that
#: markdown renderers apply to text *after* escapes are resolved (bare URLs, e-mail addresses,
#: ``:shortcode:`` emoji).
_JOIN = "\u2060"
_WWW = re.compile(r"(?i)(www)(?=\\\.)")


def plain(text: object) -> str:
    """``text`` as markdown source that renders to exactly ``text`` (on one line), never as markup.

    Every ASCII punctuation character is backslash-escaped (so no link, image, emphasis, heading,
    ``:red[...]`` directive, ``$...$`` formula or HTML is recognised), line breaks are folded, and
    an invisible word joiner follows each ``:`` and ``@`` and each ``www`` before a dot, so that
    GFM's bare-URL and e-mail autolinks and emoji shortcodes, which are matched in the text after
    the escapes are read, find nothing."""
    out = str(text).translate(_ESCAPES)
    out = out.replace("\\:", "\\:" + _JOIN).replace("\\@", "\\@" + _JOIN)
    return _WWW.sub(r"\1" + _JOIN, out)


# ---- exception text --------------------------------------------------------------------------
def error_text(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's text, at most ``limit`` characters, read safely: an exception
    with no text (a ``MemoryError``, a bare ``KeyError()``) or whose ``str`` itself fails gives its
    type's name, never an ``IndexError`` in the message builder."""
    try:
        text = str(exc).strip()
    except Exception:  # noqa: BLE001 - a broken __str__ must not raise in the handler
        text = ""
    first = text.splitlines()[0].strip() if text else ""
    if not first or first in ("''", '""'):
        return type(exc).__name__
    return first if len(first) <= limit else first[: limit - 1] + "…"


# ---- plotly text -----------------------------------------------------------------------------
_PLOTLY_ESCAPES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"}


def plotly_text(value: object) -> str:
    """A user's or a model's string as plotly text that shows exactly that string: ``& < >`` as
    entities, so no tag of the HTML subset plotly renders (a link, a styled span, a line break) is
    formed, while the chart still shows the characters. Our own markup (``<br>``, ``<extra>``) is
    added around it by the figure."""
    return str(value).translate(_PLOTLY_ESCAPES)


def plotly_texts(values) -> list:
    """:func:`plotly_text` of every string in ``values`` (numbers and ``None`` pass unchanged)."""
    return [plotly_text(v) if isinstance(v, str) else v for v in values]


# ---- CSV -------------------------------------------------------------------------------------
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A CSV cell a spreadsheet will not run as a formula: text starting with ``= + - @``, tab or
    carriage return gets a leading apostrophe (OWASP); numbers and other values pass unchanged."""
    if isinstance(value, str) and value[:1] in _FORMULA_START:
        return "'" + value
    return value


def csv_frame(df):
    """A copy of a pandas DataFrame whose text cells and column names are :func:`csv_cell`-safe."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        s = out[col]
        if not (pd.api.types.is_numeric_dtype(s) or pd.api.types.is_datetime64_any_dtype(s)):
            out[col] = s.astype(object).map(csv_cell)  # object, str, string, category: any text
    out.columns = [csv_cell(c) if isinstance(c, str) else c for c in out.columns]
    return out


def csv_bytes(rows) -> bytes:
    """Rows (a DataFrame, or a list of dicts) as UTF-8 CSV with every cell :func:`csv_cell`-safe:
    the one CSV writer of the app's downloads. Lines end in CRLF (RFC 4180, as the CLI's ``csv``
    writer), so a carriage return inside a cell is quoted instead of splitting the row."""
    import pandas as pd

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    return csv_frame(df).to_csv(index=False, lineterminator="\r\n").encode("utf-8")


# ---- record names ----------------------------------------------------------------------------
class NameDeduper:
    """Tells apart records that share a name, in input order: the first keeps its name, the next
    ones get ``#2``, ``#3``... (never a name already given). Nothing is renamed silently: rows keep
    the header's name in ``original_name`` and :meth:`notice` says what was done."""

    def __init__(self):
        self._given: set[str] = set()
        self.renamed: list[tuple[str, str]] = []

    def __call__(self, name: str) -> str:
        unique, k = name, 1
        while unique in self._given:
            k += 1
            unique = f"{name}#{k}"
        self._given.add(unique)
        if unique != name:
            self.renamed.append((name, unique))
        return unique

    def row(self, row: dict) -> dict:
        """``row`` with a unique ``name`` and, right after it, ``original_name`` (the header's)."""
        out = {}
        for key, value in row.items():
            if key == "name":
                out["name"] = self(str(value))
                out["original_name"] = value
            else:
                out[key] = value
        return out

    def notice(self) -> str:
        """One sentence on the renamed records (empty when none)."""
        if not self.renamed:
            return ""
        shown = ", ".join(f"'{a}' -> '{b}'" for a, b in self.renamed[:3]) + (" …" if len(self.renamed) > 3 else "")
        from bertgeom.tables import counted, word_for

        n = len(self.renamed)
        return (f"{counted(n, 'record')} {word_for(n, 'shares', 'share')} a name with an earlier one "
                f"and {word_for(n, 'is', 'are')} told apart with #2, #3… "
                f"({shown}); the CSV's 'original_name' column keeps every header's name.")


# ---- atomic output ---------------------------------------------------------------------------
def _create_mode(target: Path) -> int:
    """Permissions for a new output file: the target's when it exists, else 0o666 less the umask
    (``mkstemp`` creates 0o600, which would make every committed output private)."""
    try:
        return os.stat(target, follow_symlinks=False).st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


class AtomicFile:
    """An output file written under a temporary name beside it and renamed over the target by
    :meth:`commit` only. A run that fails or is interrupted never replaces (or truncates) the
    previous file; what it wrote stays in :attr:`partial` for inspection.

    The temporary name is unique to the run (``OUT.<random>.partial``, created with ``O_EXCL`` and
    ``O_NOFOLLOW``): two runs never write the same file, and a planted link is never followed.

    ``with AtomicFile(path) as out: ...; out.commit()`` - without ``commit`` the target is untouched.
    """

    def __init__(self, path: str | os.PathLike, mode: str = "w", **open_kw):
        import tempfile

        self.path = Path(path)
        perms = _create_mode(self.path)
        fd, name = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".partial", dir=self.path.parent)
        self.partial = Path(name)
        try:
            os.fchmod(fd, perms)
            self._fh = os.fdopen(fd, mode, **open_kw)  # noqa: SIM115 - closed by commit() or close()
        except BaseException:
            os.close(fd)
            self.partial.unlink(missing_ok=True)
            raise
        self.committed = False

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def discard(self) -> None:
        """Close and remove the temporary file (a run that wrote nothing worth keeping). The file is
        removed even when closing fails (a full disk raises ``ENOSPC`` again while flushing what is
        buffered): nothing is left behind by a run that failed."""
        try:
            self._fh.close()
        except OSError:
            pass  # the write already failed (the caller raises that); what was buffered is not kept
        finally:
            self.partial.unlink(missing_ok=True)

    def commit(self, sync: bool = True) -> None:
        """Flush, sync and rename the partial file over the target (atomic on one file system).
        ``sync=False`` skips the fsync, for files a crash may lose (a cache that recomputes what it
        cannot read): the rename is still atomic for every reader."""
        self._fh.flush()
        if sync:
            os.fsync(self._fh.fileno())
        self.close()
        os.replace(self.partial, self.path)
        self.committed = True


def write_atomically(path: str | os.PathLike, write, sync: bool = True) -> None:
    """``write(fh)`` into an :class:`AtomicFile` beside ``path`` (binary), then renamed over ``path``:
    readers see the old file or the whole new one, two writers never share a temporary file, and a
    planted link at a temporary name is never followed (the names are random, created exclusively).
    A write that fails removes its temporary file and raises. ``sync=False``: no fsync (a file a crash
    may lose)."""
    out = AtomicFile(path, "wb")
    try:
        write(out)
        out.commit(sync=sync)
    finally:
        if not out.committed:
            out.discard()


def write_bytes_atomically(path: str | os.PathLike, data: bytes, sync: bool = True) -> None:
    """``path`` holds either its old content or ``data``, never a part (:func:`write_atomically`)."""
    write_atomically(path, lambda fh: fh.write(data), sync=sync)


# ---- one writer per output -------------------------------------------------------------------
class LockBusyError(OSError):
    """Another process holds the lock; ``holder`` is what it recorded (pid, host, start time)."""

    def __init__(self, message: str, holder: dict):
        super().__init__(message)
        self.holder = holder


def read_lock_holder(path: str | os.PathLike) -> dict:
    """What the holder of a lock file recorded (``{}`` when unreadable, a link or not JSON)."""
    import json

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        return json.loads(os.read(fd, 4096) or b"{}")
    except ValueError:
        return {}
    finally:
        os.close(fd)


class ExclusiveLock:
    """An advisory ``flock`` on a lock file, held for a run's life (a context manager).

    The file is opened with ``O_NOFOLLOW`` (a planted link is refused with ``ELOOP``, never written
    through) and records the holder's pid, host and start time, for the message a second process
    prints. The kernel drops a ``flock`` when its process dies, however it dies, so a file left by
    a killed run is simply taken over (:attr:`took_over` holds what that run recorded).
    :meth:`acquire` raises :class:`LockBusyError` when another process holds the lock.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd: int | None = None
        self.took_over: dict | None = None

    def try_acquire(self) -> bool:
        """Take the lock if it is free (True), else False; ``OSError`` when the file cannot be opened."""
        import fcntl
        import json
        import socket
        import time

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        try:  # the holder may have removed the file between our open and our flock: retry on the new one
            same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return self.try_acquire()
        previous = os.read(fd, 4096)
        if previous.strip():
            try:
                self.took_over = json.loads(previous)
            except ValueError:
                self.took_over = {}
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(me).encode())
        os.fsync(fd)
        self._fd = fd
        return True

    def acquire(self) -> "ExclusiveLock":
        if not self.try_acquire():
            holder = read_lock_holder(self.path)
            raise LockBusyError(f"'{self.path}' is held by PID {holder.get('pid', '?')}.", holder)
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        try:
            self.path.unlink(missing_ok=True)  # still ours: nobody else can hold it while we do
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "ExclusiveLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def output_lock(path: str | os.PathLike) -> ExclusiveLock:
    """The lock of one output file (``OUT.lock`` beside ``OUT``): one run writes ``OUT`` at a time."""
    path = Path(path)
    return ExclusiveLock(path.with_name(path.name + ".lock"))


# ---- results root ----------------------------------------------------------------------------
class OutsideRootError(ValueError):
    """A path under a results root is a symbolic link or resolves outside the root."""


def inside_results_root(root: str | os.PathLike, *parts: str | os.PathLike) -> Path:
    """``root/parts...`` when no component below ``root`` is a symbolic link and the whole path
    resolves inside the root; raises :class:`OutsideRootError` otherwise. The path need not exist
    (its existing components are checked). The root itself is the caller's choice (a results folder
    on a linked scratch disk is fine). The one resolver of the precompute reader and writer and the
    dashboard: a results folder's contents can never point the server at other files."""
    root = Path(root)
    path = root
    for part in Path(*parts).parts if parts else ():
        if part in ("..", "") or Path(part).is_absolute():
            raise OutsideRootError(f"'{Path(*parts)}' leaves '{root}'.")
        path = path / part
        if path.is_symlink():
            raise OutsideRootError(f"'{path.relative_to(root)}' in '{root}' is a symbolic link.")
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        raise OutsideRootError(f"'{Path(*parts)}' resolves outside '{root}'.") from None
    return path
