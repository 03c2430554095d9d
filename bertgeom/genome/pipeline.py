"""One call from a user's sequence to everything the Variant Classifier page and ``classify`` need.

``analyse_sequence`` never raises for bad input: problems land in ``GenomeAnalysis.error`` (one
sentence) and the fields that could not be computed stay ``None``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .align import AlignmentError, GenomeAlignment, SpikeCut, align_genome, cut_spike
from .fasta import RecordError, SequenceInputError, SequenceRecord, parse_single
from .kmers import MAX_LENGTH, KmerVocab, seq2kmer
from .mutations import CladeCall, MutationReport, call_mutations, nearest_clade
from .qc import GenomeQC, QCResult, genome_qc, spike_qc

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
    clade: CladeCall | None = None  # nearest Nextstrain clade by the definitions
    qc: QCResult | None = None  # spike QC: what the model depends on
    genome_qc: GenomeQC | None = None  # whole-genome QC, separate
    kmers: list[str] = field(default_factory=list)
    token_ids: np.ndarray | None = None  # only when a vocabulary was given
    unk_rate: float | None = None
    model_input: str | None = field(default=None, repr=False)  # the tokenised string

    @property
    def ok(self) -> bool:
        """True when the spike could be cut (it may still fail QC)."""
        return self.error is None and self.spike is not None


def analyse_sequence(record: SequenceRecord | RecordError | str, vocab: KmerVocab | None = None,
                     cls: str | None = None, representation: str = "aligned",
                     max_length: int = MAX_LENGTH) -> GenomeAnalysis:
    """Align, cut the spike, call mutations, assign the nearest clade, QC and tokenise one record.

    * ``record``: a parsed :class:`SequenceRecord`, a :class:`RecordError` from
      :func:`~bertgeom.genome.fasta.iter_fasta_file`, or raw text (parsed as one sequence);
    * ``vocab``: when given, ``token_ids``/``unk_rate`` are filled (``[CLS]`` k-mers ``[SEP]`` ``[PAD]``);
    * ``cls``: the predicted class to judge private mutations against (default: nearest clade's);
    * ``representation``: ``"aligned"`` (default, 3,822 reference-coordinate characters) or
      ``"paper"`` (deletions removed, insertions kept, as the paper's pipeline).
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
        res.genome_qc = genome_qc(aln)
        cut = cut_spike(aln)
        res.notes += [n for n in cut.notes if n not in res.notes]
        if cut.coverage == 0:
            res.error = "The sequence aligns to SARS-CoV-2 but does not cover the spike (S gene)."
            return res
        res.spike = cut
        res.mutations = call_mutations(aln)
        res.clade = nearest_clade(aln)
        res.qc = spike_qc(cut, res.mutations, cls or res.clade.cls)
        text = cut.aligned if representation == "aligned" else cut.paper_sequence()
        res.model_input = text
        res.kmers = seq2kmer(text)
        if vocab is not None:
            res.token_ids, res.unk_rate = vocab.encode(text, max_length=max_length)
        if representation == "paper" and len(res.kmers) > max_length - 2:
            res.notes.append(f"{len(res.kmers)} k-mers: truncated to {max_length - 2} as in the paper")
    except (AlignmentError, SequenceInputError) as exc:
        res.error = str(exc)
    except Exception as exc:  # never raise for a bad sequence
        log.exception("analyse_sequence failed for %s", record.name)
        res.error = f"The sequence could not be analysed ({type(exc).__name__}: {exc})."
    return res


def analyse_many(records: Iterable[SequenceRecord | RecordError], vocab: KmerVocab | None = None,
                 **kwargs) -> Iterator[GenomeAnalysis]:
    """Lazily analyse a stream of records (e.g. from ``iter_fasta_file``), one result per record."""
    for rec in records:
        yield analyse_sequence(rec, vocab=vocab, **kwargs)
