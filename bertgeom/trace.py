"""One forward pass per (model, input): the :class:`Trace` every analysis reads.

A trace holds the tokens with their coordinates in the user's input (character spans for
text, nucleotide spans in the spike for genomes), the attention of every head
``[L, H, T, T]``, the hidden states ``[L+1, T, D]`` and, for a classifier, logits and
probabilities. Queries and keys are *derived on demand* from the hidden states and the
layer weights (:func:`queries_keys`), so a trace stays small and the model is run once.

Everything runs under ``torch.inference_mode()``; the shared model is never mutated.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

import numpy as np

from bertgeom.models import LoadedModel

#: Upper bound on pasted text, in characters, before tokenisation (bounded work).
MAX_TEXT_CHARS = 20_000


class InputError(ValueError):
    """User input that cannot be analysed; the message is one clear sentence."""


@dataclass
class EncodedInput:
    """Model-ready tokens for one input, with where each token came from.

    ``spans[i] = (start, end)`` is the half-open range the token covers in the input
    (characters of the text, or 0-based nucleotides of the aligned spike); special
    tokens have ``(-1, -1)``.
    """

    key: str
    input_ids: np.ndarray
    tokens: list[str]
    spans: np.ndarray
    span_unit: str
    is_cls: np.ndarray
    is_sep: np.ndarray
    is_punct: np.ndarray
    notes: list[str] = field(default_factory=list)
    axis_labels: list[str] | None = None
    extra: dict = field(default_factory=dict)

    @property
    def n_tokens(self) -> int:
        return int(len(self.tokens))

    @property
    def content_mask(self) -> np.ndarray:
        return ~(self.is_cls | self.is_sep)


@dataclass
class Trace:
    """Result of one forward pass (float32 numpy arrays, cropped to real tokens)."""

    model_id: str
    encoded: EncodedInput
    attentions: np.ndarray  # [L, H, T, T]
    hidden_states: np.ndarray  # [L+1, T, D]
    logits: np.ndarray | None = None  # [C]
    labels: tuple[str, ...] = ()

    @property
    def tokens(self) -> list[str]:
        return self.encoded.tokens

    @property
    def num_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.attentions.shape[1])

    @property
    def probs(self) -> np.ndarray | None:
        if self.logits is None:
            return None
        z = self.logits - self.logits.max()
        e = np.exp(z)
        return e / e.sum()

    @property
    def predicted(self) -> str | None:
        if self.logits is None or not self.labels:
            return None
        return self.labels[int(np.argmax(self.logits))]

    @property
    def axis_labels(self) -> list[str]:
        """Token labels for plot axes, made unique by their position."""
        base = self.encoded.axis_labels or self.encoded.tokens
        return [f"{i}:{t}" for i, t in enumerate(base)]


def _is_punct(token: str) -> bool:
    t = token[2:] if token.startswith("##") else token
    return bool(t) and all(unicodedata.category(c).startswith("P") for c in t)


def normalise_text(text: str) -> str:
    """The cache key of a text input: trailing/leading white space only is dropped."""
    return (text or "").strip()


def encode_text(loaded: LoadedModel, text: str) -> EncodedInput:
    """Tokenise English (or any) text with the model's own tokenizer, keeping char offsets."""
    key = normalise_text(text)
    if not key:
        raise InputError("The input is empty: type or pick a sentence first.")
    if len(key) > MAX_TEXT_CHARS:
        raise InputError(
            f"The text has {len(key):,} characters; bertgeom reads at most {MAX_TEXT_CHARS:,} at once."
        )
    tok = loaded.tokenizer
    enc = tok(key, return_offsets_mapping=True, truncation=False, add_special_tokens=True)
    ids = np.asarray(enc["input_ids"], dtype=np.int64)
    offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    notes: list[str] = []
    limit = loaded.max_tokens
    if len(ids) > limit:
        notes.append(
            f"The text is {len(ids)} tokens long; the model reads {limit}, so only the first "
            f"{limit - 2} word pieces are analysed."
        )
        ids = np.concatenate([ids[: limit - 1], ids[-1:]])
        offsets = np.concatenate([offsets[: limit - 1], offsets[-1:]])
    tokens = tok.convert_ids_to_tokens(ids.tolist())
    special = set(getattr(tok, "all_special_ids", []) or [])
    is_special = np.array([i in special for i in ids.tolist()])
    cls_id = getattr(tok, "cls_token_id", None)
    sep_id = getattr(tok, "sep_token_id", None)
    is_cls = ids == (cls_id if cls_id is not None else -1)
    is_sep = ids == (sep_id if sep_id is not None else -1)
    spans = offsets.copy()
    spans[is_special] = -1
    is_punct = np.array([(not s) and _is_punct(t) for t, s in zip(tokens, is_special)])
    if (ids == getattr(tok, "unk_token_id", -999)).any():
        n_unk = int((ids == tok.unk_token_id).sum())
        notes.append(f"{n_unk} token(s) are unknown to the model's vocabulary ([UNK]).")
    return EncodedInput(key, ids, tokens, spans, "char", is_cls, is_sep, is_punct, notes)


