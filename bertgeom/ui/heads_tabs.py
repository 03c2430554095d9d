"""The Attention Heads page's shared widgets (pattern thresholds, Clark's findings) and its
four heavier tabs (over a set of inputs, head similarity, head disabling, checkpoint comparison):
widgets in, figures out; computations are cached in :mod:`bertgeom.ui.heads_cache`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.ablation import cls_cosine
from bertgeom.inputs import INPUT_KINDS
from bertgeom.probabilities import class_probabilities
from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, matrix_heatmap, probability_bars
from bertgeom.analysis.heads import FEATURE_DOCS
from bertgeom.analysis.patterns import (
    DISPLAY_NAMES,
    TAXONOMY_NAMES,
    PatternThresholds,
    clark_findings,
    classify_heads,
    describe_thresholds,
    display_label,
    display_labels,
    label_distribution,
)
from bertgeom.tables import arcs_frame, head_label, head_labels, per_head_frame
from bertgeom.ui import heads_cache as hc
from bertgeom.ui.state import PageView
from bertgeom.ui.names import arc_table, class_name, feature_label
from bertgeom.ui.widgets import chart, csv_button, doc_caption, errors_expander, progress
from bertgeom.ui.plain import plain

TAXONOMIES = TAXONOMY_NAMES
#: Guan-style clustering features (distances f15-f18, plus sink and entropy).
GUAN_FEATURES = ["mean_dist_norm", "signed_offset_norm", "local_1", "local_2", "local_4", "sink", "entropy_norm",
                 "self", "prev", "next"]


@dataclass
class View(PageView):
    """What every tab reads: the page view with the input's per-head features, labels and thresholds."""

    table: Any
    labels: dict
    th: PatternThresholds


# ---- shared widgets ----------------------------------------------------------------------------
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


def hover_labels(labels: list[str], domains: list[str] | None) -> list[str]:
    """Token labels for a map's hover text, with each token's domain when there is one."""
    if domains is None:
        return [str(x) for x in labels]
    return [f"{x} · {d}" if d else str(x) for x, d in zip(labels, domains)]


def show_clark_findings(lab: dict, feats, *, what: str = "this input") -> None:
    """Clark's behaviours (and the feature value behind each) found on ``what``."""
    st.markdown(f"**Clark behaviours on {what}** (value of the feature behind each label in brackets):")
    st.markdown("\n".join(clark_findings(lab, feats)))


# --- Over a set of inputs -----------------------------------------------------------------


def _set_summary(model_id: str) -> hc.SetSummary:
    """The shipped set's statistics (prepared ahead, or computed with a progress bar while the model
    runs over the set)."""
    from bertgeom.sets.prepared import is_on_disk
    from bertgeom.ui.prepared_cache import wait_for

    key = hc.set_key(model_id)
    if not hc.set_is_ready(model_id):
        wait_for(key, "The statistics over the set", model_id=model_id)
    show = not hc.set_is_ready(model_id) and not is_on_disk(key)
    with progress("Running the model over the set…", show=show, usually_prepared=True) as update:
        return hc.set_summary(model_id, update)


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


