"""Attention Heads: the head atlas (Clark, Kovaleva, Guan-style, Bonino gates).

Top: the grid of every head (colour = a feature or a pattern label) and the selected head's
labels with the feature values behind them.  Below, lazy tabs (only the open one runs): the
selected head's map, the table of all heads, statistics over a set of inputs, head
similarity, head disabling and a checkpoint comparison.  The selected head lives in
``session_state["layer"/"head"]`` (0-based) and every clickable chart sets it.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom import figures
from bertgeom import figures_heads as fh
from bertgeom.attention import softmax
from bertgeom.heads import FEATURE_DOCS, feature_doc
from bertgeom.patterns import (
    DISPLAY_NAMES,
    PatternThresholds,
    classify_heads,
    describe_thresholds,
    label_distribution,
)
from bertgeom.ui import heads_cache as hc
from bertgeom.ui.cache import cached_head_features
from bertgeom.ui.sidebar import current_input_text, current_model_and_trace
from bertgeom.ui.state import select_head

TAXONOMIES = {"kovaleva": "Kovaleva class", "gates": "Bonino gate", "clark": "Clark behaviour"}
#: Features the label rules read, shown as the selected head's feature vector.
VECTOR = ["self", "prev", "next", "bwd", "fwd", "cls", "sep", "punct", "special", "verticality", "col_content",
          "delta_row", "max_weight", "entropy_norm", "k90_frac", "block_mass", "segment_mass", "template_residual"]
#: Guan-style clustering features (seed_methods_spec §4.6 f33: distances f15-f18, plus sink and entropy).
GUAN_FEATURES = ["mean_dist_norm", "signed_offset_norm", "local_1", "local_2", "local_4", "sink", "entropy_norm",
                 "self", "prev", "next"]
CAVEAT = (
    "**How to read the labels.** They come from deterministic rules on the features, not from the papers' "
    "own classifiers: Kovaleva et al. labelled maps with a CNN that was never released, and Bonino et al. "
    "name their gates without operational definitions, so both rule sets here are *reconstructions* "
    "(seed_methods_spec §2.2/§5, paper_spec §2.3) whose thresholds you can move. Clark et al.'s behaviour "
    "thresholds are those of their notebook. Confidence is a soft margin to the thresholds (0.5 = on the edge)."
)

st.title("Attention Heads")
st.caption(
    "Each square is one head (row = layer, column = head, numbered from 1). Click a square, a point in any "
    "head map below, or use the boxes to select a head; colour the grid by any per-head statistic or label."
)

loaded, trace = current_model_and_trace()
model_id = st.session_state["model_id"]
is_spike = loaded.spec.input_kind == "spike"
text = current_input_text(loaded)
table = cached_head_features(model_id, text)
L, H = trace.num_layers, trace.num_heads


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _on_pick(key: str) -> None:
    picked = figures.picked_head(st.session_state.get(key))
    if picked is not None and 0 <= picked[0] < L and 0 <= picked[1] < H:
        select_head(*picked)


def _on_widget_select() -> None:
    select_head(st.session_state["w_layer"] - 1, st.session_state["w_head"] - 1)


def _chart(fig, key: str | None = None, clickable: bool = False) -> None:
    """Every figure exports (PLOTLY_CONFIG); clickable head charts select the head."""
    if clickable:
        st.plotly_chart(fig, key=key, on_select=partial(_on_pick, key), selection_mode="points",
                        config=figures.PLOTLY_CONFIG)
    else:
        st.plotly_chart(fig, key=key, config=figures.PLOTLY_CONFIG)


def _csv(df: pd.DataFrame, filename: str, key: str, label: str = "Download CSV") -> None:
    st.download_button(label, df.to_csv(index=False).encode("utf-8"), file_name=filename, mime="text/csv",
                       key=key, icon=":material/download:", on_click="ignore")


def _label_text(name: str) -> str:
    return " + ".join(DISPLAY_NAMES.get(p, p) for p in str(name).split("+"))


def _label_grid(arr: np.ndarray) -> np.ndarray:
    """Display names of an array of labels (object dtype: names are never truncated)."""
    return np.array([_label_text(x) for x in np.asarray(arr).ravel()], dtype=object).reshape(np.shape(arr))


def _head_names() -> list[str]:
    return [figures.head_label(l, h) for l in range(L) for h in range(H)]


def _thresholds() -> PatternThresholds:
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


def _threshold_sliders() -> None:
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


def _hover_labels(labels: list[str], domains: list[str] | None) -> list[str]:
    if domains is None:
        return [str(x) for x in labels]
    return [f"{x} · {d}" if d else str(x) for x, d in zip(labels, domains)]


def _arcs_frame(attention: np.ndarray, labels: list[str], theta: float, domains: list[str] | None) -> pd.DataFrame:
    arcs = figures.top_arcs(attention, labels, theta=theta, limit=200)
    df = pd.DataFrame(arcs)
    if domains is not None and len(df):
        df.insert(2, "query_domain", [domains[i] or "-" for i in df["query_pos"]])
        df.insert(3, "key_domain", [domains[j] or "-" for j in df["key_pos"]])
    return df


def _labels_frame(lab: dict, feats) -> pd.DataFrame:
    """One row per head: the three labels with confidence, then the features."""
    rows = []
    for l in range(L):
        for h in range(H):
            r = {"layer": l + 1, "head": h + 1,
                 "kovaleva": lab["kovaleva"].labels[l, h], "kovaleva_conf": round(float(lab["kovaleva"].confidence[l, h]), 3),
                 "gate": lab["gates"].labels[l, h], "gate_conf": round(float(lab["gates"].confidence[l, h]), 3),
                 "clark": lab["clark"].labels[l, h], "clark_conf": round(float(lab["clark"].confidence[l, h]), 3)}
            rows.append(r)
    names = [n for n in feats if n in FEATURE_DOCS] if isinstance(feats, dict) else feats.names
    values = pd.DataFrame({n: np.asarray(feats[n], dtype=float).reshape(L * H) for n in names})
    return pd.concat([pd.DataFrame(rows), values], axis=1)


def _found_lines(lab: dict, feats, *, what: str = "this input") -> None:
    """Clark's behaviours (and the feature value behind each) found on ``what``."""
    clark = lab["clark"]
    rules = {"next": ("next", "next-token mass"), "prev": ("prev", "previous-token mass"),
             "cls": ("cls", "[CLS] mass"), "sep": ("sep", "[SEP] mass"), "punct": ("punct", ". , mass"),
             "broad": ("entropy", "entropy, nats")}
    lines = []
    for cls_name, (feat, unit) in rules.items():
        heads = clark.heads_with(cls_name)
        vals = np.asarray(feats[feat])
        if heads:
            shown = ", ".join(f"{figures.head_label(l, h)} ({vals[l, h]:.2f})" for l, h in heads[:12])
            more = f" and {len(heads) - 12} more" if len(heads) > 12 else ""
            lines.append(f"- **{DISPLAY_NAMES[cls_name]}** ({unit}): {shown}{more}")
        else:
            l, h = np.unravel_index(int(np.argmax(vals)), vals.shape)
            lines.append(f"- {DISPLAY_NAMES[cls_name]}: no head passes the threshold "
                         f"(strongest {unit}: {figures.head_label(l, h)}, {vals[l, h]:.2f})")
    st.markdown(f"**Clark behaviours on {what}** (value of the feature behind each label in brackets):")
    st.markdown("\n".join(lines))


