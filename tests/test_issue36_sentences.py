"""Sentences true for the model and input on screen, and the smaller display fixes of issue #36:
the IsoScore note follows n and d, English text in the genome box is called text, the batch table
writes probabilities as every screen does, the Model view frame leaves the [CLS] stripe visible,
legends tell their two kinds of "no ..." apart, the head view says it scrolls, and the three QC
verdicts are set side by side.

Second round (issue #45, items 3 and 5): every generated sentence words its numbers by the two
shared helpers of :mod:`bertgeom.tables` (a change between two numbers, a counted noun), each
builder fed flat, rising and falling inputs and one against many; the head map's caption says
what the head's label says it does; the share link says how its input came in; Compare
checkpoints promises nothing the server has; κ = k90 / real tokens stays a share; a deleted
residue is carried only by the classes with the same deletion. The pages that show the
sentences are checked in an AppTest, the head view's hover line in Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertgeom.analysis.tour_facts import cone_summary, isoscore_rank_note
from bertgeom.sars_cov_2.variant import genome_analysis

APP = str(Path(__file__).resolve().parent.parent / "app.py")
HEADS = "app_pages/attention_heads.py"


def test_isoscore_note_follows_the_number_of_vectors_and_dimensions():
    few = isoscore_rank_note(9, 384)
    assert "no more vectors than dimensions" in few and "cannot exceed about 0.02" in few
    many = isoscore_rank_note(425, 384)  # a genome: 425 token vectors in 384 dimensions
    assert "more vectors than dimensions" in many and "cannot exceed" not in many and "no more" not in many


def test_cone_summary_reads_its_numbers_from_the_curves():
    text = cone_summary([0.2, 0.5, 0.8], [0.01, 0.03, 0.02], 9)
    assert "narrower cone" in text and "from 0.20 (embeddings) to 0.80 (layer 2)" in text
    assert "1/√m = 0.33" in text and "between 0.010 and 0.030" in text
    assert "wider cone" in cone_summary([0.8, 0.5], [0.1, 0.2], 4)


def test_english_text_in_the_genome_box_is_called_text_not_protein():
    from bertgeom.sars_cov_2.genome.fasta import SequenceInputError, clean_sequence

    with pytest.raises(SequenceInputError, match="ordinary text") as err:
        clean_sequence("The cat sat on the mat because it was tired.")
    assert "protein" not in str(err.value)
    with pytest.raises(SequenceInputError, match="protein"):
        clean_sequence("MFVFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVFRSSVLHSTQDLFLPFFSNVTWFHAIHVSGTNGTKRF")
    seq, _ = clean_sequence("1 attaaaggtt tataccttcc caggtaacaa accaaccaac tttcgatctc ttgtagatct")  # GenBank ORIGIN
    assert seq.startswith("ATTAAAGGTT")


def test_batch_confidence_is_written_as_a_probability_label():
    from bertgeom.sars_cov_2.variant.result import batch_table

    row = {"name": "x", "predicted": "alpha", "confidence": 0.99996, "rule_call": "alpha", "agrees": "yes",
           "qc": "pass", "genome_qc": "pass", "n_mutations": 3, "error": ""}
    assert batch_table([row])["confidence"].tolist() == ["> 99.9%"]
    assert batch_table([{**row, "confidence": 0.8512}])["confidence"].tolist() == ["85.1%"]


def test_model_view_frame_of_the_selected_head_leaves_its_edge_columns_visible():
    from bertgeom.figures.headview import model_view

    rng = np.random.default_rng(0)
    att = rng.random((2, 12, 30, 30))
    att[..., 0] = 5.0  # a [CLS] stripe in every head's first column
    att /= att.sum(-1, keepdims=True)
    fig = model_view(att, selected=(1, 3))
    heat = [t for t in fig.data if t.type == "heatmap"][1 * 12 + 3]
    thumb_left = heat.x0 - heat.dx / 2
    frame = next(s for s in fig.layout.shapes if s.line.width == 3.5)
    pixels_per_unit = max(34, min(70, int(1000 / 12)))
    inner_edge = frame.x0 + (frame.line.width / 2) / pixels_per_unit  # where the line's inside ends
    assert inner_edge < thumb_left  # the thumbnail's first column ([CLS]) is not under the frame


def test_legend_tells_no_label_from_the_papers_no_domain():
    import pandas as pd

    from bertgeom.figures.headview import NO_LABEL, legend_note, qk_set_scatter

    frame = pd.DataFrame({"x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 0.5], "group": ["", "no domain 2", "RBD"],
                          "role": ["query", "key", "query"], "item": [0, 0, 0], "position": [0, 5, 9],
                          "token": ["[CLS]", "ACGTACGTACGT", "TTTTAAAACCCC"]})
    fig = qk_set_scatter(frame, "group")
    names = {t.name for t in fig.data}
    assert f"{NO_LABEL} (query)" in names and "(none) (query)" not in names
    note = fig.layout.annotations[-1].text
    assert "no domain 1…4" in note and "no label" in note
    assert legend_note(["RBD", "NTD"]) == ""


def test_head_view_of_a_long_input_says_it_scrolls_and_styles_a_visible_scrollbar():
    from bertgeom.figures.headview import head_view_html

    n = 60
    html = head_view_html(np.full((2, n, n), 1.0 / n), [f"t{i}" for i in range(n)])
    assert "Scroll inside the box" in html and f"all {n} rows" in html
    assert "::-webkit-scrollbar-thumb" in html and "scrollbar-color" in html
    short = head_view_html(np.full((2, 5, 5), 0.2), [f"t{i}" for i in range(5)])
    assert "Scroll inside the box" not in short


def test_three_qc_verdicts_side_by_side(tiny_variant):
    from bertgeom.inputs import encode_input
    from bertgeom.sars_cov_2.variant.result import qc_verdicts
    from bertgeom.sars_cov_2.variant.spec import demo_genomes

    analysis = genome_analysis(encode_input(tiny_variant, demo_genomes()[7]["text"]))
    rows = qc_verdicts(analysis)
    assert [r["check"] for r in rows] == ["Spike QC", "Genome QC", "QC score (Nextclade-like)"]
    assert rows[0]["verdict"] == analysis.qc.verdict and "never reads" not in rows[0]["for the call"]
    assert all(r["reads"] and r["for the call"] for r in rows)


def test_faithful_geometry_layer_by_layer_reports_progress_and_equals_all_layers_at_once(tiny_bert):
    """Faithful mode now runs one layer at a time so the page can show a bar with the time left; the
    numbers are those of the whole stack at once (computed here the old way)."""
    from bertgeom.analysis import subspace as sub
    from bertgeom.sets.subspace import data_geometry, faithful_stack, padded_hidden_states, token_rows
    from bertgeom.trace import run_trace
    from bertgeom.weights import extract_layer_weights

    trace = run_trace(tiny_bert, "The cat sat on the mat.")
    lws = extract_layer_weights(tiny_bert.model)
    padded = padded_hidden_states(tiny_bert, trace)
    calls = []
    geom, dev = data_geometry(trace, lws, faithful=True, padded_hidden=padded, token_set="content",
                              progress=lambda d, t: calls.append((d, t)))
    assert calls == [(i + 1, len(lws)) for i in range(len(lws))]
    A, Z = faithful_stack(padded, lws)  # every layer at once, as before
    T, P = trace.attentions.shape[-1], A.shape[-1]
    rows = np.concatenate([token_rows(trace, "content"), np.zeros(P - T, bool)])
    whole = sub.head_data_geometry(A, Z, rows, eps=1e-3)
    for k in whole.scalars:
        np.testing.assert_allclose(geom.scalars[k], whole.scalars[k], rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(geom.spectra["attn_sv"], whole.spectra["attn_sv"], rtol=1e-5, atol=1e-6)
    Ac = np.zeros(trace.attentions.shape[:-2] + (T, P), np.float32)
    Ac[..., :T] = trace.attentions
    ref = sub.attention_deviation(A[..., :T, :], Ac, rows=token_rows(trace, "content"))
    for k in ref:
        np.testing.assert_allclose(dev[k], ref[k], rtol=1e-6)


def test_tour_stage_estimate_uses_the_last_durations_on_this_machine_else_the_pace():
    from bertgeom.ui.tour import stage_eta

    eta = stage_eta([20.0, 4.0, 1.0])
    assert eta(0, 3, 0.0).startswith("about 25 s left (as long as it took the last time")
    assert eta(1, 3, 22.0).startswith("about 5 s left")  # what is left after the model, however long it took now
    assert eta(3, 3, 30.0) == "finishing…"
    unknown = stage_eta([None, 4.0, 1.0])  # the model never loaded here: no number before the pace has one
    assert unknown(0, 3, 0.0) == "estimating the time left…"
    assert unknown(1, 3, 10.0).startswith("about 5 s left (as long")  # the rest was timed here before
    assert stage_eta([20.0, None, 1.0])(1, 3, 10.0) == "about 20 s left"  # an untimed stage ahead: the pace


def test_one_back_note_counts_rows_whose_darkest_cell_is_the_token_before():
    from bertgeom.analysis.tour_facts import one_back_note

    n = 5
    shift = np.eye(n, k=-1)
    shift[0, 0] = 1.0  # the first row has no token before it: not counted
    assert one_back_note(shift).startswith("in 4 of the 4 rows after the first (100%)")
    mixed = shift.copy()
    mixed[3] = np.eye(n)[3]  # one row reads itself instead
    assert one_back_note(mixed, "word").startswith("in 3 of the 4 rows after the first (75%)")
    assert one_back_note(mixed, "word").endswith("on the word before")
    assert one_back_note(np.eye(n)).startswith("in 0 of the 4 rows")


def test_page_notes_and_tour_facts_are_one_computation(tiny_bert):
    """The grid caption, the Head view ranking and the Model view count print the very clauses the tour
    says (bertgeom.analysis.tour_facts), on a real model's features."""
    from bertgeom.analysis.tour_facts import (
        behaviour_note, layer_ranking, special_heads_note, strongest_head, tour_facts,
    )
    from bertgeom.analysis.heads import head_features
    from bertgeom.trace import run_trace

    trace = run_trace(tiny_bert, "The cat sat on the mat because it was tired.")
    table = head_features(trace.attentions, trace.encoded)
    facts = tour_facts(table)
    assert facts["prev"] == behaviour_note(table, "prev") and facts["sink"] == behaviour_note(table, "cls")
    prev = strongest_head(table, "prev")
    ranking = layer_ranking(table, "prev", prev.layer)
    assert ranking[0] == (prev.head, prev.value)  # the layer's first is the model's strongest head
    assert [v for _, v in ranking] == sorted((v for _, v in ranking), reverse=True)
    special = np.asarray(table["cls"]) + np.asarray(table["sep"])
    note, (layer, head) = special_heads_note(table)
    assert note.startswith(f"{int((special >= 0.5).sum())} of {special.size} heads")
    assert special[layer, head] == special.max() and f"({special.max():.2f})" in note