def set_tab(v: View) -> None:
    model_id, loaded, kind, layer, head, L, H, th = v.model_id, v.loaded, v.kind, v.layer, v.head, v.L, v.H, v.th
    items = hc.set_items(loaded.spec.input_kind)
    what = f"the {len(items)} {kind.shipped_set_description.removeprefix('the ')}"
    st.caption(f"Statistics over {what}. The model runs once over the set, ahead of time (`python -m bertgeom "
               "prepare-sets`, or in the background when the server starts); the result is kept on disk, keyed by "
               "the model's weights and the set, and read from there afterwards.")
    summary = _set_summary(model_id)
    usable = summary.usable()
    if summary.classifier:
        st.markdown(f"**{summary.n}** inputs analysed, **{int(usable.sum())}** predicted correctly "
                    "(the paper's recipe keeps only correct predictions).")
    else:
        st.markdown(f"**{summary.n}** inputs analysed (an encoder: all inputs are used).")
    errors_expander(summary.errors)
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
                           format_func=lambda c: "all classes" if c is None
                           else f"{class_name(c)} ({int(summary.mask(c).sum())} correct)")
    else:
        cls = None
    view = (c2 if summary.classifier else c1).radio("View", views, horizontal=True, key="w_set_view",
                                                               bind="query-params")  # no gap before it
    mask = summary.mask(cls)
    who = ("all classes" if summary.classifier else "all inputs") if cls is None else cls  # file names
    who_name = who if cls is None else class_name(cls)  # on screen

    if view == "Class-mean map":
        names = tuple(str(x) for x in np.asarray(summary.names)[mask])
        cm = hc.class_mean(model_id, loaded.weights_hash, names)
        st.markdown(f"#### {head_label(layer, head)} — mean map of {who_name} ({cm['n']} inputs)")
        st.caption("Paper recipe ([docs/methods.md §5](/?view=methods&section=5)): "
                   + ("correct predictions only; " if summary.classifier else "every input (this model predicts no class); ")
                   + "each map zeroed from the first [SEP] on "
                   "([SEP] and [PAD] removed, [CLS] kept), then averaged. "
                   + ("" if kind.can("aligned_positions") else
                      f"{kind.plural.capitalize()} differ in length and content, so positions, not tokens, are averaged."))
        c1, c2 = st.columns(2)
        theta_plot = c1.slider("Hide mean weights below", 0.0, 0.5, 0.01, 0.005, key="w_cm_theta",
                               help="The paper's plots hide entries below theta_plot = 0.01.")
        high = c2.toggle("High-confidence sum instead (Σ A·1[A ≥ 0.3], not divided)", key="w_cm_high")
        M = np.asarray(cm["theta_sum" if high else "mean"][layer, head], dtype=np.float32)
        doms = cm["domains"] if kind.has_domains else None
        chart(fh.attention_map(M, cm["labels"], hover_labels=hover_labels(cm["labels"], doms), theta=theta_plot,
                                colour_label="sum" if high else "mean"), "w_cm_map")
        arcs = arcs_frame(M, cm["labels"], theta=max(theta_plot, 1e-9), domains=doms)
        st.markdown(f"{len(arcs)} entries ≥ {theta_plot:.3f} (at most 200 listed)")
        if len(arcs):
            st.dataframe(arc_table(arcs), hide_index=True, width="stretch", height=240)
            csv_button(arcs, f"class_mean_{who}_L{layer + 1}H{head + 1}.csv", "w_cm_csv")

    elif view == "Feature distributions":
        fnames = [n for n in summary.feature_names if n in FEATURE_DOCS]
        if st.session_state.get("w_set_feature") not in fnames:
            st.session_state["w_set_feature"] = "k90_frac" if "k90_frac" in fnames else fnames[0]
        feat = st.selectbox("Feature", fnames, key="w_set_feature", format_func=feature_label)
        doc_caption(FEATURE_DOCS[feat])
        mean = summary.mean_table(mask)
        values = summary.feature(feat)
        groups = ({c: values[summary.mask(c), layer, head] for c in classes} if (summary.classifier and cls is None)
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
                      if (summary.classifier and cls is None) else {who_name: summary.k90_rows(mask, layer, head)})
        chart(fh.distribution(k90_groups, kind="violin", ylabel="k90 (keys holding 90% of a row)",
                               title=f"{head_label(layer, head)}: metastable-state size k90 of every query row "
                                     "(docs/methods.md §3.4)"), "w_set_k90")
        per_input = summary.per_input_tables(mask)
        rows = {}
        for tax in TAXONOMIES:
            classes_t, frac = label_distribution(per_input, tax, th)
            rows[TAXONOMIES[tax]] = (classes_t, frac[layer, head])
        chart(fh.label_shares(rows, display=DISPLAY_NAMES,
                               title=f"{head_label(layer, head)}: labels over the inputs (one label per input)"), "w_set_shares")
        set_labels = classify_heads(mean, th)
        show_clark_findings(set_labels, mean, what=f"the mean over {who_name}")
        std = summary.arrays["feats"][mask].astype(np.float64).std(axis=0)
        cols = {}
        for i, n in enumerate(summary.feature_names):
            cols[f"{n}_mean"], cols[f"{n}_std"] = mean[n], std[..., i]
        sdf = per_head_frame(cols)
        csv_button(sdf, f"head_features_over_set_{who}.csv", "w_set_csv", "Download means and standard deviations (CSV)")

    else:  # Domain proportions (input kinds with token domains)
        dnames = [str(x) for x in summary.arrays["domain_names"]]
        c1, c2 = st.columns(2)
        dom = c1.selectbox(kind.domain_noun.capitalize(), dnames, index=_first_domain(kind, dnames), key="w_dom")
        high = c2.toggle(f"Only weights > θ = {hc.SET_THETA} (high-confidence attention)", key="w_dom_high")
        prop = summary.domain_proportions(mask, high=high) * 100  # [L, H, D] in %
        p = prop[..., dnames.index(dom)]
        st.caption("Share of the class-mean attention (zeroed from [SEP] on) that falls on keys in the domain, per "
                   "head ([docs/methods.md §5](/?view=methods&section=5), after Vig et al. 2021). For reference, the domain holds "
                   f"{_domain_share(kind, dom, summary):.1f}% of the tokens.")
        c1, c2 = st.columns([5, 4])
        with c1:
            # one light-to-dark scale, as the attention maps: the lowest head is the palest, the highest the darkest
            chart(head_grid(p, colour_label=f"% on {dom}", selected=(layer, head), colorscale="Blues"), "w_dom_grid", selects_head=True)
        with c2:
            chart(fh.layer_bars(np.nanmax(p, axis=1), title=f"Per-layer maximum, % on {dom}", ylabel="%"), "w_dom_bars")
        ddf = per_head_frame({f"{d} %": prop[..., i] for i, d in enumerate(dnames)})
        with st.expander("Every head x every domain"):
            chart(matrix_heatmap(prop.reshape(L * H, -1), head_labels(L, H), dnames, colour_label="%",
                                     colorscale="Blues", fmt=".1f"), "w_dom_matrix")
        csv_button(ddf, f"domain_proportions_{who}.csv", "w_dom_csv")
        if "dom_cnt" in summary.arrays:
            from bertgeom.ui.heads_more_tabs import domain_test_section

            domain_test_section(summary, mask, dom, v, who)