# ------------------------------------------------------------------------------------------
# labels, grid and the selected head
# ------------------------------------------------------------------------------------------

th = _thresholds()
labels = classify_heads(table, th)
grid_hover = np.array([
    [f"Kovaleva: {_label_text(labels['kovaleva'].labels[l, h])} ({labels['kovaleva'].confidence[l, h]:.2f})"
     f"<br>gate: {_label_text(labels['gates'].labels[l, h])} ({labels['gates'].confidence[l, h]:.2f})"
     f"<br>Clark: {_label_text(labels['clark'].labels[l, h])}" for h in range(H)] for l in range(L)
], dtype=object)

feature_names = [n for n in table.names if n in FEATURE_DOCS]
colour_options = feature_names + [f"label:{t}" for t in TAXONOMIES]


def _colour_name(opt: str) -> str:
    if opt.startswith("label:"):
        return f"Pattern label: {TAXONOMIES[opt[6:]]}"
    return f"{FEATURE_DOCS[opt][0]} ({opt})"


layer, head = st.session_state["layer"], st.session_state["head"]
left, right = st.columns([5, 4], gap="large")
with left:
    if st.session_state.get("w_feature") not in colour_options:
        st.session_state["w_feature"] = "prev" if "prev" in feature_names else feature_names[0]
    colour = st.selectbox("Colour the grid by", colour_options, key="w_feature", format_func=_colour_name)
    if colour.startswith("label:"):
        lab = labels[colour[6:]]
        st.caption(f"**{TAXONOMIES[colour[6:]]}** per head; hover for all three labels. {lab.note}")
        grid = figures.head_grid(lab.confidence, categories=_label_grid(lab.primary), colour_label="confidence",
                                selected=(layer, head), hover_text=grid_hover)
    else:
        flabel, formula, source = FEATURE_DOCS[colour]
        st.caption(f"**{flabel}** = `{formula}` — {source}")
        grid = figures.head_grid(table[colour], colour_label=colour, selected=(layer, head), hover_text=grid_hover)
    _chart(grid, "w_grid", clickable=True)

