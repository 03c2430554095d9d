"""Benchmark: rank collapse, the projection kernel between heads, head confidence and head importance,
on the genome model (a 427-token spike genome) and MiniLM (a sentence), as ratios to a baseline
measured in the same run.

    python bench/bench_rank_kernel.py            # both models, a table
    python bench/bench_rank_kernel.py --json     # machine-readable
    python bench/bench_rank_kernel.py --repeats 3

Baseline: one forward of the model's own (eager) code with hidden states and attention maps on the
same input, what every trace costs. Timed (best of ``--repeats``, after one warm-up):

* ``rank_collapse``: :func:`bertgeom.analysis.collapse.rank_collapse_curves`, four forwards (the model
  as trained and three path ablations) plus the ratios;
* ``projection_kernel``: :func:`bertgeom.analysis.head_affinity.projection_kernel_map` for one pair type
  (weights only), and the same map pair by pair (a QR of each head's block and one product per pair,
  the loop the vectorised map replaces; measured on 200 pairs and scaled to all of them);
* ``confidence``: the mean max weight of every head from the trace's attention maps (numpy);
* ``importance``: :func:`bertgeom.analysis.gradients.head_importance`, one forward with gates and one
  backward.

The CPU is named (``lscpu``'s model name) beside the table, as the benchmarks in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def best(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _pair_loop(lws, pairs) -> np.ndarray:
    """PK pair by pair: QR of each head's O block and Q block, then ‖UᵀV‖_F² (the loop version)."""
    H = lws[0].num_heads
    out = []
    for i, j in pairs:
        a, b = lws[i // H], lws[j // H]
        U = np.linalg.qr(a.W_o[:, a.head_slice(i % H)].astype(np.float64))[0]
        V = np.linalg.qr(b.W_q[b.head_slice(j % H), :].T.astype(np.float64))[0]
        out.append(float(((U.T @ V) ** 2).sum()))
    return np.array(out)


def bench_model(model_id: str, text: str, repeats: int) -> dict:
    import torch

    from bertgeom.analysis.collapse import rank_collapse_curves
    from bertgeom.analysis.gradients import head_importance
    from bertgeom.analysis.head_affinity import projection_kernel_map
    from bertgeom.inputs import encode_input
    from bertgeom.models import load_model
    from bertgeom.weights import extract_layer_weights

    loaded = load_model(model_id)
    enc = encode_input(loaded, text)
    ids = torch.as_tensor(np.array(enc.input_ids)[None])
    lws = extract_layer_weights(loaded.model)
    N = len(lws) * lws[0].num_heads

    def forward():
        with torch.inference_mode():
            return loaded.model(input_ids=ids, output_hidden_states=True, output_attentions=True)

    attn = torch.stack(forward().attentions, 1)[0].numpy()
    content = enc.content_mask
    rng = np.random.default_rng(0)
    pairs = [tuple(p) for p in rng.integers(0, N, size=(200, 2))]
    t_base = best(forward, repeats)
    t_rc = best(lambda: rank_collapse_curves(loaded, enc.input_ids), repeats)
    t_pk = best(lambda: projection_kernel_map(lws, "OQ"), repeats)
    t_loop = best(lambda: _pair_loop(lws, pairs), max(1, repeats // 2)) * (N * N) / len(pairs)
    t_conf = best(lambda: attn[:, :, content].max(axis=-1).mean(axis=-1), repeats)
    t_imp = best(lambda: head_importance(loaded, enc.input_ids, content_mask=content), repeats)
    M = projection_kernel_map(lws, "OQ")
    agree = float(np.abs(_pair_loop(lws, pairs[:20]) - np.array([M[i, j] for i, j in pairs[:20]])).max())
    return {"model": model_id, "tokens": int(enc.n_tokens), "heads": N, "forward_s": t_base,
            "rank_collapse_s": t_rc, "rank_collapse_x_forward": t_rc / t_base,
            "projection_kernel_s": t_pk, "projection_kernel_loop_s": t_loop, "loop_over_vectorised": t_loop / t_pk,
            "pk_loop_max_diff": agree,
            "confidence_s": t_conf, "confidence_x_forward": t_conf / t_base,
            "importance_s": t_imp, "importance_x_forward": t_imp / t_base}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    from bertgeom.sars_cov_2.variant.spec import genome_set

    rows = [bench_model("sars-cov-2-variant", genome_set("demo")[0].text, args.repeats),
            bench_model("minilm-l6", "The quick brown fox jumps over the lazy dog near the river bank.",
                        args.repeats)]
    meta = {"cpu": cpu_name(), "torch_threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d")}
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
        return 0
    print(f"CPU: {meta['cpu']} · torch threads {meta['torch_threads']} · {meta['date']}")
    for r in rows:
        print(f"\n{r['model']} ({r['tokens']} tokens, {r['heads']} heads); baseline forward {r['forward_s']:.3f} s")
        print(f"  rank collapse (4 forwards + ratios) {r['rank_collapse_s']:.3f} s = "
              f"{r['rank_collapse_x_forward']:.1f}x forward")
        print(f"  projection kernel map (one pair type) {r['projection_kernel_s']:.3f} s; pair-by-pair loop "
              f"{r['projection_kernel_loop_s']:.2f} s ({r['loop_over_vectorised']:.0f}x slower; max diff "
              f"{r['pk_loop_max_diff']:.1e})")
        print(f"  head confidence {r['confidence_s'] * 1e3:.2f} ms = {r['confidence_x_forward']:.3f}x forward")
        print(f"  head importance (forward + backward) {r['importance_s']:.3f} s = "
              f"{r['importance_x_forward']:.1f}x forward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
