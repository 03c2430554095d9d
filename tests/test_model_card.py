"""The shipped model card is what write_card makes of the shipped metrics: regenerating it from
metrics.json gives MODEL_CARD.md and metrics.json byte for byte (so neither the card's code nor the
card drifts from the other)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bertgeom.sars_cov_2.variant.card import write_card

MODEL_DIR = Path(__file__).resolve().parent.parent / "bertgeom" / "data" / "variant_model"


def test_the_shipped_card_regenerates_byte_for_byte(tmp_path):
    for f in MODEL_DIR.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.safetensors").symlink_to(MODEL_DIR / "model.safetensors")  # only its size is read
    metrics = json.loads((MODEL_DIR / "metrics.json").read_text())
    text = write_card(tmp_path, metrics, metrics.get("robustness"))
    assert text == (MODEL_DIR / "MODEL_CARD.md").read_text()
    assert (tmp_path / "metrics.json").read_text() == (MODEL_DIR / "metrics.json").read_text()


def test_a_card_without_robustness_has_no_calibration_or_robustness_section(tmp_path):
    for f in MODEL_DIR.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.safetensors").symlink_to(MODEL_DIR / "model.safetensors")
    metrics = json.loads((MODEL_DIR / "metrics.json").read_text())
    text = write_card(tmp_path, {k: metrics[k] for k in ("model", "rules", "baseline")})
    assert "## Robustness and calibration" not in text and "**Calibration.**" not in text
    assert text.index("## Metrics on real held-out genomes") < text.index("## Limits")


def test_a_before_and_after_table_sets_the_replaced_model_beside_this_one(tmp_path):
    """``--before TITLE=RESULT.json`` puts the replaced model's benchmark figures in a column beside
    this model's; the table is kept in metrics.json (``previous``), so the card regenerates from it."""
    import copy

    from bertgeom.sars_cov_2.variant.card import _main

    for f in MODEL_DIR.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.safetensors").symlink_to(MODEL_DIR / "model.safetensors")
    robustness = json.loads((MODEL_DIR / "metrics.json").read_text())["robustness"]
    older = copy.deepcopy(robustness)
    older["temperature"] = 0.5
    older["reports"]["BERT variant model"]["foreign2"]["flip_rate"] = 0.125
    older["evaluation"]["model"]["accuracy"] = 0.5
    (tmp_path / "now.json").write_text(json.dumps(robustness))
    (tmp_path / "old.json").write_text(json.dumps(older))
    _main([str(tmp_path), str(tmp_path / "now.json"), "--before", f"before=x=y={tmp_path / 'old.json'}",
           "--after", "after", "--note", "Why the model was replaced."])
    text = (tmp_path / "MODEL_CARD.md").read_text()
    section = text[text.index("## Before and after"):text.index("## Limits")]
    assert "Why the model was replaced." in section
    assert "| figure | before=x=y | after |" in section
    assert "| temperature T | 0.500 | " in section and "| BERT: accuracy / macro-F1 | 50.0% / " in section
    assert "| flips: +2 markers of one other class | 12.5% | " in section
    assert section.count("release gates met") == 1
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert [c["title"] for c in metrics["previous"]["columns"]] == ["before=x=y"]
    again = tmp_path / "again"
    again.mkdir()
    for f in tmp_path.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy(f, again / f.name)
    (again / "model.safetensors").symlink_to(MODEL_DIR / "model.safetensors")
    assert write_card(again, metrics, metrics["robustness"]) == text


def test_a_candidate_not_shipped_is_tabled_from_its_calibration_split_run(tmp_path):
    """``--candidate TITLE=RESULT.json`` (a calibration-split benchmark run) adds a *Candidates not
    shipped* table with its note, kept in metrics.json; ``--keep-before`` keeps the before/after
    columns already there, so adding a candidate changes nothing else on the card."""
    import copy

    from bertgeom.sars_cov_2.variant.card import _main

    for f in MODEL_DIR.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.safetensors").symlink_to(MODEL_DIR / "model.safetensors")
    shipped = json.loads((MODEL_DIR / "metrics.json").read_text())
    before_text = (MODEL_DIR / "MODEL_CARD.md").read_text()
    robustness = shipped["robustness"]
    candidate = copy.deepcopy(robustness)
    candidate["reports"]["BERT variant model"]["foreign3"]["flip_rate"] = 0.25
    candidate["reports"]["BERT variant model"]["revert2"]["wrong_confident_qc_pass"] = 7
    (tmp_path / "now.json").write_text(json.dumps(robustness))
    (tmp_path / "cand.json").write_text(json.dumps(candidate))
    _main([str(tmp_path), str(tmp_path / "now.json"), "--keep-before",
           "--candidate", f"shipped={tmp_path / 'now.json'}", "--candidate", f"retrained={tmp_path / 'cand.json'}",
           "--candidate-note", "Why it stays."])
    text = (tmp_path / "MODEL_CARD.md").read_text()
    section = text[text.index("## Candidates not shipped"):text.index("## Limits")]
    assert "Why it stays." in section and "| figure | shipped | retrained |" in section
    assert "| flips: +3 markers of one other class |" in section and "| 25.0% |" in section
    head = before_text[:before_text.index("## Candidates not shipped")] if "## Candidates not shipped" in before_text \
        else before_text[:before_text.index("## Limits")]
    assert text[:text.index("## Candidates not shipped")] == head
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["previous"] == shipped["previous"]
    assert [c["title"] for c in metrics["candidates"]["columns"]] == ["shipped", "retrained"]


def test_the_card_names_held_out_genomes_that_earlier_stages_trained_on(tmp_path):
    for f in MODEL_DIR.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, tmp_path / f.name)
    (tmp_path / "model.safetensors").symlink_to(MODEL_DIR / "model.safetensors")
    metrics = json.loads((MODEL_DIR / "metrics.json").read_text())
    config = json.loads((tmp_path / "config.json").read_text())
    extra = config["bertgeom_train_config"].setdefault("extra", {})
    extra["held_out_seen"] = {"stages": "1-6", "genomes": {"A": "evaluation", "B": "calibration"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    text = write_card(tmp_path, metrics, metrics.get("robustness"))
    assert ("Stages 1-6 trained on the split of the labels before the placement, whose training part held 2 "
            "genomes that are held out now: A (evaluation), B (calibration); the figures below count them.") in text
    extra.pop("held_out_seen")
    (tmp_path / "config.json").write_text(json.dumps(config))
    text = write_card(tmp_path, metrics, metrics.get("robustness"))
    assert "The model never saw an evaluation or calibration genome." in text and "Stages 1-6" not in text
