"""Issue 44's interactive views in Chromium, cold and warm: the Context mixing tab, the rank-collapse
section, the head-to-head affinity tab and the head grid coloured by head importance, on each model.

Usage: ``python bench/bench_followups_waits.py [--models minilm-l6 sars-cov-2-variant] [--update-docs]``

The same measurement as ``bench/bench_waits.py`` (its ``run`` loop and ``table``): a server on a fresh
cache, each view opened by its link once (cold: first use) and once more in a new browser session
(warm: the server has it), timed from the action to the end of the script runs it started, with the
time the page's spinner or progress bar first showed. The baseline in the same run is the Attention
Heads page's first tab (*Head detail*), opened the same way: a view's warm time is read against it.
Targets (issue 44): warm within 2 s on this CPU, or the first view behind progress with an estimate.
``--script-only`` measures the server's share alone: each view's script run in AppTest, first and warm.
``--update-docs`` writes the table into docs/benchmarks.md between ``<!-- followups-waits:start -->``
and ``<!-- followups-waits:end -->``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_waits import run as run_views  # noqa: E402
from bench_waits import table, write_docs_table  # noqa: E402


def views(model: str) -> list[tuple[str, str]]:
    """``(name, url query)``: the baseline first, then each of issue 44's views by its link."""
    return [
        ("baseline: Attention Heads, Head detail", f"view=heads&model={model}&heads_tab=Head+detail"),
        ("Attention Heads: Context mixing", f"view=heads&model={model}&heads_tab=Context+mixing"),
        ("Attention Heads: grid coloured by head importance (this input)",
         f"view=heads&model={model}&heads_tab=Head+detail&colour=importance%3Amichel"),
        ("Cone Index: Rank collapse beside the cone", f"view=cone&model={model}&w_cone_section=collapse"),
        ("Subspace: Head-to-head affinity", f"view=subspace&model={model}&w_sub_tab=Head-to-head+affinity"),
    ]


def run(models: list[str]) -> list[dict]:
    """bench_waits' loop (one server, each view cold then warm) over this issue's views."""
    return run_views(models, views_of=lambda model: [(name, query, []) for name, query in views(model)])


#: The same views as AppTest sets them: (name, page file, session state).
SCRIPT_VIEWS = [
    ("baseline: Attention Heads, Head detail", "app_pages/attention_heads.py", {"heads_tab": "Head detail"}),
    ("Attention Heads: Context mixing", "app_pages/attention_heads.py", {"heads_tab": "Context mixing"}),
    ("Attention Heads: grid coloured by head importance (this input)", "app_pages/attention_heads.py",
     {"heads_tab": "Head detail", "w_feature": "importance:michel"}),
    ("Cone Index: Rank collapse beside the cone", "app_pages/cone_index.py", {"w_cone_section": "collapse"}),
    ("Subspace: Head-to-head affinity", "app_pages/subspace_directions.py", {"w_sub_tab": "Head-to-head affinity"}),
]


def script_runs(models: list[str]) -> str:
    """The server's share: each view's script run in AppTest (no browser), first and then again in the
    same session (warm, best of 3), on a fresh cache; a table in Markdown."""
    import os
    import time

    os.environ["BERTGEOM_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_followups_script_")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from streamlit.testing.v1 import AppTest

    from bertgeom.sars_cov_2.variant.spec import VARIANT_MODEL_ID, genome_set

    out = ["| model | view | first script run | warm script run (best of 3) |", "|---|---|---|---|"]
    for model in models:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800)
        at.session_state["model_id"] = model
        if model == VARIANT_MODEL_ID:
            at.session_state["genome_value"] = genome_set("demo")[0].text
        else:
            at.session_state["text_value"] = "The cat sat on the mat because it was tired."
        at.run()
        for name, page, state in SCRIPT_VIEWS:
            at.switch_page(page)
            for k, v in state.items():
                at.session_state[k] = v
            t0 = time.perf_counter()
            at.run()
            first = time.perf_counter() - t0
            if at.exception:
                raise RuntimeError(f"{model} {name}: {at.exception[0].value}")
            warm = []
            for _ in range(3):
                t0 = time.perf_counter()
                at.run()
                warm.append(time.perf_counter() - t0)
            out.append(f"| {model} | {name} | {first:.2f} s | {min(warm):.2f} s |")
            print(out[-1], flush=True)
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["minilm-l6", "sars-cov-2-variant"])
    ap.add_argument("--update-docs", action="store_true")
    ap.add_argument("--script-only", action="store_true", help="only the server's script runs (AppTest, no browser)")
    args = ap.parse_args()
    if args.script_only:
        print(script_runs(args.models))
        return
    text = table(run(args.models)).replace("bench/bench_waits.py --update-docs",
                                           "bench/bench_followups_waits.py --update-docs")
    print(text)
    if args.update_docs:
        write_docs_table("followups-waits", "Issue 44's views in Chromium, cold and warm", text)


if __name__ == "__main__":
    main()
