"""The classification forward on OpenVINO / ONNX Runtime: same logits as torch, exports cached by the
weights' hash, the auto choice from what the CPU reports, and the machine named."""

from __future__ import annotations

import copy
import dataclasses
import threading

import numpy as np
import pytest


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _padded_ids(loaded, lengths=(40, 23, 31)) -> np.ndarray:
    """Rows of different lengths (PAD = 0 after each): [CLS] k-mers [SEP]."""
    rng = np.random.default_rng(0)
    n_vocab = int(loaded.config.vocab_size)
    ids = np.zeros((len(lengths), max(lengths)), np.int64)
    for i, t in enumerate(lengths):
        ids[i, 0], ids[i, 1 : t - 1], ids[i, t - 1] = 1, rng.integers(5, n_vocab, t - 2), 2
    return ids


@pytest.mark.parametrize("backend", ["openvino", "onnxruntime"])
def test_runtime_logits_equal_torch_fp32(tiny_variant, cache, backend):
    """The exported graph run by another runtime gives torch's fp32 logits (padding masked), and
    the classifier built on it says which backend and precision ran."""
    pytest.importorskip("onnx")
    pytest.importorskip(backend)
    from bertgeom.sars_cov_2.variant.predict import FastClassifier

    ids = _padded_ids(tiny_variant)
    ref = FastClassifier(tiny_variant, "cpu", "fp32", "torch").logits(ids)
    fc = FastClassifier(tiny_variant, "cpu", "fp32", backend)
    got = fc.logits(ids)
    assert (fc.backend, fc.precision, fc.label) == (backend, "fp32", f"fp32 ({backend})")
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, atol=1e-4)
    # one row alone (its own width) gives the logits it had inside the padded batch
    np.testing.assert_allclose(fc.logits(ids[1:2, :23]), ref[1:2], atol=1e-4)


def test_openvino_bf16_hint_keeps_the_calls(tiny_variant, cache):
    pytest.importorskip("onnx")
    pytest.importorskip("openvino")
    from bertgeom.sars_cov_2.variant.predict import FastClassifier

    ids = _padded_ids(tiny_variant)
    ref = FastClassifier(tiny_variant, "cpu", "fp32", "torch").logits(ids)
    got = FastClassifier(tiny_variant, "cpu", "bf16", "openvino").logits(ids)
    assert np.abs(got - ref).max() < 0.05
    assert (got.argmax(1) == ref.argmax(1)).all()


def test_export_is_cached_by_the_weights_hash(tiny_variant, cache):
    """The same weights reuse the file on disk (not rewritten); one changed weight makes a new export."""
    pytest.importorskip("onnx")
    import torch

    from bertgeom.backends import exported_onnx, weights_key

    model = tiny_variant.model
    first = exported_onnx(model)
    assert first.is_file() and first.parent == cache / "export" and weights_key(model) in first.name
    stamp = first.stat().st_mtime_ns
    again = exported_onnx(copy.deepcopy(model))  # equal weights, another object: the cached file
    assert again == first and first.stat().st_mtime_ns == stamp
    changed = copy.deepcopy(model)
    with torch.no_grad():
        p = changed.classifier.weight
        p[-1, -1] += 0.5  # the very last weight: a hash of a prefix would miss it
    assert weights_key(changed) != weights_key(model)
    rebuilt = exported_onnx(changed)
    assert rebuilt != first and rebuilt.is_file()
    assert sorted(x.name for x in (cache / "export").glob("*.onnx")) == sorted([first.name, rebuilt.name])


