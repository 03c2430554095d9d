"""Hostile input on every parser and entry point: a clear message or a correct result,
never a traceback, never a hang (bounded work for bounded input)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from cli_run import bertgeom_cli

from bertgeom.sars_cov_2.genome.fasta import SequenceInputError, parse_sequences
from bertgeom.sars_cov_2.variant.spec import labelled_fasta_set
from bertgeom.inputs import InputError, encode_input, encode_text
from bertgeom.sars_cov_2.variant.explain import parse_change

LOOKALIKES = "АВСЕНКМОРТХасеорху＞ＡＣＧＴ\u200b\u00a0\u2028\ufeff"  # Cyrillic, full-width, zero-width, BOM
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.binary(max_size=4000))
def test_random_bytes_never_crash_the_genome_parser(data):
    try:
        records = parse_sequences(data)
    except SequenceInputError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert all(r.sequence for r in records)


@FAST
@given(st.text(alphabet=st.sampled_from("ACGTUNacgtun-\r\n >0123456789" + LOOKALIKES), max_size=3000))
def test_dna_like_text_with_lookalikes_gives_records_or_one_sentence(text):
    try:
        records = parse_sequences(text)
    except SequenceInputError as exc:
        assert str(exc)
    else:
        assert all(set(r.sequence) <= set("ACGTNRYSWKMBDHV") for r in records)


@FAST
@given(st.text(max_size=2000))
def test_any_text_into_the_english_model_is_tokenised_or_refused(minilm, text):
    try:
        enc = encode_text(minilm, text)
    except InputError as exc:
        assert str(exc)
    else:
        assert 2 <= enc.n_tokens <= 512


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t ",
        ">only-a-header\n",
        ">a\n>b\n>c\n",
        "NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN",
        "-" * 5000,
        "MFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHVSGTNGTKRFDNP",
        "<script>alert(1)</script>",
        "\x00\x01\x02binary\xff",
        "ACGT" * 10,
    ],
)
def test_degenerate_genome_inputs_get_a_sentence(tiny_variant, text):
    with pytest.raises(InputError) as info:
        encode_input(tiny_variant, text)
    msg = str(info.value)
    assert msg and "Traceback" not in msg and len(msg) < 400


def test_mixed_line_endings_and_rna_read_the_same_genome(tiny_variant):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    text = genome_set("demo")[2].text
    header, seq = text.split("\n", 1)
    seq = seq.replace("\n", "")
    lines = [seq[i:i + 70] for i in range(0, len(seq), 70)]
    messy = header + "\r\n" + "\r".join(lines[:50]) + "\n" + "\r\n".join(x.lower().replace("t",
                                                                                           "u") for x in lines[50:])
    a = encode_input(tiny_variant, text)
    b = encode_input(tiny_variant, messy)
    assert a.input_ids.tolist() == b.input_ids.tolist()


def test_a_ten_megabyte_paste_is_refused_quickly(tiny_variant):
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"(?i)larger|limit|at most|too"):
        encode_input(tiny_variant, ">big\n" + "ACGT" * 2_600_000)
    assert time.perf_counter() - t0 < 10


def test_thousands_of_records_and_empty_records_parse_in_bounded_time():
    text = "".join(f">r{i}\nACGTACGTAC\n>empty{i}\n\n" for i in range(5000))
    t0 = time.perf_counter()
    try:
        records = parse_sequences(text)
        assert len(records) >= 5000
    except SequenceInputError as exc:
        assert str(exc)
    assert time.perf_counter() - t0 < 10


@FAST
@given(st.text(max_size=40))
def test_mutation_box_accepts_only_spike_changes(text):
    try:
        change = parse_change(text)
    except ValueError as exc:
        assert str(exc)
    else:
        assert 21563 <= change.pos <= 25384


@FAST
@given(st.binary(max_size=2000), st.binary(max_size=500))
def test_labelled_uploads_never_crash(fasta, labels):
    try:
        items = labelled_fasta_set(fasta, labels or None)
    except InputError as exc:
        assert str(exc)
    else:
        assert isinstance(items, tuple)


def test_classify_cli_survives_a_binary_file(tiny_variant_dir, tmp_path):
    bad = tmp_path / "bad.fasta"
    bad.write_bytes(bytes(range(256)) * 50)
    r = bertgeom_cli("classify", bad, "--model", tiny_variant_dir, "--out", tmp_path / "o.csv")
    assert "Traceback" not in r.stderr
    assert r.returncode in (0, 2)
