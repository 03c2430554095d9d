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
* frameshifts: codon ranges read in a shifted frame (a broken spike or an assembly error), those
  the Nextclade dataset lists as known (:func:`known_frameshift`) apart;
* premature stop codons in the spike, known ones apart;
* private mutations: spike substitutions of neither the class's clades (definitions) nor >= 20 % of
  the class's real training genomes (:func:`~bertgeom.sars_cov_2.genome.mutations.class_expected_sites`),
  judged against the predicted class or the nearest clade's - many of them hint at a wrong class,
  a recombinant, or sequencing errors. Indels are not counted here (the definitions list none).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

from .align import SpikeCut
from .classes import clade_to_class
from .mutations import MutationReport, class_expected_sites, nearest_clade
from bertgeom.tables import counted, word_for

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

#: The one QC vocabulary, best first: every check's grade and every verdict (spike QC, genome QC, and
#: the QC score through :data:`NEXTCLADE_STATUS`) is one of these; ``PARTIAL`` is the genome QC of a
#: sequence it does not judge (spike-only or partial), not a grade.
PASS, WARN, FAIL = "pass", "warn", "fail"
VERDICTS = (PASS, WARN, FAIL)
PARTIAL = "partial"
#: Nextclade's overall QC status for each verdict (Nextclade documentation, "Quality control": a score
#: below 30 is good, below 100 mediocre, else bad), and back.
NEXTCLADE_STATUS = {PASS: "good", WARN: "mediocre", FAIL: "bad"}
VERDICT_OF_STATUS = {status: verdict for verdict, status in NEXTCLADE_STATUS.items()}
_RANK = {v: i for i, v in enumerate(VERDICTS)}


def worst(verdicts) -> str:
    """The worst of some verdicts (``PASS`` for none)."""
    return max(verdicts, key=_RANK.__getitem__, default=PASS)


@dataclass
class QCResult:
    """QC card of one spike. ``checks`` maps check name -> ``pass``/``warn``/``fail``."""

    verdict: str
    reasons: list[str]
    coverage: float  #: called share of the spike (= 1 - n_share)
    n_share: float  #: N or uncovered share of the spike
    n_count: int
    ambiguous: int
    frameshifts: list[str]  # codon ranges read out of frame ("257-276"), those the dataset knows apart
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
    s_report = mutations.genes.get("S")
    fs = [f for f in (s_report.frameshifts if s_report else []) if not known_frameshift("S", f)]
    stops = [m.name for m in mutations.amino_acid if m.kind == "stop" and not known_stop("S", m.pos)]
    if private is not None:
        judged = f"clade {private.clade}'s profile"
        cls = cls or clade_to_class(private.clade)
        private = [c.split(":", 1)[1] for c in private.in_gene("S")]
        private_msg = f"{counted(len(private), 'spike change')} not in {judged} (the S rows marked private)"
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
        "private mutations": ("fail" if len(private) > PRIVATE_FAIL
                              else "warn" if len(private) > PRIVATE_WARN else "pass"),
    }
    verdict, reasons = _judge(checks, {
        "coverage": f"only {coverage:.1%} of the spike is called (the rest is N or not covered)",
        "missing data": f"{n_count} of {n} spike bases are N or not covered ({n_share:.1%})",
        "ambiguous bases": f"{amb} ambiguous bases (IUPAC codes) in the spike",
        "frameshifts": f"{counted(len(fs), 'frameshift')} in the spike (codon ranges): {', '.join(fs)}",
        "stop codons": f"{word_for(len(stops), 'premature stop codon')}: {', '.join(stops)}",
        "private mutations": private_msg,
    })
    return QCResult(verdict, reasons, coverage, n_share, n_count, amb, fs, stops, private, cls, checks)


# ------------------------------------------------------------------------------------------
# Whole-genome QC (separate from the spike checks that the model depends on)
# ------------------------------------------------------------------------------------------

