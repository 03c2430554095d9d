"""Batch precompute (``python -m bertgeom precompute``): engines agree bit for bit, runs resume,
results read back, and the stored numbers are the library's own computations.

Real computations on the tiny random variant model and 20 shipped genomes (+ 1 unreadable record),
in shards of 8 (3 shards). Half of the genomes are labelled with the class the model predicts, so
the class-mean maps have members whatever the random weights say.
"""

from __future__ import annotations

import filecmp
import lzma
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bertgeom.precompute import PrecomputeConfig, PrecomputeError, load_results, precompute

SHARD = 8
N_GENOMES = 20


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_variant):
    from bertgeom.sars_cov_2.genome.fasta import parse_sequences
    from bertgeom.sars_cov_2.variant.spec import genome_set
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    items = list(genome_set()[:N_GENOMES])
    d = tmp_path_factory.mktemp("precompute_inputs")
    fasta = d / "genomes.fasta.xz"
    with lzma.open(fasta, "wt") as fh:
        for it in items:
            fh.write(it.text + "\n")
        fh.write(">not_a_genome\nMKFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVF\n")
    preds = [p.predicted for p in classify_stream(tiny_variant, [parse_sequences(it.text)[0] for it in items])]
    labels = d / "labels.tsv"
    rows = [f"{it.name}\t{preds[i] if i % 2 == 0 else it.label}" for i, it in enumerate(items)]
    labels.write_text("name\tclass\n" + "\n".join(rows) + "\n")
    return fasta, labels


def _run(inputs, out, tiny_variant, **kw):
    cfg = kw.pop("config", PrecomputeConfig(shard_size=SHARD))
    return precompute(*inputs, out, config=cfg, loaded=tiny_variant, **kw)


@pytest.fixture(scope="module")
def local1(inputs, tiny_variant, tmp_path_factory):
    out = tmp_path_factory.mktemp("pc") / "local1"
    summary = _run(inputs, out, tiny_variant, engine="local", workers=1)
    assert summary.status == "complete" and summary.n_shards == 3 and summary.shards_computed == 3
    return out


def _assert_same_results(a_dir, b_dir, *, same_bytes=True):
    a, b = load_results(a_dir), load_results(b_dir)
    pd.testing.assert_frame_equal(a.records, b.records)
    np.testing.assert_array_equal(a.cls, b.cls)
    assert a.map_counts == b.map_counts and a.map_counts
    for c in a.maps:
        np.testing.assert_allclose(a.maps[c], b.maps[c], rtol=0, atol=1e-9)
    if same_bytes:  # the shard files are byte-identical (not just close)
        for s in range(3):
            for suffix in ("parquet", "cls.npy"):
                name = f"shard-{s:06d}.{suffix}"
                assert filecmp.cmp(a_dir / "shards" / name, b_dir / "shards" / name, shallow=False), name
        for c in a.maps:
            assert np.array_equal(a.maps[c], b.maps[c])


def test_local_engine_one_and_two_workers_identical(inputs, tiny_variant, local1, tmp_path):
    summary = _run(inputs, tmp_path / "local2", tiny_variant, engine="local", workers=2)
    assert summary.status == "complete"
    _assert_same_results(local1, tmp_path / "local2")


def test_ray_engine_on_local_ray_matches_local_engine(inputs, tiny_variant, local1, tmp_path):
    pytest.importorskip("ray", reason="Ray is optional: pip install -r requirements-cluster.txt")
    # the engine starts a small local instance (num_cpus = 2 workers x 1 thread, no dashboard) and stops it
    summary = _run(inputs, tmp_path / "ray", tiny_variant, engine="ray", workers=2)
    assert summary.status == "complete" and summary.engine == "ray"
    _assert_same_results(local1, tmp_path / "ray")


