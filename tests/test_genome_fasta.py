"""Parsing of pasted / uploaded / streamed sequences (bertgeom.genome.fasta)."""

import gzip
import lzma

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertgeom.genome.fasta import (
    RecordError,
    SequenceInputError,
    SequenceRecord,
    iter_fasta_file,
    parse_sequences,
    parse_single,
)

VALID = set("ACGTNRYSWKMBDHV")


def test_bare_sequence_lower_case_and_rna():
    rec = parse_single("acguu\nNNry\n")
    assert rec.sequence == "ACGTTNNRY"
    assert rec.name == "sequence"
    assert any("bare sequence" in n for n in rec.notes)
    assert any("U read as T" in n for n in rec.notes)


def test_multi_fasta_and_mixed_line_endings():
    text = ">one desc\r\nACGT\r\nACGT\r>two\nGG\n\n>three\r\nTT"
    recs = parse_sequences(text)
    assert [r.name for r in recs] == ["one desc", "two", "three"]
    assert [r.sequence for r in recs] == ["ACGTACGT", "GG", "TT"]


def test_genbank_numbering_and_gaps():
    text = "        1 attaaaggtt tatacctt\n       61 cc--a.a\n"
    rec = parse_single(text)
    assert rec.sequence == "ATTAAAGGTTTATACCTTCCAA"
    assert any("digits" in n for n in rec.notes)
    assert any("gap" in n for n in rec.notes)


def test_genbank_flat_file():
    text = "LOCUS       MN908947  29903 bp\nACCESSION   MN908947\nVERSION     MN908947.3\nORIGIN\n        1 attaaaggtt\n//\n"
    rec = parse_single(text)
    assert rec.name == "MN908947.3" and rec.sequence == "ATTAAAGGTT"


def test_iupac_kept_and_x_read_as_n():
    rec = parse_single("ACGT" * 20 + "RYKMSWBDHVNX")
    assert rec.sequence == "ACGT" * 20 + "RYKMSWBDHVNN"
    assert any("10 IUPAC ambiguity codes kept" in n for n in rec.notes)
    assert any("X read as N" in n for n in rec.notes)


@pytest.mark.parametrize(
    "data, fragment",
    [
        ("", "empty"),
        ("   \n\t\r\n", "empty"),
        (">only_header\n", "no sequence"),
        ("MFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSS", "protein"),
        (b"\x00\x01\x02binary\xff", "binary"),
        (b"\xff\xfe\xfa\xfb" * 20, "binary"),
        ("ACGT" * 10 + "!!", "not a nucleotide"),
        ("hello world, this is a sentence.", "nucleotide"),
    ],
)
def test_bad_input_one_clear_sentence(data, fragment):
    with pytest.raises(SequenceInputError) as exc:
        parse_sequences(data)
    msg = str(exc.value)
    assert fragment in msg
    assert msg.count(". ") == 0 and msg.endswith(".")  # one sentence


def test_size_limit():
    with pytest.raises(SequenceInputError, match="limit"):
        parse_sequences("ACGT" * 1000, max_bytes=1000)


def test_compressed_bytes():
    data = gzip.compress(b">g\nACGT\n")
    assert parse_single(data).sequence == "ACGT"
    bomb = gzip.compress(b"A" * 200_000)
    with pytest.raises(SequenceInputError, match="limit"):
        parse_sequences(bomb, max_bytes=10_000)


@pytest.mark.parametrize("opener, suffix", [(open, ".fasta"), (gzip.open, ".fa.gz"), (lzma.open, ".fasta.xz")])
def test_iter_fasta_file_streams_and_reports_bad_records(tmp_path, opener, suffix):
    path = tmp_path / f"x{suffix}"
    with opener(path, "wt") as fh:
        fh.write(">good\nACGT\nACGT\n>prot\nMFVFLVLLPLVSSQCVNLTTRTQLPP\n>empty\n>big\n" + "A" * 5000 + "\n>last\r\nGG\r\n")
    out = list(iter_fasta_file(path, max_record_len=1000))
    assert [type(r).__name__ for r in out] == ["SequenceRecord", "RecordError", "RecordError", "RecordError", "SequenceRecord"]
    assert out[0].sequence == "ACGTACGT" and out[-1].sequence == "GG"
    assert "protein" in out[1].message and out[2].index == 2
    assert all(r.ok for r in out if isinstance(r, SequenceRecord))


def test_iter_fasta_file_binary_junk(tmp_path):
    path = tmp_path / "junk.fasta"
    path.write_bytes(bytes(range(256)) * 50)
    out = list(iter_fasta_file(path))
    assert out and all(isinstance(r, RecordError) for r in out)


def _check(result):
    for rec in result:
        assert isinstance(rec, SequenceRecord)
        assert rec.sequence and set(rec.sequence) <= VALID


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_fuzz_text_never_crashes(text):
    try:
        _check(parse_sequences(text))
    except SequenceInputError as exc:
        assert str(exc)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_bytes_never_crashes(data):
    try:
        _check(parse_sequences(data))
    except SequenceInputError as exc:
        assert str(exc)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet="abc >\r\n", max_size=10), st.text(alphabet="ACGTUNacgtu-. \n\r0123456789", max_size=60)), max_size=5))
def test_fuzz_fasta_like(parts):
    text = "".join(f">{h}\n{s}\n" for h, s in parts)
    try:
        _check(parse_sequences(text))
    except SequenceInputError as exc:
        assert str(exc)
