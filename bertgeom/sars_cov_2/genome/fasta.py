"""Parsing of user input: pasted text, uploaded files, and large FASTA files streamed from disk.

Accepted: FASTA / multi-FASTA, a bare sequence without header, GenBank-style numbered sequence
blocks (``     1 attaaaggtt tatacctt ...``, with or without the ``ORIGIN`` / ``//`` lines), any mix
of ``\\n``, ``\\r\\n`` and ``\\r`` line endings, lower case, RNA (``U`` is read as ``T``) and gzip/xz
compressed bytes. The output alphabet is upper case ``ACGTN`` plus the IUPAC ambiguity codes
``RYSWKMBDHV``; alignment gap characters ``-`` and ``.`` are *removed* (the sequence is re-aligned
to the reference anyway) and a note says so. ``X`` is read as ``N`` (with a note) in sequences that
are otherwise clearly nucleotides.

Everything is linear-time (``str.translate`` / counting, no backtracking regular expressions) and
size-bounded, so arbitrary input cannot make the parser slow or exhaust memory.
"""

from __future__ import annotations

import bisect
import bz2
import io
import lzma
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: Largest pasted/uploaded input accepted by :func:`parse_sequences` (after decompression).
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: Largest single record accepted (SARS-CoV-2 is ~30 kb; 1 Mb leaves room for odd input).
MAX_RECORD_LEN = 1_000_000
#: A record is called protein when fewer than this share of its letters are A/C/G/T/U/N.
MIN_NUCLEOTIDE_SHARE = 0.75

_NUC_LETTERS = frozenset("ACGTUN")
_VALID = frozenset("ACGTNRYSWKMBDHV")
_PROTEIN_ALPHABET = frozenset("ACDEFGHIKLMNPQRSTVWYBXZJUO*")
_WS_TABLE = str.maketrans("", "", " \t\n\r\v\f\xa0\u2009\u200b\ufeff")
_DIGIT_TABLE = str.maketrans("", "", "0123456789")
_COMMON_TABLE = str.maketrans("", "", "ACGTN")


class SequenceInputError(ValueError):
    """The input cannot be read as a nucleotide sequence; ``str(err)`` is one user-facing sentence."""


@dataclass
class SequenceRecord:
    """One input sequence: ``sequence`` is cleaned upper-case IUPAC DNA, ``notes`` say what was changed."""

    name: str
    sequence: str
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sequence)


@dataclass
class RecordError:
    """A record of a streamed file that could not be read (yielded instead of raising)."""

    name: str
    index: int  # 0-based position of the record in the file
    message: str
    stream_error: bool = False  #: the file itself could not be read further (truncated, corrupt)
    warning: bool = False  #: not a record: unreadable bytes after the last complete member were ignored
    #: a record over the length limit (its letters are not read): a sequence, unlike binary junk
    too_long: bool = False
    #: with ``stream_error`` on damaged data: how many records yielded just before this one came
    #: from data no check confirmed (a caller keeps none of them)
    unverified: int = 0

    ok = False


