"""Benchmark: all per-head features for all heads of one spike-sized input.

Input: T = 427 tokens ([CLS] + 425 k-mers + [SEP]), L = 6 layers, H = 12 heads, two kinds of
maps: rows from a softmax of random logits, and a "realistic mix" of head types (previous /
next token, [SEP] and [CLS] sinks, broad, local window, block, content stripe, peaky random),
each made as softmax(template + noise).

Compared implementations (all compute the same values; the script checks agreement):

* ``loop``     -- ``bertgeom.analysis.heads._reference_per_head``: a plain Python loop over heads and
                  query rows with numpy on each row (the straightforward implementation);
* ``per-head`` -- ``head_features`` called once per head (vectorised over rows and keys,
                  Python loop over heads), a stricter baseline;
* ``ours``     -- ``head_features`` on the whole ``[L, H, T, T]`` stack.

Usage: ``python bench/bench_head_features.py [--json out.json] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertgeom.analysis.heads import head_features  # noqa: E402
from bertgeom.tokens import TokenKinds  # noqa: E402
from bertgeom.attention import softmax  # noqa: E402
from bench.reference_heads import reference_per_head  # noqa: E402

L, H, T = 6, 12, 427


def random_maps(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return softmax(rng.normal(size=(L, H, T, T))).astype(np.float32)


def realistic_mix(seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    eye = np.eye(T)
    sep = np.zeros((T, T))
    sep[:, T - 1] = 1.0
    cls = np.zeros((T, T))
    cls[:, 0] = 1.0
    stripe = np.zeros((T, T))
    stripe[:, 200] = 1.0
    block = np.zeros((T, T))
    for lo in range(1, T - 1, 53):
        block[lo:lo + 53, lo:lo + 53] = 1.0
    window = sum(np.eye(T, k=k) for k in range(-3, 4))
    templates = [
        (8.0, np.eye(T, k=-1)),  # previous token
        (8.0, np.eye(T, k=1)),  # next token
        (7.0, sep),  # [SEP] sink
        (6.0, cls),  # [CLS] sink
        (0.0, eye),  # broad (noise only)
        (3.0, window),  # local window
        (4.0, block),  # blocks
        (7.0, stripe),  # content stripe (directional)
        (4.0, 0.5 * sep + 0.5 * np.eye(T, k=-1)),  # sink + diagonal
        (2.0, eye),  # weak self
    ]
    out = np.empty((L, H, T, T), dtype=np.float32)
    for l in range(L):
        for h in range(H):
            strength, tpl = templates[(l * H + h) % len(templates)]
            noise = rng.normal(size=(T, T)) * (3.0 if (l * H + h) % 11 == 10 else 1.0)  # a few peaky heads
            out[l, h] = softmax(strength * tpl + noise)
    return out


def per_head_calls(attn: np.ndarray, kinds: TokenKinds):
    return [[head_features(attn[l:l + 1, h:h + 1], kinds,
                           n_jobs=1) for h in range(attn.shape[1])] for l in range(attn.shape[0])]


def best_time(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def max_abs_diff(table, ref) -> float:
    d = max(float(np.max(np.abs(table[n] - ref["features"][n]))) for n in table.names)
    d = max(d, float(np.max(np.abs(table.hist - ref["hist"]))))
    if not np.array_equal(table.k90_rows, ref["k90_rows"]):
        d = float("inf")
    return d


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write results as JSON here")
    ap.add_argument("--repeat", type=int, default=3, help="repeats of the fast variants (best time kept)")
    ap.add_argument("--loop-repeat", type=int, default=1, help="repeats of the slow loop baseline")
    args = ap.parse_args(argv)

    kinds = TokenKinds.simple(T)
    inputs = {"random softmax": random_maps(), "realistic mix": realistic_mix()}
    head_features(inputs["random softmax"][:1, :2], kinds)  # warm-up (imports, allocator)

    results = []
    for name, attn in inputs.items():
        t_ours, table = best_time(lambda: head_features(attn, kinds), args.repeat)
        t_ours1, _ = best_time(lambda: head_features(attn, kinds, n_jobs=1), args.repeat)
        t_ph, _ = best_time(lambda: per_head_calls(attn, kinds), max(1, args.repeat - 1))
        t_loop, ref = best_time(lambda: reference_per_head(attn, kinds), args.loop_repeat)
        diff = max_abs_diff(table, ref)
        results.append(
            dict(
                input=name,
                shape=[L, H, T, T],
                n_features=len(table.names) + len(table.hist_labels),
                loop_s=t_loop,
                per_head_s=t_ph,
                ours_s=t_ours,
                ours_1thread_s=t_ours1,
                speedup_vs_loop=t_loop / t_ours,
                speedup_vs_loop_1thread=t_loop / t_ours1,
                speedup_vs_per_head=t_ph / t_ours,
                max_abs_diff_vs_loop=diff,
            )
        )

    hdr = (f"{'input':16s} {'baseline loop s':>15s} {'per-head s':>10s} {'ours s':>8s} {'ours 1thr s':>11s} "
           f"{'speed-up':>9s} {'(1 thr)':>8s} {'vs per-head':>11s} {'max|diff|':>10s}")
    print(f"head_features: L={L} H={H} T={T}, {results[0]['n_features']} features per head "
          f"(incl. histogram bins), numpy {np.__version__}, {os.cpu_count()} CPUs")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        print(
            f"{r['input']:16s} {r['loop_s']:15.3f} {r['per_head_s']:10.3f} {r['ours_s']:8.3f} "
            f"{r['ours_1thread_s']:11.3f} "
            f"{r['speedup_vs_loop']:8.1f}x {r['speedup_vs_loop_1thread']:7.1f}x {r['speedup_vs_per_head']:10.1f}x "
            f"{r['max_abs_diff_vs_loop']:10.1e}"
        )
    ok = all(r["max_abs_diff_vs_loop"] < 1e-9 for r in results)
    print("agreement with the loop reference:", "OK" if ok else "MISMATCH")

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = dict(
            benchmark="head_features",
            python=platform.python_version(),
            numpy=np.__version__,
            cpus=os.cpu_count(),
            repeat=args.repeat,
            agreement_ok=ok,
            results=results,
        )
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
