"""CLI command ``precompute`` (see ``python -m bertgeom precompute -h``)."""

from __future__ import annotations

import argparse
from bertgeom.tables import counted, word_for


def _precision(args) -> str:
    """``--precision`` resolved by the policy of :mod:`bertgeom.forward` for stored analyses."""
    from bertgeom.forward import resolve_precision

    device = "cuda" if getattr(args, "device", "cpu") == "cuda" else "cpu"
    return resolve_precision(getattr(args, "precision", "auto"), device, "analysis")

def _cmd_precompute(args) -> int:
    """Exit status: 0 done (or stopped by --max-shards), 2 bad input or parameters, 3 unusable model,
    4 results directory unusable (not writable, or another run holds it), 130 interrupted. Every
    error is one sentence on stderr, never a traceback."""
    import sys

    from bertgeom.precompute.core import PrecomputeConfig, PrecomputeError
    from bertgeom.precompute.run import precompute

    bar = None
    done = [0]
    try:
        features = tuple(f.strip() for f in args.features.split(",") if f.strip())
        maps = args.maps
        if args.no_attentions:
            if args.maps not in (None, "none") or args.features_given:
                raise PrecomputeError("--no-attentions stores no class maps and no per-head features; "
                                      "drop --maps/--features or --no-attentions.")
            maps, features = "none", ()
        cfg = PrecomputeConfig(
            shard_size=args.shard_size, batch_size=args.batch_size, maps=maps or "layer-mean",
            features=features, cls_dims=args.cls_dims, cls_reduce=args.cls_reduce, pca_pilot=args.pca_pilot,
            seed=args.seed, threads=args.threads, precision=_precision(args),
        )
        if not args.quiet:
            from tqdm import tqdm

            bar = tqdm(unit="record", dynamic_ncols=True, file=sys.stderr)

        def progress(n_done, n_shards, records):
            done[0] = n_done
            if bar is not None:
                bar.set_postfix_str(f"shard {n_done}/{n_shards}")
                bar.update(records - bar.n)

        def on_wait(holder):
            print(f"waiting: another precompute run (pid {holder.get('pid', '?')} on host "
                  f"{holder.get('host', '?')}) is writing '{args.out}'...", file=sys.stderr)

        engine_kwargs = {}
        if args.engine == "ray" and args.no_ship_code:
            engine_kwargs["ship_code"] = False
        if args.ray_split_prepare is not None:
            if args.engine != "ray":
                raise PrecomputeError("--ray-split-prepare is a Ray engine switch: add --engine ray or drop it.")
            engine_kwargs["split_prepare"] = args.ray_split_prepare
        summary = precompute(
            args.input, args.labels, args.out, model=args.model, config=cfg, engine=args.engine,
            workers=_workers(args), address=args.address, max_shards=args.max_shards, progress=progress,
            engine_kwargs=engine_kwargs, device=args.device, wait=args.wait, on_wait=on_wait,
        )
    except PrecomputeError as exc:
        _close(bar)
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        _close(bar)
        print(f"interrupted: {counted(done[0], 'shard')} {word_for(done[0], 'is', 'are')} done and kept in "
              f"'{args.out}'; rerun the same command to resume.", file=sys.stderr)
        return 130
    except OSError as exc:
        _close(bar)
        where = f" ('{exc.filename}')" if exc.filename else ""
        print(f"error: the results could not be written{where}: {exc.strerror or exc}.", file=sys.stderr)
        return 4
    _close(bar)
    print(summary.line(), file=sys.stderr)
    return 0