SequenceRecord.ok = True  # type: ignore[attr-defined]  # lets callers test ``rec.ok`` on both kinds


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _looks_like_prose(raw: str) -> bool:
    """Words rather than sequence: at least three space-separated words of letters, some lower-case,
    most short (a median of 8 letters or fewer). Sequence lines are long, and GenBank's ``ORIGIN``
    blocks are ten letters each, so neither counts; English pasted into a genome box does."""
    words = [w.strip(".,;:!?'\"()") for w in raw.split()]
    words = [w for w in words if w.isalpha()]
    if len(words) < 3 or not any(w != w.upper() for w in words):
        return False
    return sorted(len(w) for w in words)[len(words) // 2] <= 8


def clean_sequence(raw: str, name: str = "sequence", max_len: int = MAX_RECORD_LEN) -> tuple[str, list[str]]:
    """Clean the sequence lines of one record: drop whitespace and digits, upper-case, U->T, remove
    gaps. Returns ``(sequence, notes)``; raises :class:`SequenceInputError` for non-nucleotide text."""
    notes: list[str] = []
    s = raw.translate(_WS_TABLE)
    no_digits = s.translate(_DIGIT_TABLE)
    if len(no_digits) < len(s):
        notes.append("digits (line numbers) were removed")
    s = no_digits.upper()
    if s.endswith("//"):  # GenBank record terminator
        s = s[:-2]
    n_gap = s.count("-") + s.count(".")
    if n_gap:
        s = s.replace("-", "").replace(".", "")
        notes.append(f"{_plural(n_gap, 'alignment gap character')} ('-' or '.') removed")
    if s.endswith("*"):  # a trailing stop symbol, as some tools write
        s = s.rstrip("*")
        notes.append("a trailing '*' was removed")
    if not s:
        raise SequenceInputError(f"Record '{name}' contains no sequence.")
    if len(s) > max_len:
        raise SequenceInputError(f"Record '{name}' is {len(s):,} characters long, more than the limit of {max_len:,}.")
    # the letters used and how often, without hashing the 30,000 letters of a genome one by one: a
    # byte histogram for ASCII text, else A C G T N tested one by one and the rest as a set
    if s.isascii():
        tally = np.bincount(np.frombuffer(s.encode("ascii"), dtype=np.uint8), minlength=128)
        counts = {chr(c): int(tally[c]) for c in np.flatnonzero(tally).tolist()}
        distinct = set(counts)
    else:
        distinct = set(s.translate(_COMMON_TABLE)) | {c for c in "ACGTN" if c in s}
        counts = {c: s.count(c) for c in distinct} if len(distinct) <= 40 else {}
    if len(distinct) > 40:
        raise SequenceInputError(f"Record '{name}' is not a nucleotide sequence (it uses {len(distinct)} different "
                                 "characters).")
    nuc = sum(counts.get(c, 0) for c in _NUC_LETTERS)
    if nuc < MIN_NUCLEOTIDE_SHARE * len(s):
        if distinct <= _VALID | {"U", "X"}:  # every letter is a nucleotide code: ambiguity codes, not protein
            raise SequenceInputError(
                f"Record '{name}' is written mostly in IUPAC ambiguity codes (R, Y, K, M...): only "
                f"{nuc / len(s):.0%} of its letters are A/C/G/T/U/N, too few to read its variant."
            )
        if _looks_like_prose(raw):
            raise SequenceInputError(
                f"Record '{name}' looks like ordinary text (words, not sequence letters); paste a genome or spike "
                "nucleotide sequence (A/C/G/T), or pick an English model in the sidebar to analyse a sentence."
            )
        if len(s) >= 20 and distinct <= _PROTEIN_ALPHABET:
            raise SequenceInputError(
                f"Record '{name}' looks like a protein sequence; paste the nucleotide (A/C/G/T) sequence instead."
            )
        bad = next((c for c in s if c not in _VALID), None)
        what = f", for example {_describe(bad)}" if bad is not None else ""
        raise SequenceInputError(f"Record '{name}' is not a nucleotide sequence (too few A/C/G/T letters{what}).")
    if counts.get("U"):
        notes.append("RNA input: U read as T" if not counts.get("T") else f"{_plural(counts['U'], 'U')} read as T")
        s = s.replace("U", "T")
    if counts.get("X"):
        notes.append(f"{_plural(counts['X'], 'X')} read as N")
        s = s.replace("X", "N")
    if not _VALID.issuperset({"T" if c == "U" else "N" if c == "X" else c for c in distinct}):  # = set(s)
        bad = next(c for c in s if c not in _VALID)
        raise SequenceInputError(f"Record '{name}' contains {_describe(bad)}, which is not a nucleotide (IUPAC) code.")
    n_amb = len(s) - sum(counts.get(c, 0) for c in "ACGTUNX")
    if n_amb:
        notes.append(f"{_plural(n_amb, 'IUPAC ambiguity code')} kept")
    return s, notes


def _clean_name(header: str, fallback: str) -> str:
    """A printable record name from a header line (control characters replaced, length capped)."""
    name = "".join(c if c.isprintable() else "?" for c in header.strip()[:500])
    return name or fallback


def _describe(ch: str) -> str:
    if ch.isprintable() and not ch.isspace():
        return f"the character '{ch}'"
    return f"the non-printable character U+{ord(ch):04X}"


class ReadRecords(list):
    """The records of :func:`parse_sequences`, with ``notice``: one sentence on what of the input
    was not records (unreadable bytes after the last complete compressed member), else empty."""

    notice: str = ""


def trailing_notice(n_bytes: int | None = None) -> str:
    """The one sentence, on the web and in the CLI, for unreadable data after a complete member."""
    size = f"{n_bytes:,} bytes of " if n_bytes else ""
    return (f"The compressed file ends with {size}unreadable data after its last complete block; it was "
            "ignored, and every record before it was read.")


class TruncatedInputError(SequenceInputError):
    """A compressed input ended before its end-of-stream marker. ``records`` holds the records read
    intact before the one where reading stopped (``stopped_in``, or ``None`` before the first header)."""

    def __init__(self, message: str, records: list | None = None, stopped_in: str | None = None):
        super().__init__(message)
        self.records = records or []
        self.stopped_in = stopped_in


def _decompress_members(data: bytes, limit: int, make, magic: bytes) -> tuple[bytes, bool, int]:
    """Every member/stream of a gzip, xz or bz2 byte string (concatenated members, BGZF blocks and
    multi-stream xz included), at most ``limit + 1`` output bytes; ``truncated`` is True when the
    input ends inside a member; the last value counts unreadable bytes after the last member."""
    out = bytearray()
    rest = data
    while rest:
        d = make()
        chunk = d.decompress(rest, max(limit + 1 - len(out), 1))
        out += chunk
        if len(out) > limit:
            return bytes(out), False, 0
        if not d.eof:
            if getattr(d, "needs_input", True) or not d.unconsumed_tail:
                return bytes(out), True, 0
        rest = d.unused_data
        rest = rest.lstrip(b"\x00")  # xz stream padding, zero-filled tails
        if rest and not rest.startswith(magic):
            return bytes(out), False, len(rest)  # kept, with a notice (as the CLI's streaming reader)
    return bytes(out), False, 0


def _maybe_decompress(data: bytes, limit: int) -> tuple[bytes, bool, int]:
    """Decompress gzip/xz/bz2 bytes (bounded by ``limit`` output bytes; every member read); other bytes
    pass through. Returns ``(bytes, truncated)``."""
    try:
        if data[:2] == b"\x1f\x8b":
            out, truncated, trailing = _decompress_members(data, limit, lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
                                                 b"\x1f\x8b")
        elif data[:6] == b"\xfd7zXZ\x00":
            out, truncated, trailing = _decompress_members(data, limit, lzma.LZMADecompressor, b"\xfd7zXZ\x00")
        elif data[:3] == b"BZh":
            out, truncated, trailing = _decompress_members(data, limit, bz2.BZ2Decompressor, b"BZh")
        else:
            return data, False, 0
    except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError) as exc:
        if isinstance(exc, SequenceInputError):
            raise
        raise SequenceInputError(f"The compressed input could not be decompressed ({exc}).") from None
    if len(out) > limit:
        raise SequenceInputError(f"The decompressed input is larger than the limit of {limit:,} bytes.")
    return out, truncated, trailing


