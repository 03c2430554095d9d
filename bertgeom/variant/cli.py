"""CLI commands of the case study: ``train``, ``evaluate``, ``classify`` (see ``python -m bertgeom -h``)."""

from __future__ import annotations

from pathlib import Path


def _cmd_train(args) -> int:
    from bertgeom.variant import VARIANT_DIR
    from bertgeom.variant.train import TrainConfig, train

    cfg = TrainConfig(seed=args.seed, shared_data=args.data, epochs=args.epochs,
                      synth_per_class=args.synth_per_class, template_copies_per_class=args.copies_per_class,
                      threads=args.threads)
    out = Path(args.out) if args.out else VARIANT_DIR
    work = Path(args.work_dir)
    train(cfg, out, work)
    return 0


def register(sub) -> None:
    from bertgeom.variant.train import DEFAULT_SHARED

    p = sub.add_parser("train", help="train the SARS-CoV-2 variant model from a seed (resumable)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data", default=str(DEFAULT_SHARED), help="folder with genomes/ (the open developer set)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--synth-per-class", type=int, default=120)
    p.add_argument("--copies-per-class", type=int, default=100)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="", help="model directory to write (default: the shipped model's)")
    p.add_argument("--work-dir", default="runs/variant", help="checkpoints and prepared data (resume from here)")
    p.set_defaults(func=_cmd_train)