def test_changed_weights_change_the_runtime_logits(tiny_variant, cache):
    """A classifier of retrained weights never runs a stale export of the old ones."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import torch

    from bertgeom.sars_cov_2.variant.predict import FastClassifier

    ids = _padded_ids(tiny_variant)
    before = FastClassifier(tiny_variant, "cpu", "fp32", "onnxruntime").logits(ids)
    model = copy.deepcopy(tiny_variant.model)
    with torch.no_grad():
        model.classifier.bias += 1.0
    other = dataclasses.replace(tiny_variant, model=model, extra={})
    after = FastClassifier(other, "cpu", "fp32", "onnxruntime").logits(ids)
    np.testing.assert_allclose(after, before + 1.0, atol=1e-4)


def test_auto_choice_follows_the_cpu_where_nothing_was_measured():
    from bertgeom.backends import choose_backend

    both = ["torch", "openvino", "onnxruntime"]
    amx = {"vendor": "GenuineIntel", "amx": True, "bf16_units": True}
    xeon_no_amx = {"vendor": "GenuineIntel", "amx": False, "bf16_units": True}  # AMX hidden by the hypervisor
    zen4 = {"vendor": "AuthenticAMD", "amx": False, "bf16_units": True}
    zen3 = {"vendor": "AuthenticAMD", "amx": False, "bf16_units": False}
    arm = {"vendor": "ARM", "amx": False, "bf16_units": False}
    assert choose_backend("auto", "cpu", "fp32", info=amx, available=both) == ("torch", "fp32")
    assert choose_backend("auto", "cpu", "fp32", info=xeon_no_amx, available=both) == ("torch", "fp32")
    assert choose_backend("auto", "cpu", "fp32", info=zen4, available=both) == ("openvino", "fp32")
    assert choose_backend("auto", "cpu", "fp32", info=zen3, available=both) == ("openvino", "fp32")
    assert choose_backend("auto", "cpu", "fp32", info=zen3, available=["torch"]) == ("torch", "fp32")
    assert choose_backend("auto", "cpu", "fp32", info=arm, available=both) == ("torch", "fp32")
    assert choose_backend("auto", "cuda", "fp32", info=zen3, available=both) == ("torch", "fp32")
    assert choose_backend("onnxruntime", "cpu", "fp32", available=both) == ("onnxruntime", "fp32")


def _trial(backend, precision, rate, diff=0.0, kept=16, n=16, error=""):
    from bertgeom.backends import BackendTrial

    return BackendTrial(backend, precision, rate, diff, kept, n, error)


def test_the_fastest_path_that_keeps_every_call_wins_and_ties_go_to_fp32_then_torch():
    from bertgeom.backends import BackendError, pick_fastest

    # the fastest changes a call, the next moves a logit past the tolerance: the third wins
    assert pick_fastest([_trial("torch", "fp32", 10.0), _trial("openvino", "bf16", 30.0, 0.01, kept=15),
                         _trial("torch", "bf16", 25.0, 0.07), _trial("openvino", "fp32", 12.0, 1e-5)]) == \
        ("openvino", "fp32")
    # within 5% of the fastest: fp32 before bf16, then torch before a runtime
    assert pick_fastest([_trial("torch", "fp32", 10.0), _trial("torch", "bf16", 10.4, 0.02)]) == ("torch", "fp32")
    assert pick_fastest([_trial("torch", "fp32", 10.0), _trial("openvino", "fp32", 10.3, 1e-5)]) == ("torch", "fp32")
    assert pick_fastest([_trial("torch", "fp32", 10.0), _trial("openvino", "fp32", 11.0, 1e-5)]) == \
        ("openvino", "fp32")
    # a path that could not run is never chosen, however fast it looked
    assert pick_fastest([_trial("torch", "fp32", 10.0), _trial("openvino", "bf16", 99.0, error="x")]) == \
        ("torch", "fp32")
    with pytest.raises(BackendError, match="no backend kept"):
        pick_fastest([_trial("openvino", "bf16", 30.0, 0.2)])


def test_candidates_follow_the_units_and_what_is_installed():
    from bertgeom.backends import candidate_paths

    both = ["torch", "openvino", "onnxruntime"]
    bf16 = {"bf16_units": True}
    assert candidate_paths("cpu", "auto", bf16, both) == [("torch", "fp32"), ("torch", "bf16"), ("openvino", "fp32"),
                                                          ("openvino", "bf16"), ("onnxruntime", "fp32")]
    assert candidate_paths("cpu", "auto", {"bf16_units": False}, ["torch"]) == [("torch", "fp32")]
    assert candidate_paths("cpu", "fp32", bf16, both) == [("torch", "fp32"), ("openvino", "fp32"),
                                                          ("onnxruntime", "fp32")]
    assert candidate_paths("cpu", "bf16", bf16, both) == [("torch", "bf16"), ("openvino", "bf16")]


def test_a_stored_choice_is_what_auto_runs_on_that_machine_only(cache):
    from bertgeom.backends import MeasuredChoice, choose_backend, store_choice, stored_choice

    both = ["torch", "openvino", "onnxruntime"]
    here = {"vendor": "GenuineIntel", "model": "Xeon", "cores": 2, "isa": "AVX512", "amx": False,
            "bf16_units": True, "versions": {"torch": "2.13.0", "openvino": "2026.4.1"}}
    elsewhere = dict(here, model="another Xeon")
    choice = MeasuredChoice("onnxruntime", "fp32", (_trial("torch", "fp32", 10.0), _trial("onnxruntime", "fp32", 12.0)),
                            "a machine", "2026-12-02 11:00 UTC", 9.5)
    path = store_choice(choice, "w1", "cpu", "auto", here)
    assert path.suffix == ".json" and path.is_file()
    assert stored_choice("w1", "cpu", "auto", here) == choice  # read back whole, trials included
    assert choose_backend("auto", "cpu", "auto", info=here, available=both, weights="w1") == ("onnxruntime", "fp32")
    # another CPU, other weights, another asked precision: not measured there, the CPU rule decides
    assert choose_backend("auto", "cpu", "auto", info=elsewhere, available=both, weights="w1")[0] == "torch"
    assert stored_choice("w2", "cpu", "auto", here) is None
    assert stored_choice("w1", "cpu", "bf16", here) is None
    # a runtime uninstalled since: the rule again, never a backend that is not there
    assert choose_backend("auto", "cpu", "auto", info=here, available=["torch"], weights="w1")[0] == "torch"
    # an explicit backend is never overridden by the measurement
    assert choose_backend("torch", "cpu", "fp32", info=here, available=both, weights="w1") == ("torch", "fp32")
    # a damaged file is not a choice
    path.write_text("{not json")
    assert stored_choice("w1", "cpu", "auto", here) is None


def test_measuring_times_real_forwards_and_auto_then_runs_the_winner(tiny_variant, cache):
    """On the tiny model: every candidate path runs on real genomes' tokens, torch fp32 is the reference
    (its own difference 0), the stored winner keeps every call, and fast_classifier(auto) runs it."""
    from bertgeom.backends import candidate_paths, stored_choice
    from bertgeom.sars_cov_2.variant.predict import fast_classifier, measure_backends, measured_backend_needed

    paths = candidate_paths("cpu", "auto")
    assert measured_backend_needed(tiny_variant, "cpu") == (len(paths) > 1)
    lines = []
    choice = measure_backends(tiny_variant, "cpu", n=6, rounds=1, log=lines.append)
    assert {(t.backend, t.precision) for t in choice.trials} == set(paths)
    ref = next(t for t in choice.trials if (t.backend, t.precision) == ("torch", "fp32"))
    assert ref.max_abs_logit_diff == 0.0 and ref.calls_kept == ref.n == 6 and ref.inputs_per_s > 0
    won = next(t for t in choice.trials if (t.backend, t.precision) == (choice.backend, choice.precision))
    assert won.keeps_calls and won.inputs_per_s >= max(t.inputs_per_s for t in choice.trials if t.keeps_calls) * 0.95
    assert stored_choice(tiny_variant.weights_hash, "cpu", "auto") == choice
    assert not measured_backend_needed(tiny_variant, "cpu")
    fc = fast_classifier(tiny_variant, "cpu", "auto", "auto")
    assert (fc.backend, fc.precision) == (choice.backend, choice.precision)
    assert any("runs " + choice.backend in line for line in lines)


def test_choose_backend_cli_prints_the_table_and_keeps_the_choice(tiny_variant_dir, cache):
    from bertgeom.__main__ import main

    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["choose-backend", "--model", str(tiny_variant_dir), "--n", "4"]) == 0
    text = out.getvalue()
    assert text.startswith("machine: ") and "| torch | fp32 |" in text and "**chosen**" in text
    runs = text.strip().splitlines()[-1]
    assert runs.startswith("--backend auto --precision auto runs: ")
    err = io.StringIO()  # asked again: read back, not measured anew
    out2 = io.StringIO()
    with contextlib.redirect_stdout(out2), contextlib.redirect_stderr(err):
        assert main(["choose-backend", "--model", str(tiny_variant_dir)]) == 0
    assert "measured before" in err.getvalue() and out2.getvalue().strip().splitlines()[-1] == runs


def test_backend_errors_are_one_sentence():
    from bertgeom.backends import BackendError, choose_backend

    with pytest.raises(BackendError, match="not installed"):
        choose_backend("openvino", "cpu", "fp32", available=["torch"])
    with pytest.raises(BackendError, match="no bf16"):
        choose_backend("onnxruntime", "cpu", "bf16", available=["torch", "onnxruntime"])
    with pytest.raises(BackendError, match="unknown backend"):
        choose_backend("tensorrt", "cpu", "fp32")


def test_machine_names_the_cpu_and_its_units():
    import torch

    from bertgeom.runtime import machine, machine_line

    m = machine()
    assert m["vendor"] and m["model"] and m["cores"] >= 1
    assert m["isa"] == str(torch.backends.cpu.get_cpu_capability())
    assert m["versions"]["torch"] == torch.__version__
    line = machine_line(m)
    assert m["model"] in line and f"torch ISA {m['isa']}" in line and ("AMX" in line)
    fake = dict(m, vendor="GenuineIntel", model="Xeon X", avx512=False, avx2=True, amx=False, mkldnn_bf16=False,
                avx512_bf16=False, avx512_vnni=False, isa="AVX2")
    assert "AVX2 only" in machine_line(fake) and "oneDNN bf16 no" in machine_line(fake)


def test_classify_cli_names_the_backend_and_refuses_an_impossible_one(tiny_variant_dir, tmp_path, cache):
    """The CSV says which runtime ran each row; an impossible choice is one sentence and exit 2, before any work."""
    import csv

    from cli_run import bertgeom_cli

    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

    rec = load_demo_genomes()[0][0]
    fasta = tmp_path / "g.fasta"
    fasta.write_text(f">{rec.name}\n{rec.sequence}\n")

    def run(*extra):  # in this process (tests/cli_run.py), with the fixture's BERTGEOM_CACHE_DIR
        return bertgeom_cli("classify", fasta, "--model", tiny_variant_dir, *extra,
                            env={"BERTGEOM_CACHE_DIR": str(cache)})

    r = run("--out", str(tmp_path / "t.csv"), "--backend", "torch", "--precision", "fp32")
    assert r.returncode == 0, r.stderr
    row = next(csv.DictReader(open(tmp_path / "t.csv")))
    assert (row["model_backend"], row["model_precision"]) == ("torch", "fp32")
    r = run("--out", str(tmp_path / "x.csv"), "--backend", "onnxruntime", "--precision", "bf16")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip().startswith("error:")
    assert not (tmp_path / "x.csv").exists()


def test_an_automatic_backend_that_fails_falls_back_to_torch(tiny_variant, cache, monkeypatch):
    """``auto`` never leaves a user without a call: a runtime that cannot start (here: its compile
    raises) gives way to torch with a warning; the same runtime asked for by name reports the error."""
    import bertgeom.backends as backends
    from bertgeom.sars_cov_2.variant.predict import FastClassifier, logits_for_ids

    real_choose = backends.choose_backend

    def choose(backend="auto", device="cpu", precision="auto", **kw):
        if backend == "auto":
            return "onnxruntime", "fp32"
        return real_choose(backend, device, precision, **kw)

    def broken(*a, **kw):
        raise RuntimeError("no such CPU plugin")

    monkeypatch.setattr(backends, "choose_backend", choose)
    monkeypatch.setattr(backends, "runtime_classifier", broken)
    ids = _padded_ids(tiny_variant)
    with pytest.warns(RuntimeWarning, match="classifying with torch"):
        fc = FastClassifier(tiny_variant, "cpu", "fp32", "auto")
    assert fc.backend == "torch"
    np.testing.assert_allclose(fc.logits(ids), logits_for_ids(tiny_variant, ids), atol=1e-4)
    if "onnxruntime" in backends.available_backends():
        with pytest.raises(RuntimeError, match="no such CPU plugin"):
            FastClassifier(tiny_variant, "cpu", "fp32", "onnxruntime")


def test_streams_on_a_runtime_give_torchs_calls_in_input_order(tiny_variant, cache):
    """Two classify streams (one thread each: the runtime compiled for two requests at once) give the
    torch path's calls and probabilities, in input order."""
    pytest.importorskip("onnx")
    pytest.importorskip("openvino")
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    recs = [r for r, _ in load_demo_genomes()]
    ref = list(classify_stream(tiny_variant, recs, batch_size=2, streams=1, precision="fp32", backend="torch"))
    got = list(classify_stream(tiny_variant, recs, batch_size=2, streams=2, precision="fp32", backend="openvino"))
    assert [p.name for p in got] == [r.name for r in recs]
    assert [p.predicted for p in got] == [p.predicted for p in ref]
    for a, b in zip(got, ref):
        assert a.probs.keys() == b.probs.keys()
        assert max(abs(a.probs[k] - b.probs[k]) for k in a.probs) < 1e-4