def _binary_start(data: str | bytes) -> bool:
    """Whether input is binary: a NUL in its first line (its first 64 kB), the rule of the CLI's
    streaming reader (:func:`iter_fasta_file`). A NUL further on is a bad character of one record
    (replaced in a header, refused in a sequence), so one damaged header does not make a whole
    upload "binary" on the web while the CLI reads the rest."""
    nul, newline = ("\x00", "\n") if isinstance(data, str) else (b"\x00", b"\n")
    first = data[: 1 << 16].split(newline, 1)[0]
    return nul in first


def _to_text(data: str | bytes, max_bytes: int) -> tuple[str, bool, int]:
    """``(text, truncated, trailing)``: decoded, decompressed text, whether a compressed stream ended
    early, and how many unreadable bytes followed its last complete member."""
    truncated, trailing = False, 0
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        if len(data) > max_bytes:
            raise SequenceInputError(f"The input is larger than the limit of {max_bytes:,} bytes.")
        data, truncated, trailing = _maybe_decompress(data, max_bytes)
        if truncated:
            data = data.decode("utf-8", errors="ignore").encode("utf-8")  # a multi-byte character may be cut
        if _binary_start(data):
            raise SequenceInputError("The input is binary data, not a text FASTA file or sequence.")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise SequenceInputError("The input is binary (not UTF-8 text), not a FASTA file or sequence.") from None
    elif isinstance(data, str):
        text = data
        if len(text) > max_bytes:
            raise SequenceInputError(f"The input is larger than the limit of {max_bytes:,} characters.")
        if text.startswith("\ufeff"):
            text = text[1:]
    else:
        raise SequenceInputError("The input must be text or bytes.")
    if _binary_start(text):
        raise SequenceInputError("The input is binary data, not a text FASTA file or sequence.")
    return text.replace("\r\n", "\n").replace("\r", "\n"), truncated, trailing


