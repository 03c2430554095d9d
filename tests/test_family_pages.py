"""Every page and every tab opens, with no error, on a tiny random classifier of each encoder family
(tests/family_models.py), loaded from its folder as a researcher would load their own model: each tab of
Attention Heads and Subspace Directions and each section of Cone Index is opened by name and must draw
(a tab that silently fell back to the first would fail), the pages say where BERT's definitions do not
carry over (rotary positions, local attention, a shared layer, pre-LayerNorm), and "Over a set of inputs"
on a classifier uses every input of the unlabelled shipped set."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from family_models import FAMILIES, save_family_model

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SENTENCE = "The cat sat on the mat because it was tired."
PROTEIN = "MKTAYIAKQRQISFVKSHFSRQ"

#: The sentence of bertgeom.weights.weight_geometry_notes each family must show on Subspace Directions
#: (a phrase of each; none for the post-LN, absolute-position families).
NOTES = {"rotary": "rotates queries and keys", "local": "locally: each token sees only the keys",
         "shared": "shares one set of weights", "pre": "pre-LayerNorm"}
EXPECTED_NOTES = {"BERT": set(), "RoBERTa": set(), "ELECTRA": set(), "DistilBERT": set(), "ALBERT": {"shared"},
                  "ESM-2": {"rotary", "pre"}, "ModernBERT": {"rotary", "local", "pre"}}


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {f: save_family_model(f, root / f.replace("-", ""), num_labels=2) for f in FAMILIES}


def _errors(at) -> list[str]:
    return ([e.message + " ".join(e.stack_trace[-3:]) for e in at.exception]
            + [e.value for e in at.error])


def _text(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
                     + [w.value for w in at.warning])


def _page(model_dir: Path, text: str, page: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(model_dir)
    at.session_state["text_value"] = text
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    return at.switch_page(page).run()


def _tab_drawn(at, title: str) -> bool:
    """The tab named ``title`` is the open one and drew something (the others draw nothing: lazy tabs)."""
    return any(t.label == title and len(t.children) > 0 for t in at.tabs)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_page_and_tab_opens_on_each_family(family, family_dirs, monkeypatch):
    from bertgeom.ui.cone import SECTIONS
    from bertgeom.ui.heads import TABS
    from bertgeom.ui.subspace import TABS as SUB_TABS

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    text = PROTEIN if family == "ESM-2" else SENTENCE
    d = family_dirs[family]
    failures = {}
    for page in ("app_pages/home.py", "app_pages/methods.py"):
        at = _page(d, text, page)
        if _errors(at) or not at.markdown:
            failures[page] = _errors(at) or ["nothing drawn"]
    for tab in TABS:
        at = _page(d, text, "app_pages/attention_heads.py", heads_tab=tab.title)
        if _errors(at) or not _tab_drawn(at, tab.title):
            failures[f"heads/{tab.title}"] = _errors(at) or ["the tab did not open or drew nothing"]
        if tab.title == "Over a set of inputs":  # a classifier on the unlabelled shipped set: every input is used
            said = _text(at)
            if "every input is used" not in said or "nothing to average" in said:
                failures["heads/Over a set of inputs (unlabelled set)"] = [said[-400:]]
    for tab in SUB_TABS:
        at = _page(d, text, "app_pages/subspace_directions.py", w_sub_tab=tab.title)
        if _errors(at) or not _tab_drawn(at, tab.title):
            failures[f"subspace/{tab.title}"] = _errors(at) or ["the tab did not open or drew nothing"]
        shown = {k for k, phrase in NOTES.items() if any(phrase in i.value for i in at.info)}
        if shown != EXPECTED_NOTES[family]:
            failures[f"subspace/{tab.title} notes"] = [f"shown {sorted(shown)}, expected "
                                                       f"{sorted(EXPECTED_NOTES[family])}"]
    for section in SECTIONS:
        at = _page(d, text, "app_pages/cone_index.py", w_cone_section=section.key)
        opened = at.session_state["w_cone_section"] == section.key
        if _errors(at) or not opened:
            failures[f"cone/{section.key}"] = _errors(at) or ["the section did not open"]
    assert failures == {}
