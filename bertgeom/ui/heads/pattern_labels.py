"""The pattern rules' widgets that the Attention Heads page and its tabs share: the thresholds
(sliders kept in session state, so they persist across pages) and Clark's behaviours found on an input.

References: Clark et al. 2019 (arXiv:1906.04341), Kovaleva et al. 2019 (arXiv:1908.08593),
Bonino et al. 2025 (arXiv:2502.12033); the rules are in :mod:`bertgeom.analysis.patterns`.
"""

from __future__ import annotations


import streamlit as st

from bertgeom.analysis.patterns import PatternThresholds, clark_findings, describe_thresholds


def thresholds() -> PatternThresholds:
    """Current thresholds: slider values kept in session state (persist across pages)."""
    th = PatternThresholds()
    for d in describe_thresholds(th):
        v = st.session_state.get(f"w_th_{d['name']}")
        if v is not None:
            setattr(th, d["name"], type(d["default"])(v))
    return th


def _reset_thresholds() -> None:
    for d in describe_thresholds():
        st.session_state[f"w_th_{d['name']}"] = float(d["default"])


def threshold_sliders() -> None:
    groups = {"kovaleva": "Kovaleva classes (reconstructed)", "gates": "Bonino gates (proposed)",
              "clark": "Clark behaviours (notebook)", "common": "Confidence"}
    items = describe_thresholds()
    cols = st.columns(2)
    for i, (g, title) in enumerate(groups.items()):
        with cols[i % 2]:
            st.markdown(f"**{title}**")
            for d in (x for x in items if x["group"] == g):
                key = f"w_th_{d['name']}"
                if key not in st.session_state:
                    st.session_state[key] = float(d["default"])
                label = d["name"].removeprefix(f"{g}_").removeprefix("kov_").removeprefix("gate_").replace("_", " ")
                st.slider(label, float(d["min"]), float(d["max"]),
                          step=float(d["step"]), key=key, help=d["help"], persist_state="session")
    st.button("Reset to the defaults", on_click=_reset_thresholds, key="w_th_reset")


def show_clark_findings(lab: dict, feats, *, what: str = "this input") -> None:
    """Clark's behaviours (and the feature value behind each) found on ``what``."""
    st.markdown(f"**Clark behaviours on {what}** (value of the feature behind each label in brackets):")
    st.markdown("\n".join(clark_findings(lab, feats)))