def _genbank_origin(lines: list[str]) -> tuple[str, list[str]] | None:
    """If the text is a GenBank flat file, return (name, sequence lines after ORIGIN)."""
    start = next((i for i, ln in enumerate(lines) if ln.startswith("ORIGIN")), None)
    if start is None or not any(ln.startswith("LOCUS") for ln in lines[:start]):
        return None
    locus = next(ln for ln in lines[:start] if ln.startswith("LOCUS"))
    parts = locus.split()
    name = parts[1] if len(parts) > 1 else "genbank_record"
    for ln in lines[:start]:
        if ln.startswith("ACCESSION") and len(ln.split()) > 1:
            name = ln.split()[1]
        if ln.startswith("VERSION") and len(ln.split()) > 1:
            name = ln.split()[1]
    body = []
    for ln in lines[start + 1 :]:
        if ln.startswith("//"):
            break
        body.append(ln)
    return name, body


def parse_sequences(data: str | bytes, max_bytes: int = MAX_INPUT_BYTES, max_records: int = 100_000,
                    tolerant: bool = False) -> list[SequenceRecord]:
    """Parse pasted or uploaded input into cleaned records.

    Raises :class:`SequenceInputError` (one sentence) for empty input, binary content, input over
    ``max_bytes``, protein or other non-nucleotide text, or a record without sequence; and
    :class:`TruncatedInputError` (with the records read intact) when a compressed input ends early.
    With ``tolerant`` a bad *record* becomes a :class:`RecordError` in its place (for batch tables)
    instead of failing the whole input; errors of the input as a whole still raise.
    """
    text, truncated, trailing = _to_text(data, max_bytes)
    if trailing:
        records = ReadRecords(parse_sequences(text, max_bytes, max_records, tolerant))
        records.notice = trailing_notice(trailing)
        return records
    if truncated:
        return _truncated(text, max_bytes, max_records)
    if not text.strip():
        raise SequenceInputError("The input is empty: paste a nucleotide sequence or a FASTA file.")
    lines = text.split("\n")
    gb = _genbank_origin(lines) if "ORIGIN" in text else None
    if gb is not None:
        name, body = gb
        seq, notes = clean_sequence("\n".join(body), name)
        return [SequenceRecord(name, seq, ["GenBank flat file: the ORIGIN sequence was read", *notes])]

    records: list[SequenceRecord] = []
    name: str | None = None
    chunk: list[str] = []
    n_unnamed = 0

    def flush() -> None:
        nonlocal n_unnamed
        if name is None:
            if not "".join(chunk).strip():
                return
            n_unnamed += 1
            rec_name = "sequence" if n_unnamed == 1 else f"sequence_{n_unnamed}"
            first_note = ["no FASTA header: read as a bare sequence"]
        else:
            rec_name = name
            first_note = []
        if len(records) >= max_records:
            raise SequenceInputError(f"The input holds more than {max_records:,} records, the limit.")
        try:
            seq, notes = clean_sequence("\n".join(chunk), rec_name)
        except SequenceInputError as exc:
            if not tolerant:
                raise
            records.append(RecordError(rec_name, len(records), str(exc)))
            return
        records.append(SequenceRecord(rec_name, seq, first_note + notes))

    for line in lines:
        if line.startswith(">"):
            flush()
            name = _clean_name(line[1:], f"unnamed_{len(records) + 1}")
            chunk = []
        elif line.startswith(";"):  # old-style FASTA comment
            continue
        else:
            chunk.append(line)
    flush()
    if not records:
        raise SequenceInputError("The input is empty: paste a nucleotide sequence or a FASTA file.")
    return records


