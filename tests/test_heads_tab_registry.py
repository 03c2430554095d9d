"""The Attention Heads page draws its tabs from one registry (bertgeom.ui.heads.TABS), one module
per tab: titles and order are those of the share links, and head disabling lives in one module."""

from __future__ import annotations

import importlib
import pkgutil

import bertgeom.ui.heads as heads
from bertgeom.ui.heads import TABS
from bertgeom.ui.heads.view import View
from bertgeom.ui.tabs import PageTab, offered_tabs

from heads_page import open_heads_page

#: The tab strip before the move to one module per tab; share links name these (?heads_tab=Model+view).
TITLES = ["Head detail", "Head view", "Model view", "All heads", "Queries & keys over a set", "Over a set of inputs",
          "Head similarity", "Disable heads", "Compare checkpoints", "Attention flow", "Context mixing",
          "Compare two inputs", "Gradient importance"]


def test_the_registry_keeps_the_titles_and_order_of_the_share_links():
    assert [t.title for t in TABS] == TITLES


def test_each_tab_is_drawn_by_its_own_module_of_the_package():
    modules = [t.render.__module__ for t in TABS]
    assert all(m.startswith("bertgeom.ui.heads.") for m in modules), modules
    assert len(set(modules)) == len(modules), modules  # one tab per file
    # every module of the package is a tab, or a helper the tabs share (no tab without an entry)
    package = {m.name for m in pkgutil.iter_modules(heads.__path__)}
    assert package - {m.rsplit(".", 1)[1] for m in modules} == {"view", "pattern_labels"}


def test_head_disabling_lives_in_one_module():
    disable = next(t for t in TABS if t.title == "Disable heads")
    module = importlib.import_module(disable.render.__module__)
    assert hasattr(module, "set_disable_section")  # the over-the-set sweep is drawn in the same tab, same file
    others = [importlib.import_module(t.render.__module__) for t in TABS if t is not disable]
    assert not any(hasattr(m, "set_disable_section") or hasattr(m, "disable_tab") for m in others)


def test_a_predicate_hides_a_tab_only_where_it_fails(tiny_bert):
    from bertgeom import trace
    from bertgeom.inputs import input_kind_of
    from bertgeom.subject import Subject

    text = "The cat sat on the mat."
    record = input_kind_of(tiny_bert).parse(text)[0]
    view = View(Subject(tiny_bert, record, trace(tiny_bert, text), "tiny", text), 0, 0, table=None, labels={}, th=None)
    classifier_only = PageTab("Classifier only", lambda v: None, lambda v: bool(v.loaded.labels))
    always = PageTab("Always", lambda v: None)
    assert not tiny_bert.labels  # the tiny fixture has no classification head
    assert [t.title for t in offered_tabs((always, classifier_only), view)] == ["Always"]
    deep = PageTab("Long", lambda v: None, lambda v: v.L > 0)
    assert [t.title for t in offered_tabs((classifier_only, always, deep), view)] == ["Always", "Long"]
    assert [t.title for t in offered_tabs(TABS, view)] == TITLES  # no shipped tab is hidden today


def test_the_page_shows_the_registry_in_order():
    at = open_heads_page("Head detail")
    assert [t.label for t in at.tabs] == TITLES
