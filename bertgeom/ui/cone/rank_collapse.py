"""Cone Index section *Rank collapse beside the cone*: Dong et al.'s relative residual from rank 1 per
hidden state, for the model as trained and with its skip connections or MLPs removed (their path
ablations, run by the forward engine), beside the cone index of the same tokens; for the current input
and over a set (widgets in, figures out; the measure is :mod:`bertgeom.analysis.collapse`, the set
runner :mod:`bertgeom.sets.collapse`).

References: Dong, Cordonnier & Loukas 2021 (arXiv:2103.03404) §2, §4, Fig. 2; Bonino et al. 2025
(arXiv:2502.12033) for the cone index.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.collapse import COLLAPSE_DOCS, PATH_VARIANTS
from bertgeom.cache import Memo, cached_arrays
from bertgeom.figures import cone as fc
from bertgeom.sets.views import RankCollapseArrays
from bertgeom.ui.cone.set_picker import choose_set
from bertgeom.ui.cone.view import View
from bertgeom.ui.widgets import chart, csv_button, doc_caption, guarded, progress

#: Curves of recent inputs and sets, in front of the disk.
MEMO = Memo("rank-collapse", 16)

NORM_LABELS = {"l1_inf": "‖·‖₁,∞ (Dong et al.'s composite norm)", "fro": "Frobenius (the row mean is the optimum)"}

EXPLAIN = (
    "**What this shows.** How far the token vectors of each layer are from all being the same vector: "
    "‖X − 1 meanᵀ‖ / ‖X‖, 0 when every row is equal (the matrix has rank 1). Dong et al. 2021 proved that "
    "self-attention alone loses rank doubly exponentially with depth; the skip connections stop it. The "
    "dashed and dotted curves rerun the model with its paths cut (no skip connections, no MLPs, neither; "
    "LayerNorms kept), as in their Fig. 2. The grey line is the cone index I/m of the same tokens: both ask "
    "whether the stream narrows, the residual by distance from one shared row, the cone index by the "
    "alignment of directions. **Reconstructed:** the row mean stands for their optimal x (what their plotting "
    "code uses; it is the exact optimum in the Frobenius norm). For bert-base-cased they report the full model "
    "going from 0.687 to 0.310 and attention alone reaching ~0 by layer 6."
)


def _curves_of_input(v: View, norm: str) -> dict:
    """The current input's four curves (one forward per variant, a progress step each), cached."""
    from bertgeom.analysis.collapse import rank_collapse_curves
    from bertgeom.sets.keys import rank_collapse_input_key
    from bertgeom.ui.workqueue import heavy

    enc = v.trace.encoded
    rows = enc.token_rows(v.token_set)
    key = rank_collapse_input_key(v.loaded, v.text, v.token_set, norm)

    def compute() -> dict:
        import time

        start = time.monotonic()
        out = {}
        with heavy("the rank-collapse forwards"), progress(
                f"Running the model {len(PATH_VARIANTS)} times (as trained and with its paths cut)…") as update:
            for k, name in enumerate(PATH_VARIANTS):
                update(k, len(PATH_VARIANTS), f"Running the model: {COLLAPSE_DOCS[name].label}…")
                out[name] = rank_collapse_curves(v.loaded, enc.input_ids, row_mask=rows, norm=norm,
                                                 variants=(name,))[name]
            update(len(PATH_VARIANTS), len(PATH_VARIANTS))
        out["seconds"] = np.asarray(time.monotonic() - start)
        return out

    return cached_arrays(key, compute, memo=MEMO)


def _curves_of_set(v: View, items, fingerprint: str, norm: str,
                   seconds_per_input: float | None) -> RankCollapseArrays | None:
    from bertgeom.sets.views import RANK_COLLAPSE_SET
    from bertgeom.ui.set_gate import set_view_starts
    from bertgeom.ui.view_runner import run_view

    key = RANK_COLLAPSE_SET.key_of(v.loaded, items, v.token_set, norm)
    if not set_view_starts(key, RANK_COLLAPSE_SET.memo, n_inputs=len(items), seconds_per_input=seconds_per_input,
                           what="the model's four path variants", model_id=v.model_id):
        return None
    return run_view(RANK_COLLAPSE_SET, v.loaded, items, v.token_set, norm,
                    usually_prepared=v.token_set == "content" and norm == "l1_inf")


