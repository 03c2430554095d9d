"""The SARS-CoV-2 variant model of the case study: loading, input encoding, prediction.

The shipped model (``bertgeom/data/variant_model/``) is a 6 x 12-head BERT initialised from
the bundled MiniLM, whose English vocabulary was replaced by the spike 12-mers of its
training set (stride 9), fine-tuned end to end on 8 classes (Bonino 2025 (arXiv:2502.12033), case
study; the authors' released code). Files:
``config.json`` (a BertConfig), ``model.safetensors`` (fp16), ``kmer_vocab.json``,
``calibration.json`` (the softmax temperature, :mod:`.calibration`) and ``MODEL_CARD.md``.
:func:`load_variant` reads them without the hub and without pickle. The family's input kind (the
genome) and its registration with the library are in :mod:`bertgeom.sars_cov_2.variant.spec`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY, CLASSES
from bertgeom.inputs import EncodedInput, InputError, Record
from bertgeom.models import LoadedModel, ModelLoadError, ModelSpec, finish_loading, hash_file

#: The one input limit for genomes on the page, pasted or uploaded (after decompression): 20 MB of
#: sequence text, about 650 whole genomes (uploads larger than the box shows stay on the server);
#: the same number as every other uploader (:data:`bertgeom.safety.MAX_INPUT_BYTES`).
from bertgeom.safety import MAX_INPUT_BYTES as MAX_GENOME_INPUT_BYTES  # noqa: E402

#: The shipped model's directory and registry id.
VARIANT_DIR = Path(__file__).resolve().parents[2] / "data" / "variant_model"
VARIANT_MODEL_ID = "sars-cov-2-variant"

#: The input kind of variant models: a SARS-CoV-2 genome, read through its spike gene.
INPUT_KIND = "spike"


def variant_spec(path: Path = VARIANT_DIR) -> ModelSpec:
    """Spec of a variant model stored in ``path`` (the shipped one by default)."""
    shipped = Path(path) == VARIANT_DIR
    return ModelSpec(
        id=VARIANT_MODEL_ID if shipped else str(path),
        # the sidebar's picker shows about 31 characters: "(spike 12-mers)" is in the description below
        display_name="SARS-CoV-2 variant BERT" if shipped else f"variant model at {path}",
        loader="variant",
        input_kind=INPUT_KIND,
        source=str(path),
        labels=CLASSES,
        description=(
            "A 6-layer x 12-head BERT fine-tuned from MiniLM on spike-gene 12-mers (stride 9) to tell "
            f"8 SARS-CoV-2 classes apart ({', '.join(CLASS_DISPLAY[c] for c in CLASSES)}); "
            "trained on open data only (see its model card)."
            if shipped else "A spike k-mer classifier stored in a local directory."
        ),
        licence="Apache-2.0 (derived from MiniLM); training data: open INSDC genomes via Nextstrain (MIT)",
    )


def _recognise(path: Path) -> ModelSpec | None:
    """A local directory with our k-mer vocabulary is a variant model."""
    return variant_spec(path) if (Path(path) / "kmer_vocab.json").is_file() else None


#: The fixed metadata of every weights file we write (part of the bytes, so part of ``model_version``).
WEIGHTS_METADATA = {"dtype": "float16", "format": "pt"}

_ST_DTYPES = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "int64": "I64", "int32": "I32", "bool": "BOOL"}


def safetensors_bytes(state: dict, metadata: dict | None = None) -> bytes:
    """A safetensors file's bytes with a canonical header: tensors in sorted name order, keys of
    every JSON object sorted, no spaces, padded to 8 bytes. Identical tensors give identical bytes
    (``safetensors.save_file`` writes its metadata map in a per-process hash order)."""
    import struct

    header: dict = {}
    chunks = []
    offset = 0
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        raw = t.view(-1).view(dtype=__import__("torch").uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"data_offsets": [offset, offset + len(raw)], "dtype": _ST_DTYPES[str(t.dtype).split(".")[-1]],
                        "shape": list(t.shape)}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in sorted(metadata.items())}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def save_variant_model(model, vocab, path: Path, *, extra_config: dict | None = None) -> None:
    """Write a variant model directory: config.json, fp16 safetensors (deterministic bytes:
    :func:`safetensors_bytes`), k-mer vocabulary."""
    path.mkdir(parents=True, exist_ok=True)
    cfg = model.config.to_dict()
    cfg.update(extra_config or {})
    (path / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True))
    state = {k: v.detach().to("cpu").half() for k, v in model.state_dict().items()}
    from bertgeom.safety import write_bytes_atomically

    write_bytes_atomically(path / "model.safetensors", safetensors_bytes(state, WEIGHTS_METADATA))
    vocab.save(path / "kmer_vocab.json")


def build_variant_model(config_dict: dict):
    """An empty ``BertForSequenceClassification`` for a variant config (eager attention)."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(**{k: v for k, v in config_dict.items() if k not in ("architectures", "transformers_version")})
    config._attn_implementation = "eager"
    return BertForSequenceClassification(config)