def test_concurrent_requests_share_one_fast_classifier(tiny_variant):
    """Server threads share the loaded model: many asking at once get one classifier per key (the memo
    is locked per key, bertgeom.cache), keyed by (weights, device, backend, precision); the shared
    model's ``extra`` is never written."""
    from concurrent.futures import ThreadPoolExecutor

    from bertgeom.sars_cov_2.variant.predict import FAST_CLASSIFIERS, fast_classifier, fast_classifier_key

    barrier = threading.Barrier(6)

    def ask(_):
        barrier.wait()  # every thread asks at the same moment
        return fast_classifier(tiny_variant, "cpu", "fp32", "torch")

    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(ask, range(6)))
    assert len({id(fc) for fc in got}) == 1
    assert FAST_CLASSIFIERS.get(fast_classifier_key(tiny_variant.weights_hash, "cpu", "torch", "fp32")) is got[0]
    assert FAST_CLASSIFIERS.get(fast_classifier_key("other weights", "cpu", "torch", "fp32")) is None
    assert not [k for k in tiny_variant.extra if isinstance(k, tuple)]


def test_openvino_is_imported_with_its_telemetry_declined():
    """``import openvino`` alone starts a thread that forks a process to send an event to Google
    Analytics (no consent file counts as consent); forked from a server inside OpenVINO it hung the
    classify threads. bertgeom's import leaves no such thread, no child, and the consent off, in an
    environment that does not look like CI (CI is unset in the child)."""
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("openvino") is None:
        pytest.skip("openvino is not installed (the optional fast extra)")
    probe = ("import threading, multiprocessing\n"
             "from bertgeom.backends import import_openvino\n"
             "import_openvino()\n"
             "import openvino_telemetry\n"
             "print([t.name for t in threading.enumerate()], multiprocessing.active_children(),"
             " openvino_telemetry.Telemetry().consent)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TF_BUILD", "JENKINS_URL")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    assert done.stdout.strip() == "['MainThread'] [] False", done.stdout + done.stderr