with right:
    st.session_state["w_layer"], st.session_state["w_head"] = layer + 1, head + 1
    c1, c2 = st.columns(2)
    c1.number_input("Layer", min_value=1, max_value=L, step=1, key="w_layer", on_change=_on_widget_select)
    c2.number_input("Head", min_value=1, max_value=H, step=1, key="w_head", on_change=_on_widget_select)
    st.markdown(f"#### {figures.head_label(layer, head)}")
    kov, gate, clark = labels["kovaleva"], labels["gates"], labels["clark"]
    st.markdown(
        f"Kovaleva: **{_label_text(kov.labels[layer, head])}** ({kov.confidence[layer, head]:.2f})  \n"
        f"Bonino gate: **{_label_text(gate.labels[layer, head])}** ({gate.confidence[layer, head]:.2f})  \n"
        f"Clark: **{_label_text(clark.labels[layer, head])}** ({clark.confidence[layer, head]:.2f})"
    )
    ki = kov.inputs
    st.caption(
        f"Kovaleva's rule reads V = {ki['V'][layer, head]:.2f} (strongest column or sink mass), "
        f"Dg = {ki['Dg'][layer, head]:.2f} (self + prev + next), B = {ki['B'][layer, head]:.2f} (block mass); "
        f"gates read m_spec = {gate.inputs['m_spec'][layer, head]:.2f}. Confidence in brackets; "
        "the caveat is under *All heads*."
    )
    vec = [n for n in VECTOR if n in table]
    marks = {"prev": th.clark_prev, "next": th.clark_next, "cls": th.clark_cls, "sep": th.clark_sep,
             "punct": th.clark_punct, "special": th.gate_closed, "bwd": th.gate_candidate, "fwd": th.gate_candidate,
             "self": th.gate_candidate, "col_content": th.gate_candidate, "block_mass": th.gate_candidate,
             "delta_row": th.gate_directional_delta, "entropy_norm": th.gate_open_entropy, "k90_frac": th.gate_open_k90}
    _chart(fh.feature_bars(vec, [float(table[n][layer, head]) for n in vec],
                           labels=[f"{FEATURE_DOCS[n][0]} ({n})" for n in vec],
                           hover=[f"{n} = {FEATURE_DOCS[n][1]}<br>{FEATURE_DOCS[n][2]}" for n in vec],
                           marks=marks, title="Feature vector (red ticks: rule thresholds)"), "w_vector")
    with st.expander("Thresholds of the pattern rules"):
        _threshold_sliders()

# ------------------------------------------------------------------------------------------
# tabs (lazy: only the open tab runs)
# ------------------------------------------------------------------------------------------

TABS = ["Head detail", "All heads", "Over a set of inputs", "Head similarity", "Disable heads", "Compare checkpoints"]
tabs = dict(zip(TABS, st.tabs(TABS, key="heads_tab", on_change="rerun")))
domains = trace.encoded.extra.get("domains") if is_spike else None


def _open(name: str) -> bool:
    return tabs[name].open is not False  # None (no state tracking) counts as open


# --- Head detail --------------------------------------------------------------------------
if _open("Head detail"):
    with tabs["Head detail"]:
        attention = trace.attentions[layer, head]
        axis = trace.axis_labels
        st.markdown(f"#### {figures.head_label(layer, head)} — who attends to whom")
        st.caption("Rows are queries (the token that looks), columns are keys (the token looked at); each row sums to 1."
                   + (" Spike tokens are labelled by amino-acid range; hover shows the spike domain." if is_spike else ""))
        theta = st.slider("Threshold θ (hide weights below)", 0.0, 1.0, 0.3, 0.01, key="w_theta",
                          help="The 2025 paper masks attention below θ = 0.3 in its maps.")
        if float(attention.max()) < theta:
            st.info(f"No weight of this head reaches θ = {theta:.2f} (its largest is {attention.max():.3f}): "
                    "lower θ to see the map.")
        _chart(fh.attention_map(attention, axis, hover_labels=_hover_labels(axis, domains), theta=theta), "w_heatmap")
        arcs = _arcs_frame(attention, axis, theta, domains)
        with st.expander(f"Strongest links (weight ≥ {theta:.2f}): {len(arcs)}", expanded=False):
            if len(arcs):
                st.dataframe(arcs, hide_index=True, width="stretch")
                _csv(arcs, f"arcs_L{layer + 1}H{head + 1}.csv", "w_arcs_csv")
            else:
                st.write("No link reaches the threshold; lower θ to see weaker ones.")
        if len(trace.tokens) <= 40:
            with st.expander("Line view (each line: a query token on the left reading a key on the right)"):
                _chart(figures.token_lines(attention, trace.tokens, theta=max(theta, 0.05)), "w_lines")
        with st.expander("Every feature of this head"):
            rows = [{"feature": n, "value": float(table[n][layer, head]), "label": feature_doc(n)[0],
                     "formula": feature_doc(n)[1], "source": feature_doc(n)[2]}
                    for n in table.names + table.hist_labels]
            fdf = pd.DataFrame(rows)
            st.dataframe(fdf, hide_index=True, width="stretch")
            _csv(fdf, f"features_L{layer + 1}H{head + 1}.csv", "w_head_feat_csv")

# --- All heads ----------------------------------------------------------------------------
if _open("All heads"):
    with tabs["All heads"]:
        st.info(CAVEAT)
        _found_lines(labels, table)
        c1, c2 = st.columns(2)
        with c1:
            _chart(fh.label_counts(labels["kovaleva"].counts(), display=DISPLAY_NAMES, title="Kovaleva classes"),
                   "w_counts_kov")
        with c2:
            _chart(fh.label_counts(labels["gates"].counts(), display=DISPLAY_NAMES, title="Bonino gates"),
                   "w_counts_gate")
        st.markdown("##### Every head: labels and features")
        df = _labels_frame(labels, table)
        default_cols = ["layer", "head", "kovaleva", "kovaleva_conf", "gate", "gate_conf", "clark", "clark_conf",
                        "prev", "next", "self", "cls", "sep", "punct", "entropy", "entropy_norm", "max_weight",
                        "verticality", "k90_median", "mean_dist"]
        cols = st.multiselect("Columns", list(df.columns), default=[c for c in default_cols if c in df.columns],
                              key="w_table_cols", persist_state="session")
        st.caption("Click a column header to sort. The CSV holds every column, including the distance histogram.")
        st.dataframe(df[cols or ["layer", "head"]], hide_index=True, width="stretch", height=420)
        full = pd.concat([df, pd.DataFrame({n: np.asarray(table[n]).reshape(L * H) for n in table.hist_labels})], axis=1)
        _csv(full, "head_features.csv", "w_table_csv", "Download the table (CSV)")
        with st.expander("Class scores behind each label"):
            tax = st.radio("Taxonomy", list(TAXONOMIES), format_func=TAXONOMIES.get, horizontal=True,
                           key="w_scores_tax")
            sdf = pd.DataFrame(labels[tax].to_rows())
            st.dataframe(sdf, hide_index=True, width="stretch", height=300)
            _csv(sdf, f"labels_{tax}.csv", "w_scores_csv")

