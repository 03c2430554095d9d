"""CLI commands of the case study: ``train``, ``evaluate``, ``classify``, ``tour`` (see ``python -m bertgeom -h``)."""

from __future__ import annotations

import json
from pathlib import Path
from bertgeom.tables import counted, word_for


def _augment_overrides(items: list[str]) -> dict:
    """``["foreign_prob=0.8", ...]`` -> ``{"foreign_prob": 0.8}`` (checked against AugmentConfig's fields)."""
    from dataclasses import fields

    from bertgeom.sars_cov_2.genome.augment import AugmentConfig

    known = {f.name: f.type for f in fields(AugmentConfig)}
    out = {}
    for item in items or []:
        key, _, value = item.partition("=")
        if key not in known or not value:
            raise CliError(f"--augment {item!r}: use NAME=VALUE with NAME one of {', '.join(sorted(known))}.",
                           EXIT_INPUT)
        try:
            out[key] = json.loads(value)
        except ValueError:
            raise CliError(f"--augment {item!r}: the value must be a number or a JSON list.", EXIT_INPUT) from None
    return out


def _cmd_train(args) -> int:
    import sys

    from bertgeom.sars_cov_2.variant.train import (
        TrainConfig,
        TrainingInterrupted,
        resolve_device,
        train,
    )

    try:
        resolve_device(args.device)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        _augment_overrides(args.augment)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    if args.init_from and not (Path(args.init_from) / "kmer_vocab.json").is_file():
        print(f"error: '{args.init_from}' is not a variant model directory (no kmer_vocab.json).", file=sys.stderr)
        return 2
    cfg = TrainConfig(seed=args.seed, data_dir=args.data, init_from=args.init_from, epochs=args.epochs,
                      synth_per_class=args.synth_per_class, template_copies_per_class=args.copies_per_class,
                      max_real_per_class=args.max_real_per_class,
                      threads=args.threads, max_steps=args.max_steps, device=args.device, precision=args.precision,
                      augment={"off": True} if args.no_augment else _augment_overrides(args.augment))
    for name in ("batch_size", "lr_encoder", "lr_new", "checkpoint_every"):
        value = getattr(args, name)
        if value:
            setattr(cfg, name, value)
    try:
        train(cfg, Path(args.out), Path(args.work_dir))
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except TrainingInterrupted as exc:
        print(f"Training {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"Training interrupted; the last checkpoint in '{args.work_dir}' (if any) is kept, rerun the same "
              "command to resume.", file=sys.stderr)
        return 130
    return 0


def _progress_bar(total_hint: int | None = None):
    """A tqdm bar on stderr (tqdm ships with transformers)."""
    from tqdm import tqdm

    return tqdm(total=total_hint, unit="genome", dynamic_ncols=True, leave=True)


#: Exit codes of the case-study commands: bad input, bad model, output not writable, interrupted.
EXIT_INPUT, EXIT_MODEL, EXIT_OUTPUT, EXIT_INTERRUPTED = 2, 3, 4, 130


