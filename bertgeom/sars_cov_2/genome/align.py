"""Alignment of a genome, a partial sequence or a spike-only sequence to MN908947.3 with minimap2.

The output is *reference-coordinate* text: one character per reference base, so every genome is
directly comparable position by position (and, for the spike, token by token):

* a query base aligned to the reference base (``A C G T N`` or an IUPAC ambiguity code);
* ``-`` where the query deletes the reference base;
* ``N`` where the query does not cover the reference (before/after it, or in an unaligned stretch).

Insertions are not written into the text (that would shift coordinates); they are recorded as
``(pos, bases)`` where ``pos`` is the genome 1-based position of the reference base *after which*
the bases are inserted (Nextclade's convention, e.g. Omicron BA.1 ``(22204, "GAGCCAGAA")`` = S:214:EPE).

This deviates from the paper (bwa mem on 150-nt chunks, deletions dropped, gaps filled from the
reference, Bonino 2025 (arXiv:2502.12033), case study; the authors' released code);
:meth:`SpikeCut.paper_sequence` rebuilds the paper's representation.

Aligner: ``mappy`` with the ``map-ont`` preset. Tested on the developer genomes: the ``asm*``
presets break alignments at every long N run (amplicon dropouts) and miss fragments shorter than
~200 nt, while ``map-ont`` keeps N runs inside one alignment, maps 60-nt fragments, and places an
indel in a repeat leftmost, as most aligners do (Alpha's deletions at 21765-21770 and 21991-21993;
Nextclade's own places are below).
Several alignment segments (split by N runs or divergent stretches) are chained: colinear segments
are kept, the stretch between two segments is copied base-for-base when query and reference gaps
have the same length (else its non-N flanks are anchored on either side and the rest left ``N``).
A few bases clipped at the ends of the chain (mismatches next to the end) are re-attached
ungapped, up to :data:`END_EXTENSION_MAX`.

A deletion and an insertion of the same length close together, which Nextclade's scoring reads as
substitutions, are turned into those substitutions (:func:`merge_substitution_pairs`): minimap2 can
trade a run of mismatches for such a pair, a false compensated frameshift (``C15824T T15825G G15826A
A15827G`` came out as ``15824`` + ``15827:G``).

An indel that can slide along a repeat without changing the query keeps minimap2's leftmost place in
the alignment (the model's tokens and the marker table were made from it); :func:`nextclade_placement`
gives the view the mutation names are read from, each such indel where Nextclade's gap-open costs put
it: on a codon boundary of a gene when one is in reach, else outside genes, else leftmost. So Alpha's
S:Y144- is named ``21992-21994`` as in Nextclade while its aligned spike keeps ``-`` at 21991-21993,
and Mu's insertion is ``21991:ACT`` (minimap2: ``21990:TAC``).

References
----------
* Nextclade CLI 1.4.1's output for its 71 example genomes (tests/data/nextclade_1.4.1/), the golden
  test of these names (tests/test_nextclade_golden.py).
* Nextclade documentation, "Sequence alignment" and its CLI reference (match and mismatch scores,
  codon-aware gap-open costs: lower at codon boundaries inside genes) and nextstrain/nextclade issues
  #299 and #306 (in-frame gaps put on codon boundaries so a deleted codon translates as a deleted
  residue).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .reference import (
    REFERENCE_LEN,
    SPIKE_END,
    SPIKE_LEN,
    SPIKE_START,
    reference_sequence,
    reverse_complement,
)
from bertgeom.tables import counted

PRESET = "map-ont"  #: minimap2 preset (see module docstring for why)
#: (match, mismatch, gap open, gap extend, long-gap open, long-gap extend, ambiguous-base mismatch).
#: map-ont's defaults except gap open 4 -> 6: with 4, a 1-nt deletion + 1-nt insertion pair ties
#: with three mismatches and minimap2 reported fake compensating frameshifts in some Omicron genomes.
SCORING = (2, 4, 6, 2, 24, 1, 1)
END_EXTENSION_MAX = 30  #: at most this many clipped end bases are re-attached ungapped
MIN_QUERY_LEN = 30  #: shorter inputs are refused (minimap2 cannot place them reliably)
_OVERLAP_TOL = 30  #: segments overlapping by more than this (query or reference) are not chained

_lock = threading.Lock()
_aligner = None


class AlignmentError(ValueError):
    """The sequence cannot be aligned to the SARS-CoV-2 reference (message = one sentence)."""


def get_aligner():
    """The process-wide ``mappy.Aligner`` on MN908947.3, built on first use (thread-safe)."""
    global _aligner
    if _aligner is None:
        with _lock:
            if _aligner is None:
                import mappy

                al = mappy.Aligner(seq=reference_sequence(), preset=PRESET, scoring=SCORING)
                if not al:  # pragma: no cover
                    raise RuntimeError("could not build the minimap2 index of the reference")
                _aligner = al
    return _aligner


@dataclass(frozen=True)
class Indel:
    """An indel in genome coordinates: ``kind`` "del" (``pos`` = first deleted base, 1-based) or
    "ins" (``pos`` = reference base after which ``bases`` are inserted)."""

    kind: str
    pos: int
    length: int
    bases: str = ""

    @property
    def frameshift(self) -> bool:
        return self.length % 3 != 0

    @property
    def end(self) -> int:
        """Last deleted base (deletions) or ``pos`` (insertions)."""
        return self.pos + self.length - 1 if self.kind == "del" else self.pos


@dataclass(eq=False)
class GenomeAlignment:
    """Whole-genome alignment in reference coordinates (``aligned`` has 29,903 characters)."""

    aligned: str
    covered: np.ndarray  # bool per reference base: inside the aligned span of the query
    insertions: list[tuple[int, str]]
    deletions: list[tuple[int, int]]  # (first deleted base 1-based, length)
    strand: int  # +1 as given, -1 reverse complement
    segments: list[tuple[int, int, int, int]]  # (q_start, q_end, r_start, r_end), 0-based half-open
    query_len: int
    notes: list[str] = field(default_factory=list)
    #: N the query holds just beyond the covered span, at the 5' and 3' ends, that the aligner left
    #: unplaced (minimap2 clips an N padding; Nextclade aligns it, so it is missing data there)
    end_n: tuple[int, int] = (0, 0)

    @property
    def coverage(self) -> float:
        """Share of the reference genome covered by the query."""
        return float(self.covered.mean())

    def missing_span(self) -> tuple[int, int] | None:
        """Where Nextclade counts missing data, 0-based and closed: the covered span widened by the N
        runs the query holds just beyond it (:attr:`end_n`: an N padding minimap2 clips, which
        Nextclade aligns, so it is missing data; bases the query never had, or real bases left
        unplaced, are not). None when nothing is covered."""
        idx = np.flatnonzero(self.covered)
        if not len(idx):
            return None
        return int(idx[0]) - self.end_n[0], int(idx[-1]) + self.end_n[1]


@dataclass(eq=False)
class SpikeCut:
    """The spike of one sequence in reference spike coordinates.

    ``aligned[i]`` is the query base at spike offset ``i`` (0-based; genome ``SPIKE_START + i``),
    ``-`` for a deletion, ``N`` if uncovered; always :data:`SPIKE_LEN` = 3822 characters.
    """

    aligned: str
    insertions: list[tuple[int, str]]  # (genome pos after which, bases), inside the spike only
    deletions: list[tuple[int, int]]  # (first deleted genome pos, length), clipped to the spike
    coverage: float  # share of the 3822 spike positions covered by the query
    strand: int
    notes: list[str] = field(default_factory=list)

    @property
    def indels(self) -> list[Indel]:
        out = [Indel("del", p, n) for p, n in self.deletions]
        out += [Indel("ins", p, len(b), b) for p, b in self.insertions]
        return sorted(out, key=lambda x: (x.pos, x.kind))

    @property
    def frameshifts(self) -> list[Indel]:
        """Indels in the spike whose length is not a multiple of 3."""
        return [x for x in self.indels if x.frameshift]

    @property
    def n_count(self) -> int:
        return self.aligned.count("N")

    def paper_sequence(self, fill_uncovered: str = "N") -> str:
        """The paper's spike representation: deletions removed, insertions put back in place.

        ``fill_uncovered="reference"`` also fills *uncovered* positions from the reference, as the
        paper's gap filling did (the authors' released preprocessing, step 4); the default leaves them ``N``.
        """
        ref = reference_sequence()[SPIKE_START - 1 : SPIKE_END]
        chars = list(self.aligned)
        if fill_uncovered == "reference":
            cov = self.covered_mask()
            chars = [c if cov[i] else ref[i] for i, c in enumerate(chars)]
        ins = {p - SPIKE_START: b for p, b in self.insertions}  # insert after spike offset
        out = []
        for i, c in enumerate(chars):
            if c != "-":
                out.append(c)
            if i in ins:
                out.append(ins[i])
        return "".join(out)

    def covered_mask(self) -> np.ndarray:
        """Bool per spike offset: covered by the query (stored compactly as the two flanks + N runs)."""
        return self._covered if self._covered is not None else np.ones(SPIKE_LEN, bool)

    _covered: np.ndarray | None = field(default=None, repr=False, compare=False)


def _cigar_write(out, covered, q, hit, ins_out, del_out, written) -> None:
    r, qi = hit.r_st, hit.q_st
    for length, op in hit.cigar:
        if op in (0, 7, 8):  # M, =, X
            sl = slice(r, r + length)
            free = ~written[sl]
            if free.all():
                out[sl] = q[qi : qi + length]
            else:
                out[sl][free] = q[qi : qi + length][free]
            written[sl] = True
            r += length
            qi += length
        elif op == 2:  # D
            if not written[r : r + length].any():
                out[r : r + length] = ord("-")
                del_out.append((r + 1, length))
            written[r : r + length] = True
            r += length
        elif op == 1:  # I: inserted after reference base r (0-based r-1 => 1-based r)
            ins_out.append((r, q[qi : qi + length].tobytes().decode()))
            qi += length
        elif op == 3:  # N (skip): not produced for this index, treat as uncovered
            r += length
        # S/H never appear in mappy's cigar (q_st/q_en carry the clipping)
    covered[hit.r_st : hit.r_en] = True


def _chain(hits):
    """Greedy colinear chain, best segments first; returned sorted by reference start."""
    kept = []
    for h in sorted(hits, key=lambda h: -h.mlen):
        ok = True
        for k in kept:
            before = h.q_en <= k.q_st + _OVERLAP_TOL and h.r_en <= k.r_st + _OVERLAP_TOL
            after = h.q_st >= k.q_en - _OVERLAP_TOL and h.r_st >= k.r_en - _OVERLAP_TOL
            if not (before or after):
                ok = False
                break
        if ok:
            kept.append(h)
    return sorted(kept, key=lambda h: h.r_st)


#: Nextclade's default alignment scores: a match, a mismatch (subtracted), and the gap-open cost outside
#: genes, on the first base of a codon, and elsewhere inside a gene (gap extension costs nothing).
NEXTCLADE_MATCH = 3
NEXTCLADE_MISMATCH = 1
NEXTCLADE_GAP_OPEN = 6
NEXTCLADE_GAP_OPEN_IN_FRAME = 7
NEXTCLADE_GAP_OPEN_OUT_OF_FRAME = 8
#: a deletion and an insertion of one length at most this many reference bases apart are weighed as substitutions
SUBSTITUTION_PAIR_SPAN = 30
_ACGT_BYTES = frozenset(b"ACGT")


@functools.lru_cache(maxsize=1)
def gap_open_costs() -> np.ndarray:
    """Nextclade's cost of opening a gap before each reference base (index = genome 1-based position,
    0 and ``REFERENCE_LEN + 1`` pad): :data:`NEXTCLADE_GAP_OPEN` outside genes,
    :data:`NEXTCLADE_GAP_OPEN_IN_FRAME` on the first base of a codon of a gene of Nextclade's annotation
    and :data:`NEXTCLADE_GAP_OPEN_OUT_OF_FRAME` elsewhere inside one. Read-only, built once."""
    from .genes import NOT_IN_NEXTCLADE, load_genes

    in_gene = np.zeros(REFERENCE_LEN + 2, dtype=bool)
    codon_start = np.zeros(REFERENCE_LEN + 2, dtype=bool)
    for gene in load_genes().values():
        if gene.name in NOT_IN_NEXTCLADE:
            continue
        in_gene[gene.start : gene.end + 1] = True
        codon_start[gene.start : gene.end + 1 : 3] = True
    cost = np.full(REFERENCE_LEN + 2, NEXTCLADE_GAP_OPEN, dtype=np.int64)
    cost[in_gene] = NEXTCLADE_GAP_OPEN_OUT_OF_FRAME
    cost[codon_start] = NEXTCLADE_GAP_OPEN_IN_FRAME
    cost.setflags(write=False)
    return cost


@functools.lru_cache(maxsize=1)
def _reference_bytes() -> np.ndarray:
    """The reference genome as a read-only byte array (index = genome position - 1)."""
    ref = np.frombuffer(reference_sequence().encode("ascii"), dtype=np.uint8)
    ref.setflags(write=False)
    return ref


def _nextclade_score(ref: np.ndarray, query: np.ndarray) -> int:
    """Ungapped score of two equal-length byte runs under Nextclade's match/mismatch scores."""
    same = int(np.count_nonzero(ref == query))
    return NEXTCLADE_MATCH * same - NEXTCLADE_MISMATCH * (len(ref) - same)


