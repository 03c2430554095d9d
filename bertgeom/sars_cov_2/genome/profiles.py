"""Characteristic profiles per Nextstrain clade: what a genome of that clade is expected to carry.

A genome's *changes* are the rows of its mutation tables (:class:`~.mutations.MutationReport`):
every gene's amino-acid events by their Nextclade names (``S:N501Y``, ``S:del69-70``,
``ORF1a:del3675-3677``, ``ORF8:Q27*``) plus the nucleotide changes that change no amino acid
(synonymous or non-coding, e.g. ``C241T``, ``del28271``).

The profile of a clade (``definitions/clade_profiles.tsv``, built with the characteristic table by
``python -m bertgeom.sars_cov_2.genome.markers build``) is

* the changes its Nextstrain definition implies (reference + the clade's inherited sites, read
  codon by codon, so C22577+G22578 sites give ``S:G339H``), and
* the changes carried by at least :data:`CLADE_MIN_SHARE` of the clade's *training-split*
  developer genomes (a change's share is over the genomes whose bases there are read).

A clade without training genomes borrows the training part of its nearest ancestor that has some.
Private mutations are then counted as Nextclade counts them, on nucleotides: the genome's
substitutions and deletion ranges (a range once) absent from the nucleotides of its nearest clade's
profile (:func:`~.mutations.nearest_clade`, the stand-in here for the nearest node of Nextclade's
reference tree); *labelled* ones are in another clade's profile; *reversions* are firm profile
substitutions (from the definition, or backed by at least :data:`FIRM_MIN_GENOMES` genomes) where the
genome reads the reference base (a deleted or N site is no reversion, so nothing is inferred inside a
frameshifted or deleted stretch). A table row (an amino-acid event) is marked private when one of its
nucleotides is; rows of genes outside Nextclade's annotation (ORF10) never are. Clades with one or
two training genomes have thin profiles (their ``n_genomes`` says so).

References
----------
* Nextclade documentation, "Phylogenetic placement" and "Quality Control" (private mutations
  judged against the nearest tree node; reversions and labelled mutations).
* Nextstrain ncov ``defaults/clades.tsv`` (the definitions).
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .classes import CLASSES, clade_to_class
from .reference import data_path, reference_sequence

CLADE_MIN_SHARE = 0.5  #: share of a clade's training genomes that makes a change part of its profile
#: a training-only profile row counts for reversions only when this many genomes back it
FIRM_MIN_GENOMES = 3
PROFILE_FILE = ("definitions", "clade_profiles.tsv")
PROFILE_VERSION = 2  #: 2: Nextclade's names (per-residue deletions, 214:EPE, 21765-21770); 1 had del69-70
PROFILE_COLUMNS = ("clade", "class", "change", "gene", "nucleotides", "source", "share", "n_genomes")


def change_sites(report, change: str) -> list[int]:
    """Genome positions a change's read depends on (to judge whether a genome can show it)."""
    from .genes import load_genes
    from .mutations import split_change

    gene_name, name = split_change(change)
    if gene_name is not None:
        gene = load_genes().get(gene_name)
        ev = next((e for e in report.genes.get(gene_name, None).events if e.name == name), None) if (
            report is not None and gene_name in report.genes) else None
        if gene is None:
            return []
        if ev is not None:
            a, b = ev.start, ev.end
        else:
            span = _residues_of(name)
            if span is None:
                return []
            a, b = span
        first, _ = gene.codon_span(a)
        _, last = gene.codon_span(b)
        return list(range(first, last + 1))
    return _nuc_sites(change)


def _residues_of(name: str) -> tuple[int, int] | None:
    """Residues of an amino-acid change's name: ``N501Y``, ``H69-``, ``214:EPE``, ``257-276`` (frameshift)."""
    import re

    m = re.match(r"^(\d+)-(\d+)$", name)
    if m:
        return int(m.group(1)), int(m.group(2))
    r = _residue_of(name)
    return (r, r) if r is not None else None