# --- Over a set of inputs -----------------------------------------------------------------


def _set_summary() -> hc.SetSummary:
    """The shipped set's statistics, with a progress bar while the model runs over it."""
    bar = None
    if not hc.set_is_ready(model_id):
        bar = st.progress(0.0, text="Running the model over the set…")

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.progress(min(1.0, done / max(total, 1)), text=f"Running the model over the set… {done}/{total}")

    summary = hc.set_summary(model_id, progress)
    if bar is not None:
        bar.empty()
    return summary


def _set_tab() -> None:
    items = hc.set_items(loaded.spec.input_kind)
    what = (f"the {len(items)} labelled real genomes shipped with bertgeom (validation_small, held out from training)"
            if is_spike else f"the {len(items)} English sentences shipped with bertgeom")
    st.caption(f"Statistics over {what}. The model runs once over the set; the result is cached on disk "
               "(keyed by the model's weights and the set), so later visits are instant.")
    summary = _set_summary()
    usable = summary.usable()
    if summary.classifier:
        st.markdown(f"**{summary.n}** inputs analysed, **{int(usable.sum())}** predicted correctly "
                    "(the paper's recipe keeps only correct predictions).")
    else:
        st.markdown(f"**{summary.n}** inputs analysed (an encoder: all inputs are used).")
    if summary.errors:
        with st.expander(f"{len(summary.errors)} input(s) could not be analysed"):
            st.dataframe(pd.DataFrame(summary.errors, columns=["input", "reason"]), hide_index=True)
    if not usable.any():
        st.warning("No input of the set was predicted correctly, so there is nothing to average.")
        return
    classes = summary.classes() if summary.classifier else []
    options = [None] + classes
    if st.session_state.get("w_set_class") not in options:  # one class first: its mean map needs a few passes only
        st.session_state["w_set_class"] = classes[0] if classes else None
    views = ["Class-mean map", "Feature distributions"] + (["Domain proportions"] if summary.has_domains else [])
    c1, c2 = st.columns([2, 3])
    if summary.classifier:
        cls = c1.selectbox("Class", options, key="w_set_class",
                           format_func=lambda c: "all classes" if c is None else f"{c} ({int(summary.mask(c).sum())} correct)")
    else:
        cls = None
    view = c2.radio("View", views, horizontal=True, key="w_set_view")
    mask = summary.mask(cls)
    who = ("all classes" if summary.classifier else "all inputs") if cls is None else cls

    if view == "Class-mean map":
        names = tuple(str(x) for x in np.asarray(summary.names)[mask])
        cm = hc.class_mean(model_id, loaded.weights_hash, names)
        st.markdown(f"#### {figures.head_label(layer, head)} — mean map of {who} ({cm['n']} inputs)")
        st.caption("Paper recipe (paper_spec §2.3): correct predictions only; each map zeroed from the first [SEP] on "
                   "([SEP] and [PAD] removed, [CLS] kept), then averaged. "
                   + ("" if is_spike else "Sentences differ in length and words, so positions, not words, are averaged."))
        c1, c2 = st.columns(2)
        theta_plot = c1.slider("Hide mean weights below", 0.0, 0.5, 0.01, 0.005, key="w_cm_theta",
                               help="The paper's plots hide entries below theta_plot = 0.01.")
        high = c2.toggle("High-confidence sum instead (Σ A·1[A ≥ 0.3], not divided)", key="w_cm_high")
        M = np.asarray(cm["theta_sum" if high else "mean"][layer, head], dtype=np.float32)
        doms = cm["domains"] if is_spike else None
        _chart(fh.attention_map(M, cm["labels"], hover_labels=_hover_labels(cm["labels"], doms), theta=theta_plot,
                                colour_label="sum" if high else "mean"), "w_cm_map")
        arcs = _arcs_frame(M, cm["labels"], max(theta_plot, 1e-9), doms)
        st.markdown(f"{len(arcs)} entries ≥ {theta_plot:.3f} (at most 200 listed)")
        if len(arcs):
            st.dataframe(arcs, hide_index=True, width="stretch", height=240)
            _csv(arcs, f"class_mean_{who}_L{layer + 1}H{head + 1}.csv", "w_cm_csv")

    elif view == "Feature distributions":
        fnames = [n for n in summary.feature_names if n in FEATURE_DOCS]
        if st.session_state.get("w_set_feature") not in fnames:
            st.session_state["w_set_feature"] = "k90_frac" if "k90_frac" in fnames else fnames[0]
        feat = st.selectbox("Feature", fnames, key="w_set_feature", format_func=lambda n: f"{FEATURE_DOCS[n][0]} ({n})")
        mean = summary.mean_table(mask)
        values = summary.feature(feat)
        c1, c2 = st.columns([5, 4])
        with c1:
            st.markdown(f"Mean of **{feat}** over {who} ({int(mask.sum())} inputs); click a head to select it.")
            _chart(figures.head_grid(mean[feat], colour_label=feat, selected=(layer, head)), "w_set_grid", clickable=True)
        with c2:
            groups = ({c: values[summary.mask(c), layer, head] for c in classes} if (summary.classifier and cls is None)
                      else {who: values[mask, layer, head]})
            _chart(fh.distribution(groups, kind="box", title=f"{figures.head_label(layer, head)}: {feat} per input",
                                   ylabel=feat), "w_set_box")
        k90_groups = ({c: summary.k90_rows(summary.mask(c), layer, head) for c in classes}
                      if (summary.classifier and cls is None) else {who: summary.k90_rows(mask, layer, head)})
        _chart(fh.distribution(k90_groups, kind="violin", ylabel="k90 (keys holding 90% of a row)",
                               title=f"{figures.head_label(layer, head)}: metastable-state size k90 of every query row "
                                     "(paper_spec §2.5)"), "w_set_k90")
        per_input = summary.per_input_tables(mask)
        rows = {}
        for tax in TAXONOMIES:
            classes_t, frac = label_distribution(per_input, tax, th)
            rows[TAXONOMIES[tax]] = (classes_t, frac[layer, head])
        _chart(fh.label_shares(rows, display=DISPLAY_NAMES,
                               title=f"{figures.head_label(layer, head)}: labels over the inputs (one label per input)"),
               "w_set_shares")
        set_labels = classify_heads(mean, th)
        _found_lines(set_labels, mean, what=f"the mean over {who}")
        std = summary.arrays["feats"][mask].astype(np.float64).std(axis=0)
        cols = {"layer": np.repeat(np.arange(1, L + 1), H), "head": np.tile(np.arange(1, H + 1), L)}
        for i, n in enumerate(summary.feature_names):
            cols[f"{n}_mean"] = np.asarray(mean[n]).reshape(L * H)
            cols[f"{n}_std"] = std[..., i].reshape(L * H)
        sdf = pd.DataFrame(cols)
        _csv(sdf, f"head_features_over_set_{who}.csv", "w_set_csv", "Download means and standard deviations (CSV)")

    else:  # Domain proportions (spike models)
        dnames = [str(x) for x in summary.arrays["domain_names"]]
        c1, c2 = st.columns(2)
        dom = c1.selectbox("Spike domain", dnames, index=dnames.index("RBD") if "RBD" in dnames else 0, key="w_dom")
        high = c2.toggle(f"Only weights > θ = {hc.SET_THETA} (high-confidence attention)", key="w_dom_high")
        prop = summary.domain_proportions(mask, high=high) * 100  # [L, H, D] in %
        p = prop[..., dnames.index(dom)]
        st.caption("Share of the class-mean attention (zeroed from [SEP] on) that falls on keys in the domain, per "
                   "head (paper_spec §2.3, after Vig et al. 2021). For reference, the domain holds "
                   f"{_domain_share(dom):.1f}% of the spike's tokens.")
        c1, c2 = st.columns([5, 4])
        with c1:
            _chart(figures.head_grid(p, colour_label=f"% on {dom}", selected=(layer, head), colorscale="Magma"),
                   "w_dom_grid", clickable=True)
        with c2:
            _chart(fh.layer_bars(np.nanmax(p, axis=1), title=f"Per-layer maximum, % on {dom}", ylabel="%"), "w_dom_bars")
        ddf = pd.DataFrame({"layer": np.repeat(np.arange(1, L + 1), H), "head": np.tile(np.arange(1, H + 1), L)})
        for i, d in enumerate(dnames):
            ddf[f"{d} %"] = prop[..., i].reshape(L * H)
        with st.expander("Every head x every domain"):
            _chart(fh.matrix_heatmap(prop.reshape(L * H, -1), _head_names(), dnames, colour_label="%",
                                     colorscale="Magma", fmt=".1f"), "w_dom_matrix")
        _csv(ddf, f"domain_proportions_{who}.csv", "w_dom_csv")


