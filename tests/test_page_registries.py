"""Subspace Directions and Cone Index draw their tabs and sections from one registry each
(bertgeom.ui.subspace.TABS, bertgeom.ui.cone.SECTIONS), one module per tab or section, as Attention
Heads does (tests/test_heads_tab_registry.py): the titles and keys the share links name before the move
(?w_sub_tab=Across+inputs, ?w_cone_section=entropy) still open the same tab or section."""

from __future__ import annotations

import json
import pkgutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import bertgeom.ui.cone as cone
import bertgeom.ui.subspace as subspace
from bertgeom.ui.cone import SECTIONS
from bertgeom.ui.subspace import TABS

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SENTENCE = "The cat sat on the mat because it was tired."

#: The tab strip before the move to one module per tab; share links name these (?w_sub_tab=...).
SUBSPACE_TITLES = ["Weights (D4)", "This input (D1–D3)", "Across inputs", "Faithful vs correct",
                   "Head-to-head affinity"]
#: The sections before the move: the key each share link names (?w_cone_section=...) and the title shown.
CONE_SECTIONS = [("streams", "Streams inside each layer"), ("classes", "Per class over a set"),
                 ("distribution", "Data distribution ([CLS])"), ("entropy", "Attention entropies"),
                 ("isotropy", "IsoScore beside the cone"), ("collapse", "Rank collapse beside the cone")]


def _modules_of(renders, package) -> list[str]:
    modules = [r.__module__ for r in renders]
    assert all(m.startswith(package.__name__ + ".") for m in modules), modules
    return modules


def _open(page: str, query: dict[str, str] | None = None, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = "tiny-random"  # a two-layer model: the page's structure, fast
    at.session_state["text_value"] = SENTENCE
    for key, value in state.items():
        at.session_state[key] = value
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _chart_keys(at) -> set[str]:
    return {el.key for el in at.get("plotly_chart")}


# ------------------------------------------------------------------ Subspace Directions
def test_the_subspace_registry_keeps_the_titles_and_order_of_the_share_links():
    assert [t.title for t in TABS] == SUBSPACE_TITLES


def test_each_subspace_tab_is_drawn_by_its_own_module_of_the_package():
    modules = _modules_of([t.render for t in TABS], subspace)
    assert len(set(modules)) == len(modules), modules  # one tab per file
    package = {m.name for m in pkgutil.iter_modules(subspace.__path__)}
    assert package - {m.rsplit(".", 1)[1] for m in modules} == {"view"}  # the view the tabs share, no stray tab


def test_the_subspace_page_shows_the_registry_and_a_shared_tab_link_opens_its_tab():
    at = _open("app_pages/subspace_directions.py", query={"w_sub_tab": "Across inputs"})
    assert [t.label for t in at.tabs] == SUBSPACE_TITLES
    assert at.session_state["w_sub_tab"] == "Across inputs"
    # drawn only by the Across inputs tab, whether its set is computed yet or not: its on-switch is drawn
    # only while it is not (a cache filled by an earlier run or module hides it, issue 47)
    assert any("over many inputs" in m.value for m in at.markdown)
    assert not _chart_keys(at) & {"w_sub_wgrid", "w_sub_dgrid", "w_sub_fgrid"}  # the other tabs did not run


# ------------------------------------------------------------------ Cone Index per Layer
def test_the_cone_registry_keeps_the_keys_titles_and_order_of_the_share_links():
    assert [(s.key, s.title) for s in SECTIONS] == CONE_SECTIONS


def test_each_cone_section_is_drawn_by_its_own_module_of_the_package():
    modules = _modules_of([s.render for s in SECTIONS], cone)
    assert len(set(modules)) == len(modules), modules  # one section per file
    package = {m.name for m in pkgutil.iter_modules(cone.__path__)}
    assert package - {m.rsplit(".", 1)[1] for m in modules} == {"view", "set_picker", "results_folders"}


@pytest.mark.parametrize("key,chart", [("entropy", "w_cone_ent_code"), ("isotropy", "w_iso_input")])
def test_the_cone_page_shows_the_registry_and_a_shared_section_link_opens_its_section(key, chart):
    at = _open("app_pages/cone_index.py", query={"w_cone_section": key})
    control = at.get("button_group")[0]
    assert [json.loads(o.content)["label"] if o.content.startswith("{") else o.content
            for o in control.proto.options] == [t for _, t in CONE_SECTIONS]
    assert at.session_state["w_cone_section"] == key
    keys = _chart_keys(at)
    assert chart in keys and "w_cone_streams" not in keys  # the linked section ran, the first one did not


def test_a_cone_link_naming_no_section_opens_the_first():
    at = _open("app_pages/cone_index.py", query={"w_cone_section": "no-such-section"})
    assert at.session_state["w_cone_section"] == "streams"
    assert "w_cone_streams" in _chart_keys(at)


# ------------------------------------------------------------------ Attention Heads: Over a set of inputs
def test_the_set_tab_draws_each_view_with_its_own_function():
    """set_tab is split where change happens: one function per view of the switch, named in VIEWS in the
    switch's order (the view titles are in share links: ?w_set_view=Domain+proportions)."""
    from bertgeom.ui.heads import over_a_set

    assert list(over_a_set.VIEWS) == ["Class-mean map", "Feature distributions", "Domain proportions"]
    drawn = list(over_a_set.VIEWS.values())
    assert len(set(drawn)) == len(drawn) and all(f.__module__ == over_a_set.__name__ for f in drawn)
