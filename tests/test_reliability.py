"""Nothing lost, nothing rendered (issue 25): the probes of the issue, rerun as written.

CLI probes run the real ``python -m bertgeom classify`` on real files; page probes run the app in
AppTest; the shared guards of :mod:`bertgeom.safety` are checked on the strings the probes used."""

from __future__ import annotations

import csv
import io
import lzma
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bertgeom.genome.dataset import load_demo_genomes

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_NAMES = ["![x](http://127.0.0.1:9/x.png)", ":red[red] **bold** $x^2$", "see http://evil.example.com/a",
                 "www.evil.example.com", "mail me@evil.example.com", "<img src=x onerror=alert(1)>", ":smile:"]


def _classify(*args):
    return subprocess.run([sys.executable, "-m", "bertgeom", "classify", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


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
    assert r.returncode == 2 and "no record" in r.stderr and r.stderr.count("error:") == 1 and "Traceback" not in r.stderr
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
    partial = tmp_path / "out.csv.partial"
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

    from bertgeom.ui.genome_input import read_upload

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
    for path in [*(ROOT / "bertgeom" / "ui").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]:
        for m in re.finditer(r"\.to_csv\(|csv\.(writer|DictWriter)\(", path.read_text()):
            offenders.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert offenders == []


def test_the_single_result_csv_neutralises_a_formula_name(tiny_variant):
    from bertgeom.safety import csv_bytes
    from bertgeom.trace import run_trace
    from bertgeom.variant.result import result_row

    rec = load_demo_genomes()[0][0]
    trace = run_trace(tiny_variant, f">=HYPERLINK(\"http://x\")\n{rec.sequence}")
    analysis = trace.encoded.extra["analysis"]
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