def _residue_of(name: str) -> int | None:
    import re

    m = re.match(r"^[A-Z*]?(\d+)", name)
    return int(m.group(1)) if m else None


@functools.lru_cache(maxsize=1 << 14)
def nuc_key(name: str) -> tuple | None:
    """``("sub", 23063, "T")``, ``("del", 21765, 21770)`` or ``("ins", 22204, "GAGCCAGAA")`` of a
    nucleotide change named as Nextclade names it (None for anything else). Cached: a clade profile's
    names are read again for every genome."""
    import re

    m = re.match(r"^[ACGT](\d+)([ACGT])$", name)
    if m:
        return ("sub", int(m.group(1)), m.group(2))
    m = re.match(r"^(\d+)(?:-(\d+))?$", name)
    if m:
        a = int(m.group(1))
        return ("del", a, int(m.group(2) or a))
    m = re.match(r"^(\d+):([A-Z]+)$", name)
    if m:
        return ("ins", int(m.group(1)), m.group(2))
    return None


def _nuc_sites(name: str) -> list[int]:
    key = nuc_key(name)
    if key is None:
        return []
    if key[0] == "sub":
        return [key[1]]
    if key[0] == "del":
        return list(range(key[1], key[2] + 1))
    return [key[1], key[1] + 1]


def genome_changes(report) -> dict[str, str]:
    """``{change: nucleotides}`` of one report (module docstring): every gene's events and the
    nucleotide changes that change no amino acid."""
    out = {e.qualified: " ".join(e.nuc) for e in report.events}
    for m in report.other_nucleotide:
        if MASK_START < m.pos < MASK_END:
            out[m.name] = m.name
    return out


#: Nucleotide changes in the first 100 and last 200 bases are left out (Nextstrain's ncov builds mask
#: them: sequencing ends are unreliable); none of them lies in a gene.
MASK_START, MASK_END = 100, 29903 - 200 + 1


def readable(aligned: str, sites: Iterable[int], offset: int = 1) -> bool:
    """True when every site is read (a base or a deletion, not N) in ``aligned`` (starting at ``offset``)."""
    for p in sites:
        i = p - offset
        if not 0 <= i < len(aligned) or aligned[i] == "N":
            return False
    return True


def definition_report(clade: str, defs=None):
    """The mutation report of a clade's Nextstrain definition: the reference with its inherited sites."""
    import numpy as np

    from .align import GenomeAlignment
    from .mutations import call_mutations, load_clade_definitions

    defs = defs or load_clade_definitions()
    g = list(reference_sequence())
    for p, b in defs.inherited(clade).items():
        g[p - 1] = b
    aln = GenomeAlignment("".join(g), np.ones(len(g), bool), [], [], 1, [], len(g))
    return call_mutations(aln, defs)


@dataclass(frozen=True)
class ProfileRow:
    clade: str
    cls: str
    change: str
    gene: str
    nucleotides: str
    source: str  # "definition", "training", "definition; training"
    share: float | None
    n_genomes: int

    @property
    def firm(self) -> bool:
        """From the definition, or carried by at least half of :data:`FIRM_MIN_GENOMES` or more genomes:
        solid enough that a genome lacking it counts a reversion."""
        return "definition" in self.source or (self.share is not None and self.n_genomes >= FIRM_MIN_GENOMES)


