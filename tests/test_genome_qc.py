"""Spike QC verdicts (bertgeom.sars_cov_2.genome.qc)."""

import functools

from bertgeom.sars_cov_2.genome import qc
from bertgeom.sars_cov_2.genome.align import align_genome, cut_spike
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes, load_validation_small
from bertgeom.sars_cov_2.genome.mutations import call_mutations
from bertgeom.sars_cov_2.genome.reference import reference_sequence


@functools.lru_cache(maxsize=1)
def demo():
    return {meta["class"]: rec.sequence for rec, meta in load_demo_genomes()}


def run(genome, cls=None):
    aln = align_genome(genome)
    return qc.spike_qc(cut_spike(aln), call_mutations(aln), cls)


def non_homopolymer(ref, start):
    return next(p for p in range(start, start + 100) if ref[p - 2] != ref[p - 1] != ref[p])


def test_clean_genomes_pass():
    assert run(reference_sequence()).verdict == "pass"
    for cls, seq in demo().items():
        res = run(seq, cls)
        assert res.verdict == "pass", (cls, res.reasons)
        assert res.ok and res.reasons == []


def test_n_heavy_fails():
    g = demo()["delta"]
    g = g[:21700] + "N" * 600 + g[22300:]
    res = run(g, "delta")
    assert res.verdict == "fail" and res.checks["missing data"] == "fail"
    assert any("are N" in r for r in res.reasons)


def test_partial_spike_fails_on_coverage():
    res = run(reference_sequence()[:22500], "gh")
    assert res.checks["coverage"] == "fail" and res.verdict == "fail"


def test_frameshifts_warn_then_fail():
    ref = reference_sequence()
    p1, p2 = non_homopolymer(ref, 22400), non_homopolymer(ref, 24000)
    one = ref[: p1 - 1] + ref[p1:]
    res = run(one)
    assert res.verdict == "warn" and res.checks["frameshifts"] == "warn" and len(res.frameshifts) == 1
    two = one[: p2 - 2] + one[p2 - 1 :]
    res = run(two)  # a second 1-nt deletion downstream keeps the frame shifted: one range, as Nextclade merges
    assert res.verdict == "warn" and len(res.frameshifts) == 1


def test_private_mutations_against_class():
    g = demo()["lambda"]
    assert len(run(g, "lambda").private) <= 2
    wrong = run(g, "omicron")  # judged against the wrong class: lambda's markers are private
    assert len(wrong.private) >= 3 and wrong.qc_class == "omicron"
    ref = list(reference_sequence())
    for p in range(21700, 21700 + 3 * 30, 3):  # 30 scattered transitions
        ref[p - 1] = {"A": "G", "G": "A", "C": "T", "T": "C"}[ref[p - 1]]
    res = run("".join(ref), "gh")
    assert res.checks["private mutations"] == "fail" and len(res.private) == 30


def test_ambiguous_bases_warn():
    g = list(reference_sequence())
    for p in range(22000, 22000 + 5 * 50, 50):
        g[p - 1] = "R"
    res = run("".join(g))
    assert res.ambiguous == 5 and res.checks["ambiguous bases"] == "warn"


def test_validation_small_mostly_usable():
    verdicts = [run(rec.sequence, meta["class"]).verdict for rec, meta in load_validation_small()]
    assert "fail" not in verdicts


def test_whole_genome_qc_sees_what_the_spike_checks_cannot():
    """N far from the spike: the spike passes, the whole-genome card warns (issue 12)."""
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence

    rec = next(r for r, meta in load_demo_genomes() if meta["class"] == "alpha")
    seq = rec.sequence[:5000] + "N" * 1921 + rec.sequence[6921:]
    a = analyse_sequence(seq)
    assert a.qc.checks.get("missing data", "pass") == "pass"
    assert a.genome_qc.verdict == "warn" and a.genome_qc.missing >= 1921
    assert any("1," in r and "missing" in r for r in a.genome_qc.reasons)
    shifted = rec.sequence[:10000] + rec.sequence[10001:]  # a 1-nt deletion in ORF1ab
    b = analyse_sequence(shifted)
    assert b.genome_qc.frameshifts and b.genome_qc.checks["frameshifts"] != "pass"
    spike_only = analyse_sequence(rec.sequence[21500:25500])
    assert spike_only.genome_qc.verdict == "partial"


def test_an_intergenic_deletion_is_not_a_frameshift():
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.sars_cov_2.genome.qc import gene_at

    assert gene_at(28271) is None and gene_at(28274) == "N" and gene_at(21563) == "S"
    rec = next(r for r, meta in load_demo_genomes() if meta["class"] == "alpha")
    a = analyse_sequence(rec.sequence)
    assert not any("28271" in f for f in a.genome_qc.frameshifts)  # Alpha's del28271 sits before N
