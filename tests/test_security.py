"""Security rules: upload limits, XSRF, custom models only when enabled, safetensors only,
no remote code, no user text rendered as HTML."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
SOURCES = [p for p in list((ROOT / "bertgeom").rglob("*.py")) + list((ROOT / "app_pages").glob("*.py"))
           + [ROOT / "app.py"]]


def test_streamlit_config_limits_uploads_and_keeps_xsrf_on():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert 0 < cfg["server"]["maxUploadSize"] <= 50
    assert cfg["server"]["enableXsrfProtection"] is True
    assert cfg["server"]["fileWatcherType"] == "none"
    assert cfg["client"]["showErrorDetails"] in ("none", False)


def test_no_source_enables_remote_code_pickle_or_raw_html():
    offenders = []
    for path in SOURCES:
        # the one raw-HTML call allowed: the tab strip's constant style sheet (no user text reaches it)
        text = path.read_text()
        for fixed in ("st.html(TAB_STRIP_CSS)", "st.html(SHARE_CODE_CSS)", "st.html(counter_hidden_css(key))",
                      "st.html(RUN_SIGN_CSS)"):
            text = text.replace(fixed, "")  # the app's own CSS constants, no user text
        for pattern in (r"trust_remote_code\s*=\s*True", r"unsafe_allow_html\s*=\s*True", r"allow_pickle\s*=\s*True",
                        r"weights_only\s*=\s*False", r"pickle\.loads?\(", r"st\.html\("):
            if re.search(pattern, text):
                offenders.append(f"{path.relative_to(ROOT)}: {pattern}")
    assert offenders == []


def test_every_torch_load_is_weights_only():
    for path in SOURCES:
        for call in re.findall(r"torch\.load\([^)]*\)", path.read_text()):
            assert "weights_only=True" in call, f"{path}: {call}"


def _run_with_model(model_id: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = model_id
    at.run()
    return at.switch_page("app_pages/attention_heads.py").run()


def test_a_local_path_typed_in_the_ui_is_refused_unless_enabled(tiny_bert_dir, monkeypatch):
    monkeypatch.delenv("BERTGEOM_ALLOW_CUSTOM_MODELS", raising=False)
    at = _run_with_model(str(tiny_bert_dir))
    assert not at.exception and at.error and "not one of the bundled models" in at.error[0].value
    assert not at.sidebar.text_input  # no free model box on a shared server
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = _run_with_model(str(tiny_bert_dir))
    assert not at.exception and not at.error
    assert at.sidebar.text_input(key="w_custom_model") is not None


def test_a_model_path_in_a_shared_link_is_ignored_unless_enabled(tiny_bert_dir, monkeypatch):
    monkeypatch.delenv("BERTGEOM_ALLOW_CUSTOM_MODELS", raising=False)
    at = AppTest.from_file(APP, default_timeout=600)
    at.query_params["model"] = str(tiny_bert_dir)
    at.run()
    assert at.session_state["model_id"] != str(tiny_bert_dir)


def test_user_text_is_shown_as_text_not_html():
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["text_value"] = "<img src=x onerror=alert(1)> <b>bold</b>"
    at.session_state["model_id"] = "minilm-l6"
    at.run()
    at = at.switch_page("app_pages/attention_heads.py").run()
    assert not at.exception
    for el in list(at.markdown) + list(at.caption):
        assert "<img" not in el.value and "<b>" not in el.value


def test_uploads_share_the_one_input_limit_and_report_what_they_lose():
    import gzip

    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.ui.sequence_input import BOX_SHOW_LIMIT, MAX_UPLOAD_BYTES
    from bertgeom.sars_cov_2.variant import MAX_GENOME_INPUT_BYTES
    from bertgeom.sars_cov_2.variant.spec import read_upload

    assert MAX_UPLOAD_BYTES == MAX_GENOME_INPUT_BYTES and BOX_SHOW_LIMIT < MAX_GENOME_INPUT_BYTES
    recs = [r for r, _ in load_demo_genomes()]
    fasta = "".join(f">{r.name}\n{r.sequence}\n" for r in recs).encode()
    text, problem = read_upload("ok.fasta.gz", gzip.compress(fasta))
    assert not problem and text.count(">") == len(recs)
    bomb = gzip.compress(b">x\n" + b"A" * (MAX_GENOME_INPUT_BYTES + 10))  # small file, huge text
    text, problem = read_upload("bomb.gz", bomb)
    assert text == "" and "larger than the limit" in problem
    blocks = [gzip.compress(f">{r.name}\n{r.sequence}\n".encode()) for r in recs[:3]]
    text, problem = read_upload("cut.gz", blocks[0] + blocks[1] + blocks[2][:200])
    assert text.count(">") == 2 and f"inside record '{recs[2].name}'" in problem
    mixed = fasta + b">protein\nMFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHV\n"
    text, problem = read_upload("mixed.fasta", mixed)
    assert text.count(">") == len(recs) and "1 record could not be read" in problem and "protein" in problem
    assert read_upload("big.fasta", b"A" * (MAX_UPLOAD_BYTES + 1))[1].endswith("larger than 20 MB (20,000,000 bytes).")


def test_the_results_root_cannot_be_escaped_by_its_contents(tmp_path, monkeypatch):
    import pytest

    from bertgeom.precompute.core import PrecomputeError
    from bertgeom.precompute.store import inside_root, safe_class_name
    from bertgeom.ui.cone.results_folders import results_dirs

    root, outside = tmp_path / "results", tmp_path / "elsewhere"
    (root / "run1").mkdir(parents=True)
    (root / "run1" / "manifest.json").write_text("{}")
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "run2").mkdir()
    (root / "run2" / "manifest.json").symlink_to(outside / "manifest.json")
    monkeypatch.setenv("BERTGEOM_RESULTS_DIR", str(root))
    assert results_dirs() == [str(root / "run1")]
    assert inside_root(root, root / "run1") and not inside_root(root, root / "link")
    for bad in ("../../etc/passwd", "..", ".hidden", "a/b", "", "x" * 65, None, 3):
        with pytest.raises(PrecomputeError):
            safe_class_name(bad)
    assert safe_class_name("omicron") == "omicron" and safe_class_name("class_1.v2") == "class_1.v2"


def test_internal_files_are_written_through_a_fresh_temporary_name_never_a_planted_link(tmp_path):
    """Weights, training pools and checkpoints, precompute shards and maps, and the exported ONNX
    classifier go through safety.write_atomically: the file is whole or old, a failed write leaves
    nothing behind, and a link planted where the old code put its fixed temporary name ('<file>.tmp')
    is never written through."""
    import numpy as np
    import pytest

    from bertgeom.safety import write_atomically, write_bytes_atomically

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "model.safetensors"
    (tmp_path / "model.safetensors.tmp").symlink_to(victim)
    write_bytes_atomically(target, b"weights")
    assert target.read_bytes() == b"weights" and victim.read_text() == "keep me"
    write_bytes_atomically(target, b"shard", sync=False)  # the precompute store's writes
    assert target.read_bytes() == b"shard" and victim.read_text() == "keep me"

    def broken(fh):
        fh.write(b"half")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        write_atomically(target, broken)
    assert target.read_bytes() == b"shard"  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "model.safetensors.tmp", "victim.txt"]
    write_atomically(tmp_path / "a.npz", lambda fh: np.savez(fh, x=np.arange(3)))
    assert np.load(tmp_path / "a.npz", allow_pickle=False)["x"].tolist() == [0, 1, 2]