#: Coding sequences of MN908947.3 (1-based, inclusive): the genes of :mod:`.genes` (Nextclade's
#: annotation, ORF1ab's two parts meeting at the ribosomal slippage site 13468, ORF9b inside N, plus
#: ORF10 as RefSeq annotates it). Intergenic spacers and UTRs are left out.
CDS_INTERVALS: tuple[tuple[str, int, int], ...] = (
    ("ORF1ab", 266, 21555), ("S", 21563, 25384), ("ORF3a", 25393, 26220), ("E", 26245, 26472),
    ("M", 26523, 27191), ("ORF6", 27202, 27387), ("ORF7a", 27394, 27759), ("ORF7b", 27756, 27887),
    ("ORF8", 27894, 28259), ("N", 28274, 29533), ("ORF9b", 28284, 28577), ("ORF10", 29558, 29674),
)


def gene_at(pos: int) -> str | None:
    """The coding sequence holding genome position ``pos`` (first listed on overlaps), or None."""
    return next((g for g, a, b in CDS_INTERVALS if a <= pos <= b), None)


# ------------------------------------------------------------------------------------------
# Nextclade's SARS-CoV-2 dataset: QC parameters and its lists of known frameshifts and stops
# ------------------------------------------------------------------------------------------

def dataset_qc(qc: dict | None = None) -> dict:
    """The ``qc`` object of the Nextclade dataset in use: ``qc`` itself when given (a
    :class:`~.tree.ReferenceTree`'s), else the shipped dataset's ``pathogen.json`` (rule parameters
    and ignore lists, 0-based codons, half-open ranges)."""
    return qc if qc is not None else _shipped_qc()


@functools.lru_cache(maxsize=1)
def _shipped_qc() -> dict:
    from .reference import SHIPPED_NEXTCLADE_DATASET, data_path

    return json.loads(data_path(*SHIPPED_NEXTCLADE_DATASET, "pathogen.json").read_text())["qc"]


def _known(qc: dict | None = None) -> tuple[frozenset, frozenset]:
    qc = dataset_qc(qc)
    key = id(qc)
    hit = _KNOWN_CACHE.get(key)
    if hit is not None and hit[0] is qc:
        return hit[1]
    fs = frozenset((f["cdsName"], f["codonRange"]["begin"], f["codonRange"]["end"])
                   for f in qc.get("frameShifts", {}).get("ignoredFrameShifts", []))
    stops = frozenset((s["cdsName"], s["codon"]) for s in qc.get("stopCodons", {}).get("ignoredStopCodons", []))
    _KNOWN_CACHE[key] = (qc, (fs, stops))
    return fs, stops


_KNOWN_CACHE: dict[int, tuple[dict, tuple[frozenset, frozenset]]] = {}


def known_frameshift(gene: str, codon_range: str, qc: dict | None = None) -> bool:
    """True when the dataset lists this frameshift (``codon_range`` as the tables name it, ``257-276``,
    1-based and closed; the dataset's are 0-based, half-open) as known: it costs no QC points."""
    a, _, b = codon_range.partition("-")
    return (gene, int(a) - 1, int(b or a)) in _known(qc)[0]


def known_stop(gene: str, residue: int, qc: dict | None = None) -> bool:
    """True when the dataset lists a stop at this 1-based residue of ``gene`` as known (ORF8:Q27*,
    ORF7a:Q90* ...): it costs no QC points."""
    return (gene, residue - 1) in _known(qc)[1]

GENOME_N_WARN = 300  #: more missing bases (N or not covered) than this warns (Nextclade's "missing data" bias)
GENOME_N_FAIL = 3000  #: more than this fails
GENOME_PARTIAL = 0.5  #: a query covering less of the genome is a partial sequence: whole-genome checks do not apply


@dataclass
class GenomeQC:
    """Whole-genome QC: coverage, missing and ambiguous bases, frameshifts in coding sequences (known ones apart)."""

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


