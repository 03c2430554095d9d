"""One probability everywhere: every class probability of a classifier that a screen, the tour, the
CLI or precompute shows goes through :func:`bertgeom.probabilities.class_probabilities` (the
calibrated ``softmax(z / T)``). A walk over every call site of bertgeom/ and app_pages/ finds any
plain softmax of logits, and any read of a trace's raw ``.probs``, outside the places allowed below
(issue #32 item 5: the tour said 97.07% where the page said 99.996%)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOFTMAXES = {"softmax", "scaled_softmax", "log_softmax"}

#: (file, enclosing function) -> why a softmax of logits is allowed there.
ALLOWED_SOFTMAX = {
    ("bertgeom/probabilities.py", "class_probabilities"): "the one place",
    ("bertgeom/trace.py", "probs"): "Trace.probs, the raw softmax for the library; no screen reads it (below)",
    ("bertgeom/analysis/ablation.py", "probs"): "the ablation result's raw softmax; no screen reads it (below)",
}
#: (file, enclosing function) -> why reading ``.probs`` there is not a trace's raw softmax.
ALLOWED_PROBS = {
    ("bertgeom/sars_cov_2/variant/predict.py", None):
        "Prediction.probs: the calibrated dict class_probabilities filled",
    ("bertgeom/sets/cone.py", "subset"):
        "ConeSet.probs: precompute's calibrated p_<class> columns (class_probabilities), cut row by row",
}


def _sources():
    files = sorted((ROOT / "bertgeom").rglob("*.py")) + sorted((ROOT / "app_pages").glob("*.py")) + [ROOT / "app.py"]
    for f in files:
        yield f.relative_to(ROOT).as_posix(), f.read_text()


def _sites(rel: str, text: str):
    """``(kind, function, line, source)`` of every softmax call whose arguments mention logits and
    every ``.probs`` read."""
    tree = ast.parse(text)
    out = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                f = child.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                # the arguments' source only for a softmax (get_source_segment splits the whole file on
                # every call: asked for every call of every file, the walk took most of a minute)
                if called in SOFTMAXES:
                    args = " ".join(ast.get_source_segment(text, a) or "" for a in child.args)
                    if "logit" in args.lower():
                        out.append(("softmax", name, child.lineno, ast.get_source_segment(text, child)))
            if isinstance(child, ast.Attribute) and child.attr == "probs" and isinstance(child.ctx, ast.Load):
                out.append(("probs", name, child.lineno, ast.get_source_segment(text, child)))
            visit(child, name)

    visit(tree, None)
    return out


def _allowed(table, rel, func):
    return (rel, func) in table or (rel, None) in table


def test_no_plain_softmax_of_logits_outside_class_probabilities():
    bad = [f"{rel}:{line} in {func}: {src}" for rel, text in _sources() for kind, func, line, src in _sites(rel, text)
           if kind == "softmax" and not _allowed(ALLOWED_SOFTMAX, rel, func)]
    assert bad == [], "plain softmax of logits (use bertgeom.probabilities.class_probabilities):\n" + "\n".join(bad)


def test_no_screen_reads_a_traces_raw_probs():
    bad = [f"{rel}:{line} in {func}: {src}" for rel, text in _sources() for kind, func, line, src in _sites(rel, text)
           if kind == "probs" and not _allowed(ALLOWED_PROBS, rel, func)]
    assert bad == [], "a raw .probs read (use class_probabilities(loaded, trace.logits)):\n" + "\n".join(bad)


def test_the_walk_finds_what_it_forbids():
    """The checker itself: a plain softmax of logits and a trace's .probs are found (a test that
    cannot fail is a bug)."""
    sample = "def show(trace, res):\n    p = softmax(res['logits_after'])\n    q = trace.probs\n"
    kinds = sorted(k for k, *_ in _sites("x.py", sample))
    assert kinds == ["probs", "softmax"]


def test_the_call_sites_this_issue_fixed_use_class_probabilities():
    texts = dict(_sources())
    for rel in ("bertgeom/ui/heads/disable_heads.py", "bertgeom/ui/heads/compare_inputs.py",
                "bertgeom/sets/ablation.py", "bertgeom/sars_cov_2/variant/whatif.py", "bertgeom/__main__.py",
                "bertgeom/sars_cov_2/page.py"):
        assert "class_probabilities(" in texts[rel], rel


def test_every_allowed_place_still_exists():
    """An allow-list entry for a file or function that is gone would hide a new site there."""
    texts = dict(_sources())
    for rel, func in (*ALLOWED_SOFTMAX, *ALLOWED_PROBS):
        assert rel in texts, rel
        assert func is None or f"def {func}(" in texts[rel], (rel, func)