# ---- issue #45: the two wording helpers ----------------------------------------------------------
def test_change_phrase_follows_the_numbers_as_printed():
    from bertgeom.tables import change_direction, change_phrase

    where = {"start": "embeddings", "end": "layer 6"}
    assert change_phrase(0.41, 0.72, 2, **where) == "rises 1.8-fold, from 0.41 (embeddings) to 0.72 (layer 6)"
    assert change_phrase(0.347, 0.002, 3, **where).startswith("falls 170-fold, from 0.347 (embeddings) to 0.002")
    assert change_phrase(0.72, 0.65, 2) == "falls by 10%, from 0.72 to 0.65"
    # a change invisible at the printed precision is no change: the user's "goes from 0.61 to 0.61"
    assert change_phrase(0.612, 0.608, 2, **where) == "stays at 0.61 (embeddings to layer 6)"
    assert change_phrase(0.612, 0.608, 3).startswith("falls")  # visible with one more decimal
    assert change_phrase(0.5, 0.5) == "stays at 0.50"
    assert change_phrase(-0.2, 0.4) == "rises from -0.20 to 0.40"  # no ratio across zero
    assert [change_direction(a, b, 2) for a, b in ((0.1, 0.2), (0.2, 0.1), (0.104, 0.096), (-0.001, 0.001))] \
        == [1, -1, 0, 0]


