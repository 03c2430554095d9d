"""The paper's overlapping k-mer tokenisation of the spike (Bonino 2025 (arXiv:2502.12033), case
study; the authors' released code) and token coordinates.

``seq2kmer``: right-pad with ``N`` to a multiple of K=12 (not of the stride), then 12-mers start at
0, 9, 18, ... while ``start <= len - 12``: the 3,822-nt spike -> 3,828 -> **425 k-mers**.
K-mers are upper case here (the paper lower-cased them; only the case convention differs).

Token numbering: position 0 is ``[CLS]``; k-mer token ``n`` (1-based) covers spike bases
``9(n-1) .. 9(n-1)+11`` (0-based; half-open span ``[9(n-1), 9(n-1)+12)``) = residues
``3n-2 .. 3n+1``, labelled ``"{3n-2}-{3n+1}"`` (1 -> "1-4", 71 -> "211-214", 425 -> "1273-1276");
then ``[SEP]`` and ``[PAD]`` up to 512.

What is tokenised: by default the *aligned* spike (:attr:`SpikeCut.aligned`, 3,822 characters, ``-``
for deletions, insertions left out), so token ``n`` always sits at the same reference coordinates
and attention maps of different genomes are comparable position by position. The paper instead fed
the spike with deletions removed and insertions kept (:meth:`SpikeCut.paper_sequence`); both go
through the same functions.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .reference import COARSE_DOMAINS, FINE_DOMAINS, PAPER_DOMAIN_TABLE, SPIKE_AA_LEN, SPIKE_LEN

K = 12
STRIDE = 9
MAX_LENGTH = 512  #: model input length: [CLS] + up to 510 k-mers + [SEP], padded
SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)
SPIKE_N_KMERS = 425  #: k-mers of a 3,822-nt spike

#: 16-symbol alphabet of aligned spikes; each base packs into 4 bits (12-mer -> 48-bit integer).
ALPHABET = "ACGTN-RYSWKMBDHV"
_LUT = np.full(256, ALPHABET.index("N"), dtype=np.int64)
for _i, _c in enumerate(ALPHABET):
    _LUT[ord(_c)] = _i
    _LUT[ord(_c.lower())] = _i


def n_kmers(length: int, k: int = K, stride: int = STRIDE) -> int:
    """Number of k-mers ``seq2kmer`` gives for a sequence of ``length`` characters."""
    padded = length + (-length) % k
    return 0 if padded < k else (padded - k) // stride + 1


def seq2kmer(seq: str, k: int = K, stride: int = STRIDE) -> list[str]:
    """Overlapping k-mers exactly as the paper: pad with N to a multiple of ``k``, stride ``stride``."""
    s = seq.upper()
    s += "N" * ((-len(s)) % k)
    return [s[i : i + k] for i in range(0, len(s) - k + 1, stride)]


def kmer_codes(seqs: Sequence[str] | np.ndarray, k: int = K, stride: int = STRIDE) -> np.ndarray:
    """Vectorised k-mers of equal-length sequences as int64 codes, shape ``(n_seqs, n_kmers)``.

    Each base is 4 bits of :data:`ALPHABET` (unknown characters count as N), so ``k <= 15``.
    """
    if k > 15:
        raise ValueError("k-mer codes pack 4 bits per base: k <= 15")
    if isinstance(seqs, np.ndarray) and seqs.dtype == np.uint8:
        arr = seqs
    else:
        if len(seqs) == 0:
            return np.zeros((0, 0), dtype=np.int64)
        lengths = {len(s) for s in seqs}
        if len(lengths) != 1:
            raise ValueError("kmer_codes needs sequences of equal length")
        arr = np.frombuffer("".join(seqs).encode("ascii", "replace"), dtype=np.uint8).reshape(len(seqs), -1)
    n, L = arr.shape
    pad = (-L) % k
    codes = _LUT[arr]
    if pad:
        codes = np.concatenate([codes, np.full((n, pad), ALPHABET.index("N"), dtype=np.int64)], axis=1)
    m = n_kmers(L, k, stride)
    starts = np.arange(m) * stride
    out = np.zeros((n, m), dtype=np.int64)
    for j in range(k):
        out = (out << 4) | codes[:, starts + j]
    return out


def _code_of(kmer: str) -> int:
    c = 0
    for ch in kmer:
        c = (c << 4) | int(_LUT[ord(ch) if ord(ch) < 256 else ord("N")])
    return c


class KmerVocab:
    """k-mer vocabulary: ids 0-4 are the special tokens, then the k-mers (sorted, deterministic).

    Saved as JSON (``save``/``load``), never pickled. ``encode`` follows the paper: k-mers ->
    ids (unknown -> ``[UNK]``), truncate to ``max_length - 2``, ``[CLS]`` ... ``[SEP]``, ``[PAD]``.
    """

    def __init__(self, kmers: Iterable[str], k: int = K, stride: int = STRIDE):
        self.k, self.stride = k, stride
        uniq = sorted({km.upper() for km in kmers} - set(SPECIAL_TOKENS))
        bad = [km for km in uniq if len(km) != k]
        if bad:
            raise ValueError(f"k-mer of wrong length in vocabulary: {bad[0]!r}")
        self.kmers: list[str] = uniq
        self.tokens: list[str] = list(SPECIAL_TOKENS) + uniq
        self._index = {t: i for i, t in enumerate(self.tokens)}
        if uniq and _is_plain(uniq):
            codes = kmer_codes(uniq, k, k)[:, 0]  # one k-mer per string: vectorised
        else:
            codes = np.array([_code_of(km) for km in uniq], dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        self._codes = codes[order]
        self._code_ids = (order + len(SPECIAL_TOKENS)).astype(np.int64)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, kmer: str) -> bool:
        return kmer.upper() in self._index

    def token_to_id(self, token: str) -> int:
        return self._index.get(token if token in SPECIAL_TOKENS else token.upper(), UNK_ID)

    def id_to_token(self, i: int) -> str:
        return self.tokens[i]

    @classmethod
    def build(cls, seqs: Iterable[str], min_count: int = 1, k: int = K, stride: int = STRIDE,
              batch: int = 4096) -> "KmerVocab":
        """Every k-mer occurring at least ``min_count`` times in ``seqs`` (paper: min_count 1).
        Equal-length batches (aligned spikes) are counted vectorised."""
        counts: Counter = Counter()
        code_counts: dict[int, int] = {}
        buf: list[str] = []

        def flush() -> None:
            if not buf:
                return
            by_len: dict[int, list[str]] = {}
            for s in buf:
                by_len.setdefault(len(s), []).append(s)
            for group in by_len.values():
                if _is_plain(group):
                    u, c = np.unique(kmer_codes(group, k, stride), return_counts=True)
                    for a, b in zip(u.tolist(), c.tolist()):
                        code_counts[a] = code_counts.get(a, 0) + b
                else:
                    for s in group:
                        counts.update(seq2kmer(s, k, stride))
            buf.clear()

        for s in seqs:
            buf.append(s)
            if len(buf) >= batch:
                flush()
        flush()
        for code, c in code_counts.items():
            counts[_decode(code, k)] += c
        return cls((km for km, c in counts.items() if c >= min_count), k, stride)

    # -- persistence (plain JSON) ------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        data = {"format": "bertgeom-kmer-vocab", "version": 1, "k": self.k, "stride": self.stride,
                "special_tokens": list(SPECIAL_TOKENS), "kmers": self.kmers}
        Path(path).write_text(json.dumps(data))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "KmerVocab":
        data = json.loads(Path(path).read_text())
        if data.get("format") != "bertgeom-kmer-vocab" or list(data.get("special_tokens", [])) != list(SPECIAL_TOKENS):
            raise ValueError(f"{path} is not a bertgeom k-mer vocabulary")
        return cls(data["kmers"], int(data["k"]), int(data["stride"]))

    # -- encoding ----------------------------------------------------------------------------
    def lookup_codes(self, codes: np.ndarray) -> np.ndarray:
        """Vectorised k-mer codes -> ids (``[UNK]`` when absent)."""
        if len(self._codes) == 0:
            return np.full(codes.shape, UNK_ID, dtype=np.int64)
        pos = np.searchsorted(self._codes, codes)
        pos = np.minimum(pos, len(self._codes) - 1)
        hit = self._codes[pos] == codes
        return np.where(hit, self._code_ids[pos], UNK_ID)

    def encode(self, seq: str, max_length: int | None = MAX_LENGTH,
               add_special_tokens: bool = True) -> tuple[np.ndarray, float]:
        """One sequence -> ``(ids, unk_rate)``; ``unk_rate`` = share of its k-mers unknown to the vocab.
        With ``max_length`` the ids are truncated/padded to exactly that length (paper: 512)."""
        ids, unk = self.encode_batch([seq], max_length, add_special_tokens)
        return ids[0], float(unk[0])

    def encode_batch(self, seqs: Sequence[str], max_length: int | None = MAX_LENGTH,
                     add_special_tokens: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Many sequences -> ``(ids (n, L) int64, unk_rate (n,))``; vectorised for equal lengths.
        ``attention_mask = ids != PAD_ID``. Without ``max_length`` the batch is padded to the
        longest sequence."""
        if len(seqs) == 0:
            return np.zeros((0, max_length or 0), dtype=np.int64), np.zeros(0)
        if len({len(s) for s in seqs}) == 1 and _is_plain(seqs):
            kid = self.lookup_codes(kmer_codes(seqs, self.k, self.stride))
            rows = list(kid)
        else:
            rows = [np.array([self.token_to_id(km) for km in seq2kmer(s, self.k, self.stride)], dtype=np.int64)
                    for s in seqs]
        unk = np.array([(r == UNK_ID).mean() if len(r) else 0.0 for r in rows])
        extra = 2 if add_special_tokens else 0
        limit = None if max_length is None else max_length - extra
        rows = [r[:limit] if limit is not None else r for r in rows]
        width = max_length if max_length is not None else max(len(r) for r in rows) + extra
        out = np.full((len(rows), width), PAD_ID, dtype=np.int64)
        for i, r in enumerate(rows):
            if add_special_tokens:
                out[i, 0] = CLS_ID
                out[i, 1 : 1 + len(r)] = r
                out[i, 1 + len(r)] = SEP_ID
            else:
                out[i, : len(r)] = r
        return out, unk

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[int(i)] for i in ids]

    # -- what generic code reads of any model's tokenizer (bertgeom.tokens.Tokenizer) -----------------
    cls_token_id = CLS_ID
    sep_token_id = SEP_ID
    unk_token_id = UNK_ID
    pad_token_id = PAD_ID

    @property
    def all_special_ids(self) -> list[int]:
        return list(range(len(SPECIAL_TOKENS)))

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Token strings of ``ids`` (:meth:`decode`, under the name Hugging Face tokenizers use)."""
        return self.decode(ids)


_DROP_ALPHABET = str.maketrans("", "", ALPHABET + ALPHABET.lower())


def _is_plain(seqs: Sequence[str]) -> bool:
    """True when every character is in :data:`ALPHABET` (upper or lower case), so codes are exact
    (what is left after deleting those letters is empty: no set of every letter is built)."""
    return all(not s.translate(_DROP_ALPHABET) for s in seqs)


def _decode(code: int, k: int) -> str:
    out = []
    for _ in range(k):
        out.append(ALPHABET[code & 15])
        code >>= 4
    return "".join(reversed(out))


# --------------------------------------------------------------------------------------------
# Token coordinates
# --------------------------------------------------------------------------------------------


def token_nt_span(n: int) -> tuple[int, int]:
    """Spike bases of k-mer token ``n`` (1-based): 0-based half-open ``(9(n-1), 9(n-1)+12)``."""
    s = STRIDE * (n - 1)
    return s, s + K


def token_aa_range(n: int) -> tuple[int, int]:
    """Residues (1-based, inclusive) labelling token ``n``: ``(3n-2, 3n+1)``."""
    return 3 * n - 2, 3 * n + 1


def token_aa_label(n: int) -> str:
    """``"{3n-2}-{3n+1}"``: the paper's axis label of k-mer token ``n``."""
    a, b = token_aa_range(n)
    return f"{a}-{b}"


