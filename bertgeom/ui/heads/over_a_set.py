"""Attention Heads tab *Over a set of inputs*: the shipped set's class-mean maps, feature
distributions and (input kinds with token domains) domain proportions with the top-head domain test.
The statistics are computed once per model and set (:mod:`bertgeom.ui.heads_cache`).

References: the 2025 paper's recipe (docs/methods.md §5), Vig et al. 2021 (domain proportions),
:mod:`bertgeom.analysis.domain_ztest` (the z-test).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from bertgeom.analysis.heads import FEATURE_DOCS
from bertgeom.analysis.patterns import DISPLAY_NAMES, classify_heads, label_distribution
from bertgeom.analysis.patterns import TAXONOMY_NAMES as TAXONOMIES
from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, matrix_heatmap
from bertgeom.figures.heads import significance_grid
from bertgeom.inputs import INPUT_KINDS
from bertgeom.tables import arcs_frame, counted, head_label, head_labels, per_head_frame, word_for
from bertgeom.ui import heads_cache as hc
from bertgeom.ui.heads.pattern_labels import show_clark_findings
from bertgeom.ui.heads.view import View, hover_labels, shipped_set_summary
from bertgeom.ui.names import arc_table, class_name, feature_label
from bertgeom.ui.widgets import chart, csv_button, doc_caption, errors_expander


def _first_domain(kind, names: list[str]) -> int:
    """The domain shown first: the kind's ``default_domain``, else the first."""
    return names.index(kind.default_domain) if kind.default_domain in names else 0


def _domain_share(kind, dom: str, summary) -> float:
    """Percentage of the tokens in domain ``dom``: the kind's reference share, else the set's."""
    if kind.domain_share is not None:
        return kind.domain_share(dom)
    tok = summary.arrays["dom_tok"].sum(axis=0)
    names = [str(x) for x in summary.arrays["domain_names"]]
    return 100.0 * float(tok[names.index(dom)]) / max(float(tok.sum()), 1.0)


@dataclass(frozen=True)
class SetSelection:
    """The inputs of the set the views read: the chosen class (None: all), its mask over the set's
    inputs, its name in file names (``who``) and on screen (``who_name``), and the set's classes."""

    cls: str | None
    mask: np.ndarray
    who: str
    who_name: str
    classes: list[str]


def set_tab(v: View) -> None:
    """The tab: what the statistics are, then the chosen view of the chosen class."""
    _explain_the_set(v)
    summary = shipped_set_summary(v.loaded)
    if not _summary_header(summary):
        return
    sel, view = _choose_class_and_view(summary)
    VIEWS[view](v, summary, sel)


def _explain_the_set(v: View) -> None:
    """Which set, and where its statistics come from (prepared ahead, kept on disk)."""
    items = hc.set_items(v.loaded.spec.input_kind)
    what = f"the {len(items)} {v.kind.words.shipped_set_description.removeprefix('the ')}"
    st.caption(f"Statistics over {what}. The model runs once over the set, ahead of time (`python -m bertgeom "
               "prepare-sets`, or in the background when the server starts); the result is kept on disk, keyed by "
               "the model's weights and the set, and read from there afterwards.")


def _summary_header(summary) -> bool:
    """How many inputs were analysed and are used, and those that could not be; False when none is usable."""
    usable = summary.usable()
    labelled = summary.labelled
    if summary.classifier and labelled.any():
        right = int((summary.correct & labelled).sum())
        unlabelled = int((~labelled).sum())
        st.markdown(f"**{summary.n}** inputs analysed, **{right}** of the {int(labelled.sum())} labelled ones "
                    "predicted correctly (the paper's recipe keeps only correct predictions)"
                    + (f"; the {unlabelled} without a label are all used." if unlabelled else "."))
    elif summary.classifier:
        st.markdown(f"**{summary.n}** inputs analysed; the set carries no labels, so every input is used "
                    "(the paper's recipe keeps correct predictions, which needs labels).")
    else:
        st.markdown(f"**{summary.n}** inputs analysed (an encoder: all inputs are used).")
    errors_expander(summary.errors)
    if not usable.any():
        st.warning("No input of the set was predicted correctly, so there is nothing to average.")
        return False
    return True


def _choose_class_and_view(summary) -> tuple[SetSelection, str]:
    """The class box (classifiers only) and the view switch, in one row."""
    classes = summary.classes() if summary.classifier else []
    options = [None] + classes
    if st.session_state.get("w_set_class") not in options:  # one class first: its mean map needs a few passes only
        st.session_state["w_set_class"] = classes[0] if classes else None
    views = [w for w in VIEWS if w != "Domain proportions" or summary.has_domains]
    c1, c2 = st.columns([2, 3])
    if summary.classifier:
        cls = c1.selectbox("Class", options, key="w_set_class",
                           format_func=lambda c: "all classes" if c is None
                           else f"{class_name(c)} ({int(summary.mask(c).sum())} correct)")
    else:
        cls = None
    view = (c2 if summary.classifier else c1).radio("View", views, horizontal=True, key="w_set_view",
                                                    bind="query-params")  # no gap before it
    who = ("all classes" if summary.classifier else "all inputs") if cls is None else cls  # file names
    who_name = who if cls is None else class_name(cls)  # on screen
    return SetSelection(cls, summary.mask(cls), who, who_name, classes), view


