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
from .classes import clade_to_class
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
    coverage: float  #: called share of the spike (= 1 - n_share)
    n_share: float  #: N or uncovered share of the spike
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


def spike_qc(cut: SpikeCut, mutations: MutationReport, cls: str | None = None, private=None) -> QCResult:
    """QC of one spike cut with its mutation report. ``private``: the genome's
    :class:`~.profiles.PrivateCall` against its nearest clade (what the pipeline passes: the check then
    counts exactly the S rows marked private); without it, spike substitutions are judged against
    class ``cls`` (default: the nearest clade's) as before.

    Coverage is the called share of the spike (:func:`~.mutations.called_share`): coverage and the
    N share always add up to 100 %."""
    n = len(cut.aligned)
    n_count = cut.aligned.count("N")
    n_share = n_count / n
    coverage = 1 - n_share
    amb = len(mutations.ambiguous_spike_positions)
    fs = [m.name for m in mutations.spike_nucleotide if m.kind in ("del", "ins") and (len(m.ref) + len(m.alt)) % 3]
    stops = [m.name for m in mutations.amino_acid if m.kind == "stop"]
    if private is not None:
        judged = f"clade {private.clade}'s profile"
        cls = cls or clade_to_class(private.clade)
        private = [c.split(":", 1)[1] for c in private.in_gene("S")]
        private_msg = f"{len(private)} spike change(s) not in {judged} (the S rows marked private)"
    else:
        if cls is None:
            cls = nearest_clade(cut).cls
        expected = class_expected_sites(cls)
        private = [m.name for m in mutations.spike_nucleotide if m.kind == "sub" and (m.pos, m.alt) not in expected]
        private_msg = f"{len(private)} spike substitutions not expected in class {cls}"

    checks = {
        "coverage": _grade(coverage, MIN_COVERAGE_WARN, MIN_COVERAGE_FAIL, higher_is_worse=False),
        "missing data": "fail" if n_share > N_SHARE_FAIL else ("warn" if n_share > N_SHARE_WARN else "pass"),
        "ambiguous bases": "fail" if amb > AMBIGUOUS_FAIL else ("warn" if amb > AMBIGUOUS_WARN else "pass"),
        "frameshifts": _grade(len(fs), FRAMESHIFT_WARN, FRAMESHIFT_FAIL),
        "stop codons": _grade(len(stops), STOP_WARN, STOP_FAIL),
        "private mutations": "fail" if len(private) > PRIVATE_FAIL else ("warn" if len(private) > PRIVATE_WARN else "pass"),
    }
    verdict, reasons = _judge(checks, {
        "coverage": f"only {coverage:.1%} of the spike is called (the rest is N or not covered)",
        "missing data": f"{n_count} of {n} spike bases are N or not covered ({n_share:.1%})",
        "ambiguous bases": f"{amb} ambiguous bases (IUPAC codes) in the spike",
        "frameshifts": f"{len(fs)} frameshift(s) in the spike: {', '.join(fs)}",
        "stop codons": f"premature stop codon(s): {', '.join(stops)}",
        "private mutations": private_msg,
    })
    return QCResult(verdict, reasons, coverage, n_share, n_count, amb, fs, stops, private, cls, checks)


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
    coverage: float  #: called share of the genome (1 - missing / 29,903)
    missing: int  #: N plus uncovered reference bases
    ambiguous: int
    frameshifts: list[str]
    checks: dict[str, str] = field(default_factory=dict)


def count_other_than_bases(text: str) -> int:
    """Characters of ``text`` other than A, C, G, T, N and '-' (IUPAC ambiguity codes in an aligned
    read), counted in C: a Python loop over a 30 kb genome took ~0.3 ms of each genome's preparation."""
    return len(text.encode("ascii", "replace").translate(None, b"ACGTN-"))


