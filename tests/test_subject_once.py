"""The page's model and paste are resolved once per run, whichever tab or section is open (issue 47).

``tests/test_views_once.py`` reads the code for tabs that call a resolver with the view's model id or
text; this runs the pages. Each page of the three generic ones is opened on the tiny random BERT, and
every tab (section) of its registry is shown in turn; during each run the resolvers of
:mod:`bertgeom.ui.cache` are counted as they are entered (a profiler on the script's thread sees every
call, however a module bound the name, and a Streamlit cache hit too): the page's model id reaches
``cached_model`` once, the page's paste reaches ``paste_records`` once, and its record is traced once.
A tab that resolved them again from strings (``get_trace(v.model_id, v.text)``) adds a call here.
Another input (Compare two inputs' input B) or another model (Compare checkpoints' partners) are
resolved where they are named and are not counted against the page's.
"""

from __future__ import annotations

import collections
import sys
import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")
MODEL = "tiny-random"
TEXT = "The cat sat on the mat because it was tired."


def _registry(page: str):
    if page == "heads":
        from bertgeom.ui.heads import TABS
        return "app_pages/attention_heads.py", "heads_tab", [t.title for t in TABS]
    if page == "subspace":
        from bertgeom.ui.subspace import TABS
        return "app_pages/subspace_directions.py", "w_sub_tab", [t.title for t in TABS]
    from bertgeom.ui.cone import SECTIONS
    return "app_pages/cone_index.py", "w_cone_section", [s.key for s in SECTIONS]


class ResolverCalls:
    """Calls entering the resolvers of bertgeom.ui.cache during ``run()``: ``(name, argument)``, the
    argument being the model id, the paste or the record's digest."""

    def __init__(self):
        import streamlit.runtime.caching.cache_utils as cache_utils

        import bertgeom.ui.cache as uc

        self._cached_call = cache_utils.CachedFunc.__call__.__code__
        self._model = uc.cached_model._info.func
        self._plain = {getattr(uc, n).__code__: n for n in ("paste_records", "get_record_trace", "trace_of",
                                                             "get_trace", "subject_of")}
        self.calls: collections.Counter = collections.Counter()

    def _profile(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code in self._plain:
            local = frame.f_locals
            record = local.get("record")
            self.calls[self._plain[code], local["text"] if record is None else record.digest] += 1
        elif code is self._cached_call:
            me = frame.f_locals.get("self")
            if me is not None and me._info.func is self._model:
                self.calls["cached_model", frame.f_locals["args"][0]] += 1

    def run(self, at: AppTest) -> None:
        self.calls.clear()
        sys.setprofile(self._profile)
        threading.setprofile(self._profile)
        try:
            at.run()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)


@pytest.mark.parametrize("page", ["heads", "subspace", "cone"])
def test_every_tab_runs_on_the_model_and_paste_the_page_resolved_once(page):
    script, key, tabs = _registry(page)
    at = AppTest.from_file(APP, default_timeout=900)
    at.session_state["model_id"] = MODEL
    at.session_state["text_value"] = TEXT
    at.run()
    at.switch_page(script)
    from bertgeom.inputs import input_kind_of, normalise_text

    digest = input_kind_of("text").parse(normalise_text(TEXT))[0].digest  # the page's record
    probe = ResolverCalls()
    for tab in tabs:
        at.session_state[key] = tab
        probe.run(at)
        assert not at.exception, (tab, [e.value for e in at.exception])
        mine = {k: n for k, n in probe.calls.items() if k[1] in (MODEL, TEXT, digest)}
        assert mine == {("cached_model", MODEL): 1, ("paste_records", TEXT): 1, ("get_record_trace", digest): 1}, \
            (tab, probe.calls)