def test_counted_nouns_and_their_verbs_take_the_number_of_the_count():
    from bertgeom.tables import counted, noun_forms, word_for

    assert [counted(n, "link") for n in (0, 1, 3)] == ["0 links", "1 link", "3 links"]
    assert counted(1204, "token vector") == "1,204 token vectors"
    assert counted(2, "match") == "2 matches" and counted(2, "entry") == "2 entries" and counted(2, "day") == "2 days"
    assert counted(2, "genome", "genomes") == "2 genomes" and counted(1, "genome", "genomes") == "1 genome"
    assert word_for(1, "passes", "pass") == "passes" and word_for(7, "passes", "pass") == "pass"
    assert noun_forms("link") == ("link", "links")


# ---- issue #45: each sentence builder, flat / rising / falling, one / many -------------------------
@pytest.mark.parametrize("cone, iso, cloud, cone_verb, iso_verb", [
    ([0.41, 0.55, 0.72], [0.018, 0.019, 0.012], "bunch into a narrower cone", "rises", "falls"),
    ([0.80, 0.62, 0.50], [0.10, 0.15, 0.20], "spread into a wider cone", "falls", "rises"),
    ([0.612, 0.61, 0.608], [0.347, 0.05, 0.002], "keep the width of their cone", "stays at 0.61", "falls 170-fold"),
    ([0.30, 0.30, 0.30], [0.020, 0.020, 0.020], "keep the width of their cone", "stays at 0.30", "stays at 0.020"),
])
def test_cone_summary_verbs_follow_each_curve(cone, iso, cloud, cone_verb, iso_verb):
    text = cone_summary(cone, iso, 11)
    assert f"the 11 token vectors {cloud}: I/m {cone_verb}" in text
    assert f"IsoScore, which ignores the shared direction, {iso_verb}" in text
    assert "goes from" not in text and "stays between" not in text


