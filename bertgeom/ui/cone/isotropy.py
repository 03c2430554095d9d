"""Cone Index section *IsoScore beside the cone*: the two measures of the same token clouds per layer,
for the current input and per class over a set, with their isotropic references (widgets in, figures
out; the measures are in :mod:`bertgeom.analysis.isotropy` and :mod:`bertgeom.analysis.cone`).

References: Rudman et al. 2022, IsoScore (arXiv:2108.07344); Rudman & Eickhoff 2024, I-STAR
(arXiv:2305.19358); Bonino et al. 2025 (arXiv:2502.12033) for the cone index.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.cone import cone_index
from bertgeom.analysis.isotropy import hidden_state_isoscore_curve, isoscore
from bertgeom.analysis.tour_facts import cone_summary, isoscore_rank_note
from bertgeom.figures import cone as fc
from bertgeom.sets import cone as conesets
from bertgeom.ui.cone.set_picker import choose_set
from bertgeom.ui.cone.view import View
from bertgeom.ui.widgets import chart, csv_button, guarded, waited

#: Rows each input adds to its class's cloud (evenly spaced content tokens): the set's clouds stay small.
ROWS_PER_INPUT = 48

DIFFERENCE = (
    "**How they differ.** The cone index asks whether the vectors *point the same way* (the length of the mean "
    "unit vector, an average-cosine measure: a shared offset from the origin makes it large); IsoScore asks whether "
    "the cloud's *variance is spread evenly over the dimensions* after centring (1 = the same variance in every "
    "direction, 0 = all on one line). So a round cloud far from the origin sits in a narrow cone (high I/m) yet has "
    "an IsoScore near 1, and a centred cloud flattened onto a line has I/m near 0 yet an IsoScore near 0: "
    "Rudman et al. 2022 argue that only IsoScore measures isotropy."
)


@st.cache_data(max_entries=8, show_spinner=False)  # the wait is drawn by waited(), outside
def _class_clouds(weights_hash: str, fingerprint: str, token_set: str, _loaded, _items) -> dict:
    """Per input: ``ROWS_PER_INPUT`` evenly spaced rows of the token set at every layer ``[L+1, r, d]``
    (cached by the model's weights hash and the set's fingerprint)."""
    from bertgeom.sets.inputs import map_over_set
    from bertgeom.ui.workqueue import free_slot_or_raise

    def reduce(trace, item):
        rows = np.flatnonzero(conesets.rows_for(trace.encoded, token_set))
        pick = rows[np.unique(np.linspace(0, rows.size - 1, min(ROWS_PER_INPUT, rows.size)).round().astype(int))] \
            if rows.size else rows
        return np.asarray(trace.hidden_states[:, pick], dtype=np.float32)

    with free_slot_or_raise():  # a busy queue: waited() waits for the slot and shows the position
        res = map_over_set(_loaded, _items, reduce)
    return {"clouds": res.results, "labels": [it.label or "" for it in res.items], "errors": res.errors}


def isotropy_section(v: View) -> None:
    """The section: IsoScore and I/m of the current input per layer, then of each class of a set."""
    st.markdown("#### IsoScore beside the cone index")
    st.caption(DIFFERENCE)
    trace = v.trace
    rows = conesets.rows_for(trace.encoded, v.token_set)
    hs = np.asarray(trace.hidden_states, dtype=np.float64)[:, rows]
    m = int(rows.sum())
    if m < 2:
        st.info("IsoScore needs at least two token vectors: pick a token set with more rows.")
        return
    x = np.arange(hs.shape[0])
    iso = waited(hidden_state_isoscore_curve, hs, text="Computing IsoScore at every layer…", key="isoscore-input",
                 estimate_key=f"isoscore-input:{v.model_id}")
    cone = cone_index(hs, normalized=True)
    d = hs.shape[-1]
    st.markdown(cone_summary(cone, iso, m), help="The tour's cone step quotes this sentence.")
    st.caption(f"This input: {isoscore_rank_note(m, d)}")
    chart(fc.isotropy_figure(x, {"this input": (iso, cone)}, m, title="The current input's tokens, per layer"),
          "w_iso_input")
    frame = pd.DataFrame({"layer": x, "isoscore": iso, "cone_I_over_m": cone, "m": m, "d": d})
    csv_button(frame, "isoscore_per_layer.csv", "w_iso_input_csv")

    st.markdown("##### Per class over a set (each class's tokens pooled into one cloud)")

    chosen = choose_set(v)
    if chosen is None:
        return
    items, fp, _ = chosen
    if fp.startswith("precomputed:"):
        st.info("A precomputed results directory holds cone indices only; pick the shipped set or an upload.")
        return
    with guarded("IsoScore over the set"):
        data = waited(_class_clouds, v.loaded.weights_hash, fp, v.token_set, v.loaded, items,
                      text="Collecting every class's token cloud…",
                      estimate_key=f"class-clouds:{v.model_id}:{len(items)}")
        if not data["clouds"]:
            st.warning("No input of the set could be analysed.")
            return
        labels = np.array(data["labels"])
        order = ([c for c in (v.loaded.labels or ()) if c in set(labels)]
                 + sorted(set(labels) - set(v.loaded.labels or ())))
        series, rows_out = {}, []
        for g in order:
            cloud = np.concatenate([c for c, lab in zip(data["clouds"], labels) if lab == g], axis=1)
            name = v.display.get(g, g) if g else "all inputs (no labels)"  # the class's name on screen
            iso_g, cone_g = np.atleast_1d(isoscore(cloud)), cone_index(cloud, normalized=True)
            series[name] = (iso_g, cone_g)
            rows_out += [{"class": name, "layer": int(i), "isoscore": iso_g[i], "cone_I_over_m": cone_g[i],
                          "m": cloud.shape[1]} for i in range(cloud.shape[0])]
        mm = float(np.median([r["m"] for r in rows_out]))
        chart(fc.isotropy_figure(np.arange(len(next(iter(series.values()))[0])), series, mm,
                              title=f"IsoScore (solid) and cone I/m (dashed) per class, up to {ROWS_PER_INPUT} "
                                    "tokens per input"), "w_iso_classes")
        csv_button(pd.DataFrame(rows_out), "isoscore_per_class.csv", "w_iso_class_csv")