@dataclass(frozen=True)
class CladeProfiles:
    """The shipped profiles (:func:`load_clade_profiles`)."""

    rows: tuple[ProfileRow, ...]
    version: int = PROFILE_VERSION

    @functools.cached_property
    def _by_clade(self) -> dict[str, dict[str, ProfileRow]]:
        out: dict[str, dict[str, ProfileRow]] = defaultdict(dict)
        for r in self.rows:
            out[r.clade][r.change] = r
        return dict(out)

    def profile(self, clade: str) -> dict[str, ProfileRow]:
        """``{change: row}`` expected in ``clade`` (an unknown clade has an empty profile)."""
        return self._by_clade.get(clade, {})

    @functools.cached_property
    def _classes_of(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, set[str]] = defaultdict(set)
        for r in self.rows:
            if r.firm:
                out[r.change].add(r.cls)
        return {k: tuple(c for c in CLASSES if c in v) for k, v in out.items()}

    def classes_carrying(self, change: str) -> tuple[str, ...]:
        """Classes with at least one clade whose profile holds exactly this change on firm ground
        (:attr:`ProfileRow.firm`: one or two genomes, e.g. a recombinant, do not tag a whole class)."""
        return self._classes_of.get(change, ())

    @functools.cached_property
    def _nucs_by_clade(self) -> dict[str, dict[str, bool]]:
        """``{clade: {nucleotide name: firm}}``: the nucleotides behind every row of a clade's profile."""
        out: dict[str, dict[str, bool]] = defaultdict(dict)
        for r in self.rows:
            for n in r.nucleotides.split():
                out[r.clade][n] = out[r.clade].get(n, False) or r.firm
        return dict(out)

    def nucleotides(self, clade: str) -> dict[str, bool]:
        """``{nucleotide name: firm}`` of ``clade``'s profile (what private mutations are judged against)."""
        return self._nucs_by_clade.get(clade, {})

    @functools.cached_property
    def _clades_of_nuc(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, set[str]] = defaultdict(set)
        for clade, nucs in self._nucs_by_clade.items():
            for n in nucs:
                out[n].add(clade)
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def clades_with_nucleotide(self, name: str) -> tuple[str, ...]:
        return self._clades_of_nuc.get(name, ())

    @functools.cached_property
    def _clades_of(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = defaultdict(list)
        for r in self.rows:
            out[r.change].append(r.clade)
        return {k: tuple(v) for k, v in out.items()}

    def clades_carrying(self, change: str) -> tuple[str, ...]:
        return self._clades_of.get(change, ())

    def __hash__(self) -> int:
        return id(self)


@dataclass(frozen=True)
class PrivateCall:
    """A genome's nucleotide changes judged against one clade's profile (Nextclade's private mutations).

    ``private``: the genome's substitutions and deletion ranges not in the profile's nucleotides,
    genome order (insertions are not counted, as in Nextclade); ``labeled``: those of them in another
    clade's profile (Nextclade's "labelled" private mutations); ``reversions``: firm profile
    substitutions where the genome reads the reference base, named as the change back
    (``G23403A``); ``rows``: the table rows (amino-acid events and nucleotide-only changes) holding a
    private nucleotide, what the tables mark "private"."""

    clade: str
    private: tuple[str, ...]
    labeled: tuple[str, ...]
    reversions: tuple[str, ...]
    rows: tuple[str, ...] = ()

    @property
    def unlabeled(self) -> tuple[str, ...]:
        return tuple(c for c in self.private if c not in set(self.labeled))

    @property
    def substitutions(self) -> tuple[str, ...]:
        """Private substitutions (labelled or not; reversions apart)."""
        return tuple(c for c in self.private if (nuc_key(c) or ("",))[0] == "sub")

    @property
    def deletion_ranges(self) -> tuple[str, ...]:
        return tuple(c for c in self.private if (nuc_key(c) or ("",))[0] == "del")

    def in_gene(self, gene: str) -> tuple[str, ...]:
        """Table rows marked private of one gene (``"nuc"``: the nucleotide changes that change no amino acid)."""
        from .mutations import split_change

        if gene == "nuc":
            return tuple(c for c in self.rows if split_change(c)[0] is None)
        return tuple(c for c in self.rows if split_change(c)[0] == gene)


def build_clade_profiles(train_reports: Iterable[tuple[str, object, str]], defs=None,
                         min_share: float = CLADE_MIN_SHARE) -> list[ProfileRow]:
    """Profile rows from ``(clade, report, aligned genome text)`` of the training genomes and the definitions."""
    from .mutations import load_clade_definitions, split_change

    defs = defs or load_clade_definitions()
    per_clade: dict[str, list[tuple[object, str]]] = defaultdict(list)
    for clade, rep, text in train_reports:
        per_clade[clade].append((rep, text))
    trained: dict[str, dict[str, tuple[float, int, str]]] = {}
    for clade, items in per_clade.items():
        counts: Counter = Counter()
        nucs: dict[str, str] = {}
        sites: dict[str, list[int]] = {}
        for rep, _ in items:
            for ch, nuc in genome_changes(rep).items():
                counts[ch] += 1
                nucs.setdefault(ch, nuc)
                sites.setdefault(ch, change_sites(rep, ch))
        out = {}
        for ch, c in counts.items():
            den = sum(1 for rep, text in items if readable(text, sites[ch]) or ch in genome_changes(rep))
            share = c / max(den, 1)
            if share >= min_share:
                out[ch] = (round(share, 3), len(items), nucs[ch])
        trained[clade] = out
    rows = []
    for clade in defs.clades:
        definition = genome_changes(definition_report(clade, defs))
        source_clade = clade
        while source_clade is not None and source_clade not in trained:
            source_clade = defs.parent.get(source_clade)
        train = trained.get(source_clade, {}) if source_clade else {}
        borrowed = "" if source_clade == clade else f" (borrowed from {source_clade})"
        for ch in sorted(set(definition) | set(train), key=_sort_key):
            src = []
            if ch in definition:
                src.append("definition")
            share, n, nuc = train.get(ch, (None, 0, definition.get(ch, "")))
            if ch in train:
                src.append("training" + borrowed)
            rows.append(ProfileRow(clade, clade_to_class(clade), ch, split_change(ch)[0] or "nuc",
                                   nuc or definition.get(ch, ""), "; ".join(src), share, n))
    return rows


def _sort_key(change: str):
    from .genes import GENE_ORDER
    from .mutations import split_change

    g, n = split_change(change)
    if g is not None:
        return (GENE_ORDER.index(g) if g in GENE_ORDER else 99, _residue_of(n) or 0, n)
    sites = _nuc_sites(change)
    return (100, sites[0] if sites else 0, change)


def write_clade_profiles(rows: Iterable[ProfileRow], path=None) -> None:
    path = path or data_path(*PROFILE_FILE)
    lines = [f"# bertgeom characteristic profiles per Nextstrain clade, profile version {PROFILE_VERSION}",
             "# Built by `python -m bertgeom.sars_cov_2.genome.markers build`: "
             "the changes implied by each clade's definition",
             f"# (definitions/nextstrain_clades.tsv) plus those of >= {CLADE_MIN_SHARE:.0%} of the clade's "
             "training-split developer genomes.",
             "# change: gene:amino-acid event (Nextclade names) or a nucleotide change that changes no amino acid.",
             "\t".join(PROFILE_COLUMNS)]
    for r in rows:
        lines.append("\t".join([r.clade, r.cls, r.change, r.gene, r.nucleotides, r.source,
                                "" if r.share is None else f"{r.share:.3f}", str(r.n_genomes)]))
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def parse_clade_profiles(text: str) -> CladeProfiles:
    from .reference import read_versioned_tsv

    version, table = read_versioned_tsv(text, "profile version", PROFILE_VERSION)
    rows = []
    for r in table:
        rows.append(ProfileRow(r["clade"], r["class"], r["change"], r["gene"], r["nucleotides"], r["source"],
                               float(r["share"]) if r["share"] else None, int(r["n_genomes"] or 0)))
    return CladeProfiles(tuple(rows), version)


@functools.lru_cache(maxsize=1)
def load_clade_profiles() -> CladeProfiles:
    """The shipped clade profiles (cached; empty when the file is absent)."""
    path = data_path(*PROFILE_FILE)
    return parse_clade_profiles(path.read_text()) if path.exists() else CladeProfiles(())


__all__ = ["nuc_key", "CLADE_MIN_SHARE", "CladeProfiles", "ProfileRow", "build_clade_profiles", "change_sites",
           "definition_report", "genome_changes", "PrivateCall", "load_clade_profiles",
           "parse_clade_profiles", "readable", "write_clade_profiles"]