def test_interrupted_run_resumes_without_redoing_finished_shards(inputs, tiny_variant, local1, tmp_path):
    out = tmp_path / "resume"

    class Interrupt(Exception):
        pass

    def stop(shard):
        raise Interrupt(shard)

    with pytest.raises(Interrupt):  # the first finished shard interrupts the run
        _run(inputs, out, tiny_variant, engine="local", workers=1, on_shard=stop)
    partial = load_results(out)
    assert partial.manifest["status"] == "partial" and not partial.maps
    done = sorted((out / "shards").glob("*.done"))
    assert len(done) == 1
    stem = done[0].name[: -len(".done")]
    before = {p.name: p.stat().st_mtime_ns for p in (out / "shards").glob(f"{stem}.*")}
    assert f"{stem}.parquet" in before and f"{stem}.cls.npy" in before

    summary = _run(inputs, out, tiny_variant, engine="local", workers=1)
    assert (summary.status, summary.shards_skipped, summary.shards_computed) == ("complete", 1, 2)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "shards").glob(f"{stem}.*")}
    for name in (f"{stem}.parquet", f"{stem}.cls.npy", f"{stem}.done"):
        assert after[name] == before[name], f"{name} was rewritten"
    assert not list((out / "shards").glob("*.maps.npz"))  # partial sums folded into the accumulator
    _assert_same_results(local1, out)

    again = _run(inputs, out, tiny_variant)  # nothing left to do
    assert (again.status, again.shards_computed, again.shards_skipped) == ("complete", 0, 3)


def test_cli_precompute_stops_after_max_shards_and_resumes(inputs, tiny_variant_dir, local1, tmp_path):
    from bertgeom.__main__ import main

    out = tmp_path / "cli"
    argv = ["precompute", str(inputs[0]), str(inputs[1]), "--out", str(out), "--model", str(tiny_variant_dir),
            "--shard-size", str(SHARD), "--quiet"]
    assert main(argv + ["--max-shards", "2"]) == 0
    assert load_results(out).manifest["status"] == "partial" and len(list(out.glob("shards/*.done"))) == 2
    assert main(argv) == 0
    _assert_same_results(local1, out)
    # a rerun with other parameters refuses to mix results
    assert main(argv + ["--maps", "heads"]) == 2


def test_results_hold_the_library_computations(inputs, tiny_variant, local1):
    from bertgeom.analysis.cone import hidden_state_cone_curve
    from bertgeom.sars_cov_2.genome.fasta import iter_fasta_file
    from bertgeom.analysis.heads import head_features
    from bertgeom.tokens import TokenKinds
    from bertgeom.precompute.core import analyse_and_encode
    from bertgeom.trace import run_batch

    res = load_results(local1, allow_partial=False)
    g = res.records
    assert len(g) == N_GENOMES + 1 and g["index"].tolist() == list(range(N_GENOMES + 1))
    assert g["error"].iloc[-1] and g["name"].iloc[-1] == "not_a_genome" and np.isnan(res.cls[-1]).all()
    L, H = tiny_variant.num_layers, tiny_variant.num_heads
    assert res.cls.shape == (N_GENOMES + 1, L + 1, tiny_variant.config.hidden_size)
    man = res.manifest
    assert man["model"]["weights_hash"] == tiny_variant.weights_hash and man["input"]["n_records"] == N_GENOMES + 1
    assert len(man["input"]["sha256"]) == 64 and man["bertgeom_version"] and man["params"]["shard_size"] == SHARD
    assert man["summary"]["n_errors"] == 1 and man["summary"]["n_correct"] == int(g["correct"].sum())

    records = [r for r in iter_fasta_file(inputs[0])][:N_GENOMES]
    encs = [e for _, e in analyse_and_encode(tiny_variant, records)]
    traces = run_batch(tiny_variant, encs[:4]) + run_batch(tiny_variant, encs[4:8])
    for i, tr in enumerate(traces):
        curve = hidden_state_cone_curve(tr.hidden_states, tr.encoded.content_mask)
        np.testing.assert_allclose(res.cone_curves(False)[i], curve, rtol=1e-6)
        np.testing.assert_allclose(res.cone_curves(True)[i], curve / tr.encoded.content_mask.sum(), rtol=1e-6)
        feats = head_features(tr.attentions, TokenKinds(tr.encoded.is_cls, tr.encoded.is_sep, tr.encoded.is_punct))
        np.testing.assert_allclose(res.head_feature("k90_frac")[i], feats["k90_frac"], rtol=1e-6)
        np.testing.assert_allclose(res.cls[i], tr.hidden_states[:, 0], rtol=1e-6)
        assert g["predicted"].iloc[i] == tr.predicted

    # class-mean maps: mean over correct genomes of the head-mean map, [SEP] row/column zeroed
    correct = g["correct"].to_numpy()[:N_GENOMES]
    for c, n in res.map_counts.items():
        members = [i for i in range(N_GENOMES) if correct[i] and g["label"].iloc[i] == c]
        assert n == len(members) and res.maps[c].shape == (L, 427, 427)
        want = np.mean([t.attentions.mean(1) for t in run_batch(tiny_variant, [encs[i] for i in members])], axis=0)
        want[:, -1, :] = 0
        want[:, :, -1] = 0
        np.testing.assert_allclose(res.maps[c], want, atol=1e-7)
    assert res.keep.sum() == 426 and not res.keep[-1]

    curves = res.class_curves()
    assert set(curves) <= set(res.labels) and all(v["mean"].shape == (L + 1,) for v in curves.values())
    cs = res.to_cone_set()
    assert cs.hidden.shape == (N_GENOMES, L + 1) and cs.cls.shape[0] == N_GENOMES
    assert list(cs.error_names) == ["not_a_genome"] and cs.streams == {}
    assert res.head_feature("delta_row").shape == (N_GENOMES + 1, L, H)
    with pytest.raises(KeyError):
        res.head_feature("verticality")

    slim = load_results(local1, columns=["cone_0"], cls=False)  # what a huge run would read
    assert list(slim.records.columns) == ["index", "name", "label", "predicted", "correct", "error", "cone_0"]
    assert slim.cls.shape[0] == N_GENOMES + 1 and slim.maps.keys() == res.maps.keys()


