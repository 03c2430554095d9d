"""Mutations against MN908947.3 and the Nextstrain clade definitions.

Naming conventions: exactly Nextclade's output form (its TSV/JSON columns), so a name can be pasted
between the two tools:

* nucleotide substitution ``A23063T`` (reference base, genome 1-based position, query base);
  nucleotide deletion ``21765-21770`` (first-last deleted base, a closed range; ``28271`` for one base);
  nucleotide insertion ``22204:GAGCCAGAA`` (after reference base 22204);
* amino acids, 1-based, qualified by the gene: ``S:N501Y``; one deletion per residue ``S:H69-``,
  ``S:V70-``; insertion ``S:214:EPE`` (after residue 214); a frameshift as the codon range it shifts,
  ``N:33-420`` (first shifted codon to the codon where the frame is restored, or the gene's last codon
  counting its stop: a compensated pair of indels is one range); a new stop codon ``S:Q1071*``.

Indels are named where Nextclade places them (:func:`~.align.nextclade_placement`): an indel that can
slide along a repeat sits on a codon boundary when one is in reach, so Alpha's deletion is
``21992-21994`` (S:Y144-) and Mu's insertion ``21991:ACT``, though the alignment keeps minimap2's
leftmost ``21991-21993`` and ``21990:TAC``. A frameshifting deletion also lists the residues it
removes before the shifted frame begins, as Nextclade does: Delta's ORF7a 27498-27616 gives
``ORF7a:C35-`` .. ``ORF7a:V74-`` and the frameshift ``ORF7a:75-122``; Mu's ORF3a 26158-26161
``ORF3a:V256-`` and ``ORF3a:257-276``.

Out-of-phase deletions of a multiple of 3 nt (e.g. Delta's 22029-22034) are named as a peptide
alignment names them: the residue(s) the remaining bases make take the place among the
affected codons that scores best by BLOSUM62, ties putting the gaps last; so Delta gives
``E156G F157- R158-``, BA.1 ``G142D V143- Y144- Y145-``, BA.2 ``L24- P25- P26- A27S``, Lambda
``R246- ... G252- D253N``, Alpha 21765-21770 ``H69- V70-``. (Nextclade 1.x broke Delta's tie the
other way, ``E156- F157- R158G``; nextstrain/nextclade issue #507.) An in-frame insertion inside a
codon that keeps the codon's residue at neither end is named as inserted before it, the residue
substituted by the last one (Nextclade 1.4.1: ``22205:CGGCAGGCT`` is ``S:D215Y`` after the inserted
``AAG``). Codons with N or an ambiguity code that leaves the residue undetermined are not called.
:func:`nextclade_columns` writes a report as the columns of Nextclade's TSV.

References
----------
* Nextclade documentation, "Translation" and "Mutation calling" (names, 1-based codons, frameshift
  codon ranges) and "Output files: TSV" (the columns of :func:`nextclade_columns`).
* Nextclade CLI 1.4.1's output for its 71 example genomes, tests/data/nextclade_1.4.1/, held by
  tests/test_nextclade_golden.py; nextstrain/nextclade issues #507 and #565 (how 1.x placed
  amino-acid gaps).

The clade definitions (``definitions/nextstrain_clades.tsv``) list nucleotide sites only, each clade
inheriting its parent's sites (a child's own row wins at the same site). Some rows give the
*reference* base (e.g. 19A ``C8782``); those constrain clade assignment but are not mutations.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .align import GenomeAlignment, SpikeCut, cut_spike, nextclade_placement
from .classes import CLASSES, clade_to_class
from .reference import (
    SPIKE_AA_LEN,
    SPIKE_END,
    SPIKE_START,
    aa_of_genome_pos,
    data_path,
    domain_of_aa,
    reference_sequence,
    reference_spike,
    translate,
    translate_codon,
)

# --------------------------------------------------------------------------------------------
# Clade definitions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CladeDefinitions:
    """Parsed Nextstrain clade definitions with inheritance."""

    parent: dict[str, str | None]
    own: dict[str, dict[int, str]]  # clade -> {site: alt}, its own rows only
    display: dict[str, str]

    @property
    def clades(self) -> list[str]:
        return list(self.own)

    @functools.cache
    def inherited(self, clade: str) -> dict[int, str]:
        """All sites of ``clade`` (ancestors first, own rows override): ``{genome_pos: base}``."""
        if clade not in self.own:
            raise KeyError(f"unknown clade {clade!r}")
        chain = []
        c: str | None = clade
        seen = set()
        while c is not None and c not in seen:
            seen.add(c)
            chain.append(c)
            c = self.parent.get(c)
        sites: dict[int, str] = {}
        for c in reversed(chain):
            sites.update(self.own[c])
        return sites

    def depth(self, clade: str) -> int:
        d, c = 0, self.parent.get(clade)
        while c is not None and d < 100:
            d, c = d + 1, self.parent.get(c)
        return d

    def mutations(self, clade: str, spike_only: bool = False) -> dict[int, str]:
        """Inherited sites of ``clade`` whose base differs from the reference (true mutations)."""
        ref = reference_sequence()
        out = {p: b for p, b in self.inherited(clade).items() if ref[p - 1] != b}
        if spike_only:
            out = {p: b for p, b in out.items() if SPIKE_START <= p <= SPIKE_END}
        return dict(sorted(out.items()))

    def clades_of_class(self, cls: str) -> list[str]:
        """Clades of the definitions that map to class ``cls`` (see :func:`clade_to_class`)."""
        if cls not in CLASSES:
            raise KeyError(f"unknown class {cls!r}")
        return [c for c in self.own if clade_to_class(c) == cls]

    @functools.cached_property
    def _defining_index(self) -> dict[tuple[int, str], tuple[str, ...]]:
        idx: dict[tuple[int, str], list[str]] = {}
        ref = reference_sequence()
        for c, sites in self.own.items():
            for p, b in sites.items():
                if ref[p - 1] != b:
                    idx.setdefault((p, b), []).append(c)
        return {k: tuple(v) for k, v in idx.items()}

    def defining_clades(self, pos: int, alt: str) -> tuple[str, ...]:
        """Clades whose own definition rows contain ``alt`` at genome ``pos`` (may be empty)."""
        return self._defining_index.get((pos, alt), ())

    @functools.cached_property
    def site_layout(self) -> dict[str, np.ndarray | list]:
        """Every clade's inherited sites as flat arrays, clade after clade in definition order, for
        :func:`nearest_clade`: ``pos`` (genome, 1-based), ``base`` (uint8), ``clade`` (its index);
        the same for the clades' own sites (``own_*``); ``depth`` and ``cls`` per clade."""
        pos, base, clade, own_pos, own_base, own_clade = [], [], [], [], [], []
        for k, c in enumerate(self.clades):
            for p, b in self.inherited(c).items():
                pos.append(p)
                base.append(ord(b) if len(b) == 1 else 0)  # a multi-letter alt never equals one base
                clade.append(k)
            for p, b in self.own[c].items():
                own_pos.append(p)
                own_base.append(ord(b) if len(b) == 1 else 0)
                own_clade.append(k)
        arrays = {k: np.array(v, dtype=np.int64) for k, v in (("pos", pos), ("base", base), ("clade", clade),
                  ("own_pos", own_pos), ("own_base", own_base), ("own_clade", own_clade))}
        for a in arrays.values():
            a.setflags(write=False)  # shared by every call (and thread) of the process
        return {**arrays, "depth": [self.depth(c) for c in self.clades],
                "cls": [clade_to_class(c) for c in self.clades]}

    def __hash__(self) -> int:  # needed by functools.cache on a method
        return id(self)


