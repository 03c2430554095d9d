"""A spike pasted alone gets the call of its genome, and a spike the model cannot read gets none
(issue 42): the gate judges divergence against the nearest node of Nextclade's tree, not identity to
Wuhan-Hu-1, so modern spikes (XBB, BA.2.86, JN.1) pass; most of the model's k-mers unread means no call."""

from __future__ import annotations

import functools

from bertgeom.sars_cov_2.genome.align import align_genome, cut_spike
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes, load_dev_genomes, load_validation_small
from bertgeom.sars_cov_2.genome.fasta import SequenceRecord
from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
from bertgeom.sars_cov_2.genome.reference import SPIKE_END, SPIKE_START, data_path


@functools.lru_cache(maxsize=1)
def shipped_model():
    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant import variant_spec

    return load_model(variant_spec())


def calls(records):
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    return {p.name: p for p in classify_stream(shipped_model(), records, streams=1)}


def spike_alone(sequence: str) -> str:
    """The spike as a user cuts it from a genome: the query's bases aligned to 21563-25384."""
    return cut_spike(align_genome(sequence)).aligned.replace("-", "").strip("N")


@functools.lru_cache(maxsize=1)
def modern_genomes():
    """Shipped developer genomes the tree places on XBB, BA.2.86/JN.1 or CH.1.1 descendants."""
    out = []
    for g in load_dev_genomes(data_path("genomes", "open_genomes_dev.fasta.xz"),
                              data_path("genomes", "open_genomes_dev_labels.tsv")):
        if g.cls != "omicron":
            continue
        a = analyse_sequence(g.sequence)
        un = a.placement.unaliased if a.placement else ""
        if un.startswith(("XBB", "B.1.1.529.2.86", "B.1.1.529.2.75.3.4.1.1.1.1")) and a.callable:
            out.append((g.name, g.sequence, un))
    return tuple(out)


def test_a_spike_alone_gets_the_class_of_its_genome():
    genomes = [(r.name, r.sequence) for r, _ in load_demo_genomes()]
    genomes += [(r.name, r.sequence) for r, _ in load_validation_small()[::2]]  # half: the suite's time
    genomes += [(n, s) for n, s, _ in modern_genomes()]
    whole = calls([SequenceRecord(n, s, []) for n, s in genomes])
    alone = calls([SequenceRecord(n, spike_alone(s), []) for n, s in genomes])
    assert len(genomes) >= 30
    refused = [(n, alone[n].gate, alone[n].notes) for n, _ in genomes if whole[n].predicted and not alone[n].predicted]
    assert not refused, refused
    differ = [(n, whole[n].predicted, alone[n].predicted) for n, _ in genomes
              if whole[n].predicted and whole[n].predicted != alone[n].predicted]
    assert not differ, differ


def test_modern_spikes_are_called_and_placed_on_their_lineage():
    modern = modern_genomes()
    assert len(modern) >= 5, [u for _, _, u in modern]
    for name, seq, unaliased in modern:
        a = analyse_sequence(spike_alone(seq))
        assert a.callable, (name, a.gate)
        assert a.gate.divergence_per_kb < 6, (name, a.gate)
        assert a.placement.region == "spike" and a.clade.cls == "omicron"


def test_an_all_n_spike_gets_no_call_and_says_why():
    name, seq = next((r.name, r.sequence) for r, m in load_demo_genomes() if m["class"] == "delta")
    aln = align_genome(seq).aligned
    blanked = (aln[: SPIKE_START - 1] + "N" * (SPIKE_END - SPIKE_START + 1) + aln[SPIKE_END:]).replace("-", "")
    mostly = (aln[: SPIKE_START - 1] + "N" * 3440 + aln[SPIKE_START - 1 + 3440:]).replace("-", "")  # 90% N
    got = calls([SequenceRecord("blank", blanked, []), SequenceRecord("mostly", mostly, [])])
    for key in ("blank", "mostly"):
        p = got[key]
        assert p.predicted is None and not p.probs and p.gate == "spike not read", (key, p)
        assert "No call" in p.notes
        assert p.clade.startswith("21J")  # placed on the tree from the rest of the genome
