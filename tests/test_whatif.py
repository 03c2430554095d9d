"""The marker-change search scores every candidate with the model: the probabilities it reports are
those of a forward pass on the changed spike, and the tour's pick really changes the call when one does."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from bertgeom.sars_cov_2.genome.markers import load_marker_table, marker_state
from bertgeom.inputs import encode_input
from bertgeom.sars_cov_2.variant import genome_analysis
from bertgeom.sars_cov_2.variant.spec import demo_genomes
from bertgeom.sars_cov_2.variant.explain import SpikeChange, apply_changes, probabilities_for_spike
from bertgeom.probabilities import class_log_odds, class_probabilities
from bertgeom.sars_cov_2.variant.predict import logits_for_ids
from bertgeom.sars_cov_2.variant.whatif import (
    _apply,
    box_entries,
    candidate_changes,
    genome_sentence,
    parse_what_if,
    rank_changes,
    search_aliases,
    tour_change,
)


@pytest.fixture(scope="module")
def omicron(tiny_variant):
    enc = encode_input(tiny_variant, demo_genomes()[7]["text"])
    return genome_analysis(enc).spike.aligned


def test_a_genome_input_carries_its_analysis_and_domains_as_typed_fields(tiny_variant):
    from bertgeom.sars_cov_2.genome.pipeline import GenomeAnalysis
    from bertgeom.inputs import EncodedInput

    enc = encode_input(tiny_variant, demo_genomes()[7]["text"])
    assert isinstance(genome_analysis(enc), GenomeAnalysis) and genome_analysis(enc) is enc.annotation
    assert len(enc.domains) == enc.n_tokens and "RBD" in enc.domains and enc.domains[0] == ""
    text = EncodedInput("a", np.arange(3), ["[CLS]", "a", "[SEP]"], np.zeros((3, 2), int), "char",
                        np.eye(3, dtype=bool)[0], np.eye(3, dtype=bool)[2], np.zeros(3, bool))
    with pytest.raises(TypeError, match="not a genome"):
        genome_analysis(text)


def test_candidates_cover_every_carried_marker(omicron):
    table = load_marker_table()
    carried = [m for m in table.of("omicron", role=None) if m.kind in ("sub", "del")
               and marker_state(m, omicron) == "present"]
    cands = candidate_changes(omicron, "omicron", table)
    singles = [c for c in cands if c.revert and len(c.markers) == 1]
    assert len(singles) == len(carried) > 5
    assert any(not c.revert for c in cands) and any(c.label.startswith("revert all") for c in cands)
    assert any(" in RBD " in c.label for c in cands)


def test_reported_probabilities_are_the_models(tiny_variant, omicron):
    rows = rank_changes(tiny_variant, omicron, "omicron")
    assert all(round(a["drop"], 4) >= round(b["drop"], 4) for a, b in zip(rows, rows[1:]))
    labels = list(tiny_variant.labels)
    base = probabilities_for_spike(tiny_variant, omicron)
    top = rows[0]
    assert top["p_before"] == pytest.approx(base[labels.index("omicron")], abs=1e-5)
    typed, n, problems = parse_what_if(top["nucleotides"])
    assert not problems and n == top["n_entries"]
    changed = apply_changes(omicron, typed)
    after = probabilities_for_spike(tiny_variant, changed)
    assert top["p_after"] == pytest.approx(after[labels.index("omicron")], abs=1e-5)
    assert top["new_call"] == labels[int(np.argmax(after))]
    pick = tour_change(rows, "omicron")
    flips = [r for r in rows if r["new_call"] != "omicron"]
    assert pick is (min(flips, key=lambda r: (r["n_markers"], -r["drop"])) if flips else rows[0])


@functools.lru_cache(maxsize=1)
def _table_at_70():
    from bertgeom.sars_cov_2.genome.markers import MarkerTable, build_characteristic_table

    return MarkerTable(tuple(build_characteristic_table(min_share=0.7)))


def test_every_candidate_typed_into_the_box_gives_the_spike_the_search_scored(omicron):
    """The tour fills the What if? box with a candidate's entries: each must be one the box reads
    (the tour once filled '22577GG', which the box rejected), one per marker, and reproduce the
    exact spike the search scored."""
    # a table that holds a codon-level run (G339H = 22577GG): built at 70 %, since G339H is carried by 73 %
    # of Omicron's training genomes, under the shipped table's 75 %
    cands = candidate_changes(omicron, "omicron", table=_table_at_70())
    assert any(len(m.ref) > 1 and m.kind == "sub" for c in cands for m in c.markers)  # a run such as 22577GG
    for c in cands:
        scored = _apply(omicron, c)
        if scored is None:
            continue
        entries = box_entries(omicron, c)
        changes, n, problems = parse_what_if(" ".join(entries))
        assert problems == [] and n == len(entries) == len(c.markers), c.label
        assert apply_changes(omicron, changes) == scored, c.label


def test_the_box_reads_bertgeom_and_nextclade_forms():
    one = [SpikeChange(23063, "T")]
    assert parse_what_if("A23063T")[0] == one and parse_what_if("23063t")[0] == one
    dels = [SpikeChange(p, "-") for p in range(21765, 21771)]
    assert parse_what_if("del21765-21770")[0] == dels == parse_what_if("21765-21770")[0]
    assert parse_what_if("21765-")[0] == [SpikeChange(21765, "-")] == parse_what_if("del21765")[0]
    assert parse_what_if("22577GG")[0] == [SpikeChange(22577, "G"), SpikeChange(22578, "G")]
    changes, n, problems = parse_what_if("A23063T, nonsense 21765 T23063A 1000A")
    assert changes == one and n == 1 and len(problems) == 4  # the good entry counts, each bad one is named
    assert all(p.startswith("'") for p in problems) and "reference at 23063 reads A" in problems[2]


def test_search_finds_a_mutation_in_either_form():
    assert search_aliases("S:del69-70") == ["S:H69-", "S:V70-"]
    assert search_aliases("del69-70") == ["H69-", "V70-"]
    assert search_aliases("S:H69-") == ["S:del69"]
    assert search_aliases("del21765-21770") == ["21765-21770"] and search_aliases("21765-21770") == ["del21765-21770"]
    assert search_aliases("S:ins214EPE") == ["S:214:EPE"] and search_aliases("S:214:EPE") == ["S:ins214EPE"]
    assert search_aliases("N501Y") == []


def test_rows_are_calibrated_and_carry_log_odds(tiny_variant, omicron):
    import dataclasses

    hot = dataclasses.replace(tiny_variant, extra={**tiny_variant.extra, "temperature": 0.25})
    rows = rank_changes(hot, omicron, "omicron")
    target = list(hot.labels).index("omicron")
    ids = hot.tokenizer.encode(omicron, max_length=None)[0][None, :]
    logits = logits_for_ids(hot, ids)
    p = class_probabilities(hot, logits)[0, target]
    assert rows[0]["p_before"] == pytest.approx(p, abs=1e-6)
    assert rows[0]["p_before"] != pytest.approx(float(np.exp(logits[0, target]) / np.exp(logits[0]).sum()), abs=1e-4)
    lo = class_log_odds(hot, logits)[0, target]
    assert rows[0]["logodds_before"] == pytest.approx(lo) and lo == pytest.approx(np.log(p / (1 - p)), abs=1e-3)


def test_log_odds_move_where_the_probability_shows_no_change(tiny_variant):
    import dataclasses

    hot = dataclasses.replace(tiny_variant, extra={**tiny_variant.extra, "temperature": 1.0})
    logits = np.array([[20.0, 0.0, 0.0], [21.0, 0.0, 0.0]])
    p = class_probabilities(hot, logits)[:, 0]
    assert round(float(p[0]), 4) == round(float(p[1]), 4) == 1.0
    lo = class_log_odds(hot, logits)[:, 0]
    assert lo[1] - lo[0] == pytest.approx(1.0, abs=1e-6)


def test_genome_sentence_names_the_box_count_and_page_probabilities():
    facts = {"pred": "omicron", "p": 0.99996, "logodds": 10.1, "n": 39,
             "pick": {"change": "revert all 29 Omicron markers", "n_markers": 29, "n_entries": 29, "p_after": 8e-6,
                      "new_call": "gh", "p_new_call": 0.99995, "nucleotides": ""},
             "best_single": {"change": "revert N501Y", "logodds_before": 10.1, "logodds_after": 9.95,
                             "p_after": 0.99995}}
    text = genome_sentence(facts)
    assert "(> 99.9%, log-odds 10.10)" in text and "(29 changes in the *What if?* box below)" in text
    assert "falls to < 0.1%" in text and "**revert N501Y**, and watch" in text
    # only numbers the classifier page prints: not the 39 candidates nor the single marker's own log-odds
    assert "39" not in text and "9.95" not in text


def test_readme_tour_sentence_is_the_shipped_models():
    """The guide's tour sentence is computed (``python -m bertgeom tour --update docs/guide.md``), never
    typed: it must equal what the shipped model gives now."""
    from pathlib import Path

    from bertgeom.sars_cov_2.variant.cli import TOUR_BEGIN, TOUR_END, replace_tour_block, tour_genome_sentence
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    readme = (Path(__file__).resolve().parent.parent / "docs" / "guide.md").read_text()
    block = readme.split(TOUR_BEGIN, 1)[1].split(TOUR_END, 1)[0].strip()
    sentence = tour_genome_sentence()
    assert block == sentence, "run: python -m bertgeom tour --update docs/guide.md"
    assert replace_tour_block(readme, sentence) == readme
