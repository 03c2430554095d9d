"""Explanations, mutagenesis and batch classification on the tiny random variant model."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from cli_run import bertgeom_cli

from bertgeom.sars_cov_2.genome.reference import SPIKE_START, reference_spike
from bertgeom.sars_cov_2.variant.spec import genome_set
from bertgeom.trace import run_trace
from bertgeom.analysis.attributions import integrated_gradients
from bertgeom.sars_cov_2.variant.explain import (
    apply_changes,
    attention_rollout,
    cls_attention_by_layer,
    parse_change,
    probabilities_for_spike,
)
from bertgeom.sars_cov_2.variant.predict import classify_stream, eval_report


@pytest.fixture(scope="module")
def omicron_trace(tiny_variant):
    return run_trace(tiny_variant, genome_set("demo")[-1].text)


def test_cls_attention_and_rollout_are_distributions(omicron_trace):
    cls = cls_attention_by_layer(omicron_trace)
    roll = attention_rollout(omicron_trace)
    assert cls.shape == roll.shape == (2, 427)
    np.testing.assert_allclose(cls.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(roll.sum(-1), 1.0, atol=1e-8)


def test_rollout_of_identity_attention_stays_on_cls(omicron_trace):
    import copy

    t = copy.copy(omicron_trace)
    t.attentions = np.broadcast_to(np.eye(427, dtype=np.float32), omicron_trace.attentions.shape).copy()
    roll = attention_rollout(t)
    assert roll[-1, 0] == pytest.approx(1.0)


def test_rollout_rows_equal_the_full_matrix_products(omicron_trace):
    """The [CLS]-row shortcut gives row 0 of R_l = M_l ... M_1 (the definition, computed in full)."""
    a = omicron_trace.attentions.mean(axis=1).astype(np.float64)
    eye = np.eye(a.shape[-1])
    rolled, want = eye, []
    for layer in range(a.shape[0]):
        m = 0.5 * a[layer] + 0.5 * eye
        m /= m.sum(axis=-1, keepdims=True)
        rolled = m @ rolled
        want.append(rolled[0])
    np.testing.assert_allclose(attention_rollout(omicron_trace), np.stack(want), rtol=1e-6, atol=1e-12)


def test_explanations_take_the_servers_read_only_token_ids(tiny_variant, omicron_trace):
    """The app shares traces read-only: IG must copy the ids, not hand torch a read-only array."""
    import warnings

    ids = omicron_trace.encoded.input_ids.copy()
    ids.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        attr = integrated_gradients(tiny_variant, ids, 0, steps=4, batch_size=4)
    assert attr.shape == ids.shape


def test_integrated_gradients_satisfy_completeness(tiny_variant, omicron_trace):
    """Sum of attributions ~= f(input) - f(baseline) (IG's completeness axiom)."""
    import torch

    ids = omicron_trace.encoded.input_ids
    target = int(np.argmax(omicron_trace.logits))
    attr = integrated_gradients(tiny_variant, ids, target, steps=64, batch_size=16)
    assert attr.shape == (427,) and attr[0] == 0 and attr[-1] == 0
    base_ids = ids.copy()
    base_ids[1:-1] = 0
    with torch.inference_mode():
        f_x = tiny_variant.model(input_ids=torch.tensor(ids)[None]).logits[0, target].item()
        f_b = tiny_variant.model(input_ids=torch.tensor(base_ids)[None],
                                 attention_mask=torch.ones(1, 427, dtype=torch.long)).logits[0, target].item()
    assert attr.sum() == pytest.approx(f_x - f_b, abs=0.05 * max(1e-3, abs(f_x - f_b)) + 1e-3)
    assert not any(p.requires_grad for p in tiny_variant.model.parameters())


def test_mutagenesis_changes_exactly_one_token(tiny_variant):
    ref = reference_spike()
    change = parse_change("A23063T")  # N501Y
    mutated = apply_changes(ref, [change])
    assert sum(a != b for a, b in zip(ref, mutated)) == 1 and mutated[23063 - SPIKE_START] == "T"
    ids_ref, _ = tiny_variant.tokenizer.encode(ref, max_length=None)
    ids_mut, _ = tiny_variant.tokenizer.encode(mutated, max_length=None)
    assert 1 <= int((ids_ref != ids_mut).sum()) <= 2  # a base lies in one or two overlapping 12-mers
    p = probabilities_for_spike(tiny_variant, mutated)
    assert p.shape == (8,) and p.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("bad", ["X23063T", "A1T", "C23063T", "hello"])
def test_bad_changes_are_refused_with_a_sentence(bad):
    with pytest.raises(ValueError):
        parse_change(bad)


def test_classify_stream_reports_bad_records_in_their_row(tiny_variant):
    from bertgeom.sars_cov_2.genome.fasta import parse_sequences

    recs = parse_sequences(genome_set("demo")[0].text + "\n>short\nACGTACGTAC\n" + genome_set("demo")[3].text)
    preds = list(classify_stream(tiny_variant, recs, batch_size=2))
    assert [p.name for p in preds][1] == "short" and preds[1].error and preds[1].predicted is None
    assert preds[0].predicted in tiny_variant.labels and abs(sum(preds[0].probs.values()) - 1) < 1e-5
    assert preds[2].qc in {"pass", "warn", "fail"}


def test_eval_report_counts():
    rep = eval_report("m", ["a", "a", "b"], ["a", "b", "b"], ["a", "b"])
    assert rep.accuracy == pytest.approx(2 / 3) and rep.confusion == [[1, 1], [0, 1]]
    assert rep.per_class["a"]["recall"] == 0.5


def test_classify_cli_writes_one_row_per_record(tiny_variant_dir, tmp_path):
    import lzma

    src = tmp_path / "in.fasta.xz"
    with lzma.open(src, "wt") as fh:
        fh.write(genome_set("demo")[1].text + "\n>junk\nNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN\n")
    out = tmp_path / "preds.csv"
    r = bertgeom_cli("classify", src, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out)))
    assert [row["name"] for row in rows][1] == "junk" and rows[1]["error"]
    assert rows[0]["predicted"] and rows[0]["model_version"] and "p_omicron" in rows[0]


