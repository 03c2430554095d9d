"""Throughput of ``classify`` end to end vs the forward bound and the machine's own matmul peak, in one run.

End to end = parse -> align (minimap2) -> cut spike -> mutations/QC -> tokenise -> batched
forward, exactly what ``python -m bertgeom classify`` does (:func:`classify_stream`, its precision
policy). The forward bound = the same classifier's batched forward passes on the same, already
tokenised inputs. Targets: end to end >= 0.75 of the bound; the calls of fp32 and bf16 identical on
the shipped validation genomes (agreement reported).

Measured in the same run, so that a shared, busy machine still gives honest ratios:

* the machine's own fp32 and bf16 matmul rate (``[2048 x 2048] @ [2048 x 2048]``, best of a few):
  the forward's achieved FLOP/s is reported as a share of the measured peak (a forward of the
  variant model is ~9.2 GFLOP: 6 layers, 427 tokens, hidden 384, FFN 1536, the last layer for [CLS] alone);
* the fused attention kernels alone at the forward's shapes (bf16): their share of the bf16 forward
  and the throughput the forward could not exceed even with free matmuls;
* the analysis model's forward (eager attention, fp32), the classifier's forward in fp32 and bf16
  (SDPA, last layer for [CLS] alone), and end to end in the policy's precision (``--precision auto``):
  with one stream, with the default forward streams (:func:`bertgeom.variant.predict.default_streams`:
  one per core on the CPU, one torch thread each) and with ``--workers`` preparation processes.
  The bound is the faster of the two ways to run the forwards alone (one stream with every torch
  thread, or the streams), so the end-to-end share is never flattered.

Usage: python bench/bench_classify.py [--n 64] [--batch-size 16] [--model ID|DIR] [--device auto]
                                      [--workers 2] [--precision auto] [--json out.json]
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


def matmul_peak(dtype_name: str, n: int = 2048, repeats: int = 5) -> float:
    """Best FLOP/s of an ``n x n`` matmul in ``dtype_name`` (``fp32``/``bf16``) on this machine, now."""
    import torch

    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def forward_flop(loaded, tokens: int, cls_only_last: bool = True) -> float:
    """Multiply-add FLOPs of one forward of ``tokens`` tokens (projections, attention, FFN, x2).

    ``cls_only_last``: the classification forward's last layer (``run_forward(logits_only=True)``):
    keys and values for every token, the query, attention, output projection and FFN for [CLS] alone."""
    cfg = loaded.config
    d, f, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    per_layer = 2 * tokens * (4 * d * d + 2 * d * f) + 2 * 2 * tokens * tokens * d
    if not cls_only_last:
        return L * per_layer
    last = 2 * tokens * 2 * d * d + 2 * (2 * d * d + 2 * d * f) + 2 * 2 * tokens * d
    return (L - 1) * per_layer + last


def attention_kernel_seconds(loaded, batch: int, tokens: int, dtype_name: str, repeats: int = 3) -> float:
    """Seconds of the fused attention kernels alone for one batch's forward (``L - 1`` full layers at
    ``[batch, heads, tokens, head_dim]`` plus the [CLS]-only last layer), best of ``repeats``: the part
    of the forward that no matmul unit speeds up (its softmax is exp-bound on a CPU)."""
    import torch

    cfg = loaded.config
    H, L = cfg.num_attention_heads, cfg.num_hidden_layers
    dh = cfg.hidden_size // H
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    q, k, v = (torch.randn(batch, H, tokens, dh).to(dtype) for _ in range(3))
    q1 = q[:, :, :1].contiguous()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    best = float("inf")
    with torch.inference_mode():
        sdpa(q, k, v)
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(L - 1):
                sdpa(q, k, v)
            sdpa(q1, k, v)
            best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--model", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="auto", help="device of the classification copy (auto: a GPU when there is one)")
    ap.add_argument("--workers", type=int, default=2, help="preparation processes for the parallel end-to-end run")
    ap.add_argument("--precision", default="auto", help="precision of the end-to-end runs (auto: the policy's)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds of the policy precision's bound and end-to-end runs, interleaved; medians reported "
                         "(a shared host's load moves the absolute rate by ~10%%)")
    args = ap.parse_args(argv)

    from bertgeom.genome.pipeline import analyse_sequence
    from bertgeom.models import REGISTRY, load_model, resolve_device
    from bertgeom.variant import VARIANT_MODEL_ID
    from bertgeom.variant.predict import (classify_stream, default_streams, fast_classifier, held_out_genomes,
                                          logits_for_ids)

    model_id = args.model or (VARIANT_MODEL_ID if VARIANT_MODEL_ID in REGISTRY else "")
    if not model_id:
        import tempfile

        from bertgeom.variant import build_tiny_variant_model

        model_id = str(build_tiny_variant_model(Path(tempfile.mkdtemp()) / "tiny"))
    loaded = load_model(model_id)
    device = resolve_device(args.device)
    records = _records(args.n)

    peak = {p: matmul_peak(p) for p in ("fp32", "bf16")}

    # tokenised inputs for the bound (not timed)
    ids = [np.asarray(analyse_sequence(r, vocab=loaded.tokenizer).token_ids) for r in records]
    ids = [x[: int(np.count_nonzero(x))] for x in ids]
    width = max(len(x) for x in ids)
    padded = np.zeros((len(ids), width), dtype=np.int64)
    for i, x in enumerate(ids):
        padded[i, : len(x)] = x
    flop = sum(forward_flop(loaded, len(x)) for x in ids)

    def bound(fn) -> float:
        fn(padded[: args.batch_size])  # warm-up
        t0 = time.perf_counter()
        for s in range(0, len(ids), args.batch_size):
            fn(padded[s : s + args.batch_size])
        return time.perf_counter() - t0

    streams = default_streams(device)

    def bound_streams(fn) -> float:
        """The same forwards split over ``streams`` threads the way classify_stream splits them
        (each ``batch_size // streams`` rows, its share of the torch threads)."""
        import threading

        import torch

        from bertgeom.runtime import torch_threads

        per, rows = max(1, torch.get_num_threads() // streams), max(1, args.batch_size // streams)
        starts = list(range(0, len(ids), rows))

        def run(k: int) -> None:
            with torch_threads(per):
                for s in starts[k::streams]:
                    fn(padded[s : s + rows])

        fn(padded[:rows])  # warm-up
        workers = [threading.Thread(target=run, args=(k,)) for k in range(streams)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return time.perf_counter() - t0

    t_attn = attention_kernel_seconds(loaded, min(args.batch_size, len(ids)), width, "bf16") * (
        len(ids) / min(args.batch_size, len(ids)))
    t_eager = bound(lambda x: logits_for_ids(loaded, x))
    fast = {p: fast_classifier(loaded, device, p) for p in ("fp32", "bf16")}
    t_one = {p: bound(fast[p].logits) for p in fast}  # one stream, the caller's torch threads
    t_streams = {p: bound_streams(fast[p].logits) for p in fast} if streams > 1 else dict(t_one)
    policy = fast_classifier(loaded, device, args.precision).precision

    def end_to_end(streams_arg) -> tuple[float, int]:
        t0 = time.perf_counter()
        n = sum(p.error == "" for p in classify_stream(loaded, records, batch_size=args.batch_size,
                                                       device=device, precision=policy, streams=streams_arg))
        return time.perf_counter() - t0, n

    t_e2e_one, n_one = end_to_end(1)
    t_e2e, n_ok = end_to_end("auto")
    assert n_one == n_ok
    rounds = {"one": [t_one[policy]], "streams": [t_streams[policy]], "e2e_one": [t_e2e_one], "e2e": [t_e2e]}
    for _ in range(max(1, args.repeats) - 1):  # interleaved, so a change of the host's load hits all alike
        rounds["one"].append(bound(fast[policy].logits))
        rounds["streams"].append(bound_streams(fast[policy].logits) if streams > 1 else rounds["one"][-1])
        rounds["e2e_one"].append(end_to_end(1)[0])
        rounds["e2e"].append(end_to_end("auto")[0])
    med = {k: float(np.median(v)) for k, v in rounds.items()}
    t_one[policy], t_streams[policy], t_e2e_one, t_e2e = med["one"], med["streams"], med["e2e_one"], med["e2e"]
    t_fast = {p: min(t_one[p], t_streams[p]) for p in fast}  # the bound: the faster way to run the forwards

    t0 = time.perf_counter()
    for r in records:
        analyse_sequence(r, vocab=loaded.tokenizer)
    t_prep = time.perf_counter() - t0

    t0 = time.perf_counter()
    n_par = sum(p.error == "" for p in classify_stream(loaded, records, batch_size=args.batch_size,
                                                         workers=args.workers, device=device, precision=policy))
    t_par = time.perf_counter() - t0
    assert n_par == n_ok

    # fp32 vs bf16 calls on the shipped validation genomes (prepared once, both precisions on the same ids)
    val, _ = held_out_genomes()
    vids = [np.asarray(analyse_sequence(r, vocab=loaded.tokenizer).token_ids) for r in val]
    vids = [x[: int(np.count_nonzero(x))] for x in vids if np.count_nonzero(x)]
    vw = max(len(x) for x in vids)
    vpad = np.zeros((len(vids), vw), dtype=np.int64)
    for i, x in enumerate(vids):
        vpad[i, : len(x)] = x
    lg = {p: np.concatenate([fast[p].logits(vpad[s : s + args.batch_size]) for s in range(0, len(vids), args.batch_size)])
          for p in fast}
    same = int((lg["fp32"].argmax(1) == lg["bf16"].argmax(1)).sum())

    n = len(records)
    out = {
        "model": loaded.spec.id if loaded.spec.id != model_id else Path(model_id).name,
        "device": device,
        "policy_precision": policy,
        "genomes": n,
        "classified": n_ok,
        "matmul_peak_fp32_gflops": peak["fp32"] / 1e9,
        "matmul_peak_bf16_gflops": peak["bf16"] / 1e9,
        "analysis_forward_genomes_per_s": n / t_eager,
        "forward_fp32_genomes_per_s": n / t_fast["fp32"],
        "forward_bf16_genomes_per_s": n / t_fast["bf16"],
        "forward_fp32_share_of_fp32_peak": flop / t_fast["fp32"] / peak["fp32"],
        "forward_bf16_share_of_bf16_peak": flop / t_fast["bf16"] / peak["bf16"],
        "bf16_over_fp32_forward": t_fast["fp32"] / t_fast["bf16"],
        "attention_share_of_bf16_forward": t_attn / t_fast["bf16"],
        "bf16_ceiling_attention_only_per_s": n / t_attn,
        "preprocessing_ms_per_genome": 1000 * t_prep / n,
        "repeats": max(1, args.repeats),
        "end_to_end_genomes_per_s_each_round": [n / t for t in rounds["e2e"]],
        "streams": streams,
        "forward_one_stream_genomes_per_s": n / t_one[policy],
        "forward_streams_genomes_per_s": n / t_streams[policy],
        "end_to_end_genomes_per_s": n / t_e2e,
        "end_to_end_share_of_bound": t_fast[policy] / t_e2e,
        "end_to_end_one_stream_genomes_per_s": n / t_e2e_one,
        "workers": args.workers,
        "end_to_end_parallel_genomes_per_s": n / t_par,
        "parallel_share_of_bound": t_fast[policy] / t_par,
        "validation_genomes": len(vids),
        "fp32_bf16_same_call": same,
        "fp32_bf16_max_abs_logit_diff": float(np.abs(lg["fp32"] - lg["bf16"]).max()),
    }
    print(f"{'measure':40s} value")
    for k, v in out.items():
        print(f"{k:40s} {v:.3f}" if isinstance(v, float) else f"{k:40s} {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
