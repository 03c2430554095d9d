"""Alignment to MN908947.3 and the spike cut (bertgeom.sars_cov_2.genome.align)."""

import functools
import time

import numpy as np
import pytest

from bertgeom.sars_cov_2.genome.align import AlignmentError, align_genome, align_spike, nextclade_placement
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
from bertgeom.sars_cov_2.genome.reference import (
    SPIKE_END,
    SPIKE_LEN,
    SPIKE_START,
    reference_sequence,
    reference_spike,
    reverse_complement,
)


@functools.lru_cache(maxsize=1)
def demo():
    return {meta["class"]: rec for rec, meta in load_demo_genomes()}


def edit(genome, deletions=(), insertions=()):
    """Apply (pos, length) deletions and (pos_after, bases) insertions, genome 1-based."""
    g = list(genome)
    for p, n in deletions:
        for i in range(p - 1, p - 1 + n):
            g[i] = ""
    for p, b in insertions:
        g[p - 1] += b
    return "".join(g)


def test_reference_spike_is_identity():
    cut = align_spike(reference_sequence())
    assert cut.aligned == reference_spike()
    assert len(cut.aligned) == SPIKE_LEN == 3822
    assert cut.coverage == 1.0 and cut.strand == 1 and not cut.insertions and not cut.deletions


def test_spike_only_and_reverse_complement_input():
    cut = align_spike(reference_spike())
    assert cut.aligned == reference_spike() and cut.coverage == 1.0
    rc = align_spike(reverse_complement(reference_spike()))
    assert rc.aligned == reference_spike() and rc.strand == -1
    assert any("reverse complement detected" in n for n in rc.notes)


def test_reverse_complement_of_real_genome_gives_same_spike():
    rec = demo()["omicron"]
    fwd = align_spike(rec.sequence)
    rev = align_spike(reverse_complement(rec.sequence))
    assert rev.strand == -1 and fwd.strand == 1
    assert rev.aligned == fwd.aligned and rev.insertions == fwd.insertions
    assert any("reverse complement" in n for n in rev.notes)


def test_indels_in_spike():
    genome = edit(reference_sequence(), deletions=[(21765, 6)], insertions=[(22204, "GAGCCAGAA")])
    cut = align_spike(genome)
    assert len(cut.aligned) == 3822
    assert cut.aligned[21765 - SPIKE_START : 21771 - SPIKE_START] == "------"
    assert cut.aligned.count("-") == 6
    assert cut.insertions == [(22204, "GAGCCAGAA")]
    assert cut.deletions == [(21765, 6)]
    assert not cut.frameshifts
    paper = cut.paper_sequence()
    assert len(paper) == 3822 - 6 + 9


def test_frameshift_reported():
    ref = reference_sequence()
    p = next(p for p in range(23000, 23100) if ref[p - 2] != ref[p - 1] != ref[p])  # not in a homopolymer
    cut = align_spike(edit(ref, deletions=[(p, 1)]))
    assert [(f.kind, f.pos, f.length) for f in cut.frameshifts] == [("del", p, 1)]


def test_partial_and_n_runs():
    spike = reference_spike()
    half = align_spike(spike[:1900])
    assert 0.45 < half.coverage < 0.55
    assert half.aligned[:1900] == spike[:1900] and set(half.aligned[1900:]) == {"N"}
    g = reference_sequence()
    holes = g[:22000] + "N" * 280 + g[22280:23500] + "N" * 250 + g[23750:]
    cut = align_spike(holes)
    assert cut.coverage == 1.0 and cut.aligned.count("N") == 530
    assert cut.aligned.replace("N", "") == (spike[: 22000 - 21562] + spike[22280 - 21562 : 23500 - 21562]
                                            + spike[23750 - 21562 :])
    frag = align_genome(g[22000:22080])
    assert frag.segments[0][2] == 22000


def test_mismatch_near_end_is_kept():
    spike = reference_spike()
    mutated = "ATT" + spike[3:]
    assert align_spike(mutated).aligned[:3] == "ATT"


def test_unalignable_input_raises_clear_error():
    rng = np.random.default_rng(0)
    junk = "".join(rng.choice(list("ACGT"), 5000))
    with pytest.raises(AlignmentError, match="does not align"):
        align_genome(junk)
    with pytest.raises(AlignmentError, match="too short"):
        align_genome("ACGT")


def test_fast_enough():
    recs = list(demo().values())
    align_spike(recs[0].sequence)  # index build
    t = time.perf_counter()
    for r in recs:
        align_spike(r.sequence)
    per = (time.perf_counter() - t) / len(recs)
    assert per < 0.1, f"{per * 1000:.1f} ms per genome"


def test_genome_alignment_length():
    aln = align_genome(demo()["delta"].sequence)
    assert len(aln.aligned) == 29903 and aln.coverage > 0.99
    assert aln.aligned[SPIKE_START - 1 : SPIKE_END].count("-") == 6  # Delta 22029-22034


def test_a_substitution_run_is_not_a_deletion_insertion_pair():
    """minimap2 reads CTGA -> TGAG at 15824-15827 as deletion 15824 + insertion 15827:G (a false compensated
    frameshift in ORF1b); Nextclade 1.4.1 (tests/data/nextclade_1.4.1/, USA/WA-UW-21051815536/2021) and
    the alignment here call the four substitutions C15824T T15825G G15826A A15827G."""
    ref = reference_sequence()
    genome = ref[:15823] + "TGAG" + ref[15827:]
    aln = align_genome(genome)
    assert not aln.deletions and not aln.insertions
    assert aln.aligned[15823:15827] == "TGAG" and aln.aligned == genome


def test_a_real_compensated_pair_far_apart_stays_two_indels():
    ref = reference_sequence()
    aln = align_genome(edit(ref, deletions=[(22000, 1)], insertions=[(22100, "A")]))
    assert len(aln.deletions) == 1 and len(aln.insertions) == 1


def test_nextclade_places_indels_on_codon_boundaries_and_the_alignment_keeps_its_own():
    """An indel that can slide along a repeat: the alignment keeps minimap2's leftmost place (the model's
    tokens were made from it), the Nextclade view puts it where Nextclade 1.4.1 wrote it
    (tests/data/nextclade_1.4.1/): Alpha's 21992-21994 (S:Y144-), Mu's 21991:ACT, Alpha's 28271 before
    N (outside genes: leftmost), and a deletion beside an N run on the first codon boundary inside it."""
    ref = reference_sequence()
    aln = align_genome(edit(ref, deletions=[(21991, 3), (28271, 1)]))
    assert aln.deletions == [(21991, 3), (28271, 1)]
    placed = nextclade_placement(aln.aligned, aln.covered, aln.insertions, aln.deletions)
    assert placed.deletions == [(21992, 3), (28271, 1)]
    assert placed.aligned[21991:21994] == "---" and placed.aligned.replace("-", "") == aln.aligned.replace("-", "")
    aln = align_genome(edit(ref, insertions=[(21990, "TAC")]))
    assert aln.insertions == [(21990, "TAC")]
    placed = nextclade_placement(aln.aligned, aln.covered, aln.insertions, aln.deletions)
    assert placed.insertions == [(21991, "ACT")] and placed.aligned == aln.aligned
    n_run = list(ref)
    n_run[27520:27540] = ["N"] * 20
    aln = align_genome(edit("".join(n_run), deletions=[(27521, 6)]))
    placed = nextclade_placement(aln.aligned, aln.covered, aln.insertions, aln.deletions)
    assert placed.deletions == [(27523, 6)]  # ORF7a codon 44 starts at 27523
