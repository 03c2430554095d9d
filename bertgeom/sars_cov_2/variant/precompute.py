"""What batch precompute needs from the genome input kind: FASTA records in, spike tokens and QC out.

:data:`GENOME_PRECOMPUTE` is the :class:`~bertgeom.inputs.PrecomputeSpec` of the genome kind:
precompute's generic driver (:mod:`bertgeom.precompute`) streams FASTA records with it, ships them
to workers as JSON lists, analyses each one (parse, align, cut the spike, QC, k-mer tokens) and
stores the genome's own columns (QC verdict and reasons, number of nucleotide mutations, share of
unknown k-mers) beside the generic ones. The class-mean maps cover genomes with a whole spike
(``[CLS]`` + every spike k-mer + ``[SEP]``), so their positions are the same in every genome.

Where it sits: the variant plug-in, above the genome pipeline (:mod:`bertgeom.sars_cov_2.genome`);
:mod:`bertgeom.sars_cov_2.variant.spec` hangs it on the genome input kind.

References
----------
docs/precompute.md (the stored columns); Bonino, Ghione, Cirrincione 2025 (arXiv 2502.12033), the
class-mean attention maps of the case study.
"""

from __future__ import annotations

from pathlib import Path

from bertgeom.inputs import PrecomputeSpec, PreparedRecord
from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

#: The genome's own Parquet columns, after the class probabilities (name, Arrow type).
GENOME_COLUMNS = (("qc", "string"), ("qc_reasons", "string"), ("n_mutations", "int32"), ("unk_rate", "float32"))


def read_records(path):
    """The records of a FASTA file (plain, .gz or .xz), streamed; a damaged file ends with a
    record whose ``stream_error`` is true."""
    from bertgeom.sars_cov_2.genome.fasta import iter_fasta_file

    return iter_fasta_file(path)


def to_payload(record) -> list:
    """``[name, sequence or None, error message or None, notes]`` of a parsed record."""
    from bertgeom.sars_cov_2.genome.fasta import RecordError

    if isinstance(record, RecordError):
        return [record.name, None, record.message, []]
    return [record.name, record.sequence, None, list(record.notes)]


def from_payload(item: list):
    """The record :func:`to_payload` wrote (``SequenceRecord`` or ``RecordError``)."""
    from bertgeom.sars_cov_2.genome.fasta import RecordError, SequenceRecord

    name, seq, err, notes = item
    return SequenceRecord(name, seq, list(notes)) if err is None else RecordError(name, -1, err)


def prepare(record, vocab, max_tokens: int) -> PreparedRecord:
    """Analyse one genome (align, spike, QC, mutations, k-mer tokens) into a :class:`PreparedRecord`."""
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.sars_cov_2.variant import encoded_from_analysis

    a = analyse_sequence(record, vocab=vocab, max_length=max_tokens)
    if a.error or a.token_ids is None:
        return PreparedRecord(a.name, None, a.error or "not tokenised")
    enc = encoded_from_analysis(a, vocab, a.name)
    columns = {
        "qc": a.qc.verdict if a.qc else "",
        "qc_reasons": "; ".join(a.qc.reasons) if a.qc else "",
        "n_mutations": len(a.mutations.nucleotide) if a.mutations else None,
        "unk_rate": a.unk_rate,
    }
    return PreparedRecord(a.name, enc, "", columns)


def map_tokens(loaded) -> int:
    """Tokens of a whole spike under ``loaded``'s token limit: [CLS] + k-mers + [SEP]."""
    from bertgeom.sars_cov_2.genome.kmers import SPIKE_N_KMERS

    return min(SPIKE_N_KMERS, loaded.max_tokens - 2) + 2


def read_labels(path) -> dict[str, str]:
    """``name`` -> class of a labels TSV (``name`` and ``label``/``class`` columns)."""
    from bertgeom.sars_cov_2.variant.predict import read_labels_tsv

    return read_labels_tsv(path)


def model_spec(directory):
    """The spec of a variant model directory (how precompute's workers rebuild the model)."""
    from bertgeom.sars_cov_2.variant import variant_spec

    return variant_spec(Path(directory))


#: Precompute over SARS-CoV-2 genomes with a variant model.
GENOME_PRECOMPUTE = PrecomputeSpec(
    read_records=read_records,
    to_payload=to_payload,
    from_payload=from_payload,
    prepare=prepare,
    read_labels=read_labels,
    map_tokens=map_tokens,
    model_spec=model_spec,
    columns=GENOME_COLUMNS,
    model_files=("config.json", "model.safetensors", "kmer_vocab.json"),
    default_model=VARIANT_MODEL_ID,
)
