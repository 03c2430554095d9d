"""Attention Heads tab *Head view*: bertviz's head view, every head of the selected layer as token
lines, one colour each, with toggles; hover a token to see its links
(:func:`bertgeom.figures.headview.head_view_html`, a self-contained HTML page that loads nothing from a
network, shown by ``st.iframe``: ``st.components.v1.html`` is deprecated since Streamlit 1.56). Long inputs
are read through a window or grouped by the input's token groups (for genomes, their domains).

References: Vig 2019 (arXiv:1906.05714).
"""

from __future__ import annotations


import numpy as np
import streamlit as st

from bertgeom.analysis.tour_facts import layer_ranking
from bertgeom.analysis.token_groups import contiguous_groups, group_attention, window_bounds
from bertgeom.figures import headview as hv
from bertgeom.tables import counted
from bertgeom.ui.heads.view import View, token_groups


#: Inputs longer than this are shown through a window or as token groups.
FULL_TOKENS = 80
WINDOW = 48


def head_view_tab(v: View) -> None:
    trace, layer = v.trace, v.layer
    T = trace.encoded.n_tokens
    st.caption("**What this shows:** bertviz's head view — every head of layer "
               f"{layer + 1} at once, one colour per head. Each line joins a query token (left, the token that "
               "looks) to a key token (right, the token looked at); the stronger the weight, the darker the line. "
               "Tick heads on or off; **hover a token to see only its links, click it to keep them**. "
               "The layer is the selected head's (change it with the boxes above).")
    tokens = list(trace.tokens)
    A = np.asarray(trace.attentions[layer], dtype=np.float64)
    note = f"Layer {layer + 1}, {counted(T, 'token')}."
    groups = token_groups(v)
    mode_grouped = False
    if T > FULL_TOKENS:
        modes = ["A window of tokens"] + (["Token groups (whole input)"] if groups else [])
        mode = st.radio(f"This input has {T} tokens, too many lines to read at once: show", modes, horizontal=True,
                        key="w_hv_mode", bind="query-params")
        if mode.startswith("Token groups"):
            mode_grouped = True
            grp = contiguous_groups(groups)
            A = group_attention(A, grp)
            tokens = [f"{g.name} ({g.stop - g.start} tok.)" for g in grp]
            note = (f"Layer {layer + 1}: {T} tokens grouped into {counted(len(grp), 'run')} of the same group; a "
                    "line is the mean over the group's queries of their summed weight on the other group's keys "
                    "(every row still sums to 1).")
        else:
            start = st.slider("Window start (token)", 0, T - WINDOW, 0, step=1, key="w_hv_start")
            a, b = window_bounds(T, start, WINDOW)
            A = A[:, a:b, a:b]
            tokens = [f"{i}: {t}" for i, t in zip(range(a, b), tokens[a:b])]
            note = (f"Layer {layer + 1}: tokens {a}–{b - 1} of {T} (queries and keys inside the window only; "
                    "weight on keys outside the window is not drawn).")
    min_w = st.slider("Hide links below", 0.0, 0.5, 0.02, step=0.01, key="w_hv_min", bind="query-params",
                      help="Links weaker than this are not drawn (bertviz draws all, faintly).")
    active = [h == v.head for h in range(v.H)] if st.toggle("Only the selected head at first", key="w_hv_one") else None
    page = hv.head_view_html(A, tokens, head_names=[f"H{h + 1}" for h in range(v.H)], active=active,
                             min_weight=min_w, note=note, title=f"Head view, layer {layer + 1}",
                             unit="group" if mode_grouped else "token")
    # the frame as tall as the page it holds (its token columns scroll inside it past HEAD_VIEW_MAX_PX);
    # its scripts run in the frame, as they did in components.html's
    st.iframe(page, height="content")
    table_ = getattr(v, "table", None)
    if table_ is not None and "prev" in table_:
        ranking = layer_ranking(table_, "prev", layer)
        st.caption(f"Attention to the previous token in layer {layer + 1}, most first: "
                   + " · ".join(f"H{h + 1} ({x:.2f})" for h, x in ranking) + ".")
    st.download_button("Download this view (HTML, works offline)", page.encode("utf-8"),
                       file_name=f"head_view_L{layer + 1}.html", mime="text/html", key="w_hv_dl",
                       icon=":material/download:", on_click="ignore")