class CliError(Exception):
    """A user error: ``str(err)`` is one sentence; ``code`` the exit status."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _load(model_id: str | None):
    """The variant model, or :class:`CliError` (exit 3) with one sentence for any broken directory."""
    from bertgeom.models import ModelLoadError, load_model
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    try:
        loaded = load_model(model_id or VARIANT_MODEL_ID)
    except ModelLoadError as exc:
        raise CliError(str(exc), EXIT_MODEL) from None
    except Exception as exc:  # a damaged config.json, vocabulary or weights file
        raise CliError(f"The variant model '{model_id or VARIANT_MODEL_ID}' could not be loaded "
                       f"({type(exc).__name__}: {str(exc)[:200]}).", EXIT_MODEL) from None
    if loaded.spec.input_kind != "spike" or not loaded.labels:
        raise CliError(f"'{loaded.spec.id}' is not a spike classifier; use the variant model.", EXIT_MODEL)
    return loaded


def _device(name: str) -> str:
    from bertgeom.sars_cov_2.variant.train import resolve_device

    try:
        return resolve_device(name)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None


from bertgeom.safety import csv_cell as csv_safe  # the one CSV cell rule (kept under its old name)
from bertgeom.backends import BACKENDS  # noqa: E402 - no heavy import: names only

_STREAMS_HELP = ("threads that each prepare and classify whole batches, one torch thread each on the CPU "
                 "(auto: one per core, at most 8; 1 on a GPU or with --workers); the calls do not change")


def _streams_arg(text: str):
    """``--streams``: ``auto`` or a positive integer (argparse reports anything else in one line)."""
    import argparse

    t = text.strip().lower()
    if t == "auto":
        return t
    if t.isascii() and t.isdigit() and int(t) > 0:
        return int(t)
    raise argparse.ArgumentTypeError(f"'{text}' is neither auto nor a positive whole number")


def _check_streams(args) -> None:
    """``--streams N`` (N > 1) and ``--workers M`` (M > 1) do not combine: said before any work."""
    if args.workers > 1 and args.streams != "auto" and args.streams > 1:
        raise CliError("use --workers (preparation processes) or --streams (forward threads), not both.", EXIT_INPUT)


def _output_target(out: str) -> Path | None:
    """The ``--out`` path (``None`` for standard output), checked before any work starts; rows are
    written through :class:`bertgeom.safety.AtomicFile`, so OUT is replaced only when the run succeeds."""
    if out == "-":
        return None
    final = Path(out)
    if final.is_dir():
        raise CliError(f"--out '{out}' is a folder; give a file name such as '{Path(out) / 'predictions.csv'}'.",
                       EXIT_OUTPUT)
    if not final.parent.is_dir():
        raise CliError(f"The folder of --out '{out}' does not exist.", EXIT_OUTPUT)
    return final


def _lock_output(final: Path):
    """The lock of OUT (``OUT.lock``, :func:`bertgeom.safety.output_lock`), held for the run's life:
    a second run on the same OUT stops at once, naming the first."""
    import errno

    from bertgeom.safety import LockBusyError, output_lock

    lock = output_lock(final)
    try:
        return lock.acquire()
    except LockBusyError as exc:
        raise CliError(f"'{final}' is being written by PID {exc.holder.get('pid', '?')} (another run); let it "
                       "finish or give another --out.", EXIT_OUTPUT) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CliError(f"The lock file '{lock.path}' of --out is a symbolic link (never followed); remove it "
                           "and rerun.", EXIT_OUTPUT) from None
        raise CliError(f"--out '{final}' cannot be written ({exc.strerror or exc}).", EXIT_OUTPUT) from None


#: A ``classify`` input at least this large (bytes on disk, any compression: ~100 plain genomes) measures
#: which backend classifies fastest here when nothing was measured yet: ~30 s once per machine and
#: weights, against a run of minutes.
MEASURE_FROM_BYTES = 3_000_000


def _measure_backends_for_a_long_run(loaded, device: str, args) -> None:
    """Before a long ``classify`` with ``--backend auto``: time the backends on this machine once
    (:func:`~bertgeom.sars_cov_2.variant.predict.measure_backends`) unless that was done here before."""
    import sys

    from bertgeom.sars_cov_2.variant.predict import measure_backends, measured_backend_needed

    try:
        if Path(args.input).stat().st_size < MEASURE_FROM_BYTES:
            return
        if not measured_backend_needed(loaded, device, args.precision, args.backend):
            return
        measure_backends(loaded, device, args.precision, log=lambda m: print(m, file=sys.stderr, flush=True))
    except Exception as exc:  # noqa: BLE001 - the rule from the CPU's report still chooses
        print(f"note: the backends could not be timed here ({exc}); --backend auto follows the CPU's report.",
              file=sys.stderr)


def _cmd_choose_backend(args) -> int:
    """Time every way to run the classifier here, print the table and keep the fastest for ``auto``."""
    import sys

    from bertgeom.backends import stored_choice
    from bertgeom.sars_cov_2.variant.predict import measure_backends

    try:
        device = _device(args.device)
        loaded = _load(args.model)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    if device != "cpu":
        print(f"On {device} the classifier runs on torch (nothing to measure).")
        return 0
    choice = None if args.again else stored_choice(loaded.weights_hash, device, args.precision)
    if choice is None:
        choice = measure_backends(loaded, device, args.precision, n=args.n,
                                  log=lambda m: print(m, file=sys.stderr, flush=True))
    else:
        print(f"measured before ({choice.measured_at}); --again measures anew", file=sys.stderr)
    print(f"machine: {choice.machine}")
    print(choice.table_markdown())
    print(f"--backend auto --precision {args.precision} runs: {choice.backend} {choice.precision}")
    return 0


def _cmd_classify(args) -> int:
    import sys

    from bertgeom.safety import AtomicFile
    from bertgeom.sars_cov_2.variant.predict import fast_classifier

    lock = None
    try:
        if not Path(args.input).is_file():
            raise CliError(f"No file at '{args.input}'.", EXIT_INPUT)
        _check_streams(args)
        final = _output_target(args.out)
        extra = _extra_outputs(args, final)
        _dataset(args)
        device = _device(args.device)
        loaded = _load(args.model)
        _measure_backends_for_a_long_run(loaded, device, args)
        try:
            fc = fast_classifier(loaded, device, args.precision, args.backend)
        except ValueError as exc:  # BackendError: not installed, not for this device, bf16 on ONNX Runtime
            raise CliError(str(exc), EXIT_INPUT) from None
        precision, backend = fc.precision, fc.backend
        lock = _lock_output(final) if final else None
        try:
            out = AtomicFile(final, "w", newline="") if final else sys.stdout
        except OSError as exc:
            raise CliError(f"--out '{args.out}' cannot be written ({exc.strerror}).", EXIT_OUTPUT) from None
        try:
            side = _SideOutputs(extra)
        except OSError as exc:
            _discard_outputs(out)
            raise CliError(f"'{exc.filename or 'an output'}' cannot be written ({exc.strerror or exc}).",
                           EXIT_OUTPUT) from None
    except CliError as exc:
        if lock is not None:
            lock.release()
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    try:
        return _classify_into(args, loaded, device, precision, backend, final, out, side)
    except BaseException:
        # a failure none of the run's own answers covers (a bug, a data file that cannot be read) goes up
        # as a traceback, and leaves no half-written output behind: the rows kept on purpose (an
        # interrupted run, damaged input) are kept only where _classify_into says so, naming the file
        _discard_outputs(out, side)
        raise
    finally:
        if lock is not None:
            lock.release()


def _discard_outputs(out, side: _SideOutputs | None = None) -> None:
    """Remove the temporary files of a run that failed before it could say what it kept."""
    import sys

    if out is not sys.stdout and not out.committed:
        out.discard()
    if side is not None:
        side.discard()


def _extra_outputs(args, final: Path | None) -> dict[str, Path]:
    """``--output-tsv`` / ``--output-ndjson``, checked like ``--out`` before any work starts (and never
    the same file as another output)."""
    out: dict[str, Path] = {}
    for flag, value in (("--output-tsv", getattr(args, "output_tsv", None)),
                        ("--output-ndjson", getattr(args, "output_ndjson", None))):
        if not value:
            continue
        path = _output_target(value)
        if path is None:
            raise CliError(f"{flag} needs a file name (standard output is --out's).", EXIT_OUTPUT)
        if path == final or path in out.values():
            raise CliError(f"{flag} '{value}' is the same file as another output.", EXIT_OUTPUT)
        out[flag] = path
    return out


def _dataset(args) -> None:
    """``--dataset``: read and compile it now, so a bad dataset is one sentence before any work."""
    from bertgeom.sars_cov_2.genome.tree import DatasetError, load_reference_tree

    try:
        tree = load_reference_tree(args.dataset)
    except DatasetError as exc:
        raise CliError(f"--dataset: {exc}", EXIT_INPUT) from None
    args.dataset_name = tree.describe()


def _classify_into(args, loaded, device, precision, backend, final, out, side: _SideOutputs | None = None) -> int:
    """The rows of ``classify`` into ``out`` (an :class:`~bertgeom.safety.AtomicFile`, or stdout).

    Rows read from damaged compressed data (a member whose check failed) are cut off the partial
    file; a file with no nucleotide record exits 2 and keeps OUT, as an empty one does."""
    import csv
    import sys

    from bertgeom.sars_cov_2.genome.fasta import SequenceRecord, iter_fasta_file
    from bertgeom.safety import NameDeduper
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    partial = getattr(out, "partial", None)
    writer = None
    n = n_err = n_seq = n_gated = 0
    row_ends: list[int] = []  # where the header and each row end in the partial file
    last_row: dict = {}
    bar = _progress_bar()
    status = 0
    stream_errors: list[str] = []
    first_error: list[str] = []
    unverified = 0
    notices: list[str] = []
    names = NameDeduper()
    side = side if side is not None else _SideOutputs({})

    def records():
        nonlocal n_seq, unverified
        for rec in iter_fasta_file(args.input, on_notice=notices.append):
            if getattr(rec, "stream_error", False):
                stream_errors.append(rec.message)
                unverified = rec.unverified
            elif isinstance(rec, SequenceRecord) or getattr(rec, "too_long", False):  # a sequence, if too long
                n_seq += 1
            elif not first_error:
                first_error.append(rec.message)
            yield rec

    try:
        for pred in classify_stream(loaded, records(), batch_size=args.batch_size, workers=args.workers,
                                    device=device, precision=precision, streams=args.streams, backend=backend,
                                    dataset=getattr(args, "dataset", None), nextclade=bool(side.files)):
            row = names.row(pred.row(loaded.labels, loaded.weights_hash, precision, backend))
            side.write(pred, row)
            row = {k: csv_safe(v) for k, v in row.items()}
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=list(row))
                writer.writeheader()
                if partial is not None:
                    out.flush()
                    row_ends.append(out.tell())
            writer.writerow(row)
            last_row = row
            out.flush()
            if partial is not None:
                row_ends.append(out.tell())
            n += 1
            n_err += bool(pred.error)
            n_gated += bool(pred.gate) and pred.predicted is None
            bar.update(1)
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
    except OSError as exc:
        print(f"error: writing the results failed ({exc.strerror or exc}).", file=sys.stderr)
        status = EXIT_OUTPUT
    finally:
        bar.close()
    if status == 0 and stream_errors:
        status = EXIT_INPUT
    if status == 0 and n == 0:
        status = EXIT_INPUT
        stream_errors.append("The file holds no record (no FASTA header and no sequence).")
    if status == 0 and n_seq == 0:
        status = EXIT_INPUT
        why = f" ({first_error[0].rstrip('.')})" if first_error else ""
        stream_errors.append(f"No record of '{args.input}' is a nucleotide sequence{why}.")
    kept = n
    if status == EXIT_INPUT and unverified and partial is not None and n > unverified:
        kept = n - unverified  # the rows read from damaged data go; the error row (the last) stays
    try:
        side.finish(status == 0)
    except OSError as exc:
        print(f"error: {exc.filename or 'an output'} could not be written ({exc.strerror or exc}).", file=sys.stderr)
        status = status or EXIT_OUTPUT
    if out is not sys.stdout:
        try:
            if status == 0:
                out.commit()
            elif kept and writer is not None:
                if kept < n:
                    out.seek(row_ends[kept - 1])
                    out.truncate()
                    writer.writerow(last_row)
                out.close()
            else:
                out.discard()
        except OSError as exc:
            print(f"error: '{final}' could not be written ({exc.strerror or exc}).", file=sys.stderr)
            return EXIT_OUTPUT
    where = f" to '{final}'" if final else ""
    kept_note = f"; the {kept} rows written so far are in '{partial}'" if partial and kept else ""
    if kept < n:
        kept_note = f"; the {kept - 1} verified rows and the error's row are in '{partial}'"
    left = f"; '{final}' was left as it was" if final else ""
    if status == EXIT_INTERRUPTED:
        print(f"interrupted after {n} records{kept_note}{left}.", file=sys.stderr)
        return status
    if status == EXIT_INPUT:
        print(f"error: {stream_errors[0].rstrip('.')}{kept_note}{left}.", file=sys.stderr)
        return status
    if status:
        return status
    for note in notices + ([names.notice()] if names.renamed else []):
        print(f"note: {note}", file=sys.stderr)
    if n_gated:  # the gate (bertgeom.sars_cov_2.genome.gate): outside the model's world, no call
        print(f"note: {counted(n_gated, 'record')} {word_for(n_gated, 'gets', 'get')} no call from the variant model: "
              "not SARS-CoV-2, too divergent, or a "
              "spike it cannot read (their 'gate' and 'notes' columns say why).", file=sys.stderr)
    print(f"classified {n - n_err - n_gated} of {n} records{where} ({n_err} could not be read or aligned; see their "
          "'error' column)", file=sys.stderr)
    print(f"placed on {getattr(args, 'dataset_name', 'the shipped Nextclade dataset')}"
          + "".join(f"; {flag[2:]} '{path}'" for flag, path in side.files.items()), file=sys.stderr)
    return 0


class _SideOutputs:
    """Nextclade's TSV and NDJSON beside the CSV: one row per record as it is classified, written
    through atomic files that appear only when the whole run succeeds."""

    def __init__(self, files: dict):
        from bertgeom.safety import AtomicFile

        self.files = dict(files)
        self.tsv = self.ndjson = None
        self.tsv = AtomicFile(files["--output-tsv"], "w", newline="") if "--output-tsv" in files else None
        try:
            self.ndjson = AtomicFile(files["--output-ndjson"], "w") if "--output-ndjson" in files else None
        except BaseException:
            self.discard()
            raise
        self.writer = None

    def discard(self) -> None:
        """Remove the temporary files that were not committed (a run that failed)."""
        for f in (self.tsv, self.ndjson):
            if f is not None and not f.committed:
                f.discard()

    def write(self, pred, csv_row: dict) -> None:
        """One record's row, from its prediction's Nextclade columns and the CSV row's call."""
        import csv

        from bertgeom.sars_cov_2.genome.nextclade_output import TSV_COLUMNS, ndjson_record

        if not self.files:
            return
        row = dict.fromkeys(TSV_COLUMNS, "")
        row.update(pred.nextclade or {"errors": pred.error})
        row["seqName"] = csv_row["name"]
        row["variant"], row["variant_confidence"] = csv_row["predicted"], csv_row["confidence"]
        row["variant_notes"], row["variant_model"] = csv_row.get("notes", ""), csv_row.get("model_version", "")
        if self.tsv is not None:
            if self.writer is None:
                self.writer = csv.DictWriter(self.tsv, fieldnames=list(TSV_COLUMNS), delimiter="\t")
                self.writer.writeheader()
            self.writer.writerow({k: csv_safe(v) for k, v in row.items()})
        if self.ndjson is not None:
            self.ndjson.write(ndjson_record(row) + "\n")

    def finish(self, ok: bool) -> None:
        for f in (self.tsv, self.ndjson):
            if f is None:
                continue
            if ok:
                f.commit()
            else:
                f.discard()