def _token_domain(n: int, domains) -> str:
    a, b = token_aa_range(n)
    votes: Counter = Counter()
    for aa in range(a, min(b, SPIKE_AA_LEN) + 1):
        for d in domains:
            if d.start <= aa <= d.end:
                votes[d.name] += 1
                break
    if not votes:
        return ""
    top = max(votes.values())
    for aa in range(a, min(b, SPIKE_AA_LEN) + 1):  # ties -> the N-terminal domain
        for d in domains:
            if d.start <= aa <= d.end and votes[d.name] == top:
                return d.name
    return ""  # pragma: no cover


@dataclass(frozen=True)
class TokenAxis:
    """Per-position coordinates of a tokenised spike, as parallel arrays (plot axes, tables).

    Positions are model input positions (0 = ``[CLS]``). For special positions ``token`` is 0,
    spans are -1 and ``domain`` is "". ``label`` is the paper's tick label (``"[CLS]"``, ``"1-4"``,
    ..., ``"[SEP]"``, ``"[PAD]"``).
    """

    token: np.ndarray  # k-mer number n (1-based), 0 for special positions
    label: np.ndarray  # str labels
    nt_start: np.ndarray  # 0-based spike base, inclusive
    nt_end: np.ndarray  # 0-based, exclusive
    aa_start: np.ndarray  # 1-based residue, inclusive
    aa_end: np.ndarray  # 1-based residue, inclusive
    domain: np.ndarray  # fine domain (majority of the token's residues)
    coarse_domain: np.ndarray  # SP / S1 / S2
    is_special: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.token)


