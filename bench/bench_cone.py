"""Benchmark: cone index and [CLS] projections for 300 genomes in one batched pass (issue 6).

    python bench/bench_cone.py                 # 300 genomes through the variant model, table
    python bench/bench_cone.py --quick         # 24 genomes, PCA only (a smoke run, ~1 min)
    python bench/bench_cone.py --json          # machine-readable result
    python bench/bench_cone.py --full-size     # random model of the shipped model's shape
    python bench/bench_cone.py --tiny          # tiny random model even when the shipped one exists
    python bench/bench_cone.py --synthetic     # cone index alone on a synthetic stack (below)

**Model pass** (default). The model is the shipped SARS-CoV-2 variant model when
``bertgeom/data/variant_model/model.safetensors`` exists, else a tiny random variant-shaped model
(2 layers x 4 heads, width 32) built with :func:`bertgeom.sars_cov_2.variant.build_tiny_variant_model` in a
temporary directory (``--full-size``: a random model with the shipped model's shape, 6 x 12,
width 384, so timings are representative without the trained weights). The genomes are the
shipped held-out validation genomes repeated to ``--n`` (300). One pass of
:func:`bertgeom.sets.cone.cone_profiles_over_set` (batched forward, 8 genomes a batch) computes, per
genome, the cone index of ``hidden_states[0..L]`` and of every stream, and the [CLS] and
mean-pooled vectors of every layer; then PCA + Pareto + silhouette of [CLS] for every layer and
UMAP / t-SNE of the last layer. The report gives the time of each part and the share spent in
the model's forward pass (measured with forward hooks on the model).

**Synthetic mode** (``--synthetic``). ``bench_cone(hidden_states_batch, masks)`` times, on the
same data:

* ``batched``: one :func:`bertgeom.analysis.cone.cone_index` call over ``[N, L+1, T, d]`` (per-genome
  masks broadcast over layers);
* ``per_genome``: one call per genome over its ``[L+1, T, d]`` (what the model pass does);
* ``loop``: one call per genome and per layer on the selected rows (the official code's style).

It checks that the three agree.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertgeom.analysis.cone import cone_index  # noqa: E402


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

    ``masks``: optional ``[N, T]`` bool token sets (e.g. :func:`bertgeom.analysis.cone.token_mask`).
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


# -------------------------------------------------------------------------------------------
# Model pass: 300 genomes through the variant model
# -------------------------------------------------------------------------------------------
def load_bench_model(which: str = "auto", tmp_dir: str | None = None):
    """``which``: ``"auto"`` (the shipped variant model if present, else ``"tiny"``), ``"tiny"``
    (a random 2 x 4, width-32 variant-shaped model) or ``"full"`` (a random model with the shipped
    model's shape). Returns ``(loaded, description)``."""
    import tempfile

    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant import VARIANT_DIR, build_tiny_variant_model, variant_spec

    if which == "auto" and (VARIANT_DIR / "model.safetensors").is_file():
        return load_model(variant_spec()), "shipped variant model"
    full_size = which == "full"
    path = Path(tmp_dir or tempfile.mkdtemp(prefix="bench_cone_"))  # the caller removes it
    shape = dict(layers=6, heads=12, hidden=384) if full_size else dict(layers=2, heads=4, hidden=32)
    build_tiny_variant_model(path, **shape)
    what = "random variant-shaped model, full size" if full_size else "tiny random variant-shaped model"
    return load_model(variant_spec(path)), f"{what} ({shape['layers']} x {shape['heads']}, width {shape['hidden']})"


def genomes(n: int):
    """The shipped validation genomes repeated (names suffixed) to ``n`` inputs."""
    from bertgeom.inputs import InputItem
    from bertgeom.sars_cov_2.variant.spec import genome_set

    base = genome_set()
    return tuple(InputItem(f"{base[i % len(base)].name}#{i // len(base)}", base[i % len(base)].text,
                           base[i % len(base)].label) for i in range(n))


class ForwardTimer:
    """Wall time spent inside ``model.forward`` (pre/post forward hooks; removed on exit)."""

    def __init__(self, model):
        self.model, self.seconds, self.calls, self._t0 = model, 0.0, 0, None

    def __enter__(self):
        self._hooks = [self.model.register_forward_pre_hook(self._pre),
                       self.model.register_forward_hook(self._post)]
        return self

    def _pre(self, *_):
        self._t0 = time.perf_counter()

    def _post(self, *_):
        self.seconds += time.perf_counter() - self._t0
        self.calls += 1

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()


def _projections(cls: np.ndarray, labels, *, slow: bool) -> tuple[dict[str, float], np.ndarray]:
    """Time PCA + Pareto and the silhouette for every layer, and UMAP / t-SNE of the last layer."""
    from bertgeom.analysis.projections import pca, pca_pareto, silhouette_per_layer, tsne_project, umap_project

    proj: dict[str, float] = {}
    t1 = time.perf_counter()
    for X in cls:
        pca(X, 3)
        pca_pareto(X, min(10, *X.shape))
    proj["pca_pareto_all_layers"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    sil = silhouette_per_layer(cls, labels)
    proj["silhouette_all_layers"] = time.perf_counter() - t1
    if slow:
        for name, fn in (("umap_last_layer", umap_project), ("tsne_last_layer", tsne_project)):
            t1 = time.perf_counter()
            try:
                fn(cls[-1], 2)
                proj[name] = time.perf_counter() - t1
            except ImportError:
                proj[name] = float("nan")
    return proj, sil


def bench_model_pass(n: int = 300, *, quick: bool = False, which: str = "auto", streams: bool = True,
                     batch_size: int = 8, slow_projections: bool = True, tmp_dir: str | None = None) -> dict:
    """Cone index + projections for ``n`` genomes in one batched pass (see module docstring).
    ``which``: see :func:`load_bench_model`; ``tmp_dir``: where a random model is built."""
    import tempfile

    from bertgeom.sets import cone as conesets

    if tmp_dir is None:
        with tempfile.TemporaryDirectory(prefix="bench_cone_") as tmp:
            return bench_model_pass(n, quick=quick, which=which, streams=streams, batch_size=batch_size,
                                    slow_projections=slow_projections, tmp_dir=tmp)
    loaded, model_desc = load_bench_model(which, tmp_dir)
    items = genomes(n)
    timings: dict = {}
    t0 = time.perf_counter()
    with ForwardTimer(loaded.model) as ft:
        res = conesets.cone_profiles_over_set(loaded, items, "content", streams=streams, batch_size=batch_size,
                                              timings=timings)
    t_pass = time.perf_counter() - t0
    N = len(res)
    cls = np.transpose(res.cls, (1, 0, 2)).astype(np.float64)  # [L+1, N, D]
    with conesets.single_threaded():  # small matrices: one BLAS thread (see conesets.single_threaded)
        proj, sil = _projections(cls, res.labels, slow=slow_projections and not quick)
    t_total = t_pass + sum(v for v in proj.values() if np.isfinite(v))
    other = t_pass - ft.seconds - timings.get("profile_s", 0.0)
    return {
        "model": model_desc,
        "layers": loaded.num_layers,
        "heads": loaded.num_heads,
        "genomes": N,
        "errors": int(len(res.error_names)),
        "tokens_per_genome": float(np.median(res.m)) + 2,
        "streams": streams,
        "batch_size": batch_size,
        "seconds": {
            "one_pass": t_pass,
            "forward": ft.seconds,
            "cone_index_streams_vectors": timings.get("profile_s", 0.0),
            "encode_and_other": other,
            **proj,
            "total": t_total,
        },
        "forward_share_of_pass": ft.seconds / t_pass if t_pass > 0 else float("nan"),
        "forward_share_of_total": ft.seconds / t_total if t_total > 0 else float("nan"),
        "ms_per_genome": 1000 * t_pass / max(N, 1),
        "forward_calls": ft.calls,
        "silhouette_last_layer": float(sil[-1]) if len(sil) else float("nan"),
        "accuracy": float(np.mean(res.correct)) if N else float("nan"),
    }


def _model_table(res: dict) -> str:
    s = res["seconds"]
    lines = [
        f"{res['genomes']} genomes ({res['errors']} failed), {res['model']}, {res['layers']} layers x "
        f"{res['heads']} heads, ~{res['tokens_per_genome']:.0f} tokens each, batch {res['batch_size']}, "
        f"streams {'on' if res['streams'] else 'off'}",
        f"{'part':<34}{'seconds':>10}{'share':>9}",
    ]
    for k in ("forward", "cone_index_streams_vectors", "encode_and_other"):
        lines.append(f"  {k:<32}{s[k]:>10.2f}{100 * s[k] / s['one_pass']:>8.1f}%")
    lines.append(f"{'one batched pass':<34}{s['one_pass']:>10.2f}{'100.0%':>9}  ({res['ms_per_genome']:.0f} ms/genome)")
    for k in ("pca_pareto_all_layers", "silhouette_all_layers", "umap_last_layer", "tsne_last_layer"):
        if k in s:
            lines.append(f"{k:<34}{s[k]:>10.2f}")
    lines.append(f"{'total':<34}{s['total']:>10.2f}")
    lines.append(f"forward pass: {100 * res['forward_share_of_pass']:.1f}% of the pass, "
                 f"{100 * res['forward_share_of_total']:.1f}% of the total")
    lines.append(f"silhouette of [CLS], last layer: {res['silhouette_last_layer']:.3f}; accuracy {res['accuracy']:.1%}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=None, help="genomes (model pass: 300) / stack size (synthetic: 300)")
    ap.add_argument("--quick", action="store_true", help="24 genomes, PCA and silhouette only")
    ap.add_argument("--full-size", action="store_true", help="random model with the shipped model's shape")
    ap.add_argument("--tiny", action="store_true", help="tiny random model even when the shipped one exists")
    ap.add_argument("--no-streams", action="store_true", help="cone index of hidden_states only")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--synthetic", action="store_true", help="cone index alone on a synthetic stack")
    ap.add_argument("--layers", type=int, default=7, help="L+1 hidden states per genome")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loop-limit", type=int, default=None)
    ap.add_argument("--normalized", action="store_true")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    if not a.synthetic:
        n = a.n or (24 if a.quick else 300)
        which = "full" if a.full_size else "tiny" if a.tiny else "auto"
        res = bench_model_pass(n, quick=a.quick, which=which, streams=not a.no_streams,
                               batch_size=a.batch_size)
        print(json.dumps(res, indent=2) if a.json else _model_table(res))
        return 0
    hs, masks = synthetic_stack(a.n or 300, a.layers, a.tokens, a.dim)
    res = bench_cone(
        hs, masks, normalized=a.normalized, repeats=a.repeats, loop_limit=a.loop_limit
    )
    print(json.dumps(res, indent=2) if a.json else _table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
