"""Teaching claims computed from the model on screen (bertgeom.analysis.tour_facts) and the home tour."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from bertgeom.analysis.tour_facts import sink_summary, strongest_head, tour_facts
from bertgeom.analysis.heads import head_features
from bertgeom.tokens import TokenKinds
from bertgeom.trace import run_trace

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SENTENCE = "The cat sat on the mat because it was tired."


def _table(loaded, text=SENTENCE):
    t = run_trace(loaded, text)
    e = t.encoded
    return head_features(t.attentions, TokenKinds(is_cls=e.is_cls, is_sep=e.is_sep, is_punct=e.is_punct)), t


class _Table(dict):
    """A feature table built by hand: ``[L, H]`` arrays by name."""


def test_strongest_head_is_the_argmax_and_counts_heads_past_the_threshold():
    prev = np.zeros((3, 4))
    prev[2, 1], prev[0, 3], prev[1, 0] = 0.9, 0.55, 0.4
    f = strongest_head(_Table(prev=prev), "prev")
    assert (f.layer, f.head, f.label) == (2, 1, "L3 H2")
    assert f.value == 0.9 and f.threshold == 0.5 and f.n_above == 2 and f.n_heads == 12


def test_sink_summary_says_cls_when_no_head_parks_on_sep():
    cls, sep = np.full((2, 2), 0.1), np.full((2, 2), 0.05)
    cls[1, 0], sep[0, 1] = 0.8, 0.16
    text = sink_summary(_Table(cls=cls, sep=sep))
    assert "**L2 H1** (0.80" in text and "**L1 H2** (0.16)" in text
    # each count agrees with its verb: one head passes, no heads pass (issue #45)
    assert "1 of 4 heads passes 0.6" in text and "0 of 4 heads pass 0.6" in text
    assert "resting place is **[CLS]**" in text
    sep[0, 1] = 0.9
    assert "As Clark et al." in sink_summary(_Table(cls=cls, sep=sep))


def test_minilm_claims_are_true_of_minilm(minilm):
    """MiniLM parks on [CLS], not [SEP]: the tour must say so and name heads that exist."""
    table, trace = _table(minilm)
    facts = tour_facts(table)
    L, H = trace.num_layers, trace.num_heads
    for name in re.findall(r"L(\d+) H(\d+)", " ".join(facts.values())):
        assert 1 <= int(name[0]) <= L and 1 <= int(name[1]) <= H
    layer, head = map(int, facts["prev_head"].split(","))
    assert table["prev"][layer, head] == table["prev"].max()
    assert f"{table['prev'][layer, head]:.2f}" in facts["prev"]
    assert (table["sep"] > 0.6).sum() == 0  # the audit's finding, checked on the real model
    assert "resting place is **[CLS]**" in facts["sink"]
    assert "many middle-layer heads" not in " ".join(facts.values())


def test_home_opens_with_the_guided_tour():
    """The teachers' tour is the guided tour on the front (bertgeom.ui.tour): its steps are listed on
    Home, and each step's sentence is computed from the view it opens (browser test: test_e2e_browser)."""
    at = AppTest.from_file(APP, default_timeout=600).run()
    assert not at.exception
    titles = [m.value for m in at.markdown if m.value.startswith("### A guided tour in")]
    assert titles and any("A head that reads the previous word" in m.value for m in at.markdown)
    assert any(b.label == "Start the tour" for b in at.button)