def _all_acgt(run: np.ndarray) -> bool:
    """True when every byte of ``run`` is A, C, G or T (no gap, no N, no ambiguity code)."""
    return all(b in _ACGT_BYTES for b in run.tobytes())


def _pair_as_substitutions(out: np.ndarray, deletion: tuple[int, int],
                           insertion: tuple[int, str]) -> tuple[int, np.ndarray] | None:
    """``(first, query bases)`` that replace the reference span of a deletion and an insertion of the
    same length (``out``: a whole-genome aligned text as bytes) when Nextclade's scoring reads that span
    as substitutions at least as well as the two gaps; ``None`` otherwise, or when a base between them
    is not A/C/G/T."""
    ref, costs = _reference_bytes(), gap_open_costs()
    a, n = deletion
    q, bases = insertion
    inserted = np.frombuffer(bases.encode("ascii"), dtype=np.uint8)
    if q >= a + n - 1:  # deletion first: span a..q = the bases aligned to a+n..q, then the inserted ones
        between, ref_between = out[a + n - 1 : q], ref[a + n - 1 : q]
        first, last = a, q
        query = np.concatenate([between, inserted])
    else:  # insertion (after q < a) first: span q+1..a+n-1
        between, ref_between = out[q : a - 1], ref[q : a - 1]
        first, last = q + 1, a + n - 1
        query = np.concatenate([inserted, between])
    if last - first + 1 > SUBSTITUTION_PAIR_SPAN + n or not _all_acgt(query):
        return None
    gapped = _nextclade_score(ref_between, between) - int(costs[a]) - int(costs[q + 1])
    if _nextclade_score(ref[first - 1 : last], query) < gapped:
        return None
    return first, query