def test_cone_summary_of_the_users_numbers_says_stays_and_falls():
    """Issue #45's two findings: I/m 0.61 to 0.61 under "narrower cone", IsoScore "stays between 0.002
    and 0.347" while it falls 150-fold."""
    text = cone_summary([0.6104, 0.58, 0.6071], [0.347, 0.2, 0.002], 11)
    assert "narrower" not in text and "I/m stays at 0.61 (embeddings to layer 2), between 0.58 and 0.61" in text
    assert "IsoScore, which ignores the shared direction, falls 170-fold, from 0.347 (embeddings) to 0.002" in text


def test_head_counts_agree_with_their_verbs():
    from bertgeom.analysis.tour_facts import behaviour_note, sink_summary, special_heads_note

    prev, cls, sep = np.zeros((2, 3)), np.full((2, 3), 0.1), np.full((2, 3), 0.05)
    prev[1, 2] = 0.9
    table = {"prev": prev, "cls": cls, "sep": sep}
    assert behaviour_note(table, "prev").endswith("1 of 6 heads passes 0.5")
    prev[0, 0] = 0.7
    assert behaviour_note(table, "prev").endswith("2 of 6 heads pass 0.5")
    cls[0, 1] = 0.9
    assert "and 1 of 6 heads passes 0.6; the strongest [SEP] head is **L1 H1** (0.05) and 0 of 6 heads pass 0.6" \
        in sink_summary(table)
    assert special_heads_note(table)[0].startswith("1 of 6 heads puts half or more of its attention")
    cls[1] = 0.8
    assert special_heads_note(table)[0].startswith("4 of 6 heads put half or more of their attention")


