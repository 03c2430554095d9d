"""The one UI wrapper of the cached views (:mod:`bertgeom.sets.views`): every page runs a view
through :func:`run_view`, which waits for the background preparation, takes a heavy-work slot on a
miss, and draws the progress bar or spinner outside any Streamlit cache.

References: issue 47 ("views declared once").
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import streamlit as st

from bertgeom.ui.workqueue import heavy



def run_view(view, *args, given=None, usually_prepared: bool | None = None):
    """``view.get(*args)`` (:class:`bertgeom.sets.views.View`) as every page runs a view: first waits
    while the background preparation writes it (:func:`bertgeom.ui.prepared_cache.wait_for`), then
    reads memory or disk; a miss computes in a heavy-work slot under a progress bar (the view's
    ``doing`` text, with *Cancel*) or a spinner, drawn here, outside any Streamlit cache. ``given()``:
    what the page holds for the computation (e.g. ``{"trace": ...}``), fetched only on a miss and
    before the slot is taken (see bertgeom.ui.workqueue). ``usually_prepared``: the view's own flag unless
    the page knows better for these arguments (only the defaults are prepared ahead)."""
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
                prepared = view.usually_prepared if usually_prepared is None else usually_prepared
                yield stack.enter_context(progress(view.doing(*args), usually_prepared=prepared, key=view.name))

    return view.get(*args, around=around, given=given)

