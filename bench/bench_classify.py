"""Throughput of ``classify`` end to end vs a pure forward-pass bound, measured in one run.

End to end = parse -> align (minimap2) -> cut spike -> mutations/QC -> tokenise -> batched
forward, exactly what ``python -m bertgeom classify`` does. The bound = the same batched
forward passes on the same, already tokenised inputs. Target: end to end >= 80% of the bound.

Per stage, in the same run: preparation (parse/align/tokenise) per genome, the forward bound of
the analysis model (eager attention, fp32, CPU) and of the classification copy
(:class:`~bertgeom.variant.predict.FastClassifier`: SDPA, bf16 on a GPU) on ``--device``, and
end to end with ``--workers`` preparation processes feeding forwards on that device.

Usage: python bench/bench_classify.py [--n 64] [--batch-size 16] [--model ID|DIR] [--device auto]
                                      [--workers 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _records(n: int):
    from bertgeom.genome.fasta import parse_sequences
    from bertgeom.variant.spec import genome_set

    base = [parse_sequences(it.text)[0] for it in genome_set()]
    return [base[i % len(base)] for i in range(n)]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--model", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="auto", help="device of the classification copy (auto: a GPU when there is one)")
    ap.add_argument("--workers", type=int, default=2, help="preparation processes for the parallel end-to-end run")
    args = ap.parse_args(argv)

    from bertgeom.genome.pipeline import analyse_sequence
    from bertgeom.variant import VARIANT_MODEL_ID
    from bertgeom.models import REGISTRY, load_model
    from bertgeom.variant.predict import FastClassifier, classify_stream, logits_for_ids

    model_id = args.model or (VARIANT_MODEL_ID if VARIANT_MODEL_ID in REGISTRY else "")
    if not model_id:
        import tempfile

        from bertgeom.variant import build_tiny_variant_model

        model_id = str(build_tiny_variant_model(Path(tempfile.mkdtemp()) / "tiny"))
    loaded = load_model(model_id)
    records = _records(args.n)

    # tokenised inputs for the bound (not timed)
    ids = [np.asarray(analyse_sequence(r, vocab=loaded.tokenizer).token_ids) for r in records]
    ids = [x[: int(np.count_nonzero(x))] for x in ids]
    width = max(len(x) for x in ids)
    padded = np.zeros((len(ids), width), dtype=np.int64)
    for i, x in enumerate(ids):
        padded[i, : len(x)] = x
    logits_for_ids(loaded, padded[: args.batch_size])  # warm-up

    t0 = time.perf_counter()
    for s in range(0, len(ids), args.batch_size):
        logits_for_ids(loaded, padded[s : s + args.batch_size])
    t_forward = time.perf_counter() - t0

    t0 = time.perf_counter()
    n_ok = sum(p.error == "" for p in classify_stream(loaded, records, batch_size=args.batch_size))
    t_e2e = time.perf_counter() - t0

    t0 = time.perf_counter()
    for r in records:
        analyse_sequence(r, vocab=loaded.tokenizer)
    t_prep = time.perf_counter() - t0

    fast = FastClassifier(loaded, args.device)
    fast.logits(padded[: args.batch_size])  # warm-up
    t0 = time.perf_counter()
    for s in range(0, len(ids), args.batch_size):
        fast.logits(padded[s : s + args.batch_size])
    t_fast = time.perf_counter() - t0

    t0 = time.perf_counter()
    n_par = sum(p.error == "" for p in classify_stream(loaded, records, batch_size=args.batch_size,
                                                         workers=args.workers, device=args.device))
    t_par = time.perf_counter() - t0
    assert n_par == n_ok

    out = {
        "model": loaded.spec.id if loaded.spec.id != model_id else Path(model_id).name,
        "genomes": len(records),
        "classified": n_ok,
        "forward_bound_genomes_per_s": len(records) / t_forward,
        "end_to_end_genomes_per_s": len(records) / t_e2e,
        "share_of_bound": t_forward / t_e2e,
        "preprocessing_ms_per_genome": 1000 * t_prep / len(records),
        "device": fast.device + (" (bf16)" if "bfloat16" in str(fast.dtype) else ""),
        "fast_forward_bound_genomes_per_s": len(records) / t_fast,
        "workers": args.workers,
        "end_to_end_parallel_genomes_per_s": len(records) / t_par,
        "parallel_share_of_fast_bound": t_fast / t_par,
    }
    print(f"{'measure':36s} value")
    for k, v in out.items():
        print(f"{k:36s} {v:.3f}" if isinstance(v, float) else f"{k:36s} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
