"""Training is resumable: a run stopped after a checkpoint continues from it (tiny schedule)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertgeom.variant.train import BUNDLED_DATA, TrainConfig, resolve_device, train, use_bf16


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
    from bertgeom.variant import variant_spec

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


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no GPU here (CI has none)")
def test_a_gpu_step_runs(tmp_path):  # pragma: no cover - GPU machines only
    cfg = TrainConfig(synth_per_class=1, template_copies_per_class=1, max_real_per_class=1, batch_size=2,
                      max_steps=1, device="cuda")
    assert train(cfg, tmp_path / "m", tmp_path / "w")["device"] == "cuda"