def genome_qc(aln, report=None) -> GenomeQC:
    """QC of the whole alignment (:class:`~bertgeom.sars_cov_2.genome.align.GenomeAlignment`).

    Frameshifts are the codon ranges a gene is read in a shifted frame (``ORF3a:257-276``, from the
    mutation ``report``; a compensated pair of indels is one), those Nextclade's dataset lists as
    known apart; indels in UTRs and intergenic spacers (e.g. Alpha's 28271 before N) shift no frame.
    Without a report, frameshifting indels inside a coding sequence are listed by their nucleotides.
    """
    from .mutations import nuc_deletion_name, nuc_insertion_name

    text = aln.aligned
    missing = missing_bases(text, aln.covered)  # N inside the alignment, as Nextclade counts it
    coverage = 1 - text.count("N") / len(text)  # called share, as on every card
    ambiguous = count_other_than_bases(text)
    shifts = []
    if report is not None:
        shifts = [f"{g}:{f}" for g, gr in report.genes.items() for f in gr.frameshifts if not known_frameshift(g, f)]
    else:
        for p, n in aln.deletions:
            gene = gene_at(p) or gene_at(p + n - 1)
            if n % 3 and gene:
                shifts.append(nuc_deletion_name(p, n) + f" ({gene})")
        for p, b in aln.insertions:
            gene = gene_at(p) if gene_at(p + 1) else None
            if len(b) % 3 and gene:
                shifts.append(nuc_insertion_name(p, b) + f" ({gene})")
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
        "missing data": f"{missing:,} bases missing (N inside the sequenced part) in the genome",
        "ambiguous bases": f"{ambiguous} ambiguous bases in the genome",
        "frameshifts": "frameshifts in coding sequences: " + ", ".join(shifts[:5]),
    })
    return GenomeQC(verdict, reasons, coverage, missing, ambiguous, shifts, checks)


# ------------------------------------------------------------------------------------------
# Nextclade's QC score, rule by rule
# ------------------------------------------------------------------------------------------

#: Rule parameters of a Nextclade dataset (``pathogen.json``'s ``qc``, :func:`dataset_qc`), scored as
#: Nextclade's documentation ("Quality Control") describes each rule (not its code). Each rule gives a
#: score (0 = perfect, 100 = the "bad" threshold); overall = sum of score^2 / 100.
def rule_parameters(qc: dict | None = None) -> dict:
    q = dataset_qc(qc)
    pm, md, sc = q.get("privateMutations", {}), q.get("missingData", {}), q.get("snpClusters", {})
    return {
        "missing data": {"score_bias": md.get("scoreBias", 300), "threshold": md.get("missingDataThreshold", 2700),
                         "enabled": md.get("enabled", True)},
        "mixed sites": {"threshold": q.get("mixedSites", {}).get("mixedSitesThreshold", 10),
                        "enabled": q.get("mixedSites", {}).get("enabled", True)},
        "private mutations": {"typical": pm.get("typical", 8), "cutoff": pm.get("cutoff", 24),
                              "labeled": pm.get("weightLabeledSubstitutions", 4),
                              "unlabeled": pm.get("weightUnlabeledSubstitutions", 1),
                              "reversion": pm.get("weightReversionSubstitutions", 6),
                              "enabled": pm.get("enabled", True)},
        "snp clusters": {"window": sc.get("windowSize", 100), "cutoff": sc.get("clusterCutOff", 6),
                         "per": sc.get("scoreWeight", 50), "enabled": sc.get("enabled", True)},
        "frameshifts": {"per": 75, "enabled": q.get("frameShifts", {}).get("enabled", True)},
        "stop codons": {"per": 75, "enabled": q.get("stopCodons", {}).get("enabled", True)},
    }


#: The shipped dataset's rule parameters by rule name (frameshifts and stops: 75 points each, as
#: Nextclade's documentation states).
NEXTCLADE_QC: dict = rule_parameters()
QC_GOOD, QC_BAD = 30.0, 100.0  #: status: good below 30, mediocre below 100, bad from 100 on


def snp_clusters(positions, window: int = 100, cutoff: int = 6) -> list[tuple[int, int]]:
    """Clusters of private substitutions: every ``window``-nt stretch holding more than ``cutoff`` of
    them is flagged, and overlapping flagged stretches merge into one cluster ``(first, last)``
    (Nextclade's "SNP clusters" rule: 7 SNPs within 100 nt make one cluster)."""
    pos = sorted(set(positions))
    clusters: list[list[int]] = []
    j = 0
    for i, p in enumerate(pos):
        while pos[j] <= p - window:
            j += 1
        if i - j + 1 > cutoff:
            first = pos[j]
            if clusters and first <= clusters[-1][1]:
                clusters[-1][1] = p
            else:
                clusters.append([first, p])
    return [tuple(c) for c in clusters]