def genome_qc(aln) -> GenomeQC:
    """QC of the whole alignment (:class:`~bertgeom.genome.align.GenomeAlignment`).

    Frameshifts are indels whose length is not a multiple of 3 inside a coding sequence
    (:data:`CDS_INTERVALS`); indels in UTRs and intergenic spacers (e.g. Alpha's del28271 before N)
    shift no frame.
    """
    text = aln.aligned
    missing = text.count("N")
    coverage = 1 - missing / len(text)  # called share, as on every card
    ambiguous = count_other_than_bases(text)
    shifts = []
    for p, n in aln.deletions:
        gene = gene_at(p) or gene_at(p + n - 1)
        if n % 3 and gene:
            shifts.append((f"del{p}" if n == 1 else f"del{p}-{p + n - 1}") + f" ({gene})")
    for p, b in aln.insertions:
        gene = gene_at(p) if gene_at(p + 1) else None
        if len(b) % 3 and gene:
            shifts.append(f"ins{p}:{b} ({gene})")
    if float(aln.covered.mean()) < GENOME_PARTIAL:
        return GenomeQC("partial", [f"the sequence spans {float(aln.covered.mean()):.0%} of the genome ({coverage:.0%} "
                                    "called): whole-genome checks do not apply"],
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


# ------------------------------------------------------------------------------------------
# Nextclade-like QC score, rule by rule
# ------------------------------------------------------------------------------------------

#: Rule parameters, reconstructed from the Nextclade documentation ("Quality Control", and the
#: SARS-CoV-2 dataset's pathogen.json defaults as documented there); not Nextclade's code. Each rule
#: gives a score (0 = perfect, 100 = the "bad" threshold); overall = sum of score^2 / 100.
NEXTCLADE_QC = {
    "missing data": {"score_bias": 300, "threshold": 2700},  # (N - bias) * 100 / threshold
    "mixed sites": {"threshold": 10},  # 100 * mixed / threshold
    "private mutations": {"typical": 8, "cutoff": 24, "labeled": 4, "unlabeled": 1, "reversion": 6},
    "frameshifts": {"per": 75},
    "stop codons": {"per": 75, "ignored": ("ORF8:Q27*", "ORF8:K68*")},  # Alpha's known ORF8 stops
}
QC_GOOD, QC_BAD = 30.0, 100.0  #: status: good below 30, mediocre below 100, bad from 100 on


def qc_status(score: float) -> str:
    return "good" if score < QC_GOOD else ("mediocre" if score < QC_BAD else "bad")


@dataclass(frozen=True)
class QCRule:
    """One rule of the QC score: ``score``, ``status`` and one sentence on what it counted."""

    name: str
    score: float
    status: str
    count: int
    message: str


@dataclass(frozen=True)
class QCScore:
    """Nextclade-like QC of one sequence: the rules and the overall score and status."""

    rules: dict[str, QCRule]
    score: float
    status: str

    def summary(self) -> str:
        return f"{self.status} ({self.score:.0f})"


def qc_score(report, aligned: str, private, gene_names=None) -> QCScore:
    """Score a mutation report (:class:`~.mutations.MutationReport`) with its aligned text (the whole
    genome, or the spike for a spike-only input) and its :class:`~.profiles.PrivateCall`.

    Missing data counts N (uncovered positions are N) over the whole genome, so a spike-only or
    partial sequence scores "bad" on it, as in Nextclade."""
    from .reference import REFERENCE_LEN

    p = NEXTCLADE_QC
    called = len(aligned) - aligned.count("N")
    missing = REFERENCE_LEN - called
    mixed = count_other_than_bases(aligned)
    fs = sorted({n for g in report.genes.values() for n in g.frameshifts})
    stops = [f"{g}:{s}" for g, gr in report.genes.items() for s in gr.stops]
    stops = [s for s in stops if s not in p["stop codons"]["ignored"]]
    pm = p["private mutations"]
    weighted = pm["labeled"] * len(private.labeled) + pm["unlabeled"] * len(private.unlabeled) + \
        pm["reversion"] * len(private.reversions)
    md = p["missing data"]
    scores = {
        "missing data": (max(0.0, (missing - md["score_bias"]) * 100 / md["threshold"]), missing,
                         f"{missing:,} of {REFERENCE_LEN:,} bases missing (N or not covered; coverage "
                         f"{called / REFERENCE_LEN:.1%})"),
        "mixed sites": (100 * mixed / p["mixed sites"]["threshold"], mixed, f"{mixed} mixed (ambiguous) sites"),
        "private mutations": (max(0.0, weighted - pm["typical"]) * 100 / pm["cutoff"], len(private.private),
                              f"{len(private.private)} private changes against clade {private.clade}'s profile "
                              f"({len(private.labeled)} found in other clades, {len(private.unlabeled)} in none; "
                              f"the rows marked 'private' in the tables) and {len(private.reversions)} reversion(s)"),
        "frameshifts": (p["frameshifts"]["per"] * len(fs), len(fs),
                        f"{len(fs)} frameshift(s)" + (": " + ", ".join(fs[:5]) if fs else "")),
        "stop codons": (p["stop codons"]["per"] * len(stops), len(stops),
                        f"{len(stops)} premature stop codon(s)" + (": " + ", ".join(stops[:5]) if stops else "")),
    }
    rules = {k: QCRule(k, round(v, 1), qc_status(v), n, msg) for k, (v, n, msg) in scores.items()}
    total = round(sum(r.score ** 2 for r in rules.values()) / 100, 1)
    return QCScore(rules, total, qc_status(total))