def _cmd_evaluate(args) -> int:
    import json
    import sys

    from bertgeom.sars_cov_2.variant.predict import evaluate

    if args.held_out:
        if args.fasta or args.labels:
            print("error: give either FASTA and LABELS or --held-out, not both.", file=sys.stderr)
            return EXIT_INPUT
    elif not (args.fasta and args.labels):
        print("error: give a FASTA file and its labels TSV, or --held-out for the shipped held-out genomes.",
              file=sys.stderr)
        return EXIT_INPUT
    for p in ([] if args.held_out else [args.fasta, args.labels]):
        if not Path(p).is_file():
            print(f"error: no file at '{p}'.", file=sys.stderr)
            return EXIT_INPUT
    try:
        _check_streams(args)
        device = _device(args.device)
        loaded = _load(args.model)
        try:
            from bertgeom.sars_cov_2.variant.predict import fast_classifier

            fast_classifier(loaded, device, args.precision, args.backend)
        except ValueError as exc:  # BackendError: said before any work
            raise CliError(str(exc), EXIT_INPUT) from None
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    bar = _progress_bar()
    try:
        result = evaluate(loaded, None if args.held_out else args.fasta, args.labels,
                          baseline_data=None if args.no_baseline else (args.data or True),
                          batch_size=args.batch_size, progress=lambda i, n: (setattr(bar, "total", n), bar.update(1)),
                          workers=args.workers, device=device, precision=args.precision, streams=args.streams,
                          backend=args.backend)
    except ValueError as exc:  # a truncated, damaged or undecodable input: no report, --json left as it was
        bar.close()
        left = f"; '{args.json}' was left as it was" if args.json else ""
        print(f"error: {str(exc).rstrip('.')}; nothing was evaluated{left}.", file=sys.stderr)
        return EXIT_INPUT
    bar.close()
    print(f"forward passes in {result['precision']}")
    print(result["model"].table())
    print()
    print(result["rules"].table())
    if "baseline" in result:
        print()
        print(result["baseline"].table())
    if result["skipped"]:
        print(f"\nskipped {counted(len(result['skipped']), 'record')}: " + "; ".join(f"{n}: {e}" for n,
                                                                                     e in result["skipped"][:5]))
    if args.json:
        payload = {k: (v.__dict__ if hasattr(v, "__dict__") else v) for k, v in result.items()}
        from bertgeom.safety import AtomicFile

        try:
            with AtomicFile(args.json) as fh:  # replaced whole or not at all
                fh.write(json.dumps(payload, indent=1))
                fh.commit()
        except OSError as exc:
            print(f"error: --json '{args.json}' cannot be written ({exc.strerror or exc}).", file=sys.stderr)
            return EXIT_OUTPUT
    return 0


