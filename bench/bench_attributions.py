"""Integrated gradients on the demo genomes: today's refined composite quadrature against the former
global one, and against its own first partition into equal segments, measured in the same run (wall
and CPU seconds, nodes, completeness gap).

The former method (kept here only as the baseline): Gauss-Legendre on all of ``[0, 1]`` with 16
nodes, doubled until the gap is within 5% (at most 128), eager attention, fp32, 8 path points per
pass. Today's: :func:`bertgeom.analysis.attributions.integrated_gradients_checked` (segments refined where
their own completeness check fails, SDPA, the precision policy's bf16 where the CPU has bf16 units,
first segments placed by a probe of the logit along the path); ``equal_*``: the same with equal first
segments (``probe=0``), as before the probe.
On a shared machine the absolute seconds are high; the ratio is what this measures.

Usage: python bench/bench_attributions.py [--classes omicron alpha] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def former_ig(loaded, input_ids, target: int, steps: int = 16, tolerance: float = 0.05, max_steps: int = 128,
              batch_size: int = 8) -> tuple[float, int]:
    """``(gap, nodes)`` of the former global Gauss-Legendre doubling (eager model, fp32)."""
    import torch

    from bertgeom.forward import run_forward

    emb = loaded.encoder.embeddings.word_embeddings
    ids = torch.as_tensor(np.array(input_ids, dtype=np.int64))
    with torch.no_grad():
        x = emb(ids)
        base = x.clone()
        base[1:-1] = emb.weight[0]
        ends = run_forward(loaded, inputs_embeds=torch.stack([x, base]), attention="model").logits[:, target]
    delta = float(ends[0] - ends[1])
    n = steps
    while True:
        nodes, weights = np.polynomial.legendre.leggauss(n)
        alphas = torch.as_tensor((nodes + 1) / 2, dtype=torch.float32)
        w = torch.as_tensor(weights / 2, dtype=torch.float32)
        total = torch.zeros_like(x)
        for s in range(0, n, batch_size):
            path = (base[None] + alphas[s:s + batch_size][:, None, None]
                    * (x - base)[None]).detach().requires_grad_(True)
            out = run_forward(loaded, inputs_embeds=path, grad=True, attention="model")
            (g,) = torch.autograd.grad(out.logits[:, target].sum(), path)
            total += (g * w[s:s + batch_size][:, None, None]).sum(0)
        gap = abs(float(((x - base) * total).sum()) - delta) / max(abs(delta), 1e-6)
        if gap <= tolerance or n * 2 > max_steps:
            return gap, n
        n *= 2


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", nargs="*", default=["omicron", "alpha"])
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)

    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.models import load_model
    from bertgeom.trace import run_trace
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.analysis.attributions import integrated_gradients_checked

    loaded = load_model(VARIANT_MODEL_ID)
    demos = {meta.get("class", ""): rec for rec, meta in load_demo_genomes()}
    out = {}
    for cls in args.classes:
        rec = demos[cls]
        tr = run_trace(loaded, f">{rec.name}\n{rec.sequence}")
        y = int(np.argmax(tr.logits))
        c0, w0 = time.process_time(), time.perf_counter()
        res = integrated_gradients_checked(loaded, tr.encoded.input_ids, y)
        c1, w1 = time.process_time(), time.perf_counter()
        gap_old, n_old = former_ig(loaded, tr.encoded.input_ids, y)
        c2, w2 = time.process_time(), time.perf_counter()
        equal = integrated_gradients_checked(loaded, tr.encoded.input_ids, y, probe=0)
        w3 = time.perf_counter()
        out[cls] = {"now_wall_s": w1 - w0, "now_cpu_s": c1 - c0, "now_nodes": res.steps, "now_gap": res.gap,
                    "now_precision": res.precision, "now_note": res.note,
                    "former_wall_s": w2 - w1, "former_cpu_s": c2 - c1, "former_nodes": n_old, "former_gap": gap_old,
                    "equal_wall_s": w3 - w2, "equal_nodes": equal.steps, "equal_gap": equal.gap,
                    "speed_up_wall": (w2 - w1) / (w1 - w0), "speed_up_cpu": (c2 - c1) / (c1 - c0),
                    "speed_up_over_equal": (w3 - w2) / (w1 - w0)}
        print(cls, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out[cls].items()}, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