def _workers(args) -> int | None:
    """``--workers``, or for the local engine on the CPU one process per ``--threads`` cores (a
    worker runs one shard with ``--threads`` threads: one worker left every other core idle, half the
    machine on 2 cores). Ray decides its own default; a GPU run keeps one process."""
    if args.workers is not None or args.engine != "local" or getattr(args, "device", "cpu") != "cpu":
        return args.workers
    from bertgeom.runtime import usable_cores

    return max(1, usable_cores() // max(1, args.threads))


def _close(bar) -> None:
    if bar is not None:
        bar.close()


class _Features(argparse.Action):
    """Stores --features and remembers that it was given (it conflicts with --no-attentions)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.features = values
        namespace.features_given = True


def _positive(v: str) -> int:
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def register(sub) -> None:
    from bertgeom.precompute.core import DEFAULT_FEATURES, MAP_MODES

    p = sub.add_parser(
        "precompute",
        help="precompute per-record results and class-mean maps of a labelled set file (local or Ray, resumable)",
        description="Per record: prediction, the input kind's own columns (genomes: QC), cone index per layer, "
                    "[CLS] vectors, per-head features "
                    "(Parquet); per class: class-mean attention maps (NumPy); a manifest. Rerun the same "
                    "command to resume an interrupted run.",
    )
    p.add_argument("input", help="the records, in the model's input kind's file format (genomes: FASTA, .gz, .xz)")
    p.add_argument("labels", help="TSV with 'name' and 'label' (or 'class') columns")
    p.add_argument("--out", required=True, help="results directory (created; rerun with the same one to resume)")
    p.add_argument("--model", default=None, metavar="ID|DIR",
                   help="classifier id or directory; its input kind must support precompute (default: the plug-in's "
                        "model, the shipped variant BERT)")
    p.add_argument("--engine", choices=("local", "ray"), default="local")
    p.add_argument("--workers", type=_positive, default=None,
                   help="processes (local, default: one per --threads cores on the CPU, 1 on a GPU) or model actors "
                        "(ray, default: cluster CPUs / threads)")
    p.add_argument("--address", default=None,
                   help="Ray cluster to join: 'auto' from a cluster node (or 'ray://head:10001', Ray "
                        "Client); default: start a local Ray instance")
    p.add_argument("--no-ship-code", action="store_true",
                   help="ray: the cluster has bertgeom installed; do not upload this package")
    p.add_argument("--ray-split-prepare", action=argparse.BooleanOptionalAction, default=None,
                   help="ray: parse/align/tokenise as 1-CPU Ray tasks that feed the model actors through the object "
                        "store (on a GPU cluster: CPU tasks align, GPU actors run the forwards). Default: on when the "
                        "forwards run on GPUs; --ray-split-prepare forces it (also on CPUs), --no-ray-split-prepare "
                        "keeps one actor doing both")
    p.add_argument("--shard-size", type=_positive, default=256, help="records per shard (the unit of resume)")
    p.add_argument("--batch-size", type=_positive, default=4, help="records per forward pass")
    p.add_argument("--threads", type=_positive, default=1, help="torch/BLAS threads per worker")
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"),
                   help="where the forward passes run: cpu (default, bit-identical across engines), cuda, or "
                        "auto (a GPU when present; with Ray, when the cluster has GPUs: actors ask for num_gpus)")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                   help="the forward passes' precision, written to the manifest: auto = fp32 (the stored maps, "
                        "features and cone index are read as numbers; see docs/methods.md, Numerical precision); "
                        "bf16 when asked")
    p.add_argument("--no-attentions", action="store_true",
                   help="keep only what needs no attention weights (prediction, QC, cone index, [CLS]): no class "
                        "maps, no per-head features; the forward passes use SDPA and copy no attention out")
    p.add_argument("--wait", action="store_true",
                   help="if another run is writing --out, wait for it to finish instead of exiting with status 4")
    p.add_argument("--maps", choices=MAP_MODES, default=None,
                   help="class-mean maps: layer-mean [L,T,T] (default, ~4.4 MB/class for 6 layers), "
                        "heads [L,H,T,T] (~52 MB/class for 72 heads), none")
    p.set_defaults(features_given=False)
    p.add_argument("--features", default=",".join(DEFAULT_FEATURES), action=_Features,
                   help="per-head features stored as columns (comma-separated names of bertgeom.analysis.heads)")
    p.add_argument("--cls-dims", type=int, default=0, help="reduce [CLS] vectors to K dims (0 = keep all)")
    p.add_argument("--cls-reduce", choices=("pca", "random"), default="pca",
                   help="pca: fitted on a pilot sample evenly spaced over the input; random: Gaussian projection")
    p.add_argument("--pca-pilot", type=int, default=256, help="records of the PCA pilot sample")
    p.add_argument("--seed", type=int, default=0, help="seed of the random projection")
    p.add_argument("--max-shards", type=_positive, default=None,
                   help="compute at most N new shards, then stop (rerun to continue)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_precompute)