def test_a_large_classify_measures_the_backends_once_and_an_explicit_one_never(tiny_variant_dir, tmp_path, cache,
                                                                               monkeypatch):
    """`classify` of an input at or above MEASURE_FROM_BYTES times the backends before its rows when nothing
    was measured on this machine (where there is more than one path), and never again; --backend never."""
    import contextlib
    import io

    from bertgeom.__main__ import main
    from bertgeom.backends import candidate_paths, stored_choice
    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant import cli
    from bertgeom.sars_cov_2.variant.spec import genome_set

    fasta = tmp_path / "in.fasta"
    fasta.write_text("".join(f"{it.text}\n" for it in genome_set()[:2]))
    monkeypatch.setattr(cli, "MEASURE_FROM_BYTES", fasta.stat().st_size)  # this input counts as large
    weights = load_model(str(tiny_variant_dir)).weights_hash

    def classify(*extra) -> str:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            assert main(["classify", str(fasta), "--model", str(tiny_variant_dir), "--out",
                         str(tmp_path / "out.csv"), *extra]) == 0
        return err.getvalue()

    assert "timing" not in classify("--backend", "torch") and stored_choice(weights) is None
    several = len(candidate_paths("cpu", "auto")) > 1
    first = classify()
    assert ("timing" in first) == several and (stored_choice(weights) is not None) == several
    assert "timing" not in classify()  # measured once per machine and weights
    rows = (tmp_path / "out.csv").read_text().splitlines()
    assert len(rows) == 3