def merge_substitution_pairs(out: np.ndarray, insertions: list[tuple[int, str]],
                             deletions: list[tuple[int, int]]) -> None:
    """Turn each deletion + insertion of the same length, close together with no other indel between,
    into the substitutions they stand for when Nextclade's scoring prefers those (in place: ``out``, a
    whole-genome aligned text as bytes, and both lists). minimap2's scores can make a run of mismatches
    cheaper as such a pair, which reads as a compensated frameshift Nextclade never reports."""
    merged = True
    while merged:
        merged = False
        for deletion in sorted(deletions):
            a, n = deletion
            for insertion in sorted(insertions):
                q, bases = insertion
                if len(bases) != n or not a - 1 - SUBSTITUTION_PAIR_SPAN <= q <= a + n - 1 + SUBSTITUTION_PAIR_SPAN:
                    continue
                lo, hi = min(a, q + 1), max(a + n - 1, q)
                if any(d != deletion and d[0] <= hi and d[0] + d[1] - 1 >= lo for d in deletions) or any(
                        i != insertion and lo - 1 <= i[0] <= hi for i in insertions):
                    continue  # another indel between them
                replacement = _pair_as_substitutions(out, deletion, insertion)
                if replacement is None:
                    continue
                first, query = replacement
                out[first - 1 : first - 1 + len(query)] = query
                deletions.remove(deletion)
                insertions.remove(insertion)
                merged = True
                break
            if merged:
                break