@pytest.mark.parametrize("p_after, new_call, n, words", [
    (0.12, "delta", 2, "(2 changes in the *What if?* box below): Alpha falls to 12.0% and the call becomes **Delta**"),
    (0.62, "alpha", 1, "(1 change in the *What if?* box below): Alpha falls to 62.0% and the call stays **Alpha**"),
    (0.99996, "alpha", 1, "(1 change in the *What if?* box below): Alpha stays at > 99.9% and the call stays"),
])
def test_the_tours_genome_sentence_follows_its_numbers(p_after, new_call, n, words):
    from bertgeom.sars_cov_2.variant.whatif import genome_sentence

    pick = {"change": "S:N501Y", "new_call": new_call, "n_entries": n, "n_markers": n, "p_after": p_after,
            "p_new_call": 0.8}
    text = genome_sentence({"pred": "alpha", "p": 0.99993, "logodds": 9.5, "pick": pick, "best_single": None})
    assert words in text


def test_the_tours_genome_sentence_rises_when_its_pick_raises_the_call():
    """The third direction of #45's sentence rule: a pick after which the call's probability prints higher
    "rises" and is not called the change that lowers it (it printed "lowers it most ... Alpha falls" for
    any pick that kept the call)."""
    from bertgeom.sars_cov_2.variant.whatif import genome_sentence

    pick = {"change": "S:N501Y", "new_call": "alpha", "n_entries": 1, "n_markers": 1, "p_after": 0.81,
            "p_new_call": 0.81}
    text = genome_sentence({"pred": "alpha", "p": 0.55, "logodds": 0.2, "pick": pick, "best_single": None})
    assert "the smallest that moves it most is to **S:N501Y**" in text
    assert "Alpha rises to 81.0% and the call stays **Alpha**" in text
    assert "lowers" not in text and "falls" not in text


def _cls_map(n: int = 6) -> np.ndarray:
    a = np.full((n, n), 0.02)
    a[:, 0] = 1.0
    return a / a.sum(-1, keepdims=True)


def test_map_note_counts_what_the_heads_label_says_it_does():
    from bertgeom.analysis.tour_facts import map_note

    n = 6
    cls = np.eye(n, dtype=bool)[0]
    sep = np.eye(n, dtype=bool)[-1]
    cols = {"cls": cls, "sep": sep, "punct": np.zeros(n, bool)}
    sink = _cls_map(n)
    sink[3] = np.eye(n)[3]  # one row reads itself
    # the [CLS] head of the tour's step 3: its caption counts [CLS] rows, not previous-token ones
    assert map_note(sink, "cls", **cols) == "in 5 of the 6 rows (83%) the darkest cell sits in the [CLS] column"
    ahead = np.eye(n, k=1)
    ahead[-1, -1] = 1.0
    assert map_note(ahead, "next", **cols).startswith("in 5 of the 5 rows before the last (100%) the darkest cell "
                                                      "sits just right of the diagonal, on the token after")
    back = np.eye(n, k=-1)
    back[0, 0] = 1.0
    assert map_note(back, "prev", **cols).startswith("in 5 of the 5 rows after the first (100%)")
    even = np.full((n, n), 1 / n)
    assert map_note(even, "broad", **cols) == ("no cell stands out: a row's darkest cell holds 0.17 of its attention "
                                               "on average (0.17 if spread evenly over its 6 tokens)")
    mirror = np.eye(n)
    assert map_note(mirror, "other", **cols, unit="word") == (
        "this head follows none of Clark's behaviours; its darkest cell sits most often on the diagonal, on the "
        "word itself: in 6 of the 6 rows (100%)")
    one_row = np.eye(2, k=-1)
    one_row[0, 0] = 1.0
    assert map_note(one_row, "prev", **{k: v[:2] for k, v in cols.items()}).startswith(
        "in 1 of the 1 row after the first (100%)")


