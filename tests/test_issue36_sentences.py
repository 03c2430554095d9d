"""Sentences true for the model and input on screen, and the smaller display fixes of issue #36:
the IsoScore note follows n and d, English text in the genome box is called text, the batch table
writes probabilities as every screen does, the Model view frame leaves the [CLS] stripe visible,
legends tell their two kinds of "no ..." apart, the head view says it scrolls, and the three QC
verdicts are set side by side."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.tour_facts import cone_summary, isoscore_rank_note
from bertgeom.sars_cov_2.variant import genome_analysis


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