# --- Head similarity ----------------------------------------------------------------------


def _name_order(name: str) -> tuple[str, int]:
    """Sort key of a cluster name: the rule's name, then its number (``… 2`` before ``… 10``); a
    trailing "(what sets it apart)" is not part of the key."""
    name = name.split(" (", 1)[0]
    stem = name.rstrip("0123456789")
    return stem.strip(), int(name[len(stem):] or 0)


def similarity_tab(v: View) -> None:
    model_id, text, trace, table, labels, th = v.model_id, v.text, v.trace, v.table, v.labels, v.th
    layer, head, L, H = v.layer, v.head, v.L, v.H
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
        summary = _set_summary(model_id)
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
    chosen = c2.multiselect("Clustering features (z-scored)", fnames, key="w_sim_feats", format_func=feature_label,
                            help="Default: Guan-style distance features plus sink mass and entropy.")
    chosen = chosen or [n for n in GUAN_FEATURES if n in fnames]
    X = np.stack([np.asarray(feats[n], dtype=float).reshape(L * H) for n in chosen], axis=1)
    clus = hc.cached_clusters(X, k, tuple(chosen))
    from bertgeom.analysis.headsim import name_clusters

    cnames = name_clusters(clus.centroids, clus.feature_names)
    cluster_cat = np.array([cnames[c] for c in clus.labels])  # the names are unique: one number per cluster, not two
    colour_by = st.radio("Colour the map by", ["layer", "k-means cluster"] + [TAXONOMIES[t] for t in TAXONOMIES],
                         horizontal=True, key="w_sim_colour")
    if colour_by == "layer":
        cats, values = None, np.repeat(np.arange(1, L + 1), H)
    elif colour_by == "k-means cluster":
        cats, values = cluster_cat, None
    else:
        tax = next(t for t, v in TAXONOMIES.items() if v == colour_by)
        cats, values = display_labels(lab[tax].primary).reshape(L * H), None
    hover = [f"cluster {cluster_cat[i]}<br>{display_label(lab['clark'].labels.reshape(-1)[i])}" for i in range(L * H)]
    c1, c2 = st.columns([3, 2])
    with c1:
        st.markdown(f"**MDS of the heads** ({method}{', √JS' if use_sqrt else ''}); click a point to select its head.")
        chart(fh.head_scatter(coords, H, categories=cats, values=values, colour_label="layer",
                               selected=(layer, head), hover_text=hover, axis_titles=("MDS 1", "MDS 2")), "w_mds", selects_head=True)
        st.caption(note)
    with c2:
        st.markdown(f"**k-means clusters** (k = {clus.k}, silhouette {clus.silhouette:.2f})")
        members = []
        order = sorted(range(clus.k), key=lambda c: _name_order(cnames[c]))  # "… 1", "… 2", …, not k-means order
        for c in order:
            idx = np.flatnonzero(clus.labels == c)
            shown = ", ".join(head_label(*divmod(int(i), H)) for i in idx[:8])
            members.append(f"- **{cnames[c]}** ({idx.size}): {shown}{' …' if idx.size > 8 else ''}")
        st.markdown("\n".join(members))
        if any(n[-1:].isdigit() for n in cnames):
            st.caption("Clusters that the same rule names are numbered 1, 2, … from the one with the most of the "
                       "rule's key feature (sink mass, previous-token mass, …; distance / uniform for mid-range).")
        st.caption(f"The selected head {head_label(layer, head)} is in cluster "
                   f"{cluster_cat[layer * H + head]}.")
    st.markdown("**The clusters on the head grid**; click a head to select it.")
    c1, _ = st.columns([5, 4])
    with c1:
        chart(head_grid(np.zeros((L, H)), categories=cluster_cat.reshape(L, H), colour_label="cluster",
                                selected=(layer, head)), "w_cluster_grid", selects_head=True)
    cdf = pd.DataFrame(clus.centroids, columns=clus.feature_names)
    cdf.insert(0, "cluster", list(cnames))
    cdf.insert(1, "heads", np.bincount(clus.labels, minlength=clus.k))
    cdf = cdf.iloc[order].reset_index(drop=True)
    st.markdown("Cluster centres (feature units; names from the rules of [docs/methods.md §6](/?view=methods&section=6))")
    st.dataframe(cdf.round(3).rename(columns={n: feature_label(n) for n in clus.feature_names}), hide_index=True,
                 width="stretch")  # plain words on screen; the CSV keeps the variable names
    csv_button(cdf, "kmeans_centroids.csv", "w_centroid_csv")
    names = head_labels(L, H)
    with st.expander("Jensen-Shannon distance between every pair of heads"):
        chart(matrix_heatmap(D, names, names, colour_label="JS (sum)"), "w_js_matrix")
        jdf = pd.DataFrame(D, columns=names)
        jdf.insert(0, "head", names)
        csv_button(jdf, "js_distance.csv", "w_js_csv")
        mdf = pd.DataFrame({"head": names, "mds_1": coords[:, 0], "mds_2": coords[:, 1], "cluster": cluster_cat})
        csv_button(mdf, "mds_coordinates.csv", "w_mds_csv", "Download MDS coordinates and clusters (CSV)")



