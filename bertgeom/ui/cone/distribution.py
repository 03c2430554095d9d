"""Cone Index section *Data distribution ([CLS])*: where the classes of a set separate, layer by layer:
a 2-D or 3-D projection of each input's vector (PCA, UMAP or t-SNE), the explained variance, the
silhouette per layer and a one-class-against-the-rest probe.

References: Bonino et al. 2025 (arXiv:2502.12033); Rousseeuw 1987 (silhouette); McInnes et al. 2018
(UMAP, arXiv:1802.03426); van der Maaten & Hinton 2008 (t-SNE); docs/methods.md §9.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.figures import cone as fc
from bertgeom.sets import cone as conesets
from bertgeom.ui import cone_cache
from bertgeom.ui.cone.set_picker import group_order, groups_of, load_set
from bertgeom.ui.cone.view import View
from bertgeom.ui.widgets import chart, csv_button, guarded


def distribution_section(v: View) -> None:
    """The section: the set's vectors projected per layer, their separability and a probe per class."""
    L, DISPLAY = v.L, v.display
    st.markdown("#### Where the classes separate: the [CLS] vectors of the set, layer by layer")
    st.caption("Each point is one input's [CLS] vector (or the mean of its content tokens) after the chosen layer, "
               "projected to 2 or 3 dimensions; colour = the input's labelled class (one colour when the set has no "
               "labels). PCA is exact and fast; UMAP and t-SNE "
               "(seed 42) are slower and only run when you pick them.")
    with guarded("The data-distribution analysis"):
        loaded_set = load_set(v)
        if loaded_set is not None:
            items, fp, data, labelled = loaded_set
            groups, order = groups_of(data), group_order(data, v.loaded)
            feat_opts = {k: label for k, label in conesets.VECTORS.items() if data.has(k)}
            if not feat_opts:
                st.info("This set holds no vectors to project.")
                st.stop()
            b1, b2, b3 = st.columns([3, 3, 2])
            feature = b1.selectbox("Vectors", list(feat_opts), format_func=feat_opts.get, key="w_cone_feature")
            method = b2.radio("Projection", ["pca", "umap", "tsne"], horizontal=True, key="w_cone_method",
                              format_func={"pca": "PCA", "umap": "UMAP (slow)", "tsne": "t-SNE (slow)"}.get)
            dims = b3.radio("Plot", [2, 3], horizontal=True, key="w_cone_dims", format_func=lambda d: f"{d}-D")
            if feature == "logits":
                X = data.vectors("logits").astype(np.float64)
                layer_name = "logits"
                layer = None
            else:
                layer = st.slider("Layer (0 = embeddings)", 0, L, L, key="w_cone_proj_layer")
                X = data.vectors(feature)[:, layer, :].astype(np.float64)
                layer_name = f"layer {layer}"
            N = X.shape[0]
            if method != "pca" and N < dims + 3:
                st.warning(f"{method.upper()} needs at least {dims + 3} inputs; this set has {N}. Showing PCA.")
                method = "pca"
            proj = cone_cache.projection(X, method, dims)
            hover = [f"{n}<br>label: {DISPLAY.get(lab, lab) or '—'}<br>predicted: {p or '—'}"
                     for n, lab, p in zip(data.names, data.labels, data.predicted)]
            if proj.explained_variance_ratio is not None:
                ax = [f"PC{i + 1} ({100 * r:.1f}%)" for i, r in enumerate(proj.explained_variance_ratio)]
                ptitle = (f"PCA of {feat_opts[feature]}, {layer_name}: "
                          f"{100 * proj.total_explained_variance:.1f}% of the variance shown")
            else:
                ax = [f"{method.upper()} {i + 1}" for i in range(dims)]
                ptitle = f"{ 'UMAP' if method == 'umap' else 't-SNE'} of {feat_opts[feature]}, {layer_name} (seed 42)"
            p1, p2 = st.columns([3, 2])
            with p1:
                chart(fc.projection_scatter(proj.coords, groups, hover=hover, order=order, display=DISPLAY,
                                            title=ptitle, axis_titles=ax), "w_cone_proj")
            with p2:
                k = int(min(10, N, X.shape[1]))
                chart(fc.pareto_chart(cone_cache.pareto(X, k), title=f"PCA: explained variance, {layer_name}"),
                      "w_cone_pareto")
            n_cls = len(set(groups.tolist()) - {""})
            sep_df = None
            if feature != "logits" and labelled and n_cls >= 2:
                has = groups != ""  # unlabelled inputs do not count in the score
                feats = np.transpose(data.vectors(feature)[has], (1, 0, 2)).astype(np.float64)
                sep = cone_cache.separability(feats, groups[has])
                chart(fc.layer_score_curve({"silhouette (−1…1)": sep.silhouette}, selected=layer,
                                           y_title="silhouette",
                                           title="Separability of the classes per layer (silhouette, full dimension)"),
                      "w_cone_silhouette")
                st.caption("Silhouette (our additions, [docs/methods.md §9](/?view=methods&section=9)): for each "
                           "input, how much closer it is to its own class than "
                           "to the nearest other class, averaged; near 0 = classes overlap, near 1 = well separated.")
                sep_df = pd.DataFrame({"layer": np.arange(L + 1), "silhouette": sep.silhouette,
                                       "between_within_variance_ratio": sep.variance_ratio})
                probe_block(feats, groups[has], order, layer, DISPLAY)
            elif not labelled:
                st.info("No class labels in this set: the points are one group and no separability score is defined.")
            coord_df = pd.DataFrame(proj.coords, columns=[f"dim{i + 1}" for i in range(dims)])
            coord_df.insert(0, "label", data.labels)
            coord_df.insert(0, "input", data.names)
            d1, d2 = st.columns(2)
            with d1:
                csv_button(coord_df, f"projection_{method}_{layer_name.replace(' ', '')}.csv", "w_cone_proj_csv",
                           "Download coordinates CSV")
            if sep_df is not None:
                with d2:
                    csv_button(sep_df, "separability_per_layer.csv", "w_cone_sep_csv", "Download separability CSV")

