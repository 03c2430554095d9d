"""The one UI wrapper of the cached views (:mod:`bertgeom.sets.views`): every page runs a view
through :func:`run_view`, which waits for the background preparation, takes a heavy-work slot on a
miss, and draws the progress bar or spinner outside any Streamlit cache.

References: issue 47 ("views declared once").
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import streamlit as st

from bertgeom.ui.workqueue import heavy



def run_view(view, *args, given=None):
    """``view.get(*args)`` (:class:`bertgeom.sets.views.View`) as every page runs a view: first waits
    while the background preparation writes it (:func:`bertgeom.ui.prepared_cache.wait_for`), then
    reads memory or disk; a miss computes in a heavy-work slot under a progress bar (the view's
    ``doing`` text, with *Cancel*) or a spinner, drawn here, outside any Streamlit cache. ``given()``:
    what the page holds for the computation (e.g. ``{"trace": ...}``), fetched only on a miss and
    before the slot is taken (see bertgeom.ui.workqueue)."""
    from bertgeom.ui.prepared_cache import wait_for
    from bertgeom.ui.widgets import progress

    if not view.in_memory(*args):
        spec = getattr(args[0], "spec", None)
        wait_for(view.key_of(*args), view.title, group=view.name if view.prepared_together else None,
                 model_id=spec.id if spec is not None else None)

    @contextmanager
    def around():
        with ExitStack() as stack:
            stack.enter_context(heavy(view.title[:1].lower() + view.title[1:]))
            if view.doing is None:
                stack.enter_context(st.spinner(f"{view.title}…"))
                yield None
            else:
                yield stack.enter_context(progress(view.doing(*args), usually_prepared=view.usually_prepared))

    return view.get(*args, around=around, given=given)


def get_under_bar(view, *args, working: str, slot: str, key: str | None = None, usually_prepared: bool = False,
                  given=None):
    """``view.get(*args)`` with the page's own progress bar: memory or disk, else computed behind a bar
    (``working``, the time left, *Cancel* under ``key``) in a heavy-work slot (``slot``). Unlike
    :func:`run_view` it does not wait for the background preparation: the caller decides (e.g. behind
    a *Compute* button). The typed result either way (the disk tier keeps its plain arrays)."""
    from bertgeom.ui.widgets import progress

    @contextmanager
    def around():
        with progress(working, usually_prepared=usually_prepared, key=key) as update, heavy(slot):
            yield update

    return view.get(*args, around=around, given=given)
