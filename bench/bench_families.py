"""One row per encoder family: what a bert-base-sized model (12 layers x 12 heads, hidden 768, random
weights built from the family's transformers config) costs the pages, at 128 tokens.

* **first view**: from a model in memory to the first trace a page draws: the architecture adapter,
  every layer's weights as numpy (:func:`bertgeom.weights.extract_layer_weights`) and one forward with
  attentions and hidden states (:func:`bertgeom.forward.run_forward`, the engine's eager path);
* **per view**: one more such forward (median of ``--repeats``), and the attention of every head
  rebuilt from the weights (:func:`bertgeom.attention.correct_attention` over the 12 layers: what the
  subspace and cone analyses recompute), both also as a ratio to BERT's in the same run (the speed
  target is a ratio: every family within a small factor of BERT at the same size, cost proportional
  to layers x heads).

Usage: ``python bench/bench_families.py [--repeats 3] [--tokens 128]``; writes
``bench/out/families.json`` and prints a Markdown table naming the CPU (lscpu "Model name").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out"
FAMILIES = ("BERT", "RoBERTa", "ELECTRA", "DistilBERT", "ALBERT", "ESM-2", "ModernBERT")


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def measure(family: str, tokens: int, repeats: int) -> dict:
    import numpy as np
    import torch

    from bertgeom.architectures import _ADAPTERS, adapter_of, build_random_encoder
    from bertgeom.attention import correct_attention
    from bertgeom.forward import run_forward
    from bertgeom.weights import extract_layer_weights

    extra = {"embedding_size": 768} if family in ("ELECTRA", "ALBERT") else {}
    model = build_random_encoder(family, layers=12, heads=12, hidden=768, vocab_size=1000, **extra)
    ids = np.random.default_rng(0).integers(5, 990, size=(1, tokens))
    t0 = time.perf_counter()
    _ADAPTERS.pop(model, None)
    adapter_of(model)
    lws = extract_layer_weights(model)
    out = run_forward(model, ids, attentions=True, hidden_states=True, attention="eager").arrays()
    first = time.perf_counter() - t0
    fwd, rebuild = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run_forward(model, ids, attentions=True, hidden_states=True, attention="eager").arrays()
        fwd.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for layer, lw in enumerate(lws):
            correct_attention(out["hidden_states"][0, layer], lw)
        rebuild.append(time.perf_counter() - t0)
    del model
    torch.set_num_threads(torch.get_num_threads())
    return {"family": family, "first_view_s": first, "forward_s": statistics.median(fwd),
            "rebuild_s": statistics.median(rebuild)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args(argv)
    rows = []
    for f in FAMILIES:  # each row as soon as it is measured (a busy machine may stop the run early)
        rows.append(measure(f, args.tokens, args.repeats))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for r in rows:
        r["forward_vs_bert"] = r["forward_s"] / base["forward_s"]
        r["rebuild_vs_bert"] = r["rebuild_s"] / base["rebuild_s"]
    cpu = cpu_name()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "families.json").write_text(json.dumps({"cpu": cpu, "tokens": args.tokens, "rows": rows}, indent=1))
    print(f"12 layers x 12 heads, hidden 768, {args.tokens} tokens, random weights; {cpu}\n")
    print("| family | first view (s) | forward (s) | × BERT | attention from weights (s) | × BERT |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {r['first_view_s']:.2f} | {r['forward_s']:.3f} | {r['forward_vs_bert']:.2f} | "
              f"{r['rebuild_s']:.3f} | {r['rebuild_vs_bert']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