def test_precomputed_and_computed_cone_sets_are_one_type_with_equal_values(inputs, tiny_variant, local1):
    """The two producers of a set's cone profiles (the model run here, a precompute run read back)
    give the same ConeSet type and the same numbers for the same genomes."""
    from bertgeom.sets.cone import ConeSet, cone_profiles_over_set
    from bertgeom.inputs import InputItem
    from bertgeom.probabilities import class_probabilities
    from bertgeom.sars_cov_2.variant.spec import genome_set

    truth = dict(line.split("\t") for line in Path(inputs[1]).read_text().splitlines()[1:])
    items = [InputItem(it.name, it.text, truth[it.name]) for it in genome_set()[:N_GENOMES]]
    here = cone_profiles_over_set(tiny_variant, items, "content", streams=False, batch_size=4)
    stored = load_results(local1).to_cone_set()
    assert type(here) is type(stored) is ConeSet
    for field in ("names", "labels", "predicted", "correct", "m"):
        np.testing.assert_array_equal(getattr(stored, field), getattr(here, field), err_msg=field)
    assert stored.correct.any() and not stored.correct.all()  # both branches of predicted == label
    np.testing.assert_allclose(stored.hidden, here.hidden, rtol=1e-6)  # Parquet keeps float32
    np.testing.assert_allclose(stored.cls, here.cls, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stored.stream_values("hidden")[0], here.stream_values("hidden")[0], rtol=1e-6)
    for a in (here, stored):
        assert a.hidden.dtype == np.float64 and a.m.dtype == np.int64 and a.cls.dtype == np.float32
    np.testing.assert_allclose(stored.probs, class_probabilities(tiny_variant, here.logits), atol=1e-5)
    assert stored.error_names.tolist() == ["not_a_genome"] and here.error_names.tolist() == []


def test_heads_maps_and_reduced_cls(inputs, tiny_variant, local1, tmp_path):
    ref = load_results(local1)
    cfg = PrecomputeConfig(shard_size=SHARD, maps="heads", cls_dims=4, cls_reduce="pca", features=("prev",))
    _run(inputs, tmp_path / "heads", tiny_variant, config=cfg)
    res = load_results(tmp_path / "heads")
    L, H = tiny_variant.num_layers, tiny_variant.num_heads
    for c, m in res.maps.items():
        assert m.shape == (L, H, 427, 427)
        np.testing.assert_allclose(m.mean(1), ref.maps[c], atol=1e-7)
    assert res.cls.shape == (N_GENOMES + 1, L + 1, 4) and (tmp_path / "heads" / "cls_basis.npz").is_file()
    ok = res.ok()
    # PCA of the pilot: the reduced vectors keep the pairwise geometry of the leading components
    assert np.isfinite(res.cls[ok]).all() and res.cls[ok][:, -1].std(0).max() > 0
    assert ([c for c in res.records.columns if c.startswith("prev_")]
            == [f"prev_{l + 1}-{h + 1}" for l in range(L) for h in range(H)])

    cfg = PrecomputeConfig(shard_size=SHARD, maps="none", cls_dims=3, cls_reduce="random")
    _run(inputs, tmp_path / "rand", tiny_variant, config=cfg)
    res = load_results(tmp_path / "rand")
    assert not res.maps and res.cls.shape[-1] == 3
    basis = np.load(tmp_path / "rand" / "cls_basis.npz")["components"]
    np.testing.assert_allclose(res.cls[0], np.einsum("ld,ldk->lk", ref.cls[0].astype(np.float64), basis),
                               rtol=1e-5, atol=1e-5)


