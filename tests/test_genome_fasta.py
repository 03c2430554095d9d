"""Parsing of pasted / uploaded / streamed sequences (bertgeom.sars_cov_2.genome.fasta)."""

import gzip
import lzma

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertgeom.sars_cov_2.genome.fasta import (
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
    text = ("LOCUS       MN908947  29903 bp\nACCESSION   MN908947\nVERSION     MN908947.3\nORIGIN\n"
            "        1 attaaaggtt\n//\n")
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
        fh.write(">good\nACGT\nACGT\n>prot\nMFVFLVLLPLVSSQCVNLTTRTQLPP\n>empty\n>big\n" + "A" * 5000
                 + "\n>last\r\nGG\r\n")
    out = list(iter_fasta_file(path, max_record_len=1000))
    assert [type(r).__name__ for r in out] == ["SequenceRecord", "RecordError", "RecordError", "RecordError",
                                               "SequenceRecord"]
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
@given(st.lists(st.tuples(st.text(alphabet="abc >\r\n", max_size=10), st.text(alphabet="ACGTUNacgtu-. \n\r0123456789",
                                                                              max_size=60)), max_size=5))
def test_fuzz_fasta_like(parts):
    text = "".join(f">{h}\n{s}\n" for h, s in parts)
    try:
        _check(parse_sequences(text))
    except SequenceInputError as exc:
        assert str(exc)


# --- compressed inputs: every member read, truncation named (issue 16, item 1) -------------------------

def _demo_fasta(n=4):
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

    recs = [r for r, _ in load_demo_genomes()][:n]
    return recs, "".join(f">{r.name}\n{r.sequence}\n" for r in recs).encode()


def test_concatenated_gzip_members_and_bgzf_blocks_are_read_completely():
    import gzip
    import lzma

    from bertgeom.sars_cov_2.genome.fasta import parse_sequences

    recs, fa = _demo_fasta()
    two = gzip.compress(fa[: len(fa) // 2]) + gzip.compress(fa[len(fa) // 2 :])
    assert [r.sequence for r in parse_sequences(two)] == [r.sequence for r in recs]
    blocks = b"".join(gzip.compress(fa[i : i + 20000]) for i in range(0, len(fa), 20000)) + gzip.compress(b"")
    assert [len(r) for r in parse_sequences(blocks)] == [len(r) for r in recs]
    xz = lzma.compress(fa[:1000]) + b"\x00" * 4 + lzma.compress(fa[1000:])
    assert len(parse_sequences(xz)) == len(recs)


def test_a_truncated_upload_names_the_record_where_reading_stopped():
    import gzip

    from bertgeom.sars_cov_2.genome.fasta import TruncatedInputError, parse_sequences

    recs, fa = _demo_fasta()
    blocks = [gzip.compress(f">{r.name}\n{r.sequence}\n".encode()) for r in recs]
    cut = b"".join(blocks[:2]) + blocks[2][: len(blocks[2]) // 2]
    with pytest.raises(TruncatedInputError) as err:
        parse_sequences(cut)
    assert f"inside record '{recs[2].name}'" in str(err.value) and "2 records" in str(err.value)
    assert [r.name for r in err.value.records] == [r.name for r in recs[:2]]


def test_the_cli_reader_reports_a_truncated_file_in_a_row_after_the_intact_records(tmp_path):
    import gzip

    from bertgeom.sars_cov_2.genome.fasta import RecordError, SequenceRecord, iter_fasta_file

    recs, _ = _demo_fasta()
    blocks = [gzip.compress(f">{r.name}\n{r.sequence}\n".encode()) for r in recs]
    path = tmp_path / "cut.fasta.gz"
    path.write_bytes(b"".join(blocks[:3]) + blocks[3][: len(blocks[3]) // 2])
    out = list(iter_fasta_file(path))
    assert [type(r) for r in out] == [SequenceRecord] * 3 + [RecordError]
    assert "truncated" in out[-1].message and recs[3].name in out[-1].message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=1, max_value=119_000), min_size=0, max_size=5),
       keep=st.floats(min_value=0.05, max_value=1.0), codec=st.sampled_from(["gz", "xz"]))
def test_hostile_compressed_uploads_lose_nothing_silently(cuts, keep, codec):
    """Any member layout of a compressed FASTA reads completely; any truncation says so (never a
    silent partial read, never another exception)."""
    from bertgeom.sars_cov_2.genome.fasta import SequenceInputError, TruncatedInputError, parse_sequences

    recs, fa = _demo_fasta()
    bounds = sorted({0, len(fa), *[min(c, len(fa)) for c in cuts]})
    pack = gzip.compress if codec == "gz" else lzma.compress
    data = b"".join(pack(fa[a:b]) for a, b in zip(bounds, bounds[1:]))
    data = data[: max(1, int(len(data) * keep))]
    try:
        out = parse_sequences(data)
    except TruncatedInputError as exc:
        assert len(exc.records) < len(recs)
        assert all(r.sequence == o.sequence for r, o in zip(exc.records, recs))
        return
    except SequenceInputError:
        return  # e.g. cut inside the first header or block: a clear sentence
    assert [r.sequence for r in out] == [r.sequence for r in recs]