def test_head_detail_caption_under_the_tours_cls_head_counts_cls_rows():
    from bertgeom.analysis.tour_facts import strongest_head
    from bertgeom.examples import example_sentences
    from bertgeom.ui.cache import cached_head_features, subject_of
    from heads_page import open_heads_page

    text = example_sentences()[0]
    head = strongest_head(cached_head_features(subject_of("minilm-l6", text)), "cls")  # tour step 3's head
    at = open_heads_page("Head detail", text_value=text, layer=head.layer, head=head.head)
    captions = [c.value for c in at.caption if c.value.startswith("In this map")]
    assert captions == [f"In this map in 13 of the 13 rows (100%) the darkest cell sits in the [CLS] column."]
    assert any("1 of 72 heads passes 0.5" in c.value for c in at.caption)  # the grid's caption, coloured by prev


def test_cone_page_shows_the_sentence_its_curves_give(monkeypatch, tmp_path):
    """The IsoScore section prints :func:`cone_summary` of the curves it draws, verbs and all (MiniLM:
    I/m rises, IsoScore falls)."""
    import streamlit as st

    from bertgeom.analysis.cone import cone_index
    from bertgeom.analysis.isotropy import hidden_state_isoscore_curve
    from bertgeom.sets.cone import rows_for
    from bertgeom.trace import run_trace
    from bertgeom.ui.cache import cached_model

    st.cache_data.clear()
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    text = "The cat sat on the mat because it was tired."
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = "minilm-l6"
    at.session_state["text_value"] = text
    at.run()
    at = at.switch_page("app_pages/cone_index.py").run()
    at.segmented_control(key="w_cone_section").set_value("isotropy").run()
    assert not at.exception
    trace = run_trace(cached_model("minilm-l6"), text)
    hs = np.asarray(trace.hidden_states, dtype=np.float64)[:, rows_for(trace.encoded, "content")]
    want = cone_summary(cone_index(hs, normalized=True), hidden_state_isoscore_curve(hs), hs.shape[1])
    shown = [m.value for m in at.markdown if m.value.startswith("Through the layers")]
    assert shown == [want]
    assert "bunch into a narrower cone: I/m rises 1.8-fold, from 0.41 (embeddings) to 0.72 (layer 6)" in want
    assert "IsoScore, which ignores the shared direction, falls" in want


# ---- issue #45: the head view's hover line ---------------------------------------------------------
def test_head_view_hover_line_counts_links_and_tokens_in_their_number(browser):
    from bertgeom.figures.headview import head_view_html

    tokens = ["[CLS]", "cat", "sat", "[SEP]"]
    a = np.zeros((2, 4, 4))
    a[0, 2, 1] = 1.0  # H1: "sat" reads "cat" only
    a[1, 1, 0] = a[1, 1, 2] = 0.5  # H2: "cat" reads [CLS] and "sat"
    page = browser.new_page()
    try:
        page.set_content(head_view_html(a, tokens, head_names=["H1", "H2"]))

        def hover(side: str, i: int) -> str:
            page.locator(f'g.token[data-side="{side}"][data-i="{i}"]').hover()
            return page.locator("#status").inner_text()

        assert hover("q", 2) == "\u201csat\u201d looks at 1 token (1 link from the ticked heads)"
        assert hover("q", 1) == "\u201ccat\u201d looks at 2 tokens (2 links from the ticked heads)"
        assert hover("k", 1) == "1 token looks at \u201ccat\u201d (1 link from the ticked heads)"
        assert hover("q", 0) == "\u201c[CLS]\u201d has no link of weight \u2265 0.02 in the ticked heads"
        assert hover("k", 3) == "No token looks at \u201c[SEP]\u201d with weight \u2265 0.02 in the ticked heads"
    finally:
        page.close()