def test_checked_integrated_gradients_report_their_completeness_gap(tiny_variant, omicron_trace):
    from bertgeom.analysis.attributions import integrated_gradients_checked

    ids = omicron_trace.encoded.input_ids
    target = int(np.argmax(omicron_trace.logits))
    res = integrated_gradients_checked(tiny_variant, ids, target, steps=8, tolerance=0.02, max_steps=64)
    assert res.attributions.shape == (427,) and res.attributions[0] == 0
    assert res.gap == pytest.approx(abs(res.attributions.sum() - res.delta) / abs(res.delta))
    assert res.complete and res.steps <= 64, res.summary()
    assert "gap" in res.summary()
    loose = integrated_gradients_checked(tiny_variant, ids, target, steps=2, tolerance=1e-9, max_steps=4)
    assert loose.steps <= 4 and not loose.complete and "read the track with care" in loose.summary()
    # the refinement ran (2 -> 4 nodes); when it made the gap worse, the 2-node attempt is the one kept, and said so
    # (on a CPU with bf16 units the note may also say which precision's run is kept: not this sentence)
    assert "refin" in loose.note and ((loose.steps == 2) == ("made the gap worse" in loose.note)), loose.note


def test_first_segments_narrow_where_the_logit_moves_and_stay_equal_on_a_flat_path():
    """The probe's partition: equal segments on a flat (or linear) path, narrow ones around a jump."""
    from bertgeom.analysis.attributions import path_edges

    grid = np.linspace(0.0, 1.0, 9)
    np.testing.assert_allclose(path_edges(grid, np.zeros(9), 4), [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_allclose(path_edges(grid, 3 * grid, 4), [0, 0.25, 0.5, 0.75, 1])
    jump = np.where(grid >= 0.375, 5.0, 0.0)  # the logit jumps between 0.25 and 0.375
    edges = path_edges(grid, jump, 4)
    assert edges[0] == 0 and edges[-1] == 1 and np.all(np.diff(edges) > 0)
    inside = np.sum((edges > 0.25) & (edges < 0.375))
    assert inside >= 1 and edges[2] - edges[1] < 0.125 < edges[-1] - edges[-2]
    np.testing.assert_allclose(path_edges(grid, jump, 4, mix=0.0), [0, 0.25, 0.5, 0.75, 1])


def test_probe_placed_and_equal_first_segments_both_reach_completeness(tiny_variant, omicron_trace):
    """The probe changes where the first segments lie, never what the check accepts."""
    from bertgeom.analysis.attributions import integrated_gradients_checked

    ids = omicron_trace.encoded.input_ids
    target = int(np.argmax(omicron_trace.logits))
    for probe in (0, 8):
        res = integrated_gradients_checked(tiny_variant, ids, target, steps=8, tolerance=0.02, max_steps=64,
                                           precision="fp32", probe=probe)
        assert res.complete, (probe, res.summary())


def test_refined_integrated_gradients_agree_with_a_dense_midpoint_sum(tiny_variant, omicron_trace):
    """The composite Gauss-Legendre result (fp32, refined until complete) sums like a dense midpoint rule."""
    from bertgeom.analysis.attributions import integrated_gradients, integrated_gradients_checked

    ids = omicron_trace.encoded.input_ids
    target = int(np.argmax(omicron_trace.logits))
    res = integrated_gradients_checked(tiny_variant, ids, target, steps=4, nodes_per_segment=4, tolerance=0.02,
                                       max_steps=64, precision="fp32")
    assert res.precision == "fp32" and res.complete, res.summary()
    # the same integral by the midpoint rule with many points agrees to the tolerance
    dense = integrated_gradients(tiny_variant, ids, target, steps=64, batch_size=32)
    np.testing.assert_allclose(res.attributions.sum(), dense.sum(), atol=0.05 * abs(res.delta) + 1e-6)


def test_revertible_events_are_the_mutation_tables_events_one_entry_each():
    """#21: the what-if listed the deletion's bases while the table named its residues, and counted bases."""
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.sars_cov_2.variant.spec import genome_set
    from bertgeom.sars_cov_2.variant.explain import revertible_events
    from bertgeom.sars_cov_2.variant.result import mutation_events

    report = analyse_sequence(genome_set("demo")[7].text).mutations  # OP339227, an Omicron (BA.2-like)
    events = revertible_events(report, mutation_events(report))
    by_name = {e.name: e for e in events}
    assert [m.name for m in by_name["S:G339H"].mutations] == ["G22577C", "G22578A"]  # one codon, one entry
    name = "S:L24- + S:P25- + S:P26- + S:A27S"  # Nextclade's per-residue rows of one deletion: one entry
    assert name in by_name and len(by_name[name].mutations) == 1
    silent = [e for e in events if e.silent]
    assert silent and all(e.mutations[0].aa is None and "no amino-acid change" in e.label for e in silent)
    reverted = sorted(m.name for e in events for m in e.mutations)  # every sub/del exactly once
    assert reverted == sorted(m.name for m in report.spike_nucleotide if m.kind in ("sub", "del"))
    alpha = analyse_sequence(genome_set("demo")[3].text).mutations
    names = [e.name for e in revertible_events(alpha, mutation_events(alpha))]
    assert "S:H69- + S:V70-" in names and not any(n.startswith("2176") for n in names)
