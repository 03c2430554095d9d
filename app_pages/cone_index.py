"""Cone Index per Layer: how narrow the cloud of token vectors is, layer by layer (Bonino 2025
(arXiv:2502.12033); docs/methods.md §9).

The page holds the settings every section shares and the current input's curve. Below them, one section
at a time (only the shown one runs), one module each under :mod:`bertgeom.ui.cone`, listed in the order
of its registry (``SECTIONS``)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.cone import STREAM_DOCS
from bertgeom.figures import cone as fc
from bertgeom.inputs import input_kind_of
from bertgeom.tokens import TOKEN_SET_LABELS, TOKEN_SETS
from bertgeom.ui import cone_cache
from bertgeom.ui.cone import SECTIONS
from bertgeom.ui.tabs import offered_tabs
from bertgeom.ui.cone.view import View
from bertgeom.ui.sidebar import current_subject
from bertgeom.ui.url_settings import value_from_url, value_to_url
from bertgeom.ui.widgets import chart, csv_button, doc_list, guarded, teaching

st.title("Cone Index per Layer")
st.caption(
    "How much do the token vectors of a layer point the same way? Scale each to length 1 and add "
    "them up: the length of the sum is the cone index I (m tokens: I = m if all point one way, "
    "≈ √m for unrelated directions). Follow it through the layers and through each sub-step."
)

teaching("cone_index", "What a narrow cone means — a two-minute read", icon=":material/school:")

subject = current_subject()  # the model and the input, resolved once for every section
loaded, trace = subject.loaded, subject.trace
kind = input_kind_of(loaded)
L, H = trace.num_layers, trace.num_heads
max_pos = min(int(loaded.max_tokens), 512)  # the paper's fixed length (or the model's, if shorter)

c1, c2, c3 = st.columns([3, 3, 3], vertical_alignment="bottom")
token_set = c1.selectbox("Token set", list(TOKEN_SETS), key="w_cone_tokens", format_func=TOKEN_SET_LABELS.get,
                         help="Which rows enter the cone index. " + " · ".join(f"{k}: {v}" for k,
                                                                               v in TOKEN_SETS.items()))
pad_ok = token_set == "all" and trace.encoded.n_tokens < max_pos
pad = c2.checkbox(f"Pad to {max_pos} as the paper (PAD rows included)", key="w_cone_pad", disabled=not pad_ok,
                  help=f"The official code read fixed-length inputs of {max_pos} positions and counted the padding "
                       "rows too. Only with 'all positions'; runs the model once more on the padded input.")
pad_to = max_pos if (pad and pad_ok) else None
form = c3.selectbox("Vectors", ["unit", "raw"], key="w_cone_form",
                    format_func={"unit": "unit length first (official code)", "raw": "raw ‖Σx‖ (paper's formula)"}.get,
                    help="The official code scales every row to length 1 before summing; the paper's formula "
                         "sums the raw vectors. With raw vectors the normalised value is I / Σ‖x‖.")
unit = form == "unit"
norm_label = "I / m" if unit else "I / Σ‖x‖"

# ------------------------------------------------------------------ the current input
cur = None
with guarded("The cone index of this input"):
    cur = cone_cache.input_cones(subject, token_set, pad_to, unit)
if cur is None:
    st.stop()
m = int(cur["m"])
if m == 0:
    st.warning("The chosen token set holds no row for this input (it has no content token): pick another token set.")
    st.stop()
hid, hid_n = cur["hidden"], cur["hidden_norm"]
k1, k2, k3, k4, k5 = st.columns(5)
k1.metric("rows m", m, help=f"of {int(cur['n_positions'])} positions")
k2.metric("isotropic √m", f"{np.sqrt(m):.2f}")
k3.metric("I, embeddings (layer 0)", f"{hid[0]:.2f}")
k4.metric(f"I, last layer ({L})", f"{hid[-1]:.2f}", delta=f"{hid[-1] - hid[0]:+.2f}", delta_color="off")
k5.metric(f"{norm_label}, last layer", f"{hid_n[-1]:.3f}")
what = f"this {kind.words.noun}" if kind.words.noun != "sentence" else "this input"
chart(fc.cone_curve({what: hid}, m, normalized_curves={what: hid_n}, normalized_label=norm_label,
                    raw_reference=unit,
                    title=f"Cone index of the hidden states, layers 0…{L} — {TOKEN_SET_LABELS[token_set]}, m = {m}"),
      "w_cone_curve")
curve_df = pd.DataFrame({"layer": np.arange(L + 1), "I": hid, "I_over_m" if unit else "I_over_sum_norms": hid_n,
                         "m": m, "sqrt_m": np.sqrt(m), "token_set": token_set, "padded_to": pad_to or 0})
csv_button(curve_df, "cone_index_per_layer.csv", "w_cone_curve_csv")
if pad_to:
    st.caption(f"ℹ️ Padded to {pad_to} positions: {pad_to - trace.encoded.n_tokens} PAD rows count in m "
               "(the official code's choice; they are near-duplicates and inflate I).")

st.divider()
view = View(subject, st.session_state["layer"], st.session_state["head"],
            token_set=token_set, pad_to=pad_to, unit=unit, max_pos=max_pos, cur=cur, section="")
offered = {s.key: s for s in offered_tabs(SECTIONS, view)}
value_from_url("w_cone_section", offered)
if st.session_state.get("w_cone_section") not in offered:  # a section this model does not offer, or none yet
    st.session_state["w_cone_section"] = next(iter(offered))
section = st.segmented_control("Show", list(offered), format_func=lambda k: offered[k].title, required=True,
                               key="w_cone_section")
value_to_url("w_cone_section")
offered[section].render(replace(view, section=section))


with st.expander("Definitions and where they come from"):
    st.markdown("**Cone index** (official code, `distance_cone`): `I = ‖Σ_i x_i/‖x_i‖‖`, 0 ≤ I ≤ m; "
                "`I/m = sqrt(mean cos(x_i, x_j))`. The paper writes `‖Σ x‖` (the *raw* option).")
    doc_list(STREAM_DOCS[k] for k in ("layer_input", "head_output", "post_attention", "layer_output",
                                      "multihead_faithful", "head_output_faithful"))
    st.markdown("Token sets: " + "; ".join(f"**{TOKEN_SET_LABELS[k]}** — {v}" for k, v in TOKEN_SETS.items()) + ".")
    st.caption("The cone index and the streams are concepts of Bonino et al. 2025 (arXiv:2502.12033); their recipes "
               "follow the authors' released code, and our additions say so. Full definitions: "
               "[docs/methods.md §9](/?view=methods&section=9).")
