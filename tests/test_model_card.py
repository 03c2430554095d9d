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
