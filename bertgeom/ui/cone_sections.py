"""The four sections of the Cone Index page (streams, per class, data distribution, entropies)
and the set they read: widgets in, figures out; computations are cached in
:mod:`bertgeom.ui.cone_cache`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.sets import cone as conesets
from bertgeom.analysis.cone import ENTROPY_DOCS, STREAM_DOCS
from bertgeom.figures import cone as fc
from bertgeom.sets.inputs import set_fingerprint, shipped_set
from bertgeom.tables import per_head_frame
from bertgeom.ui import cone_cache
from bertgeom.ui.state import PageView
from bertgeom.safety import plain
from bertgeom.ui.isotropy_section import isotropy_section as section
from bertgeom.ui.widgets import chart, csv_button, doc_list, errors_expander, guarded

MAX_SET = 400  # inputs read from an upload (bounded work)


@dataclass
class View(PageView):
    """What every section reads: the page view with the page's settings and the input's cones."""

    token_set: str
    pad_to: int | None
    unit: bool
    max_pos: int
    cur: dict
    section: str

    @property
    def m(self) -> int:
        return int(self.cur["m"])

    @property
    def norm_label(self) -> str:
        return "I / m" if self.unit else "I / Σ‖x‖"

    @property
    def display(self) -> dict:
        if self.kind.class_names:
            return {**self.kind.class_names, "": "all inputs"}
        return {"": "all inputs (unlabelled)"}


# ------------------------------------------------------------------ set helpers
def choose_set(v: View):
    """Set source widgets; returns (items, fingerprint, note) or None."""
    loaded, kind = v.loaded, v.kind
    results = cone_cache.results_dirs() if kind.can("precomputed_results") else []
    if kind.labelled_uploads:
        sources = ["shipped", "upload"] + (["precomputed"] if results else [])
        src = st.radio("Set", sources, horizontal=True, key="w_cone_set",
                       format_func={"shipped": f"shipped: {kind.shipped_set_description}",
                                    "upload": f"upload {kind.set_upload_label}",
                                    "precomputed": "a precomputed results directory"}.get)
    else:
        src = "shipped"
    if src == "precomputed":
        path = st.selectbox("Results directory (from `python -m bertgeom precompute`)", results, key="w_cone_results")
        note = cone_cache.results_note(path, loaded.weights_hash)
        st.caption(note)
        return (), f"precomputed:{path}", note
    if src == "shipped":
        items = shipped_set(loaded.spec.input_kind)
        labelled = sum(it.label is not None for it in items)
        note = (f"{len(items)} {kind.plural}: {kind.shipped_set_description}"
                + (", labelled with their class." if labelled else " (no labels)."))
    else:
        u1, u2 = st.columns(2)
        fasta = u1.file_uploader(kind.set_upload_label.capitalize(), type=list(kind.set_upload_types),
                                 key="w_cone_fasta")
        tsv = u2.file_uploader("Labels (optional TSV: name + label)", type=["tsv", "txt", "csv"], key="w_cone_labels",
                               help="Without it, labels are read from a '|label' suffix of each header (>seq1|omicron).")
        if fasta is None:
            st.info("Upload a FASTA file to analyse your own set.")
            return None
        items = cone_cache.uploaded_set(loaded.spec.input_kind, fasta.getvalue(),
                                        tsv.getvalue() if tsv is not None else None)
        note = f"Uploaded set '{plain(fasta.name)}': {len(items)} records."
        n_renamed = sum("#" in it.name and not it.text.startswith(f">{it.name}\n") for it in items)
        if n_renamed:
            note += f" {n_renamed} record(s) share a name with an earlier one and are told apart as name#2, #3…"
        if len(items) > MAX_SET:
            items = items[:MAX_SET]
            note += f" Only the first {MAX_SET} are analysed."
        if not any(it.label for it in items):
            note += " No labels were found, so the set is shown as one group."
    st.caption(note)
    return tuple(items), set_fingerprint(items), note


def load_set(v: View):
    loaded, model_id, token_set, pad_to, section = v.loaded, v.model_id, v.token_set, v.pad_to, v.section
    """The chosen set's per-input results (cached), after the correctly-classified filter."""
    chosen = choose_set(v)
    if chosen is None:
        return None
    items, fp, _ = chosen
    if fp.startswith("precomputed:"):  # computed elsewhere (e.g. on a Ray cluster): read, don't run the model
        data = cone_cache.precomputed_set(fp.split(":", 1)[1])
    else:
        data = cone_cache.set_cones(model_id, items, fp, token_set, pad_to)
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
    present = set(data.labels.tolist())
    order = [c for c in loaded.labels if c in present]
    return order + sorted(present - set(order))


