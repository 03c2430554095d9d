"""All benchmarks in one command; writes ``bench/out/results.json`` and the README table.

Every measurement stands beside a baseline measured in the same run (ratios, not
absolute targets):

1. single-input analysis latency (forward pass + all per-head features) for a spike genome
   and a 128-token sentence, vs the same forward + a per-head Python-loop implementation;
2. head-click latency: reading a cached trace (what a rerun does when another head is
   picked) vs re-running the model;
3. batch ``classify`` throughput end to end vs the pure forward-pass bound;
4. peak RSS of a process holding both bundled models with one trace each, vs a bare
   Python process with the same imports;
5. the load figures, when ``bench/bench_load.py`` has written ``bench/out/load.json``: a light
   client's home page while 6 sessions classify and browse, vs the same page with nobody working.

6. with ``--latency``, the browser latencies of ``bench/bench_latency.py`` (cold and warm, p50/p95),
   written to their own README block.

Usage: ``python bench/run_all.py [--quick] [--update-readme] [--latency]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out"
SENTENCE_128 = " ".join(
    "The committee approved the budget after a long debate while the students asked whether the exam "
    "would be difficult and the fishermen repaired their nets".split() * 6
)


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _variant_model_id() -> str:
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.models import REGISTRY

    if VARIANT_MODEL_ID in REGISTRY:
        return VARIANT_MODEL_ID
    import tempfile

    from bertgeom.sars_cov_2.variant import build_tiny_variant_model

    return str(build_tiny_variant_model(Path(tempfile.mkdtemp()) / "tiny_variant"))


def analysis_latency(repeat: int) -> list[dict]:
    from bertgeom.analysis.heads import head_features
    from bertgeom.tokens import TokenKinds
    from bench.reference_heads import reference_per_head
    from bertgeom.sars_cov_2.variant.spec import genome_set
    from bertgeom.models import load_model
    from bertgeom.inputs import encode_input
    from bertgeom.trace import run_trace

    rows = []
    cases = [("spike genome (427 tokens)", _variant_model_id(), genome_set("demo")[-1].text),
             ("English sentence (128 tokens)", "minilm-l6", SENTENCE_128)]
    for label, model_id, text in cases:
        loaded = load_model(model_id)
        enc = encode_input(loaded, text)
        if loaded.spec.input_kind == "text":  # trim to exactly 128 tokens
            from bertgeom.inputs import EncodedInput

            keep = list(range(127)) + [enc.n_tokens - 1]
            enc = EncodedInput(enc.key, enc.input_ids[keep], [enc.tokens[i] for i in keep], enc.spans[keep],
                               enc.span_unit, enc.is_cls[keep], enc.is_sep[keep], enc.is_punct[keep])
        run_trace(loaded, enc)  # warm-up

        def ours():
            tr = run_trace(loaded, enc)
            head_features(tr.attentions, TokenKinds(tr.encoded.is_cls, tr.encoded.is_sep, tr.encoded.is_punct))

        def baseline():
            tr = run_trace(loaded, enc)
            reference_per_head(tr.attentions, TokenKinds(tr.encoded.is_cls, tr.encoded.is_sep, tr.encoded.is_punct))

        t_ours = _best(ours, repeat)
        t_base = _best(baseline, 1)
        rows.append({"measure": f"analysis latency, {label}: forward + all head features",
                     "value": f"{t_ours * 1000:.0f} ms", "baseline": f"{t_base * 1000:.0f} ms (per-head loops)",
                     "ratio": f"{t_base / t_ours:.1f}x faster"})
        if loaded.spec.input_kind == "spike":
            import logging

            from bertgeom.ui.cache import get_trace  # the app's cache, used outside a server

            logging.getLogger("streamlit").setLevel(logging.ERROR)  # "no runtime" notices
            get_trace(model_id, text)
            t_click = _best(lambda: get_trace(model_id, text), 20)
            t_rerun = _best(lambda: run_trace(loaded, enc), repeat)
            rows.append({"measure": "head-click latency (spike): cached trace read (shared, read-only)",
                         "value": f"{t_click * 1000:.2f} ms", "baseline": f"{t_rerun * 1000:.0f} ms (re-run the model)",
                         "ratio": f"{t_rerun / t_click:,.0f}x faster"})
    return rows


def classify_throughput(n: int) -> list[dict]:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_classify import main as bench_classify

    res = bench_classify(["--n", str(n), "--model", _variant_model_id(), "--repeats", "3"])
    pol = res["chosen"]  # backend and precision, e.g. "openvino bf16"
    return [{"measure": f"batch classify, {n} genomes (parse, align, tokenise, forward on {pol}; "
                        f"{res['streams']} stream(s), the CLI's default; median of {res['repeats']} rounds)",
             "value": f"{res['end_to_end_genomes_per_s']:.2f} genomes/s",
             "baseline": f"{res['bound_genomes_per_s']:.2f} genomes/s (its forward passes alone, "
                         "the faster of one stream and the streams)",
             "ratio": f"{100 * res['end_to_end_share_of_bound']:.0f}% of the bound"},
            {"measure": f"batch classify, {n} genomes, one stream (its forward on every torch thread)",
             "value": f"{res['end_to_end_one_stream_genomes_per_s']:.2f} genomes/s",
             "baseline": f"{res['end_to_end_genomes_per_s']:.2f} genomes/s ({res['streams']} streams)",
             "ratio": f"{res['end_to_end_genomes_per_s'] / res['end_to_end_one_stream_genomes_per_s']:.2f}x "
                      "faster with the streams"},
            {"measure": f"classify forward on {res['device']}: bf16 vs fp32 classification copy (SDPA)",
             "value": f"{res['forward_bf16_genomes_per_s']:.2f} genomes/s",
             "baseline": f"{res['forward_fp32_genomes_per_s']:.2f} genomes/s",
             "ratio": f"{res['bf16_over_fp32_forward']:.2f}x; same call on {res['fp32_bf16_same_call']}/"
                      f"{res['validation_genomes']} validation genomes"},
            {"measure": "classify forward: achieved FLOP/s vs this machine's matmul peak, same run",
             "value": f"{pol} {100 * res['chosen_share_of_peak']:.0f}%; torch bf16 "
                      f"{100 * res['forward_bf16_share_of_bf16_peak']:.0f}%, "
                      f"fp32 {100 * res['forward_fp32_share_of_fp32_peak']:.0f}%",
             "baseline": f"peak bf16 {res['matmul_peak_bf16_gflops']:.0f}, "
                         f"fp32 {res['matmul_peak_fp32_gflops']:.0f} GFLOP/s",
             "ratio": ""},
            {"measure": f"batch classify with {res['workers']} preparation workers, forwards on {res['device']}",
             "value": f"{res['end_to_end_parallel_genomes_per_s']:.2f} genomes/s",
             "baseline": f"{res['bound_genomes_per_s']:.2f} genomes/s (its forward bound)",
             "ratio": f"{100 * res['parallel_share_of_bound']:.0f}% of the bound"}]


_RSS_SNIPPET = """
import sys
sys.path.insert(0, {root!r})
import torch, transformers, bertgeom.models, bertgeom.trace
if {load}:
    from bertgeom.models import load_model
    from bertgeom.trace import run_trace
    from bertgeom.sars_cov_2.variant.spec import genome_set
    a = load_model("minilm-l6"); run_trace(a, "The cat sat on the mat because it was tired.")
    b = load_model({variant!r}); run_trace(b, genome_set("demo")[-1].text)
