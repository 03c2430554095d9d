"""Subspace Directions tab *Faithful vs correct*: how far the attention recomputed as the paper's official
code did (transposed slices, no biases, no mask, the next layer's output, padded to 512) is from the
model's own, per head and side by side for the selected head.

References: Bonino, Ghione & Cirrincione 2025 (arXiv:2502.12033); docs/methods.md §8.3.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.figures import subspace as fs
from bertgeom.safety import error_text, plain
from bertgeom.tables import per_head_frame
from bertgeom.ui import subspace_cache as sc
from bertgeom.ui.subspace.view import View, file_safe
from bertgeom.ui.widgets import chart, csv_button

def faithful_tab(v: View) -> None:
    """The tab: the faithful attention's distance from the model's, every head and the selected one."""
    model_id, wh, text, eps, token_set = v.model_id, v.wh, v.text, v.eps, v.token_set
    layer, head, HL, trace = v.layer, v.head, v.HL, v.trace
    st.caption("The official code recomputed attention by hand with the *transposed* head slices X·W[:, s], "
               "without biases or padding mask, feeding each layer the **next** layer's output, on inputs "
               "**padded to 512** positions ([docs/methods.md §8.3](/?view=methods&section=8.3)). Faithful mode does "
               "all four. Switch on *Faithful mode* above to see the faithful values in the other tabs too.")
    try:
        _, dev = sc.data_geometry_for(v.subject, eps, token_set, True)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        st.error(f"The faithful attention could not be computed for this input: {plain(error_text(exc))}")
        return
    left, right = st.columns([5, 4], gap="large")
    with left:
        st.markdown("#### Faithful vs model, every head")
        top = float(np.nanmax(dev["row_tv"])) if np.isfinite(dev["row_tv"]).any() else 1.0
        chart(fs.scalar_grid(dev["row_tv"], label="row TV", selected=(layer, head), zrange=(0.0, max(top, 1e-6)),
                           colorscale="Purples"), "w_sub_fgrid", selects_head=True)
        st.caption("Mean over query rows of ½·Σ_j |A_faithful − A_correct|: 0 = identical rows, 1 = disjoint.")
    with right:
        st.markdown(f"#### {HL}")
        st.dataframe(pd.DataFrame({
            "deviation": ["mean |A_f − A_c|", "max |A_f − A_c|", "mean row TV distance"],
            "value": [float(dev[k][layer, head]) for k in ("mean_abs", "max_abs", "row_tv")],
        }), hide_index=True, width="stretch")
        csv_button(per_head_frame(dev), f"faithful_deviation_{file_safe(model_id)}.csv", "w_sub_dl_dev",
                  "Download every head (CSV)")
        st.caption("The grid and the table compare the padded faithful map with the model's: attention "
                   "the faithful map gives to PAD positions counts as deviation. The maps below are the "
                   "unpadded ones (the faithful one from the next layer's output), so they can sit side by side.")
    Af = sc.cached_faithful_layer(v.subject, layer)[head]
    chart(fs.attention_comparison_figure(trace.attentions[layer, head], Af, trace.axis_labels,
                                                   layer=layer, head=head), "w_sub_compare")

