"""Genome preparation made cheaper gives the same results, bit for bit, as the reference copies of the
functions it replaced (bench/reference_genome_prep.py): every shipped genome, synthetic genomes of
every class, and hand-made edge cases (insertions, deletions at the spike's ends, frameshifts, N runs,
ambiguity codes, partial and spike-only inputs, the reverse strand, divergent and foreign sequences)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from bench.reference_genome_prep import (
    reference_analyse_sequence,
    reference_call_mutations,
    reference_clean_sequence,
    reference_gene_aa_mutations,
    reference_identity_to_reference,
    reference_nearest_clade,
)
from bertgeom.sars_cov_2.genome.align import align_genome, cut_spike
from bertgeom.sars_cov_2.genome.fasta import SequenceInputError, SequenceRecord, clean_sequence, iter_fasta_file
from bertgeom.sars_cov_2.genome.gate import identity_to_reference
from bertgeom.sars_cov_2.genome.genes import load_genes
from bertgeom.sars_cov_2.genome.kmers import KmerVocab
from bertgeom.sars_cov_2.genome.mutations import call_mutations, gene_aa_mutations, nearest_clade
from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
from bertgeom.sars_cov_2.genome.reference import (
    SPIKE_END,
    SPIKE_START,
    data_path,
    reference_sequence,
    reverse_complement,
)


def canon(obj):
    """A comparable form of a result: dataclasses field by field (private fields too), arrays as dtype,
    shape and bytes, floats by their exact bits (``repr``), containers element by element."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__, tuple((f.name, canon(getattr(obj, f.name))) for f in dataclasses.fields(obj)))
    if isinstance(obj, np.ndarray):
        return ("ndarray", obj.dtype.str, obj.shape, obj.tobytes())
    if isinstance(obj, float | np.floating):
        return ("float", repr(float(obj)))
    if isinstance(obj, dict):
        return ("dict", tuple((canon(k), canon(v)) for k, v in obj.items()))
    if isinstance(obj, list | tuple):
        return (type(obj).__name__, tuple(canon(x) for x in obj))
    if isinstance(obj, np.integer | np.bool_):
        return ("np", type(obj).__name__, obj.item())
    return obj


def assert_same(new, old, what: str) -> None:
    a, b = canon(new), canon(old)
    if a != b:  # name the first field that differs
        if dataclasses.is_dataclass(new):
            for f in dataclasses.fields(new):
                assert canon(getattr(new, f.name)) == canon(getattr(old, f.name)), f"{what}: field {f.name} differs"
        assert a == b, what


@functools.lru_cache(maxsize=1)
def vocab() -> KmerVocab:
    return KmerVocab.load(data_path("variant_model", "kmer_vocab.json"))


def shipped_records() -> list:
    out = []
    for f in ("demo_genomes.fasta", "validation_small.fasta.xz", "open_genomes_dev.fasta.xz"):
        out += list(iter_fasta_file(data_path("genomes", f)))
    return out


def _edit(seq: str, start: int, end: int, new: str) -> str:
    """Replace genome bases ``start..end`` (1-based, inclusive; ``end = start - 1`` inserts after
    ``start - 1``) of a reference-like sequence with ``new``."""
    return seq[: start - 1] + new + seq[end:]


