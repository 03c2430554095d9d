"""Spike QC card in the spirit of Nextclade's QC: is this spike fit to be classified?

Every metric is about the 3,822-nt spike that the model reads (not the whole genome). Each check
gives ``pass``, ``warn`` or ``fail``; the verdict is the worst of them, with one reason per
non-passing check. Thresholds are the module constants below. On the 561 labelled developer
genomes (judged against their true class) they give 445 pass, 82 warn, 34 fail; almost all warn/fail
come from N in the spike (one amplicon dropout is ~200-300 N = 5-8 %: warn; > 10 %: fail). Checks:

* coverage: share of spike positions covered by the sequence (uncovered positions become ``N``);
* N share: share of spike positions that are ``N`` (uncovered or sequenced as N) - the k-mers
  holding them are unknown to the model;
* ambiguous bases: IUPAC codes other than N (mixed infections, low-quality calls);
* frameshifts: indels whose length is not a multiple of 3 (a broken spike or an assembly error);
* premature stop codons in the spike;
* private mutations: spike substitutions of neither the class's clades (definitions) nor >= 20 % of
  the class's real training genomes (:func:`~bertgeom.genome.mutations.class_expected_sites`),
  judged against the predicted class or the nearest clade's - many of them hint at a wrong class,
  a recombinant, or sequencing errors. Indels are not counted here (the definitions list none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .align import SpikeCut
from .mutations import MutationReport, class_expected_sites, nearest_clade

MIN_COVERAGE_WARN = 0.98  #: coverage below this warns
MIN_COVERAGE_FAIL = 0.80  #: coverage below this fails
N_SHARE_WARN = 0.01  #: more N than 1 % of the spike (38 nt) warns
N_SHARE_FAIL = 0.10  #: more N than 10 % of the spike (382 nt) fails
AMBIGUOUS_WARN = 3  #: more ambiguity codes than this warns
AMBIGUOUS_FAIL = 20  #: more than this fails
FRAMESHIFT_WARN = 1  #: this many frameshifts or more warns
FRAMESHIFT_FAIL = 2  #: this many or more fails (one may be a homopolymer sequencing artefact)
STOP_WARN = 1  #: premature stop codons: this many or more warns
STOP_FAIL = 2
PRIVATE_WARN = 8  #: more private spike substitutions than this warns
PRIVATE_FAIL = 20  #: more than this fails

_RANK = {"pass": 0, "warn": 1, "fail": 2}


@dataclass
class QCResult:
    """QC card of one spike. ``checks`` maps check name -> ``pass``/``warn``/``fail``."""

    verdict: str
    reasons: list[str]
    coverage: float
    n_share: float
    n_count: int
    ambiguous: int
    frameshifts: list[str]  # nucleotide names of frameshifting indels
    stops: list[str]  # premature stop codons, e.g. "Q1071*"
    private: list[str]  # private spike substitutions
    qc_class: str | None  # the class the private mutations were judged against
    checks: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict != "fail"


def _grade(value: float, warn: float, fail: float, higher_is_worse: bool = True) -> str:
    if higher_is_worse:
        return "fail" if value >= fail else ("warn" if value >= warn else "pass")
    return "fail" if value < fail else ("warn" if value < warn else "pass")


def _judge(checks: dict[str, str], messages: dict[str, str]) -> tuple[str, list[str]]:
    """The worst grade of ``checks`` and one reason (from ``messages``) per check that did not pass."""
    return max(checks.values(), key=_RANK.__getitem__), [messages[k] for k, v in checks.items() if v != "pass"]


def spike_qc(cut: SpikeCut, mutations: MutationReport, cls: str | None = None) -> QCResult:
    """QC of one spike cut with its mutation report; ``cls`` = class to judge private mutations
    against (the predicted class); by default the class of the nearest clade."""
    n = len(cut.aligned)
    n_count = cut.aligned.count("N")
    n_share = n_count / n
    amb = len(mutations.ambiguous_spike_positions)
    fs = [m.name for m in mutations.spike_nucleotide if m.kind in ("del", "ins") and (len(m.ref) + len(m.alt)) % 3]
    stops = [m.name for m in mutations.amino_acid if m.kind == "stop"]
    if cls is None:
        cls = nearest_clade(cut).cls
    expected = class_expected_sites(cls)
    private = [m.name for m in mutations.spike_nucleotide if m.kind == "sub" and (m.pos, m.alt) not in expected]

    checks = {
        "coverage": _grade(cut.coverage, MIN_COVERAGE_WARN, MIN_COVERAGE_FAIL, higher_is_worse=False),
        "missing data": "fail" if n_share > N_SHARE_FAIL else ("warn" if n_share > N_SHARE_WARN else "pass"),
        "ambiguous bases": "fail" if amb > AMBIGUOUS_FAIL else ("warn" if amb > AMBIGUOUS_WARN else "pass"),
        "frameshifts": _grade(len(fs), FRAMESHIFT_WARN, FRAMESHIFT_FAIL),
        "stop codons": _grade(len(stops), STOP_WARN, STOP_FAIL),
        "private mutations": "fail" if len(private) > PRIVATE_FAIL else ("warn" if len(private) > PRIVATE_WARN else "pass"),
    }
    verdict, reasons = _judge(checks, {
        "coverage": f"the sequence covers only {cut.coverage:.1%} of the spike",
        "missing data": f"{n_count} of {n} spike bases are N ({n_share:.1%})",
        "ambiguous bases": f"{amb} ambiguous bases (IUPAC codes) in the spike",
        "frameshifts": f"{len(fs)} frameshift(s) in the spike: {', '.join(fs)}",
        "stop codons": f"premature stop codon(s): {', '.join(stops)}",
        "private mutations": f"{len(private)} spike substitutions not expected in class {cls}",
    })
    return QCResult(verdict, reasons, cut.coverage, n_share, n_count, amb, fs, stops, private, cls, checks)


# ------------------------------------------------------------------------------------------
# Whole-genome QC (separate from the spike checks that the model depends on)
# ------------------------------------------------------------------------------------------

#: Coding sequences of MN908947.3 (1-based, inclusive): the CDS features of Nextstrain's reference
#: GenBank record (ORF1ab's two parts meet at the ribosomal slippage site 13468; ORF9b lies inside N)
#: plus ORF10 as RefSeq NC_045512.2 annotates it. Intergenic spacers and UTRs are left out.
CDS_INTERVALS: tuple[tuple[str, int, int], ...] = (
    ("ORF1ab", 266, 21555), ("S", 21563, 25384), ("ORF3a", 25393, 26220), ("E", 26245, 26472),
    ("M", 26523, 27191), ("ORF6", 27202, 27387), ("ORF7a", 27394, 27759), ("ORF7b", 27756, 27887),
    ("ORF8", 27894, 28259), ("N", 28274, 29533), ("ORF10", 29558, 29674),
)


def gene_at(pos: int) -> str | None:
    """The coding sequence holding genome position ``pos`` (first listed on overlaps), or None."""
    return next((g for g, a, b in CDS_INTERVALS if a <= pos <= b), None)

GENOME_N_WARN = 300  #: more missing bases (N or not covered) than this warns (Nextclade's "missing data" bias)
GENOME_N_FAIL = 3000  #: more than this fails
GENOME_PARTIAL = 0.5  #: a query covering less of the genome is a partial sequence: whole-genome checks do not apply


@dataclass
class GenomeQC:
    """Whole-genome QC: coverage, missing and ambiguous bases, frameshifting indels in the coding region."""

    verdict: str  #: pass / warn / fail, or "partial" for a spike-only or partial sequence
    reasons: list[str]
    coverage: float
    missing: int  #: N plus uncovered reference bases
    ambiguous: int
    frameshifts: list[str]
    checks: dict[str, str] = field(default_factory=dict)


def genome_qc(aln) -> GenomeQC:
    """QC of the whole alignment (:class:`~bertgeom.genome.align.GenomeAlignment`).

    Frameshifts are indels whose length is not a multiple of 3 inside a coding sequence
    (:data:`CDS_INTERVALS`); indels in UTRs and intergenic spacers (e.g. Alpha's del28271 before N)
    shift no frame.
    """
    text = aln.aligned
    coverage = float(aln.covered.mean())
    missing = text.count("N")
    ambiguous = sum(1 for c in text if c not in "ACGTN-") if text.strip("ACGTN-") else 0
    shifts = []
    for p, n in aln.deletions:
        gene = gene_at(p) or gene_at(p + n - 1)
        if n % 3 and gene:
            shifts.append((f"del{p}" if n == 1 else f"del{p}-{p + n - 1}") + f" ({gene})")
    for p, b in aln.insertions:
        gene = gene_at(p) if gene_at(p + 1) else None
        if len(b) % 3 and gene:
            shifts.append(f"ins{p}:{b} ({gene})")
    if coverage < GENOME_PARTIAL:
        return GenomeQC("partial", [f"the sequence covers {coverage:.0%} of the genome: whole-genome checks do not apply"],
                        coverage, missing, ambiguous, shifts, {})
    checks = {
        "missing data": _grade(missing, GENOME_N_WARN, GENOME_N_FAIL),
        "ambiguous bases": _grade(ambiguous, AMBIGUOUS_WARN, AMBIGUOUS_FAIL),
        "frameshifts": _grade(len(shifts), FRAMESHIFT_WARN, FRAMESHIFT_FAIL),
    }
    verdict, reasons = _judge(checks, {
        "missing data": f"{missing:,} bases missing (N or not covered) in the genome",
        "ambiguous bases": f"{ambiguous} ambiguous bases in the genome",
        "frameshifts": "frameshifting indels in coding sequences: " + ", ".join(shifts[:5]),
    })
    return GenomeQC(verdict, reasons, coverage, missing, ambiguous, shifts, checks)
