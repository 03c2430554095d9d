"""Synthetic spikes: class content, determinism, and identity with the alignment pipeline."""

import numpy as np

from bertgeom.sars_cov_2.genome.align import align_spike
from bertgeom.sars_cov_2.genome.classes import CLASSES
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
from bertgeom.sars_cov_2.genome.mutations import call_mutations, class_defining_mutations
from bertgeom.sars_cov_2.genome.synth import (
    SynthConfig,
    canonicalise,
    clade_weights,
    realise_genome,
    synth_batch,
    synth_from_template,
    synth_spike,
)


def test_deterministic():
    a = synth_batch(3, seed=5)
    b = synth_batch(3, seed=5)
    assert [(s.aligned, s.insertions, s.clade) for s in a] == [(s.aligned, s.insertions, s.clade) for s in b]
    c = synth_batch(3, seed=6)
    assert [s.aligned for s in a] != [s.aligned for s in c]
    assert [s.cls for s in a] == [c for c in CLASSES for _ in range(3)]


def test_clean_synthetic_spikes_carry_class_markers():
    rng = np.random.default_rng(0)
    for cls in CLASSES:
        for _ in range(3):
            s = synth_spike(cls, rng, SynthConfig.clean())
            assert len(s.aligned) == 3822 and "N" not in s.aligned
            rep = call_mutations(s.to_cut())
            missing = [m.name for m in class_defining_mutations(cls, clade=s.clade) if not rep.has(m.name)]
            assert not missing, (cls, s.clade, missing)


def test_direct_spike_equals_alignment_of_realised_genome():
    noisy = SynthConfig(private_rate=4, dropout_rate=1, short_n_rate=2, partial_prob=0.3, ambiguous_rate=2)
    batch = synth_batch(4, seed=11) + synth_batch(2, seed=12, config=noisy)
    for s in batch:
        cut = align_spike(realise_genome(s))
        assert cut.aligned == s.aligned, (s.cls, s.clade, s.noise)
        assert cut.insertions == s.insertions


def test_template_noised_copy():
    rec, meta = load_demo_genomes()[7]  # omicron
    cut = align_spike(rec.sequence)
    s = synth_from_template(cut, meta["class"], 3, SynthConfig(private_rate=3, dropout_rate=1))
    assert len(s.aligned) == 3822 and s.template is None and s.clade is None
    diff = sum(a != b for a, b in zip(s.aligned, cut.aligned))
    assert diff > 0
    assert canonicalise(s).aligned == s.aligned


def test_clade_weights_cover_all_clades():
    w = clade_weights("omicron")
    assert set(w) >= {"21K", "21L", "24A"} and all(v >= 1 for v in w.values())