def edge_cases() -> list[SequenceRecord]:
    """Hand-made inputs at the corners of the mutation calls, QC, gate and tokens."""
    ref = reference_sequence()
    omicron = list(iter_fasta_file(data_path("genomes", "demo_genomes.fasta")))[-1].sequence  # OP339227, an Omicron
    rng = np.random.default_rng(7)
    cases = {
        "reference": ref,
        "del at spike start (first two codons)": _edit(ref, SPIKE_START, SPIKE_START + 5, ""),
        "del across spike start": _edit(ref, SPIKE_START - 4, SPIKE_START + 4, ""),
        "del at spike end (stop codon)": _edit(ref, SPIKE_END - 2, SPIKE_END, ""),
        "del across spike end": _edit(ref, SPIKE_END - 4, SPIKE_END + 5, ""),
        "frameshift del 1 nt in S": _edit(ref, 23000, 23000, ""),
        "compensated frameshift pair in S": _edit(_edit(ref, 23100, 23100, ""), 23040, 23039, "A"),
        "in-frame ins in S between codons": _edit(ref, 22205, 22204, "GAGCCAGAA"),
        "in-frame ins inside a codon": _edit(ref, 23004, 23003, "GGC"),
        "frameshift ins 2 nt in ORF1a": _edit(ref, 1000, 999, "TT"),
        "out-of-phase 6-nt del (Delta-like)": _edit(ref, 22029, 22034, ""),
        "stop codon in S": _edit(ref, 23063, 23065, "TAA"),
        "N run over the RBD": _edit(ref, 22900, 23200, "N" * 301),
        "N in one codon": _edit(ref, 23063, 23063, "N"),
        "ambiguity codes in S": _edit(_edit(ref, 23063, 23063, "R"), 22000, 22001, "YK"),
        "partial: first 23,000 bases": ref[:23000],
        "partial: from 22,000": ref[21999:],
        "spike only": ref[SPIKE_START - 1 : SPIKE_END],
        "spike fragment 600 nt": ref[22999:23599],
        "no spike (ORF1ab only)": ref[:20000],
        "reverse strand": reverse_complement(omicron),
        "lots of substitutions (divergent)": "".join(
            "ACGT"[(("ACGT".index(c) + 1) % 4)] if c in "ACGT" and rng.random() < 0.03 else c for c in ref),
        "shuffled (not SARS-CoV-2)": "".join(rng.permutation(list(ref[:3000]))),
        "too short": "ACGTACGTAC",
    }
    return [SequenceRecord(name, seq, []) for name, seq in cases.items()]


def synthetic_records(n_per_class: int = 4) -> list[SequenceRecord]:
    from bertgeom.sars_cov_2.genome.synth import realise_genome, synth_batch

    return [SequenceRecord(f"synth-{i}-{s.cls}", realise_genome(s), [])
            for i, s in enumerate(synth_batch(n_per_class, seed=3))]


def _check(records) -> int:
    n = 0
    for rec in records:
        new = analyse_sequence(rec, vocab=vocab(), max_length=512)
        old = reference_analyse_sequence(rec, vocab=vocab(), max_length=512)
        assert_same(new, old, rec.name)
        n += new.error is None
    return n


def test_every_shipped_genome_prepares_exactly_as_the_reference():
    records = shipped_records()
    assert len(records) >= 600
    assert _check(records) >= 600


def test_edge_cases_prepare_exactly_as_the_reference():
    records = edge_cases()
    _check(records)
    by_name = {r.name: analyse_sequence(r) for r in records}
    # the cases reach the paths they are meant for (so the equality above is about something)
    assert by_name["too short"].error and by_name["shuffled (not SARS-CoV-2)"].error
    assert by_name["no spike (ORF1ab only)"].gate.verdict == "spike not read"  # analysed, no call
    assert by_name["reverse strand"].alignment.strand == -1
    assert "S:214:EPE" in [e.qualified for e in by_name["in-frame ins in S between codons"].mutations.events]
    assert any(m.kind == "fs" for m in by_name["frameshift del 1 nt in S"].mutations.amino_acid)
    assert any(m.kind == "stop" for m in by_name["stop codon in S"].mutations.amino_acid)
    assert by_name["ambiguity codes in S"].mutations.ambiguous_spike_positions
    assert by_name["spike only"].spike.coverage == 1.0
    assert not by_name["lots of substitutions (divergent)"].gate.passed


def test_fasta_texts_parse_and_prepare_exactly_as_the_reference():
    texts = [f">{r.name}\n" + "\n".join(r.sequence[i : i + 70] for i in range(0, len(r.sequence), 70))
             for r in edge_cases()[:6]]
    texts += ["acgu" * 50, "not a genome at all, just words", ">empty\n", "ACGTRYX" * 40]
    for t in texts:
        assert_same(analyse_sequence(t, vocab=vocab()), reference_analyse_sequence(t, vocab=vocab()), t[:40])


def test_synthetic_genomes_of_every_class_prepare_exactly_as_the_reference():
    assert _check(synthetic_records()) == 32


