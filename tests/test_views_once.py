"""Each cached view is declared once (issue 47): one key, one computation, a typed result.

The registry (:data:`bertgeom.sets.views.VIEWS`) and ``prepare-sets``' task list are walked on the tiny
models: every task writes through a registered view, no kind of key has two views, every key builder
of :mod:`bertgeom.sets.keys` that a view uses is called nowhere else in the package (so no page or
task can compute the entry its own way), and a result stored by a task is what the page's read
gives back, typed, without computing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from bertgeom.sets import prepared
from bertgeom.sets.ablation import stratified
from bertgeom.sets.inputs import shipped_set
from bertgeom.sets.views import CLASS_MEAN, CONE_SET, HEADS_SET, VIEWS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    for view in VIEWS.values():
        if view.memo is not None:
            view.memo.clear()
    return tmp_path / "cache"


def _key_builders_called(tree: ast.AST) -> set[str]:
    """Names of :mod:`bertgeom.sets.keys` functions a module calls or imports (``keys.x(...)``,
    ``x(...)``, ``from bertgeom.sets.prepared import x``: by name, whichever module hands it on)."""
    from bertgeom.sets import keys

    builders = {n for n in dir(keys) if n.endswith("_key") and callable(getattr(keys, n))}
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names} & builders
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in builders:
                found.add(name)
    return found


def test_every_view_key_is_built_by_its_view_alone():
    views_file = ROOT / "bertgeom" / "sets" / "views.py"
    used_by_views = _key_builders_called(ast.parse(views_file.read_text()))
    assert {"heads_set_key", "class_mean_key", "cone_set_key", "class_entropy_key", "across_key", "flow_key",
            "compare_key", "sweep_key"} <= used_by_views
    elsewhere = {}
    for path in [*(ROOT / "bertgeom").rglob("*.py"), *(ROOT / "app_pages").glob("*.py"), ROOT / "app.py"]:
        if path in (views_file, ROOT / "bertgeom" / "sets" / "keys.py"):
            continue
        found = _key_builders_called(ast.parse(path.read_text())) & used_by_views
        if found:
            elsewhere[str(path.relative_to(ROOT))] = sorted(found)
    assert elsewhere == {}, f"a view's key is built outside its view (a second computation?): {elsewhere}"
    # one view per kind, and the registry names each view by its keys' kind
    assert len({id(v) for v in VIEWS.values()}) == len(VIEWS)
    assert all(name == v.name for name, v in VIEWS.items())


def test_prepare_sets_writes_only_through_the_registered_views(cache, tiny_variant, tiny_bert):
    computes: dict[str, set] = {}
    for loaded in (tiny_variant, tiny_bert):
        items = stratified(shipped_set(loaded.spec.input_kind), 1)
        tasks = prepared.prepare_tasks(loaded.spec.id, loaded, items=items)
        assert {t.group for t in tasks} >= {"heads-set", "cone-set", "class-mean", "examples", "subspace-across",
                                           "head-sweep"}
        for task in tasks:
            assert task.views, f"task {task.title!r} names no view"
            for view in task.views:
                assert VIEWS[view.name] is view, f"task {task.title!r} writes through an unregistered view"
                computes.setdefault(view.name, set()).add(view.compute)
            if len(task.views) == 1:  # a task of one view writes exactly that view's entry
                assert task.key.kind == task.views[0].name
    assert all(len(fns) == 1 for fns in computes.values()), computes
    assert set(computes) == set(VIEWS) - {"class-entropy"}  # the class entropies are not prepared ahead


def test_what_a_task_stores_is_what_the_page_reads_typed(cache, tiny_variant):
    from bertgeom.sets.cone import ConeSet
    from bertgeom.sets.heads import SET_THETA, ClassMean, SetSummary

    items = stratified(shipped_set(tiny_variant.spec.input_kind), 1)
    tasks = [t for t in prepared.prepare_tasks(tiny_variant.spec.id, tiny_variant, items=items, subspace=False,
                                               sweeps=False, examples=False)]
    assert prepared.run_tasks(tasks, status=False)["failed"] == 0
    for view in VIEWS.values():
        if view.memo is not None:
            view.memo.clear()

    def fail():
        pytest.fail("the page recomputed what prepare-sets stored")

    summary = HEADS_SET.get(tiny_variant, items, around=fail)
    assert isinstance(summary, SetSummary) and summary.classifier and summary.n == len(items)
    assert summary.class_order == tuple(tiny_variant.labels)
    cone = CONE_SET.get(tiny_variant, items, prepared.CONE_TOKEN_SET, None, around=fail)
    assert isinstance(cone, ConeSet) and list(cone.names) == summary.names
    for cls, names in prepared.class_mean_names(summary).items():
        cm = CLASS_MEAN.get(tiny_variant, items, names, SET_THETA, around=fail)
        assert isinstance(cm, ClassMean) and cm.n == len(names) and cm.mean.dtype == np.float16
        assert not cm.mean.flags.writeable
        assert len(cm.labels) == cm.mean.shape[-1] == len(cm.domains)
        again = ClassMean.from_arrays(cm.to_arrays())
        np.testing.assert_array_equal(again.theta_sum, cm.theta_sum)
        assert (again.n, again.labels, again.domains) == (cm.n, cm.labels, cm.domains)
    # another parameter is another entry: computed, not read from the prepared one
    with pytest.raises(pytest.fail.Exception):
        CONE_SET.get(tiny_variant, items, "all", None, around=fail)


def test_no_tab_resolves_the_model_or_the_input_again_from_strings():
    """Every page resolves its Subject once (bertgeom.ui.sidebar.current_subject); the tabs, sections
    and their cached computations hand it (or its model) on. No module under bertgeom/ui/ but the
    resolvers themselves, nor any page, nor the plug-in's cached computations, calls a resolver with the
    view's model id or text."""
    # every function of the resolvers' module that takes a model id (a new one is held too)
    cache_tree = ast.parse((ROOT / "bertgeom" / "ui" / "cache.py").read_text())
    resolvers = {fn.name for fn in cache_tree.body if isinstance(fn, ast.FunctionDef)
                 and fn.args.args and fn.args.args[0].arg == "model_id"}
    assert {"cached_model", "get_trace", "subject_of"} <= resolvers
    # the resolvers themselves; the tour, which opens its own inputs
    # the plug-in's page resolves its own model once, as the sidebar does for the generic pages
    allowed = {"bertgeom/ui/cache.py", "bertgeom/ui/sidebar.py", "bertgeom/ui/tour.py", "bertgeom/sars_cov_2/page.py"}
    # another input or another model than the page's, each resolved once where it is named
    elsewhere = {("bertgeom/ui/heads_cache.py", "model_shape")}
    found = []
    plugin = ROOT / "bertgeom" / "sars_cov_2"
    for path in sorted([*(ROOT / "bertgeom" / "ui").rglob("*.py"), *(ROOT / "app_pages").glob("*.py"),
                        *(plugin / "ui").rglob("*.py"), plugin / "page.py"]):
        rel = str(path.relative_to(ROOT))
        if rel in allowed:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name not in resolvers:
                continue
            strings = [a for a in node.args if (isinstance(a, ast.Attribute) and a.attr in ("model_id", "text"))
                       or (isinstance(a, ast.Name) and a.id in ("model_id", "text"))]
            other = [a.id for a in node.args if isinstance(a, ast.Name) and a.id == "text_b"]
            owner = next((fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
                          and fn.lineno <= node.lineno <= fn.end_lineno), "")
            if strings and (rel, other[0] if other else owner) not in elsewhere:
                found.append(f"{rel}:{node.lineno} {name}")
    assert found == [], found