def _domain_share(dom: str) -> float:
    from bertgeom.genome.kmers import token_axis

    axis = token_axis()
    doms = ["[CLS]" if (not d and i == 0) else d for i, d in enumerate(axis.domain)]
    return 100.0 * sum(d == dom for d in doms[:-1]) / (len(doms) - 1)


if _open("Over a set of inputs"):
    with tabs["Over a set of inputs"]:
        _set_tab()

# --- Head similarity ----------------------------------------------------------------------


def _similarity_tab() -> None:
    st.caption("Clark et al. §6: the distance between two heads is the Jensen-Shannon divergence of their attention "
               "rows, summed over query rows and inputs; MDS places similar heads close together. Alongside, "
               "Guan-style k-means clusters on the standardised feature vectors.")
    c1, c2, c3 = st.columns(3)
    scope = c1.radio("Inputs", ["This input", "The shipped set"], key="w_sim_scope", horizontal=True)
    method = c2.radio("MDS", ["classical", "metric"], key="w_sim_mds", horizontal=True,
                      help="Classical (Torgerson) is instant; metric is Clark's SMACOF setting (a few seconds).")
    use_sqrt = c3.toggle("Embed √JS (a true metric)", key="w_sim_sqrt")
    if scope == "This input":
        D, rows_used = hc.cached_js_input(model_id, text)
        feats, lab = table, labels
        note = (f"JS summed over {rows_used} query rows" +
                (" (evenly spaced: the input is long)" if rows_used < trace.encoded.n_tokens else "") + ".")
    else:
        summary = _set_summary()
        D = summary.arrays["js"]
        mask = summary.usable()
        feats = summary.mean_table(mask)
        lab = classify_heads(feats, th)
        long = summary.arrays["js_rows"] < summary.arrays["ntok"]
        note = (f"JS summed over {summary.n} inputs" +
                (f" ({int(long.sum())} long inputs contribute {hc.JS_MAX_ROWS} evenly spaced rows each)" if long.any() else "")
                + "; features are means over the set.")
    coords = hc.cached_mds(D, method, use_sqrt)
    fnames = [n for n in (feats.names if hasattr(feats, "names") else list(feats)) if n in FEATURE_DOCS]
    c1, c2 = st.columns([1, 3])
    k = c1.slider("k-means clusters (k)", 2, 10, 5, key="w_sim_k")
    if st.session_state.get("w_sim_feats") is None:
        st.session_state["w_sim_feats"] = [n for n in GUAN_FEATURES if n in fnames]
    chosen = c2.multiselect("Clustering features (z-scored)", fnames, key="w_sim_feats",
                            help="Default: Guan-style distance features plus sink mass and entropy (seed spec f33).")
    chosen = chosen or [n for n in GUAN_FEATURES if n in fnames]
    X = np.stack([np.asarray(feats[n], dtype=float).reshape(L * H) for n in chosen], axis=1)
    clus = hc.cached_clusters(X, k, tuple(chosen))
    from bertgeom.headsim import name_clusters

    cnames = name_clusters(clus.centroids, clus.feature_names)
    cluster_cat = np.array([f"{c + 1}: {cnames[c]}" for c in clus.labels])
    colour_by = st.radio("Colour the map by", ["layer", "k-means cluster"] + [TAXONOMIES[t] for t in TAXONOMIES],
                         horizontal=True, key="w_sim_colour")
    if colour_by == "layer":
        cats, values = None, np.repeat(np.arange(1, L + 1), H)
    elif colour_by == "k-means cluster":
        cats, values = cluster_cat, None
    else:
        tax = next(t for t, v in TAXONOMIES.items() if v == colour_by)
        cats, values = _label_grid(lab[tax].primary).reshape(L * H), None
    hover = [f"cluster {cluster_cat[i]}<br>{_label_text(lab['clark'].labels.reshape(-1)[i])}" for i in range(L * H)]
    c1, c2 = st.columns([3, 2])
    with c1:
        st.markdown(f"**MDS of the heads** ({method}{', √JS' if use_sqrt else ''}); click a point to select its head.")
        _chart(fh.head_scatter(coords, H, categories=cats, values=values, colour_label="layer",
                               selected=(layer, head), hover_text=hover, axis_titles=("MDS 1", "MDS 2")),
               "w_mds", clickable=True)
        st.caption(note)
    with c2:
        st.markdown(f"**k-means clusters** (k = {clus.k}, silhouette {clus.silhouette:.2f})")
        members = []
        for c in range(clus.k):
            idx = np.flatnonzero(clus.labels == c)
            shown = ", ".join(figures.head_label(*divmod(int(i), H)) for i in idx[:8])
            members.append(f"- **{c + 1}: {cnames[c]}** ({idx.size}): {shown}{' …' if idx.size > 8 else ''}")
        st.markdown("\n".join(members))
        st.caption(f"The selected head {figures.head_label(layer, head)} is in cluster "
                   f"{cluster_cat[layer * H + head]}.")
    st.markdown("**The clusters on the head grid**; click a head to select it.")
    c1, _ = st.columns([5, 4])
    with c1:
        _chart(figures.head_grid(np.zeros((L, H)), categories=cluster_cat.reshape(L, H), colour_label="cluster",
                                selected=(layer, head)), "w_cluster_grid", clickable=True)
    cdf = pd.DataFrame(clus.centroids, columns=clus.feature_names)
    cdf.insert(0, "cluster", [f"{c + 1}: {cnames[c]}" for c in range(clus.k)])
    cdf.insert(1, "heads", np.bincount(clus.labels, minlength=clus.k))
    st.markdown("Cluster centres (feature units; names from seed spec §3.3's reconstructed rules)")
    st.dataframe(cdf.round(3), hide_index=True, width="stretch")
    _csv(cdf, "kmeans_centroids.csv", "w_centroid_csv")
    names = _head_names()
    with st.expander("Jensen-Shannon distance between every pair of heads"):
        _chart(fh.matrix_heatmap(D, names, names, colour_label="JS (sum)"), "w_js_matrix")
        jdf = pd.DataFrame(D, columns=names)
        jdf.insert(0, "head", names)
        _csv(jdf, "js_distance.csv", "w_js_csv")
        mdf = pd.DataFrame({"head": names, "mds_1": coords[:, 0], "mds_2": coords[:, 1], "cluster": cluster_cat})
        _csv(mdf, "mds_coordinates.csv", "w_mds_csv", "Download MDS coordinates and clusters (CSV)")