def test_bad_requests_are_one_sentence(inputs, tiny_variant, local1, tmp_path):
    with pytest.raises(PrecomputeError, match="different params.shard_size"):
        _run(inputs, local1, tiny_variant, config=PrecomputeConfig(shard_size=5))
    with pytest.raises(PrecomputeError, match="unknown per-head feature"):
        PrecomputeConfig(features=("prev", "nope"))
    with pytest.raises(PrecomputeError, match="no file"):
        precompute(tmp_path / "missing.fasta", inputs[1], tmp_path / "x", loaded=tiny_variant)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(PrecomputeError, match="not a precompute results directory"):
        _run(inputs, busy, tiny_variant)
    with pytest.raises(PrecomputeError, match="no manifest.json"):
        load_results(busy)
    shutil.rmtree(busy)


def test_stored_columns_are_the_generic_ones_and_the_genome_kinds_own(local1, tiny_variant):
    """precompute asks the model's input kind for its own columns (issue 35): the genome kind's QC,
    mutations and unknown k-mers sit where they always did, between the probabilities and n_tokens."""
    import pyarrow.parquet as pq

    from bertgeom.inputs import INPUT_KINDS

    spec = INPUT_KINDS.of(tiny_variant).precompute
    assert spec is not None and [c for c, _ in spec.columns] == ["qc", "qc_reasons", "n_mutations", "unk_rate"]
    names = pq.read_schema(local1 / "shards" / "shard-000000.parquet").names
    L, n = tiny_variant.num_layers, 7 + len(tiny_variant.labels) + 7
    assert names[:n] == [
        "index", "shard", "name", "label", "predicted", "correct", "confidence",
        *[f"p_{c}" for c in tiny_variant.labels],
        "qc", "qc_reasons", "n_mutations", "unk_rate", "n_tokens", "error", "cone_m"]
    assert names[n] == "cone_0" and f"cone_raw_{L}" in names


def test_a_model_whose_input_kind_has_no_precompute_is_refused_in_one_sentence(tmp_path, capsys):
    """The toy letters family (tests/toy_family.py) and built-in text register no PrecomputeSpec: the
    library and the command say so in one sentence (exit status 3), and nothing is written."""
    import toy_family as toy

    from bertgeom.__main__ import main
    from bertgeom.models import load_model
    from bertgeom.precompute.core import PrecomputeModelError, precompute_spec

    fasta, labels = tmp_path / "in.txt", tmp_path / "labels.tsv"
    fasta.write_text("wxyzzy\n")
    labels.write_text("name\tlabel\n")
    toy.register()
    try:
        with pytest.raises(PrecomputeModelError) as exc:
            precompute(fasta, labels, tmp_path / "lib", loaded=load_model(toy.MODEL_ID))
        msg = str(exc.value)
        assert msg.startswith(f"the model '{toy.MODEL_ID}' reads 'letters' input, which precompute cannot read")
        assert "spike" in msg and msg.endswith(").") and msg.count(". ") == 0 and "\n" not in msg
        assert not (tmp_path / "lib").exists()
        assert main(["precompute", str(fasta), str(labels), "--out", str(tmp_path / "cli"),
                     "--model", toy.MODEL_ID, "--quiet"]) == 3
        err = capsys.readouterr().err
        assert "precompute cannot read" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "cli").exists()
    finally:
        toy.unregister()
    with pytest.raises(PrecomputeModelError, match="'text' input, which precompute cannot read"):
        precompute_spec("text")