def parse_clade_definitions(tsv_text: str, display_yml: str = "") -> CladeDefinitions:
    """Parse ``clades.tsv`` text (``clade gene site alt``; ``gene == "clade"`` rows give the parent)."""
    parent: dict[str, str | None] = {}
    own: dict[str, dict[int, str]] = {}
    for line in tsv_text.splitlines():
        parts = line.strip().split("\t")
        if len(parts) < 3 or parts[0] == "clade" or line.startswith("#"):
            continue
        clade, gene, site = parts[0], parts[1], parts[2]
        own.setdefault(clade, {})
        parent.setdefault(clade, None)
        if gene == "clade":
            parent[clade] = site
        elif gene == "nuc" and len(parts) >= 4:
            own[clade][int(site)] = parts[3].strip().upper()
    display = {}
    for line in display_yml.splitlines():
        if ":" in line and not line.lstrip().startswith("#"):
            k, v = line.split(":", 1)
            display[k.strip().strip("'\"")] = v.strip().strip("'\"")
    for c in own:
        display.setdefault(c, c)
    return CladeDefinitions(parent, own, display)


@functools.lru_cache(maxsize=1)
def load_clade_definitions() -> CladeDefinitions:
    """The shipped Nextstrain clade definitions (cached)."""
    tsv = data_path("definitions", "nextstrain_clades.tsv").read_text()
    yml = data_path("definitions", "nextstrain_clade_display_names.yml").read_text()
    return parse_clade_definitions(tsv, yml)


# --------------------------------------------------------------------------------------------
# Mutation records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NucMutation:
    """A nucleotide mutation in genome coordinates (see the module docstring for names)."""

    kind: str  # "sub", "del" or "ins"
    pos: int  # genome 1-based: substituted / first deleted base / base after which inserted
    ref: str  # reference base(s) ("" for insertions)
    alt: str  # query base(s) ("" for deletions)
    name: str
    aa_pos: int | None = None  # spike residue of the codon holding ``pos`` (None outside S)
    domain: str | None = None  # fine spike domain (e.g. "RBD")
    coarse_domain: str | None = None  # SP / S1 / S2
    aa: str | None = None  # the spike amino-acid change it causes, e.g. "N501Y" (None if none)
    defining_clades: tuple[str, ...] = ()
    aa_changes: tuple[str, ...] = ()  # every gene's amino-acid events it takes part in, "ORF1b:P314L"

    @property
    def in_spike(self) -> bool:
        return self.aa_pos is not None

    @property
    def coding_change(self) -> bool:
        """True when it changes an amino acid in some gene (it then belongs to that gene's table row)."""
        return bool(self.aa_changes)


@dataclass(frozen=True)
class AaMutation:
    """A spike amino-acid change, 1-based residue numbers."""

    kind: str  # "sub", "del", "ins", "fs" (frameshift) or "stop"
    pos: int  # residue (for insertions: the residue after which)
    ref: str
    alt: str
    name: str  # "N501Y", "H69-", "214:EPE", "157-1274" (frameshift codon range), "Q1071*"
    domain: str | None = None
    coarse_domain: str | None = None
    nuc: tuple[str, ...] = ()  # underlying nucleotide mutation names
    defining_clades: tuple[str, ...] = ()
    gene: str = "S"  # Nextclade gene name (bertgeom.sars_cov_2.genome.genes)
    end: int = 0  # a frameshift's last codon (its range's end, counting the stop); 0 otherwise

    @property
    def qualified(self) -> str:
        """``S:N501Y`` (Nextclade's gene:change)."""
        return f"{self.gene}:{self.name}"


@dataclass(frozen=True)
class AaEvent:
    """One row of a gene's mutation table: a substitution, a premature stop, a frameshift (its codon
    range), an insertion, or one deleted residue, named as Nextclade names it (``S:H69-``,
    ``S:214:EPE``, ``ORF3a:257-276``), with the nucleotide changes that make it."""

    gene: str
    kind: str  # "sub", "del", "ins", "fs", "stop"
    start: int  # first residue (insertions: the residue after which)
    end: int
    name: str  # "N501Y", "H69-", "214:EPE", "157-1274", "Q1071*"
    nuc: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        """``S:A243-`` (Nextclade's gene:change)."""
        return f"{self.gene}:{self.name}"


def same_deletion(a: str, b: str) -> bool:
    """True when the nucleotide deletions named ``a`` and ``b`` (``22281-22289``, ``28271``: Nextclade's
    closed ranges) are one event: the same range, or the same length placed elsewhere in a repeat
    of the reference, which leaves the same sequence (Beta's 9-base deletion is 22281-22289 where an
    alignment puts it left, 22283-22291 where Nextclade puts it right)."""
    def span(name: str) -> tuple[int, int] | None:
        first, _, last = name.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        return int(first), int(last or first)

    sa, sb = span(a), span(b)
    if sa is None or sb is None:
        return a == b
    (s1, e1), (s2, e2) = sorted((sa, sb))
    length = e1 - s1 + 1
    if e2 - s2 + 1 != length:
        return False
    ref = reference_sequence()
    # deleting ref[s1-1 : s1-1+length] or the same length starting s2 leaves one sequence exactly
    # when the bases between the two starts repeat one deletion length later
    return ref[s1 - 1:s2 - 1] == ref[s1 - 1 + length:s2 - 1 + length]


def group_events(gene: str, aa: Iterable[AaMutation]) -> list[AaEvent]:
    """One table row per amino-acid change, as Nextclade lists them: a deletion per residue
    (``H69-``, ``V70-``), a frameshift as its codon range (``start``..``end``)."""
    return [AaEvent(gene, m.kind, m.pos, m.end or m.pos, m.name, m.nuc) for m in aa]


def nuc_deletion_name(pos: int, length: int) -> str:
    """Nextclade's name of a nucleotide deletion: ``21765-21770`` (closed range), ``28271`` for one base."""
    return f"{pos}" if length == 1 else f"{pos}-{pos + length - 1}"


def nuc_insertion_name(pos: int, bases: str) -> str:
    """Nextclade's name of a nucleotide insertion after reference base ``pos``: ``22204:GAGCCAGAA``."""
    return f"{pos}:{bases}"


