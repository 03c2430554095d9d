"""Throughput of ``python -m bertgeom precompute`` with 1 and 2 workers on this machine.

Each run is a fresh results directory over the same N genomes (the shipped labelled genomes,
cycled, written as ``.fasta.xz`` + labels TSV): parse -> align -> cut spike -> QC -> tokenise ->
forward pass -> cone index, per-head features, [CLS] vectors, class-map sums -> Parquet/NumPy.
Wall time includes everything a user waits for (input checksum, model load, worker start-up,
final merge); ``first shard`` says how much of it is start-up.

The model is the trained variant model when it is installed, otherwise a *random* model of the
same shape (6 layers x 12 heads, width 384), which costs the same per genome.

Three configurations (``--configs``): ``full``, the default run (class maps and per-head features,
so an eager fp32 forward that returns every attention map), ``slim`` (``--no-attentions``:
prediction, QC, cone index, [CLS]; SDPA forwards, no maps or features) and ``slim-bf16`` (the same
with ``--precision bf16``: the stored cone index then moves by up to ~0.005, docs/methods.md). In the same run,
``classify`` end to end on the same genomes (its default backend and precision) is the baseline:
each row's rate is also given as a share of classify's (issue 34: >= 0.5). The machine is named
(:func:`bertgeom.runtime.machine_line`); ``--update-readme`` writes the table into docs/speed.md.
``--device`` where the forwards run (``auto``: a GPU when present).

Usage: python bench/bench_precompute.py [--quick] [--n 64] [--workers 1,2] [--engine local|ray|both]
                                        [--configs full,slim] [--device cpu] [--model ID|DIR] [--json out.json]
                                        [--update-readme]
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _inputs(d: Path, n: int) -> tuple[Path, Path]:
    from bertgeom.sars_cov_2.variant.spec import genome_set

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
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.models import REGISTRY

    if arg:
        return arg, arg
    if VARIANT_MODEL_ID in REGISTRY:
        return VARIANT_MODEL_ID, "trained variant model (6 x 12 heads)"
    from bertgeom.sars_cov_2.variant import build_tiny_variant_model

    path = build_tiny_variant_model(d / "shape_model", layers=6, heads=12, hidden=384)
    return str(path), "random model of the shipped shape (6 layers x 12 heads, width 384)"


def markdown(result: dict) -> str:
    """The precompute table: each configuration and worker count beside classify on the same genomes."""
    lines = ["| stored | engine | workers | genomes/s | s/genome | first shard s | vs 1 worker | share of classify's "
             "rate |",
             "|---|---|---|---|---|---|---|---|"]
    what = {"full": "maps + 8 head features + cone + [CLS] (default)", "slim": "cone + [CLS] (--no-attentions)",
            "slim-bf16": "cone + [CLS] in bf16 (--no-attentions --precision bf16)"}
    for r in result["rows"]:
        lines.append(f"| {what.get(r['config'], r['config'])} | {r['engine']} | {r['workers']} | "
                     f"{r['genomes_per_s']:.2f} | {r['s_per_genome']:.2f} | {r['first_shard_s'] or 0:.1f} | "
                     f"{'—' if r['speedup_vs_1'] is None else format(r['speedup_vs_1'], '.2f') + 'x'} | "
                     f"{r['share_of_classify']:.2f} |")
    lines.append(f"| classify end to end ({result['classify_backend']}, same genomes, same run) | — | — | "
                 f"{result['classify_genomes_per_s']:.2f} | {1 / result['classify_genomes_per_s']:.2f} | "
                 "— | — | 1.00 |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 genomes (a smoke measurement)")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--engine", choices=("local", "ray", "both"), default="local")
    ap.add_argument("--shard-size", type=int, default=0, help="default: N / 8 (so 2 workers stay balanced)")
    ap.add_argument("--model", default="")
    ap.add_argument("--no-attentions", action="store_true", help="only the slim configuration (= --configs slim)")
    ap.add_argument("--configs", default="full,slim,slim-bf16",
                    help="full (class maps + per-head features, the default run), slim (--no-attentions), "
                         "slim-bf16 (--no-attentions --precision bf16)")
    ap.add_argument("--update-readme", action="store_true", help="write the table into docs/speed.md")
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
        configs = {"full": PrecomputeConfig(shard_size=shard),
                   "slim": PrecomputeConfig(shard_size=shard, maps="none", features=()),
                   "slim-bf16": PrecomputeConfig(shard_size=shard, maps="none", features=(), precision="bf16")}
        names = ["slim"] if args.no_attentions else [c.strip() for c in args.configs.split(",") if c.strip()]
        engines = ["local", "ray"] if args.engine == "both" else [args.engine]
        rows = []
        for name in names:
            for eng in engines:
                for w in [int(x) for x in args.workers.split(",")]:
                    out = work / f"out_{name}_{eng}_{w}"
                    first = []
                    t0 = time.perf_counter()
                    precompute(fasta, labels, out, config=configs[name], engine=eng, workers=w, loaded=loaded,
                               device=args.device, progress=lambda *a: first.append(time.perf_counter() - t0))
                    wall = time.perf_counter() - t0
                    rows.append({"config": name, "engine": eng, "workers": w, "genomes": n, "wall_s": round(wall, 2),
                                 "genomes_per_s": round(n / wall, 3), "s_per_genome": round(wall / n, 3),
                                 "first_shard_s": round(first[0], 2) if first else None})
        base = {(r["config"], r["engine"]): r["genomes_per_s"] for r in rows if r["workers"] == 1}
        for r in rows:
            key = (r["config"], r["engine"])
            r["speedup_vs_1"] = round(r["genomes_per_s"] / base[key], 2) if key in base else None
        # classify end to end on the same genomes, same run (its default backend, precision and streams)
        from bertgeom.sars_cov_2.genome.fasta import iter_fasta_file
        from bertgeom.sars_cov_2.variant.predict import classify_stream, fast_classifier

        records = list(iter_fasta_file(str(fasta)))
        fc = fast_classifier(loaded, args.device if args.device != "auto" else "cpu")
        list(classify_stream(loaded, records[:4], device=args.device))  # warm-up
        t0 = time.perf_counter()
        list(classify_stream(loaded, records, device=args.device))
        classify_rate = n / (time.perf_counter() - t0)
        for r in rows:
            r["share_of_classify"] = round(r["genomes_per_s"] / classify_rate, 3)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    from bertgeom.runtime import machine_line

    result = {"rows": rows, "model": model_desc, "shard_size": shard, "device": args.device,
              "classify_genomes_per_s": round(classify_rate, 3), "classify_backend": fc.label,
              "machine": machine_line(), "date": time.strftime("%Y-%m-%d")}
    print(f"precompute, {n} genomes, shards of {shard}, {model_desc}, device {args.device}")
    print(f"machine: {result['machine']}")
    table = markdown(result)
    print(table)
    if args.update_readme:
        from readme_blocks import ROOT, replace_block

        replace_block("precompute-speed", table + f"\n\n_{time.strftime('%Y-%m-%d')}; machine: {result['machine']}; "
                      f"`python bench/bench_precompute.py --n {n} --update-readme`_", "## Precompute",
                      readme=ROOT / "docs" / "speed.md")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
