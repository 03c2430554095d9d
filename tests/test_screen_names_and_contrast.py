"""Screen fidelity on real computations: plain-word chart titles (variable names in the
hover only), one display name per class, the integrated-gradients track clear of the spike domain
bar, and the same RNA note on every page that takes the same paste."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertgeom.analysis.heads import FEATURE_DOCS, head_features
from bertgeom.tokens import TokenKinds
from bertgeom.figures import heads as fh
from bertgeom.sars_cov_2.variant.figures import spike_track
from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY
from bertgeom.sars_cov_2.variant.spec import genome_set
from bertgeom.trace import run_trace
from bertgeom.ui.names import VARIABLE_NAME, class_name, input_notes
from bertgeom.sars_cov_2.variant.spec import GENOME

APP = str(Path(__file__).resolve().parent.parent / "app.py")
RNA_NOTE = "RNA input: U read as T"


def _screen_texts(fig) -> list[str]:
    """Every text a chart shows without hovering: titles, axis and colour-bar titles, legend
    entries, category tick labels."""
    spec = json.loads(fig.to_json()) if hasattr(fig, "to_json") else fig
    lay = spec.get("layout", {})
    out = []

    def title(obj):
        t = (obj or {}).get("title")
        return t.get("text", "") if isinstance(t, dict) else (t or "")

    out.append(title(lay))
    for k, ax in lay.items():
        if re.fullmatch(r"[xy]axis\d*", k):
            out.append(title(ax))
            out += [str(t) for t in ax.get("ticktext") or []]
    for tr in spec.get("data", []):
        if tr.get("showlegend", True) is not False and tr.get("name"):
            out.append(str(tr["name"]))
        out.append(title((tr.get("marker") or {}).get("colorbar")))
        out.append(title(tr.get("colorbar")))
        for key in ("x", "y"):
            vals = tr.get(key)
            if isinstance(vals, list) and vals and isinstance(vals[0], str):
                out += vals
    return [t for t in out if t]


def _variables_on_screen(fig) -> list[str]:
    return [t for t in _screen_texts(fig) if VARIABLE_NAME.search(t)]


@pytest.fixture(scope="module")
def sentence_features(tiny_bert):
    """Per-head features of two sentences through a real (tiny) BERT, stacked as over a set."""
    tables = []
    for s in ("The cat sat on the mat.", "Attention heads look at other tokens, then at [SEP]."):
        enc = run_trace(tiny_bert, s)
        kinds = TokenKinds(is_cls=enc.encoded.is_cls, is_sep=enc.encoded.is_sep, is_punct=enc.encoded.is_punct)
        tables.append(head_features(enc.attentions, kinds))
    return tables


def test_feature_distribution_figures_show_plain_words_and_keep_the_variable_in_the_hover(sentence_features):
    t1, t2 = sentence_features
    for name in [n for n in t1.names if n in FEATURE_DOCS]:
        mean = (np.asarray(t1[name]) + np.asarray(t2[name])) / 2
        groups = {"gh": np.array([t1[name][0, 1], t2[name][0, 1]]), "omicron": np.array([t1[name][1, 2]])}
        grid, box = fh.feature_over_set(mean, groups, name, layer=0, head=1, display=CLASS_DISPLAY)
        for fig in (grid, box):
            assert _variables_on_screen(fig) == [], (name, _variables_on_screen(fig))
        label = FEATURE_DOCS[name].label
        assert grid.data[0].marker.colorbar.title.text == label and box.layout.yaxis.title.text == label
        assert name in grid.data[0].hovertext[0] and name in box.data[0].hovertemplate  # the symbol: hover only
        assert [tr.name for tr in box.data] == ["GH / pre-VOC", "Omicron"]  # one display name per class


def test_the_old_feature_distribution_call_put_variable_names_on_the_axes(sentence_features):
    """What the set view drew before #14's fix (the raw name as colour-bar and axis title)."""
    t1, _ = sentence_features
    old_box = fh.distribution({"gh": t1["k90_frac"][:, 0]}, ylabel="k90_frac", title="L1 H1: k90_frac per input")
    assert _variables_on_screen(old_box)  # the checker sees what #14 complained about


