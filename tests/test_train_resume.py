"""Training is resumable: a run stopped after a checkpoint continues from it (tiny schedule)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertgeom.sars_cov_2.variant.train import (
    BUNDLED_DATA,
    TrainConfig,
    resolve_device,
    train,
    use_bf16,
)


def test_a_stopped_run_resumes_from_its_checkpoint(tmp_path, capsys):
    cfg = TrainConfig(synth_per_class=1, template_copies_per_class=1, max_real_per_class=1, batch_size=2,
                      epochs=1.0, checkpoint_every=1, max_steps=2, threads=1)
    out, work = tmp_path / "model", tmp_path / "work"
    first = train(cfg, out, work)
    assert first["steps"] == 2 and (work / "checkpoint.pt").is_file()
    cfg.max_steps = 3
    second = train(cfg, out, work)
    log = capsys.readouterr().out
    assert "resumed from step 2" in log and second["steps"] == 3
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 6 and config["num_attention_heads"] == 12
    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant import variant_spec

    loaded = load_model(variant_spec(Path(out)))
    assert len(loaded.tokenizer) == config["vocab_size"]


def test_the_training_genomes_ship_with_the_package():
    assert (BUNDLED_DATA / "genomes" / "open_genomes_dev.fasta.xz").is_file()
    assert (BUNDLED_DATA / "genomes" / "open_genomes_dev_labels.tsv").is_file()


def test_continuing_from_a_variant_model_keeps_its_vocabulary_and_saves_no_machine_paths(tmp_path, tiny_variant_dir):
    cfg = TrainConfig(synth_per_class=1, template_copies_per_class=1, max_real_per_class=1, batch_size=2,
                      epochs=1.0, max_steps=1, threads=1, init_from=str(tiny_variant_dir), device="cpu")
    out = tmp_path / "model"
    summary = train(cfg, out, tmp_path / "work")
    assert summary["steps"] == 1 and summary["device"] == "cpu"
    config = json.loads((out / "config.json").read_text())
    base = json.loads((Path(tiny_variant_dir) / "config.json").read_text())
    assert config["vocab_size"] == base["vocab_size"] and config["num_hidden_layers"] == base["num_hidden_layers"]
    text = (out / "config.json").read_text()
    assert str(tmp_path) not in text and "/root" not in text and "/work" not in text
    assert config["bertgeom_train_config"]["init_from"] == Path(tiny_variant_dir).name


def test_device_choice_is_explicit_and_explained():
    import torch

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") in ("cpu", "cuda", "mps")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            resolve_device("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu")
    assert use_bf16("cpu", "fp32") is False and use_bf16("cpu", "bf16") is True
    from bertgeom.forward import bf16_pays_off

    assert use_bf16("cpu", "auto") is bf16_pays_off("cpu")  # emulated bf16 (no bf16 units) trains in fp32


def test_auto_precision_trains_in_fp32_where_bf16_is_emulated(monkeypatch):
    """oneDNN claims bf16 on an AVX-512 CPU without bf16 units; there bf16 is slower, and auto keeps fp32."""
    import bertgeom.forward as forward

    monkeypatch.setattr(forward, "bf16_supported", lambda device="cpu": True)
    monkeypatch.setattr(forward, "_BF16_PAYS_OFF", {})
    monkeypatch.setattr(forward, "matmul_peak", lambda dtype, n=2048, repeats=5: 1.0 if dtype == "bf16" else 2.8)
    assert use_bf16("cpu", "auto") is False
    monkeypatch.setattr(forward, "_BF16_PAYS_OFF", {})
    monkeypatch.setattr(forward, "matmul_peak", lambda dtype, n=2048, repeats=5: 2.0 if dtype == "bf16" else 1.0)
    assert use_bf16("cpu", "auto") is True


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no GPU here (CI has none)")
def test_a_gpu_step_runs(tmp_path):  # pragma: no cover - GPU machines only
    cfg = TrainConfig(synth_per_class=1, template_copies_per_class=1, max_real_per_class=1, batch_size=2,
                      max_steps=1, device="cuda")
    assert train(cfg, tmp_path / "m", tmp_path / "w")["device"] == "cuda"


# --- exact resume, Ctrl-C, atomic data pool, deterministic weights (issue 25, items 6 and 9) ---------------

_TINY = dict(synth_per_class=1, template_copies_per_class=1, max_real_per_class=1, batch_size=2, epochs=1.0,
             checkpoint_every=2, threads=1, device="cpu", precision="fp32")


def _tensors(obj, prefix=""):
    """Every tensor of a (nested) checkpoint dict, by path."""
    import torch

    out = {}
    if isinstance(obj, torch.Tensor):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_tensors(v, f"{prefix}/{k}"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(_tensors(v, f"{prefix}/{i}"))
    return out


def test_a_resumed_run_equals_an_uninterrupted_one_bit_for_bit(tmp_path):
    import shutil

    import torch

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    full = train(TrainConfig(**_TINY, max_steps=4), straight / "model", straight / "work")
    (resumed / "work").mkdir(parents=True)
    for name in ("train_pool.npz", "kmer_vocab.json"):  # the same data pool (building it is the slow part)
        shutil.copy(straight / "work" / name, resumed / "work" / name)
    train(TrainConfig(**_TINY, max_steps=2), resumed / "model", resumed / "work")
    torch.manual_seed(1234)  # whatever the process did in between must not matter
    again = train(TrainConfig(**_TINY, max_steps=4), resumed / "model", resumed / "work")
    a = torch.load(straight / "work" / "checkpoint.pt", weights_only=True)
    b = torch.load(resumed / "work" / "checkpoint.pt", weights_only=True)
    ta, tb = _tensors({k: a[k] for k in ("model", "optimizer")}), _tensors({k: b[k] for k in ("model", "optimizer")})
    assert ta.keys() == tb.keys() and len(ta) > 100
    differing = [k for k in ta if not torch.equal(ta[k], tb[k])]
    assert differing == []
    assert a["losses"] == b["losses"] and again["final_loss"] == full["final_loss"]
    # identical weights give identical bytes, so the same model_version
    assert ((straight / "model" / "model.safetensors").read_bytes()
            == (resumed / "model" / "model.safetensors").read_bytes())


def test_the_dropout_stream_is_part_of_the_checkpoint(tmp_path):
    """Without the RNG state a resumed step would draw other dropout masks: the saved state is the live one."""
    import torch

    from bertgeom.sars_cov_2.variant.train import restore_rng_states, rng_states

    torch.manual_seed(0)
    saved = rng_states("cpu")
    first = torch.rand(5)
    torch.manual_seed(99)
    restore_rng_states(saved, "cpu")
    assert torch.equal(torch.rand(5), first)


def test_weights_files_are_byte_identical_for_identical_weights_and_load_back(tmp_path, tiny_variant_dir):
    import subprocess
    import sys

    from safetensors.torch import load_file

    from bertgeom.models import hash_file

    script = ("import sys; from pathlib import Path; "
              "from bertgeom.sars_cov_2.variant import build_variant_model, save_variant_model;"
              "from bertgeom.sars_cov_2.genome.kmers import KmerVocab; import json, torch; "
              "from safetensors.torch import load_file;"
              "src = Path(sys.argv[1]); m = build_variant_model(json.loads((src / 'config.json').read_text()));"
              "m.load_state_dict({k: v.float() for k, v in load_file(str(src / 'model.safetensors')).items()}, "
              "strict=False);"
              "save_variant_model(m, KmerVocab.load(src / 'kmer_vocab.json'), Path(sys.argv[2]))")
    for i, seed in enumerate(("0", "12345")):  # separate processes with different hash seeds
        subprocess.run([sys.executable, "-c", script, str(tiny_variant_dir), str(tmp_path / f"m{i}")], check=True,
                       env={**__import__("os").environ, "PYTHONHASHSEED": seed})
    one, two = (tmp_path / "m0" / "model.safetensors"), (tmp_path / "m1" / "model.safetensors")
    assert one.read_bytes() == two.read_bytes() and hash_file(one) == hash_file(two)
    original = load_file(str(Path(tiny_variant_dir) / "model.safetensors"))
    again = load_file(str(one))
    assert original.keys() == again.keys() and all((original[k] == again[k]).all() for k in original)


def test_ctrl_c_writes_a_resumable_checkpoint_and_a_half_written_pool_is_rebuilt(tmp_path):
    """One CLI run: the work folder holds a truncated train_pool.npz (a run killed while writing it),
    which is reported in one sentence and rebuilt; then SIGINT once training runs -> one sentence, exit
    130, a checkpoint, no traceback; the rerun resumes from it."""
    import os
    import signal
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    (work / "train_pool.npz").write_bytes(b"PK\x03\x04" + b"\0" * 100)  # the start of a zip, cut off
    (work / "kmer_vocab.json").write_text("{}")
    cmd = [sys.executable, "-m", "bertgeom", "train", "--synth-per-class", "1", "--copies-per-class", "1",
           "--max-real-per-class", "1", "--batch-size", "2", "--threads", "1", "--device", "cpu",
           "--checkpoint-every", "1000", "--out", str(tmp_path / "model"), "--work-dir", str(work)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    seen = []
    for line in proc.stdout:  # wait for the event, not for a time
        seen.append(line)
        if "training on cpu" in line:
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=600)
    log = "".join(seen) + out
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "interrupted at step" in err and "rerun the same command to resume" in err
    assert len([x for x in err.splitlines() if "interrupt" in x.lower()]) == 1
    assert "train_pool.npz is unreadable" in log and "rebuilding the data pool" in log
    assert (work / "checkpoint.pt").is_file() and (work / "train_pool.npz").is_file()
    step = int(__import__("torch").load(work / "checkpoint.pt", weights_only=True)["step"])
    assert step >= 1
    resumed = subprocess.run(cmd + ["--max-steps", str(step + 1)], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from step {step}/" in resumed.stdout
