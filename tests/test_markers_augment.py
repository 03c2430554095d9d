"""The characteristic-mutation table, the rule-based caller and the label-preserving augmentation."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.sars_cov_2.genome.align import align_spike
from bertgeom.sars_cov_2.genome.augment import AugmentConfig, augment_spike
from bertgeom.sars_cov_2.genome.classes import CLASSES, VOC_CLASSES
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
from bertgeom.sars_cov_2.genome.markers import (
    build_characteristic_table,
    call_by_markers,
    load_marker_table,
    marker_state,
    parse_characteristic_table,
)
from bertgeom.sars_cov_2.genome.reference import SPIKE_START, data_path, reference_spike
from bertgeom.sars_cov_2.variant.robustness import Genome, perturbations


@pytest.fixture(scope="module")
def demo_cuts():
    return {meta["class"]: align_spike(rec.sequence) for rec, meta in load_demo_genomes()}


def test_shipped_table_is_what_the_builder_makes_and_names_the_classic_markers():
    table = load_marker_table()
    assert table.version == 3
    rebuilt = build_characteristic_table()
    assert tuple(rebuilt) == table.markers  # the file is reproducible from the shipped definitions
    labels = {c: {m.label for m in table.of(c)} for c in CLASSES}
    assert {"L452R", "T478K", "P681R", "T19R"} <= labels["delta"]
    assert {"K417T", "E484K", "N501Y", "L18F"} <= labels["gamma"]
    # G339H (BA.2.75, XBB) is carried by 73 % of Omicron's training genomes since the labels came from the
    # placement, under the table's 75 % (tests/test_golden_mutations.py builds it at 70 %)
    assert {"S477N", "K417N", "N501Y", "G142D"} <= labels["omicron"] and "G339H" not in labels["omicron"]
    assert not {"G339R", "G339D"} & labels["omicron"]  # G22577C + G22578A is one codon change: G339H
    # its codon-level row (one change of two bases, not G339R + G339D) is checked on the 70 % table in
    # tests/test_golden_mutations.py
    assert {"H69- V70-", "Y144-", "N501Y", "P681H"} <= labels["alpha"]  # one row per deletion, Nextclade's names
    assert {"T76I", "L452Q", "F490S"} <= labels["lambda"]
    assert table.of("gh") == []  # pre-VOC has no marker of its own in the spike
    assert [m.label for m in table.of("gh", role=None)] == ["D614G"]


def test_table_round_trips_through_its_text_form(tmp_path):
    from bertgeom.sars_cov_2.genome.markers import write_characteristic_table

    path = tmp_path / "t.tsv"
    write_characteristic_table(load_marker_table().markers, path)
    assert parse_characteristic_table(path.read_text()).markers == load_marker_table().markers


def test_rule_caller_calls_every_demo_genome_right(demo_cuts):
    for cls, cut in demo_cuts.items():
        call = call_by_markers(cut.aligned, cut.insertions)
        assert call.call == cls, (cls, call.reason)
        if cls != "gh":
            ev = call.evidence[cls]
            assert ev.share == 1.0 and len(ev.present) >= 5


def test_rule_caller_on_the_reference_is_pre_voc():
    assert call_by_markers(reference_spike()).call == "gh"


def test_one_foreign_marker_or_one_reversion_never_changes_the_rule_call(demo_cuts):
    genomes = [Genome(c, c, cut.aligned, tuple(cut.insertions)) for c, cut in demo_cuts.items()]
    pert = perturbations(genomes, foreign_per_genome=6, revert_per_genome=3)
    assert {p.kind for p in pert} == {"foreign", "revert"}
    for p in pert:
        assert call_by_markers(p.aligned, p.insertions).call == genomes[p.base].cls, p.change


def test_marker_states_read_substitutions_deletions_and_missing_data(demo_cuts):
    table = load_marker_table()
    alpha = demo_cuts["alpha"].aligned
    by_label = {m.label: m for m in table.of("alpha")}
    assert marker_state(by_label["N501Y"], alpha) == "present"
    assert marker_state(by_label["H69- V70-"], alpha) == "present"
    ref = reference_spike()
    assert marker_state(by_label["N501Y"], ref) == "absent"
    assert marker_state(by_label["H69- V70-"], ref) == "absent"
    masked = alpha[: 23063 - SPIKE_START] + "N" + alpha[23063 - SPIKE_START + 1 :]
    assert marker_state(by_label["N501Y"], masked) == "missing"


def test_augmentation_keeps_labels_and_puts_mutations_at_reference_coordinates(demo_cuts):
    table = load_marker_table()
    rng = np.random.default_rng(0)
    cfg = AugmentConfig(foreign_prob=1.0, revert_prob=0.5, mask_prob=0.0, private_rate=0.0, partial_prob=0.0)
    seen_foreign = 0
    for cls, cut in demo_cuts.items():
        for _ in range(25):
            out = augment_spike(cut.aligned, cls, rng, cut.insertions, cfg)
            assert len(out.aligned) == len(cut.aligned)
            assert call_by_markers(out.aligned, out.insertions).call == cls  # label-preserving
            for event in out.events:
                if not event.startswith("+"):
                    continue
                name = event[1:].split()[0]
                m = next(x for x in table.markers if x.name == name)
                assert m.key not in table.keys_of[cls]  # foreign to the class
                assert marker_state(m, out.aligned, out.insertions) == "present"  # placed at its coordinates
                if m.kind == "sub":
                    a, b = m.span
                    assert out.aligned[a:b] == (m.codon if m.codon_level else m.alt)
                seen_foreign += 1
    assert seen_foreign > 100


def test_augmentation_is_reproducible_from_its_seed(demo_cuts):
    cut = demo_cuts["delta"]
    a = [augment_spike(cut.aligned, "delta", np.random.default_rng(7), cut.insertions).aligned for _ in range(3)]
    b = [augment_spike(cut.aligned, "delta", np.random.default_rng(7), cut.insertions).aligned for _ in range(3)]
    assert a == b
    none = augment_spike(cut.aligned, "delta", np.random.default_rng(7), cut.insertions, AugmentConfig.none())
    assert none.aligned == cut.aligned and none.events == []


def test_training_batches_are_augmented_and_labelled(demo_cuts):
    from bertgeom.sars_cov_2.genome.kmers import KmerVocab
    from bertgeom.sars_cov_2.variant.train import Example, step_batch

    pool = [Example(c, cut.aligned, c, "real", list(cut.insertions)) for c, cut in demo_cuts.items()]
    vocab = KmerVocab.build([e.spike for e in pool])
    idx = np.arange(len(pool))
    ids, y = step_batch(pool, idx, vocab, seed=1, step=3, augment=AugmentConfig(foreign_prob=1.0))
    plain, _ = step_batch(pool, idx, vocab, seed=1, step=3, augment=None)
    assert list(y) == [CLASSES.index(c) for c in demo_cuts]
    assert ids.shape == plain.shape and (ids != plain).any()
    again, _ = step_batch(pool, idx, vocab, seed=1, step=3, augment=AugmentConfig(foreign_prob=1.0))
    assert (again == ids).all()  # a resumed run draws the same batch


def test_characteristic_table_file_is_shipped_with_provenance():
    text = data_path("definitions", "characteristic_mutations.tsv").read_text()
    assert text.startswith("# bertgeom characteristic spike mutations per class, table version 3")
    assert all(c in text for c in VOC_CLASSES)


def test_shipped_profiles_name_indels_as_every_other_table_does():
    """The training profiles' indel rows carry the names the characteristic table writes, from the same
    function: Nextclade's per-residue deletions (Delta's E156G F157- R158-)."""
    from bertgeom.sars_cov_2.genome.shipped_files import profile_aa_name
    from bertgeom.sars_cov_2.genome.mutations import load_spike_profiles

    indels = [e for entries in load_spike_profiles().values() for e in entries if e.kind != "sub"]
    assert indels
    for e in indels:
        assert e.aa == profile_aa_name(e.kind, e.pos, e.ref, e.alt), e
        assert not e.aa.startswith(("del", "ins")), e
    assert any(e.aa == "H69- V70-" for e in indels)
