"""The Wuhan-Hu-1 reference (MN908947.3), spike coordinates, spike domains and the genetic code.

Coordinate conventions used across :mod:`bertgeom.sars_cov_2.genome`:

* genome positions are **1-based** (as in GenBank and Nextstrain, e.g. ``A23063T``);
* the spike (gene S) is genome ``SPIKE_START..SPIKE_END`` inclusive = 3,822 nt including the stop
  codon = 1,273 amino acids; spike nucleotide offsets are 0-based (``0..3821``) unless stated;
* amino-acid positions are 1-based in the spike protein (``N501Y`` -> position 501, codon covering
  spike offsets ``1500..1502`` = genome ``23062..23064``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

SPIKE_START = 21563  #: first base of the spike ATG, genome 1-based
SPIKE_END = 25384  #: last base of the spike stop codon TAA, genome 1-based inclusive
SPIKE_LEN = SPIKE_END - SPIKE_START + 1  #: 3822 nt
SPIKE_AA_LEN = 1273  #: residues, stop codon excluded
REFERENCE_NAME = "MN908947.3"
REFERENCE_LEN = 29903


#: The Nextclade dataset shipped with bertgeom (its folder under ``bertgeom/data``): placement and QC read it.
SHIPPED_NEXTCLADE_DATASET = ("nextclade", "sars-cov-2_wuhan-hu-1_orfs_2024-02-16")
#: ``bertgeom/data``, found from this file: the same folder however ``bertgeom`` itself was imported
#: (``importlib.resources.files("bertgeom")`` is a ``MultiplexedPath`` for a namespace package, which
#: Python 3.11's ``joinpath`` cannot take several parts of, and names the wrong folder besides).
DATA_DIR = Path(__file__).resolve().parents[2] / "data"


def data_path(*parts: str) -> Path:
    """Path of a file shipped in ``bertgeom/data`` (a source checkout, an editable or a plain install)."""
    return DATA_DIR.joinpath(*parts)


@functools.lru_cache(maxsize=1)
def reference_sequence() -> str:
    """The 29,903-nt MN908947.3 genome, upper case (read once, cached)."""
    text = data_path("reference", "MN908947.3.fasta").read_text()
    seq = "".join(line.strip() for line in text.splitlines() if not line.startswith(">")).upper()
    if len(seq) != REFERENCE_LEN:  # pragma: no cover - guards the shipped file
        raise RuntimeError(f"reference has {len(seq)} nt, expected {REFERENCE_LEN}")
    return seq


@functools.lru_cache(maxsize=1)
def reference_spike() -> str:
    """The reference spike CDS (3,822 nt, ATG ... TAA)."""
    return reference_sequence()[SPIKE_START - 1 : SPIKE_END]


def aa_of_genome_pos(pos: int) -> int | None:
    """Spike amino-acid number (1-based) of the codon holding genome position ``pos``; None outside S."""
    if SPIKE_START <= pos <= SPIKE_END:
        return (pos - SPIKE_START) // 3 + 1
    return None


# --------------------------------------------------------------------------------------------
# Spike domains
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """A spike domain in amino-acid coordinates (1-based, inclusive)."""

    name: str
    start: int
    end: int
    level: str  # "coarse" (SP/S1/S2) or "fine"

    def __contains__(self, aa: int) -> bool:
        return self.start <= aa <= self.end


#: The table of ``config/bio_config.yaml`` exactly as the paper's code reads it (Bonino 2025
#: (arXiv:2502.12033), case study; the authors' released code).
#: Its ends overlap at 1213 (HR2/TM) and 1237 (TM/CT), and the code then converts an end ``b`` to the
#: spike base ``3(b-1)-1``, i.e. the last base of codon ``b-1``: every domain loses its last residue.
PAPER_DOMAIN_TABLE: tuple[tuple[str, int, int], ...] = (
    ("SP", 1, 13),
    ("S1", 14, 685),
    ("S2", 686, 1273),
    ("NTD", 14, 305),
    ("no domain 1", 306, 318),
    ("RBD", 319, 541),
    ("no domain 2", 542, 787),
    ("FP", 788, 806),
    ("no domain 3", 807, 911),
    ("HR1", 912, 984),
    ("no domain 4", 985, 1162),
    ("HR2", 1163, 1213),
    ("TM", 1213, 1237),
    ("CT", 1237, 1273),
)

#: Coarse partition of the protein (signal peptide, S1, S2), inclusive ends.
COARSE_DOMAINS: tuple[Domain, ...] = (
    Domain("SP", 1, 13, "coarse"),
    Domain("S1", 14, 685, "coarse"),
    Domain("S2", 686, 1273, "coarse"),
)

#: Fine partition, fixed: inclusive ends (the off-by-one-codon quirk of the paper's code is NOT
#: reproduced) and the two one-residue overlaps of the paper table resolved so that the fine
#: domains tile 1..1273 exactly once: HR2 keeps 1213 (TM starts at 1214, as UniProt P0DTC2's
#: transmembrane helix does) and TM keeps 1237 (CT starts at 1238).
FINE_DOMAINS: tuple[Domain, ...] = (
    Domain("SP", 1, 13, "fine"),
    Domain("NTD", 14, 305, "fine"),
    Domain("no domain 1", 306, 318, "fine"),
    Domain("RBD", 319, 541, "fine"),
    Domain("no domain 2", 542, 787, "fine"),
    Domain("FP", 788, 806, "fine"),
    Domain("no domain 3", 807, 911, "fine"),
    Domain("HR1", 912, 984, "fine"),
    Domain("no domain 4", 985, 1162, "fine"),
    Domain("HR2", 1163, 1213, "fine"),
    Domain("TM", 1214, 1237, "fine"),
    Domain("CT", 1238, 1273, "fine"),
)

#: Colour-stable order for plots (fine domains, N- to C-terminal).
DOMAIN_ORDER: tuple[str, ...] = tuple(d.name for d in FINE_DOMAINS)


class SpikeDomain(NamedTuple):
    """Domain of one residue: ``fine`` (most specific, e.g. RBD) and ``coarse`` (SP/S1/S2)."""

    fine: str
    coarse: str


@functools.lru_cache(maxsize=1)
def _domain_lookup() -> tuple[tuple[str, ...], tuple[str, ...]]:
    fine = [""] * (SPIKE_AA_LEN + 1)
    coarse = [""] * (SPIKE_AA_LEN + 1)
    for d in FINE_DOMAINS:
        for a in range(d.start, d.end + 1):
            fine[a] = d.name
    for d in COARSE_DOMAINS:
        for a in range(d.start, d.end + 1):
            coarse[a] = d.name
    return tuple(fine), tuple(coarse)


def domain_of_aa(pos: int) -> SpikeDomain:
    """Most specific domain and coarse domain of spike residue ``pos`` (1-based, 1..1273).

    ``domain_of_aa(501) == SpikeDomain("RBD", "S1")``. Raises ``ValueError`` outside 1..1273.
    """
    if not 1 <= int(pos) <= SPIKE_AA_LEN:
        raise ValueError(f"spike residue {pos} outside 1..{SPIKE_AA_LEN}")
    fine, coarse = _domain_lookup()
    return SpikeDomain(fine[pos], coarse[pos])


#: Biological names for the spike regions the paper's table leaves as "no domain N", for the
#: mutation table a biologist reads (the paper's partition stays in FINE_DOMAINS for its figures).
#: Between the RBD and the S1/S2 furin site (R682-R685, "RRAR") lie the subdomains SD1 and SD2; the S2'
#: cleavage site follows R815; between HR1 and HR2 lie the central helix (CH) and connector domain (CD).
READABLE_REGIONS: tuple[tuple[str, int, int], ...] = (
    ("SP", 1, 13), ("NTD", 14, 305), ("NTD-RBD linker", 306, 318), ("RBD", 319, 541), ("SD1/SD2", 542, 681),
    ("S1/S2 site", 682, 685), ("S2 (before FP)", 686, 787), ("FP", 788, 806), ("S2 (FP to S2')", 807, 810),
    ("S2' site", 811, 816), ("FPPR to HR1", 817, 911), ("HR1", 912, 984), ("CH/CD", 985, 1162),
    ("HR2", 1163, 1213), ("TM", 1214, 1237), ("CT", 1238, 1273),
)


def readable_region(aa: int | None) -> str:
    """The region name of spike residue ``aa`` for people (:data:`READABLE_REGIONS`; "" outside 1..1273)."""
    if aa is None:
        return ""
    return next((name for name, a, b in READABLE_REGIONS if a <= aa <= b), "")




# --------------------------------------------------------------------------------------------
# Genetic code
# --------------------------------------------------------------------------------------------

_BASES = "TCAG"
_AA_STRING = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
#: Standard genetic code (NCBI table 1), codon (upper case DNA) -> one-letter amino acid, ``*`` = stop.
CODON_TABLE: dict[str, str] = {
    a + b + c: _AA_STRING[16 * i + 4 * j + k]
    for i, a in enumerate(_BASES)
    for j, b in enumerate(_BASES)
    for k, c in enumerate(_BASES)
}

#: IUPAC nucleotide codes -> the bases they stand for.
IUPAC: dict[str, str] = {
    "A": "A", "C": "C", "G": "G", "T": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}  # fmt: skip
AMBIGUOUS_BASES = frozenset("RYSWKMBDHV")  #: ambiguity codes other than N

_COMPLEMENT = str.maketrans("ACGTRYSWKMBDHVNacgtryswkmbdhvn-", "TGCAYRSWMKVHDBNtgcayrswmkvhdbn-")


def reverse_complement(seq: str) -> str:
    """Reverse complement, IUPAC-aware (R<->Y, K<->M, B<->V, D<->H; S, W, N unchanged)."""
    return seq.translate(_COMPLEMENT)[::-1]


def translate_codon(codon: str) -> str:
    """One codon -> amino acid; ``-`` for a fully deleted codon, ``X`` when N/ambiguity/partial gap
    leaves it undetermined (an ambiguity code that resolves to one amino acid is translated)."""
    codon = codon.upper()
    aa = CODON_TABLE.get(codon)
    if aa is not None:
        return aa
    if codon == "---":
        return "-"
    if len(codon) != 3 or "-" in codon or "N" in codon:
        return "X"
    options = {CODON_TABLE[a + b + c] for a in IUPAC.get(codon[0], "") for b in IUPAC.get(codon[1], "")
               for c in IUPAC.get(codon[2], "")}
    return options.pop() if len(options) == 1 else "X"


def translate(seq: str) -> str:
    """Translate codon by codon from offset 0 (a trailing partial codon is dropped)."""
    return "".join(translate_codon(seq[i : i + 3]) for i in range(0, len(seq) - 2, 3))


@functools.lru_cache(maxsize=1)
def reference_spike_protein() -> str:
    """The 1,273-residue reference spike protein (stop codon removed)."""
    prot = translate(reference_spike())
    assert prot.endswith("*") and len(prot) == SPIKE_AA_LEN + 1
    return prot[:-1]


def read_versioned_tsv(text: str, version_tag: str, default_version: int) -> tuple[int, list[dict[str, str]]]:
    """``(version, rows)`` of a shipped TSV table: ``#`` lines are comments, one of which may say
    ``# <version_tag> N``; the first other line is the header; each row is a dict by column."""
    version, header, rows = default_version, None, []
    for line in text.splitlines():
        if line.startswith("#"):
            if version_tag in line:
                version = int(line.rsplit(" ", 1)[-1])
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        if header is None:
            header = parts
            continue
        rows.append(dict(zip(header, parts)))
    return version, rows