def test_named_arrays_read_as_attributes_and_survive_the_memo_disk_and_pickle(cache, minilm):
    """A page reads a view's arrays by name (``res.mixing``): the same after the disk tier, the memo
    and a pickle (``st.cache_data``), and a name the result lacks fails there, by its name."""
    import pickle

    from bertgeom.sets.views import CONTEXT_MIXING, AltiSetArrays, MixingArrays

    text = "The cat sat on the mat."
    fresh = CONTEXT_MIXING.get(minilm, text)
    CONTEXT_MIXING.memo.clear()
    stored = CONTEXT_MIXING.get(minilm, text, around=lambda: pytest.fail("recomputed what the disk holds"))
    for res in (fresh, stored, pickle.loads(pickle.dumps(stored))):
        assert type(res) is MixingArrays and set(MixingArrays.required) <= set(res)
        np.testing.assert_array_equal(res.mixing, fresh["mixing"])
        assert res.alti_rollout.shape == res.alti.shape
    with pytest.raises(AttributeError, match="no array 'mixng'"):
        fresh.mixng
    # an array called "names" is an array, not the class's list of required names
    alti = AltiSetArrays.from_arrays({k: np.zeros((1, 2)) for k in AltiSetArrays.required} | {"names": np.array(["a"])})
    assert list(alti.names) == ["a"] and "names" in AltiSetArrays.required
    with pytest.raises(ValueError, match="lacks alti_self"):
        AltiSetArrays.from_arrays({"names": np.array(["a"])})
