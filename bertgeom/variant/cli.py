"""CLI commands of the case study: ``train``, ``evaluate``, ``classify`` (see ``python -m bertgeom -h``)."""

from __future__ import annotations

from pathlib import Path


def _cmd_train(args) -> int:
    import sys

    from bertgeom.variant.train import TrainConfig, resolve_device, train

    try:
        resolve_device(args.device)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.init_from and not (Path(args.init_from) / "kmer_vocab.json").is_file():
        print(f"error: '{args.init_from}' is not a variant model directory (no kmer_vocab.json).", file=sys.stderr)
        return 2
    cfg = TrainConfig(seed=args.seed, data_dir=args.data, init_from=args.init_from, epochs=args.epochs,
                      synth_per_class=args.synth_per_class, template_copies_per_class=args.copies_per_class,
                      threads=args.threads, max_steps=args.max_steps, device=args.device, precision=args.precision,
                      augment={"off": True} if args.no_augment else {})
    for name in ("batch_size", "lr_encoder", "lr_new", "checkpoint_every"):
        value = getattr(args, name)
        if value:
            setattr(cfg, name, value)
    try:
        train(cfg, Path(args.out), Path(args.work_dir))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _progress_bar(total_hint: int | None = None):
    """A tqdm bar on stderr (tqdm ships with transformers)."""
    from tqdm import tqdm

    return tqdm(total=total_hint, unit="genome", dynamic_ncols=True, leave=True)


def _load(model_id: str | None):
    from bertgeom.models import VARIANT_MODEL_ID, ModelLoadError, load_model

    loaded = load_model(model_id or VARIANT_MODEL_ID)
    if loaded.spec.input_kind != "spike" or not loaded.labels:
        raise ModelLoadError(f"'{loaded.spec.id}' is not a spike classifier; use the variant model.")
    return loaded


def _cmd_classify(args) -> int:
    import csv
    import sys

    from bertgeom.genome.fasta import iter_fasta_file
    from bertgeom.variant.predict import classify_stream

    if not Path(args.input).is_file():
        print(f"error: no file at '{args.input}'.", file=sys.stderr)
        return 2
    loaded = _load(args.model)
    out = open(args.out, "w", newline="") if args.out != "-" else sys.stdout
    writer = None
    n = n_err = 0
    bar = _progress_bar()
    try:
        for pred in classify_stream(loaded, iter_fasta_file(args.input), batch_size=args.batch_size):
            row = pred.row(loaded.labels, loaded.weights_hash)
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(row))
                writer.writeheader()
            writer.writerow(row)
            n += 1
            n_err += bool(pred.error)
            bar.update(1)
    finally:
        bar.close()
        if out is not sys.stdout:
            out.close()
    print(f"classified {n - n_err} of {n} records ({n_err} could not be read or aligned; see their 'error' column)",
          file=sys.stderr)
    return 0


def _cmd_evaluate(args) -> int:
    import json
    import sys

    from bertgeom.variant.predict import evaluate

    for p in (args.fasta, args.labels):
        if not Path(p).is_file():
            print(f"error: no file at '{p}'.", file=sys.stderr)
            return 2
    loaded = _load(args.model)
    bar = _progress_bar()
    result = evaluate(loaded, args.fasta, args.labels, baseline_data=None if args.no_baseline else (args.data or True),
                      batch_size=args.batch_size, progress=lambda i, n: (setattr(bar, "total", n), bar.update(1)))
    bar.close()
    print(result["model"].table())
    print()
    print(result["rules"].table())
    if "baseline" in result:
        print()
        print(result["baseline"].table())
    if result["skipped"]:
        print(f"\nskipped {len(result['skipped'])} record(s): " + "; ".join(f"{n}: {e}" for n, e in result["skipped"][:5]))
    if args.json:
        payload = {k: (v.__dict__ if hasattr(v, "__dict__") else v) for k, v in result.items()}
        Path(args.json).write_text(json.dumps(payload, indent=1))
    return 0


def register(sub) -> None:
    p = sub.add_parser("train", help="train the SARS-CoV-2 variant model from a seed (resumable)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data", default="", help="folder with genomes/open_genomes_dev.* (default: the copy shipped in the package)")
    p.add_argument("--init-from", default="", help="continue from this variant model directory (default: start from MiniLM)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=0, help="examples per step (default 8)")
    p.add_argument("--lr-encoder", type=float, default=0.0, help="encoder learning rate (default 1.5e-4)")
    p.add_argument("--lr-new", type=float, default=0.0, help="k-mer embedding and classifier learning rate (default 3e-3)")
    p.add_argument("--synth-per-class", type=int, default=120)
    p.add_argument("--copies-per-class", type=int, default=100)
    p.add_argument("--no-augment", action="store_true", help="train without the label-preserving augmentation")
    p.add_argument("--device", default="auto", help="auto (a GPU when there is one), cpu, cuda or mps")
    p.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"],
                   help="auto: bf16 autocast where the device supports it")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (default 20)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many optimiser steps (0: all)")
    p.add_argument("--out", default="runs/variant/model",
                   help="model directory to write (the shipped model is never overwritten unless you name its folder)")
    p.add_argument("--work-dir", default="runs/variant", help="checkpoints and prepared data (resume from here)")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("classify", help="classify every genome of a FASTA file (.fasta, .gz, .xz) into a CSV")
    p.add_argument("input", help="FASTA file, optionally gzip- or xz-compressed")
    p.add_argument("--out", default="-", help="CSV to write (default: standard output)")
    p.add_argument("--model", default=None, help="variant model id or directory (default: the shipped one)")
    p.add_argument("--batch-size", type=int, default=16)
    p.set_defaults(func=_cmd_classify)

    p = sub.add_parser("evaluate", help="accuracy, macro-F1, per-class metrics and confusion matrix on labelled genomes")
    p.add_argument("fasta")
    p.add_argument("labels", help="TSV with 'name' and 'label' (or 'class') columns")
    p.add_argument("--model", default=None)
    p.add_argument("--data", default="",
                   help="folder with the open developer set used to regenerate the recipe for the baseline "
                        "(default: the copy shipped in the package)")
    p.add_argument("--no-baseline", action="store_true", help="skip the k-mer logistic-regression baseline")
    p.add_argument("--json", default="", help="also write the reports as JSON")
    p.add_argument("--batch-size", type=int, default=16)
    p.set_defaults(func=_cmd_evaluate)
