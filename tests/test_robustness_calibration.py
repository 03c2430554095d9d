"""The wide robustness benchmark's perturbations, calibration metrics, the temperature and its split."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertgeom.sars_cov_2.genome.align import align_spike
from bertgeom.sars_cov_2.genome.augment import AugmentConfig, artic_dropouts, augment_spike, marker_changes_by_class
from bertgeom.sars_cov_2.genome.classes import CLASSES
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes, split_calibration, split_real_genomes
from bertgeom.sars_cov_2.genome.markers import call_by_markers, marker_state
from bertgeom.sars_cov_2.genome.reference import SPIKE_END, SPIKE_START
from bertgeom.probabilities import scaled_softmax
from bertgeom.sars_cov_2.variant.calibration import fit_temperature, read_temperature, write_calibration
from bertgeom.sars_cov_2.variant.robustness import (
    KINDS,
    Genome,
    expected_calibration_error,
    score_kinds,
    wide_perturbations,
)


@pytest.fixture(scope="module")
def demo_genomes():
    return [Genome(meta["name"], meta["class"], cut.aligned, tuple(cut.insertions), "pass")
            for rec, meta in load_demo_genomes() for cut in [align_spike(rec.sequence)]]


def _diff(a: str, b: str) -> list[int]:
    return [i for i, (x, y) in enumerate(zip(a, b)) if x != y]


def test_every_kind_is_drawn_reproducibly_and_the_rule_call_keeps_the_class_under_convergence(demo_genomes):
    pert = wide_perturbations(demo_genomes, seed=3)
    assert {p.kind for p in pert} == set(KINDS) - {"plain"}
    assert [(p.kind, p.change, p.aligned) for p in wide_perturbations(demo_genomes, seed=3)] == \
        [(p.kind, p.change, p.aligned) for p in pert]
    assert [p.aligned for p in wide_perturbations(demo_genomes, seed=4)] != [p.aligned for p in pert]
    by_class = marker_changes_by_class()
    for p in pert:
        g = demo_genomes[p.base]
        if p.kind.startswith("foreign") or p.kind == "private":
            # every own marker kept, so a rule-based caller keeps the class
            own_present = [m for m in by_class[g.cls] if marker_state(m, g.aligned, g.insertions) == "present"]
            assert all(marker_state(m, p.aligned, p.insertions) == "present" for m in own_present), p.change
            assert call_by_markers(p.aligned, p.insertions).call == g.cls, (g.cls, p.change)
        if p.kind.startswith("foreign"):
            k = int(p.kind[-1])
            donor = p.change.rsplit("(", 1)[1].rstrip(")")
            assert donor != g.cls and p.change.count("+") == k
            donor_present = [m for m in by_class[donor] if marker_state(m, p.aligned, p.insertions) == "present"
                             and marker_state(m, g.aligned, g.insertions) != "present"]
            assert len(donor_present) == k, p.change


def test_private_substitutions_dropouts_n_runs_and_partial_spikes_are_what_they_say(demo_genomes):
    marker_sites = {i for ms in marker_changes_by_class().values() for m in ms for i in range(*m.span)}
    drops = {(a - SPIKE_START, b - SPIKE_START + 1) for _, _, a, b in artic_dropouts()}
    for p in wide_perturbations(demo_genomes, seed=0):
        g = demo_genomes[p.base]
        changed = _diff(g.aligned, p.aligned)
        if p.kind == "private":
            assert 1 <= len(changed) <= 10 and not set(changed) & marker_sites
            assert all(p.aligned[i] in "ACGT" for i in changed)
        elif p.kind in ("dropout", "n_run", "partial"):
            assert all(p.aligned[i] == "N" for i in changed)
            n_run = [i for i, c in enumerate(p.aligned) if c == "N" and g.aligned[i] != "N"]
            if p.kind == "dropout":  # exactly one real ARTIC amplicon's N run (less what was already N)
                assert any(set(n_run) <= set(range(a, b)) and len(n_run) >= 0.5 * (b - a) for a, b in drops), p.change
            elif p.kind == "n_run":
                assert int(p.change.split()[2]) in range(100, 501) and max(n_run) - min(n_run) < 500
            else:
                assert 300 <= int(p.change.split()[2]) <= 1200


def test_the_artic_amplicons_lie_over_the_spike_at_amplicon_sizes():
    drops = artic_dropouts()
    assert {s for s, *_ in drops} == {"ARTIC V3", "ARTIC V4.1"} and len(drops) >= 25
    for _, _, a, b in drops:
        assert SPIKE_START <= a < b <= SPIKE_END
        if SPIKE_START < a and b < SPIKE_END:  # not clipped at the spike's ends
            assert 180 <= b - a + 1 <= 320


def test_the_convergent_augmentation_injects_several_markers_of_one_class_and_keeps_the_label(demo_genomes):
    rng = np.random.default_rng(0)
    cfg = AugmentConfig.convergent()
    one_class = 0
    for g in demo_genomes:
        for _ in range(12):
            out = augment_spike(g.aligned, g.cls, rng, g.insertions, cfg)
            assert call_by_markers(out.aligned, out.insertions).call == g.cls
            donors = {e.rsplit("(", 1)[1].split()[0] for e in out.events if e.startswith("+")}
            one_class += len(donors) == 1 and sum(e.startswith("+") for e in out.events) >= 2
    assert one_class >= 0.2 * 12 * len(demo_genomes)


def test_expected_calibration_error_on_known_cases():
    assert expected_calibration_error([0.95] * 100, [True] * 95 + [False] * 5) == pytest.approx(0.0)
    assert expected_calibration_error([1.0] * 10, [True] * 5 + [False] * 5) == pytest.approx(0.5)
    # two bins, each off by 0.1, half the samples each
    assert expected_calibration_error([0.6] * 10 + [0.9] * 10, [True] * 5 + [False] * 5 + [True] * 10) == \
        pytest.approx(0.5 * 0.1 + 0.5 * 0.1)


def test_score_kinds_counts_flips_confident_errors_and_rule_kept_flips(demo_genomes):
    pert = wide_perturbations(demo_genomes[:2], seed=0)
    flip_on = next(i for i, p in enumerate(pert) if p.kind == "foreign2")

    def fake(inputs):  # right on everything but one perturbation, which it calls wrongly at 0.95
        target = pert[flip_on].aligned
        calls = [("delta" if a == target else None) for a, _ in inputs]
        plain = {g.aligned: g.cls for g in demo_genomes}
        bases = {p.aligned: demo_genomes[p.base].cls for p in pert}
        return [c or plain.get(a) or bases[a] for c, (a, _) in zip(calls, inputs)], [0.95] * len(inputs)

    rules = ([g.cls for g in demo_genomes[:2]], [demo_genomes[p.base].cls for p in pert])
    s = score_kinds(fake, demo_genomes[:2], pert, rules)
    assert s["plain"].accuracy == 1.0 and s["plain"].wrong_confident == 0
    f2 = s["foreign2"]
    assert f2.flip_rate == pytest.approx(1 / f2.n) and f2.flip_rate_rule_kept == pytest.approx(1 / f2.n)
    assert f2.wrong_confident == 1 and f2.wrong_confident_qc_pass == 1
    assert all(s[k].flip_rate == 0 for k in s if k not in ("plain", "foreign2"))


def test_fit_temperature_recovers_the_temperature_that_made_the_labels():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 3, size=(4000, 8))
    p = scaled_softmax(z, 2.5)
    y = np.array([rng.choice(8, p=row / row.sum()) for row in p.astype(float)])
    assert fit_temperature(z, y) == pytest.approx(2.5, rel=0.08)
    assert fit_temperature(z * 0.5, y) == pytest.approx(1.25, rel=0.08)


def test_the_temperature_is_stored_with_the_weights_and_applied_where_probabilities_are_made(
        tmp_path, tiny_variant_dir):
    import shutil

    from bertgeom.sars_cov_2.genome.dataset import load_validation_small
    from bertgeom.models import hash_file, load_model
    from bertgeom.sars_cov_2.variant import variant_spec
    from bertgeom.sars_cov_2.variant.explain import probabilities_for_spike
    from bertgeom.probabilities import class_probabilities
    from bertgeom.sars_cov_2.variant.predict import classify_stream, logits_for_ids

    model = tmp_path / "m"
    shutil.copytree(tiny_variant_dir, model)
    assert read_temperature(model, hash_file(model / "model.safetensors"))[0] == 1.0
    write_calibration(model, 3.0, "not-these-weights", {})
    t, note = read_temperature(model, hash_file(model / "model.safetensors"))
    assert t == 1.0 and "other weights" in note
    write_calibration(model, 3.0, hash_file(model / "model.safetensors"), {"genomes": 1})
    assert json.loads((model / "calibration.json").read_text())["version"] == 1
    loaded = load_model(variant_spec(model))
    assert loaded.extra["temperature"] == 3.0
    rec, _ = load_validation_small()[0]
    pred = next(classify_stream(loaded, [rec]))
    aligned = pred.spike
    ids, _ = loaded.tokenizer.encode(aligned, max_length=None)
    z = logits_for_ids(loaded, ids[None, :])
    expected = scaled_softmax(z, 3.0)[0]
    assert np.allclose([pred.probs[c] for c in loaded.labels], expected, atol=1e-5)
    assert np.allclose(probabilities_for_spike(loaded, aligned), expected, atol=1e-5)
    assert np.allclose(class_probabilities(loaded, z)[0], expected)
    raw = scaled_softmax(z, 1.0)[0]
    assert int(np.argmax(raw)) == int(np.argmax(expected)) and not np.allclose(raw, expected)


def test_the_calibration_split_is_deterministic_and_apart_from_training_and_evaluation():
    from bertgeom.sars_cov_2.genome.dataset import read_labels
    from bertgeom.sars_cov_2.genome.reference import data_path

    rows = read_labels(data_path("genomes", "open_genomes_dev_labels.tsv"))
    split = split_real_genomes(rows)
    cal = split_calibration(rows)
    assert cal == split_calibration(list(reversed(rows)))
    assert set(cal.calibration) | set(cal.evaluation) == set(split.validation)
    assert not set(cal.calibration) & set(cal.evaluation) and not set(cal.calibration) & set(split.train)
    from bertgeom.sars_cov_2.genome.classes import label_to_class

    cls_of = {r["name"]: label_to_class(r["label"]) for r in rows}
    for c in CLASSES:
        n_val = sum(cls_of[n] == c for n in split.validation)
        assert sum(cls_of[n] == c for n in cal.calibration) == n_val // 3
    assert split_calibration(rows, seed=1) != cal


def test_the_model_card_shows_the_wide_benchmark_calibration_and_reliability_diagram(tmp_path, tiny_variant_dir):
    import shutil

    from bertgeom.sars_cov_2.variant.card import write_card
    from bertgeom.sars_cov_2.variant.predict import eval_report
    from bertgeom.sars_cov_2.variant.robustness import KINDS

    model = tmp_path / "m"
    shutil.copytree(tiny_variant_dir, model)
    (model / "reliability.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    rep = eval_report("BERT variant model", ["gh", "alpha"], ["gh", "alpha"], list(CLASSES)).__dict__
    score = {"n": 2, "accuracy": 1.0, "flip_rate": 0.0, "n_rule_kept": 2, "flip_rate_rule_kept": 0.0,
             "wrong_confident": 0, "wrong_confident_qc_pass": 0, "ece": 0.0125, "examples": []}
    plain = {**score, "flip_rate": None, "flip_rate_rule_kept": None}
    kinds = {k: (plain if k == "plain" else score) for k in KINDS}
    names = ("BERT variant model", "BERT, raw softmax", "k-mer count logistic regression", "rule-based marker call")
    result = {"kinds": KINDS, "temperature": 1.7, "evaluation_genomes": 2, "perturbations": 18, "perturbed_bases": 2,
              "max_per_class": 20, "seed": 0, "reports": {n: kinds for n in names},
              "calibration": {"genomes": 91, "perturbed": 400, "seconds": 12.0, "device": "cpu"}}
    text = write_card(model, {"model": rep, "rules": rep, "baseline": rep}, result)
    assert "## Robustness and calibration" in text and "![Reliability diagram](reliability.png)" in text
    assert "T = 1.700" in text and "91 real **calibration** genomes" in text
    assert "+2 markers of one other class" in text and "0.013" in text
    assert json.loads((model / "metrics.json").read_text())["robustness"]["temperature"] == 1.7


def test_the_benchmark_compares_candidates_on_the_calibration_genomes_never_the_evaluation_ones(capsys):
    """``bench_robustness.py --split calibration`` (how retraining candidates are chosen) scores exactly the
    calibration genomes, none of the evaluation genomes the README reports, and refuses to publish them."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import bench_robustness

    cal, _ = bench_robustness.validation_genomes(None, split="calibration")
    ev, capped = bench_robustness.validation_genomes(5, split="evaluation")
    from bertgeom.sars_cov_2.genome.dataset import read_labels
    from bertgeom.sars_cov_2.genome.reference import data_path

    split = split_calibration(read_labels(data_path("genomes", "open_genomes_dev_labels.tsv")))
    assert {g.name for g in cal} <= set(split.calibration) and len(cal) >= 0.95 * len(split.calibration)
    assert not {g.name for g in cal} & {g.name for g in ev}
    assert {g.name for g in capped} <= {g.name for g in ev}
    assert bench_robustness.main(["--split", "calibration", "--update-readme"]) == 2
    assert "evaluation split only" in capsys.readouterr().err