class NextcladePlacement(NamedTuple):
    """An aligned text with its indels placed as Nextclade places them (:func:`nextclade_placement`)."""

    aligned: str
    insertions: list[tuple[int, str]]
    deletions: list[tuple[int, int]]


def _slide_deletion(out: np.ndarray, covered: np.ndarray, offset: int, deletion: tuple[int, int],
                    insertion_sites: set[int]) -> tuple[int, int]:
    """The deletion moved, along the repeat or the N run it sits in, to the start Nextclade's gap-open
    costs prefer (lowest cost, then leftmost); ``out`` (the text from genome position ``offset``) is
    rewritten to match. A step moves one query base across the gap only when that leaves the score
    unchanged: an A/C/G/T base equal to the reference base it then faces, or a sequenced N (Nextclade
    scores N as matching any base); never next to an insertion."""
    ref = _reference_bytes()
    a, n = deletion
    end = offset + len(out) - 1  # last genome position of the text

    def movable(pos: int, same_reference: bool) -> bool:  # may the query base at genome ``pos`` cross the gap?
        i = pos - offset
        return bool(covered[i]) and (out[i] == ord("N") or (same_reference and out[i] in _ACGT_BYTES))

    lo = a  # leftmost start: the base before the gap moves behind it
    while (lo - 1 >= offset and movable(lo - 1, ref[lo - 2] == ref[lo + n - 2])
           and not insertion_sites & set(range(lo - 2, lo + n))):
        lo -= 1
    hi = a  # rightmost start: the base after the gap moves before it
    while (hi + n <= end and movable(hi + n, ref[hi - 1] == ref[hi + n - 1])
           and not insertion_sites & set(range(hi - 1, hi + n + 1))):
        hi += 1
    if lo == hi:
        return deletion
    costs = gap_open_costs()
    start = min(range(lo, hi + 1), key=lambda s: (int(costs[s]), s))
    if start != a:
        span = out[lo - offset : hi + n - offset]
        bases = span[span != ord("-")]
        k = start - lo
        out[lo - offset : hi + n - offset] = np.concatenate([bases[:k], np.full(n, ord("-"), dtype=np.uint8),
                                                             bases[k:]])
    return start, n


