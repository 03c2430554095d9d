"""A paste is read once into typed records (issue 35, "parse a paste once; key by record").

Before: one genome pasted on the Variant Classifier was parsed three times (the batch split, the
trace's encoder re-reading the record as FASTA text, the reading notes re-reading the whole paste).
Now the input kind's ``parse`` reads a paste once into :class:`bertgeom.inputs.Record` s (name,
cleaned content, reading notes, digest); the trace, the batch table and the notes are keyed by the
record's digest. The count below is of the real FASTA parser's calls, wrapped, not mocked."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import toy_family as toy
from bertgeom.inputs import TEXT, InputError, Record, encode_input
from bertgeom.sars_cov_2.genome import fasta
from bertgeom.sars_cov_2.variant.spec import GENOME, genome_set
from bertgeom.trace import run_trace

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "bertgeom/sars_cov_2/page.py"
RNA_NOTE = "RNA input: U read as T"
PROTEIN = "MFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHV"


def _renamed(text: str, name: str, rna: bool = False) -> str:
    lines = text.splitlines()
    body = [ln.replace("T", "U") for ln in lines[1:]] if rna else lines[1:]
    return "\n".join([f">{name}", *body])


@pytest.fixture
def parse_calls(monkeypatch) -> list[int]:
    """Every call of the real FASTA parser, counted (the parser itself still runs)."""
    calls: list[int] = []
    real = fasta.parse_sequences

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fasta, "parse_sequences", counting)
    return calls


def test_a_paste_of_n_records_is_parsed_once_across_table_trace_and_notes(tiny_variant_dir, monkeypatch,
                                                                          parse_calls):
    from bertgeom.sars_cov_2.ui.cache import batch_chunks, classify_chunk, digests
    from bertgeom.ui.cache import cached_model, get_record_trace, paste_records

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    demo = genome_set("demo")
    nonce = f"p{time.time_ns()}"  # records no earlier test has read in this process
    text = "\n".join([_renamed(demo[3].text, f"{nonce}alpha", rna=True), _renamed(demo[0].text, f"{nonce}wt"),
                      _renamed(demo[7].text, f"{nonce}omicron")])
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = text
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("3 records" in s.value for s in at.subheader) and len(at.dataframe[0].value) == 3  # the table
    assert any(f"{nonce}alpha" in s.value for s in at.subheader)  # the first record's full view (its trace)
    assert any("U read as T" in c.value for c in at.caption)  # its reading note (markdown-escaped)
    assert len(parse_calls) == 1  # the old page: 3 (the split, the trace's encoder, the notes)
    at.run()  # a rerun (a row click, a slider) reads the parsed records from the cache
    assert not at.exception and len(parse_calls) == 1

    # every other record's trace and the table's rows are keyed by the records read then
    model_id = str(tiny_variant_dir)
    loaded = cached_model(model_id)
    records = paste_records(loaded, text)
    assert [r.name for r in records] == [f"{nonce}alpha", f"{nonce}wt", f"{nonce}omicron"]
    for record in records:
        trace = get_record_trace(loaded, record)
        assert trace.encoded.key == record.digest and (RNA_NOTE in trace.encoded.notes) == (RNA_NOTE in record.notes)
    (chunk,) = batch_chunks(records)
    rows = classify_chunk(loaded, digests(chunk), chunk)
    assert [r["name"] for r in rows] == [r.name for r in records] and RNA_NOTE in rows[0]["notes"]
    assert len(parse_calls) == 1


def test_records_keep_names_order_errors_and_reading_notes():
    a, b = genome_set("demo")[0].text, genome_set("demo")[5].text
    records = GENOME.parse("\n".join([_renamed(a, "same"), ">bad\n" + PROTEIN, _renamed(b, "same", rna=True)]))
    assert [r.name for r in records] == ["same", "bad", "same"]  # duplicates kept: the table tells them apart
    assert records[0].ok and not records[1].ok and "protein" in records[1].error and not records[1].content
    assert RNA_NOTE not in records[0].notes and RNA_NOTE in records[2].notes
    assert set(records[2].content) <= set("ACGTNRYSWKMBDHV")  # cleaned: U read as T, upper case
    assert len({r.digest for r in records}) == 3
    again = GENOME.parse(_renamed(a, "same"))[0]
    assert again == records[0] and again.digest == records[0].digest  # one content, one key
    assert Record("x", "ACGT").digest != Record("y", "ACGT").digest != Record("x", "ACGT", ("a note",)).digest
    with pytest.raises(dataclasses.FrozenInstanceError):
        records[0].content = "ACGT"
    with pytest.raises(InputError, match="protein"):  # a single bad record is one sentence, not a table
        GENOME.parse(">bad\n" + PROTEIN)


def test_a_generic_view_of_a_paste_shows_its_first_record_and_says_so(tiny_variant):
    a, b = genome_set("demo")[0].text, genome_set("demo")[5].text
    enc = encode_input(tiny_variant, a + "\n" + b)
    assert enc.notes[0].startswith("The input holds 2 records; this view shows the first")
    enc = encode_input(tiny_variant, a + "\n>bad\n" + PROTEIN)
    assert "(1 of them cannot be read)" in enc.notes[0]  # an unreadable later record is not passed over in silence
    with pytest.raises(InputError, match="protein"):
        encode_input(tiny_variant, ">bad\n" + PROTEIN + "\n" + b)  # the view's own record cannot be read


def test_text_is_one_record_read_as_before(minilm):
    text = "  The cat sat on the mat.  "
    (record,) = TEXT.parse(text)
    assert record.content == text.strip() and not record.notes
    by_record, by_text = run_trace(minilm, record), run_trace(minilm, text)
    assert by_record.tokens == by_text.tokens and (by_record.attentions == by_text.attentions).all()
    with pytest.raises(InputError, match="empty"):
        run_trace(minilm, TEXT.parse("   ")[0])


def test_the_toy_family_reads_a_paste_as_one_record_without_a_parser_of_its_own():
    from bertgeom.models import load_model

    toy.register()
    try:
        loaded = load_model(toy.MODEL_ID)
        (record,) = toy.LETTERS.parse(" wxyzzy ")
        assert run_trace(loaded, record).tokens == run_trace(loaded, "wxyzzy").tokens == ["[CLS]", *"wxyzzy", "[SEP]"]
    finally:
        toy.unregister()


def test_the_heads_page_views_a_pastes_first_record_and_says_so(tiny_variant_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    a, b = genome_set("demo")[0].text, genome_set("demo")[5].text
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = _renamed(a, "first") + "\n" + _renamed(b, "second", rna=True)
    at.run()
    at.switch_page("app_pages/attention_heads.py").run()
    assert not at.exception, [e.value for e in at.exception]
    notes = [c.value for c in at.caption if "records" in c.value]
    assert len(notes) == 1 and "2 records" in notes[0] and "first" in notes[0]
    assert not any("U read as T" in c.value for c in at.caption)  # the second record's note is not the view's