_BACKEND_HELP = ("runtime of the forward passes: auto (what measured fastest on this machine: "
                 "`python -m bertgeom choose-backend`, prepare-sets or a first large classify measure it once; "
                 "until then by the CPU, docs/speed.md: OpenVINO on AMD CPUs when installed, torch on Intel CPUs "
                 "and GPUs), torch, openvino, onnxruntime (the last two: pip install 'bertgeom[fast]')")


#: The guide's lines (docs/guide.md) computed by ``python -m bertgeom tour --update docs/guide.md`` (never typed).
TOUR_BEGIN, TOUR_END = "<!-- tour-genome: python -m bertgeom tour --update docs/guide.md -->", "<!-- /tour-genome -->"


def tour_genome_sentence() -> str:
    """The tour's genome step sentence, computed from the shipped variant model on the step's demo
    genome by the step the plug-in registers (:data:`bertgeom.sars_cov_2.variant.spec.TOUR_GENOME_STEP`;
    the tour shows the same)."""
    from bertgeom.models import load_model
    from bertgeom.trace import run_trace
    from bertgeom.extensions import TOUR_STEPS
    from bertgeom.inputs import input_kind_of
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    # the registered step (spec.TOUR_GENOME_STEP), read from the registry: spec imports this module
    step = next(s for s in TOUR_STEPS.values() if s.model_id == VARIANT_MODEL_ID)
    loaded = load_model(step.model_id)
    text = input_kind_of(loaded).examples()[step.example].text  # what the tour runs (ui/tour.py)
    return step.sentence(step.facts(loaded, run_trace(loaded, text)))


