"""Benchmark: cone index over a stack of hidden states, batched vs Python loops.

    python bench/bench_cone.py                 # synthetic [300, 7, 64, 384] stack, table
    python bench/bench_cone.py --json          # machine-readable result
    python bench/bench_cone.py --n 300 --layers 13 --tokens 128 --dim 768

``bench_cone(hidden_states_batch, masks)`` times, on the same data:

* ``batched``: one :func:`bertgeom.cone.cone_index` call over ``[N, L+1, T, d]`` (per-genome
  masks broadcast over layers);
* ``per_genome``: one call per genome over its ``[L+1, T, d]``;
* ``loop``: one call per genome and per layer on the selected rows (the official code's style).

It checks that the three agree. The model forward that produces real hidden states (one
correctly classified genome per row) is wired in by the caller; this module only generates a
synthetic stack when run as a script.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertgeom.cone import cone_index  # noqa: E402


def _best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_cone(
    hidden_states_batch,
    masks=None,
    *,
    normalized: bool = False,
    repeats: int = 3,
    loop_limit: int | None = None,
) -> dict:
    """Time the cone index of ``hidden_states_batch [N, L+1, T, d]``.

    ``masks``: optional ``[N, T]`` bool token sets (e.g. :func:`bertgeom.cone.token_mask`).
    ``loop_limit``: time the per-layer Python loop on the first ``loop_limit`` genomes only and
    extrapolate linearly (the loop is slow for large N). Returns a dict with the shape, the
    seconds per mode, the speed-ups and the max abs difference between modes.
    """
    hs = np.asarray(hidden_states_batch)
    if hs.ndim != 4:
        raise ValueError(f"expected [N, L+1, T, d], got {hs.shape}")
    N, L1, T, d = hs.shape
    m = np.ones((N, T), bool) if masks is None else np.asarray(masks, bool)
    kw = dict(normalized=normalized)

    t_batched, I_b = _best_of(lambda: cone_index(hs, m[:, None, :], **kw), repeats)
    t_genome, I_g = _best_of(
        lambda: np.stack([cone_index(hs[i], m[i], **kw) for i in range(N)]), repeats
    )
    n_loop = N if loop_limit is None else min(N, loop_limit)

    def loop():
        return np.array(
            [[cone_index(hs[i, l][m[i]], **kw) for l in range(L1)] for i in range(n_loop)]
        )

    t_loop, I_l = _best_of(loop, repeats)
    t_loop_full = t_loop * N / n_loop
    diff = max(
        float(np.max(np.abs(I_b - I_g))),
        float(np.max(np.abs(I_b[:n_loop] - I_l))),
    )
    return {
        "shape": [N, L1, T, d],
        "dtype": str(hs.dtype),
        "n_cone_indices": N * L1,
        "seconds": {"batched": t_batched, "per_genome": t_genome, "loop": t_loop_full},
        "loop_extrapolated_from": n_loop,
        "speedup_vs_loop": {
            "batched": t_loop_full / t_batched if t_batched > 0 else float("inf"),
            "per_genome": t_loop_full / t_genome if t_genome > 0 else float("inf"),
        },
        "max_abs_diff": diff,
        "repeats": repeats,
    }


def synthetic_stack(n=300, layers=7, tokens=64, dim=384, seed=0, dtype=np.float32):
    """A ``[N, L+1, T, d]`` stack with a growing common direction (a cone narrowing with depth)
    and per-genome padding masks ``[N, T]``."""
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal(dim)
    mu /= np.linalg.norm(mu)
    hs = rng.standard_normal((n, layers, tokens, dim)).astype(dtype)
    hs += (np.linspace(0.0, 3.0, layers)[None, :, None, None] * np.sqrt(dim) * mu).astype(dtype)
    lengths = rng.integers(tokens // 2, tokens + 1, size=n)
    masks = np.arange(tokens)[None, :] < lengths[:, None]
    return hs, masks


def _table(res: dict) -> str:
    N, L1, T, d = res["shape"]
    lines = [
        f"cone index on [N={N}, L+1={L1}, T={T}, d={d}] {res['dtype']} "
        f"({res['n_cone_indices']} indices, best of {res['repeats']})",
        f"{'mode':<12}{'seconds':>12}{'speed-up':>12}",
    ]
    for k in ("batched", "per_genome", "loop"):
        su = res["speedup_vs_loop"].get(k, 1.0)
        lines.append(f"{k:<12}{res['seconds'][k]:>12.4f}{su:>11.1f}x")
    if res["loop_extrapolated_from"] < N:
        lines.append(f"(loop timed on {res['loop_extrapolated_from']} genomes, extrapolated)")
    lines.append(f"max |difference| between modes: {res['max_abs_diff']:.2e}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--layers", type=int, default=7, help="L+1 hidden states per genome")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loop-limit", type=int, default=None)
    ap.add_argument("--normalized", action="store_true")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    hs, masks = synthetic_stack(a.n, a.layers, a.tokens, a.dim)
    res = bench_cone(
        hs, masks, normalized=a.normalized, repeats=a.repeats, loop_limit=a.loop_limit
    )
    print(json.dumps(res, indent=2) if a.json else _table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