def test_class_names_are_the_display_names():
    assert class_name("gh") == "GH / pre-VOC" and class_name("omicron") == "Omicron"
    assert class_name("all classes") == "all classes"


def test_box_and_violin_colours_follow_the_display_name(sentence_features):
    t1, _ = sentence_features
    fig = fh.distribution({"gh": t1["entropy"][:, 0]}, kind="violin", display=CLASS_DISPLAY)
    from bertgeom.figures.base import category_colours

    assert fig.data[0].name == "GH / pre-VOC"
    assert fig.data[0].line.color == category_colours(["GH / pre-VOC"])["GH / pre-VOC"]


# --- the integrated-gradients track and the domain bar ----------------------------------------


def test_integrated_gradients_track_never_overlaps_the_domain_bar(tiny_variant):
    from bertgeom.analysis.attributions import integrated_gradients_checked
    from bertgeom.sars_cov_2.variant.explain import attention_rollout, cls_attention_by_layer

    trace = run_trace(tiny_variant, genome_set("demo")[3].text)
    ig = integrated_gradients_checked(tiny_variant, trace.encoded.input_ids, int(np.argmax(trace.logits)), steps=4)
    assert (ig.attributions[1:-1] < 0).any()  # a signed track: the case that drew over the bar
    tracks = {"[CLS] attention": cls_attention_by_layer(trace)[-1], "attention rollout": attention_rollout(trace)[-1],
              "integrated gradients": ig.attributions}
    fig = spike_track(tracks, trace.encoded.axis_labels, trace.encoded.domains)
    lay = fig.layout
    track_dom, bar_dom = tuple(lay.yaxis.domain), tuple(lay.yaxis2.domain)
    assert bar_dom[1] < track_dom[0]  # disjoint: the bar lies wholly under the tracks
    assert fig.layout.shapes and all(s.yref == "y2" for s in fig.layout.shapes)
    assert all(a.yref == "y2" for a in fig.layout.annotations)
    lines = [tr for tr in fig.data if tr.name in tracks]
    assert len(lines) == 3 and all(tr.yaxis in (None, "y") for tr in lines)
    low, high = lay.yaxis.range
    for tr in lines:  # every spike token's value inside the tracks' own axis ([CLS]/[SEP] are off scale)
        y = np.asarray(tr.y, dtype=float)[1:-1]
        assert low <= np.nanmin(y) and np.nanmax(y) <= high
    assert lay.xaxis.anchor == "y2"  # the position ticks sit under the bar, not between bar and tracks
    assert lay.legend.yanchor == "bottom" and lay.legend.y >= 1  # the legend above the plot, not on the mutation ticks
    assert len({tr.line.color for tr in lines}) == 3  # rollout and integrated gradients no longer two reds
    bar_colours = {sh.fillcolor.lower() for sh in fig.layout.shapes}
    assert not bar_colours & {tr.line.color.lower() for tr in lines}  # no track wears a domain's colour


# --- the RNA note -----------------------------------------------------------------------------


def _rna(text: str) -> str:
    lines = text.splitlines()
    return "\n".join([lines[0]] + [ln.replace("T", "U") for ln in lines[1:]])


def test_the_rna_note_is_the_same_on_the_sidebar_pages_and_the_classifier(tiny_variant):
    rna = _rna(genome_set("demo")[3].text)
    sidebar = input_notes(run_trace(tiny_variant, rna).encoded.notes)  # Heads, Subspace, Cone
    record = GENOME.parse(rna)[0]  # the classifier reads the paste once into records
    classifier_trace = run_trace(tiny_variant, record)
    assert RNA_NOTE in record.notes and RNA_NOTE in classifier_trace.encoded.notes  # the record keeps how it was read
    classifier = input_notes(classifier_trace.encoded.notes, record.notes)
    assert RNA_NOTE in sidebar and classifier == sidebar