def token_axis(n_tokens: int = SPIKE_N_KMERS, with_special: bool = True, total_length: int | None = None,
               paper_labels: bool = False) -> TokenAxis:
    """Coordinates of ``[CLS]`` + ``n_tokens`` k-mers + ``[SEP]`` (+ ``[PAD]`` to ``total_length``).

    ``paper_labels=True`` labels the [SEP]/[PAD] positions with residue ranges as the paper's code did.
    The axis depends on these arguments only, so it is built once per process and shared, its arrays
    read-only (building it looked up the domain of every token: ~18 ms, paid by every genome encoded).
    """
    return _token_axis(int(n_tokens), bool(with_special), None if total_length is None else int(total_length),
                       bool(paper_labels))


@lru_cache(maxsize=64)
def _token_axis(n_tokens: int, with_special: bool, total_length: int | None, paper_labels: bool) -> TokenAxis:
    toks: list[int] = list(range(1, n_tokens + 1))
    specials: list[str | None] = [None] * n_tokens
    if with_special:
        toks = [0] + toks + [0]
        specials = ["[CLS]"] + specials + ["[SEP]"]
        if total_length is not None and total_length > len(toks):
            specials += ["[PAD]"] * (total_length - len(toks))
            toks += [0] * (total_length - len(toks))
    label, ns, ne, as_, ae, dom, coarse = [], [], [], [], [], [], []
    for pos, (t, sp) in enumerate(zip(toks, specials)):
        if sp is None:
            a, b = token_aa_range(t)
            s, e = token_nt_span(t)
            label.append(token_aa_label(t))
            ns.append(s), ne.append(e), as_.append(a), ae.append(b)
            dom.append(_token_domain(t, FINE_DOMAINS)), coarse.append(_token_domain(t, COARSE_DOMAINS))
        else:
            label.append(token_aa_label(pos) if (paper_labels and sp != "[CLS]") else sp)
            ns.append(-1), ne.append(-1), as_.append(-1), ae.append(-1), dom.append(""), coarse.append("")
    axis = TokenAxis(np.array(toks), np.array(label, dtype=object), np.array(ns), np.array(ne), np.array(as_),
                     np.array(ae), np.array(dom, dtype=object), np.array(coarse, dtype=object),
                     np.array([s is not None for s in specials]))
    for arr in vars(axis).values():  # shared by every caller: never written to
        arr.setflags(write=False)
    return axis