# ---------------------------------------------------------------------------------------------
# One run per --out, user errors as one sentence with their exit status (#16 items 2 and 9)
# ---------------------------------------------------------------------------------------------
def _cli(inputs, out, model_dir, *extra):
    return ["precompute", str(inputs[0]), str(inputs[1]), "--out", str(out), "--model", str(model_dir),
            "--shard-size", str(SHARD), "--quiet", *extra]


def test_second_run_on_the_same_out_is_refused_or_waits(inputs, tiny_variant_dir, local1, tmp_path, capsys):
    import os
    import socket
    import threading

    from bertgeom.__main__ import main
    from bertgeom.precompute.lock import LockBusy, RunLock

    out = tmp_path / "locked"
    holder = RunLock(out).acquire()  # another run (a separate open file: flock excludes it like a process)
    try:
        assert main(_cli(inputs, out, tiny_variant_dir)) == 4
        err = capsys.readouterr().err
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in err and "--wait" in err
        assert "Traceback" not in err and not (out / "manifest.json").exists()  # it touched nothing
        with pytest.raises(LockBusy):
            RunLock(out).acquire()
        # --wait: starts once the first run lets go
        threading.Timer(1.5, holder.release).start()
        assert main(_cli(inputs, out, tiny_variant_dir, "--wait")) == 0
        assert "waiting: another precompute run" in capsys.readouterr().err
    finally:
        holder.release()
    _assert_same_results(local1, out)
    assert not (out / "precompute.lock").exists()  # released at the end


def test_lock_of_a_dead_run_is_taken_over(inputs, tiny_variant, local1, tmp_path):
    import json
    import subprocess
    import sys

    from bertgeom.precompute.lock import RunLock

    out = tmp_path / "stale"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (out / "precompute.lock").write_text(json.dumps({"pid": int(dead.stdout), "host": "vm", "started": 0}))
    lock = RunLock(out).acquire()  # the lock file of a dead process holds no flock: taken over
    assert lock.took_over["pid"] == int(dead.stdout)
    lock.release()
    (out / "precompute.lock").write_text(json.dumps({"pid": int(dead.stdout), "host": "vm", "started": 0}))
    summary = _run(inputs, out, tiny_variant)
    assert summary.status == "complete"
    _assert_same_results(local1, out)