def replace_tour_block(text: str, sentence: str) -> str:
    """``text`` with the lines between :data:`TOUR_BEGIN` and :data:`TOUR_END` replaced by ``sentence``."""
    head, sep, rest = text.partition(TOUR_BEGIN)
    _, sep2, tail = rest.partition(TOUR_END)
    if not (sep and sep2):
        raise ValueError(f"the file has no {TOUR_BEGIN} ... {TOUR_END} block")
    indent = head[head.rfind("\n") + 1:]  # the block keeps its list item's indentation
    return f"{head}{TOUR_BEGIN}\n{indent}{sentence}\n{indent}{TOUR_END}{tail}"


def _cmd_tour(args) -> int:
    from pathlib import Path

    sentence = tour_genome_sentence()
    print(sentence)
    if args.update:
        path = Path(args.update)
        path.write_text(replace_tour_block(path.read_text(), sentence))
        print(f"updated {path}")
    return 0


def _add_runtime_arguments(p) -> None:
    """How ``classify`` and ``evaluate`` run their forward passes: batch, preparation processes, streams,
    device, precision and backend (one set of options, the same defaults for both)."""
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=1, help="processes that parse, align and tokenise (default 1)")
    p.add_argument("--streams", type=_streams_arg, default="auto", help=_STREAMS_HELP)
    p.add_argument("--device", default="auto",
                   help="where the forward passes run: auto (a GPU when there is one), cpu, cuda, mps")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                   help="auto: with --backend auto on a measured CPU, the precision measured fastest there "
                        "(choose-backend); else bf16 where the device has bf16 units (a GPU, or a CPU with "
                        "AVX-512/AMX bf16), else fp32")
    p.add_argument("--backend", default="auto", choices=list(BACKENDS), help=_BACKEND_HELP)