def score_verdict(score: float) -> str:
    """The verdict of a QC score (:data:`VERDICTS`): pass below ``QC_GOOD``, warn below ``QC_BAD``, else fail."""
    return PASS if score < QC_GOOD else (WARN if score < QC_BAD else FAIL)


def qc_status(score: float) -> str:
    """Nextclade's status (good / mediocre / bad) of a QC score: :data:`NEXTCLADE_STATUS` of its verdict."""
    return NEXTCLADE_STATUS[score_verdict(score)]


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
    """Nextclade's QC of one sequence: the rules and the overall score and status."""

    rules: dict[str, QCRule]
    score: float
    status: str
    frameshifts: tuple[str, ...] = ()  #: frameshifts that cost points ("ORF3a:257-276")
    frameshifts_ignored: tuple[str, ...] = ()  #: those the dataset lists as known
    stops: tuple[str, ...] = ()  #: premature stops that cost points ("S:Q1071*")
    clusters: tuple[str, ...] = ()  #: SNP clusters as "first-last"
    weighted_private: float = 0.0  #: the private-mutation rule's weighted sum (before ``typical`` is taken off)
    params: dict = field(default_factory=dict, compare=False, repr=False)  #: the rule parameters used

    def summary(self) -> str:
        return f"{self.status} ({self.score:.0f})"


def alignment_span(aligned: str, covered=None) -> tuple[int, int] | None:
    """``(first, last)`` 0-based reference indices of the alignment (Nextclade's alignmentStart-1 and
    alignmentEnd-1): the first and last position the query covers (``covered``, a bool array), or,
    without it, the first and last position not ``N``. None when nothing is covered."""
    import numpy as np

    if covered is not None:
        idx = np.flatnonzero(covered)
        return (int(idx[0]), int(idx[-1])) if len(idx) else None
    a = len(aligned) - len(aligned.lstrip("N"))
    b = len(aligned.rstrip("N")) - 1
    return (a, b) if b >= a else None


def nextclade_span(aln, sequence: str | None = None) -> tuple[int, int] | None:
    """Where Nextclade counts missing data (:meth:`~.align.GenomeAlignment.missing_span`), 0-based
    and closed; ``sequence`` is not needed (kept for callers that pass it)."""
    return aln.missing_span()


def missing_bases(aligned: str, covered=None, span: tuple[int, int] | None = None) -> int:
    """Nextclade's ``totalMissing``: N inside the alignment (``span``, default the first to the last
    covered position; :func:`nextclade_span` widens it by aligned end runs of N); what the query never
    reached (unsequenced ends) is not missing data."""
    span = span if span is not None else alignment_span(aligned, covered)
    return aligned.count("N", span[0], span[1] + 1) if span else 0


