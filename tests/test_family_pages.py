"""Every page and every tab opens, with no error, on a tiny random classifier of each encoder family
(tests/family_models.py), loaded from its folder as a researcher would load their own model."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from family_models import FAMILIES, save_family_model

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SENTENCE = "The cat sat on the mat because it was tired."
PROTEIN = "MKTAYIAKQRQISFVKSHFSRQ"


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {f: save_family_model(f, root / f.replace("-", ""), num_labels=2) for f in FAMILIES}


def _errors(at) -> list[str]:
    return ([e.message + " ".join(e.stack_trace[-3:]) for e in at.exception]
            + [e.value for e in at.error])


def _page(model_dir: Path, text: str, page: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(model_dir)
    at.session_state["text_value"] = text
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    return at.switch_page(page).run()


@pytest.mark.parametrize("family", FAMILIES)
def test_every_page_and_tab_opens_on_each_family(family, family_dirs, monkeypatch):
    from bertgeom.ui.cone import SECTIONS
    from bertgeom.ui.heads import TABS
    from bertgeom.ui.subspace import TABS as SUB_TABS

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    text = PROTEIN if family == "ESM-2" else SENTENCE
    d = family_dirs[family]
    failures = {}
    for tab in TABS:
        at = _page(d, text, "app_pages/attention_heads.py", heads_tab=tab.title)
        if _errors(at):
            failures[f"heads/{tab.title}"] = _errors(at)
    for tab in SUB_TABS:
        at = _page(d, text, "app_pages/subspace_directions.py", w_sub_tab=tab.title)
        if _errors(at):
            failures[f"subspace/{tab.title}"] = _errors(at)
    for section in SECTIONS:
        at = _page(d, text, "app_pages/cone_index.py", w_cone_section=section.key)
        if _errors(at):
            failures[f"cone/{section.key}"] = _errors(at)
    assert failures == {}