def _truncated(text: str, max_bytes: int, max_records: int):
    """Raise :class:`TruncatedInputError` naming the record where a cut compressed stream stopped."""
    idx = text.rfind("\n>")
    cut = idx + 1 if idx >= 0 else 0
    head, last = text[:cut], text[cut:]
    stopped_in = _clean_name(last[1:].split("\n", 1)[0], "unnamed") if last.startswith(">") else None
    records = parse_sequences(head, max_bytes, max_records) if head.strip() else []
    where = f"inside record '{stopped_in}'" if stopped_in else "before the first complete record"
    raise TruncatedInputError(
        f"The compressed input is truncated: reading stopped {where}; "
        f"{_plural(len(records), 'record')} before it were read intact.", records, stopped_in)


def parse_single(data: str | bytes, max_bytes: int = MAX_INPUT_BYTES) -> SequenceRecord:
    """Parse input expected to hold exactly one sequence (extra records raise)."""
    recs = parse_sequences(data, max_bytes=max_bytes)
    if len(recs) != 1:
        raise SequenceInputError(f"Expected one sequence but the input holds {len(recs)} records.")
    return recs[0]


class _DamagedStream(Exception):
    """A compressed member failed its check (CRC) or its data cannot be decoded."""


class _TrailingData(Exception):
    """Bytes that are not a compressed member follow the last complete one (``n_bytes`` of them)."""

    def __init__(self, n_bytes: int):
        super().__init__(n_bytes)
        self.n_bytes = n_bytes


class _CheckedStream(io.RawIOBase):
    """The decompressed bytes of a gzip, xz or bz2 file, read member by member (concatenated
    members, BGZF blocks, multi-stream xz), with :attr:`verified`: how many output bytes lie in
    members whose check has passed. The decompressor verifies a member's check (gzip's CRC-32 and
    length, xz's check, bz2's CRCs) only at the member's end, so bytes after :attr:`verified` may
    come from damaged data. Raises ``EOFError`` when the file ends inside a member,
    :class:`_DamagedStream` on a failed check or undecodable data, :class:`_TrailingData` for
    unreadable bytes after the last complete member. Output per call is bounded (a bomb is read in
    small pieces)."""

    _CHUNK = 1 << 16

    def __init__(self, fh, make, magic: bytes):
        self._fh, self._make, self._magic = fh, make, magic
        self._d = None  # None: between members
        self._rest = b""
        self._eof = False  # the underlying file is exhausted
        self.out = 0
        self.verified = 0
        self._ended_early = False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            self._fh.close()
        finally:
            super().close()

    def _fill(self) -> bool:
        """Read more of the file into ``_rest``; False at its end."""
        if self._eof:
            return False
        data = self._fh.read(self._CHUNK)
        if not data:
            self._eof = True
            return False
        self._rest += data
        return True

    def _next_member(self) -> bool:
        """Start the next member; False when the file ends cleanly."""
        while True:
            self._rest = self._rest.lstrip(b"\x00")  # xz stream padding, zero-filled tails
            if len(self._rest) >= len(self._magic) or not self._fill():
                break
        if not self._rest:
            return False
        if not self._rest.startswith(self._magic):
            n = len(self._rest)
            while self._fill():
                n = len(self._rest)
            raise _TrailingData(n)
        self._d = self._make()
        return True

    def _cut(self) -> int:
        """The file ends inside a member: the first time, an end of data (0), so a reader's ``readline``
        hands over the partial line it holds (a header cut in the middle is still seen); then ``EOFError``."""
        if not self._ended_early:
            self._ended_early = True
            return 0
        raise EOFError("the compressed file ends inside a member")

    def readinto(self, buf) -> int:
        want = len(buf)
        while True:
            if self._d is None and not self._next_member():
                return 0
            d = self._d
            try:
                if hasattr(d, "unconsumed_tail"):  # zlib: unread input comes back in unconsumed_tail
                    if not self._rest and not self._fill():
                        return self._cut()
                    chunk = d.decompress(self._rest, want)
                    self._rest = d.unconsumed_tail if not d.eof else b""  # at the end, unused_data has it all
                else:  # lzma, bz2: input is buffered inside; feed only when it asks
                    feed = b""
                    if d.needs_input:
                        if not self._rest and not self._fill():
                            return self._cut()
                        feed, self._rest = self._rest, b""
                    chunk = d.decompress(feed, want)
            except (zlib.error, lzma.LZMAError, OSError) as exc:
                raise _DamagedStream(str(exc)) from None
            self.out += len(chunk)
            if d.eof:
                self._rest = d.unused_data + self._rest
                self.verified = self.out
                self._d = None
            if chunk:
                buf[: len(chunk)] = chunk
                return len(chunk)


