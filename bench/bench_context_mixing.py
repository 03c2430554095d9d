"""Context mixing on one input: the time of each measure (norm-based attention, mixing ratios, per-head
mixing ratios, whole-block norms in three scopes, ALTI with its rollout, and the page's whole bundle)
on the shipped genome model (a 427-token spike) and on MiniLM (a sentence), each as a ratio to the
model's own forward pass over the same input measured in the same run (``bertgeom.trace``). With
``--sets``, also the two set views over each model's whole shipped set, once each (the load average
before and after is printed: a busy machine's seconds are not a quiet one's): the mixing ratios
(:func:`bertgeom.sets.context_mixing.mixing_over_set`) and ALTI's reductions
(:func:`bertgeom.sets.context_mixing.alti_over_set`), each with its forward passes (and, for genomes,
their alignment).

Best of ``--repeats`` wall seconds, with the CPU seconds of that best run; the CPU is named (lscpu's
"Model name"). On a shared machine the absolute seconds are high; the ratios are what this measures.

Usage: python bench/bench_context_mixing.py [--repeats 3] [--sets] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SENTENCE = "The cat sat on the mat because it was tired, and the dog watched it from the warm kitchen."


def cpu_name() -> str:
    """lscpu's "Model name" (the platform's processor string where lscpu is missing)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def best_of(fn, repeats: int) -> tuple[float, float]:
    """``(best wall seconds, CPU seconds of that run)`` of ``fn()``."""
    best = (float("inf"), 0.0)
    for _ in range(max(1, repeats)):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        best = min(best, (wall, cpu))
    return best


def bench_one(model_id: str, text: str, repeats: int) -> dict:
    import bertgeom
    from bertgeom.analysis import context_mixing as cm

    loaded = bertgeom.load_model(model_id)
    trace = bertgeom.trace(loaded, text)
    rows = {"forward (baseline)": best_of(lambda: bertgeom.trace(loaded, text), repeats)}
    steps = {
        "norm-based attention [L,H,T,T]": lambda: cm.norm_attention(trace),
        "mixing ratios (5 variants)": lambda: cm.mixing_ratios(trace),
        "per-head mixing ratios": lambda: cm.head_mixing_ratios(trace),
        "whole-block norms (3 scopes)": lambda: [cm.block_norms(trace, s) for s in cm.SCOPES],
        "ALTI + rollout": lambda: cm.alti_rollout(cm.alti(trace)),
        "the tab's bundle (context_mixing_view)": lambda: cm.context_mixing_view(trace),
    }
    for name, fn in steps.items():
        rows[name] = best_of(fn, repeats)
    base = rows["forward (baseline)"][0]
    return {"model": model_id, "tokens": int(trace.attentions.shape[-1]),
            "layers_heads": list(trace.attentions.shape[:2]),
            "rows": {k: {"wall_s": round(w, 3), "cpu_s": round(c, 3), "x_forward": round(w / base, 2)}
                     for k, (w, c) in rows.items()}}


def bench_set(model_id: str) -> dict:
    """Wall and CPU seconds of the two set views over ``model_id``'s shipped set, once each."""
    import bertgeom
    from bertgeom.sets.context_mixing import alti_over_set, mixing_over_set
    from bertgeom.sets.inputs import shipped_set
    from bertgeom.weights import layer_weights_of

    loaded = bertgeom.load_model(model_id)
    items = shipped_set(loaded.spec.input_kind)
    weights = layer_weights_of(loaded.model)
    rows = {}
    for name, fn in (("mixing ratios over the set", mixing_over_set), ("ALTI over the set", alti_over_set)):
        load = os.getloadavg()[0]
        wall, cpu = best_of(lambda fn=fn: fn(loaded, items, None, weights), 1)
        rows[name] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load_before": round(load, 1),
                      "load_after": round(os.getloadavg()[0], 1)}
    return {"model": model_id, "inputs": len(items), "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--sets", action="store_true", help="also time the set views over each shipped set")
    args = ap.parse_args(argv)
    from bertgeom.sars_cov_2.variant.spec import VARIANT_MODEL_ID, genome_set

    cases = [(VARIANT_MODEL_ID, genome_set("demo")[0].text), ("minilm-l6", SENTENCE)]
    result = {"cpu": cpu_name(), "cases": [bench_one(m, t, args.repeats) for m, t in cases]}
    print(f"CPU: {result['cpu']}")
    for case in result["cases"]:
        print(f"\n{case['model']}: {case['tokens']} tokens, {case['layers_heads'][0]} layers x "
              f"{case['layers_heads'][1]} heads (best of {args.repeats})")
        print(f"  {'measure':42s} {'wall s':>8s} {'CPU s':>8s} {'x forward':>10s}")
        for name, r in case["rows"].items():
            print(f"  {name:42s} {r['wall_s']:8.3f} {r['cpu_s']:8.3f} {r['x_forward']:10.2f}")
    if args.sets:
        result["sets"] = [bench_set(m) for m, _ in reversed(cases)]
        for case in result["sets"]:
            print(f"\n{case['model']}: its shipped set, {case['inputs']} inputs (once)")
            print(f"  {'view':42s} {'wall s':>8s} {'CPU s':>8s} {'load':>11s}")
            for name, r in case["rows"].items():
                load = f"{r['load_before']:5.1f}-{r['load_after']:<5.1f}"
                print(f"  {name:42s} {r['wall_s']:8.1f} {r['cpu_s']:8.1f} {load}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
