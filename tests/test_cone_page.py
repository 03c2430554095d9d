"""Cone Index per Layer: the per-set batch computation (tiny variant model) and the page (AppTest)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertgeom.sets import cone as conesets
from bertgeom.analysis.cone import cone_index, hidden_state_cone_curve
from bertgeom.sars_cov_2.genome.classes import CLASSES
from bertgeom.sars_cov_2.variant.spec import genome_set
from bertgeom.analysis.projections import pca
from bertgeom.trace import run_trace
from bertgeom.weights import extract_layer_weights
from plotly_json import plotly_values  # noqa: E402

APP = str(Path(__file__).resolve().parent.parent / "app.py")
SENTENCE = "The cat sat on the mat because it was tired."


# ------------------------------------------------------------------ library: one input
def test_input_cones_match_the_cone_index_and_padding_keeps_content_rows(minilm):
    trace = run_trace(minilm, SENTENCE)
    lw = extract_layer_weights(minilm.model)
    enc = trace.encoded
    rows = conesets.rows_for(enc, "content")
    assert rows.sum() == enc.n_tokens - 2 and not rows[0] and not rows[-1]
    res = conesets.input_cones(trace.hidden_states, lw, rows, attentions=trace.attentions)
    m = int(res["m"])
    np.testing.assert_allclose(res["hidden"], hidden_state_cone_curve(trace.hidden_states, rows), rtol=1e-6)
    np.testing.assert_allclose(res["hidden_norm"], res["hidden"] / m)
    assert res["head_output"].shape == (6, 12) and res["multihead_faithful"].shape == (6,)
    assert np.all(res["hidden_norm"] <= 1 + 1e-9) and np.all(res["hidden"] >= 0)
    # padded to 512 (as the official code): the content rows are unchanged, PAD rows join "all"
    hidden, mask, _ = conesets.padded_forward(minilm, [enc], 512)
    assert hidden.shape[2] == 512 and mask[0].sum() == enc.n_tokens
    padded_content = conesets.rows_for(enc, "content", 512)
    np.testing.assert_allclose(hidden_state_cone_curve(hidden[0], padded_content), res["hidden"], rtol=1e-4)
    all_rows = conesets.rows_for(enc, "all", 512)
    assert all_rows.sum() == 512
    raw = conesets.input_cones(hidden[0], lw, all_rows, attention_mask=mask[0], unit_rows=False)
    assert int(raw["m"]) == 512
    np.testing.assert_allclose(raw["hidden"], [cone_index(h, raw=True) for h in hidden[0]], rtol=1e-5)
    np.testing.assert_allclose(raw["hidden_norm"], [cone_index(h, raw=True, normalized=True) for h in hidden[0]],
                               rtol=1e-5)


def test_entropy_curves_faithful_padding_changes_only_the_binned_entropy(minilm):
    trace = run_trace(minilm, SENTENCE)
    A, keep = conesets.attention_code_matrix(trace.attentions, trace.encoded.is_sep)
    assert A.shape[-1] == trace.encoded.n_tokens and not keep[-1] and np.all(A[..., -1, :] == 0)
    A512, keep512 = conesets.attention_code_matrix(trace.attentions, trace.encoded.is_sep, 512)
    e, e512 = conesets.entropy_curves(A, keep), conesets.entropy_curves(A512, keep512)
    for k in conesets.FAITHFUL_ENTROPIES + conesets.PROPER_ENTROPIES:
        assert e[k].shape == (6, 12) and np.all(np.isfinite(e[k]))
    np.testing.assert_allclose(e["vn_code"], e512["vn_code"], rtol=1e-4)  # zero eigenvalues ignored
    np.testing.assert_allclose(e["row_entropy"], e512["row_entropy"], rtol=1e-6)
    assert np.all(e512["shannon_code"] < e["shannon_code"])  # 262,144 mostly-zero entries
    assert np.all(e["row_entropy"] <= float(e["ln_n"]) + 1e-9)


# ------------------------------------------------------------------ library: over a set
@pytest.fixture(scope="module")
def set_result(tiny_variant):
    seen = []
    res = conesets.cone_profiles_over_set(tiny_variant, genome_set(), "content", batch_size=8,
                                          progress=lambda d, n: seen.append((d, n)))
    return res, seen


def test_set_profiles_cover_all_8_classes_with_curves_per_layer(set_result):
    res, seen = set_result
    assert isinstance(res, conesets.ConeSet)
    N = len(res)
    assert N == len(genome_set()) and seen[-1] == (N, N) and len(res.error_names) == 0
    assert set(res.labels.tolist()) == set(CLASSES)
    assert res.hidden.shape == (N, 3)  # tiny model: 2 layers -> hidden_states[0..2]
    assert res.streams["head_output"].shape == (N, 2, 4) and res.streams["multihead_faithful"].shape == (N, 2)
    assert res.cls.shape == (N, 3, 32) and res.mean.shape == (N, 3, 32) and res.logits.shape == (N, 8)
    assert np.all((res.m > 400) & (res.m < 430))
    values, x = conesets.stream_values(res, "hidden")
    assert x.tolist() == [0, 1, 2] and np.all((values > 0) & (values <= 1))
    stats = conesets.group_stats(values, res.labels, CLASSES)
    assert list(stats) == list(CLASSES)
    assert all(s["mean"].shape == (3,) and s["sd"].shape == (3,) for s in stats.values())
    assert sum(int(s["n"]) for s in stats.values()) == N
    one_head, xh = conesets.stream_values(res, "head_output", head=1, normalized=False)
    np.testing.assert_allclose(one_head, res.streams["head_output"][:, :, 1])
    assert xh.tolist() == [1, 2]
    sub = conesets.subset(res, res.labels == "omicron")
    assert len(sub) == 5 and sub.cls.shape[0] == 5 and len(sub.error_names) == 0
    assert sub.streams["head_output"].shape == (5, 2, 4) and sub.logits.shape == (5, 8)


def test_cone_set_stores_without_pickle_and_reads_the_dicts_written_before(set_result, tmp_path):
    res, _ = set_result
    path = tmp_path / "set.npz"
    np.savez(path, **res.to_arrays())
    with np.load(path, allow_pickle=False) as z:
        back = conesets.ConeSet.from_arrays({k: z[k] for k in z.files})
    for f in ("names", "labels", "predicted", "correct", "hidden", "m", "cls", "mean", "logits"):
        np.testing.assert_array_equal(getattr(back, f), getattr(res, f), err_msg=f)
    assert back.streams.keys() == res.streams.keys()
    # the flat dict the set functions returned before ConeSet existed (the keys of files on disk)
    old = {"names": res.names, "labels": res.labels, "predicted": res.predicted, "correct": res.correct,
           "error_names": res.error_names, "error_messages": res.error_messages, "hidden": res.hidden,
           "m": res.m, "cls": res.cls, "mean": res.mean, "logits": res.logits, **res.streams}
    np.testing.assert_array_equal(conesets.ConeSet.from_arrays(old).streams["head_output"],
                                  res.streams["head_output"])
    # nothing analysed: the old dict held names and errors only
    empty = conesets.ConeSet.from_arrays({"names": np.zeros(0, str), "error_names": np.array(["x"]),
                                          "error_messages": np.array(["not a genome"])})
    assert len(empty) == 0 and empty.error_messages.tolist() == ["not a genome"]
    with pytest.raises(ValueError, match="lacks hidden, m"):
        conesets.ConeSet.from_arrays({"names": res.names})
    with pytest.raises(ValueError, match="one row per input"):
        conesets.cone_set(res.names, res.labels, res.predicted, hidden=res.hidden, m=res.m, cls=res.cls[:3])
    with pytest.raises(ValueError, match="entries for a set"):
        res.subset(np.ones(3, bool))


def test_set_profiles_are_stable_and_seeded_pca_of_cls_is_reproducible(tiny_variant, set_result):
    res, _ = set_result
    again = conesets.cone_profiles_over_set(tiny_variant, genome_set()[:6], "content", batch_size=4)
    np.testing.assert_allclose(again.hidden, res.hidden[:6], rtol=1e-5)
    np.testing.assert_allclose(again.cls, res.cls[:6], rtol=1e-4, atol=1e-5)
    X = res.cls[:, -1, :].astype(np.float64)
    p1, p2 = pca(X, 3), pca(X, 3)
    np.testing.assert_array_equal(p1.coords, p2.coords)
    assert p1.coords.shape == (len(X), 3) and 0 < p1.total_explained_variance <= 1


def test_set_padded_to_512_counts_pad_rows_and_reports_bad_records(tiny_variant):
    from bertgeom.sets.inputs import InputItem

    items = list(genome_set("demo")[:2]) + [InputItem("broken", ">broken\nNNNNNNNNNN", "gh")]
    res = conesets.cone_profiles_over_set(tiny_variant, items, "all", pad_to=512, batch_size=2)
    assert res.m.tolist() == [512, 512] and res.error_names.tolist() == ["broken"]
    assert res.hidden.shape == (2, 3) and res.predicted.tolist()[0] in CLASSES
    content = conesets.cone_profiles_over_set(tiny_variant, items[:2], "content", streams=False)
    assert not content.has("layer_input") and content.streams == {} and content.hidden.shape == (2, 3)


def test_class_mean_attention_official_recipe(tiny_variant):
    items = [it for it in genome_set() if it.label == "omicron"][:2]
    res = conesets.class_mean_attention(tiny_variant, items, pad_to=512)
    assert int(res["n_used"]) == 2 and res["mean"].shape == (2, 4, 512, 512)
    assert not res["keep"][430:].any() and res["keep"][0]
    np.testing.assert_array_equal(res["mean"][..., 500, :], 0)  # padding rows zeroed
    ent = conesets.entropy_curves(res["mean"], res["keep"])
    assert ent["vn_code"].shape == (2, 4) and np.all(np.isfinite(ent["shannon_code"]))


def test_bench_model_pass_quick(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_cone",
                                                  Path(__file__).resolve().parent.parent / "bench" / "bench_cone.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    res = bench.bench_model_pass(6, quick=True, which="tiny", tmp_dir=str(tmp_path))
    s = res["seconds"]
    assert res["genomes"] == 6 and res["errors"] == 0 and res["layers"] == 2
    assert 0 < s["forward"] < s["one_pass"] and 0 < res["forward_share_of_pass"] < 1
    assert s["one_pass"] == pytest.approx(s["forward"] + s["cone_index_streams_vectors"] + s["encode_and_other"])
    assert "umap_last_layer" not in s and "genomes" in bench._model_table(res)


# ------------------------------------------------------------------ the page (AppTest)
def _charts(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def _titles(at) -> list[str]:
    return [(c["layout"].get("title") or {}).get("text", "") for c in _charts(at)]


def _ok(at) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def _section(at, name: str) -> AppTest:
    at.segmented_control(key="w_cone_section").set_value(name).run()
    _ok(at)
    return at


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    import streamlit as st

    st.cache_data.clear()  # a set computed by an earlier test in this process must not hide the disk write
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cone_page_minilm_sentence_all_sections(cache_dir):
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = "minilm-l6"  # the variant model may be the default
    at.session_state["text_value"] = SENTENCE
    at.run()
    at.switch_page("app_pages/cone_index.py").run()
    _ok(at)
    assert at.title[0].value == "Cone Index per Layer"
    curve = _charts(at)[0]
    assert len(plotly_values(curve["data"][0]["x"])) == 7  # hidden_states[0..6]
    assert "m = 11" in _titles(at)[0]
    iso = [t for t in curve["data"] if "isotropic" in (t.get("name") or "")]
    assert iso and plotly_values(iso[0]["y"])[0] == pytest.approx(np.sqrt(11))
    assert any("Streams" in t or "streams" in t for t in _titles(at))
    assert len(at.get("download_button")) >= 3
    # the official code's token set, padded to 512
    at.selectbox(key="w_cone_tokens").set_value("all").run()
    at.checkbox(key="w_cone_pad").check().run()
    _ok(at)
    assert "m = 512" in _titles(at)[0]
    at.checkbox(key="w_cone_pad").uncheck().run()
    at.selectbox(key="w_cone_tokens").set_value("content").run()
    at.selectbox(key="w_cone_form").set_value("raw").run()  # the paper's ||sum x||
    _ok(at)
    assert "I / Σ‖x‖" in json.dumps(_charts(at)[0], ensure_ascii=False)
    at.selectbox(key="w_cone_form").set_value("unit").run()
    # unlabelled sentences: one family of curves, with a note
    _section(at, "classes")
    assert any("no class labels" in i.value for i in at.info)
    assert any("mean ± sd over the set" in t for t in _titles(at))
    _section(at, "distribution")
    assert any(t.startswith("PCA of [CLS]") for t in _titles(at))
    _section(at, "entropy")
    titles = _titles(at)
    assert any(t.startswith("Official code") for t in titles)
    assert any(t.startswith("Properly normalised") for t in titles)


def test_cone_page_tiny_variant_model_per_class_and_projections(tiny_variant_dir, cache_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = genome_set("demo")[-1].text
    at.run()
    at.switch_page("app_pages/cone_index.py").run()
    _ok(at)
    assert len(plotly_values(_charts(at)[0]["data"][0]["x"])) == 3  # 2 layers
    _section(at, "classes")
    curves = [c for c in _charts(at) if "mean ± sd per class" in (c["layout"].get("title") or {}).get("text", "")][0]
    names = [t["name"] for t in curves["data"] if t.get("mode") == "lines+markers"]
    assert len(names) == 8 and names[0].startswith("GH / pre-VOC") and names[-1].startswith("Omicron")
    assert any(f.name.endswith(".npz") for f in cache_dir.iterdir())  # disk cache written
    at.radio(key="w_cone_hist_mode").set_value("streams").run()
    _ok(at)
    assert any(t.startswith("streams of Omicron") for t in _titles(at))
    _section(at, "distribution")
    scatter = [c for c in _charts(at) if (c["layout"].get("title") or {}).get("text", "").startswith("PCA of")][0]
    assert len(scatter["data"]) == 8
    assert any("Separability" in t for t in _titles(at))
    at.slider(key="w_cone_proj_layer").set_value(0).run()
    at.radio(key="w_cone_dims").set_value(3).run()
    _ok(at)
    assert any(c["data"][0]["type"] == "scatter3d" for c in _charts(at))
    _section(at, "entropy")
    at.radio(key="w_cone_ent_src").set_value("class").run()
    at.checkbox(key="w_cone_ent_correct").uncheck().run()
    _ok(at)
    assert any("mean attention of 5 Omicron inputs" in t for t in _titles(at))


def test_cone_page_uploaded_labelled_fasta(tiny_variant_dir, cache_dir, monkeypatch):
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    demo = genome_set("demo")
    fasta = "".join(f">{it.name}|{it.label}\n{it.text.split(chr(10), 1)[1]}\n" for it in (demo[0], demo[3], demo[7]))
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = demo[-1].text
    at.run()
    at.switch_page("app_pages/cone_index.py").run()
    _section(at, "classes")
    at.radio(key="w_cone_set").set_value("upload").run()
    _ok(at)
    assert any("Upload your own labelled FASTA" in i.value for i in at.info)
    at.file_uploader(key="w_cone_set_upload").set_value(("mine.fasta", fasta.encode(), "text/plain")).run()
    _ok(at)
    curves = [c for c in _charts(at)
              if "mean ± sd per class, 3 inputs" in (c["layout"].get("title") or {}).get("text", "")]
    assert curves and len([t for t in curves[0]["data"] if t.get("mode") == "lines+markers"]) == 3
    # a labels file with an unknown class: one sentence, no traceback
    tsv = f"name\tlabel\n{demo[0].name}|{demo[0].label}\tnot-a-variant\n".encode()
    at.file_uploader(key="w_cone_labels").set_value(("labels.tsv", tsv, "text/plain")).run()
    assert not at.exception and at.error and "is not one of the classes" in at.error[0].value
