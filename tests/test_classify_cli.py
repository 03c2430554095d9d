"""The ``classify`` CLI never loses or corrupts output and answers user errors in one sentence
(issue 16, items 2, 5 and 8); its rows carry the rule-based second opinion (issue 11)."""

from __future__ import annotations

import csv
import gzip
import subprocess
import sys

import pytest

from bertgeom.genome.dataset import load_demo_genomes


def _run(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "bertgeom", "classify", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo_blocks():
    return [(r.name, gzip.compress(f">{r.name}\n{r.sequence}\n".encode())) for r, _ in load_demo_genomes()][:4]


def test_a_truncated_file_keeps_the_intact_rows_names_the_stop_and_exits_2(tiny_variant_dir, tmp_path, demo_blocks):
    cut = tmp_path / "cut.fasta.gz"
    blob = demo_blocks[3][1]
    cut.write_bytes(b"".join(b for _, b in demo_blocks[:3]) + blob[: len(blob) // 2])
    out = tmp_path / "keep.csv"
    r = _run(cut, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"inside record '{demo_blocks[3][0]}'" in r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [row["name"] for row in rows] == [n for n, _ in demo_blocks]
    assert all(row["predicted"] for row in rows[:3]) and "truncated" in rows[3]["error"]
    assert all(row["rule_call"] for row in rows[:3]) and {"rule_call", "rule_evidence", "agrees"} <= set(rows[0])


def test_a_failed_run_leaves_the_previous_output_as_it_was(tmp_path, demo_blocks):
    good = tmp_path / "g.fasta.gz"
    good.write_bytes(demo_blocks[0][1])
    out = tmp_path / "keep.csv"
    out.write_text("previous results\n")
    broken = tmp_path / "broken_model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    (broken / "kmer_vocab.json").write_text("[]")
    (broken / "model.safetensors").write_bytes(b"garbage")
    r = _run(good, "--model", broken, "--out", out)
    assert r.returncode == 3 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert out.read_text() == "previous results\n"


def test_output_errors_are_one_sentence(tiny_variant_dir, tmp_path, demo_blocks):
    good = tmp_path / "g.fasta.gz"
    good.write_bytes(demo_blocks[0][1])
    r = _run(good, "--model", tiny_variant_dir, "--out", tmp_path / "no_such_dir" / "x.csv")
    assert r.returncode == 4 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = _run(tmp_path / "missing.fasta", "--model", tiny_variant_dir)
    assert r.returncode == 2 and "No file at" in r.stderr


def test_names_that_look_like_formulas_are_neutralised(tiny_variant_dir, tmp_path):
    rec = next(r for r, _ in load_demo_genomes())
    fasta = tmp_path / "f.fasta"
    fasta.write_text(f">=HYPERLINK(\"http://x\")\n{rec.sequence}\n>@SUM(A1)\n{rec.sequence}\n")
    out = tmp_path / "o.csv"
    assert _run(fasta, "--model", tiny_variant_dir, "--out", out).returncode == 0
    names = [row["name"] for row in csv.DictReader(out.open())]
    assert names == ["'=HYPERLINK(\"http://x\")", "'@SUM(A1)"]