def split_change(change: str) -> tuple[str | None, str]:
    """``("S", "N501Y")`` for a gene-qualified amino-acid change, ``(None, "22204:GAGCCAGAA")`` for a
    nucleotide change (an insertion's ``:`` follows digits, a gene name starts with a letter)."""
    gene, sep, name = change.partition(":")
    if sep and gene[:1].isalpha():
        return gene, name
    return None, change


@dataclass
class GeneReport:
    """One gene of one sequence: its amino-acid changes, table rows, called bases, frameshifts and
    premature stop codons."""

    gene: str
    aa: list[AaMutation]
    events: list[AaEvent]
    called: int  #: bases of the CDS read as a base or a deletion (not N, not uncovered)
    length: int
    frameshifts: list[str]  #: codon ranges this gene's frame is shifted over (``257-276``), merged
    stops: list[str]  #: premature stop codons ("Q1071*")

    @property
    def coverage(self) -> float:
        """Called share of the CDS (see :func:`called_share`)."""
        return self.called / self.length if self.length else 0.0


def called_share(text: str) -> tuple[int, float]:
    """``(called, share)``: the one definition of coverage used on every card. A position is
    *called* when the sequence gives a base there (A C G T, an ambiguity code) or a deletion;
    N and uncovered positions (written N) are not. So coverage + N share = 100 %."""
    called = len(text) - text.count("N")
    return called, (called / len(text) if text else 0.0)


@dataclass
class MutationReport:
    """All mutations of one sequence: genome-wide nucleotide changes (spike-only when only a spike
    cut was available), amino-acid changes per gene (``genes``; ``amino_acid`` is the spike's), and
    ambiguous spike positions."""

    nucleotide: list[NucMutation]
    amino_acid: list[AaMutation]
    spike_only: bool  # True when only the spike was examined
    ambiguous_spike_positions: list[int] = field(default_factory=list)  # genome 1-based
    genes: dict[str, GeneReport] = field(default_factory=dict)  #: every gene examined, genome order

    @property
    def events(self) -> list[AaEvent]:
        """Every gene's table rows, genome order."""
        return [e for g in self.genes.values() for e in g.events]

    @property
    def other_nucleotide(self) -> list[NucMutation]:
        """Nucleotide changes that change no amino acid (synonymous, non-coding, indels between genes)."""
        return [m for m in self.nucleotide if not m.aa_changes]

    @property
    def spike_nucleotide(self) -> list[NucMutation]:
        return [m for m in self.nucleotide if m.in_spike]

    def nuc_names(self, spike_only: bool = False) -> list[str]:
        return [m.name for m in (self.spike_nucleotide if spike_only else self.nucleotide)]

    def aa_names(self, grouped: bool = True) -> list[str]:
        """Spike amino-acid names in order, as Nextclade names them (one ``H69-`` per deleted residue;
        ``grouped`` is kept for callers of the earlier grouped form and no longer changes anything)."""
        return [m.name for m in self.amino_acid]

    def has(self, name: str) -> bool:
        """True if a nucleotide or amino-acid mutation of that name is present (either style)."""
        return name in self._names

    @functools.cached_property
    def _names(self) -> frozenset[str]:
        return frozenset(self.nuc_names()) | frozenset(self.aa_names(True)) | frozenset(self.aa_names(False))


def _dom(aa: int | None) -> tuple[str | None, str | None]:
    if aa is None or not 1 <= aa <= SPIKE_AA_LEN:
        return None, None
    d = domain_of_aa(aa)
    return d.fine, d.coarse


def sub_name(pos: int, alt: str) -> str:
    """``A23063T`` for a substitution at genome ``pos``."""
    return f"{reference_sequence()[pos - 1]}{pos}{alt}"


def aa_effect_of_sub(pos: int, alt: str) -> str | None:
    """Spike amino-acid change of one substitution on the reference background (``None`` if
    synonymous or outside the spike CDS): ``aa_effect_of_sub(23063, "T") == "N501Y"``."""
    aa = aa_of_genome_pos(pos)
    if aa is None or aa > SPIKE_AA_LEN:
        return None
    spike = reference_spike()
    off = pos - SPIKE_START
    c0 = (aa - 1) * 3
    codon = spike[c0 : c0 + 3]
    mut = codon[: off - c0] + alt + codon[off - c0 + 1 :]
    r, q = translate_codon(codon), translate_codon(mut)
    return None if r == q else f"{r}{aa}{q}"


#: Bool per byte value: an A, C, G or T (a called base that can be a substitution).
_IS_ACGT = np.zeros(256, dtype=bool)
_IS_ACGT[np.frombuffer(b"ACGT", dtype=np.uint8)] = True
#: Bool per byte value: a character of a spike without ambiguity codes (A C G T N -).
_IS_PLAIN = np.zeros(256, dtype=bool)
_IS_PLAIN[np.frombuffer(b"ACGTN-", dtype=np.uint8)] = True


@functools.lru_cache(maxsize=4)
def _codon_layout(examined: tuple[str, ...], offset: int) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Per-process constants of :func:`call_mutations` for ``examined`` genes of a text starting at
    genome ``offset``: the text index of every base of every residue's codon, gene after gene
    (``(n, 3)``, its rows the codons), where each gene's codons begin (``len(examined) + 1``
    bounds), the shortest text that holds them all, and per text position the codons holding it
    (``-1`` pads: overlapping genes give a base two)."""
    from .genes import load_genes

    genes = load_genes()
    idx, bounds = [], [0]
    for g in examined:
        gene = genes[g]
        first = gene.start - offset + 3 * np.arange(gene.n_codons)
        idx.append(first[:, None] + np.arange(3))
        bounds.append(bounds[-1] + gene.n_codons)
    codons = np.concatenate(idx)
    needed = int(codons.max()) + 1
    depth = np.bincount(codons.ravel(), minlength=needed)
    codons_at = np.full((needed, int(depth.max())), -1, dtype=np.int64)
    filled = np.zeros(needed, dtype=np.int64)
    for row, bases in enumerate(codons.tolist()):
        for b in bases:
            codons_at[b, filled[b]] = row
            filled[b] += 1
    out = (np.ascontiguousarray(codons), np.asarray(bounds), codons_at)
    for a in out:
        a.setflags(write=False)  # shared by every call (and thread) of the process
    return out[0], out[1], needed, out[2]


def _touches(gene, deletions, insertions) -> bool:
    """True when an indel lies (partly) in ``gene``'s CDS, as :func:`gene_aa_mutations` tests it."""
    g0, g1 = gene.start, gene.end
    return (any(max(p, g0) <= min(p + n - 1, g1) for p, n in deletions)
            or any(g0 <= p < g1 for p, _ in insertions))


#: Where :func:`call_mutations` reads the indels: Nextclade's places (the names), or the alignment's own.
INDEL_PLACES = ("nextclade", "alignment")


