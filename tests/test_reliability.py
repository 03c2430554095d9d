"""Nothing lost, nothing rendered (issue 25): the probes of the issue, rerun as written.

CLI probes run the real ``python -m bertgeom classify`` on real files (its entry point in this
process, tests/cli_run.py); page probes run the app in
AppTest; the shared guards of :mod:`bertgeom.safety` are checked on the strings the probes used."""

from __future__ import annotations

import csv
import io
import lzma
import re
from pathlib import Path

import pytest
from cli_run import bertgeom_cli

from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
from bertgeom.sars_cov_2.variant import genome_analysis

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_NAMES = ["![x](http://127.0.0.1:9/x.png)", ":red[red] **bold** $x^2$", "see http://evil.example.com/a",
                 "www.evil.example.com", "mail me@evil.example.com", "<img src=x onerror=alert(1)>", ":smile:"]


def _classify(*args):
    return bertgeom_cli("classify", *args)


@pytest.fixture(scope="module")
def demo():
    return [r for r, _ in load_demo_genomes()]


# ---- CLI: nothing lost, OUT replaced only on success -----------------------------------------
def test_a_3m_character_headerless_line_is_an_error_row_not_0_of_0(tiny_variant_dir, tmp_path):
    big = tmp_path / "long.fasta"
    big.write_text("A" * 3_000_000 + "\n")
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    r = _classify(big, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "0 of 1 records" in r.stderr and "0 of 0" not in r.stderr
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1 and "longer than the limit" in rows[0]["error"]


def test_a_file_with_no_record_fails_and_keeps_the_previous_out(tiny_variant_dir, tmp_path):
    empty = tmp_path / "empty.fasta"
    empty.write_text("\n\n")
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    r = _classify(empty, "--model", tiny_variant_dir, "--out", out)
    assert (r.returncode == 2 and "no record" in r.stderr and r.stderr.count("error:") == 1
            and "Traceback" not in r.stderr)
    assert out.read_text() == "previous results\n"


def test_a_truncated_xz_exits_2_and_never_replaces_out(tiny_variant_dir, tmp_path, demo):
    blob = lzma.compress("".join(f">{r.name}\n{r.sequence}\n" for r in demo[:3]).encode())
    cut = tmp_path / "cut.fasta.xz"
    cut.write_bytes(blob[: len(blob) * 2 // 3])
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    r = _classify(cut, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "truncated" in r.stderr
    assert out.read_text() == "previous results\n"
    (partial,) = tmp_path.glob("out.csv.*.partial")
    assert str(partial) in r.stderr and partial.is_file()


def test_duplicate_record_names_are_told_apart_and_keep_their_header(tiny_variant_dir, tmp_path, demo):
    fasta = tmp_path / "dups.fasta"
    fasta.write_text("".join(f">{n}\n{demo[0].sequence}\n" for n in ("a", "a", "b", "a")))
    out = tmp_path / "out.csv"
    r = _classify(fasta, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 0 and "told apart" in r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [row["name"] for row in rows] == ["a", "a#2", "b", "a#3"]
    assert [row["original_name"] for row in rows] == ["a", "a", "b", "a"]


def test_the_cli_and_the_web_keep_the_same_records_of_a_gz_with_trailing_garbage(tiny_variant_dir, tmp_path, demo):
    import gzip

    from bertgeom.sars_cov_2.variant.spec import read_upload

    data = b"".join(gzip.compress(f">{r.name}\n{r.sequence}\n".encode()) for r in demo) + b"this is not gzip"
    text, problem = read_upload("tail.fasta.gz", data)
    web = [line[1:] for line in text.splitlines() if line.startswith(">")]
    assert web == [r.name for r in demo] and "ignored" in problem
    path = tmp_path / "tail.fasta.gz"
    path.write_bytes(data)
    out = tmp_path / "out.csv"
    r = _classify(path, "--model", tiny_variant_dir, "--out", out)
    assert "Traceback" not in r.stderr and "ignored" in r.stderr
    assert [row["name"] for row in csv.DictReader(out.open())] == web


# ---- one CSV writer ----------------------------------------------------------------------------
def test_every_csv_cell_that_looks_like_a_formula_is_neutralised():
    import pandas as pd

    from bertgeom.safety import csv_bytes

    bad = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", "\tx", "\rx"]
    got = list(csv.reader(io.StringIO(csv_bytes(pd.DataFrame({"name": bad, "value": range(6), "=col": 0})).decode())))
    assert got[0] == ["name", "value", "'=col"]
    assert [row[0] for row in got[1:]] == ["'" + b for b in bad] and [row[1] for row in got[1:]] == list("012345")
    rows = [{"name": "@SUM(1+1)", "p": -0.5}]
    assert csv_bytes(rows).decode().splitlines()[1] == "'@SUM(1+1),-0.5"


def test_no_page_writes_a_csv_but_through_the_one_writer():
    offenders = []
    for path in [*(ROOT / "bertgeom" / "ui").rglob("*.py"), *(ROOT / "app_pages").glob("*.py"), ROOT / "app.py"]:
        for m in re.finditer(r"\.to_csv\(|csv\.(writer|DictWriter)\(", path.read_text()):
            offenders.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert offenders == []


def test_the_single_result_csv_neutralises_a_formula_name(tiny_variant):
    from bertgeom.safety import csv_bytes
    from bertgeom.trace import run_trace
    from bertgeom.sars_cov_2.variant.result import result_row

    rec = load_demo_genomes()[0][0]
    trace = run_trace(tiny_variant, f">=HYPERLINK(\"http://x\")\n{rec.sequence}")
    analysis = genome_analysis(trace.encoded)
    row = result_row(tiny_variant, analysis, trace.predicted, list(trace.labels), trace.probs)
    body = list(csv.DictReader(csv_bytes([row]).decode().splitlines()))
    assert body[0]["name"] == "'=HYPERLINK(\"http://x\")"


# ---- one markdown escape -----------------------------------------------------------------------
def test_plain_breaks_every_markup_the_dashboard_renders():
    from bertgeom.safety import plain

    for name in HOSTILE_NAMES:
        md = plain(name)
        assert md.replace("\\", "").replace("\u2060", "") == name  # shows exactly as typed
        assert not re.search(r"(?<!\\)[\[\]()*_<>$`!]", md)  # no unescaped markup character
        assert not re.search(r"https?://|www\.|@[\w-]|:\w+:", md.replace("\\", ""))  # no GFM autolink, no emoji


# ---- results root ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run_template(tiny_variant, tmp_path_factory):
    """A real 4-genome, 2-shard precompute run folder with class maps (copied by each test)."""
    from bertgeom.precompute import PrecomputeConfig, precompute
    from bertgeom.sars_cov_2.variant.spec import genome_set

    base = tmp_path_factory.mktemp("precomputed")
    items = [it for it in genome_set() if it.label in ("delta", "omicron")][:4]
    fasta, labels = base / "in.fasta", base / "labels.tsv"
    fasta.write_text("".join(it.text + "\n" for it in items))
    labels.write_text("name\tclass\n" + "".join(f"{it.name}\t{it.label}\n" for it in items))
    precompute(fasta, labels, base / "run", config=PrecomputeConfig(shard_size=2), loaded=tiny_variant)
    return base / "run"


def _planted(run_template, tmp_path, plant):
    """A copy of the run under ``tmp_path/results/run1`` with ``plant(run, outside)`` applied."""
    import shutil

    run, outside = tmp_path / "results" / "run1", tmp_path / "outside"
    shutil.copytree(run_template, run)
    outside.mkdir()
    plant(run, outside)
    return run


def _link_shards(run, outside):
    import shutil

    shutil.move(run / "shards", outside / "shards")
    (run / "shards").symlink_to(outside / "shards", target_is_directory=True)


def _link_one_shard(run, outside):
    for suffix in ("parquet", "done"):
        src = run / "shards" / f"shard-000001.{suffix}"
        (outside / src.name).write_bytes(src.read_bytes())
        src.unlink()
        src.symlink_to(outside / src.name)


def _link_keep(run, outside):
    import numpy as np

    np.save(outside / "keep.npy", np.zeros(3, bool))
    (run / "maps" / "keep.npy").unlink()
    (run / "maps" / "keep.npy").symlink_to(outside / "keep.npy")


@pytest.mark.parametrize("plant", [_link_shards, _link_one_shard, _link_keep],
                         ids=["shards-dir", "parquet+done", "maps-keep"])
def test_a_symlink_anywhere_in_a_results_folder_is_refused(run_template, tmp_path, plant):
    from bertgeom.precompute import load_results
    from bertgeom.precompute.core import PrecomputeError

    assert len(load_results(run_template).records) == 4  # the intact run reads
    run = _planted(run_template, tmp_path, plant)
    with pytest.raises(PrecomputeError, match="symbolic link"):
        load_results(run)


def test_a_rerun_into_a_folder_with_linked_shards_writes_nothing_outside(run_template, tiny_variant, tmp_path):
    from bertgeom.precompute import PrecomputeConfig, precompute
    from bertgeom.precompute.core import PrecomputeError

    run = _planted(run_template, tmp_path, _link_shards)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "outside" / "shards").iterdir())
    base = run_template.parent
    with pytest.raises(PrecomputeError, match="symbolic link"):
        precompute(base / "in.fasta", base / "labels.tsv", run, config=PrecomputeConfig(shard_size=2),
                   loaded=tiny_variant)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "outside" / "shards").iterdir()) == before


def test_the_dashboard_refuses_a_linked_results_folder_in_one_sentence(run_template, tiny_variant_dir, tmp_path,
                                                                        monkeypatch):


    _planted(run_template, tmp_path, _link_one_shard)
    at = _cone_page_on_precomputed_sets(tiny_variant_dir, tmp_path, monkeypatch, cache=True)
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "symbolic link" in errors[0], errors
    assert not any("genomes precomputed" in c.value for c in at.caption)


def test_a_manifest_model_id_is_shown_as_text(run_template, tiny_variant_dir, tmp_path, monkeypatch):
    import json


    from bertgeom.safety import plain

    def poison(run, outside):
        m = json.loads((run / "manifest.json").read_text())
        m["model"]["id"] = HOSTILE_NAMES[0]
        (run / "manifest.json").write_text(json.dumps(m))

    _planted(run_template, tmp_path, poison)
    at = _cone_page_on_precomputed_sets(tiny_variant_dir, tmp_path, monkeypatch)
    assert not at.exception
    notes = [c.value for c in at.caption if "genomes precomputed" in c.value]
    assert notes and plain(HOSTILE_NAMES[0]) in notes[0] and HOSTILE_NAMES[0] not in notes[0]


# ---- pages: one sentence, never a traceback ----------------------------------------------------
@pytest.mark.parametrize("text", ["\u200b", "\u202e", "\x00"], ids=["zero-width", "rtl-override", "nul"])
def test_attention_heads_on_an_input_with_no_content_token_says_so(text):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["model"] = "tiny-random"
    at.query_params["text"] = text  # as the URL text=%E2%80%8B, %E2%80%AE, %00
    at.run()
    at.switch_page("app_pages/attention_heads.py").run()
    assert not at.exception and not at.error
    assert [w.value for w in at.warning if "no content token" in w.value and f"U+{ord(text):04X}" in w.value]


def test_a_broken_variant_model_folder_gives_one_sentence_on_the_classifier(tiny_variant_dir, tmp_path, monkeypatch):
    import shutil

    from streamlit.testing.v1 import AppTest

    broken = tmp_path / "broken_model"
    shutil.copytree(tiny_variant_dir, broken)
    (broken / "model.safetensors").write_bytes(b"\x00garbage" * 100)
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.session_state["model_id"] = str(broken)
    at.run()
    at.switch_page("bertgeom/sars_cov_2/page.py").run()
    assert not at.exception
    assert len(at.error) == 1 and "unreadable weights" in at.error[0].value


# ---- smaller: one upload limit, ambiguity codes, duplicate names on the web --------------------
def test_every_uploader_shares_the_one_input_limit():
    import gzip
    import tomllib

    from bertgeom.inputs import InputError
    from bertgeom.safety import MAX_INPUT_BYTES
    from bertgeom.sars_cov_2.variant.spec import labelled_fasta_set
    from bertgeom.ui.sequence_input import MAX_UPLOAD_BYTES
    from bertgeom.sars_cov_2.variant.spec import read_upload
    from bertgeom.sars_cov_2.variant import MAX_GENOME_INPUT_BYTES

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert MAX_UPLOAD_BYTES == MAX_GENOME_INPUT_BYTES == MAX_INPUT_BYTES == cfg["server"]["maxUploadSize"] * 10**6
    over = gzip.compress(b">x|omicron\n" + b"ACGT" * (MAX_INPUT_BYTES // 4 + 10))  # 21 MB of text, 64 KB of gz
    with pytest.raises(InputError, match=f"limit of {MAX_INPUT_BYTES:,}"):
        labelled_fasta_set(over)  # the Cone and Subspace set uploaders
    assert "larger than the limit" in read_upload("over.gz", over)[1]  # the sidebar, the same limit


def test_a_genome_in_ambiguity_codes_is_not_called_a_protein(tmp_path):
    from bertgeom.sars_cov_2.genome.fasta import (
        SequenceInputError,
        iter_fasta_file,
        parse_sequences,
    )

    amb = "".join("RYSWKMBDHV"[(i * 7) % 10] for i in range(29_000))
    with pytest.raises(SequenceInputError) as err:
        parse_sequences(f">amb\n{amb}\n")
    assert "ambiguity codes" in str(err.value) and "protein" not in str(err.value)
    (tmp_path / "amb.fasta").write_text(f">amb\n{amb}\n")
    [rec] = list(iter_fasta_file(tmp_path / "amb.fasta"))
    assert "ambiguity codes" in rec.message and "protein" not in rec.message
    with pytest.raises(SequenceInputError, match="protein"):  # a real protein is still named one
        parse_sequences(">p\nMFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHV\n")


def test_duplicate_names_are_told_apart_on_the_classifier_page(tiny_variant_dir, demo, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = ("".join(f">same\n{demo[i].sequence}\n" for i in range(2))
                                        + f">other\n{demo[2].sequence}\n")
    at.run()
    at.switch_page("bertgeom/sars_cov_2/page.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["name"]) == ["same", "same#2", "other"]
    assert any("told apart" in c.value and "original" in c.value for c in at.caption)


def test_duplicate_names_in_an_uploaded_set_are_told_apart_and_keep_their_header():
    from bertgeom.sars_cov_2.variant.spec import labelled_fasta_set

    seq = load_demo_genomes()[0][0].sequence
    items = labelled_fasta_set(f">a|omicron\n{seq}\n>a|omicron\n{seq}\n>b|delta\n{seq}\n")
    assert [it.name for it in items] == ["a|omicron", "a|omicron#2", "b|delta"]
    assert [it.label for it in items] == ["omicron", "omicron", "delta"]
    assert all(it.text.startswith(">a|omicron\n") for it in items[:2])  # the header as written


def test_the_atomic_writer_replaces_only_on_commit(tmp_path):
    from bertgeom.safety import AtomicFile

    target = tmp_path / "out.csv"
    target.write_text("previous\n")
    with AtomicFile(target) as fh:  # a run that fails before commit
        fh.write("half")
    assert target.read_text() == "previous\n" and fh.partial.read_text() == "half"
    assert fh.partial.parent == tmp_path and fh.partial.name.startswith("out.csv.")
    with AtomicFile(target) as fh:
        fh.write("new\n")
        fh.commit()
    assert target.read_text() == "new\n" and not fh.partial.exists()


def _cone_page_on_precomputed_sets(tiny_variant_dir, tmp_path, monkeypatch, *, cache: bool = False):
    """The Cone page's per-class section on the precomputed results under ``tmp_path/results``."""
    from streamlit.testing.v1 import AppTest

    from bertgeom.sars_cov_2.variant.spec import genome_set

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    monkeypatch.setenv("BERTGEOM_RESULTS_DIR", str(tmp_path / "results"))
    if cache:
        monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = genome_set("demo")[-1].text
    at.session_state["w_cone_section"] = "classes"
    at.session_state["w_cone_set"] = "precomputed"
    at.run()
    return at.switch_page("app_pages/cone_index.py").run()