# --- Disable heads ------------------------------------------------------------------------


def disable_tab(v: View) -> None:
    model_id, text, loaded, layer, head, L, H = v.model_id, v.text, v.loaded, v.layer, v.head, v.L, v.H
    st.caption(
        "Kovaleva et al. §4.6: a disabled head attends uniformly (weight 1/n on each of the input's n real tokens) to every real token; nothing is retrained. "
        "bertgeom recomputes the forward pass from the shared model's own layers with those heads swapped for the "
        "uniform map — no hooks, no copies, nothing in the shared model changes."
    )
    modes = ["Chosen heads", "A whole layer", "Each head alone (sweep)", "Each layer alone (sweep)",
             "Each head, over the set"]
    mode = st.radio("Disable", modes, horizontal=True, key="w_abl_mode")
    if mode == modes[4]:
        from bertgeom.ui.heads_more_tabs import set_disable_section

        set_disable_section(v)
        return
    classifier = bool(loaded.labels)
    names = head_labels(L, H)
    if mode in modes[:2]:
        if mode == "Chosen heads":
            if st.session_state.get("w_abl_heads") is None:
                st.session_state["w_abl_heads"] = [head_label(layer, head)]
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
        cos = cls_cosine(res["cls_before"], res["cls_after"])  # [L+1]: embeddings, then every layer
        if classifier:
            pb = class_probabilities(loaded, res["logits_before"])  # calibrated, as on every screen
            pa = class_probabilities(loaded, res["logits_after"])
            top = int(np.argmax(pb))
            after = int(np.argmax(pa))
            c1, c2, c3 = st.columns(3)
            c1.metric("Predicted with all heads", f"{class_name(loaded.labels[top])} ({pb[top]:.3f})")
            c2.metric("Predicted with the heads disabled", f"{class_name(loaded.labels[after])} ({pa[after]:.3f})")
            c3.metric(f"Change of p({class_name(loaded.labels[top])})", f"{pa[top] - pb[top]:+.4f}")
            chart(probability_bars(loaded.labels, {"all heads": pb, "heads disabled": pa}, display=INPUT_KINDS.all_class_names(),
                                   title=f"Class probabilities, {len(heads)} head(s) disabled"), "w_abl_probs")
            pdf = pd.DataFrame({"class": loaded.labels, "p_before": pb, "p_after": pa, "change": pa - pb})
            csv_button(pdf, "ablation_probabilities.csv", "w_abl_csv")
        else:
            st.metric("[CLS] cosine, before vs after (last layer)", f"{cos[-1]:.4f}", f"{cos[-1] - 1:+.4f}")
        chart(fh.layer_lines({"[CLS] cosine before/after": cos}, xlabels=["emb"] + [f"L{i + 1}" for i in range(L)],
                              title="How far the [CLS] vector moves, layer by layer", ylabel="cosine"), "w_abl_cos")
        cdf = pd.DataFrame({"layer": ["embeddings"] + [f"L{i + 1}" for i in range(L)], "cls_cosine": cos})
        csv_button(cdf, "ablation_cls_cosine.csv", "w_abl_cos_csv", "Download the [CLS] cosines (CSV)")
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
        pb = class_probabilities(loaded, sw["base_logits"])
        top = int(np.argmax(pb))
        pa = class_probabilities(loaded, sw["logits"])[..., top]
        delta = pa - pb[top]
        what = f"change of p({class_name(loaded.labels[top])}) (predicted class)"
    else:
        delta = 1.0 - cls_cosine(sw["cls"], sw["base_cls"])
        what = "1 − cosine of the final [CLS] vector"
    if kind == "heads":
        st.markdown(f"**{what}** when each head alone is disabled; click a head to select it.")
        if classifier:  # a probability can rise or fall: diverging colours centred on 0
            sweep_fig = fh.diverging_grid(delta, colour_label="Δp", selected=(layer, head))
        else:
            sweep_fig = head_grid(delta, colour_label="1 − cos", selected=(layer, head), colorscale="Reds",
                                          zrange=(0.0, max(float(np.nanmax(delta)), 1e-9)))
        chart(sweep_fig, "w_sweep_grid", selects_head=True)
        sdf = per_head_frame({"delta": delta})
    else:
        chart(fh.layer_bars(delta, title=f"{what}, each layer disabled", ylabel="Δ"), "w_sweep_layers")
        sdf = pd.DataFrame({"layer": np.arange(1, L + 1), "delta": delta})
    csv_button(sdf, f"sweep_{kind}.csv", "w_sweep_csv")


