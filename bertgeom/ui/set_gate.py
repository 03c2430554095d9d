"""A set view that costs minutes starts when asked: the view says how long it will take (the current
input's own measured time, times the inputs of the set) and offers one button, unless the result is
already in memory or on disk (prepared ahead, or an earlier visit) or is being prepared now.

Used by the Cone Index page's *Rank collapse* section and the Attention Heads page's head importance
over a set (each set run has a progress bar with the time left once started)."""

from __future__ import annotations

import hashlib

import streamlit as st


def _about(seconds: float) -> str:
    return f"about {seconds:.0f} s" if seconds < 90 else f"about {seconds / 60:.0f} min"


def set_view_starts(key, memo, *, n_inputs: int, seconds_per_input: float | None, what: str,
                    model_id: str, place: str = "") -> bool:
    """True when the set view may compute or read now: its result is in ``memo`` or on disk, the
    background preparation is writing it, or the visitor pressed the button drawn here. ``place``
    names where on the page the offer stands, when one run can draw two offers of the same view
    (the head grid's colour and the *Gradient importance* tab)."""
    from bertgeom.sets import prepared
    from bertgeom.ui.prepared_cache import pending

    if key in memo or prepared.is_on_disk(key) or pending(key, model_id=model_id):
        return True
    guess = "" if not seconds_per_input else f" ({_about(seconds_per_input * n_inputs)} at this input's pace)"
    tag = hashlib.sha1((repr(key) + place).encode()).hexdigest()[:10]
    slot = st.empty()  # the offer goes away once taken: the progress bar takes its place
    with slot.container():
        st.caption(f"Not computed yet for this set: {what} runs over {n_inputs} inputs{guess}, with a progress bar.")
        pressed = st.button(f"Compute over the {n_inputs} inputs", key=f"w_setgate_{tag}")
    if pressed:
        slot.empty()
    return pressed