# ---- issue #45: the share link says how its input came in ------------------------------------------
def test_share_notes_say_pasted_or_uploaded_and_how_many():
    from bertgeom.inputs import INPUT_KINDS
    from bertgeom.ui.state import missing_input_note, share_query

    genome = INPUT_KINDS["spike"]
    q, note = share_query("classifier", "sars-cov-2-variant", 0, 0, input_kind="spike", text=">a\nACGT\n>b\nACGT",
                          origin=("upload", 20))
    assert (q["input"], q["source"], q["records"]) == ("missing", "upload", "20")
    assert note == "The uploaded file's 20 genomes are not among the examples, so the link does not hold them: send " \
                   "the file along."
    _, note = share_query("classifier", "sars-cov-2-variant", 0, 0, input_kind="spike", text=">a\nACGT",
                          origin=("paste", 1))
    assert note == "This genome is not one of the examples, so the link does not hold it: send the FASTA along."
    _, note = share_query("classifier", "sars-cov-2-variant", 0, 0, input_kind="spike", text=">a\nA\n>b\nC\n>c\nG",
                          origin=("paste", 3))
    assert note.startswith("These 3 genomes are not among the examples, so the link does not hold them")
    assert missing_input_note(genome, "upload", 20) == ("The shared link was made on an uploaded file of 20 genomes, "
                                                        "which a link cannot carry: upload the file to see the view it "
                                                        "shows.")
    assert "made on an uploaded genome," in missing_input_note(genome, "upload", 1)
    assert "made on a pasted genome," in missing_input_note(genome, "paste", 1)
    assert "made on 3 genomes pasted into the box" in missing_input_note(genome, "paste", 3)
    old = missing_input_note(genome, None, None)  # a link made before links said how: nothing guessed
    assert "pasted" not in old and "uploaded" not in old


def test_a_batch_upload_shares_a_link_that_says_it_was_an_uploaded_file(tiny_variant_dir, monkeypatch):
    from bertgeom.sars_cov_2.variant.spec import demo_genomes
    from bertgeom.ui.state import uploaded_key, widget_key
    from bertgeom.inputs import INPUT_KINDS

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    batch = "\n".join(g["text"].strip() for g in demo_genomes()[3:6])  # three records, as one uploaded file
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = batch
    at.session_state[uploaded_key(INPUT_KINDS["spike"])] = hash(batch)  # what the uploader's callback keeps
    assert widget_key(INPUT_KINDS["spike"]) == "w_genome"
    at.run()
    at = at.switch_page(HEADS).run()
    assert not at.exception
    link = parse_qs(urlsplit(at.sidebar.code[0].value).query)
    assert link["input"] == ["missing"] and link["source"] == ["upload"] and link["records"] == ["3"]
    notes = [c.value for c in at.sidebar.caption]
    assert any("The uploaded file's 3 genomes are not among the examples" in c for c in notes), notes
    # the receiver's sidebar says the same
    back = AppTest.from_file(APP, default_timeout=600)
    for k, v in link.items():
        back.query_params[k] = v[0]
    back.run()
    back = back.switch_page(HEADS).run()
    assert any("made on an uploaded file of 3 genomes" in w.value for w in back.sidebar.warning)
    assert not any("pasted" in w.value for w in back.sidebar.warning)


# ---- issue #45: Compare checkpoints promises only what this server has ------------------------------
def test_compare_checkpoints_without_a_partner_names_no_other_model():
    from heads_page import open_heads_page

    at = open_heads_page("Compare checkpoints", model_id="tiny-random")
    info = " ".join(i.value for i in at.info)
    assert re.search(r"none of the \d+ other installed checkpoints has this model's shape \(this model: 2 layers × 4 "
                     r"heads, hidden \d+\)", info), info
    assert "once the variant model is installed" not in info
    assert "MiniLM" not in info and "SARS-CoV-2" not in info and "variant" not in info