def test_truncated_input_bad_model_and_bad_out_are_one_sentence(inputs, tiny_variant_dir, tmp_path, capsys):
    from bertgeom.__main__ import main

    data = inputs[0].read_bytes()
    cut = tmp_path / "cut.fasta.xz"
    cut.write_bytes(data[: len(data) // 2])
    cases = [
        (_cli((cut, inputs[1]), tmp_path / "a", tiny_variant_dir), 2, "ends early (truncated)"),
        (_cli(inputs, tmp_path / "b", tmp_path), 3, "error:"),  # a folder that is no model
        (_cli(inputs, inputs[1], tiny_variant_dir), 4, "is a file"),
        (_cli(inputs, tmp_path / "c", tiny_variant_dir, "--no-attentions", "--maps", "heads"), 2, "--no-attentions"),
    ]
    for argv, code, words in cases:
        assert main(argv) == code, argv
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "a" / "manifest.json").exists()


def test_ctrl_c_stops_with_130_and_the_rerun_resumes(inputs, tiny_variant_dir, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from bertgeom.precompute.run import GATE_ENV

    # four records in shards of one: a shard before the stop and three after it prove the resume as
    # well as the module's 21 did (the rerun computed 20 one-genome shards, most of a minute)
    with lzma.open(inputs[0], "rt") as fh:
        records = fh.read().split("\n>")
    few = tmp_path / "few.fasta.xz"
    with lzma.open(few, "wt") as fh:
        fh.write("\n>".join(records[:3] + records[-1:]))  # three genomes and the unreadable record
    out = tmp_path / "sigint"
    argv = [sys.executable, "-m", "bertgeom", "precompute", str(few), str(inputs[1]), "--out", str(out),
            "--model", str(tiny_variant_dir), "--shard-size", "1", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    gate = tmp_path / "gate"
    os.mkfifo(gate)  # after each shard the run waits here until the test opens it: it never does
    # SIGINT as a terminal sends it: a suite started in the background of a non-interactive shell
    # inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env={**env, GATE_ENV: str(gate)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600  # an upper bound only: the loop ends on the event, the first shard's file
        while not list(out.glob("shards/*.done")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)  # the run cannot have finished: it waits at the gate after that shard
        err = proc.communicate(timeout=300)[1]
    finally:
        proc.kill()  # never left waiting at the gate
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "rerun the same command" in err and "Traceback" not in err
    done = len(list(out.glob("shards/*.done")))
    assert done == 1 and not (out / "precompute.lock").exists()
    # the stop above went through the default pool of worker processes; the rerun only has to find the
    # finished shard, which the driver does before any worker starts: one in-process worker (each pool
    # worker's start-up, torch and the model, took 15-30 s)
    rerun = subprocess.run(argv + ["--workers", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0 and f"{done} already done" in rerun.stderr, rerun.stderr
    assert load_results(out).manifest["status"] == "complete"


# ---------------------------------------------------------------------------------------------
# Devices and the no-attentions switch (#15 item 3)
# ---------------------------------------------------------------------------------------------
NO_ATTN = dict(shard_size=SHARD, maps="none", features=())


def test_no_attentions_run_uses_sdpa_and_matches_the_eager_numbers(inputs, tiny_variant, local1, tmp_path):
    from bertgeom.precompute import ShardComputer

    cfg = PrecomputeConfig(**NO_ATTN)
    comp = ShardComputer(tiny_variant, cfg)
    assert not comp.needs_attentions and comp.runner is not tiny_variant
    assert comp.runner.model.config._attn_implementation == "sdpa"
    assert tiny_variant.model.config._attn_implementation == "eager"  # the shared model is untouched
    _run(inputs, tmp_path / "one", tiny_variant, config=cfg, workers=1)
    _run(inputs, tmp_path / "two", tiny_variant, config=cfg, workers=2)
    for s in range(3):  # the engines still agree bit for bit on the CPU
        for suffix in ("parquet", "cls.npy"):
            name = f"shard-{s:06d}.{suffix}"
            assert filecmp.cmp(tmp_path / "one" / "shards" / name, tmp_path / "two" / "shards" / name, shallow=False)
    ref, res = load_results(local1), load_results(tmp_path / "one")
    assert not res.maps and not [c for c in res.records.columns if c.startswith("prev_")]
    assert res.manifest["runs"][-1]["attentions"] is False and res.manifest["runs"][-1]["device"] == "cpu"
    ok = ref.ok()
    assert (res.records["predicted"][ok] == ref.records["predicted"][ok]).all()
    np.testing.assert_allclose(res.cls[ok], ref.cls[ok], rtol=1e-4, atol=1e-5)  # SDPA vs eager: float rounding
    np.testing.assert_allclose(res.cone_curves(False)[ok], ref.cone_curves(False)[ok], rtol=1e-5)


def test_devices_resolve_here_and_cuda_is_optional(inputs, tiny_variant, tiny_variant_dir, tmp_path):
    import torch

    from bertgeom.models import load_model, resolve_device
    from bertgeom.precompute.engines import make_engine
    from bertgeom.sars_cov_2.variant import variant_spec

    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert load_model(variant_spec(tiny_variant_dir), device="cpu").device == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(PrecomputeError, match="no CUDA GPU"):
            make_engine("local", 1, device="cuda")
        with pytest.raises(ValueError, match="no CUDA GPU"):
            load_model(variant_spec(tiny_variant_dir), device="cuda")


@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU")
@pytest.mark.parametrize("config", [dict(shard_size=SHARD), NO_ATTN], ids=["eager", "sdpa"])
def test_cuda_results_match_the_cpu_ones(inputs, tiny_variant, local1, tmp_path, config):
    cfg = PrecomputeConfig(**config)
    _run(inputs, tmp_path / "cpu", tiny_variant, config=cfg)
    _run(inputs, tmp_path / "gpu", tiny_variant, config=cfg, device="cuda")
    a, b = load_results(tmp_path / "cpu"), load_results(tmp_path / "gpu")
    assert b.manifest["runs"][-1]["device"] == "cuda"
    ok = a.ok()
    assert (a.records["predicted"][ok] == b.records["predicted"][ok]).all()
    np.testing.assert_allclose(b.cls[ok], a.cls[ok], rtol=1e-3, atol=1e-3)
    for c in a.maps:
        np.testing.assert_allclose(b.maps[c], a.maps[c], atol=1e-5)