if _open("Head similarity"):
    with tabs["Head similarity"]:
        _similarity_tab()

# --- Disable heads ------------------------------------------------------------------------


def _disable_tab() -> None:
    st.caption(
        "Kovaleva et al. §4.6: a disabled head attends uniformly (1/L) to every real token; nothing is retrained. "
        "bertgeom recomputes the forward pass from the shared model's own layers with those heads swapped for the "
        "uniform map — no hooks, no copies, nothing in the shared model changes."
    )
    modes = ["Chosen heads", "A whole layer", "Each head alone (sweep)", "Each layer alone (sweep)"]
    mode = st.radio("Disable", modes, horizontal=True, key="w_abl_mode")
    classifier = bool(loaded.labels)
    names = _head_names()
    if mode in modes[:2]:
        if mode == "Chosen heads":
            if st.session_state.get("w_abl_heads") is None:
                st.session_state["w_abl_heads"] = [figures.head_label(layer, head)]
            chosen = st.multiselect("Heads to disable", names, key="w_abl_heads")
            heads = tuple(divmod(names.index(n), H) for n in chosen)
        else:
            lay = st.selectbox("Layer to disable", list(range(L)), index=layer, format_func=lambda i: f"L{i + 1}",
                               key="w_abl_layer")
            heads = tuple((lay, h) for h in range(H))
        if not heads:
            st.info("Pick at least one head.")
            return
        res = hc.cached_ablation(model_id, text, heads)
        cos = _cos_rows(res["cls_before"], res["cls_after"])  # [L+1]: embeddings, then every layer
        if classifier:
            pb = softmax(res["logits_before"])
            pa = softmax(res["logits_after"])
            top = int(np.argmax(pb))
            after = int(np.argmax(pa))
            c1, c2, c3 = st.columns(3)
            c1.metric("Predicted with all heads", f"{loaded.labels[top]} ({pb[top]:.3f})")
            c2.metric("Predicted with the heads disabled", f"{loaded.labels[after]} ({pa[after]:.3f})")
            c3.metric(f"Change of p({loaded.labels[top]})", f"{pa[top] - pb[top]:+.4f}")
            _chart(fh.prob_bars(loaded.labels, pb, pa, title=f"Class probabilities, {len(heads)} head(s) disabled"),
                   "w_abl_probs")
            pdf = pd.DataFrame({"class": loaded.labels, "p_before": pb, "p_after": pa, "change": pa - pb})
            _csv(pdf, "ablation_probabilities.csv", "w_abl_csv")
        else:
            st.metric("[CLS] cosine, before vs after (last layer)", f"{cos[-1]:.4f}", f"{cos[-1] - 1:+.4f}")
        _chart(fh.layer_lines({"[CLS] cosine before/after": cos}, xlabels=["emb"] + [f"L{i + 1}" for i in range(L)],
                              title="How far the [CLS] vector moves, layer by layer", ylabel="cosine"), "w_abl_cos")
        cdf = pd.DataFrame({"layer": ["embeddings"] + [f"L{i + 1}" for i in range(L)], "cls_cosine": cos})
        _csv(cdf, "ablation_cls_cosine.csv", "w_abl_cos_csv", "Download the [CLS] cosines (CSV)")
        return

    kind = "heads" if mode.startswith("Each head") else "layers"
    cost = "one pass per head, batched" if kind == "heads" else "one pass per layer"
    req_key = (model_id, text, kind)
    if st.session_state.get("abl_sweep") != req_key:
        st.caption(f"Kovaleva Figure {'8' if kind == 'heads' else '9'} on this input ({cost}).")
        st.button("Run the sweep", key="w_abl_run", type="primary",
                  on_click=lambda: st.session_state.update(abl_sweep=req_key))
        return
    sw = hc.cached_sweep(model_id, text, kind)
    if classifier:
        pb = softmax(sw["base_logits"])
        top = int(np.argmax(pb))
        pa = softmax(sw["logits"])[..., top]
        delta = pa - pb[top]
        what = f"change of p({loaded.labels[top]}) (predicted class)"
    else:
        delta = 1.0 - _cos_rows(sw["cls"], sw["base_cls"])
        what = "1 − cosine of the final [CLS] vector"
    if kind == "heads":
        st.markdown(f"**{what}** when each head alone is disabled; click a head to select it.")
        if classifier:  # a probability can rise or fall: diverging colours centred on 0
            sweep_fig = fh.diverging_grid(delta, colour_label="Δp", selected=(layer, head))
        else:
            sweep_fig = figures.head_grid(delta, colour_label="1 − cos", selected=(layer, head), colorscale="Reds",
                                          zrange=(0.0, max(float(np.nanmax(delta)), 1e-9)))
        _chart(sweep_fig, "w_sweep_grid", clickable=True)
        sdf = pd.DataFrame({"layer": np.repeat(np.arange(1, L + 1), H), "head": np.tile(np.arange(1, H + 1), L),
                            "delta": delta.reshape(L * H)})
    else:
        _chart(fh.layer_bars(delta, title=f"{what}, each layer disabled", ylabel="Δ"), "w_sweep_layers")
        sdf = pd.DataFrame({"layer": np.arange(1, L + 1), "delta": delta})
    _csv(sdf, f"sweep_{kind}.csv", "w_sweep_csv")


