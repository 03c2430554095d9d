"""AppTest runs of every page with an example input (no browser)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from pathlib import Path
from plotly_json import plotly_values  # noqa: E402

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SENTENCE = "The cat sat on the mat because it was tired."


def _app(**state) -> AppTest:
    """The app with the English MiniLM picked (the variant model may be the default)."""
    state.setdefault("model_id", "minilm-l6")
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in state.items():
        at.session_state[key] = value
    return at


def _open(at: AppTest, page: str) -> AppTest:
    """Run the entry point once, then open ``page`` through the navigation."""
    at.run()
    return at.switch_page(page).run()


def _charts(at):
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_home_page_explains_and_offers_examples():
    at = AppTest.from_file(APP, default_timeout=600).run()  # a fresh session: the default model
    assert not at.exception
    assert "bertgeom" in at.title[0].value
    assert any("The cat sat" in b.label for b in at.button)
    # the plug-in's page is listed from its registration (PageSpec.summary), not named by the home page
    assert any("**Variant Classifier** — paste a SARS-CoV-2 genome" in m.value for m in at.markdown)
    from bertgeom.models import REGISTRY

    assert at.sidebar.selectbox(key="w_model").value == REGISTRY.default_id


def test_attention_heads_page_shows_grid_and_heatmap_for_the_example():
    at = _app(text_value=SENTENCE, layer=2, head=4)
    _open(at, "app_pages/attention_heads.py")
    assert not at.exception
    charts = _charts(at)
    grid = charts[0]["data"][0]
    assert grid["type"] == "scatter" and len(plotly_values(grid["x"])) == 6 * 12
    heat = [c for c in charts if c["data"][0]["type"] == "heatmap"][0]
    assert len(plotly_values(heat["data"][0]["z"])) == 13  # 11 word pieces + [CLS] + [SEP]
    assert at.number_input(key="w_layer").value == 3 and at.number_input(key="w_head").value == 5
    assert at.query_params["layer"] == "3" and at.query_params["head"] == "5"


def test_changing_the_head_widget_selects_that_head_without_rerunning_the_model():
    at = _app(text_value=SENTENCE)
    _open(at, "app_pages/attention_heads.py")
    at.number_input(key="w_head").set_value(7).run()
    assert not at.exception
    assert at.session_state["head"] == 6
    assert "L1 H7" in [m.value for m in at.markdown][-1] or any("L1 H7" in m.value for m in at.markdown)


def test_shared_link_restores_model_layer_and_head():
    at = _app(text_value=SENTENCE)
    at.query_params["model"] = "tiny-random"
    at.query_params["layer"] = "2"
    at.query_params["head"] = "3"
    _open(at, "app_pages/attention_heads.py")
    assert not at.exception
    assert at.session_state["model_id"] == "tiny-random"
    assert (at.session_state["layer"], at.session_state["head"]) == (1, 2)
    assert len(plotly_values(_charts(at)[0]["data"][0]["x"])) == 2 * 4


def test_odd_numbers_in_a_shared_link_are_ignored_not_fatal():
    from bertgeom.ui.state import url_index

    assert url_index("3") == 2 and url_index("²") is None and url_index("0") is None and url_index("-1") is None
    assert url_index("٣") is None and url_index("9" * 50) is None
    at = _app(text_value=SENTENCE)
    at.query_params["layer"] = "²"
    at.query_params["head"] = "٣"
    _open(at, "app_pages/attention_heads.py")
    assert not at.exception
    assert (at.session_state["layer"], at.session_state["head"]) == (0, 0)


def test_unknown_model_in_the_url_is_ignored_and_unknown_model_state_gets_a_clear_message():
    at = _app(text_value=SENTENCE)
    at.query_params["model"] = "../../etc/passwd"
    _open(at, "app_pages/attention_heads.py")
    assert not at.exception and at.session_state["model_id"] == "minilm-l6"
    at2 = _app(text_value=SENTENCE, model_id="no-such-model")
    _open(at2, "app_pages/attention_heads.py")
    assert not at2.exception
    assert "not one of the bundled models" in at2.error[0].value


def test_empty_input_gets_a_hint_not_an_error():
    at = _app(text_value="   ")
    _open(at, "app_pages/attention_heads.py")
    assert not at.exception
    assert at.info and "input" in at.info[0].value.lower()


def test_home_genome_example_opens_the_classifier_with_that_genome():
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.models import REGISTRY

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    at = AppTest.from_file(APP, default_timeout=600).run()
    next(b for b in at.button if "Omicron genome" in b.label).click().run()
    assert not at.exception
    assert at.title[0].value == "Variant Classifier"
    assert at.session_state["model_id"] == VARIANT_MODEL_ID
    assert any(s.value.startswith("OP339227") for s in at.subheader)  # the shipped Omicron example


def test_no_pages_folder_beside_the_entry_script():
    """A ``pages/`` folder next to app.py makes Streamlit run the first session after a start in its
    older multipage mode (pages named by file), so a first visitor's ``/classifier`` gets "Page not
    found" (#21 item 6; the browser test in test_e2e_deeplinks.py opens each address on a fresh server)."""
    root = Path(APP).parent
    assert not (root / "pages").exists()
    for page in ("home", "attention_heads", "subspace_directions", "cone_index"):
        assert (root / "app_pages" / f"{page}.py").is_file()
    from bertgeom.extensions import registered_page

    classifier = Path(registered_page("classifier").script)  # a plug-in's page lives in its package
    assert classifier.is_file() and classifier.parent.name == "sars_cov_2"
