"""Cone Index section *Attention entropies*: per layer, the entropies of attention exactly as the official
code computes them beside properly normalised ones, for this input or a class's mean attention over a set.

References: Bonino et al. 2025 (arXiv:2502.12033) and its released code; docs/methods.md §9.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertgeom.analysis.cone import ENTROPY_DOCS
from bertgeom.figures import cone as fc
from bertgeom.sets import cone as conesets
from bertgeom.tables import counted, per_head_frame
from bertgeom.ui import cone_cache
from bertgeom.ui.cone.set_picker import choose_set
from bertgeom.ui.cone.view import View
from bertgeom.ui.widgets import chart, csv_button, doc_list, guarded


def entropy_section(v: View) -> None:
    """The section: attention entropies per layer, the official code's beside properly normalised ones."""
    DISPLAY, loaded, kind, trace, max_pos = v.display, v.loaded, v.kind, v.trace, v.max_pos
    model_id, text = v.model_id, v.text
    st.markdown("#### Entropies of attention, per layer (mean over heads; band: lowest to highest head)")
    st.caption("Left: exactly as the official code computes them — its “von Neumann” entropy scales the "
               "|eigenvalues| to unit L2 norm (so they do not sum to 1), and its Shannon entropy puts the values of "
               "all entries into 20 bins (it describes how attention values are spread, not where a token looks). "
               "Right: properly normalised versions (our additions, [docs/methods.md §9](/?view=methods&section=9)): "
               "eigenvalues and squared singular "
               "values scaled to sum 1, and the mean entropy of each token's attention row.")
    with guarded("The entropy computation"):
        sources = {"input": "this input"}
        if loaded.spec.is_classifier and kind.labelled_uploads:
            sources["class"] = "class-mean attention over the set (official code's recipe)"
        e1, e2 = st.columns([3, 3], vertical_alignment="bottom")
        if len(sources) > 1:
            src = e1.radio("Attention of", list(sources), format_func=sources.get, horizontal=True,
                           key="w_cone_ent_src")
        else:
            src = "input"
            e1.caption("Attention of this input (the class-mean recipe needs a classifier and a labelled set).")
        pad512 = e2.checkbox(f"{max_pos} × {max_pos} matrix as the official code", value=kind.can("official_padding"),
                             key="w_cone_ent_pad",
                             help="The code's matrices had 512 rows and columns, every row and column from the first "
                                  "[SEP] on (the [SEP]s, a second sentence, the padding) zeroed. The zeros "
                                  "change the binned Shannon entropy a lot; the eigenvalue entropy not at all.",
                             disabled=trace.encoded.n_tokens > max_pos)
        epad = max_pos if pad512 and trace.encoded.n_tokens <= max_pos else None
        ent = None
        if src == "input":
            ent = cone_cache.input_entropies(v.subject, epad)
            where = "this input"
        else:
            chosen = choose_set(v)
            if chosen is not None:
                items, fp, _ = chosen
                labels_present = [c for c in loaded.labels if any(it.label == c for it in items)]
                if fp.startswith("precomputed:"):
                    st.info("Per-head entropies need per-head maps: run precompute with `--maps heads` and read "
                            "`maps/<class>.npy`, or pick the shipped set here.")
                elif not labels_present:
                    st.info("This set has no labels of the model's classes.")
                else:
                    f1, f2 = st.columns(2)
                    cls = f1.selectbox("Class", labels_present, key="w_cone_ent_class",
                                       index=(labels_present.index(kind.featured_class)
                                              if kind.featured_class in labels_present else 0),
                                       format_func=lambda c: DISPLAY.get(c, c))
                    only = f2.checkbox("Correctly classified only (as the official code)", value=True,
                                       key="w_cone_ent_correct")
                    res = cone_cache.class_entropies(loaded, items, cls, epad, only)
                    if res.n_used == 0:
                        st.warning("No input of this class qualifies (none is classified correctly?): untick the box.")
                    else:
                        ent = res.curves
                        where = f"mean attention of {counted(res.n_used, DISPLAY.get(cls, cls) + ' input')}"
        if ent is not None:
            scaled = st.toggle("Divide the proper entropies by ln n (0 = one direction/key, 1 = uniform)",
                               key="w_cone_ent_scale")
            lbl = {k: d.label for k, d in ENTROPY_DOCS.items()}
            g1, g2 = st.columns(2)
            with g1:
                chart(fc.entropy_figure({k: ent[k] for k in conesets.FAITHFUL_ENTROPIES}, lbl,
                                        title=f"Official code — {where}"), "w_cone_ent_code")
            proper = {k: ent[k] / (float(ent["ln_n"]) if scaled else 1.0) for k in conesets.PROPER_ENTROPIES}
            with g2:
                chart(fc.entropy_figure(proper, lbl, title=f"Properly normalised — {where}",
                                        y_title="entropy / ln n" if scaled else "entropy (nats)",
                                        reference={("maximum 1" if scaled else "maximum ln n = "
                                                                               f"{float(ent['ln_n']):.2f}"):
                                                   1.0 if scaled else float(ent["ln_n"])}),
                      "w_cone_ent_proper")
            with st.expander("How each entropy is computed"):
                doc_list(ENTROPY_DOCS[k] for k in conesets.FAITHFUL_ENTROPIES + conesets.PROPER_ENTROPIES)
                st.markdown(f"n = {int(round(np.exp(float(ent['ln_n']))))} rows kept (not [SEP], not padding) for "
                            "the proper entropies; the official code's use the whole matrix.")
            ent_df = per_head_frame({k: ent[k] for k in conesets.FAITHFUL_ENTROPIES + conesets.PROPER_ENTROPIES})
            csv_button(ent_df, "attention_entropies.csv", "w_cone_ent_csv", "Download per-head CSV")
