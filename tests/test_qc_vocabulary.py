"""One QC vocabulary (issue 47): every verdict is pass / warn / fail, and the QC score's status is
Nextclade's word (good / mediocre / bad) for the verdict it maps to."""

from __future__ import annotations

import pytest

from bertgeom.sars_cov_2.genome.qc import (NEXTCLADE_STATUS, QC_BAD, QC_GOOD, VERDICT_OF_STATUS, VERDICTS, qc_status,
                                           score_verdict, worst)


@pytest.mark.parametrize("score, verdict, status", [
    (0.0, "pass", "good"), (QC_GOOD - 1e-9, "pass", "good"), (QC_GOOD, "warn", "mediocre"),
    (QC_BAD - 1e-9, "warn", "mediocre"), (QC_BAD, "fail", "bad"), (1e6, "fail", "bad"),
])
def test_a_score_has_one_verdict_and_nextclade_s_word_for_it(score, verdict, status):
    assert score_verdict(score) == verdict and qc_status(score) == status
    assert VERDICT_OF_STATUS[qc_status(score)] == verdict


def test_the_mapping_is_one_to_one_and_ordered():
    assert tuple(NEXTCLADE_STATUS) == VERDICTS == ("pass", "warn", "fail")
    assert tuple(NEXTCLADE_STATUS.values()) == ("good", "mediocre", "bad")
    assert worst(["pass", "fail", "warn"]) == "fail" and worst(["warn", "pass"]) == "warn" and worst([]) == "pass"


def test_the_side_by_side_table_speaks_the_one_vocabulary(tiny_variant):
    from bertgeom.inputs import encode_input
    from bertgeom.sars_cov_2.variant.result import qc_verdicts
    from bertgeom.sars_cov_2.variant.spec import demo_genomes

    from bertgeom.sars_cov_2.variant import genome_analysis

    analysis = genome_analysis(encode_input(tiny_variant, demo_genomes()[7]["text"]))
    rows = {r["check"]: r["verdict"] for r in qc_verdicts(analysis)}
    score = analysis.qc_score
    assert rows["QC score (Nextclade-like)"] == f"{VERDICT_OF_STATUS[score.status]} ({score.status}, {score.score:.1f})"
    assert all(v.split(" ")[0] in (*VERDICTS, "partial") for v in rows.values())