def domain_token_ranges(fixed: bool = True) -> dict[str, tuple[int, int]]:
    """First and last k-mer token (1-based) of each spike domain, by the paper's rule: the first
    token whose window holds the domain's first base and the last token whose window holds its
    last base.

    ``fixed=False`` reproduces the paper exactly (its table, last base ``3(b-1)-1``: one codon
    short); ``fixed=True`` (default) uses the last base ``3b-1`` and the corrected table of
    :data:`~bertgeom.sars_cov_2.genome.reference.FINE_DOMAINS` (TM 1214-1237, CT 1238-1273).
    """
    if fixed:
        fine = {d.name: (d.start, d.end) for d in FINE_DOMAINS}
        coarse = {d.name: (d.start, d.end) for d in COARSE_DOMAINS}
        table = [(n, *(coarse.get(n) or fine[n])) for n, _, _ in PAPER_DOMAIN_TABLE]
    else:
        table = list(PAPER_DOMAIN_TABLE)
    out = {}
    last_token = n_kmers(SPIKE_LEN)
    for name, a, b in table:
        start_base = 3 * (a - 1)
        end_base = 3 * b - 1 if fixed else 3 * (b - 1) - 1
        first = max(1, -(-(start_base - K + 1) // STRIDE) + 1)  # smallest n with 9(n-1)+11 >= start
        last = min(last_token, end_base // STRIDE + 1)  # largest n with 9(n-1) <= end
        out[name] = (first, last)
    return out