def call_mutations(aln: GenomeAlignment | SpikeCut, defs: CladeDefinitions | None = None,
                   cut: SpikeCut | None = None, indel_places: str = "nextclade") -> MutationReport:
    """Nucleotide mutations and every gene's amino-acid changes of an alignment (whole genome, or a
    spike cut: gene S only); ``cut``: the genome's spike cut when the caller already has it. The
    indels are read where Nextclade places them (:func:`~.align.nextclade_placement`), so the names
    are Nextclade's (``21992-21994`` for Alpha's S:Y144-); ``indel_places="alignment"`` reads them
    where the alignment has them (minimap2's ``21991-21993``), for tables checked against the aligned
    text itself (the characteristic markers, the training spike profiles the model's data come from).

    Vectorised: one comparison with the reference finds the substituted bases, one over every gene's
    codons at once the codons that differ; a gene neither touches nor an indel reaches is not read
    further. Each record is built once (the names, the codons and the events first). Equal, field
    for field, to the per-gene version it replaced (bench/reference_genome_prep.py, held to it by
    tests/test_genome_prep_reference.py)."""
    defs = defs or load_clade_definitions()
    ref = reference_sequence()
    if isinstance(aln, GenomeAlignment):
        cut = cut or cut_spike(aln)
        text, offset, spike_only, covered = aln.aligned, 1, False, aln.covered
    else:
        cut = aln
        text, offset, spike_only, covered = aln.aligned, SPIKE_START, True, aln.covered_mask()
    if indel_places not in INDEL_PLACES:
        raise ValueError(f"indel_places must be one of {INDEL_PLACES}, not {indel_places!r}")
    inss, dels = aln.insertions, aln.deletions
    if indel_places == "nextclade":  # named as Nextclade places the indels (on codon boundaries where a repeat allows)
        text, inss, dels = nextclade_placement(text, covered, inss, dels, offset)
    q = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    r = np.frombuffer(ref[offset - 1 : offset - 1 + len(text)].encode("ascii"), dtype=np.uint8)
    changed = q != r
    cand = np.flatnonzero(changed)  # a few hundred positions: substitutions, deletions, N
    idx = cand[_IS_ACGT[q[cand]]]

    from .genes import load_genes

    genes = load_genes()
    examined = ("S",) if spike_only else tuple(genes)
    codons, bounds, needed, codons_at = _codon_layout(examined, offset)
    if len(q) >= needed:
        # the codons holding a changed base; of those, the ones whose bases hold no N differ
        hit = np.zeros(len(codons), dtype=bool)
        rows = codons_at[cand[cand < needed]].ravel()
        hit[rows[rows >= 0]] = True
        rows = np.flatnonzero(hit)
        is_n = q[codons[rows]] == ord("N")
        differ = rows[~(is_n[:, 0] | is_n[:, 1] | is_n[:, 2])]
        per_gene = np.split(differ, np.searchsorted(differ, bounds[1:-1]))
    else:  # pragma: no cover - aligned texts always span their genes; else each gene finds its own
        per_gene = [None] * len(examined)
    gene_aa: dict[str, tuple[list[_AaRow], dict[int, str]]] = {}
    for k, g in enumerate(examined):
        gene = genes[g]
        diff = per_gene[k]
        if diff is not None and not len(diff) and not _touches(gene, dels, inss):
            gene_aa[g] = ([], {})
            continue
        gtext = text[gene.start - offset : gene.end - offset + 1]
        gene_aa[g] = _gene_aa_mutations(gene, gtext, dels, inss, None if diff is None else diff - bounds[k])
    codon_aa = gene_aa["S"][1]

    # (kind, pos, ref, alt, name, spike residue, defining clades) of every change, genome order
    rows: list[tuple] = []
    for i in idx.tolist():
        pos = i + offset
        alt, rb = chr(q[i]), ref[pos - 1]
        aa = (pos - SPIKE_START) // 3 + 1 if SPIKE_START <= pos <= SPIKE_END else None
        aa = aa if aa is not None and aa <= SPIKE_AA_LEN else None
        rows.append(("sub", pos, rb, alt, f"{rb}{pos}{alt}", aa, defs.defining_clades(pos, alt)))
    for p, n in dels:
        aa = aa_of_genome_pos(p)
        aa = aa if aa is not None and aa <= SPIKE_AA_LEN else None
        rows.append(("del", p, ref[p - 1 : p - 1 + n], "", nuc_deletion_name(p, n), aa, ()))
    for p, b in inss:
        aa = aa_of_genome_pos(p) if SPIKE_START <= p < SPIKE_END else None
        rows.append(("ins", p, "", b, nuc_insertion_name(p, b), aa, ()))
    rows.sort(key=lambda m: (m[1], m[0]))
    sub_clades = {m[4]: m[6] for m in rows if m[0] == "sub"}  # the clades defined by each substitution

    # attach nucleotide names to amino-acid changes, gene by gene
    spans = []  # (first, last, name): the bases each change touches (an insertion: the base before it)
    for kind, pos, rb, alt, name, _, _ in rows:
        if kind == "ins":
            spans.append((pos, pos, name))
        else:
            spans.append((pos, pos + max(len(rb), 1) - 1 if kind == "del" else pos, name))
    span_first = np.fromiter((a for a, _, _ in spans), dtype=np.int64, count=len(spans))
    span_last = np.fromiter((b for _, b, _ in spans), dtype=np.int64, count=len(spans))
    shifting = [(m[1], m[1] + max(len(m[2]), 1) - 1, m[4]) for m in rows
                if m[0] in ("del", "ins") and (len(m[2]) + len(m[3])) % 3]
    reports: dict[str, GeneReport] = {}
    events_of_nuc: dict[str, list[str]] = {}
    for g in examined:
        gene = genes[g]
        gtext = text[gene.start - offset : gene.end - offset + 1]
        called, _ = called_share(gtext)
        aa_list = gene_aa[g][0]
        if not aa_list:
            reports[g] = GeneReport(g, [], [], called, gene.length, [], [])
            continue
        by_codon: dict[int, list[str]] = {}
        for j in np.flatnonzero((span_last >= gene.start) & (span_first <= gene.end)).tolist():
            first, last, name = spans[j]
            c0 = gene.codon_of(max(first, gene.start))
            c1 = gene.codon_of(min(last, gene.end)) or gene.n_codons
            if c0 is None:
                continue
            for c in range(c0, c1 + 1):
                by_codon.setdefault(c, []).append(name)
        full = []
        for m in aa_list:
            if m.kind == "fs":  # the indels that open or close the shifted range
                lo, hi = gene.codon_span(max(m.pos - 1, 1))[0], gene.codon_span(m.end)[1]
                names = tuple(name for a, b, name in shifting if a <= hi and lo <= b)
            else:
                names = tuple(by_codon.get(m.pos, ()))
            clades = tuple(sorted({c for n in names for c in sub_clades.get(n, ())}))
            full.append(AaMutation(m.kind, m.pos, m.ref, m.alt, m.name, m.domain, m.coarse_domain, names, clades, g,
                                   m.end))
        events = group_events(g, full)
        for e in events:
            for n in e.nuc:
                events_of_nuc.setdefault(n, []).append(e.qualified)
        fs = [m.name for m in full if m.kind == "fs"]
        reports[g] = GeneReport(g, full, events, called, gene.length, fs, [m.name for m in full if m.kind == "stop"])
    nuc = []
    for kind, pos, rb, alt, name, aa, clades in rows:
        fine, coarse = _dom(aa)
        nuc.append(NucMutation(kind, pos, rb, alt, name, aa, fine, coarse, codon_aa.get(aa), clades,
                               tuple(events_of_nuc.get(name, ()))))
    aa_full = reports["S"].aa

    other = ~_IS_PLAIN[np.frombuffer(cut.aligned.encode("ascii"), dtype=np.uint8)]  # neither A C G T N nor -
    amb = (np.flatnonzero(other) + SPIKE_START).tolist()
    return MutationReport(nuc, aa_full, spike_only, amb, reports)