# VmHWM is this process's own peak (ru_maxrss would inherit the parent's peak across fork/exec)
print([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")][0])
"""


def peak_rss() -> dict:
    variant = _variant_model_id()

    def measure(load: bool) -> float:
        code = _RSS_SNIPPET.format(root=str(ROOT), load=load, variant=variant)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        return int(out.stdout.strip().splitlines()[-1]) / 1024  # MiB

    with_models, bare = measure(True), measure(False)
    return {"measure": "peak RSS, both bundled models loaded with one trace each",
            "value": f"{with_models:.0f} MiB", "baseline": f"{bare:.0f} MiB (imports only)",
            "ratio": f"+{with_models - bare:.0f} MiB for models and traces"}


def load_rows() -> list[dict]:
    """The load figures (``bench/out/load.json``, written by ``python bench/bench_load.py``)."""
    path = OUT / "load.json"
    try:
        runs = json.loads(path.read_text())["runs"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    rows = []
    for d in runs:
        median, idle = float(d["light_client_home_median_s"]), float(d["idle_home_s"])
        busy = d.get("outside_load")
        note = f"; other jobs' load {busy:.0f}" if busy and busy > (os.cpu_count() or 2) else ""
        who = ("their browsers at low priority, as on their own computers" if d.get("working_clients_niced")
               else "all 7 browsers on the server's cores at equal priority")
        rows.append({"measure": f"home page of a 7th client while {d.get('sessions', 6)} sessions classify and browse "
                                f"({who}; median{note}; CPU while working: server {d['server_cpu_s_while_working']} s, "
                                f"browsers {d['browsers_cpu_s_while_working']} s)",
                     "value": f"{median:.1f} s", "baseline": f"{idle:.1f} s (same page, nobody working)",
                     "ratio": f"{median / idle:.1f}x slower" if idle > 0 else ""})
    return rows


def markdown_table(rows: list[dict]) -> str:
    lines = ["| measure | bertgeom | baseline (same run) | ratio |", "|---|---|---|---|"]
    lines += [f"| {r['measure']} | {r['value']} | {r['baseline']} | {r['ratio']} |" for r in rows]
    return "\n".join(lines)


def update_readme(table: str, machine: str) -> None:
    from readme_blocks import replace_block

    replace_block("bench", f"{table}\n\n_{machine}_",
                  "## Benchmarks\n\nProduced by `python bench/run_all.py --update-readme`.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and genomes")
    ap.add_argument("--update-readme", action="store_true")
    ap.add_argument("--latency", action="store_true",
                    help="also run bench/bench_latency.py (Chromium; its own README block, 'latency')")
    args = ap.parse_args(argv)
    import platform

    repeat = 1 if args.quick else 3
    rows = analysis_latency(repeat)
    rows.extend(classify_throughput(64))  # 16 genomes left one stream idle for half the run
    rows.append(peak_rss())
    rows.extend(load_rows())
    from bertgeom.runtime import machine_line

    machine = f"Measured {time.strftime('%Y-%m-%d')} on {machine_line()}, Python {platform.python_version()}."
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps({"rows": rows, "machine": machine}, indent=1))
    table = markdown_table(rows)
    print(table)
    if args.update_readme:
        update_readme(table, machine)
    if args.latency:
        from bench.bench_latency import main as latency_main

        latency_main((["--quick"] if args.quick else []) + (["--update-readme"] if args.update_readme else []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
