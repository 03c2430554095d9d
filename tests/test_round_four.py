"""Issue 46 ("nothing wrong, nothing lost", round four): each finding of the probe as a regression test
that failed on the main it was filed against (20c1dc8). The page-level and browser checks of the same
findings are in ``tests/test_e2e_round_four.py``; docs/reliability.md lists both."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli_run import bertgeom_cli

ROOT = Path(__file__).resolve().parent.parent


def _custom_folder(tiny_bert_dir: Path, dest: Path, **config_changes) -> Path:
    """A copy of the tiny BERT's folder whose config.json says ``config_changes``."""
    shutil.copytree(tiny_bert_dir, dest)
    config = json.loads((dest / "config.json").read_text())
    config.update(config_changes)
    (dest / "config.json").write_text(json.dumps(config))
    return dest


# ---- 1. bounded custom models ------------------------------------------------------------------
#: Run in a child whose address space is capped at 8 GiB, so a loader that allocates what the config
#: asks for (about 140 GB for 20,000 layers) meets a MemoryError there instead of this machine's limit.
_CAPPED_LOAD = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    from bertgeom.models import ModelLoadError, load_model
    out = {}
    try:
        load_model(sys.argv[1])
        out["first"] = "loaded"
    except ModelLoadError as exc:
        out["first"] = "sentence: " + str(exc)
    except BaseException as exc:
        out["first"] = "crash: " + type(exc).__name__
    try:
        out["second"] = load_model("tiny-random").num_layers
    except BaseException as exc:
        out["second"] = "crash: " + type(exc).__name__
    print(json.dumps(out))
""")


def test_a_config_with_20000_layers_is_refused_in_one_sentence_and_the_next_model_loads(tiny_bert_dir, tmp_path):
    folder = _custom_folder(tiny_bert_dir, tmp_path / "huge", num_hidden_layers=20000, hidden_size=384,
                            num_attention_heads=12, intermediate_size=1536)
    proc = subprocess.run([sys.executable, "-c", _CAPPED_LOAD, str(folder)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["first"].startswith("sentence: "), out
    assert "num_hidden_layers = 20,000" in out["first"] and "\n" not in out["first"], out
    assert out["second"] == 2, out  # the same process loads the next model


def test_the_cli_refuses_a_config_beyond_the_bounds_in_one_sentence(tiny_bert_dir, tmp_path):
    folder = _custom_folder(tiny_bert_dir, tmp_path / "deep", num_hidden_layers=200)  # 30 MB: loads before
    res = bertgeom_cli("trace", "The cat sat.", "--model", str(folder))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "num_hidden_layers = 200" in res.stderr and "at most 128" in res.stderr, res.stderr


def test_a_model_larger_than_the_memory_it_may_take_is_refused_before_loading(tiny_bert_dir, tmp_path, monkeypatch):
    from bertgeom.models import MODEL_MEMORY_ENV, ModelLoadError, load_model

    folder = _custom_folder(tiny_bert_dir, tmp_path / "wide", num_hidden_layers=2)
    monkeypatch.setenv(MODEL_MEMORY_ENV, str(1 << 20))  # 1 MiB: the tiny BERT's 4 MB of weights do not fit
    with pytest.raises(ModelLoadError, match=r"needs about .* of memory to load .* and this machine has 0\.0 GiB"):
        load_model(str(folder))
    monkeypatch.setenv(MODEL_MEMORY_ENV, str(1 << 30))
    assert load_model(str(folder)).num_layers == 2


def test_a_safetensors_header_that_declares_more_than_the_file_holds_is_one_sentence(tiny_bert_dir, tmp_path):
    from bertgeom.models import ModelLoadError, load_model

    folder = _custom_folder(tiny_bert_dir, tmp_path / "cut")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="cut short"):
        load_model(str(folder))


def test_an_exception_without_text_is_read_safely():
    from bertgeom.safety import error_text

    assert error_text(MemoryError()) == "MemoryError"
    assert error_text(KeyError()) == "KeyError"
    assert error_text(ValueError("first line\nsecond")) == "first line"
    assert len(error_text(ValueError("x" * 500))) == 200


# ---- 4. model ids the OS cannot stat ---------------------------------------------------------------
@pytest.mark.parametrize("model_id", ["a" * 300, "~nouser/x", "org/" + "b" * 260, "a\x00b"])
def test_a_model_id_the_os_cannot_stat_is_one_sentence(model_id):
    from bertgeom.models import ModelLoadError, load_model, resolve_spec

    with pytest.raises(ModelLoadError) as caught:
        resolve_spec(model_id)
    assert "\n" not in str(caught.value)
    with pytest.raises(ModelLoadError):
        load_model(model_id)


def test_the_cli_answers_a_300_character_model_id_in_one_sentence():
    res = bertgeom_cli("trace", "The cat sat.", "--model", "a" * 300)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "300 characters long" in res.stderr