def load_variant(spec: ModelSpec) -> LoadedModel:
    """Load a variant model directory (config.json + model.safetensors + kmer_vocab.json)."""
    from safetensors.torch import load_file

    from bertgeom.sars_cov_2.genome.kmers import KmerVocab

    path = Path(spec.source)
    needed = ["config.json", "model.safetensors", "kmer_vocab.json"]
    missing = [n for n in needed if not (path / n).is_file()]
    if missing:
        raise ModelLoadError(f"The variant model at '{path}' is incomplete (missing {', '.join(missing)}).")
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelLoadError(f"The variant model at '{path}' has an unreadable config.json ({exc}).") from None
    problem = _config_problem(config)
    if problem:
        raise ModelLoadError(f"The variant model at '{path}' has an unusable config.json: {problem}.")
    try:
        model = build_variant_model(config)
    except Exception as exc:  # transformers rejects the combination of values
        raise ModelLoadError(f"The variant model at '{path}' has an unusable config.json ({str(exc)[:200]}).") from None
    try:
        state = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    except Exception as exc:  # not a safetensors file, or truncated
        raise ModelLoadError(f"The variant model at '{path}' has unreadable weights (model.safetensors: "
                             f"{str(exc)[:120]}).") from None
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError:  # tensor shapes differ from the config
        raise ModelLoadError(f"The variant model at '{path}' does not match its config.json.") from None
    real_missing = [k for k in result.missing_keys if not k.endswith("position_ids")]
    if real_missing or result.unexpected_keys:
        raise ModelLoadError(f"The variant model at '{path}' does not match its config.json.")
    try:
        vocab = KmerVocab.load(path / "kmer_vocab.json")
    except Exception as exc:
        raise ModelLoadError(f"The variant model at '{path}' has an unreadable kmer_vocab.json "
                             f"({str(exc)[:120]}).") from None
    if len(vocab) != model.config.vocab_size:
        raise ModelLoadError(f"The variant model at '{path}' has a vocabulary that does not match its weights.")
    labels = tuple(model.config.id2label[i] for i in range(model.config.num_labels))
    spec = ModelSpec(**{**spec.__dict__, "labels": labels})
    from bertgeom.sars_cov_2.variant.calibration import read_temperature

    weights_hash = hash_file(path / "model.safetensors")
    temperature, calibration_note = read_temperature(path, weights_hash)
    return LoadedModel(spec, finish_loading(model), vocab, weights_hash,
                       extra={"card": _read(path / "MODEL_CARD.md"), "metrics": _read_json(path / "metrics.json"),
                              "temperature": temperature, "calibration": calibration_note})


def _config_problem(config) -> str:
    """Why a config dict cannot describe a variant model ("" when it can)."""
    if not isinstance(config, dict):
        return "it is not a JSON object"
    ints = {k: config.get(k) for k in ("num_attention_heads", "hidden_size", "num_hidden_layers", "vocab_size",
                                         "intermediate_size", "max_position_embeddings")}
    bad = [k for k, v in ints.items() if not isinstance(v, int) or isinstance(v, bool) or v <= 0]
    if bad:
        return f"{', '.join(bad)} must be positive integers"
    if ints["hidden_size"] % ints["num_attention_heads"]:
        return (f"hidden_size {ints['hidden_size']} is not a multiple of num_attention_heads "
                f"{ints['num_attention_heads']}")
    labels = config.get("id2label")
    if not isinstance(labels, dict) or not labels:
        return "id2label (the class names) is missing"
    return ""


def _read(p: Path) -> str:
    return p.read_text(encoding="utf-8") if p.is_file() else ""


def _read_json(p: Path) -> dict:
    return json.loads(p.read_text()) if p.is_file() else {}