def qc_score(report, aligned: str, private, gene_names=None, qc: dict | None = None, covered=None,
             span: tuple[int, int] | None = None) -> QCScore:
    """Score a mutation report (:class:`~.mutations.MutationReport`) with its aligned text (the whole
    genome from position 1) and its :class:`~.profiles.PrivateCall` against the nearest node of the
    reference tree (:func:`~.tree.private_call`): the six rules of current Nextclade's QC with the
    dataset's parameters and ignore lists (``qc``: a dataset's ``qc`` object; default the shipped one).

    * missing data: N inside the alignment (:func:`missing_bases`; ``span`` or ``covered`` gives it),
      300 free, 100 points at 3,000; a spike-only or partial input is not penalised for what it
      does not cover, as in Nextclade;
    * mixed sites: 100 points at 10 ambiguity codes;
    * private mutations: reversions x 6 + labelled substitutions x 4 + unlabelled x 1 + private
      deletion ranges x 1, less the typical 8, over the cutoff 24;
    * SNP clusters: 50 points per cluster of more than 6 private substitutions (reversions included)
      within 100 nt;
    * frameshifts (merged codon ranges) and premature stops: 75 points each, those the dataset knows
      (Mu's ORF3a:257-276, Alpha's ORF8:Q27*, Lambda's ORF7a:Q90* ...) apart.
    Nothing is masked at the genome's ends (Nextclade masks nothing either)."""
    from .profiles import nuc_key

    p = rule_parameters(qc) if qc is not None else NEXTCLADE_QC
    span = span if span is not None else alignment_span(aligned, covered)
    missing = missing_bases(aligned, covered, span)
    mixed = count_other_than_bases(aligned)
    all_fs = [f"{g}:{f}" for g, gr in report.genes.items() for f in gr.frameshifts]
    fs = [f for f in all_fs if not known_frameshift(*f.split(":", 1), qc=qc)]
    all_stops = [(g, m) for g, gr in report.genes.items() for m in gr.aa if m.kind == "stop"]
    stops = [f"{g}:{m.name}" for g, m in all_stops if not known_stop(g, m.pos, qc=qc)]
    n_known = len(all_fs) - len(fs), len(all_stops) - len(stops)
    pm = p["private mutations"]
    n_del = len(private.deletion_ranges)
    labeled = [c for c in private.labeled if c in set(private.substitutions)]
    unlabeled = [c for c in private.substitutions if c not in set(labeled)]
    weighted = pm["labeled"] * len(labeled) + pm["unlabeled"] * len(unlabeled) + \
        pm["reversion"] * len(private.reversions) + n_del
    sc = p["snp clusters"]
    snp_pos = [nuc_key(c)[1] for c in private.substitutions] + [nuc_key(c)[1] for c in private.reversions if nuc_key(c)]
    clusters = snp_clusters(snp_pos, sc["window"], sc["cutoff"])
    md = p["missing data"]
    scores = {
        "missing data": (max(0.0, (missing - md["score_bias"]) * 100 / md["threshold"]), missing,
                         f"{missing:,} N inside the aligned part"
                         + (f" ({span[0] + 1:,}-{span[1] + 1:,}; the first {md['score_bias']} are free)"
                            if span else "")),
        "mixed sites": (100 * mixed / p["mixed sites"]["threshold"], mixed, f"{mixed} mixed (ambiguous) sites"),
        "private mutations": (max(0.0, weighted - pm["typical"]) * 100 / pm["cutoff"], len(private.private),
                              f"{counted(len(private.private), 'private nucleotide change')} against the nearest tree "
                              "node "
                              f"({private.clade}): {counted(len(labeled), 'labelled substitution')} (known from other "
                              f"clades), {len(unlabeled)} unlabelled, {counted(n_del, 'deletion range')}; and "
                              f"{counted(len(private.reversions), 'reversion')}"),
        "snp clusters": (sc["per"] * len(clusters), len(clusters),
                         f"{counted(len(clusters), 'cluster')} of more than {sc['cutoff']} private substitutions "
                         f"within {sc['window']} nt" + (": " + ", ".join(f"{a}-{b}" for a,
                                                                  b in clusters[:5]) if clusters else "")),
        "frameshifts": (p["frameshifts"]["per"] * len(fs), len(fs),
                        counted(len(fs), "frameshift") + (": " + ", ".join(fs[:5]) if fs else "")
                        + (f" ({n_known[0]} known to the Nextclade dataset, no points)" if n_known[0] else "")),
        "stop codons": (p["stop codons"]["per"] * len(stops), len(stops),
                        counted(len(stops), "premature stop codon") + (": " + ", ".join(stops[:5]) if stops else "")
                        + (f" ({n_known[1]} known to the Nextclade dataset, no points)" if n_known[1] else "")),
    }
    scores = {k: ((v if p[k].get("enabled", True) else 0.0), n, msg) for k, (v, n, msg) in scores.items()}
    rules = {k: QCRule(k, round(v, 1), qc_status(v), n, msg) for k, (v, n, msg) in scores.items()}
    total = round(sum(v ** 2 for v, _, _ in scores.values()) / 100, 1)  # from the unrounded rule scores
    ignored = tuple(f for f in all_fs if f not in set(fs))
    return QCScore(rules, total, qc_status(total), tuple(fs), ignored, tuple(stops),
                   tuple(f"{a}-{b}" for a, b in clusters), float(weighted), p)
