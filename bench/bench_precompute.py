"""Throughput of ``python -m bertgeom precompute`` with 1 and 2 workers on this machine.

Each run is a fresh results directory over the same N genomes (the shipped labelled genomes,
cycled, written as ``.fasta.xz`` + labels TSV): parse -> align -> cut spike -> QC -> tokenise ->
forward pass -> cone index, per-head features, [CLS] vectors, class-map sums -> Parquet/NumPy.
Wall time includes everything a user waits for (input checksum, model load, worker start-up,
final merge); ``first shard`` says how much of it is start-up.

The model is the trained variant model when it is installed, otherwise a *random* model of the
same shape (6 layers x 12 heads, width 384), which costs the same per genome.

``--no-attentions`` measures the slim run (prediction, QC, cone index, [CLS]; SDPA forwards, no
class maps or per-head features); ``--device`` where the forwards run (``auto``: a GPU when present).

Usage: python bench/bench_precompute.py [--quick] [--n 64] [--workers 1,2] [--engine local|ray|both]
                                        [--no-attentions] [--device cpu] [--model ID|DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import lzma
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _inputs(d: Path, n: int) -> tuple[Path, Path]:
    from bertgeom.variant.spec import genome_set

    base = genome_set()
    fasta, labels = d / "genomes.fasta.xz", d / "labels.tsv"
    rows = []
    with lzma.open(fasta, "wt") as fh:
        for i in range(n):
            it = base[i % len(base)]
            name = f"{it.name}#{i}"
            seq = it.text.split("\n", 1)[1]
            fh.write(f">{name}\n{seq}\n")
            rows.append(f"{name}\t{it.label}")
    labels.write_text("name\tclass\n" + "\n".join(rows) + "\n")
    return fasta, labels


def _model(arg: str, d: Path) -> tuple[str, str]:
    from bertgeom.variant import VARIANT_MODEL_ID
    from bertgeom.models import REGISTRY

    if arg:
        return arg, arg
    if VARIANT_MODEL_ID in REGISTRY:
        return VARIANT_MODEL_ID, "trained variant model (6 x 12 heads)"
    from bertgeom.variant import build_tiny_variant_model

    path = build_tiny_variant_model(d / "shape_model", layers=6, heads=12, hidden=384)
    return str(path), "random model of the shipped shape (6 layers x 12 heads, width 384)"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 genomes (a smoke measurement)")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--engine", choices=("local", "ray", "both"), default="local")
    ap.add_argument("--shard-size", type=int, default=0, help="default: N / 8 (so 2 workers stay balanced)")
    ap.add_argument("--model", default="")
    ap.add_argument("--no-attentions", action="store_true", help="no class maps or per-head features (SDPA)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    n = 16 if args.quick else args.n
    shard = args.shard_size or max(1, n // 8)

    from bertgeom.models import load_model
    from bertgeom.precompute import PrecomputeConfig, precompute

    work = Path(tempfile.mkdtemp(prefix="bench_precompute_"))
    try:
        fasta, labels = _inputs(work, n)
        model_id, model_desc = _model(args.model, work)
        loaded = load_model(model_id)
        cfg = PrecomputeConfig(shard_size=shard, **(dict(maps="none", features=()) if args.no_attentions else {}))
        engines = ["local", "ray"] if args.engine == "both" else [args.engine]
        rows = []
        for eng in engines:
            for w in [int(x) for x in args.workers.split(",")]:
                out = work / f"out_{eng}_{w}"
                first = []
                t0 = time.perf_counter()
                precompute(fasta, labels, out, config=cfg, engine=eng, workers=w, loaded=loaded, device=args.device,
                           progress=lambda *a: first.append(time.perf_counter() - t0))
                wall = time.perf_counter() - t0
                rows.append({"engine": eng, "workers": w, "genomes": n, "wall_s": round(wall, 2),
                             "genomes_per_s": round(n / wall, 3), "s_per_genome": round(wall / n, 3),
                             "first_shard_s": round(first[0], 2) if first else None})
        base = {r["engine"]: r["genomes_per_s"] for r in rows if r["workers"] == 1}
        for r in rows:
            r["speedup_vs_1"] = round(r["genomes_per_s"] / base[r["engine"]], 2) if r["engine"] in base else None
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result = {"rows": rows, "model": model_desc, "shard_size": shard, "no_attentions": args.no_attentions,
              "device": args.device,
              "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}",
              "date": time.strftime("%Y-%m-%d")}
    slim = ", --no-attentions" if args.no_attentions else ""
    print(f"precompute, {n} genomes, shards of {shard}, {model_desc}{slim}, device {args.device}; {result['machine']}")
    print(f"{'engine':7s} {'workers':>7s} {'wall s':>8s} {'genomes/s':>10s} {'s/genome':>9s} {'1st shard s':>12s} {'speedup':>8s}")
    for r in rows:
        print(f"{r['engine']:7s} {r['workers']:7d} {r['wall_s']:8.2f} {r['genomes_per_s']:10.3f} {r['s_per_genome']:9.3f} "
              f"{r['first_shard_s'] or 0:12.2f} {r['speedup_vs_1'] or 0:8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