def _open_binary(path: str | os.PathLike) -> io.BufferedIOBase:
    """A binary reader of ``path``, decompressed (a :class:`_CheckedStream`) when its magic bytes
    say gzip, xz or bz2."""
    p = Path(path)
    fh = open(p, "rb")  # noqa: SIM115 - owned by the returned reader
    magic = fh.read(6)
    fh.seek(0)
    if magic[:2] == b"\x1f\x8b":
        make, mark = (lambda: zlib.decompressobj(16 + zlib.MAX_WBITS)), b"\x1f\x8b"
    elif magic == b"\xfd7zXZ\x00":
        make, mark = lzma.LZMADecompressor, b"\xfd7zXZ\x00"
    elif magic[:3] == b"BZh":
        make, mark = bz2.BZ2Decompressor, b"BZh"
    else:
        return fh
    return io.BufferedReader(_CheckedStream(fh, make, mark), buffer_size=1 << 16)


def _text_lines(raw, limit: int) -> Iterator[tuple[str, int, int]]:
    """``(line, start, end)`` for every line of a binary reader, decoded as UTF-8 (bad bytes
    replaced, a leading BOM dropped), ``\\r\\n`` and ``\\r`` read as ``\\n`` (a line ends in
    ``\\n`` when complete; longer ones come in pieces of at most ``limit`` bytes). ``start`` and
    ``end`` are the line's byte offsets in the decompressed data, exact (no read-ahead), so a record
    can be told to lie in verified data or not."""
    pos = 0
    first = True
    while True:
        chunk = raw.readline(limit)
        if not chunk:
            raw.read(1)  # a compressed file that ended inside a member raises EOFError here (_CheckedStream._cut)
            return
        start, pos = pos, pos + len(chunk)
        if first:
            chunk = chunk.removeprefix(b"\xef\xbb\xbf")
            first = False
        text = chunk.decode("utf-8", errors="replace")
        if "\r" not in text:
            yield text, start, pos
            continue
        pieces = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for piece in pieces[:-1]:
            yield piece + "\n", start, pos
        if pieces[-1]:
            yield pieces[-1], start, pos


#: Magic bytes of common non-FASTA files a user may give by mistake, and what to say.
_NOT_FASTA = ((b"PK\x03\x04", "a zip archive: unzip it and give the FASTA file inside"),
              (b"PK\x05\x06", "an empty zip archive"),
              (b"\x89PNG", "a PNG image"), (b"%PDF", "a PDF document"),
              (b"\x28\xb5\x2f\xfd", "a Zstandard-compressed file: decompress it first (zstd -d)"))


