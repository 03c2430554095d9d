"""bertgeom: the geometry of BERT's attention, as a library behind a Streamlit dashboard.

The face a notebook uses (see docs/library.md)::

    import bertgeom as bg
    model = bg.load_model("minilm-l6")
    tr = bg.trace(model, "The cat sat on the mat.")
    tr.head_features()["entropy"]        # [L, H], every per-head feature at once
    tr.cone()                            # cone index of the hidden states per layer
    tr["q", 3]                           # layer 3's per-head queries [H, T, d_head]
    bg.classify(">my genome\\nATG...")    # SARS-CoV-2 variant calls, one per record

The package is plain Python (numpy / torch / transformers); Streamlit is imported only inside
:mod:`bertgeom.ui` and the app pages. Model families are plug-ins: each registers its loader, input
kind, models, pages and commands (:func:`register_model`, :func:`register_loader`,
:func:`register_input_kind`, :func:`register_page`, :func:`register_commands`) from a function named
under the ``bertgeom.plugins`` entry-point group, called the first time a registry is read
(:func:`bertgeom.models.load_plugins`). So ``import bertgeom`` loads no genome code; the shipped
SARS-CoV-2 family (:mod:`bertgeom.sars_cov_2`, a package the core never imports) is loaded when a
model list, model or input kind is first looked up.
"""


def _quiet_interrupt_while_the_cli_starts() -> None:
    """Under ``python -m bertgeom`` only: a Ctrl+C from here until the CLI's ``run()`` takes over
    (this package's imports, then ``bertgeom.__main__``'s) exits with status 130 and one sentence,
    instead of a traceback from inside an import. ``run()`` restores Python's handler. A library
    import leaves SIGINT alone, and so does a CLI started with SIGINT ignored."""
    import signal
    import sys

    argv = getattr(sys, "orig_argv", [])
    if sys.argv[:1] != ["-m"] or "-m" not in argv or argv[argv.index("-m") + 1:][:1] != ["bertgeom"]:
        return  # not the CLI being started (sys.argv[0] is "-m" only while -m locates its module)
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def interrupted(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # one sentence, however many Ctrl+C follow
        sys.stderr.write("interrupted (Ctrl+C).\n")
        raise SystemExit(130)

    signal.signal(signal.SIGINT, interrupted)
    sys._bertgeom_start_up_interrupt = interrupted  # run() hands SIGINT back only if still this one


_quiet_interrupt_while_the_cli_starts()

from bertgeom.version import __version__  # noqa: E402
from bertgeom.inputs import (  # noqa: E402
    INPUT_KINDS,
    EncodedInput,
    InputError,
    InputItem,
    InputKind,
    KindWords,
    encode_input,
    input_kind_of,
    register_input_kind,
)
from bertgeom.extensions import PageSpec, register_page  # noqa: E402
from bertgeom.models import (  # noqa: E402
    REGISTRY,
    LoadedModel,
    ModelLoadError,
    ModelSpec,
    load_model,
    register_commands,
    register_loader,
)
from bertgeom.models import register as register_model  # noqa: E402
from bertgeom.tokens import TokenKinds  # noqa: E402
from bertgeom.trace import Trace, run_trace  # noqa: E402

__all__ = [
    "__version__",
    "load_model",
    "trace",
    "Trace",
    "head_features",
    "pattern_labels",
    "cone_index",
    "classify",
    "TokenKinds",
    "EncodedInput",
    "InputItem",
    "InputKind",
    "KindWords",
    "InputError",
    "LoadedModel",
    "ModelSpec",
    "ModelLoadError",
    "REGISTRY",
    "INPUT_KINDS",
    "encode_input",
    "register_model",
    "register_loader",
    "register_input_kind",
    "register_page",
    "register_commands",
    "PageSpec",
]


def trace(model, text) -> Trace:
    """One forward pass of ``model`` (a :class:`LoadedModel` or a model id) over ``text`` (or an
    :class:`EncodedInput`): attentions, hidden states, logits, and the layer weights that
    ``trace["q", layer]`` reads."""
    from bertgeom.weights import layer_weights_of

    loaded = model if isinstance(model, LoadedModel) else load_model(model)
    result = run_trace(loaded, text)
    result.layer_weights = layer_weights_of(loaded.model)
    return result


def head_features(attentions, tokens, **options):
    """Every per-head feature of one input (``[L, H, T, T]`` attention and its token masks: a
    :class:`TokenKinds`, the trace's ``encoded`` input or the trace itself); see
    :func:`bertgeom.analysis.heads.head_features`."""
    from bertgeom.analysis.heads import head_features as features

    return features(attentions, tokens, **options)


def pattern_labels(features, thresholds=None):
    """Pattern labels of every head from its features (Kovaleva's classes, the 2025 paper's gates,
    Clark's behaviours), each with a confidence; see :func:`bertgeom.analysis.patterns.classify_heads`."""
    from bertgeom.analysis.patterns import classify_heads

    return classify_heads(features, thresholds)


def cone_index(X, mask=None, *, normalized: bool = False):
    """The cone index ``I = ||sum_i x_i / ||x_i||||`` of the rows of ``X`` (``[..., T, d]``); see
    :func:`bertgeom.analysis.cone.cone_index`."""
    from bertgeom.analysis.cone import cone_index as index

    return index(X, mask, normalized=normalized)


def classify(records, model=None, *, batch_size: int = 16, precision: str | None = None):
    """Classify whole records with a model whose input kind classifies records (the default model,
    the SARS-CoV-2 variant BERT: genomes as FASTA text, bytes or a path; whole, partial or spike
    only): one prediction per record, in input order (for genomes: predicted class, probabilities,
    QC, the rule-based call, or the error). The input kind's plug-in does the work
    (:attr:`bertgeom.inputs.InputKind.classify`). ``precision`` (``"fp32"``, ``"bf16"``, ``"auto"``;
    None: the plug-in's default, ``auto``, which is bf16 on a CPU with bf16 units) is the forward's
    precision; each prediction records the one used (``Prediction.precision``), since bf16 moves the
    probabilities (docs/methods.md)."""
    loaded = model if isinstance(model, LoadedModel) else load_model(model or REGISTRY.default_id)
    kind = input_kind_of(loaded)
    if kind.classify is None:
        raise InputError(f"The model '{loaded.spec.id}' reads {kind.words.plural}; classify needs a model that "
                         "classifies whole records (e.g. the SARS-CoV-2 variant model).")
    options = {"batch_size": batch_size} if precision is None else {"batch_size": batch_size, "precision": precision}
    return kind.classify(loaded, records, **options)