def class_mean_view(v: View, summary, sel: SetSelection) -> None:
    """The selected head's mean attention map over the chosen inputs (the paper's recipe) and its strongest entries."""
    loaded, kind, layer, head = v.loaded, v.kind, v.layer, v.head
    mask, who, who_name = sel.mask, sel.who, sel.who_name
    names = tuple(str(x) for x in np.asarray(summary.names)[mask])
    cm = hc.class_mean(loaded, names)
    st.markdown(f"#### {head_label(layer, head)} — mean map of {who_name} ({cm.n} inputs)")
    st.caption("Paper recipe ([docs/methods.md §5](/?view=methods&section=5)): "
               + ("correct predictions only; " if summary.classifier
                  else "every input (this model predicts no class); ")
               + "each map zeroed from the first [SEP] on "
               "([SEP] and [PAD] removed, [CLS] kept), then averaged. "
               + ("" if kind.can("aligned_positions") else
                  f"{kind.words.plural.capitalize()} differ in length and content, so positions, not tokens, are "
                  "averaged."))
    c1, c2 = st.columns(2)
    theta_plot = c1.slider("Hide mean weights below", 0.0, 0.5, 0.01, 0.005, key="w_cm_theta",
                           help="The paper's plots hide entries below theta_plot = 0.01.")
    high = c2.toggle("High-confidence sum instead (Σ A·1[A ≥ 0.3], not divided)", key="w_cm_high")
    M = np.asarray((cm.theta_sum if high else cm.mean)[layer, head], dtype=np.float32)
    doms = list(cm.domains) if kind.has_domains else None
    chart(fh.attention_map(M, list(cm.labels), hover_labels=hover_labels(list(cm.labels), doms), theta=theta_plot,
                           colour_label="sum" if high else "mean"), "w_cm_map")
    arcs = arcs_frame(M, list(cm.labels), theta=max(theta_plot, 1e-9), domains=doms)
    st.markdown(f"{counted(len(arcs), 'entry')} ≥ {theta_plot:.3f} (at most 200 listed)")
    if len(arcs):
        st.dataframe(arc_table(arcs), hide_index=True, width="stretch", height=240)
        csv_button(arcs, f"class_mean_{who}_L{layer + 1}H{head + 1}.csv", "w_cm_csv")


def feature_distributions_view(v: View, summary, sel: SetSelection) -> None:
    """One feature over the chosen inputs: its mean per head, its spread per class at the selected head,
    the k90 of every query row, the labels per input, and Clark's findings on the mean."""
    layer, head, th = v.layer, v.head, v.th
    cls, mask, who, who_name, classes = sel.cls, sel.mask, sel.who, sel.who_name, sel.classes
    per_class = summary.classifier and cls is None  # all classes: one group per class
    fnames = [n for n in summary.feature_names if n in FEATURE_DOCS]
    if st.session_state.get("w_set_feature") not in fnames:
        st.session_state["w_set_feature"] = "k90_frac" if "k90_frac" in fnames else fnames[0]
    feat = st.selectbox("Feature", fnames, key="w_set_feature", format_func=feature_label)
    doc_caption(FEATURE_DOCS[feat])
    mean = summary.mean_table(mask)
    values = summary.feature(feat)
    groups = ({c: values[summary.mask(c), layer, head] for c in classes} if per_class
              else {who: values[mask, layer, head]})
    grid_fig, box_fig = fh.feature_over_set(mean[feat], groups, feat, layer=layer, head=head,
                                            display=INPUT_KINDS.all_class_names())
    c1, c2 = st.columns([5, 4])
    with c1:
        st.markdown(f"Mean of **{feature_label(feat)}** over {who_name} ({int(mask.sum())} inputs); "
                    "click a head to select it.")
        chart(grid_fig, "w_set_grid", selects_head=True)
    with c2:
        chart(box_fig, "w_set_box")
    k90_groups = ({class_name(c): summary.k90_rows(summary.mask(c), layer, head) for c in classes}
                  if per_class else {who_name: summary.k90_rows(mask, layer, head)})
    chart(fh.distribution(k90_groups, kind="violin", ylabel="k90 (keys holding 90% of a row)",
                          title=f"{head_label(layer, head)}: metastable-state size k90 of every query row "
                                "(docs/methods.md §3.4)"), "w_set_k90")
    per_input = summary.per_input_tables(mask)
    rows = {}
    for tax in TAXONOMIES:
        classes_t, frac = label_distribution(per_input, tax, th)
        rows[TAXONOMIES[tax]] = (classes_t, frac[layer, head])
    chart(fh.label_shares(rows, display=DISPLAY_NAMES,
                          title=f"{head_label(layer, head)}: labels over the inputs (one label per input)"),
                          "w_set_shares")
    set_labels = classify_heads(mean, th)
    show_clark_findings(set_labels, mean, what=f"the mean over {who_name}")
    std = summary.arrays["feats"][mask].astype(np.float64).std(axis=0)
    cols = {}
    for i, n in enumerate(summary.feature_names):
        cols[f"{n}_mean"], cols[f"{n}_std"] = mean[n], std[..., i]
    csv_button(per_head_frame(cols), f"head_features_over_set_{who}.csv", "w_set_csv",
               "Download means and standard deviations (CSV)")


