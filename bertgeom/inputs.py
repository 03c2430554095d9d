"""What a model reads: user input turned into tokens, by input kind.

An :class:`EncodedInput` holds the token ids with where each token came from (character spans
for text, nucleotide spans for a genome) and which tokens are [CLS], [SEP] and punctuation.
:func:`encode_input` picks the encoder registered for the model's ``input_kind``: text is built
in (the model's own tokenizer); other kinds register themselves with :func:`register_encoder`
(``bertgeom.variant`` registers the SARS-CoV-2 genome encoder).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bertgeom.models import LoadedModel

#: Upper bound on pasted text, in characters, before tokenisation (bounded work).
MAX_TEXT_CHARS = 20_000


#: The token sets every analysis offers, one vocabulary: which rows of a sequence count.
TOKEN_SETS: dict[str, str] = {
    "content": "content tokens only: [CLS], [SEP] and padding left out",
    "content+cls": "content tokens plus [CLS]",
    "all": "all positions, [CLS] and [SEP] included (and [PAD] where inputs are padded): the official code's choice",
}
#: Short names of the token sets for pickers.
TOKEN_SET_LABELS: dict[str, str] = {
    "content": "content tokens",
    "content+cls": "content tokens + [CLS]",
    "all": "all positions (official code)",
}


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

    def token_rows(self, token_set: str) -> np.ndarray:
        """Boolean ``[T]`` selection of the tokens in ``token_set`` (see :data:`TOKEN_SETS`)."""
        if token_set == "all":
            return np.ones(self.n_tokens, dtype=bool)
        if token_set == "content":
            return self.content_mask.copy()
        if token_set == "content+cls":
            return self.content_mask | self.is_cls
        raise ValueError(f"token_set must be one of {list(TOKEN_SETS)}, got {token_set!r}")


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


#: Encoder of each input kind (``ModelSpec.input_kind``): ``(loaded, text) -> EncodedInput``.
ENCODERS: dict[str, Callable[[LoadedModel, str], EncodedInput]] = {"text": encode_text}


def register_encoder(input_kind: str, encoder: Callable[[LoadedModel, str], EncodedInput]) -> None:
    """Let models whose spec says ``input_kind`` read their input with ``encoder``
    (the variant package registers its genome encoder this way)."""
    ENCODERS[input_kind] = encoder


def encode_input(loaded: LoadedModel, text: str) -> EncodedInput:
    """Turn user input into tokens with the encoder registered for ``loaded``'s input kind."""
    encoder = ENCODERS.get(loaded.spec.input_kind)
    if encoder is None:
        raise InputError(f"No encoder reads '{loaded.spec.input_kind}' input (model '{loaded.spec.id}').")
    return encoder(loaded, text)