def groups_of(data: conesets.ConeSet) -> np.ndarray:
    return data.labels


STREAM_CHOICES = {
    "hidden": "hidden state of every layer (0 = embeddings)",
    "layer_input": "layer input X",
    "head_output": "head output Z_h (mean over heads)",
    "one_head": "one head's output Z_h",
    "post_attention": "after concat + W_O + LayerNorm (U)",
    "layer_output": "layer output Y (after the MLP)",
    "multihead_faithful": "'multihead output' (official code)",
    "one_head_faithful": "one head's output (official code)",
}


STREAM_NEEDS = {"one_head": "head_output", "one_head_faithful": "head_output_faithful"}


def available_streams(data: conesets.ConeSet) -> list[str]:
    """The stream choices a set result holds (a precomputed set may hold hidden_states only)."""
    return [c for c in STREAM_CHOICES if data.has(STREAM_NEEDS.get(c, c))]


def stream_from_choice(data: conesets.ConeSet, choice: str, head: int, normalized: bool):
    if choice in STREAM_NEEDS:
        return data.stream_values(STREAM_NEEDS[choice], head=head, normalized=normalized)
    return data.stream_values(choice, normalized=normalized)


def stream_label(choice: str, head: int) -> str:
    return STREAM_CHOICES[choice].replace("one head's", f"head {head + 1}")


# ------------------------------------------------------------------ section: streams
def streams_section(v: View) -> None:
    L, m, cur, unit, norm_label = v.L, v.m, v.cur, v.unit, v.norm_label
    st.markdown("#### What each step of a layer does to the cone")
    st.caption(
        "Per layer: its input X, each head's output Z_h = A_h V_h (band: lowest to highest head), the "
        "post-attention sublayer U = LayerNorm(X + concat(Z) W_O + b) and the layer output after the MLP. "
        "X → heads shows what attention does; heads → U what concatenation + W_O + residual do; U → output what "
        "the MLP does."
    )
    s1, s2 = st.columns(2)
    faithful = s1.toggle("Show the official code's “multihead output”", value=True, key="w_cone_faithful",
                         help=STREAM_DOCS["multihead_faithful"].formula + ". It skips W_O and the trained LayerNorm, so "
                              "it differs from U.")
    normalized = s2.toggle(f"Normalised ({norm_label})", value=True, key="w_cone_stream_norm")
    suffix = "_norm" if normalized else ""
    keys = ["layer_input", "head_output", "post_attention", "layer_output"]
    if faithful:
        keys += ["multihead_faithful"]
    streams = {k: cur[k + suffix] for k in keys}
    chart(fc.stream_curves(streams, conesets.STREAM_LABELS, m, normalized=normalized, reference=unit or normalized,
                           title=f"Cone index of the streams of each layer (m = {m})"), "w_cone_streams")
    st.markdown("##### Each head's output, layer × head")
    hcols = st.columns(2 if faithful else 1)
    zr = (0.0, 1.0) if normalized else None
    with hcols[0]:
        chart(fc.head_heatmap(cur["head_output" + suffix], title="head output Z_h (true attention, W_V with bias)",
                              colour_label=norm_label if normalized else "I", zrange=zr), "w_cone_heads")
    if faithful:
        with hcols[1]:
            chart(fc.head_heatmap(cur["head_output_faithful" + suffix],
                                  title="head output, official code (transposed slices, no bias, no mask)",
                                  colour_label=norm_label if normalized else "I", zrange=zr), "w_cone_heads_faithful")
    rows = {"layer": np.arange(1, L + 1)}
    for k in ["layer_input", "head_output", "post_attention", "layer_output", "multihead_faithful",
              "head_output_faithful"]:
        v, vn = cur[k], cur[k + "_norm"]
        if v.ndim == 2:
            v, vn = v.mean(1), vn.mean(1)
            k = k + "_mean_over_heads"
        rows[f"{k}_I"], rows[f"{k}_{'I_over_m' if unit else 'I_over_sum_norms'}"] = v, vn
    stream_df = pd.DataFrame(rows)
    with st.expander("Numbers (per layer)"):
        st.dataframe(stream_df, hide_index=True, width="stretch")
    head_df = per_head_frame({"I": cur["head_output"], "I_norm": cur["head_output_norm"],
                              "I_official_code": cur["head_output_faithful"],
                              "I_norm_official_code": cur["head_output_faithful_norm"]})
    d1, d2 = st.columns(2)
    with d1:
        csv_button(stream_df, "cone_index_streams.csv", "w_cone_streams_csv", "Download streams CSV")
    with d2:
        csv_button(head_df, "cone_index_heads.csv", "w_cone_heads_csv", "Download per-head CSV")

