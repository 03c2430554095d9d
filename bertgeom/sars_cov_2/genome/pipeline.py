"""One pass from a user's sequence to everything the Variant Classifier page, the batch table and
``classify`` read: parse -> align -> genes -> mutations per codon -> placement on Nextclade's
reference tree (clade, Pango lineage, private mutations, recombinant) -> QC (spike card, Nextclade's
score) -> rule-based call -> the model's 12-mer tokens -> the gate.

``analyse_sequence`` aligns once and calls mutations once; every reader takes the fields of the
:class:`GenomeAnalysis` it returns (``to_frame()``, ``summary_row()``, ``arrays()``) instead of
recomputing. It never raises for bad input: problems land in ``GenomeAnalysis.error`` (one
sentence) and the fields that could not be computed stay ``None``.

References
----------
* Nextclade documentation: "Algorithm" (alignment, translation, mutation calling, placement, QC).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .align import AlignmentError, GenomeAlignment, SpikeCut, align_genome, cut_spike
from .fasta import RecordError, SequenceInputError, SequenceRecord, parse_single
from .gate import Gate, sequence_gate, unread_share
from .kmers import MAX_LENGTH, UNK_ID, KmerVocab, seq2kmer
from .mutations import CladeCall, MutationReport, call_mutations
from .markers import RuleCall, call_cut, load_marker_table
from .profiles import PrivateCall, load_clade_profiles
from .qc import GenomeQC, QCResult, QCScore, genome_qc, nextclade_span, qc_score, spike_qc
from .tree import Placement, ReferenceTree, load_reference_tree, place, private_call, report_deletions

log = logging.getLogger(__name__)


@dataclass(eq=False)
class GenomeAnalysis:
    """Result of :func:`analyse_sequence` for one record."""

    name: str
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    input_length: int = 0
    alignment: GenomeAlignment | None = None
    spike: SpikeCut | None = None
    mutations: MutationReport | None = None
    placement: Placement | None = None  # the nearest node of Nextclade's reference tree: clade, lineage, recombinant
    clade: CladeCall | None = None  # the placement's Nextstrain clade (with its lineage)
    qc: QCResult | None = None  # spike QC: what the model depends on
    genome_qc: GenomeQC | None = None  # whole-genome QC, separate
    private: PrivateCall | None = None  # the genome's private mutations against its nearest tree node
    qc_score: QCScore | None = None  # Nextclade-like QC score, rule by rule
    rule: RuleCall | None = None  # the rule-based marker call of the spike (second opinion)
    span: tuple[int, int] | None = None  # the alignment's span as Nextclade reports it (0-based, closed)
    gate: Gate | None = None  # SARS-CoV-2 / too divergent / not SARS-CoV-2: whether the model's call is shown
    kmers: list[str] = field(default_factory=list)
    token_ids: np.ndarray | None = None  # only when a vocabulary was given
    unk_rate: float | None = None
    model_input: str | None = field(default=None, repr=False)  # the tokenised string

    @property
    def ok(self) -> bool:
        """True when the sequence was analysed (its spike may still be unread: see :attr:`callable`)."""
        return self.error is None and self.spike is not None

    @property
    def callable(self) -> bool:
        """True when the model's call may be shown: analysed, and the gate says SARS-CoV-2."""
        return self.ok and self.gate is not None and self.gate.passed

    def input_notes(self) -> list[str]:
        """What was done to the input before the model read it: the parser's and aligner's notes
        (reverse complement, U read as T ...), bases outside the alignment trimmed, and the spike cut
        from a longer sequence."""
        out = list(self.notes)
        aln = self.alignment
        if aln is not None and aln.segments:
            lead, trail = aln.segments[0][0], aln.query_len - aln.segments[-1][1]
            if lead or trail:
                out.append(f"{lead} leading and {trail} trailing input bases outside the alignment trimmed")
        if self.spike is not None and aln is not None and aln.coverage > 0.2:
            out.append("the spike (21563-25384) was cut from the sequence for the model")
        return out

    @property
    def genes(self) -> list[str]:
        """The genes examined (all 12 for a genome, ``["S"]`` for a spike-only input)."""
        return list(self.mutations.genes) if self.mutations else []

    def to_frame(self, gene: str | None = None):
        """The mutation tables as one pandas DataFrame (or one gene's; ``"nuc"``: the nucleotide changes
        that change no amino acid): see :func:`mutation_table`."""
        import pandas as pd

        rows = mutation_table(self)
        if gene is not None:
            rows = [r for r in rows if r["gene"] == gene]
        return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))

    def summary_row(self) -> dict:
        """The flat per-record fields the batch table and the ``classify`` CSV add: nearest clade,
        QC score and status, private changes, frameshifts, premature stops."""
        if self.clade is None or self.qc_score is None:
            return {"clade": "", "lineage": "", "recombinant": "", "qc_score": "", "qc_status": "", "private": "",
                    "frameshifts": "", "stops": ""}
        rules = self.qc_score.rules
        pl = self.placement
        return {"clade": self.clade.display, "lineage": pl.lineage if pl else "",
                "recombinant": recombinant_cell(pl), "qc_score": self.qc_score.score,
                "qc_status": self.qc_score.status, "private": rules["private mutations"].count,
                "frameshifts": rules["frameshifts"].count, "stops": rules["stop codons"].count}

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays behind the result: ``token_ids`` (when tokenised), ``spike_called`` (bool per
        spike base: a base or a deletion was read) and ``genome_called`` (same, per genome base)."""
        out: dict[str, np.ndarray] = {}
        if self.token_ids is not None:
            out["token_ids"] = np.asarray(self.token_ids)
        if self.spike is not None:
            out["spike_called"] = np.frombuffer(self.spike.aligned.encode("ascii"), np.uint8) != ord("N")
        if self.alignment is not None:
            out["genome_called"] = np.frombuffer(self.alignment.aligned.encode("ascii"), np.uint8) != ord("N")
        return out


def recombinant_cell(placement: Placement | None) -> str:
    """The ``recombinant`` column: "" or one phrase (a designated recombinant lineage, the parents
    and the breakpoint interval of a split placement)."""
    rec = placement.recombinant if placement is not None else None
    if rec is None:
        return ""
    if not rec.parents:
        return f"yes: designated {rec.designated}"
    bps = "; ".join(f"{a}-{b}" for a, b in rec.breakpoints)
    return f"yes: {' / '.join(rec.parents)} (breakpoint {bps})"


def analyse_sequence(record: SequenceRecord | RecordError | str, vocab: KmerVocab | None = None,
                     cls: str | None = None, representation: str = "aligned",
                     max_length: int = MAX_LENGTH, tree: ReferenceTree | None = None) -> GenomeAnalysis:
    """Align, cut the spike, call mutations, assign the nearest clade, QC and tokenise one record.

    * ``record``: a parsed :class:`SequenceRecord`, a :class:`RecordError` from
      :func:`~bertgeom.sars_cov_2.genome.fasta.iter_fasta_file`, or raw text (parsed as one sequence);
    * ``vocab``: when given, ``token_ids``/``unk_rate`` are filled (``[CLS]`` k-mers ``[SEP]`` ``[PAD]``);
    * ``cls``: the predicted class to judge private mutations against (default: nearest clade's);
    * ``representation``: ``"aligned"`` (default, 3,822 reference-coordinate characters) or
      ``"paper"`` (deletions removed, insertions kept, as the paper's pipeline);
    * ``tree``: the Nextclade dataset to place on (:func:`~.tree.load_reference_tree`; default the
      shipped one).
    """
    if isinstance(record, RecordError):
        return GenomeAnalysis(name=record.name, error=record.message)
    if isinstance(record, str):
        try:
            record = parse_single(record)
        except SequenceInputError as exc:
            return GenomeAnalysis(name="sequence", error=str(exc))
    res = GenomeAnalysis(name=record.name, notes=list(record.notes), input_length=len(record.sequence))
    try:
        aln = align_genome(record.sequence)
        res.alignment = aln
        cut = cut_spike(aln)
        res.notes += [n for n in cut.notes if n not in res.notes]
        res.spike = cut  # an uncovered spike is all N: placed and QC'd from the rest, the gate makes no call
        res.mutations = call_mutations(aln, cut=cut)
        res.genome_qc = genome_qc(aln, res.mutations)
        place_and_score(res, aln, cut, tree or load_reference_tree(), cls)
        text = cut.aligned if representation == "aligned" else cut.paper_sequence()
        res.model_input = text
        res.kmers = seq2kmer(text)
        if vocab is not None:
            res.token_ids, res.unk_rate = vocab.encode(text, max_length=max_length)
        if representation == "paper" and len(res.kmers) > max_length - 2:
            res.notes.append(f"{len(res.kmers)} k-mers: truncated to {max_length - 2} as in the paper")
        gate_analysis(res, record.sequence, vocab)
    except (AlignmentError, SequenceInputError) as exc:
        res.error = str(exc)
    except Exception as exc:  # never raise for a bad sequence
        log.exception("analyse_sequence failed for %s", record.name)
        res.error = f"The sequence could not be analysed ({type(exc).__name__}: {exc})."
    return res


def place_and_score(res: GenomeAnalysis, aln: GenomeAlignment, cut: SpikeCut, tree: ReferenceTree,
                    cls: str | None = None) -> None:
    """Fill ``res`` (whose ``mutations`` are called) with what follows the mutation calls: the placement
    on the reference tree, its clade, the private mutations, the spike and Nextclade QC, the rule call,
    and the note on a placement several nodes share."""
    pl = res.placement = place(aln.aligned, tree, deletions=report_deletions(res.mutations))
    res.clade = CladeCall(pl.clade, pl.cls, pl.clade_display, lineage=pl.lineage)
    res.private = private_call(res.mutations, pl)
    res.qc = spike_qc(cut, res.mutations, cls or pl.cls, private=res.private)
    res.span = nextclade_span(aln)
    res.qc_score = qc_score(res.mutations, aln.aligned, res.private, qc=tree.qc, span=res.span)
    res.rule = call_cut(cut)
    note = pl.resolution_note()
    if note:
        res.notes.append(note)


def gate_analysis(res: GenomeAnalysis, sequence: str, vocab: KmerVocab | None) -> None:
    """The gate of an analysis whose placement and model input are set (:func:`~.gate.sequence_gate`)."""
    unread = unread_share(res.kmers, res.token_ids, UNK_ID if vocab is not None else None)
    res.gate = sequence_gate(res.alignment.aligned, sequence, res.placement, unread, spike_coverage=res.spike.coverage)


#: Columns of :func:`mutation_table` (one row per table row of every gene, then the other nucleotides).
TABLE_COLUMNS = ("gene", "mutation", "nucleotides", "kind", "position", "carried by", "private")


def carried_by(change: str, nucleotides: Iterable[str] | None = None) -> tuple[str, ...]:
    """Classes carrying exactly this change (``S:E484K``, ``C241T``): those whose characteristic table
    lists that amino-acid change (or nucleotide event), and those with a clade whose profile holds it.
    A class with another change at the same site (E484A for E484K) is not among them.

    A deleted residue (``S:A243-``) is carried only by a class whose row holds the same nucleotide
    deletion (:func:`~bertgeom.sars_cov_2.genome.mutations.same_deletion`): Beta's 9-base 22283-22291
    and 21E's (GH / pre-VOC) 6-base 22289-22294 both remove A243, and are two events. The deletion is
    ``nucleotides`` (the mutation table passes its event's); a bare name with none matches every
    deletion of the residue."""
    from .classes import CLASSES
    from .mutations import same_deletion

    event = tuple(nucleotides or ()) if change.endswith("-") else ()

    def same_event(row_nucleotides: str) -> bool:  # every row matches when no deletion is known
        theirs = row_nucleotides.split()
        return not event or (len(theirs) == len(event) and all(any(same_deletion(a, b) for b in theirs)
                                                                   for a in event))

    gene, _, name = change.rpartition(":")
    classes = {r.cls for r in load_clade_profiles().rows if r.firm and r.change == change and same_event(r.nucleotides)}
    for m in load_marker_table().markers:
        if gene == m.gene and name in m.aa_names and same_event(m.nucleotides):
            classes.add(m.cls)
        elif not gene and name in (m.name, *m.nucleotides.split()) and not m.codon_level:
            classes.add(m.cls)
    return tuple(c for c in CLASSES if c in classes)


def mutation_table(analysis: GenomeAnalysis) -> list[dict]:
    """Every row of the analysis's mutation tables: each gene's amino-acid events (Nextclade names,
    grouped deletions) with their nucleotides, then the nucleotide changes that change no amino acid
    (gene ``"nuc"``); ``carried by``: :func:`carried_by`; ``private``: "yes" when the change is not in
    the nearest clade's profile (the rows the QC's private count counts, exactly)."""
    rep = analysis.mutations
    if rep is None:
        return []
    private = set(analysis.private.rows) if analysis.private else set()  # rows holding a private nucleotide
    rows = []
    for g, gr in rep.genes.items():
        for e in gr.events:
            rows.append({"gene": g, "mutation": e.name, "nucleotides": " ".join(e.nuc), "kind": e.kind,
                         "position": e.start, "carried by": carried_by(e.qualified, e.nuc),
                         "private": "yes" if e.qualified in private else ""})
    for m in rep.other_nucleotide:
        rows.append({"gene": "nuc", "mutation": m.name, "nucleotides": m.name, "kind": m.kind, "position": m.pos,
                     "carried by": carried_by(m.name), "private": "yes" if m.name in private else ""})
    return rows


def analyse_many(records: Iterable[SequenceRecord | RecordError], vocab: KmerVocab | None = None,
                 **kwargs) -> Iterator[GenomeAnalysis]:
    """Lazily analyse a stream of records (e.g. from ``iter_fasta_file``), one result per record."""
    for rec in records:
        yield analyse_sequence(rec, vocab=vocab, **kwargs)