def _slide_insertion(out: np.ndarray, offset: int, insertion: tuple[int, str], deleted: set[int]) -> tuple[int, str]:
    """The insertion moved, along the repeat it sits in, to where Nextclade's gap-open costs prefer it
    (lowest cost of the base after it, then leftmost): the aligned text does not change, only the
    position and the rotation of the inserted bases. Never next to a deletion."""
    p, bases = insertion
    end = offset + len(out) - 1
    places = [(p, bases)]
    q, b = p, bases
    while (q - 1 >= offset and q <= end and out[q - offset] in _ACGT_BYTES and chr(out[q - offset]) == b[-1]
           and not deleted & {q - 1, q, q + 1}):
        q, b = q - 1, b[-1] + b[:-1]
        places.append((q, b))
    q, b = p, bases
    while (q + 1 <= end and out[q + 1 - offset] in _ACGT_BYTES and chr(out[q + 1 - offset]) == b[0]
           and not deleted & {q, q + 1, q + 2}):
        q, b = q + 1, b[1:] + b[0]
        places.append((q, b))
    costs = gap_open_costs()
    return min(places, key=lambda place: (int(costs[min(place[0] + 1, REFERENCE_LEN + 1)]), place[0]))


def nextclade_placement(aligned: str, covered: np.ndarray, insertions: list[tuple[int, str]],
                        deletions: list[tuple[int, int]], offset: int = 1) -> NextcladePlacement:
    """The aligned text (starting at genome position ``offset``; ``covered``, per character, whether the
    query spans it) and its indels with each indel slid along its repeat to where Nextclade's aligner puts
    it: the place of lowest gap-open cost (:func:`gap_open_costs`: a codon boundary inside a gene, else
    outside genes), the leftmost among equals (minimap2's own place). Nextclade gives an equally good
    placement the lower cost, which is why its in-frame gaps start on a codon: Alpha's S:Y144- is
    ``21992-21994`` where minimap2 writes ``21991-21993``. The query bases are unchanged, only where the
    gaps sit. The alignment itself keeps minimap2's places: the model's tokens and the marker table were
    made from them."""
    if not insertions and not deletions:
        return NextcladePlacement(aligned, list(insertions), list(deletions))
    out = np.frombuffer(aligned.encode("ascii"), dtype=np.uint8).copy()
    sites = {p for p, _ in insertions}
    placed_deletions = sorted(_slide_deletion(out, covered, offset, d, sites) for d in sorted(deletions))
    deleted = {pos for p, n in placed_deletions for pos in range(p, p + n)}
    placed_insertions = sorted(_slide_insertion(out, offset, i, deleted) for i in sorted(insertions))
    return NextcladePlacement(out.tobytes().decode("ascii"), placed_insertions, placed_deletions)