# ------------------------------------------------------------------ section: per class
def classes_section(v: View) -> None:
    H, L, DISPLAY = v.H, v.L, v.display
    st.markdown("#### How the cone evolves for each class")
    with guarded("The computation over the set"):
        loaded_set = load_set(v)
        if loaded_set is not None:
            items, fp, data, labelled = loaded_set
            groups, order = groups_of(data), group_order(data, v.loaded)
            if not labelled:
                st.info("This set has no class labels, so all inputs form one family of curves "
                        "(mean ± sd over the set). Use the variant model with its genomes for per-class curves.")
            a1, a2, a3 = st.columns([4, 2, 2])
            streams_here = available_streams(data)
            choice = a1.selectbox("Stream", streams_here, format_func=lambda c: STREAM_CHOICES[c].replace("…L", f"…{L}"), key="w_cone_set_stream")
            head = a2.number_input("Head (one-head streams)", 1, H, min(5, H), key="w_cone_set_head",
                                   help="For the streams of one head. The official code used head 5 (index 4).") - 1
            normalized = a3.toggle("Normalised (I / m)", value=True, key="w_cone_set_norm")
            values, x = stream_from_choice(data, choice, head, normalized)
            mref = float(np.median(data.m))
            ref = 1 / np.sqrt(mref) if normalized else np.sqrt(mref)
            chart(fc.class_curves(values, groups, x=x, order=order, display=DISPLAY,
                                  y_title="I / m" if normalized else "I", unit_range=normalized,
                                  reference=ref, reference_label=f"isotropic (median m = {mref:.0f})",
                                  x_title="layer (0 = embeddings)" if choice == "hidden" else "layer",
                                  title=f"{stream_label(choice, head)}: mean ± sd "
                                        f"{'per class' if labelled else 'over the set'}, {len(values)} inputs"),
                  "w_cone_class_curves")
            st.markdown("##### Histograms per layer (20 bins, as the official code)")
            mode = st.radio("Compare in each layer", ["classes", "streams"], horizontal=True, key="w_cone_hist_mode",
                            format_func={"classes": "the classes (stream above)",
                                         "streams": "streams (official code: input, multihead output, output)"}.get)
            if mode == "classes":
                series = {g: values[groups == g] for g in order}
                panels = [f"layer {i}" for i in x]
                hist_title = f"{stream_label(choice, head)} {'per class' if labelled else 'over the set'}"
            else:
                h1, h2 = st.columns(2)
                cls_opts = ["__all__"] + order
                default_cls = "omicron" if "omicron" in order else "__all__"
                pick = h1.selectbox("Inputs", cls_opts, index=cls_opts.index(default_cls), key="w_cone_hist_class",
                                    format_func=lambda c: "all inputs" if c == "__all__" else DISPLAY.get(c, c))
                stream_opts = [c for c in streams_here if c != "hidden"]
                chosen_streams = h2.multiselect(
                    "Streams", stream_opts, key="w_cone_hist_streams",
                    default=[c for c in ("layer_input", "multihead_faithful", "layer_output") if c in stream_opts],
                    format_func=lambda c: stream_label(c, head))
                sel = np.ones(len(groups), bool) if pick == "__all__" else groups == pick
                series = {stream_label(c, head): stream_from_choice(data, c, head, normalized)[0][sel]
                          for c in chosen_streams}
                panels = [f"layer {i}" for i in range(1, L + 1)]
                hist_title = f"streams of {'all inputs' if pick == '__all__' else DISPLAY.get(pick, pick)}"
            if series:
                chart(fc.layer_histograms(series, panel_titles=panels, display=DISPLAY,
                                          x_title="I / m" if normalized else "I", title=hist_title),
                      "w_cone_hists")
            stats = conesets.group_stats(values, groups, order)
            stat_df = pd.DataFrame([{"class": DISPLAY.get(g, g), "layer": int(xi), "mean": s["mean"][j],
                                     "sd": s["sd"][j], "n": int(s["n"])}
                                    for g, s in stats.items() for j, xi in enumerate(x)])
            per_input = pd.DataFrame({"input": data.names, "label": data.labels, "predicted": data.predicted,
                                      "correct": data.correct, "m": data.m})
            for j, xi in enumerate(x):
                per_input[f"layer_{xi}"] = values[:, j]
            with st.expander("Numbers (mean ± sd per class and layer)"):
                st.dataframe(stat_df, hide_index=True, width="stretch")
            d1, d2 = st.columns(2)
            with d1:
                csv_button(stat_df, "cone_index_per_class.csv", "w_cone_class_csv", "Download per-class CSV")
            with d2:
                csv_button(per_input, "cone_index_per_input.csv", "w_cone_inputs_csv", "Download per-input CSV")