#: The columns :func:`nextclade_columns` writes, named and ordered as in Nextclade's TSV output.
MUTATION_COLUMNS: tuple[str, ...] = (
    "substitutions", "deletions", "insertions", "frameShifts", "aaSubstitutions", "aaDeletions", "aaInsertions",
    "missing", "nonACGTNs", "alignmentStart", "alignmentEnd", "totalSubstitutions", "totalDeletions",
    "totalInsertions", "totalFrameShifts", "totalAminoacidSubstitutions", "totalAminoacidDeletions",
    "totalAminoacidInsertions", "totalMissing", "totalNonACGTNs",
)


def _position_ranges(positions: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted 1-based positions as closed runs ``(first, last)`` of consecutive positions."""
    runs: list[tuple[int, int]] = []
    for p in sorted(positions):
        if runs and p == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    return runs


def _range_name(first: int, last: int) -> str:
    """``1-54`` for a run, ``1234`` for one position (Nextclade's form)."""
    return f"{first}" if first == last else f"{first}-{last}"


def _aligned_span(aln: GenomeAlignment) -> tuple[int, int]:
    """1-based first and last reference positions the query spans, as Nextclade's alignment would: the
    covered span widened by query bases left unplaced beyond either end (an N padding minimap2 clips,
    which Nextclade aligns and reports as missing)."""
    covered = np.flatnonzero(aln.covered)
    if not len(covered) or not aln.segments:
        return 0, 0
    first, last = int(covered[0]), int(covered[-1])  # 0-based
    q_first, _, r_first, _ = aln.segments[0]
    _, q_last, _, r_last = aln.segments[-1]
    before = q_first - (r_first - first)  # query bases before the first covered one
    after = (aln.query_len - q_last) - (last + 1 - r_last)
    return max(first - max(before, 0), 0) + 1, min(last + max(after, 0), len(aln.aligned) - 1) + 1


def nextclade_columns(report: MutationReport, alignment: GenomeAlignment | None = None) -> dict[str, str]:
    """One sequence's mutations as the columns of Nextclade's TSV (:data:`MUTATION_COLUMNS`), each a
    string written as current Nextclade writes it, so a row can be compared or joined with Nextclade's:

    * ``substitutions`` ``C241T,A23063T``; ``deletions`` as closed ranges ``21765-21770,28271``;
      ``insertions`` ``22204:GAGCCAGAA`` (after that reference base);
    * ``frameShifts`` ``ORF3a:257-276`` (1-based codon range), ``aaSubstitutions`` ``S:N501Y`` (stops
      included, ``ORF8:Q27*``), ``aaDeletions`` ``S:H69-``, ``aaInsertions`` ``S:214:EPE``: genes in
      alphabetical order then by residue, as Nextclade lists them, genes outside Nextclade's annotation
      (ORF10) left out;
    * ``missing`` ``1-54,29837-29903`` (N runs), ``nonACGTNs`` ``R:1234,Y:3000-3001`` (runs of one
      ambiguity code), ``alignmentStart``/``alignmentEnd`` (1-based, inclusive) and the ``total*``
      counts (``totalDeletions``/``totalInsertions``/``totalMissing`` count bases, the others items).

    ``missing``, ``nonACGTNs``, the alignment's span and their totals need the genome's ``alignment``
    (without it they are empty strings); a spike-only report gives the spike's changes only. Written for
    classify's ``--output-tsv``."""
    from .genes import NOT_IN_NEXTCLADE

    subs = [m for m in report.nucleotide if m.kind == "sub"]
    dels = [m for m in report.nucleotide if m.kind == "del"]
    inss = [m for m in report.nucleotide if m.kind == "ins"]
    shown = sorted((g for g in report.genes if g not in NOT_IN_NEXTCLADE), key=str)
    events = [e for g in shown for e in sorted(report.genes[g].events, key=lambda e: e.start)]
    aa_subs = [e.qualified for e in events if e.kind in ("sub", "stop")]
    aa_dels = [e.qualified for e in events if e.kind == "del"]
    aa_inss = [e.qualified for e in events if e.kind == "ins"]
    frameshifts = [f"{g}:{name}" for g in shown for name in report.genes[g].frameshifts]
    out = {
        "substitutions": ",".join(m.name for m in subs),
        "deletions": ",".join(m.name for m in dels),
        "insertions": ",".join(m.name for m in inss),
        "frameShifts": ",".join(frameshifts),
        "aaSubstitutions": ",".join(aa_subs),
        "aaDeletions": ",".join(aa_dels),
        "aaInsertions": ",".join(aa_inss),
        "missing": "", "nonACGTNs": "", "alignmentStart": "", "alignmentEnd": "",
        "totalSubstitutions": str(len(subs)),
        "totalDeletions": str(sum(len(m.ref) for m in dels)),
        "totalInsertions": str(sum(len(m.alt) for m in inss)),
        "totalFrameShifts": str(len(frameshifts)),
        "totalAminoacidSubstitutions": str(len(aa_subs)),
        "totalAminoacidDeletions": str(len(aa_dels)),
        "totalAminoacidInsertions": str(len(aa_inss)),
        "totalMissing": "", "totalNonACGTNs": "",
    }
    if alignment is not None:
        start, end = _aligned_span(alignment)
        text = nextclade_placement(alignment.aligned, alignment.covered, alignment.insertions,
                                   alignment.deletions).aligned  # N runs beside the gaps as the names place them
        q = np.frombuffer(text.encode("ascii"), dtype=np.uint8)[max(start - 1, 0) : end]
        # missing data: N where the query has N (inside the covered span, or an N padding at its ends);
        # positions its unplaced real bases would take are not missing
        m_first, m_last = alignment.missing_span() or (0, -1)
        inside = np.arange(start, start + len(q))
        n_positions = (inside[(q == ord("N")) & (inside >= m_first + 1) & (inside <= m_last + 1)]).tolist()
        ambiguous: dict[str, list[int]] = {}
        for i in np.flatnonzero(~_IS_PLAIN[q]).tolist():  # neither A C G T N nor -
            ambiguous.setdefault(chr(q[i]), []).append(i + start)
        codes = sorted((first, last, code) for code, ps in ambiguous.items() for first, last in _position_ranges(ps))
        out.update({
            "missing": ",".join(_range_name(a, b) for a, b in _position_ranges(n_positions)),
            "nonACGTNs": ",".join(f"{code}:{_range_name(a, b)}" for a, b, code in codes),
            "alignmentStart": str(start) if start else "",
            "alignmentEnd": str(end) if end else "",
            "totalMissing": str(len(n_positions)),
            "totalNonACGTNs": str(sum(len(ps) for ps in ambiguous.values())),
        })
    return {k: out[k] for k in MUTATION_COLUMNS}


def _spike_aa_mutations(cut: SpikeCut, defs: CladeDefinitions | None = None) -> tuple[list[AaMutation], dict[int, str]]:
    """Spike amino-acid changes of a cut, and ``{residue: name}`` of the change at each residue."""
    from .genes import load_genes

    return gene_aa_mutations(load_genes()["S"], cut.aligned, cut.deletions, cut.insertions)


@functools.lru_cache(maxsize=1)
def blosum62() -> dict[tuple[str, str], int]:
    """The BLOSUM62 amino-acid substitution scores (NCBI's matrix, shipped as ``definitions/blosum62.txt``)."""
    lines = [line for line in data_path("definitions", "blosum62.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    cols = lines[0].split()
    out = {}
    for line in lines[1:]:
        parts = line.split()
        for c, v in zip(cols, parts[1:]):
            out[(parts[0], c)] = int(float(v))
    return out


def _deletion_placement(ref_aas: str, q_aas: str, k: int) -> int:
    """Where ``k`` deleted residues sit among the ``len(ref_aas)`` codons an in-frame but out-of-phase
    deletion touches: the placement whose remaining residues best match ``q_aas`` by BLOSUM62, as a
    peptide alignment (Nextclade's) places them; ties put the gaps last (Delta: E156G del157-158;
    BA.2: del24-26 A27S; Lambda: del246-252 D253N). Returns the index of the first deleted codon."""
    m = len(ref_aas)
    b = blosum62()
    best, best_score = m - k, None
    for j in range(m - k, -1, -1):
        rest = ref_aas[:j] + ref_aas[j + k :]
        score = sum(b.get((r, q), -4) if q != "X" else 0 for r, q in zip(rest, q_aas))
        if best_score is None or score > best_score:
            best, best_score = j, score
    return best


def frameshift_leading_deletions(offset: int, length: int, shift_begins: set[int], n_codons: int) -> range:
    """0-based codons a frameshifting deletion (``length`` bases from gene offset ``offset``, 0-based)
    removes before the frame it shifts begins: every codon it touches up to the first codon of the
    shifted range, when it is the deletion that opens a range of ``shift_begins``; empty otherwise.
    Nextclade lists them as deleted residues beside the frameshift (Delta's ORF7a 27498-27616:
    ``C35-`` .. ``V74-`` and ``ORF7a:75-122``; Mu's ORF3a 26158-26161: ``V256-`` and ``ORF3a:257-276``)."""
    first_shifted = (offset + length) // 3
    if first_shifted not in shift_begins:
        return range(0)
    return range(offset // 3, min(first_shifted, n_codons))


def frameshift_ranges(gene, deletions: Iterable[tuple[int, int]], insertions: Iterable[tuple[int, str]]
                      ) -> list[tuple[int, int]]:
    """The codon ranges ``[begin, end)`` (0-based, Nextclade's JSON convention) over which the
    indels shift ``gene``'s reading frame. A range opens at the first reference base read in the
    shifted frame (after a deletion, or after an insertion's bases) and closes before the indel that
    restores the frame, or at the gene's last codon (its stop counted, so ``N`` ends at 420):
    two indels that compensate each other give one range, as in Nextclade."""
    g0, g1 = gene.start, gene.end
    events = []  # (first reference base of the indel, first reference base after it, frame change)
    for p, n in deletions:
        a, b = max(p, g0), min(p + n - 1, g1)
        if a <= b and (b - a + 1) % 3:
            events.append((a, b + 1, -(b - a + 1)))
    for p, bases in insertions:
        if g0 <= p < g1 and len(bases) % 3:
            events.append((p + 1, p + 1, len(bases)))
    n_codons = gene.length // 3
    out: list[tuple[int, int]] = []
    frame, since = 0, None
    for start, after, delta in sorted(events):
        before, frame = frame, (frame + delta) % 3
        if before == 0 and frame != 0:
            since = (after - g0) // 3
        elif before != 0 and frame == 0 and since is not None:
            end = (start - 1 - g0) // 3 + 1
            if end > since:
                out.append((since, min(end, n_codons)))
            since = None
    if since is not None and since < n_codons:
        out.append((since, n_codons))
    return out


def gene_aa_mutations(gene, text: str, deletions: Iterable[tuple[int, int]], insertions: Iterable[tuple[int, str]]
                      ) -> tuple[list[AaMutation], dict[int, str]]:
    """Amino-acid changes of one gene from its aligned text (``gene.length`` characters in reference
    coordinates, ``-`` deleted, ``N`` missing) and the genome indels touching it; with
    ``{residue: name}`` of the change at each residue. Names follow Nextclade (module docstring)."""
    rows, codon_aa = _gene_aa_mutations(gene, text, deletions, insertions, None)
    return [AaMutation(m.kind, m.pos, m.ref, m.alt, m.name, m.domain, m.coarse_domain, gene=gene.name, end=m.end)
            for m in rows], codon_aa


class _AaRow(NamedTuple):
    """An amino-acid change before its nucleotides are known (an :class:`AaMutation` is built once,
    with them: a frozen dataclass costs several microseconds to build)."""

    kind: str
    pos: int
    ref: str
    alt: str
    name: str
    domain: str | None
    coarse_domain: str | None
    end: int = 0


def _gene_aa_mutations(gene, text: str, deletions: Iterable[tuple[int, int]], insertions: Iterable[tuple[int, str]],
                       differ: np.ndarray | None) -> tuple[list[_AaRow], dict[int, str]]:
    """:func:`gene_aa_mutations` as :class:`_AaRow` rows, given (when not ``None``) the 0-based
    residues whose codon differs from the reference and holds no N, as :func:`call_mutations` finds
    them for every gene at once."""
    s = text
    g0, g1 = gene.start, gene.end
    prot = gene.protein
    n_aa = len(prot)
    spike = gene.name == "S"
    handled: set[int] = set()  # 0-based codon indices dealt with by indel logic
    out: list[_AaRow] = []

    def add(kind: str, pos: int, ref_aa: str, alt: str, name: str) -> None:
        fine, coarse = _dom(pos) if spike else (None, None)
        out.append(_AaRow(kind, pos, ref_aa, alt, name, fine, coarse))

    shifted = frameshift_ranges(gene, deletions, insertions)
    shift_begins = {begin for begin, _ in shifted}
    for p, n in deletions:
        a, b = max(p, g0), min(p + n - 1, g1)
        if a > b:
            continue
        p, n = a, b - a + 1
        s0 = p - g0
        e0 = s0 + n
        cs, ce = s0 // 3, min(-(-e0 // 3), n_aa)
        if cs >= n_aa:
            continue
        if n % 3:  # named below as the codon range it shifts, after the residues it deletes first
            for i in frameshift_leading_deletions(s0, n, shift_begins, n_aa):
                add("del", i + 1, prot[i], "-", f"{prot[i]}{i + 1}-")
            handled.update(range(cs, ce))
            continue
        k = n // 3
        region = s[3 * cs : 3 * ce]
        qbases = region.replace("-", "")
        m = ce - cs
        if len(qbases) != 3 * (m - k):  # another indel in the same codons: name per codon
            continue
        q_aas = translate(qbases)
        best_j = _deletion_placement(prot[cs:ce], q_aas, k)
        rest_idx = [cs + i for i in range(m) if not best_j <= i < best_j + k]
        for i in range(cs + best_j, cs + best_j + k):
            add("del", i + 1, prot[i], "-", f"{prot[i]}{i + 1}-")
        for ci, qa in zip(rest_idx, q_aas):
            if qa not in ("X", prot[ci]):
                kind = "stop" if qa == "*" else "sub"
                add(kind, ci + 1, prot[ci], qa, f"{prot[ci]}{ci + 1}{qa}")
        handled.update(range(cs, ce))

    for p, b in insertions:
        if not g0 <= p < g1:
            continue
        o = p - g0  # 0-based gene offset of the base before the insertion
        L = len(b)
        c = o // 3
        if c >= n_aa:
            continue
        if L % 3:  # named below as the codon range it shifts
            handled.add(c)
            continue
        if (o + 1) % 3 == 0:  # between codons c and c+1
            add("ins", c + 1, "", translate(b), f"{c + 1}:{translate(b)}")
            continue
        codon = s[3 * c : 3 * c + 3]
        cut_at = o % 3 + 1
        aas = translate(codon[:cut_at] + b + codon[cut_at:])
        r = prot[c]
        if aas[0] == r:
            add("ins", c + 1, "", aas[1:], f"{c + 1}:{aas[1:]}")
        elif aas[-1] == r:
            add("ins", c, "", aas[:-1], f"{c}:{aas[:-1]}")
        else:  # neither end keeps the residue: inserted before it, the last residue substituted
            add("ins", c, "", aas[:-1], f"{c}:{aas[:-1]}")
            if aas[-1] != "X":
                add("stop" if aas[-1] == "*" else "sub", c + 1, r, aas[-1], f"{r}{c + 1}{aas[-1]}")
        handled.add(c)

    # codons read out of frame (after a frameshifting indel, up to one that restores the frame):
    # their residues are not called, as Nextclade masks a frameshift's range; each range is one
    # frameshift named by its codons (a compensated pair of indels is one range)
    for begin, end in shifted:
        handled.update(range(begin, min(end, n_aa)))
        ref_aa = prot[begin] if begin < n_aa else "*"
        fine, coarse = _dom(begin + 1) if spike else (None, None)
        out.append(_AaRow("fs", begin + 1, ref_aa, "fs", f"{begin + 1}-{end}", fine, coarse, end))

    # plain codon substitutions (vectorised pre-filter on differing codons)
    if differ is None:
        ref_s = reference_sequence()[g0 - 1 : g1]
        q = np.frombuffer(s[: 3 * n_aa].encode("ascii"), dtype=np.uint8).reshape(-1, 3)
        rr = np.frombuffer(ref_s[: 3 * n_aa].encode("ascii"), dtype=np.uint8).reshape(-1, 3)
        differ = np.flatnonzero((q != rr).any(axis=1) & ~(q == ord("N")).any(axis=1))
    for c in differ.tolist():
        if c in handled:
            continue
        codon = s[3 * c : 3 * c + 3]
        if "-" in codon:
            continue  # part of a deletion already named
        qa = translate_codon(codon)
        if qa in ("X", prot[c]):
            continue
        kind = "stop" if qa == "*" else "sub"
        add(kind, c + 1, prot[c], qa, f"{prot[c]}{c + 1}{qa}")

    order = {"del": 0, "sub": 1, "stop": 1, "fs": 1, "ins": 2}
    out.sort(key=lambda m: (m.pos, order[m.kind]))
    codon_aa: dict[int, str] = {}
    for m in out:
        if m.kind != "ins":
            codon_aa.setdefault(m.pos, m.name)
    return out, codon_aa


# --------------------------------------------------------------------------------------------
# Class-level helpers
# --------------------------------------------------------------------------------------------

#: Spike marker of the GISAID clade GH (D614G). The gh class ("pre-VOC") spans 19A/19B, which lack
#: it, so the intersection of its clades is empty; the UI uses GH's marker instead.
GH_SPIKE_MARKERS: tuple[tuple[int, str], ...] = ((23403, "G"),)


def _nuc_from_site(pos: int, alt: str, defs: CladeDefinitions) -> NucMutation:
    aa = aa_of_genome_pos(pos)
    aa = aa if aa is not None and aa <= SPIKE_AA_LEN else None
    fine, coarse = _dom(aa)
    ref = reference_sequence()[pos - 1]
    return NucMutation("sub", pos, ref, alt, f"{ref}{pos}{alt}", aa, fine, coarse,
                       aa_effect_of_sub(pos, alt), defs.defining_clades(pos, alt))


def class_defining_mutations(cls: str, clade: str | None = None, mode: str = "core",
                             defs: CladeDefinitions | None = None) -> list[NucMutation]:
    """Spike nucleotide substitutions that define class ``cls``, for highlighting present/missing.

    * ``clade`` given: that clade's inherited spike mutations (it must belong to ``cls``);
    * ``mode="core"``: mutations shared by every clade of the class (its common ancestor's set,
      e.g. lambda -> 21G: ..., L452Q, F490S ...); for ``gh`` GH's spike marker D614G;
    * ``mode="union"``: mutations of any clade of the class (what a member *may* carry).
    """
    defs = defs or load_clade_definitions()
    if clade is not None:
        if clade_to_class(clade) != cls:
            raise ValueError(f"clade {clade} is not in class {cls}")
        sites = defs.mutations(clade, spike_only=True)
    else:
        clades = defs.clades_of_class(cls)
        sets = [set(defs.mutations(c, spike_only=True).items()) for c in clades]
        if mode == "union":
            sites = dict(sorted(set().union(*sets)))
        elif mode == "core":
            if cls == "gh":
                sites = dict(GH_SPIKE_MARKERS)
            else:
                sites = dict(sorted(set.intersection(*sets))) if sets else {}
        else:
            raise ValueError("mode must be 'core' or 'union'")
    return [_nuc_from_site(p, b, defs) for p, b in sorted(sites.items())]


#: Profile mutations at least this frequent in a class's training genomes count as expected.
EXPECTED_MIN_FREQ = 0.2


@dataclass(frozen=True)
class ProfileEntry:
    """One row of the shipped spike profiles: a spike mutation and its frequency in a group of
    real *training-split* genomes (see :func:`bertgeom.sars_cov_2.genome.shipped_files.spike_profiles`)."""

    kind: str  # "sub", "del", "ins"
    pos: int  # genome 1-based (as NucMutation)
    ref: str
    alt: str
    name: str
    aa: str
    freq: float
    n_genomes: int


@functools.lru_cache(maxsize=1)
def load_spike_profiles() -> dict[tuple[str, str], list[ProfileEntry]]:
    """``{("class", "delta"): [...], ("clade", "21J"): [...]}`` from
    ``definitions/spike_profiles_train.tsv`` (empty if the file is absent)."""
    path = data_path("definitions", "spike_profiles_train.tsv")
    out: dict[tuple[str, str], list[ProfileEntry]] = {}
    if not path.exists():
        return out
    lines = path.read_text().splitlines()
    head = lines[0].split("\t")
    for line in lines[1:]:
        r = dict(zip(head, line.split("\t")))
        e = ProfileEntry(r["kind"], int(r["pos"]), r["ref"], r["alt"], r["mutation"], r.get("aa", ""),
                         float(r["freq"]), int(r["n_genomes"]))
        out.setdefault((r["group_type"], r["group"]), []).append(e)
    return out


@functools.lru_cache(maxsize=16)
def class_expected_sites(cls: str) -> frozenset[tuple[int, str]]:
    """``(pos, alt)`` of the spike substitutions expected in class ``cls``: those of any of its
    clades in the definitions, plus those carried by at least :data:`EXPECTED_MIN_FREQ` of the
    class's real training genomes (the definitions list few spike sites for e.g. Omicron)."""
    defs = load_clade_definitions()
    out: set[tuple[int, str]] = set()
    for c in defs.clades_of_class(cls):
        out.update(defs.mutations(c, spike_only=True).items())
    for e in load_spike_profiles().get(("class", cls), []):
        if e.kind == "sub" and e.freq >= EXPECTED_MIN_FREQ:
            out.add((e.pos, e.alt))
    return frozenset(out)


@dataclass(frozen=True)
class CladeCall:
    """A clade call: from the reference tree's placement (the pipeline's, with ``lineage``), or the
    nearest clade by the definitions (:func:`nearest_clade`), where ``matches``/``mismatches`` count
    defining sites where the sequence has the clade's base / another base and ``missing`` sites are N
    or not covered."""

    clade: str
    cls: str
    display: str
    matches: int = 0
    mismatches: int = 0
    missing: int = 0
    lineage: str = ""  #: the Pango lineage, when the call comes from the reference tree


#: A clade site the genome contradicts (another base read there) weighs this many matching sites: a
#: deeper clade is chosen only when its extra matches clearly outweigh what contradicts it.
MISMATCH_WEIGHT = 4


def nearest_clade(aln: GenomeAlignment | SpikeCut, classes: Iterable[str] | None = None,
                  defs: CladeDefinitions | None = None, mismatch_weight: int = MISMATCH_WEIGHT) -> CladeCall:
    """The deepest clade the genome is consistent with: score = matches - ``mismatch_weight`` x
    mismatches over the clade's inherited sites (N or uncovered sites count neither way). Ties go to
    a clade one of whose own sites (those its parent lacks) the genome carries (a descendant whose
    own sites are all N, e.g. outside a spike-only input, is not credited), then to the deeper clade,
    and between siblings of equal depth (23A and 23D, whose own sites an XBB.1.9 genome all carries:
    F486P and ORF8:G8* arose in both) to the later-designated one, the more specific name (Nextstrain
    numbers clades in order of designation)."""
    defs = defs or load_clade_definitions()
    if isinstance(aln, GenomeAlignment):
        text, offset = aln.aligned, 1
    else:
        text, offset = aln.aligned, SPIKE_START
    allowed = set(classes) if classes is not None else None
    lay = defs.site_layout
    clades = defs.clades
    n = len(clades)
    q = np.frombuffer(text.encode("ascii"), dtype=np.uint8)

    def bases_at(pos: np.ndarray) -> np.ndarray:  # the text's base at genome ``pos``, N outside it
        i = pos - offset
        inside = (i >= 0) & (i < len(q))
        out = np.full(len(pos), ord("N"), dtype=np.int64)
        out[inside] = q[i[inside]]
        return out

    base = bases_at(lay["pos"])
    called = _IS_ACGT[base]
    same = called & (base == lay["base"])
    m = np.bincount(lay["clade"], weights=same, minlength=n).astype(np.int64).tolist()
    mm = np.bincount(lay["clade"], weights=called & ~same, minlength=n).astype(np.int64).tolist()
    miss = np.bincount(lay["clade"], weights=~called, minlength=n).astype(np.int64).tolist()
    has_own = np.bincount(lay["own_clade"], minlength=n) > 0
    carried = np.bincount(lay["own_clade"], weights=bases_at(lay["own_pos"]) == lay["own_base"], minlength=n) > 0
    supported = (~has_own | carried).tolist()
    best = None
    for order, c in enumerate(clades):
        cls = lay["cls"][order]
        if allowed is not None and cls not in allowed:
            continue
        key = (m[order] - mismatch_weight * mm[order], supported[order], lay["depth"][order], order)
        if best is None or key > best[0]:
            best = (key, order)
    if best is None:
        raise ValueError("no clade in the requested classes")
    k = best[1]
    c = clades[k]
    return CladeCall(c, lay["cls"][k], defs.display.get(c, c), m[k], mm[k], miss[k])


def spike_sites_of(aligned_spike: str, sites: Iterable[tuple[int, str]]) -> dict[str, str]:
    """For UI highlighting: each defining ``(pos, alt)`` -> "present", "absent" or "missing" (N/gap)."""
    out = {}
    ref = reference_sequence()
    for p, b in sites:
        base = aligned_spike[p - SPIKE_START] if SPIKE_START <= p <= SPIKE_END else "N"
        name = f"{ref[p - 1]}{p}{b}"
        out[name] = "present" if base == b else ("missing" if base not in "ACGT" else "absent")
    return out


__all__ = [
    "AaMutation", "CladeCall", "CladeDefinitions", "MutationReport", "NucMutation", "GH_SPIKE_MARKERS",
    "aa_effect_of_sub", "call_mutations", "class_defining_mutations", "class_expected_sites",
    "load_clade_definitions", "load_spike_profiles", "ProfileEntry", "EXPECTED_MIN_FREQ", "nearest_clade",
    "parse_clade_definitions", "spike_sites_of", "sub_name",
    "INDEL_PLACES", "MUTATION_COLUMNS", "nextclade_columns",
]  # fmt: skip
