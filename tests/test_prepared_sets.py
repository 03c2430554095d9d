"""Set views prepared ahead (bertgeom.sets.prepared): what `prepare-sets` writes is exactly what the
pages would compute, under the keys the pages read, and a second run computes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.sets import prepared
from bertgeom.sets.cone import ConeSet
from bertgeom.cache import CacheKey, cached_arrays
from bertgeom.sets.inputs import map_over_set, set_fingerprint, shipped_set


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _read(key) -> dict:
    assert prepared.is_on_disk(key), key
    return cached_arrays(key, lambda: pytest.fail("recomputed what is on disk"))


def test_prepared_summaries_equal_the_pages_own_computation(cache, tiny_variant):
    from bertgeom.sets.heads import SET_THETA, ClassMean, SetSummary, class_mean_over_set, compute_set_arrays
    from bertgeom.sets.views import CLASS_MEAN, CONE_SET, HEADS_SET

    from bertgeom.sets.ablation import stratified

    mid = tiny_variant.spec.id
    items = stratified(shipped_set(tiny_variant.spec.input_kind), 1)  # one genome per class keeps it quick
    tasks = prepared.prepare_tasks(mid, tiny_variant, subspace=False, sweeps=False, items=items, examples=False)
    counts = prepared.run_tasks(tasks)
    assert counts == {"done_before": 0, "computed": len(tasks), "failed": 0}

    summary = _read(HEADS_SET.key_of(tiny_variant, items))
    fresh = compute_set_arrays(tiny_variant, items)
    assert set(summary) == set(fresh)
    for k in fresh:
        np.testing.assert_array_equal(summary[k], fresh[k], err_msg=k)

    # the class-mean map of every class the page offers is there, equal to the page's own average
    s = SetSummary.from_arrays(summary)
    assert s.classifier and s.class_order == tuple(tiny_variant.labels)
    groups = prepared.class_mean_names(s)
    assert set(groups) == {None, *s.classes()}
    cls = next(c for c in groups if c is not None)
    names = tuple(str(x) for x in np.asarray(s.names)[s.mask(cls)])  # as the Over a set of inputs tab picks them
    assert names == groups[cls]
    stored = ClassMean.from_arrays(_read(CLASS_MEAN.key_of(tiny_variant, items, names, SET_THETA)))
    direct = class_mean_over_set(tiny_variant, [it for it in items if it.name in names], SET_THETA)
    np.testing.assert_array_equal(stored.mean, direct.mean)
    np.testing.assert_array_equal(stored.theta_sum, direct.theta_sum)
    assert (stored.n == direct.n and stored.labels == direct.labels and stored.domains == direct.domains)

    # the cone page's default view (content tokens, unpadded) is on disk under the page's key
    cone = _read(CONE_SET.key_of(tiny_variant, items, prepared.CONE_TOKEN_SET, None))
    assert ConeSet.from_arrays(cone).hidden.shape[0] == len(summary["names"])

    # the rank-collapse curves and the head importance with the set's task, under the pages' keys
    from bertgeom.sets.collapse import head_importance_over_set, rank_collapse_over_set
    from bertgeom.sets.views import CONTEXT_MIXING_SET, HEAD_IMPORTANCE_SET, RANK_COLLAPSE_SET

    rc = _read(RANK_COLLAPSE_SET.key_of(tiny_variant, items, prepared.COLLAPSE_TOKEN_SET, prepared.COLLAPSE_NORM))
    np.testing.assert_array_equal(rc["curves"], rank_collapse_over_set(
        tiny_variant, items, prepared.COLLAPSE_TOKEN_SET, norm=prepared.COLLAPSE_NORM)["curves"])
    imp = _read(HEAD_IMPORTANCE_SET.key_of(tiny_variant, items))
    np.testing.assert_array_equal(imp["importance"], head_importance_over_set(tiny_variant, items)["importance"])
    assert imp["used_label"].all()  # every shipped genome is scored against its own class
    # the set's mixing ratios (Attention Heads -> Context mixing) are on disk, equal to a direct run
    from bertgeom.sets.context_mixing import mixing_over_set

    mixing = _read(CONTEXT_MIXING_SET.key_of(tiny_variant, items))
    direct_mixing = mixing_over_set(tiny_variant, items)
    for k in direct_mixing:
        np.testing.assert_array_equal(mixing[k], direct_mixing[k], err_msg=k)
    # and ALTI's reductions over the set, the same way
    from bertgeom.sets.context_mixing import alti_over_set
    from bertgeom.sets.views import ALTI_SET

    alti = _read(ALTI_SET.key_of(tiny_variant, items))
    direct_alti = alti_over_set(tiny_variant, items)
    assert set(alti) == set(direct_alti)
    for k in direct_alti:
        np.testing.assert_array_equal(alti[k], direct_alti[k], err_msg=k)

    # a second run (a server restart, a second `prepare-sets`) computes nothing; with the summary on
    # disk the class-mean maps are listed one task per class
    again = prepared.prepare_tasks(mid, tiny_variant, subspace=False, sweeps=False, items=items, examples=False)
    assert len(again) == 6 + len(set(groups.values()))
    assert prepared.run_tasks(again) == {"done_before": len(again), "computed": 0, "failed": 0}
    rows = prepared.read_json(prepared.status_path())["tasks"]
    assert {r["state"] for r in rows} == {"done"} and len(rows) == len(again)


def test_an_examples_flow_and_checkpoint_comparison_are_prepared_as_the_page_computes_them(cache, minilm):
    """MiniLM's first example: its attention flow at the page's defaults and its comparison with the
    variant model (the one same-shape checkpoint) land under the keys the page reads, equal to a
    direct computation; a second run computes nothing."""
    from bertgeom.analysis.ablation import checkpoint_cosines
    from bertgeom.analysis.flow import FLOW_MAX_TOKENS, FLOW_WINDOW, attention_flow, flow_view, flow_window
    from bertgeom.inputs import INPUT_KINDS
    from bertgeom.models import load_model
    from bertgeom.trace import run_trace
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.sets.views import COMPARE, FLOW
    from bertgeom.weights import extract_layer_weights

    tasks = [t for t in prepared.prepare_tasks("minilm-l6", minilm, subspace=False, sweeps=False, items=[])
             if t.group == "examples"]
    text = INPUT_KINDS.of(minilm.spec).examples()[0].text
    assert len(tasks) == len(INPUT_KINDS.of(minilm.spec).examples())
    assert [m.spec.id for m in prepared.same_shape_models("minilm-l6", minilm)] == [VARIANT_MODEL_ID]
    assert prepared.run_tasks(tasks[:1]) == {"done_before": 0, "computed": 1, "failed": 0}
    tr = run_trace(minilm, text)
    n = flow_window(tr.encoded.n_tokens)
    assert n == tr.encoded.n_tokens  # a sentence is shorter than FLOW_MAX_TOKENS: flow on all of it
    flow = _read(FLOW.key_of(minilm, text, n, 0.5, 0, True))
    direct = flow_view(tr.attentions, n, 0.5, 0, True)
    np.testing.assert_allclose(flow["flow"], direct["flow"], atol=1e-12)
    np.testing.assert_allclose(flow["rollout"], direct["rollout"], atol=1e-12)
    np.testing.assert_allclose(direct["flow"], attention_flow(tr.attentions, target=0), atol=1e-12)

    variant = load_model(VARIANT_MODEL_ID)
    cos = _read(COMPARE.key_of(minilm, variant, text))
    fresh = checkpoint_cosines(extract_layer_weights(minilm.model), extract_layer_weights(variant.model),
                               tr.hidden_states[:-1])
    assert set(cos) == {"qk", "ov", "maps"}
    for k in fresh:
        np.testing.assert_allclose(cos[k], fresh[k], atol=1e-6, err_msg=k)
    # and its context mixing (Attention Heads -> Context mixing), as the tab computes it
    from bertgeom.analysis.context_mixing import context_mixing_view

    from bertgeom.sets.views import CONTEXT_MIXING

    mixing = _read(CONTEXT_MIXING.key_of(minilm, text))
    fresh_mixing = context_mixing_view(tr, weights=extract_layer_weights(minilm.model))
    for k in fresh_mixing:
        np.testing.assert_allclose(mixing[k], fresh_mixing[k], atol=1e-6, err_msg=k)
    assert prepared.run_tasks(tasks[:1]) == {"done_before": 1, "computed": 0, "failed": 0}
    # a long input gets the page's window; each row of the window sums to 1 before flow and rollout
    assert flow_window(FLOW_MAX_TOKENS + 1) == FLOW_WINDOW and flow_window(FLOW_MAX_TOKENS) == FLOW_MAX_TOKENS
    win = flow_view(tr.attentions, 5, 0.5, 0, False)
    a = np.asarray(tr.attentions[:, :, :5, :5], np.float64)
    np.testing.assert_allclose(win["flow"], attention_flow(a / a.sum(-1, keepdims=True), target=0, normalize=False),
                               atol=1e-12)


def test_subspace_heads_prepared_from_one_pass_equal_the_page_route(cache, tiny_bert):
    from threadpoolctl import threadpool_limits

    from bertgeom.sets.cone import padded_runner
    from bertgeom.sets.keys import across_key
    from bertgeom.sets.subspace import FAITHFUL_PAD_TO, collect_set_result, head_set_reducer
    from bertgeom.weights import extract_layer_weights

    mid = tiny_bert.spec.id
    items = shipped_set("text")[:4]  # a small set: the padded reductions cost ~0.1 s per input and head
    tasks = [t for t in prepared.prepare_tasks(mid, tiny_bert, sweeps=False, items=items)
             if t.group == "subspace-across"]
    assert len(tasks) == tiny_bert.num_layers * tiny_bert.num_heads
    picked = [tasks[0], tasks[-1]]
    with threadpool_limits(limits=1):
        prepared.run_tasks(picked, status=False)
    lws = extract_layer_weights(tiny_bert.model)
    pad_to = min(FAITHFUL_PAD_TO, int(tiny_bert.max_tokens))
    for (layer, head), task in zip([(0, 0), (tiny_bert.num_layers - 1, tiny_bert.num_heads - 1)], picked):
        key = across_key(mid, tiny_bert.weights_hash, set_fingerprint(items), layer, head,
                         prepared.SUBSPACE_EPS, prepared.SUBSPACE_TOKEN_SET)
        assert task.id == prepared.key_id(key)
        reducer = head_set_reducer(lws, layer, head, eps=prepared.SUBSPACE_EPS, token_set=prepared.SUBSPACE_TOKEN_SET)
        with threadpool_limits(limits=1):
            page = collect_set_result(map_over_set(tiny_bert, items, reducer, runner=padded_runner(pad_to),
                                                   max_tokens=pad_to))
        stored, page = _read(key), page.to_arrays()
        assert set(stored) == set(page)
        for k in page:
            np.testing.assert_array_equal(stored[k], page[k], err_msg=k)


def test_a_wished_task_runs_first_and_a_failing_one_does_not_stop_the_rest(cache):
    order = []

    def job(name, fail=False):
        def run(progress):
            order.append(name)
            if fail:
                raise RuntimeError("boom")
            cached_arrays(CacheKey.of("t", name=name), lambda: {"x": np.arange(3)})
            progress(1, 1)
        return run

    tasks = [prepared.PreparedTask(CacheKey.of("t", name=n), n, job(n, fail=(n == "b"))) for n in "abcd"]
    prepared.wish(tasks[2].id)
    first = tasks[0].run

    def a_then_d_written_by_someone_else(progress):
        first(progress)
        cached_arrays(CacheKey.of("t", name="d"), lambda: {"x": np.ones(1)})  # e.g. a page that computed it itself

    tasks[0].run = a_then_d_written_by_someone_else
    counts = prepared.run_tasks(tasks)
    assert order[0] == "c" and sorted(order) == ["a", "b", "c"]  # d was on disk by its turn: skipped
    assert counts == {"done_before": 1, "computed": 2, "failed": 1}
    rows = {r["title"]: r for r in prepared.read_json(prepared.status_path())["tasks"]}
    assert rows["b"]["state"] == "failed" and "boom" in rows["b"]["error"]
    assert rows["a"]["state"] == rows["c"]["state"] == "done"


def test_prepare_sets_command_line(cache, tiny_bert_dir, capsys):
    from bertgeom.__main__ import main

    assert main(["prepare-sets", "--model", str(tiny_bert_dir), "--no-subspace", "--no-sweeps"]) == 0
    out = capsys.readouterr().out
    assert "computed" in out and "failed 0" in out
    assert main(["prepare-sets", "--model", str(tiny_bert_dir), "--no-subspace", "--no-sweeps"]) == 0
    assert "computed 0" in capsys.readouterr().out


def test_the_app_waits_only_for_what_a_live_preparation_will_write(cache):
    import json
    import os
    import time

    from bertgeom.ui import prepared_cache as pc

    key = CacheKey.of("t", name="view")
    assert not pc.pending(key)  # nobody is preparing anything
    status = {"format": prepared.FORMAT_VERSION, "pid": os.getpid(), "updated": time.time(),
              "tasks": [{"id": prepared.key_id(key), "title": "a view", "group": "g", "model": "m",
                         "state": "queued", "done": 0, "total": 0}]}
    prepared.status_path().parent.mkdir(parents=True)
    prepared.status_path().write_text(json.dumps(status))
    assert not pc.pending(key)  # still queued: the page computes it itself rather than wait for its turn
    status["tasks"][0]["state"] = "running"
    prepared.status_path().write_text(json.dumps(status))
    assert pc.pending(key)
    assert pc.pending(CacheKey.of("t", name="other"), group="g", model_id="m")  # written by a task of the same view
    assert not pc.pending(CacheKey.of("t", name="other"), group="g", model_id="another model")
    status["updated"] = time.time() - 10 * pc.STALE_S  # a preparation that stopped long ago
    prepared.status_path().write_text(json.dumps(status))
    assert not pc.pending(key)
    status["updated"] = time.time()
    prepared.status_path().write_text(json.dumps(status))
    cached_arrays(key, lambda: {"x": np.zeros(1)})
    assert not pc.pending(key) and pc.wait_for(key, "a view")  # on disk: returns at once, nothing drawn


def test_prepare_sets_without_model_means_every_bundled_model():
    from bertgeom.__main__ import build_parser

    args = build_parser().parse_args(["prepare-sets"])
    # the CLI fills a missing --model with the default model's id; the model list must not be that string
    assert args.models is None and not hasattr(args, "model")
    assert build_parser().parse_args(["prepare-sets", "--model", "a", "--model", "b"]).models == ["a", "b"]