def iter_fasta_file(path: str | os.PathLike, max_record_len: int = MAX_RECORD_LEN,
                    on_notice=None) -> Iterator[SequenceRecord | RecordError]:
    """Stream the records of a (multi-)FASTA file: plain, ``.gz``, ``.xz`` or ``.bz2`` (detected from
    the magic bytes). Memory stays bounded by ``max_record_len``: millions of genomes are fine.

    Yields a :class:`SequenceRecord` per good record and a :class:`RecordError` per bad one (too long,
    protein, binary junk, empty...). Text before the first header is read as a headerless record.
    Unreadable bytes after the last complete gzip member end the stream with every record kept and
    :func:`trailing_notice`, passed to ``on_notice`` (else yielded as a ``RecordError`` with ``warning``).

    Every read (a header, its continuation, a sequence line) goes through one handler: a file that
    cannot be read further ends the stream with a ``RecordError`` with ``stream_error``. A truncated
    file keeps the records before the cut. A *damaged* one (a failed check, undecodable data) gives
    ``unverified``: how many of the records just yielded were read from data no check has confirmed;
    a caller keeps none of them.
    """
    line_limit = 1 << 16
    with open(path, "rb") as probe:
        head = probe.read(8)
    for magic, what in _NOT_FASTA:
        if head.startswith(magic):
            yield RecordError("file", 0, f"The file is {what}, not a FASTA file.", stream_error=True)
            return
    with _open_binary(path) as raw:
        checked = getattr(raw, "raw", None)
        checked = checked if isinstance(checked, _CheckedStream) else None
        name: str | None = None
        parts: list[str] = []
        size = 0
        too_long = False
        index = 0
        started = False
        pending: list[int] = []  # where each record yielded from not yet verified data ends
        end = 0  # where the current record's last line ends

        def finish() -> SequenceRecord | RecordError | None:
            nonlocal index
            rec_name = name if name is not None else "sequence"
            if name is None and not too_long and not "".join(parts).strip():  # an over-long headerless line is a record
                return None
            i = index
            index += 1
            if checked is not None:
                pending.append(end)
            if too_long:
                return RecordError(rec_name, i, f"Record '{rec_name}' is longer than the limit of {max_record_len:,} "
                                   "characters.", too_long=True)
            try:
                seq, notes = clean_sequence("".join(parts), rec_name, max_record_len)
            except SequenceInputError as exc:
                return RecordError(rec_name, i, str(exc))
            if name is None:
                notes.insert(0, "no FASTA header: read as a bare sequence")
            return SequenceRecord(rec_name, seq, notes)

        def unverified() -> int:
            """Records yielded whose data no passed check covers yet (forgetting the covered ones)."""
            if checked is None:
                return 0
            covered = bisect.bisect_right(pending, checked.verified)  # ``pending`` only grows
            if covered:
                del pending[:covered]
            return len(pending)

        at_line_start = True
        try:
            lines = _text_lines(raw, line_limit)
            for line, _, line_end in lines:
                if not started and index == 0 and "\x00" in line:
                    yield RecordError("file", 0, "The file is binary data, not a text FASTA file.", stream_error=True)
                    return
                complete = line.endswith("\n")
                if at_line_start and line.startswith(">"):
                    if started or name is not None or parts:
                        out = finish()
                        if out is not None:
                            unverified()
                            yield out
                    header, end = line[1:], line_end
                    name = _clean_name(header, f"unnamed_{index + 1}")  # a file cut inside the header names it
                    parts, size, too_long, started = [], 0, False, True
                    while not complete:  # absurdly long header: keep its start only
                        more = next(lines, None)
                        if more is None:
                            break
                        more, _, end = more
                        complete = more.endswith("\n")
                        if len(header) < line_limit:
                            header += more
                    name = _clean_name(header, f"unnamed_{index + 1}")
                    parts, size, too_long, started = [], 0, False, True
                else:
                    if not too_long:
                        size += len(line)
                        if size > max_record_len * 2 + 1000:  # generous: lines carry whitespace/numbers
                            too_long, parts = True, []
                        else:
                            parts.append(line)
                    end = line_end
                at_line_start = complete
        except _TrailingData as exc:
            # bytes after the last complete member (not a damaged one): what was read is whole,
            # kept as on the web, with a notice
            out = finish() if (started or name is not None or parts) else None
            if out is not None:
                yield out
            if on_notice is not None:
                on_notice(trailing_notice(exc.n_bytes))
            else:
                yield RecordError(name or "sequence", index, trailing_notice(exc.n_bytes), warning=True)
            return
        except (EOFError, _DamagedStream, OSError) as exc:
            where = f"inside record '{name}'" if name is not None else "before the first record"
            if isinstance(exc, EOFError):
                message = (f"The compressed file ends early (truncated): reading stopped {where}; "
                           f"{_plural(index, 'record')} before it {'was' if index == 1 else 'were'} read.")
                dropped = 0
            elif checked is None:
                message = f"The file cannot be read further ({exc}): reading stopped {where}."
                dropped = 0
            else:
                dropped = unverified()
                kept = index - dropped
                detail = f" ({exc})" if str(exc) else ""
                message = (f"The compressed file is damaged{detail}: reading stopped {where}; "
                           + (f"the last {_plural(dropped, 'record')} read came from data whose check did not pass "
                              f"and {'is' if dropped == 1 else 'are'} not kept; " if dropped else "")
                           + f"{_plural(kept, 'record')} before {'them' if dropped else 'it'} "
                             f"{'was' if kept == 1 else 'were'} verified.")
            yield RecordError(name or "sequence", index, message, stream_error=True, unverified=dropped)
            return
        out = finish()
        if out is not None:
            yield out