def register(sub) -> None:
    """Add the case study's commands (train, evaluate, classify, tour) to ``python -m bertgeom``."""
    p = sub.add_parser("tour", help="print the tour's genome sentence, computed from the shipped model")
    p.add_argument("--update", metavar="FILE", help="write it into the tour-genome block of FILE (docs/guide.md)")
    p.set_defaults(func=_cmd_tour)
    p = sub.add_parser("train", help="train the SARS-CoV-2 variant model from a seed (resumable)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--data", default="",
                   help="folder with genomes/open_genomes_dev.* (default: the copy shipped in the package)")
    p.add_argument("--init-from", default="",
                   help="continue from this variant model directory (default: start from MiniLM)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=0, help="examples per step (default 8)")
    p.add_argument("--lr-encoder", type=float, default=0.0, help="encoder learning rate (default 1.5e-4)")
    p.add_argument("--lr-new", type=float, default=0.0,
                   help="k-mer embedding and classifier learning rate (default 3e-3)")
    p.add_argument("--synth-per-class", type=int, default=120)
    p.add_argument("--copies-per-class", type=int, default=100)
    p.add_argument("--max-real-per-class", type=int, default=250, help="cap on real training genomes per class")
    p.add_argument("--no-augment", action="store_true", help="train without the label-preserving augmentation")
    p.add_argument("--augment", action="append", default=[], metavar="NAME=VALUE",
                   help="override one augmentation setting (bertgeom.sars_cov_2.genome.augment.AugmentConfig), e.g. "
                        "foreign_prob=0.8")
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
    p.add_argument("--dataset", default=None, metavar="PATH",
                   help="Nextclade dataset to place the genomes on: a folder or Nextclade's dataset zip "
                        "(a SARS-CoV-2 Wuhan-Hu-1 dataset with a reference tree; default: the shipped 2024-02-16 one)")
    p.add_argument("--output-tsv", default=None, metavar="PATH",
                   help="also write Nextclade's TSV (its column names: seqName, clade, Nextclade_pango, qc.*, "
                        "substitutions ...; bertgeom's recombinant, variant and dataset columns after them)")
    p.add_argument("--output-ndjson", default=None, metavar="PATH",
                   help="also write the same records as Nextclade-style NDJSON (one JSON object per line)")
    _add_runtime_arguments(p)
    p.set_defaults(func=_cmd_classify)

    p = sub.add_parser("choose-backend", help="time torch, OpenVINO and ONNX Runtime (fp32/bf16) on this machine "
                                              "and keep the fastest that keeps every call for --backend auto")
    p.add_argument("--model", default=None, help="variant model id or directory (default: the shipped one)")
    p.add_argument("--device", default="cpu", help="cpu (default); on a GPU torch runs")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                   help="auto: choose the precision too; fp32 or bf16: choose among that precision's paths")
    p.add_argument("--n", type=int, default=16, help="shipped validation genomes timed (default 16)")
    p.add_argument("--again", action="store_true", help="measure anew even when this machine was measured before")
    p.set_defaults(func=_cmd_choose_backend)

    p = sub.add_parser("evaluate",
                       help="accuracy, macro-F1, per-class metrics and confusion matrix on labelled genomes")
    p.add_argument("fasta", nargs="?", default="", help="FASTA of labelled genomes (any compression)")
    p.add_argument("labels", nargs="?", default="", help="TSV with 'name' and 'label' (or 'class') columns")
    p.add_argument("--held-out", action="store_true",
                   help="evaluate on the shipped open developer genomes held out for evaluation (191: never trained "
                        "on, not used for calibration)")
    p.add_argument("--model", default=None)
    p.add_argument("--data", default="",
                   help="folder with the open developer set used to regenerate the recipe for the baseline "
                        "(default: the copy shipped in the package)")
    p.add_argument("--no-baseline", action="store_true", help="skip the k-mer logistic-regression baseline")
    p.add_argument("--json", default="", help="also write the reports as JSON")
    _add_runtime_arguments(p)
    p.set_defaults(func=_cmd_evaluate)
