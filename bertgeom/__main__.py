"""Command line: ``python -m bertgeom COMMAND ...`` (run with ``--help`` for the list)."""

from __future__ import annotations

import argparse
import os
import sys


def _cmd_models(args) -> int:
    from bertgeom.models import REGISTRY

    for spec in REGISTRY.values():
        kind = f"classifier ({len(spec.labels)} classes)" if spec.labels else "encoder"
        print(f"{spec.id:24s} {spec.input_kind:6s} {kind:24s} {spec.display_name}")
    return 0


def _cmd_trace(args) -> int:
    import numpy as np

    from bertgeom.models import load_model
    from bertgeom.trace import run_trace

    model = load_model(args.model)
    trace = run_trace(model, args.text)
    print(f"model {model.spec.id}: {trace.num_layers} layers x {trace.num_heads} heads, {len(trace.tokens)} tokens")
    print("tokens:", " ".join(trace.tokens[:60]) + (" ..." if len(trace.tokens) > 60 else ""))
    a = trace.attentions
    top = a.max(axis=-1).mean(axis=-1)  # [L, H] mean over queries of the row maximum
    for layer in range(trace.num_layers):
        print(f"L{layer + 1}: mean max weight per head (over all {len(trace.tokens)} query rows, [CLS] and [SEP] "
              "included; the page's features average the content rows) " + " ".join(f"{v:.2f}" for v in top[layer]))
    if trace.logits is not None:
        from bertgeom.probabilities import class_probabilities

        probs = class_probabilities(model, trace.logits)  # calibrated where the model has a temperature
        order = np.argsort(-probs)
        print("prediction:", ", ".join(f"{trace.labels[i]} {probs[i]:.3f}" for i in order[:3]))
    for note in trace.encoded.notes:
        print("note:", note)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bertgeom", description="Geometry of BERT's attention.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("models", help="list the bundled models")
    p.set_defaults(func=_cmd_models)
    p = sub.add_parser("trace", help="run one input through a model and summarise its heads")
    p.add_argument("text", help="the input: a sentence, or one record in the format of the model's input kind")
    p.add_argument("--model", default=None, help="model id, hub id or local directory (default: the app's default)")
    p.set_defaults(func=_cmd_trace)
    for register in _EXTRA_COMMANDS:
        register(sub)
    from bertgeom.models import COMMANDS

    for add in COMMANDS.values():  # the plug-ins' commands (train, evaluate, classify, tour, ...)
        add(sub)
    return parser


def _precompute_commands(sub) -> None:
    from bertgeom.precompute.cli import register

    register(sub)


def _app_command(sub) -> None:
    from bertgeom.launch import register

    register(sub)


def _prepared_commands(sub) -> None:
    from bertgeom.sets.prepared import register

    register(sub)


#: Functions ``f(subparsers)`` that add the core's other commands (app, precompute, prepare-sets).
_EXTRA_COMMANDS: list = [_app_command, _precompute_commands, _prepared_commands]


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "takes_unknown_flags", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if unknown:  # a command that hands its other arguments on (``app``: Streamlit's flags)
        args.streamlit_flags = unknown
    if getattr(args, "model", "x") is None:
        from bertgeom.models import REGISTRY

        args.model = REGISTRY.default_id
    from bertgeom.models import ModelLoadError
    from bertgeom.inputs import InputError

    try:
        return int(args.func(args) or 0)
    except (ModelLoadError, InputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(argv: list[str] | None = None) -> int:
    """:func:`main`, with Ctrl+C at any point (start-up included: imports, model loading) answered
    in one sentence and exit status 130; the commands that write say more in their own handlers.
    Before this, ``bertgeom/__init__.py`` answered Ctrl+C the same way (the imports): from here on
    it is Python's ``KeyboardInterrupt`` again, which the commands handle."""
    try:
        import signal

        if signal.getsignal(signal.SIGINT) is getattr(sys, "_bertgeom_start_up_interrupt", None):
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return main(argv)
    except KeyboardInterrupt:
        try:
            print("interrupted (Ctrl+C).", file=sys.stderr)
        except KeyboardInterrupt:
            pass
        return 130


if __name__ == "__main__":
    sys.exit(run())