def domain_proportions_view(v: View, summary, sel: SetSelection) -> None:
    """Input kinds with token domains: the share of the mean attention on one domain, per head, and the
    top-head test under it."""
    kind, layer, head, L, H = v.kind, v.layer, v.head, v.L, v.H
    mask, who = sel.mask, sel.who
    dnames = [str(x) for x in summary.arrays["domain_names"]]
    c1, c2 = st.columns(2)
    dom = c1.selectbox(kind.words.domain_noun.capitalize(), dnames, index=_first_domain(kind, dnames), key="w_dom")
    high = c2.toggle(f"Only weights > θ = {hc.SET_THETA} (high-confidence attention)", key="w_dom_high")
    prop = summary.domain_proportions(mask, high=high) * 100  # [L, H, D] in %
    p = prop[..., dnames.index(dom)]
    st.caption("Share of the class-mean attention (zeroed from [SEP] on) that falls on keys in the domain, per "
               "head ([docs/methods.md §5](/?view=methods&section=5), after Vig et al. 2021). For reference, the "
               f"domain holds {_domain_share(kind, dom, summary):.1f}% of the tokens.")
    c1, c2 = st.columns([5, 4])
    with c1:
        # one light-to-dark scale, as the attention maps: the lowest head is the palest, the highest the darkest
        chart(head_grid(p, colour_label=f"% on {dom}", selected=(layer, head), colorscale="Blues"), "w_dom_grid",
              selects_head=True)
    with c2:
        chart(fh.layer_bars(np.nanmax(p, axis=1), title=f"Per-layer maximum, % on {dom}", ylabel="%"), "w_dom_bars")
    ddf = per_head_frame({f"{d} %": prop[..., i] for i, d in enumerate(dnames)})
    with st.expander("Every head x every domain"):
        chart(matrix_heatmap(prop.reshape(L * H, -1), head_labels(L, H), dnames, colour_label="%",
                             colorscale="Blues", fmt=".1f"), "w_dom_matrix")
    csv_button(ddf, f"domain_proportions_{who}.csv", "w_dom_csv")
    if "dom_cnt" in summary.arrays:
        domain_test_section(summary, mask, dom, v, who)


#: The tab's views, in the switch's order, each drawn by its own function of (page view, summary, selection);
#: a new view is one function and one line here. *Domain proportions* needs token domains.
VIEWS = {"Class-mean map": class_mean_view, "Feature distributions": feature_distributions_view,
         "Domain proportions": domain_proportions_view}


def domain_test_section(summary, mask: np.ndarray, dom: str, v: View, who: str) -> None:
    """The z-test of ``dom`` under the domain proportions (input kinds with token domains, over the set)."""
    t = summary.domain_test(mask, dom)
    st.markdown(f"##### Top heads for {dom}: which heads attend to it more than its share of the tokens?")
    st.caption(f"**What this shows:** a head is starred when its strong attention (weights > 0.3) lands on {dom} "
               f"more often than {dom}'s share of the tokens ({t.background:.1%}) would explain: a one-sided "
               f"two-proportion z-test over {class_name(who)}, Bonferroni-corrected over all {t.z.size} heads "
               f"(p < {t.alpha_heads:.1e}). Grey: a head with no weight above 0.3.")
    c1, c2 = st.columns([5, 4])
    with c1:
        chart(significance_grid(t.z, t.significant, t.p, selected=(v.layer, v.head)), "w_dom_z_grid",
              selects_head=True)
    df = per_head_frame(t.rows())
    with c2:
        n_sig = int(t.significant.sum())
        st.markdown(f"**{n_sig}** significant {word_for(n_sig, 'head')}")
        top = df[df["significant"]].sort_values("z", ascending=False).head(10)
        if len(top):
            shown = top[["layer", "head", "share_on_domain", "z", "p_value"]].round(3)
            shown["p_value"] = [f"{x:.1e}" for x in top["p_value"]]  # tiny p-values would round to 0
            st.dataframe(shown.rename(columns={"share_on_domain": f"share on {dom}", "p_value": "p-value"}),
                         hide_index=True, width="stretch")  # words on screen; the CSV keeps the column names
    csv_button(df, f"domain_test_{dom}_{who}.csv", "w_dom_z_csv", "Download the z-test per head (CSV)")