@pytest.mark.parametrize("which", ["genome", "spike cut"])
def test_mutation_calls_and_clade_on_a_spike_cut_or_genome_match_the_reference(which):
    for rec in list(iter_fasta_file(data_path("genomes", "demo_genomes.fasta"))) + edge_cases()[:12]:
        aln = align_genome(rec.sequence)
        cut = cut_spike(aln)
        src = aln if which == "genome" else cut
        assert_same(call_mutations(src), reference_call_mutations(src), rec.name)
        assert_same(nearest_clade(src), reference_nearest_clade(src), rec.name)
        if which == "genome":  # the gate's identity to Wuhan-Hu-1, held to its np.isin copy
            assert identity_to_reference(aln.aligned) == reference_identity_to_reference(aln.aligned), rec.name
        assert_same(nearest_clade(src, classes=["delta", "gh"]), reference_nearest_clade(src, classes=["delta", "gh"]),
                    rec.name)
        if which == "genome":  # each gene on its own, as the public per-gene function reads it
            for gene in load_genes().values():
                gtext = aln.aligned[gene.start - 1 : gene.end]
                assert_same(gene_aa_mutations(gene, gtext, aln.deletions, aln.insertions),
                            reference_gene_aa_mutations(gene, gtext, aln.deletions, aln.insertions),
                            f"{rec.name} {gene.name}")


def _cleaned(fn, raw: str):
    try:
        return fn(raw, "rec")
    except SequenceInputError as exc:
        return ("error", str(exc))


def test_the_marker_call_lists_each_classs_markers_as_the_table_does():
    """The rule call's one change: each class's markers listed once per table (``markers_of``) instead of
    anew per genome (``of``): the same markers in the same order, for every class, so the pipelines above
    share the package's marker call."""
    from bertgeom.sars_cov_2.genome.classes import CLASSES
    from bertgeom.sars_cov_2.genome.markers import load_marker_table

    table = load_marker_table()
    assert all(table.markers_of[c] == tuple(table.of(c)) for c in CLASSES)
    assert sum(len(table.markers_of[c]) for c in CLASSES) > 50  # the listing is about something


def test_the_parser_cleans_every_input_exactly_as_the_reference():
    ref = reference_sequence()
    raws = [ref, ref.lower(), ref.replace("T", "U"), ref[:5000].replace("T", "U") + ref[5000:],
            "ACGTX" * 100, "ACGTRYKM" * 50, "1 acgtnnnn 61 ttgca\n//", "ACG-T.A*", "-" * 10, "  \n ",
            "MKFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHVSGTNGTKRFDNPVLPFNDGVYF",
            "This is an English sentence about attention heads, not a genome.",
            "ACGT" * 10 + "é" + "ACGT" * 10, "ACGT" * 10 + "\x00", "ACGTJ" * 30, "RYKMSWBDHV" * 20,
            "".join(chr(0x100 + i) for i in range(45)), "ACGT" * 20 + "Z", "NNNNNNNNNN", "acgt\u2009acgt\xa0acgt"]
    raws += ["\n".join(r.sequence[i : i + 60] for i in range(0, len(r.sequence), 60))  # as a FASTA file holds them
             for r in shipped_records()[:40]]
    for raw in raws:
        assert _cleaned(clean_sequence, raw) == _cleaned(reference_clean_sequence, raw), raw[:60]


def test_bench_times_the_preparation_before_and_now_in_the_same_run(tmp_path):
    from bench import bench_classify

    out = bench_classify.main(["--prep-only", "--n", "3", "--repeats", "2", "--forward-cpu-ms", "72",
                               "--json", str(tmp_path / "prep.json")])
    assert out["preparation_reference_cpu_ms_per_genome"] > 0 and out["preparation_now_cpu_ms_per_genome"] > 0
    assert out["preparation_speedup"] > 0 and out["preparation_rounds"] == 2
    assert "cores" in out["machine"]  # the machine is named
    table = bench_classify.preparation_markdown(out, 72.0)
    assert "| now |" in table and "(forward 72 ms)" in table
    assert (tmp_path / "prep.json").exists()