def probe_block(feats: np.ndarray, groups: np.ndarray, order: list[str], layer: int, display: dict) -> None:
    """One class against the rest, per layer: a small MLP's held-out score (``bertgeom.analysis.probe``)."""
    counts = {c: int((groups == c).sum()) for c in order if (groups == c).sum() >= 2}
    if not counts or len(groups) - min(counts.values()) < 2:
        return
    st.markdown("##### One class against the rest: a probe per layer")
    st.caption("**What this shows:** whether one class can be *decoded* from a layer's vectors: a small neural "
               "network (one hidden layer of 32 units) learns 'this class or not' and is scored on inputs it never "
               "saw (stratified cross-validation). Balanced accuracy 0.5 = chance, 1 = perfectly separable. "
               "A layer where every input has the same vector (the [CLS] embedding before layer 1) tells the "
               "classes nothing and is left blank: a probe there only learns the class shares of its training "
               "folds, which cross-validation scores below chance. This probe is this tool's design (the paper's "
               "notebook trained one on one token of one variant); see docs/methods.md.")
    c1, _ = st.columns([2, 3])
    pos = c1.selectbox("Class", list(counts), key="w_cone_probe_cls",
                       format_func=lambda c: f"{display.get(c, c)} ({counts[c]}) vs the rest "
                                             f"({len(groups) - counts[c]})")
    res = cone_cache.probe(feats, groups, pos)
    chart(fc.layer_score_curve({"balanced accuracy": res.balanced_accuracy, "ROC AUC": res.auc},
                               selected=layer, y_title="held-out score", chance=0.5,
                               title=f"{display.get(pos, pos)} vs the rest: held-out probe score per layer "
                                     f"({res.folds}-fold)"),
          "w_cone_probe")
    csv_button(pd.DataFrame({"layer": np.arange(feats.shape[0]), "balanced_accuracy": res.balanced_accuracy,
                             "roc_auc": res.auc}), f"probe_{pos}_vs_rest.csv", "w_cone_probe_csv",
               "Download the probe scores (CSV)")
