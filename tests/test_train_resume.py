"""Training is resumable: a run stopped after a checkpoint continues from it (tiny schedule)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertgeom.variant.train import DEFAULT_SHARED, TrainConfig, train

pytestmark = pytest.mark.skipif(not (DEFAULT_SHARED / "genomes" / "open_genomes_dev.fasta.xz").is_file(),
                                reason="the open developer genomes (../shared/data) are not beside the checkout")


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