# ------------------------------------------------------------------ section: data distribution
def distribution_section(v: View) -> None:
    L, DISPLAY = v.L, v.display
    st.markdown("#### Where the classes separate: the [CLS] vectors of the set, layer by layer")
    st.caption("Each point is one input's [CLS] vector (or the mean of its content tokens) after the chosen layer, "
               "projected to 2 or 3 dimensions; colour = the input's labelled class (one colour when the set has no labels). PCA is exact and fast; UMAP and t-SNE "
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
                ptitle = f"PCA of {feat_opts[feature]}, {layer_name}: {100 * proj.total_explained_variance:.1f}% of the variance shown"
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
                chart(fc.layer_score_curve({"silhouette (−1…1)": sep["silhouette"]}, selected=layer,
                                           y_title="silhouette",
                                           title="Separability of the classes per layer (silhouette, full dimension)"),
                      "w_cone_silhouette")
                st.caption("Silhouette (our additions, [docs/methods.md §9](/?view=methods&section=9)): for each input, how much closer it is to its own class than "
                           "to the nearest other class, averaged; near 0 = classes overlap, near 1 = well separated.")
                sep_df = pd.DataFrame({"layer": np.arange(L + 1), "silhouette": sep["silhouette"],
                                       "between_within_variance_ratio": sep["variance_ratio"]})
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
                       format_func=lambda c: f"{display.get(c, c)} ({counts[c]}) vs the rest ({len(groups) - counts[c]})")
    res = cone_cache.probe(feats, groups, pos)
    chart(fc.layer_score_curve({"balanced accuracy": res["balanced_accuracy"], "ROC AUC": res["auc"]},
                               selected=layer, y_title="held-out score", chance=0.5,
                               title=f"{display.get(pos, pos)} vs the rest: held-out probe score per layer "
                                     f"({res['folds']}-fold)"),
          "w_cone_probe")
    csv_button(pd.DataFrame({"layer": np.arange(feats.shape[0]), "balanced_accuracy": res["balanced_accuracy"],
                             "roc_auc": res["auc"]}), f"probe_{pos}_vs_rest.csv", "w_cone_probe_csv",
               "Download the probe scores (CSV)")


