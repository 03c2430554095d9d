"""Share links (#14 item 5): a full URL with page, model, layer, head, colour-by, θ and the input,
read back by a fresh session; a link without its input says so instead of showing another one."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, urlsplit

import numpy as np
from streamlit.testing.v1 import AppTest

from bertgeom.examples import example_sentences
from bertgeom.figures.heads import default_theta
from bertgeom.ui.state import LINK_TEXT_MAX, share_query, share_url

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def _open_link(url: str, page: str = "app_pages/attention_heads.py") -> AppTest:
    """A fresh session opened on ``url``'s query, then on ``page`` (what ?view= does in a browser)."""
    at = AppTest.from_file(APP, default_timeout=600)
    for k, v in parse_qsl(urlsplit(url).query):
        at.query_params[k] = v
    at.run()
    return at.switch_page(page).run()


def test_share_url_is_absolute_at_the_apps_root():
    q = {"view": "heads", "model": "minilm-l6"}
    assert share_url(q, "http://example.org:8501/heads?x=1") == "http://example.org:8501/?view=heads&model=minilm-l6"
    assert share_url(q, "https://h.org/app/heads").startswith("https://h.org/app/?view=heads")
    assert share_url(q, None) == "/?view=heads&model=minilm-l6"


def test_share_query_carries_examples_short_text_or_says_the_input_is_missing():
    s = example_sentences()
    q, note = share_query("heads", "minilm-l6", 2, 9, input_kind="text", text=s[1], colour="sep", theta=0.25)
    assert q == {"view": "heads", "model": "minilm-l6", "layer": "3", "head": "10", "colour": "sep",
                 "theta": "0.25", "example": "2"} and note is None
    q, note = share_query("heads", "minilm-l6", 0, 0, input_kind="text", text="A dog barked.")
    assert q["text"] == "A dog barked." and note is None
    q, note = share_query("heads", "minilm-l6", 0, 0, input_kind="text", text="x" * (LINK_TEXT_MAX + 1))
    assert q["input"] == "missing" and "text" not in q and str(LINK_TEXT_MAX) in note
    q, note = share_query("heads", "sars-cov-2-variant", 0, 0, input_kind="spike", text=">mine\nACGT")
    assert q["input"] == "missing" and "FASTA" in note


def test_link_round_trip_restores_every_field():
    typed = "My dog chased the ball across the park."
    q, _ = share_query("heads", "minilm-l6", 3, 10, input_kind="text", text=typed, colour="cls",
                       theta=0.17)
    at = _open_link(share_url(q, "http://localhost:8501/heads"))
    assert not at.exception
    ss = at.session_state
    assert (ss["model_id"], ss["layer"], ss["head"]) == ("minilm-l6", 3, 10)
    assert ss["text_value"] == typed
    assert ss["w_feature"] == "cls" and at.selectbox(key="w_feature").value == "cls"
    assert at.slider(key="w_theta").value == 0.17
    # the link the receiver's sidebar offers is the same view again, with the tab it opened on
    code = [c.value for c in at.sidebar.code]
    assert code and parse_qsl(urlsplit(code[0]).query) == list(q.items()) + [("heads_tab", "Head detail")]


def test_example_and_missing_inputs_in_a_link():
    s = example_sentences()
    at = _open_link("http://h/?view=heads&model=minilm-l6&example=3")
    assert not at.exception and at.session_state["text_value"] == s[2]
    at = _open_link("http://h/?view=heads&model=minilm-l6&input=missing")
    assert not at.exception
    assert any("did not carry its input" in w.value for w in at.sidebar.warning)
    at = _open_link("http://h/?view=heads&model=minilm-l6&example=999")
    assert any("does not have" in w.value for w in at.sidebar.warning)


def test_default_theta_never_blanks_a_long_input():
    rng = np.random.default_rng(0)
    short = rng.dirichlet(np.full(12, 0.1), size=(2, 2, 12))  # peaked rows of a short sentence
    assert default_theta(short) == 0.3
    long = rng.dirichlet(np.ones(427), size=(2, 2, 427))  # spread rows of a spike genome
    theta = default_theta(long)
    assert 0.01 <= theta < 0.3
    assert (long >= theta).mean() >= 0.01 - 1e-9  # at least 1% of the weights stay visible
    # heads that attend locally (ModernBERT's local layers) hold larger weights than global ones: θ stays at
    # or below every head's largest weight, so no head's map opens blank
    uniform = np.full((2, 4, 15, 15), 1 / 15)  # a global layer of a random model: 0.067 everywhere
    local = np.zeros((1, 4, 15, 15))
    for i in range(15):
        keys = slice(max(0, i - 2), i + 3)
        local[0, :, i, keys] = 1 / len(range(15)[keys])
    both = np.concatenate([uniform, local])
    theta = default_theta(both)
    assert theta == 0.06 and all((both[l, h] >= theta).any() for l in range(3) for h in range(4))


def test_a_link_made_on_the_flow_tab_reopens_it_with_its_settings():
    at = _open_link("http://h/?view=heads&model=minilm-l6&layer=2&head=1&example=1&heads_tab=Attention+flow&w_flow_r=0.8")
    assert not at.exception
    assert at.session_state["heads_tab"] == "Attention flow"
    assert at.slider(key="w_flow_r").value == 0.8  # the tab ran (lazy tabs: only the open one draws)
    link = parse_qs(urlsplit(at.sidebar.code[0].value).query)
    assert link["heads_tab"] == ["Attention flow"] and link["w_flow_r"] == ["0.8"] and link["example"] == ["1"]
