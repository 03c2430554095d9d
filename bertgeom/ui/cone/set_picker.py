"""The set the Cone Index page's set sections read (shipped, uploaded, or a precomputed results
directory), chosen with one widget row and loaded through :mod:`bertgeom.ui.cone_cache` (a precomputed
folder through :mod:`bertgeom.ui.cone.results_folders`); shared by the sections *Per class*, *Data
distribution*, *Attention entropies* and *IsoScore*."""

from __future__ import annotations

import numpy as np
import streamlit as st

from bertgeom.safety import plain
from bertgeom.sets import cone as conesets
from bertgeom.sets.inputs import set_fingerprint, shipped_set
from bertgeom.ui import cone_cache
from bertgeom.ui.cone import results_folders
from bertgeom.ui.cone.view import View
from bertgeom.ui.widgets import errors_expander, read_set_upload
from bertgeom.tables import counted, word_for

#: Inputs read from an upload (bounded work).
MAX_SET = 400


def choose_set(v: View):
    """Set source widgets; returns (items, fingerprint, note) or None."""
    loaded, kind = v.loaded, v.kind
    results = results_folders.results_dirs() if kind.can("precomputed_results") else []
    if kind.labelled_uploads:
        sources = ["shipped", "upload"] + (["precomputed"] if results else [])
        src = st.radio("Set", sources, horizontal=True, key="w_cone_set",
                       format_func={"shipped": f"shipped: {kind.words.shipped_set_description}",
                                    "upload": f"upload {kind.words.set_upload_label}",
                                    "precomputed": "a precomputed results directory"}.get)
    else:
        src = "shipped"
    if src == "precomputed":
        path = st.selectbox("Results directory (from `python -m bertgeom precompute`)", results, key="w_cone_results")
        note = results_folders.results_note(path, loaded.weights_hash, v.kind.words.noun)
        st.caption(note)
        return (), f"precomputed:{path}", note
    if src == "shipped":
        items = shipped_set(loaded.spec.input_kind)
        labelled = sum(it.label is not None for it in items)
        note = (f"{len(items)} {kind.words.plural}: {kind.words.shipped_set_description}"
                + (", labelled with their class." if labelled else " (no labels)."))
    else:
        u1, u2 = st.columns(2)
        upload = u1.file_uploader(kind.words.set_upload_label.capitalize(), type=list(kind.set_upload_types),
                                 key="w_cone_set_upload")
        tsv = u2.file_uploader("Labels (optional TSV: name + label)", type=["tsv", "txt", "csv"], key="w_cone_labels",
                               help="Without it, labels are read from a '|label' suffix of each record's name.")
        if upload is None:
            st.info(f"Upload {kind.words.set_upload_label} to analyse it.")
            return None
        items = read_set_upload(kind, upload.name, upload.getvalue(), tsv.getvalue() if tsv is not None else b"")
        if items is None:
            return None
        note = f"Uploaded set '{plain(upload.name)}': {counted(len(items), 'record')}."
        n_renamed = sum("#" in it.name and not it.text.startswith(f">{it.name}\n") for it in items)
        if n_renamed:
            note += (f" {counted(n_renamed, 'record')} {word_for(n_renamed, 'shares', 'share')} a name with an "
                     f"earlier one and {word_for(n_renamed, 'is', 'are')} told apart as name#2, #3…")
        if len(items) > MAX_SET:
            items = items[:MAX_SET]
            note += f" Only the first {MAX_SET} are analysed."
        if not any(it.label for it in items):
            note += " No labels were found, so the set is shown as one group."
    st.caption(note)
    return tuple(items), set_fingerprint(items), note


def load_set(v: View):
    """The chosen set's per-input results (cached), after the correctly-classified filter:
    ``(items, fingerprint, data, labelled)``, or None when there is nothing to show."""
    loaded, token_set, pad_to, section = v.loaded, v.token_set, v.pad_to, v.section
    chosen = choose_set(v)
    if chosen is None:
        return None
    items, fp, _ = chosen
    if fp.startswith("precomputed:"):  # computed elsewhere (e.g. on a Ray cluster): read, don't run the model
        data = results_folders.precomputed_set(fp.split(":", 1)[1])
    else:
        data = cone_cache.set_cones(loaded, items, token_set, pad_to)
    errors_expander(zip(data.error_names.tolist(), data.error_messages.tolist()))
    if len(data) == 0:
        st.warning("No input of the set could be analysed.")
        return None
    labelled = data.labelled
    if loaded.spec.is_classifier and labelled:
        acc = float(np.mean(data.correct[data.labels != ""]))
        only = st.checkbox(f"Correctly classified inputs only (as the official code; accuracy here {acc:.0%})",
                           key=f"w_cone_correct_{section}")
        if only:
            data = data.subset(data.correct)
            if len(data) == 0:
                st.warning("No input of the set is classified correctly by this model: untick the box.")
                return None
    return items, fp, data, labelled


def group_order(data: conesets.ConeSet, loaded) -> list[str]:
    """The set's classes in the model's label order, then any other label in alphabetical order."""
    present = set(data.labels.tolist())
    order = [c for c in loaded.labels if c in present]
    return order + sorted(present - set(order))


def groups_of(data: conesets.ConeSet) -> np.ndarray:
    """One group per input: its label ("" when it has none)."""
    return data.labels
