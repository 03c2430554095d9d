"""Cone Index section *Per class over a set*: how the cone of a chosen stream evolves for each class
of a set (mean ± sd per layer), and the official code's per-layer histograms.

References: Bonino et al. 2025 (arXiv:2502.12033) and its released code; docs/methods.md §9.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.figures import cone as fc
from bertgeom.sets import cone as conesets
from bertgeom.ui.cone.set_picker import group_order, groups_of, load_set
from bertgeom.ui.cone.view import View
from bertgeom.ui.widgets import chart, csv_button, guarded
from bertgeom.tables import counted

#: The streams a set result can show, in the selectbox's order.
STREAM_CHOICES = {
    "hidden": "hidden state of every layer (0 = embeddings)",
    "layer_input": "layer input X",
    "head_output": "head output Z_h (mean over heads)",
    "one_head": "one head's output Z_h",
    "post_attention": "after concat + W_O + LayerNorm (U)",
    "layer_output": "layer output Y (after the MLP)",
    "multihead_faithful": "'multihead output' (official code)",
    "one_head_faithful": "one head's output (official code)",
}

#: Choices of one head read a per-head stream.
STREAM_NEEDS = {"one_head": "head_output", "one_head_faithful": "head_output_faithful"}


def available_streams(data: conesets.ConeSet) -> list[str]:
    """The stream choices a set result holds (a precomputed set may hold hidden_states only)."""
    return [c for c in STREAM_CHOICES if data.has(STREAM_NEEDS.get(c, c))]


def stream_from_choice(data: conesets.ConeSet, choice: str, head: int, normalized: bool):
    """The values of ``choice`` for every input of the set, and the layers they belong to."""
    if choice in STREAM_NEEDS:
        return data.stream_values(STREAM_NEEDS[choice], head=head, normalized=normalized)
    return data.stream_values(choice, normalized=normalized)


def stream_label(choice: str, head: int) -> str:
    """A stream's name on screen (one head's streams name the head)."""
    return STREAM_CHOICES[choice].replace("one head's", f"head {head + 1}")


def classes_section(v: View) -> None:
    """The section: a stream's cone per class of a set (mean ± sd per layer) and its histograms."""
    H, L, DISPLAY = v.H, v.L, v.display
    st.markdown("#### How the cone evolves for each class")
    with guarded("The computation over the set"):
        loaded_set = load_set(v)
        if loaded_set is not None:
            items, fp, data, labelled = loaded_set
            groups, order = groups_of(data), group_order(data, v.loaded)
            if not labelled:
                st.info("This set has no class labels, so all inputs form one family of curves (mean ± sd over the "
                        "set)." + (" Upload a labelled set above for per-class curves." if v.kind.labelled_uploads
                                   else " This model's inputs come without class labels here."))
            a1, a2, a3 = st.columns([4, 2, 2])
            streams_here = available_streams(data)
            choice = a1.selectbox("Stream", streams_here, key="w_cone_set_stream",
                                  format_func=lambda c: STREAM_CHOICES[c].replace("…L", f"…{L}"))
            head = a2.number_input("Head (one-head streams)", 1, H, min(5, H), key="w_cone_set_head",
                                   help="For the streams of one head. The official code used head 5 (index 4).") - 1
            normalized = a3.toggle("Normalised (I / m)", value=True, key="w_cone_set_norm")
            values, x = stream_from_choice(data, choice, head, normalized)
            mref = float(np.median(data.m))
            ref = 1 / np.sqrt(mref) if normalized else np.sqrt(mref)
            chart(fc.class_curves(values, groups, x=x, order=order, display=DISPLAY,
                                  y_title="I / m" if normalized else "I", unit_range=normalized,
                                  reference=ref, reference_label=f"isotropic (median m = {mref:.0f})",
                                  x_title="layer (0 = embeddings)" if choice == "hidden" else "layer",
                                  title=f"{stream_label(choice, head)}: mean ± sd "
                                        f"{'per class' if labelled else 'over the set'}, "
                                        f"{counted(len(values), 'input')}"),
                  "w_cone_class_curves")
            st.markdown("##### Histograms per layer (20 bins, as the official code)")
            mode = st.radio("Compare in each layer", ["classes", "streams"], horizontal=True, key="w_cone_hist_mode",
                            format_func={"classes": "the classes (stream above)",
                                         "streams": "streams (official code: input, multihead output, output)"}.get)
            if mode == "classes":
                series = {g: values[groups == g] for g in order}
                panels = [f"layer {i}" for i in x]
                hist_title = f"{stream_label(choice, head)} {'per class' if labelled else 'over the set'}"
            else:
                h1, h2 = st.columns(2)
                cls_opts = ["__all__"] + order
                default_cls = v.kind.featured_class if v.kind.featured_class in order else "__all__"
                pick = h1.selectbox("Inputs", cls_opts, index=cls_opts.index(default_cls), key="w_cone_hist_class",
                                    format_func=lambda c: "all inputs" if c == "__all__" else DISPLAY.get(c, c))
                stream_opts = [c for c in streams_here if c != "hidden"]
                chosen_streams = h2.multiselect(
                    "Streams", stream_opts, key="w_cone_hist_streams",
                    default=[c for c in ("layer_input", "multihead_faithful", "layer_output") if c in stream_opts],
                    format_func=lambda c: stream_label(c, head))
                sel = np.ones(len(groups), bool) if pick == "__all__" else groups == pick
                series = {stream_label(c, head): stream_from_choice(data, c, head, normalized)[0][sel]
                          for c in chosen_streams}
                panels = [f"layer {i}" for i in range(1, L + 1)]
                hist_title = f"streams of {'all inputs' if pick == '__all__' else DISPLAY.get(pick, pick)}"
            if series:
                chart(fc.layer_histograms(series, panel_titles=panels, display=DISPLAY,
                                          x_title="I / m" if normalized else "I", title=hist_title),
                      "w_cone_hists")
            stats = conesets.group_stats(values, groups, order)
            stat_df = pd.DataFrame([{"class": DISPLAY.get(g, g), "layer": int(xi), "mean": s["mean"][j],
                                     "sd": s["sd"][j], "n": int(s["n"])}
                                    for g, s in stats.items() for j, xi in enumerate(x)])
            per_input = pd.DataFrame({"input": data.names, "label": data.labels, "predicted": data.predicted,
                                      "correct": data.correct, "m": data.m})
            for j, xi in enumerate(x):
                per_input[f"layer_{xi}"] = values[:, j]
            with st.expander("Numbers (mean ± sd per class and layer)"):
                st.dataframe(stat_df, hide_index=True, width="stretch")
            d1, d2 = st.columns(2)
            with d1:
                csv_button(stat_df, "cone_index_per_class.csv", "w_cone_class_csv", "Download per-class CSV")
            with d2:
                csv_button(per_input, "cone_index_per_input.csv", "w_cone_inputs_csv", "Download per-input CSV")
