"""Tiny random models of every encoder family bertgeom reads, saved like hub checkpoints (safetensors
plus a tokenizer of the family's own kind), built offline from each family's transformers config.

Tokenizers: BERT, ELECTRA and DistilBERT take MiniLM's WordPiece vocabulary (``##``); RoBERTa and
ModernBERT a byte-level BPE (``Ġ``) trained here on a few sentences (RoBERTa's ``<pad>`` is id 1);
ALBERT a SentencePiece-style BPE (``▁``); ESM-2 its own amino-acid vocabulary (no subword marker)."""

from __future__ import annotations

from pathlib import Path

FAMILIES = ("BERT", "RoBERTa", "ELECTRA", "DistilBERT", "ALBERT", "ESM-2", "ModernBERT")

_CORPUS = [
    "The cat sat on the mat because it was tired.",
    "A researcher loads a model and reads its attention heads, layer by layer.",
    "Proteins fold; genomes mutate; sentences carry meaning from word to word.",
    "The quick brown fox jumps over the lazy dog while the dogs sleep soundly.",
    "Attention weights show where each token looks, and gradients show what matters.",
] * 4

ESM_VOCAB = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K", "Q",
             "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-", "<null_1>", "<mask>"]


def _bpe_tokenizer(specials: list[str], cls: str, sep: str, pad: str, mask: str, unk: str, *, byte_level: bool):
    """A small BPE tokenizer trained on :data:`_CORPUS` (``Ġ`` byte-level, or ``▁`` Metaspace) with
    ``cls $A sep`` around every input, as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=unk))
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        alphabet = []
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, initial_alphabet=alphabet)
    tok.train_from_iterator(_CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B {sep}",
        special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, cls_token=cls, sep_token=sep, pad_token=pad,
                                   mask_token=mask, unk_token=unk, bos_token=cls, eos_token=sep)


def family_tokenizer(family: str):
    """The tokenizer of ``family``'s tiny model (see the module docstring)."""
    from transformers import AutoTokenizer

    from bertgeom.models import minilm_dir

    if family in ("BERT", "ELECTRA", "DistilBERT"):
        return AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)
    if family == "RoBERTa":
        return _bpe_tokenizer(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s>", "</s>", "<pad>", "<mask>", "<unk>",
                              byte_level=True)
    if family == "ModernBERT":
        return _bpe_tokenizer(["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"], "[CLS]", "[SEP]", "[PAD]", "[MASK]",
                              "[UNK]", byte_level=True)
    if family == "ALBERT":
        return _bpe_tokenizer(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], "[CLS]", "[SEP]", "<pad>", "[MASK]",
                              "<unk>", byte_level=False)
    if family == "ESM-2":
        import tempfile

        from transformers import EsmTokenizer

        with tempfile.TemporaryDirectory() as d:
            vocab = Path(d) / "vocab.txt"
            vocab.write_text("\n".join(ESM_VOCAB) + "\n")
            return EsmTokenizer(str(vocab))
    raise ValueError(family)


def save_family_model(family: str, path: Path, *, num_labels: int = 0, layers: int = 2, heads: int = 4,
                      hidden: int = 32, seed: int = 1, **extra) -> Path:
    """A random ``family`` model with its tokenizer, saved under ``path`` (safetensors)."""
    from bertgeom.architectures import build_random_encoder

    tok = family_tokenizer(family)
    pad = int(tok.pad_token_id)
    kw = dict(extra)
    if family == "ESM-2":
        kw["mask_token_id"] = int(tok.mask_token_id)
    model = build_random_encoder(family, layers=layers, heads=heads, hidden=hidden, vocab_size=len(tok),
                                 num_labels=num_labels, seed=seed, pad_token_id=pad, **kw)
    if num_labels:
        model.config.id2label = {i: f"class {chr(65 + i)}" for i in range(num_labels)}
        model.config.label2id = {v: k for k, v in model.config.id2label.items()}
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path), safe_serialization=True)
    tok.save_pretrained(str(path))
    return path
