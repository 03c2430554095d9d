"""What the Variant Classifier reports for a genome, as data: the Nextclade-style mutation table,
the characteristic mutations present and missing, and the rule-based second opinion (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
from bertgeom.sars_cov_2.genome.markers import load_marker_table
from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
from bertgeom.sars_cov_2.variant.result import defining_flag, mutation_rows, second_opinion

#: Known spike changes of each demo genome's clade (Nextstrain naming), which the table must show.
KNOWN = {
    "alpha": {"H69-", "V70-", "Y144-", "N501Y", "A570D", "D614G", "P681H", "T716I", "S982A", "D1118H"},
    "beta": {"D80A", "D215G", "K417N", "E484K", "N501Y", "D614G", "A701V"},
    "gamma": {"L18F", "T20N", "P26S", "D138Y", "R190S", "K417T", "E484K", "N501Y", "D614G", "H655Y", "T1027I",
              "V1176F"},
    "delta": {"T19R", "E156G", "F157-", "R158-", "L452R", "T478K", "D614G", "P681R", "D950N"},
    "lambda": {"G75V", "T76I", "L452Q", "F490S", "D614G", "T859N"},
    "mu": {"T95I", "Y144S", "Y145N", "R346K", "E484K", "N501Y", "D614G", "P681H", "D950N"},
}


@pytest.fixture(scope="module")
def demo():
    return {meta["class"]: analyse_sequence(rec.sequence) for rec, meta in load_demo_genomes()}


@pytest.mark.parametrize("cls", sorted(KNOWN))
def test_the_mutation_table_of_each_demo_genome_shows_its_clade_mutations_marked(demo, cls):
    rows, missing = mutation_rows(demo[cls], cls)
    names = {r["mutation"].removeprefix("S:") for r in rows}  # the table writes Nextclade's S:N501Y
    assert KNOWN[cls] <= names, KNOWN[cls] - names
    flag = defining_flag(cls)
    marked = {r["mutation"].removeprefix("S:") for r in rows if r[flag] == "yes"}
    assert KNOWN[cls] - {"D614G"} <= marked | {"D614G"}
    assert not [m for m in missing if "reference" in m]  # nothing characteristic is truly absent
    assert all(r["domain"] and "no domain" not in r["domain"] for r in rows)
    assert all(r["mutation"].startswith("S:") and not r["mutation"].startswith(("S:del", "S:ins")) for r in rows)


def test_an_omicron_genome_lists_its_markers_and_the_gaps_of_another_class(demo):
    rows, missing = mutation_rows(demo["omicron"], "omicron", rule_call="delta")
    assert {"S:G142D", "S:K417N", "S:N501Y"} <= {r["mutation"] for r in rows}
    assert any("Delta" in m and "L452R" in m for m in missing)  # what Delta would need and lacks


def test_the_second_opinion_warns_when_the_calls_disagree(demo):
    table = load_marker_table()
    a = demo["gamma"]
    agree = second_opinion(a, "gamma", 0.99)
    assert agree.agrees and agree.call == "gamma" and not agree.warning
    assert agree.matched == agree.expected == len(table.of("gamma"))
    # a BERT that was fooled by one injected Lambda marker would call lambda: the page must warn
    fooled = second_opinion(a, "lambda", 0.98)
    assert not fooled.agrees and "disagree" in fooled.warning and CLASS_DISPLAY["gamma"] in fooled.warning
    unsure = second_opinion(a, "gamma", 0.6, min_confidence=0.9)
    assert unsure.agrees and "unsure" in unsure.warning


def test_private_rows_are_exactly_what_the_qc_counts(demo):
    """One word, one count: the rows marked private (against the nearest clade's profile) are the
    spike card's private list and the QC score's private count, gene by gene."""
    from bertgeom.sars_cov_2.variant.result import private_column

    for cls, a in demo.items():
        rows, _ = mutation_rows(a, cls)
        col = private_column(a)
        marked = [r["mutation"].removeprefix("S:") for r in rows if r[col] == "yes"]
        assert marked == a.qc.private, cls
        every = sum(r[private_column(a)] == "yes" for g in a.genes + ["nuc"] for r in mutation_rows(a, cls, gene=g)[0])
        assert every == len(a.private.rows), cls  # rows holding a private nucleotide
        assert a.qc_score.rules["private mutations"].count == len(a.private.private), cls  # counted on nucleotides
        assert np.mean([r[col] == "yes" for r in rows]) < 0.5


def test_a_shown_probability_is_never_rounded_to_certainty():
    from bertgeom.figures.base import probability_label

    assert probability_label(0.99971) == "> 99.9%" and probability_label(1.0) == "100.0%"
    assert probability_label(0.9994) == "99.9%" and probability_label(0.5) == "50.0%"
    assert probability_label(0.0002) == "< 0.1%" and probability_label(0.0) == "0.0%"


def test_the_genome_track_sorts_every_change_against_the_nearest_node(demo):
    """Each nucleotide change lands in one row of the genome track (private or on the node's path, as
    the tables' private column says), each reversion in its own row, and what is not read is grey."""
    from bertgeom.sars_cov_2.variant.figures import genome_track
    from bertgeom.sars_cov_2.variant.result import genome_marks

    for cls, a in demo.items():
        m = genome_marks(a)
        private, path = m["marks"]["private"], m["marks"]["on the node's path"]
        assert len(private) + len(path) == len(a.mutations.nucleotide), cls
        assert {lab.split(" ")[0] for _,
                lab in private} == set(a.private.private) & {n.name for n in a.mutations.nucleotide}
        assert len(m["marks"]["reversion"]) == len(a.placement.private.reversions), cls
        n_unread = sum(b - a_ + 1 for a_, b in m["unread"])
        assert n_unread == a.alignment.aligned.count("N") + sum(a.alignment.aligned.count(c) for c in "RYSWKMBDHV")
        assert not m["bands"]  # no demo genome is a recombinant
        fig = genome_track(**m)
        assert [tr.name.split(" (")[0] for tr in fig.data[1:]] == ["private", "reversion", "on the node's path"]