def _cos_rows(a, b) -> np.ndarray:
    from bertgeom.ablation import cls_cosine

    return cls_cosine(a, b)


if _open("Disable heads"):
    with tabs["Disable heads"]:
        _disable_tab()

# --- Compare checkpoints ------------------------------------------------------------------


def _compare_tab() -> None:
    from bertgeom.models import REGISTRY, ModelLoadError, custom_models_allowed

    st.caption(
        "Kovaleva et al. compare a head's attention maps before and after fine-tuning on the same input, but English "
        "word pieces and spike 12-mers share no input, so here both checkpoints' layer l read the same *layer input* "
        "(this model's hidden states for the current input) and their maps are compared head by head. "
        "Alongside, the heads' weights are compared directly: the cosine of each head's query-key circuit W_Q W_Kᵀ and "
        "value-output circuit W_O W_V, which does not depend on any input and is meaningful for a fine-tuned model "
        "and the parent it shares its coordinates with (unrelated models score about 0)."
    )
    shape = hc.model_shape(model_id)
    candidates, skipped = [], []
    for mid in REGISTRY:
        if mid == model_id:
            continue
        try:
            (candidates if hc.model_shape(mid) == shape else skipped).append(mid)
        except ModelLoadError:
            skipped.append(mid)
    extra = st.session_state.get("w_cmp_custom", "").strip() if custom_models_allowed() else ""
    if extra and extra not in candidates and extra != model_id:
        try:
            if hc.model_shape(extra) == shape:
                candidates.append(extra)
            else:
                st.warning(f"'{extra}' has a different shape {hc.model_shape(extra)} from this model {shape}.")
        except ModelLoadError as exc:
            st.error(str(exc))
    c1, c2 = st.columns(2)
    if custom_models_allowed():
        c2.text_input("…or another checkpoint (hub id or directory)", key="w_cmp_custom",
                      placeholder="/path/to/model", persist_state="session")
    if not candidates:
        names = ", ".join(REGISTRY[m].display_name if m in REGISTRY else m for m in skipped) or "none"
        st.info(
            f"No other checkpoint has this model's shape ({shape[0]} layers × {shape[1]} heads, hidden {shape[2]}), "
            f"so heads cannot be matched one to one (available: {names}). The comparison pairs the fine-tuned "
            "SARS-CoV-2 variant model with the MiniLM it started from, once the variant model is installed."
        )
        return
    if st.session_state.get("w_cmp_partner") not in candidates:
        st.session_state["w_cmp_partner"] = candidates[0]
    partner = c1.selectbox("Compare with", candidates, key="w_cmp_partner",
                           format_func=lambda m: REGISTRY[m].display_name if m in REGISTRY else m)
    res = hc.cached_compare(model_id, partner, text)
    metrics = {"maps": "attention maps on shared layer inputs", "qk": "query-key circuit W_Q W_Kᵀ",
               "ov": "value-output circuit W_O W_V"}
    metric = st.radio("Cosine of", list(metrics), format_func=metrics.get, horizontal=True, key="w_cmp_metric")
    c1, c2 = st.columns([5, 4])
    with c1:
        st.markdown(f"**Cosine per head** ({metrics[metric]}); click a head to select it.")
        _chart(figures.head_grid(res[metric], colour_label="cosine", selected=(layer, head), zrange=(0.0, 1.0),
                                 colorscale="Viridis"), "w_cmp_grid", clickable=True)
    with c2:
        _chart(fh.layer_lines({metrics[m]: np.nanmean(res[m], axis=1) for m in metrics}, title="Layer mean",
                              ylabel="cosine", yrange=(min(0.0, float(np.nanmin([np.nanmin(res[m]) for m in metrics]))), 1.02)),
               "w_cmp_layers")
    a, b = hc.cached_compare_layer(model_id, partner, text, layer)
    st.markdown(f"#### {figures.head_label(layer, head)} on the same layer input: this model vs "
                f"{REGISTRY[partner].display_name if partner in REGISTRY else partner}")
    axis = trace.axis_labels
    hov = _hover_labels(axis, domains)
    zmax = float(max(a[head].max(), b[head].max()))
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**this model**")
        _chart(fh.attention_map(a[head], axis, hover_labels=hov, zmax=zmax, max_ticks=30), "w_cmp_a")
    with c2:
        st.markdown("**compared checkpoint**")
        _chart(fh.attention_map(b[head], axis, hover_labels=hov, zmax=zmax, max_ticks=30), "w_cmp_b")
    cdf = pd.DataFrame({"layer": np.repeat(np.arange(1, L + 1), H), "head": np.tile(np.arange(1, H + 1), L)})
    for m in metrics:
        cdf[f"cos_{m}"] = np.asarray(res[m]).reshape(L * H)
    _csv(cdf, f"compare_{partner.replace('/', '_')}.csv", "w_cmp_csv")


if _open("Compare checkpoints"):
    with tabs["Compare checkpoints"]:
        _compare_tab()