def rank_collapse_section(v: View) -> None:
    """The section: the current input's curves beside its cone index, then the mean ± std over a set."""
    st.markdown("#### Rank collapse beside the cone index")
    st.caption(EXPLAIN)
    if v.m < 2:
        st.info("The residual needs at least two token vectors: pick a token set with more rows.")
        return
    norm = st.radio("Norm", list(NORM_LABELS), format_func=NORM_LABELS.get, horizontal=True, key="w_rc_norm")
    doc_caption(COLLAPSE_DOCS["ratio"], formula=None if norm == "l1_inf" else "‖X − 1 meanᵀ‖_F / ‖X‖_F")
    seconds = None
    with guarded("The rank-collapse curves"):
        curves = _curves_of_input(v, norm)
        seconds = float(curves["seconds"])
        x = np.arange(len(next(iter(curves.values()))))
        cone = np.asarray(v.cur["hidden_norm"], dtype=float) if "hidden_norm" in v.cur else None
        chart(fc.rank_collapse_figure(x, {k: curves[k] for k in PATH_VARIANTS}, cone=cone,
                                      cone_label=f"cone index {v.norm_label} (as trained)",
                                      title=f"This input's {v.m} tokens, per hidden state",
                                      norm_label="‖·‖₁,∞" if norm == "l1_inf" else "Frobenius"), "w_rc_input")
        frame = pd.DataFrame({"layer": x, **{f"residual_{k}": curves[k] for k in PATH_VARIANTS},
                              **({"cone_index": cone} if cone is not None else {})})
        csv_button(frame, "rank_collapse_per_layer.csv", "w_rc_input_csv")

    st.markdown("##### Over a set (mean ± std over its inputs)")
    chosen = choose_set(v)
    if chosen is None:
        return
    items, fp, _ = chosen
    if fp.startswith("precomputed:"):
        st.info("A precomputed results directory holds cone indices only; pick the shipped set or an upload.")
        return
    with guarded("Rank collapse over the set"):
        data = _curves_of_set(v, items, fp, norm, seconds)
        if data is None:
            return
        curves = np.asarray(data.curves, dtype=float)  # [N, V, L+1]
        if curves.shape[0] == 0:
            st.warning("No input of the set could be analysed.")
            return
        labels = np.asarray(data.labels).astype(str)
        groups = [""] + [c for c in (v.loaded.labels or ()) if c in set(labels)]
        if len(groups) > 1:
            g = st.selectbox("Inputs", groups, format_func=lambda c: "all inputs" if not c else v.display.get(c, c),
                             key="w_rc_class")
            pick = labels == g if g else np.ones(len(labels), bool)
        else:
            pick = np.ones(len(labels), bool)
        sel = curves[pick]
        names = [str(n) for n in np.asarray(data.variants)]
        mean = {n: sel[:, i].mean(axis=0) for i, n in enumerate(names)}
        std = {n: sel[:, i].std(axis=0) for i, n in enumerate(names)}
        x = np.arange(sel.shape[-1])
        chart(fc.rank_collapse_figure(x, mean, spread=std, title=f"Mean ± std over {int(pick.sum())} inputs",
                                      norm_label="‖·‖₁,∞" if norm == "l1_inf" else "Frobenius"), "w_rc_set")
        rows = [{"variant": n, "layer": int(i), "mean": mean[n][i], "std": std[n][i], "n_inputs": int(pick.sum())}
                for n in names for i in x]
        csv_button(pd.DataFrame(rows), "rank_collapse_over_set.csv", "w_rc_set_csv")
        if len(data.errors):
            st.caption(f"{len(data.errors)} inputs could not be analysed: " + "; ".join(map(str, data.errors[:3])))