def encode_input(loaded: LoadedModel, text: str) -> EncodedInput:
    """Turn user input into tokens the way ``loaded``'s spec says (text or spike genome)."""
    if loaded.spec.input_kind == "spike":
        from bertgeom.variant import encode_genome_input

        return encode_genome_input(loaded, text)
    return encode_text(loaded, text)


def _forward(loaded: LoadedModel, input_ids, attention_mask):
    import torch

    with torch.inference_mode():
        out = loaded.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_attentions=True,
            output_hidden_states=True,
            return_dict=True,
        )
    if out.attentions is None or len(out.attentions) != loaded.num_layers or out.attentions[0] is None:
        raise RuntimeError("The model returned no attention weights; it must run with eager attention.")
    return out


def pad_batch(loaded: LoadedModel, encoded: list[EncodedInput], width: int | None = None):
    """``(input_ids, attention_mask)`` torch tensors ``[B, width]`` (default: the longest input).

    Raises :class:`InputError` when an input is longer than ``width``.
    """
    import torch

    n = max(e.n_tokens for e in encoded) if width is None else int(width)
    if any(e.n_tokens > n for e in encoded):
        raise InputError(f"An input is longer than {n} tokens and cannot be padded to {n}.")
    pad_id = int(getattr(loaded.config, "pad_token_id", 0) or 0)
    ids = torch.full((len(encoded), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), n), dtype=torch.long)
    for b, e in enumerate(encoded):
        ids[b, : e.n_tokens] = torch.from_numpy(e.input_ids)
        mask[b, : e.n_tokens] = 1
    return ids, mask


def run_batch(loaded: LoadedModel, encoded: list[EncodedInput]) -> list[Trace]:
    """One padded forward pass over several inputs; each trace is cropped to its tokens."""
    import torch

    if not encoded:
        return []
    ids, mask = pad_batch(loaded, encoded)
    out = _forward(loaded, ids, mask)
    attn = torch.stack(out.attentions, dim=1)  # [B, L, H, n, n]
    hidden = torch.stack(out.hidden_states, dim=1)  # [B, L+1, n, D]
    logits = getattr(out, "logits", None)
    traces = []
    for b, e in enumerate(encoded):
        t = e.n_tokens
        traces.append(
            Trace(
                model_id=loaded.spec.id,
                encoded=e,
                attentions=attn[b, :, :, :t, :t].float().numpy().copy(),
                hidden_states=hidden[b, :, :t].float().numpy().copy(),
                logits=None if logits is None else logits[b].float().numpy().copy(),
                labels=loaded.labels,
            )
        )
    return traces


def run_trace(loaded: LoadedModel, text_or_encoded: str | EncodedInput) -> Trace:
    """Encode (if needed) and run one input: the single forward pass the pages share."""
    enc = text_or_encoded if isinstance(text_or_encoded, EncodedInput) else encode_input(loaded, text_or_encoded)
    return run_batch(loaded, [enc])[0]


def _self_attention(loaded: LoadedModel, layer: int):
    return loaded.encoder.encoder.layer[layer].attention.self


def queries_keys(loaded: LoadedModel, trace: Trace, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-head queries and keys of ``layer`` (0-based), each ``[H, T, d_head]``.

    ``Q = X W_q^T + b_q`` with ``X = hidden_states[layer]`` (the layer's input), split into
    heads along the feature axis; same for K. ``softmax(Q_h K_h^T / sqrt(d_head))``
    reproduces the model's attention for that head.
    """
    sa = _self_attention(loaded, layer)
    x = trace.hidden_states[layer].astype(np.float32)
    h, dh = loaded.num_heads, loaded.head_dim

    def project(lin) -> np.ndarray:
        w = lin.weight.detach().float().numpy()
        b = lin.bias.detach().float().numpy() if lin.bias is not None else 0.0
        y = x @ w.T + b
        return y.reshape(x.shape[0], h, dh).transpose(1, 0, 2)

    return project(sa.query), project(sa.key)


def attention_from_qk(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Softmax attention ``[H, T, T]`` rebuilt from per-head queries and keys (no mask)."""
    s = np.einsum("htd,hsd->hts", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    s -= s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)