def align_genome(sequence: str) -> GenomeAlignment:
    """Align one cleaned sequence (upper-case IUPAC DNA, see :mod:`.fasta`) to MN908947.3.

    Either strand is accepted: a reverse complement is detected, flipped, and noted. Raises
    :class:`AlignmentError` when nothing aligns.
    """
    seq = sequence.upper()
    if len(seq) < MIN_QUERY_LEN:
        raise AlignmentError(f"The sequence is too short to align ({len(seq)} nt; at least {MIN_QUERY_LEN} needed).")
    al = get_aligner()
    hits = list(al.map(seq))
    if not hits:
        raise AlignmentError("The sequence does not align to the SARS-CoV-2 reference (MN908947.3).")
    notes: list[str] = []
    fwd = sum(h.mlen for h in hits if h.strand == 1)
    rev = sum(h.mlen for h in hits if h.strand == -1)
    strand = 1
    if rev > fwd:
        strand = -1
        seq = reverse_complement(seq)
        hits = list(al.map(seq))
        notes.append("reverse complement detected: the sequence was flipped to the reference strand")
    hits = [h for h in hits if h.strand == 1]
    if not hits:  # pragma: no cover - mapping the flipped sequence always gives forward hits
        raise AlignmentError("The sequence does not align to the SARS-CoV-2 reference (MN908947.3).")
    if fwd and rev and min(fwd, rev) > 0.1 * max(fwd, rev):
        notes.append("parts of the sequence align to both strands (chimera?): the minor strand was ignored")
    chain = _chain(hits)
    if len(chain) < len(hits):
        notes.append(f"{counted(len(hits) - len(chain), 'non-colinear alignment segment')} ignored")

    q = np.frombuffer(seq.encode("ascii"), dtype=np.uint8)
    out = np.full(REFERENCE_LEN, ord("N"), dtype=np.uint8)
    covered = np.zeros(REFERENCE_LEN, dtype=bool)
    written = np.zeros(REFERENCE_LEN, dtype=bool)
    insertions: list[tuple[int, str]] = []
    deletions: list[tuple[int, int]] = []
    for h in chain:
        _cigar_write(out, covered, q, h, insertions, deletions, written)

    # bridge the gaps between consecutive segments
    for a, b in zip(chain, chain[1:]):
        qs, qe, rs, re_ = a.q_en, b.q_st, a.r_en, b.r_st
        qlen, rlen = qe - qs, re_ - rs
        if rlen <= 0 or qlen < 0:
            continue
        if qlen == rlen:
            out[rs:re_] = q[qs:qe]
            covered[rs:re_] = True
            continue
        gap = q[qs:qe]
        is_n = gap == ord("N")
        if not is_n.any():
            notes.append(f"unaligned stretch at {rs + 1}-{re_} left as N")
            continue
        left = int(np.argmax(is_n))  # non-N bases before the first N
        right = int(np.argmax(is_n[::-1]))  # non-N bases after the last N
        if left + right > rlen:
            notes.append(f"unaligned stretch at {rs + 1}-{re_} left as N")
            continue
        out[rs : rs + left] = gap[:left]
        if right:
            out[re_ - right : re_] = gap[qlen - right :]
        covered[rs:re_] = True

    # re-attach a few clipped bases at both ends
    first, last = chain[0], chain[-1]
    e = min(first.q_st, first.r_st, END_EXTENSION_MAX)
    if e > 0:
        out[first.r_st - e : first.r_st] = q[first.q_st - e : first.q_st]
        covered[first.r_st - e : first.r_st] = True
    e = min(len(q) - last.q_en, REFERENCE_LEN - last.r_en, END_EXTENSION_MAX)
    if e > 0:
        out[last.r_en : last.r_en + e] = q[last.q_en : last.q_en + e]
        covered[last.r_en : last.r_en + e] = True

    merge_substitution_pairs(out, insertions, deletions)
    # N runs the query holds right beyond its placed ends (they would sit before/after the covered span)
    span = np.flatnonzero(covered)
    lead = trail = 0
    if len(span):
        head = q[: max(first.q_st - (first.r_st - int(span[0])), 0)]
        tail = q[min(last.q_en + (int(span[-1]) + 1 - last.r_en), len(q)):]
        lead = min(_n_run(head[::-1]), int(span[0]))
        trail = min(_n_run(tail), REFERENCE_LEN - 1 - int(span[-1]))
    segments = [(h.q_st, h.q_en, h.r_st, h.r_en) for h in chain]
    return GenomeAlignment(
        aligned=out.tobytes().decode("ascii"),
        covered=covered,
        insertions=sorted(insertions),
        deletions=sorted(deletions),
        strand=strand,
        segments=segments,
        query_len=len(seq),
        notes=notes,
        end_n=(lead, trail),
    )