def encoded_from_analysis(analysis, vocab, key: str) -> EncodedInput:
    """Model input for one analysed genome (:class:`~bertgeom.sars_cov_2.genome.pipeline.GenomeAnalysis`)."""
    from bertgeom.sars_cov_2.genome.kmers import SEP_ID, token_axis

    ids = np.asarray(analysis.token_ids, dtype=np.int64)
    end = int(np.flatnonzero(ids == SEP_ID)[0]) + 1
    ids = ids[:end]
    axis = token_axis(end - 2)
    tokens = vocab.decode(ids)
    spans = np.stack([axis.nt_start, axis.nt_end], axis=1).astype(np.int64)
    n = len(ids)
    is_cls = np.zeros(n, bool)
    is_cls[0] = True
    is_sep = np.zeros(n, bool)
    is_sep[-1] = True
    notes = list(analysis.notes)
    if analysis.unk_rate:
        notes.append(
            f"{analysis.unk_rate:.1%} of the k-mers were never seen in training and read as [UNK]."
        )
    labels = [str(x) for x in axis.label]
    return EncodedInput(key, ids, tokens, spans, "nt", is_cls, is_sep, np.zeros(n, bool), notes,
                        axis_labels=labels, domains=tuple(str(d) for d in axis.domain), annotation=analysis)


def genome_analysis(encoded: EncodedInput):
    """The :class:`~bertgeom.sars_cov_2.genome.pipeline.GenomeAnalysis` a genome input carries (its
    ``annotation``, set by :func:`encoded_from_analysis`); a clear error for any other input."""
    from bertgeom.sars_cov_2.genome.pipeline import GenomeAnalysis

    if not isinstance(encoded.annotation, GenomeAnalysis):
        raise TypeError("this input is not a genome read by the variant model (it carries no genome analysis)")
    return encoded.annotation


def parse_genome_records(text: str) -> tuple[Record, ...]:
    """A pasted genome input (FASTA, multi-FASTA, bare sequence, GenBank) read once into records:
    each record's name, its cleaned sequence and how it was read (``RNA input: U read as T``, ...).
    A bad record among several keeps its place with its one-sentence error; an input that cannot be
    read as a whole, and a single bad record, raise :class:`~bertgeom.inputs.InputError`
    (the genome kind's :attr:`~bertgeom.inputs.InputKind.parse`)."""
    from bertgeom.sars_cov_2.genome.fasta import RecordError, SequenceInputError, parse_sequences

    key = (text or "").strip()
    if not key:
        raise InputError("The input is empty: paste a SARS-CoV-2 genome or spike sequence, or pick an example.")
    try:
        parsed = parse_sequences(key, max_bytes=MAX_GENOME_INPUT_BYTES, tolerant=True)
    except SequenceInputError as exc:
        raise InputError(str(exc)) from None
    if len(parsed) == 1 and isinstance(parsed[0], RecordError):
        raise InputError(parsed[0].message)
    return tuple(Record(r.name, "", error=r.message) if isinstance(r, RecordError) else Record(r.name, r.sequence,
                                                                                               r.notes)
                 for r in parsed)


def encode_genome_record(loaded: LoadedModel, record: Record) -> EncodedInput:
    """Align one parsed genome record, cut the spike and tokenise it (the genome kind's
    :attr:`~bertgeom.inputs.InputKind.encode`); its reading notes come first among the input's notes."""
    from bertgeom.sars_cov_2.genome.fasta import SequenceRecord
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence

    analysis = analyse_sequence(SequenceRecord(record.name, record.content, list(record.notes)), vocab=loaded.tokenizer)
    if analysis.error:
        raise InputError(analysis.error)
    return encoded_from_analysis(analysis, loaded.tokenizer, record.digest)


def build_tiny_variant_model(path: Path, *, seed: int = 0, layers: int = 2, heads: int = 4, hidden: int = 32) -> Path:
    """A small *random* variant-shaped model (k-mer vocabulary of the shipped demo and
    validation genomes, 8 classes) saved like the real one: for tests and demos of the
    spike code paths when the trained model is not wanted."""
    import torch

    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes, load_validation_small
    from bertgeom.sars_cov_2.genome.kmers import KmerVocab
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence

    spikes = []
    for rec, _meta in load_demo_genomes() + load_validation_small():
        a = analyse_sequence(rec)
        if a.ok:
            spikes.append(a.model_input)
    vocab = KmerVocab.build(spikes)
    config = {
        "vocab_size": len(vocab), "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "intermediate_size": hidden * 4, "max_position_embeddings": 512,
        "num_labels": len(CLASSES), "id2label": {i: c for i, c in enumerate(CLASSES)},
        "label2id": {c: i for i, c in enumerate(CLASSES)}, "pad_token_id": 0,
    }
    torch.manual_seed(seed)
    model = build_variant_model(config)
    save_variant_model(model, vocab, Path(path))
    return Path(path)