# --- Compare checkpoints ------------------------------------------------------------------


def compare_tab(v: View) -> None:
    model_id, text, trace, layer, head, domains = v.model_id, v.text, v.trace, v.layer, v.head, v.domains
    from bertgeom.models import REGISTRY, ModelLoadError, custom_models_allowed

    st.caption(
        "Kovaleva et al. compare a head's attention maps before and after fine-tuning on the same input, but English "
        "word pieces and genome 12-mers share no input, so here both checkpoints' layer l read the same *layer input* "
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
                st.warning(f"'{plain(extra)}' has a different shape {hc.model_shape(extra)} from this model {shape}.")
        except ModelLoadError as exc:
            st.error(plain(exc))
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
        chart(head_grid(res[metric], colour_label="cosine", selected=(layer, head), zrange=(0.0, 1.0),
                                 colorscale="Viridis"), "w_cmp_grid", selects_head=True)
    with c2:
        chart(fh.layer_lines({metrics[m]: np.nanmean(res[m], axis=1) for m in metrics}, title="Layer mean",
                              ylabel="cosine", yrange=(min(0.0, float(np.nanmin([np.nanmin(res[m]) for m in metrics]))), 1.02)), "w_cmp_layers")
    a, b = hc.cached_compare_layer(model_id, partner, text, layer)
    st.markdown(f"#### {head_label(layer, head)} on the same layer input: this model vs "
                f"{REGISTRY[partner].display_name if partner in REGISTRY else partner}")
    axis = trace.axis_labels
    hov = hover_labels(axis, domains)
    zmax = fh.contrast_max(a[head], b[head])  # one scale for both, the largest few cells saturated
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**this model**")
        chart(fh.attention_map(a[head], axis, hover_labels=hov, zmax=zmax, max_ticks=fh.SIDE_BY_SIDE_TICKS), "w_cmp_a")
    with c2:
        st.markdown("**compared checkpoint**")
        chart(fh.attention_map(b[head], axis, hover_labels=hov, zmax=zmax, max_ticks=fh.SIDE_BY_SIDE_TICKS), "w_cmp_b")
    cdf = per_head_frame({f"cos_{m}": res[m] for m in metrics})
    csv_button(cdf, f"compare_{partner.replace('/', '_')}.csv", "w_cmp_csv")


TABS = {"Over a set of inputs": set_tab, "Head similarity": similarity_tab, "Disable heads": disable_tab,
        "Compare checkpoints": compare_tab}