def _n_run(codes: np.ndarray) -> int:
    """Length of the run of N at the start of a byte array."""
    not_n = np.flatnonzero(codes != ord("N"))
    return int(not_n[0]) if len(not_n) else len(codes)


def cut_spike(aln: GenomeAlignment) -> SpikeCut:
    """The spike part of a genome alignment (3822 characters in spike coordinates)."""
    s0, s1 = SPIKE_START - 1, SPIKE_END  # 0-based half-open in the genome
    aligned = aln.aligned[s0:s1]
    cov = aln.covered[s0:s1].copy()
    ins = [(p, b) for p, b in aln.insertions if SPIKE_START <= p < SPIKE_END]
    dels = []
    for p, n in aln.deletions:
        a, b = max(p, SPIKE_START), min(p + n - 1, SPIKE_END)
        if a <= b:
            dels.append((a, b - a + 1))
    notes = list(aln.notes)
    coverage = float(cov.mean())
    if coverage == 0:
        notes.append("the sequence does not cover the spike")
    elif coverage < 1:
        notes.append(f"the sequence covers {coverage:.1%} of the spike; uncovered positions are N")
    cut = SpikeCut(aligned, ins, dels, coverage, aln.strand, notes)
    cut._covered = cov
    return cut


def align_spike(sequence: str) -> SpikeCut:
    """Align a genome / partial / spike-only sequence and cut the spike (see :func:`align_genome`)."""
    return cut_spike(align_genome(sequence))