# ---- issue #45: numbers ----------------------------------------------------------------------------
@pytest.mark.parametrize("fixture", ["tiny_bert", "minilm"])
def test_k90_share_counts_the_tokens_k90_counts_and_never_exceeds_1(fixture, request):
    from bertgeom.analysis.heads import head_features
    from bertgeom.trace import run_trace

    loaded = request.getfixturevalue(fixture)
    for text in ("The cat sat on the mat because it was tired.", "Dogs bark."):
        trace = run_trace(loaded, text)
        table = head_features(trace.attentions, trace.encoded)
        T = trace.attentions.shape[-1]  # every real key a row's k90 counts among, [CLS] and [SEP] included
        np.testing.assert_allclose(table["k90_frac"], table["k90_median"] / T)
        assert table["k90_frac"].max() <= 1.0


def test_a_deleted_residue_is_carried_only_by_classes_with_the_same_deletion():
    from bertgeom.sars_cov_2.genome.fasta import parse_sequences
    from bertgeom.sars_cov_2.genome.mutations import same_deletion
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence, carried_by, mutation_table
    from bertgeom.sars_cov_2.variant.spec import demo_genomes

    beta = next(g for g in demo_genomes() if g["class"] == "beta")
    analysis = analyse_sequence(parse_sequences(beta["text"])[0])
    rows = {r["mutation"]: r for r in mutation_table(analysis) if r["gene"] == "S"}
    assert rows["A243-"]["nucleotides"] == "22283-22291"  # Beta's 9-base deletion
    assert rows["A243-"]["carried by"] == ("beta",)  # not GH / pre-VOC, whose 21E deletes 22289-22294
    event = next(e for e in analysis.mutations.genes["S"].events if e.name == "A243-")
    assert carried_by(event.qualified, event.nuc) == ("beta",)
    assert carried_by("S:A243-", ["22289-22294"]) == ("gh",)  # 21E's own deletion
    assert set(carried_by("S:A243-")) >= {"gh", "beta"}  # a bare name knows no event: every deletion of A243
    assert event.qualified == "S:A243-" and hash(event.qualified) == hash("S:A243-")
    # one event placed at either end of a repeat (the characteristic table's 22281-22289) is the same deletion
    assert same_deletion("22281-22289", "22283-22291") and not same_deletion("22289-22294", "22283-22291")
    assert not same_deletion("22281-22289", "22289-22297")


def test_the_qc_score_reads_the_same_in_the_batch_table_and_the_genome_views_verdicts(tiny_variant):
    """Item 5 of #45: the batch table said 11.6 where the genome view said 12. The genome view's table of
    three verdicts still printed the score with no decimal ("good, 2" under Lambda's 1.6) after the batch
    table and the score's heading moved to one decimal."""
    from bertgeom.inputs import encode_input
    from bertgeom.sars_cov_2.genome.fasta import parse_sequences
    from bertgeom.sars_cov_2.variant.predict import classify_stream
    from bertgeom.sars_cov_2.variant.result import batch_table, qc_score_shown, qc_verdicts
    from bertgeom.sars_cov_2.variant.spec import demo_genomes

    lam = next(g for g in demo_genomes() if g["class"] == "lambda")
    analysis = genome_analysis(encode_input(tiny_variant, lam["text"]))
    score = analysis.qc_score.score
    assert score != round(score)  # a score with a fraction: where a rounded copy differs
    rows = [p.row(tiny_variant.labels, tiny_variant.weights_hash)
            for p in classify_stream(tiny_variant, parse_sequences(lam["text"], tolerant=True))]
    in_batch = batch_table(rows)["QC score"][0]
    verdict = {r["check"]: r["verdict"] for r in qc_verdicts(analysis)}["QC score (Nextclade-like)"]
    assert in_batch == qc_score_shown(score)
    assert verdict.endswith(f"({analysis.qc_score.status}, {in_batch:.1f})"), (verdict, in_batch)