# ------------------------------------------------------------------ section: entropies
def entropy_section(v: View) -> None:
    DISPLAY, loaded, kind, trace, max_pos = v.display, v.loaded, v.kind, v.trace, v.max_pos
    model_id, text = v.model_id, v.text
    st.markdown("#### Entropies of attention, per layer (mean over heads; band: lowest to highest head)")
    st.caption("Left: exactly as the official code computes them — its “von Neumann” entropy scales the "
               "|eigenvalues| to unit L2 norm (so they do not sum to 1), and its Shannon entropy puts the values of "
               "all entries into 20 bins (it describes how attention values are spread, not where a token looks). "
               "Right: properly normalised versions (our additions, [docs/methods.md §9](/?view=methods&section=9)): eigenvalues and squared singular "
               "values scaled to sum 1, and the mean entropy of each token's attention row.")
    with guarded("The entropy computation"):
        sources = {"input": "this input"}
        if loaded.spec.is_classifier and kind.labelled_uploads:
            sources["class"] = "class-mean attention over the set (official code's recipe)"
        e1, e2 = st.columns([3, 3], vertical_alignment="bottom")
        if len(sources) > 1:
            src = e1.radio("Attention of", list(sources), format_func=sources.get, horizontal=True, key="w_cone_ent_src")
        else:
            src = "input"
            e1.caption("Attention of this input (the class-mean recipe needs a classifier and a labelled set).")
        pad512 = e2.checkbox(f"{max_pos} × {max_pos} matrix as the official code", value=kind.can("official_padding"), key="w_cone_ent_pad",
                             help="The code's matrices had 512 rows and columns, every row and column from the first [SEP] on "
                                  "(the [SEP]s, a second sentence, the padding) zeroed. The zeros "
                                  "change the binned Shannon entropy a lot; the eigenvalue entropy not at all.",
                             disabled=trace.encoded.n_tokens > max_pos)
        epad = max_pos if pad512 and trace.encoded.n_tokens <= max_pos else None
        ent = None
        if src == "input":
            ent = cone_cache.input_entropies(model_id, text, epad)
            where = "this input"
        else:
            chosen = choose_set(v)
            if chosen is not None:
                items, fp, _ = chosen
                labels_present = [c for c in loaded.labels if any(it.label == c for it in items)]
                if fp.startswith("precomputed:"):
                    st.info("Per-head entropies need per-head maps: run precompute with `--maps heads` and read "
                            "`maps/<class>.npy`, or pick the shipped set here.")
                elif not labels_present:
                    st.info("This set has no labels of the model's classes.")
                else:
                    f1, f2 = st.columns(2)
                    cls = f1.selectbox("Class", labels_present, key="w_cone_ent_class",
                                       index=labels_present.index("omicron") if "omicron" in labels_present else 0,
                                       format_func=lambda c: DISPLAY.get(c, c))
                    only = f2.checkbox("Correctly classified only (as the official code)", value=True,
                                       key="w_cone_ent_correct")
                    res = cone_cache.class_entropies(model_id, items, fp, cls, epad, only)
                    if int(res["n_used"]) == 0:
                        st.warning("No input of this class qualifies (none is classified correctly?): untick the box.")
                    else:
                        ent = res
                        where = f"mean attention of {int(res['n_used'])} {DISPLAY.get(cls, cls)} inputs"
        if ent is not None:
            scaled = st.toggle("Divide the proper entropies by ln n (0 = one direction/key, 1 = uniform)",
                               key="w_cone_ent_scale")
            lbl = {k: d.label for k, d in ENTROPY_DOCS.items()}
            g1, g2 = st.columns(2)
            with g1:
                chart(fc.entropy_figure({k: ent[k] for k in conesets.FAITHFUL_ENTROPIES}, lbl,
                                        title=f"Official code — {where}"), "w_cone_ent_code")
            proper = {k: ent[k] / (float(ent["ln_n"]) if scaled else 1.0) for k in conesets.PROPER_ENTROPIES}
            with g2:
                chart(fc.entropy_figure(proper, lbl, title=f"Properly normalised — {where}",
                                        y_title="entropy / ln n" if scaled else "entropy (nats)",
                                        reference={("maximum 1" if scaled else f"maximum ln n = {float(ent['ln_n']):.2f}"):
                                                   1.0 if scaled else float(ent["ln_n"])}),
                      "w_cone_ent_proper")
            with st.expander("How each entropy is computed"):
                doc_list(ENTROPY_DOCS[k] for k in conesets.FAITHFUL_ENTROPIES + conesets.PROPER_ENTROPIES)
                st.markdown(f"n = {int(round(np.exp(float(ent['ln_n']))))} rows kept (not [SEP], not padding) for "
                            "the proper entropies; the official code's use the whole matrix.")
            ent_df = per_head_frame({k: ent[k] for k in conesets.FAITHFUL_ENTROPIES + conesets.PROPER_ENTROPIES})
            csv_button(ent_df, "attention_entropies.csv", "w_cone_ent_csv", "Download per-head CSV")


def isotropy_section(v: View) -> None:
    section(v, choose_set)


SECTIONS = {
    "streams": ("Streams inside each layer", streams_section),
    "classes": ("Per class over a set", classes_section),
    "distribution": ("Data distribution ([CLS])", distribution_section),
    "entropy": ("Attention entropies", entropy_section),
    "isotropy": ("IsoScore beside the cone", isotropy_section),
}