def test_reading_notes_follow_each_record(tiny_variant):
    a, b = genome_set("demo")[0].text, genome_set("demo")[5].text
    records = GENOME.parse(a + "\n" + _rna(b))
    assert len(records) == 2 and RNA_NOTE not in records[0].notes and RNA_NOTE in records[1].notes


@pytest.fixture
def page_with_paste(tiny_variant_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")

    def open_page(page: str, genome_text: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=600)
        at.session_state["model_id"] = str(tiny_variant_dir)
        at.session_state["genome_value"] = genome_text
        at.run()
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return open_page


def test_every_page_that_takes_the_paste_shows_the_same_rna_note(page_with_paste):
    rna = _rna(genome_set("demo")[7].text)
    shown = {}
    for page in ("bertgeom/sars_cov_2/page.py", "app_pages/attention_heads.py"):
        at = page_with_paste(page, rna)
        shown[page] = [c.value for c in at.caption if "RNA" in c.value]
    assert shown["bertgeom/sars_cov_2/page.py"] == shown["app_pages/attention_heads.py"] != []
    assert "U read as T" in shown["bertgeom/sars_cov_2/page.py"][0]


# --- attention maps that never look blank ---------------------------------------------------


def test_attention_maps_of_a_long_input_are_auto_contrasted(minilm):
    """A long input's maps (MiniLM, 82 tokens): scaled to their largest weight, a [CLS]/[SEP] sink
    leaves most heads almost white; scaled to the 99.5% quantile, every head shows at least 1% of
    its cells at a tenth of the colour scale or more, and the colour bar says what saturates."""
    text = " ".join(["The committee met on Tuesday to discuss the budget, and after a long debate it "
                     "approved the plan."] * 4)
    trace = run_trace(minilm, text)
    new, old = [], []
    for a in trace.attentions.reshape(-1, *trace.attentions.shape[-2:]):
        fig = fh.attention_map(a, trace.axis_labels)
        z, top = np.asarray(fig.data[0].z, dtype=float), fig.data[0].zmax
        new.append((z >= 0.1 * top).mean())
        old.append((z >= 0.1 * a.max()).mean())
        assert np.nanmax(z) == pytest.approx(float(a.max()))  # the values themselves are untouched
        if top < 0.999 * a.max():
            assert "darkest" in fig.data[0].colorbar.title.text
    new, old = np.array(new), np.array(old)
    assert new.min() >= 0.01 and (new >= old).all() and new.mean() >= 2 * old.mean()
    assert old.min() < 0.01  # what the plain maximum scale left (almost) blank


def test_side_by_side_maps_share_one_contrast(minilm):
    trace = run_trace(minilm, "The cat sat on the mat because it was warm.")
    a, b = trace.attentions[2, 0], trace.attentions[2, 1]
    top = fh.contrast_max(a, b)
    assert min(a.max(), b.max()) * 0 < top <= max(a.max(), b.max())
    figs = [fh.attention_map(m, trace.axis_labels, zmax=top) for m in (a, b)]
    assert figs[0].data[0].zmax == figs[1].data[0].zmax == top


def test_faithful_comparison_maps_of_a_real_head_are_not_blank(minilm):
    """The Subspace page's correct / faithful / difference maps on a real input (the page's own
    recipe: the official code's attention from the next layer's output): every colour scale stops
    at the 99.5% quantile, so each panel colours more cells than a scale ending at its largest one."""
    from bertgeom import attention as att
    from bertgeom.figures.subspace import attention_comparison_figure
    from bertgeom.sets.subspace import faithful_input
    from bertgeom.weights import extract_layer_weights

    text = " ".join(["The committee met on Tuesday to discuss the budget, and after a long debate it "
                     "approved the plan."] * 3)
    trace = run_trace(minilm, text)
    layer, head = 1, 0
    lw = extract_layer_weights(minilm.model)[layer]
    Af = att.faithful_attention(faithful_input(trace.hidden_states, layer), lw)[head]
    Ac = trace.attentions[layer, head]
    fig = attention_comparison_figure(Ac, Af, trace.axis_labels, layer=layer, head=head)
    heat = [t for t in fig.data if t.type == "heatmap"]
    for tr, raw in zip(heat, (Ac, Af, np.abs(Af - Ac))):
        z = np.abs(np.asarray(tr.z, dtype=float))
        assert (z >= 0.1 * tr.zmax).mean() >= (z >= 0.1 * raw.max()).mean()
        assert (z >= 0.1 * tr.zmax).mean() >= 0.01
    assert "darkest colour:" in fig.layout.title.text  # said once, under the title, not beside a thin colour bar


def test_every_metric_label_the_pages_show_is_plain_words():
    """The labels that title grids, colour bars and options on every page (as the pages show them)."""
    from bertgeom.analysis.cone import ENTROPY_DOCS, STREAM_DOCS
    from bertgeom.analysis.subspace import DATA_FEATURE_DOCS, WEIGHT_FEATURE_DOCS
    from bertgeom.ui.names import symbols

    tables = (FEATURE_DOCS, WEIGHT_FEATURE_DOCS, DATA_FEATURE_DOCS, STREAM_DOCS, ENTROPY_DOCS)
    shown = [symbols(d.label) for t in tables for d in t.values()]
    assert [x for x in shown if VARIABLE_NAME.search(x)] == []
    assert VARIABLE_NAME.search(WEIGHT_FEATURE_DOCS["qk_skew_share"].label)  # as documented: alpha_h
    assert symbols(WEIGHT_FEATURE_DOCS["qk_skew_share"].label).startswith("Skew share α_h")


def test_the_significance_legend_sits_under_the_head_axis_title():
    """The domain test's grid: the star legend used to share a line with the axis title 'head'."""
    from bertgeom.figures.heads import significance_grid

    rng = np.random.default_rng(0)
    z = rng.normal(size=(6, 12)) * 10
    sig = z > 12
    sig[0, 1] = True
    fig = significance_grid(z, sig, np.where(sig, 1e-9, 0.5), selected=(0, 0))
    lay = fig.layout
    plot_h = lay.height - lay.margin.t - lay.margin.b
    assert lay.xaxis.title.text == "head" and lay.legend.yanchor == "top"
    assert -lay.legend.y * plot_h >= 55  # below the tick labels (~20 px) and the title (~20 px more)
    assert lay.margin.b >= -lay.legend.y * plot_h + 20  # and the legend row still inside the figure


def test_the_classifier_names_its_example_buttons_as_every_chart_names_the_classes(page_with_paste):
    at = page_with_paste("bertgeom/sars_cov_2/page.py", genome_set("demo")[7].text)
    labels = [b.label for b in at.button if str(b.key).startswith("w_example_")]
    assert sorted(labels) == sorted(CLASS_DISPLAY.values())  # "GH / pre-VOC", not "GH" here and the full name there
    probs = next(json.loads(el.proto.spec) for el in at.get("plotly_chart")
                 if json.loads(el.proto.spec)["data"][0]["type"] == "bar")
    assert set(probs["data"][0]["y"]) == set(CLASS_DISPLAY.values())


def test_cluster_names_are_listed_in_their_own_numbering(sentence_features):
    """k-means on real head features: the page lists clusters as their (unique) names number them."""
    from bertgeom.analysis.headsim import cluster_heads, name_clusters
    from bertgeom.ui.heads.head_similarity import _name_order

    t1, _ = sentence_features
    names = ["mean_dist_norm", "signed_offset_norm", "sink", "entropy_norm", "self", "prev", "next"]
    X = np.stack([np.asarray(t1[n], dtype=float).ravel() for n in names], axis=1)
    clus = cluster_heads(X, k=4, feature_names=names, random_state=0)
    cnames = name_clusters(clus.centroids, clus.feature_names)
    assert len(set(cnames)) == len(cnames)
    listed = [cnames[c] for c in sorted(range(clus.k), key=lambda c: _name_order(cnames[c]))]
    stems = [_name_order(n) for n in listed]
    assert stems == sorted(stems)
    assert _name_order("sink/vertical 10") > _name_order("sink/vertical 2")
