"""A new model family gets every page: the toy letters family (tests/toy_family.py) is registered
explicitly, and each page of the app opens on it without an error, its two token domains shown
where the pages show domains. No generic module knows the family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import toy_family as toy

APP = str(Path(__file__).resolve().parent.parent / "app.py")
WORD = "wxyzzyxwwxyz"


@pytest.fixture(autouse=True)
def _toy_registered(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "bertgeom_cache"))
    toy.register()
    yield
    toy.unregister()


def _open(page: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = toy.MODEL_ID
    at.session_state["letters_value"] = WORD
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _specs(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_the_family_is_read_by_the_library():
    from bertgeom import load_model, trace
    from bertgeom.inputs import input_kind_of

    loaded = load_model(toy.MODEL_ID)
    assert input_kind_of(loaded) is toy.LETTERS
    tr = trace(loaded, WORD)
    assert tr.tokens[0] == "[CLS]" and tr.tokens[-1] == "[SEP]" and len(tr.tokens) == len(WORD) + 2
    assert tr.predicted in toy.CLASSES
    assert set(tr.encoded.domains) == {"", "head", "tail"}
    q = tr["q", 1]
    assert q.shape == (2, len(tr.tokens), 8)
    feats = tr.head_features()
    assert feats["entropy"].shape == (2, 2)


def test_token_domains_and_the_plugin_annotation_are_typed_fields_of_the_encoding():
    """A kind's token domains travel as ``EncodedInput.domains`` (one per token, checked), and what a
    plug-in learned while reading an input as its opaque ``annotation``: no magic keys."""
    import dataclasses

    import numpy as np
    from bertgeom import load_model
    from bertgeom.inputs import EncodedInput, encode_input

    enc = encode_input(load_model(toy.MODEL_ID), WORD)
    assert isinstance(enc.domains, tuple) and len(enc.domains) == enc.n_tokens
    assert enc.domains[0] == enc.domains[-1] == "" and enc.annotation is None
    assert "extra" not in {f.name for f in dataclasses.fields(EncodedInput)}
    with pytest.raises(ValueError, match="3 token domains for 4 tokens"):
        EncodedInput("ab", np.arange(4), ["[CLS]", "a", "b", "[SEP]"], np.zeros((4, 2), int), "letter",
                     np.zeros(4, bool), np.zeros(4, bool), np.zeros(4, bool), domains=("", "head", ""))


def test_the_sidebar_offers_its_input_box_and_examples():
    at = _open("app_pages/attention_heads.py")
    box = at.sidebar.text_area(key="w_letters")
    assert box.label == "Letters (w, x, y, z)" and box.value == WORD
    assert at.sidebar.selectbox(key="w_letters_example").options[0] == "— pick an example word —"


@pytest.mark.parametrize("tab", ["Head detail", "Over a set of inputs", "Head similarity", "Attention flow",
                                 "Compare two inputs", "Disable heads", "Gradient importance"])
def test_every_attention_heads_tab_opens(tab):
    at = _open("app_pages/attention_heads.py", heads_tab=tab)
    assert not at.error, [e.value for e in at.error]
    # above every tab: the head grid and the selected head's feature vector; the tab draws its own below
    assert len(_specs(at)) > 2, f"the tab {tab!r} drew no chart of its own"


def test_the_all_heads_tab_labels_every_head():
    at = _open("app_pages/attention_heads.py", heads_tab="All heads")
    assert not at.error and len(at.dataframe[0].value) == 2 * 2  # 2 layers x 2 heads


def test_the_domain_views_show_its_two_domains():
    at = _open("app_pages/attention_heads.py", heads_tab="Over a set of inputs", w_set_view="Domain proportions")
    dom = at.selectbox(key="w_dom")
    assert dom.label == "Half of the word"
    assert dom.options == ["head", "tail", "[CLS]"]
    text = "\n".join(c.value for c in at.caption)
    share = float(text.split("the domain holds ")[1].split("%")[0])  # the shipped words' own share
    assert 30.0 < share < 70.0  # one of two halves of every word


@pytest.mark.parametrize("tab", ["Weights (D4)", "This input (D1–D3)", "Faithful vs correct"])
def test_the_subspace_page_opens(tab):
    at = _open("app_pages/subspace_directions.py", w_sub_tab=tab)
    assert not at.error, [e.value for e in at.error]
    assert _specs(at)


def test_the_subspace_projection_colours_by_its_domains():
    at = _open("app_pages/subspace_directions.py", w_sub_tab="This input (D1–D3)", w_sub_pca_colour="domain")
    radio = at.radio(key="w_sub_pca_colour")
    assert radio.options == ["half of the word", "token position"]
    names = {t.get("name") for spec in _specs(at) for t in spec["data"]}
    assert {"head", "tail"} <= {str(n).split(" ")[0] for n in names if n}


@pytest.mark.parametrize("section", ["streams", "classes", "distribution", "entropy"])
def test_every_cone_section_opens(section):
    at = _open("app_pages/cone_index.py", w_cone_section=section)
    assert not at.error, [e.value for e in at.error]
    assert _specs(at)


def test_a_fresh_session_starts_with_the_default_sentence_and_an_empty_box_per_other_kind():
    at = AppTest.from_file(APP, default_timeout=600).run()
    from bertgeom.ui.state import STORE

    assert at.session_state["text_value"] == STORE["text_value"] != ""
    assert at.session_state["letters_value"] == ""


def test_the_home_page_lists_the_family():
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = toy.MODEL_ID
    at.session_state["letters_value"] = WORD
    at.run()
    assert not at.exception
    assert any("Toy letters BERT" in m.value for m in at.markdown)
