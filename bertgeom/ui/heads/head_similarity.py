"""Attention Heads tab *Head similarity*: Clark's Jensen-Shannon distance between heads placed by MDS,
beside Guan-style k-means clusters on the standardised feature vectors.

References: Clark et al. 2019 (arXiv:1906.04341) §6; Guan et al. 2020 (distance features).
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.analysis.heads import FEATURE_DOCS
from bertgeom.analysis.patterns import classify_heads, display_label, display_labels
from bertgeom.analysis.patterns import TAXONOMY_NAMES as TAXONOMIES
from bertgeom.figures import heads as fh
from bertgeom.figures.base import head_grid, matrix_heatmap
from bertgeom.tables import head_label, head_labels
from bertgeom.ui import heads_cache as hc
from bertgeom.ui.heads.view import View, shipped_set_summary
from bertgeom.ui.names import feature_label
from bertgeom.ui.widgets import chart, csv_button


#: Guan-style clustering features (distances f15-f18, plus sink and entropy).
GUAN_FEATURES = ["mean_dist_norm", "signed_offset_norm", "local_1", "local_2", "local_4", "sink", "entropy_norm",
                 "self", "prev", "next"]


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
        D, rows_used = hc.cached_js_input(v.subject)
        feats, lab = table, labels
        note = (f"JS summed over {rows_used} query rows" +
                (" (evenly spaced: the input is long)" if rows_used < trace.encoded.n_tokens else "") + ".")
    else:
        summary = shipped_set_summary(v.loaded)
        D = summary.arrays["js"]
        mask = summary.usable()
        feats = summary.mean_table(mask)
        lab = classify_heads(feats, th)
        long = summary.arrays["js_rows"] < summary.arrays["ntok"]
        note = (f"JS summed over {summary.n} inputs" +
                (f" ({int(long.sum())} long inputs contribute {hc.JS_MAX_ROWS} evenly spaced rows each)"
                 if long.any() else "")
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
                               selected=(layer, head), hover_text=hover, axis_titles=("MDS 1", "MDS 2")), "w_mds",
                               selects_head=True)
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
    st.markdown("Cluster centres (feature units; names from the rules of "
                "[docs/methods.md §6](/?view=methods&section=6))")
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
