"""Which tokens of one input are [CLS], [SEP], punctuation, padding: the one token-mask type
(:class:`TokenKinds`) that the encoded input carries and every analysis reads, with the token sets
(:data:`TOKEN_SETS`) that pick rows from it; and the one tokenizer protocol (:class:`Tokenizer`):
what generic code may read of a model's tokenizer, whichever family it comes from (a Hugging Face
tokenizer, the genome plug-in's k-mer vocabulary, a plain token list).

Where it sits: below the inputs (:mod:`bertgeom.inputs` builds one per encoded input) and the
analyses (per-head features, cone indices, subspace quantities read its masks).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence, runtime_checkable

import numpy as np


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


@runtime_checkable
class Tokenizer(Protocol):
    """What bertgeom's generic code reads of a model's tokenizer (``LoadedModel.tokenizer``): token
    strings of ids and the ids of the special tokens (``None`` when the vocabulary has no such token).

    A Hugging Face tokenizer satisfies it as it is; a plug-in's own vocabulary adds these members
    (the genome plug-in's ``KmerVocab``) or uses :class:`TokenList`. Everything else a family's
    tokenizer offers (the text encoder's offsets, the k-mer encoding) is read only by that family's
    own input kind, never by generic code (tests/test_tokenizer_protocol.py checks both).
    """

    @property
    def cls_token_id(self) -> int | None: ...

    @property
    def sep_token_id(self) -> int | None: ...

    @property
    def unk_token_id(self) -> int | None: ...

    @property
    def all_special_ids(self) -> list[int]: ...

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]: ...


class TokenList:
    """A fixed list of token strings as a :class:`Tokenizer` (id = position in the list): the
    vocabulary of a family whose encoder reads its input itself. Special tokens are the listed ones
    of ``[CLS]``, ``[SEP]``, ``[PAD]``, ``[UNK]`` and ``[MASK]``."""

    SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

    def __init__(self, tokens: Sequence[str]):
        self.tokens: tuple[str, ...] = tuple(str(t) for t in tokens)
        self._index = {t: i for i, t in enumerate(self.tokens)}
        if len(self._index) != len(self.tokens):
            raise ValueError("a token list must not hold a token twice")

    def __len__(self) -> int:
        return len(self.tokens)

    def token_to_id(self, token: str) -> int | None:
        """The id of ``token`` (``None`` when it is not in the list)."""
        return self._index.get(token)

    @property
    def cls_token_id(self) -> int | None:
        return self._index.get("[CLS]")

    @property
    def sep_token_id(self) -> int | None:
        return self._index.get("[SEP]")

    @property
    def unk_token_id(self) -> int | None:
        return self._index.get("[UNK]")

    @property
    def all_special_ids(self) -> list[int]:
        return [self._index[t] for t in self.SPECIALS if t in self._index]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[int(i)] for i in ids]


#: Clark et al. 2019's punctuation (§3.1: attention to "." and ","): the ``P`` of docs/methods.md §2 and
#: of the features' labels; text inputs mark these, ``TokenKinds.from_tokens(punct="all")`` every one.
CLARK_PUNCT = (".", ",")


def is_punct_token(tok: str) -> bool:
    """True for a token made only of Unicode punctuation (a WordPiece ``##`` prefix is ignored)."""
    t = tok[2:] if tok.startswith("##") else tok
    return len(t) > 0 and all(unicodedata.category(c).startswith("P") for c in t)


@dataclass(frozen=True)
class TokenKinds:
    """Boolean masks (length ``T``) describing the tokens of one input.

    ``content`` is "not [CLS], not [SEP], not [PAD]".  Segments are delimited by
    [SEP]: the k-th segment runs up to and including the k-th [SEP].
    """

    is_cls: np.ndarray
    is_sep: np.ndarray
    is_punct: np.ndarray
    is_pad: np.ndarray | None = None

    def __post_init__(self):
        n = len(np.asarray(self.is_cls))
        for name in ("is_cls", "is_sep", "is_punct", "is_pad"):
            val = getattr(self, name)
            if val is None:
                val = np.zeros(n, dtype=bool)
            arr = np.asarray(val, dtype=bool).reshape(-1)
            if arr.shape[0] != n:
                raise ValueError(f"TokenKinds.{name} has length {arr.shape[0]}, expected {n}")
            arr = arr.copy()
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    # -- constructors ---------------------------------------------------------------
    @classmethod
    def from_tokens(
        cls,
        tokens: Sequence[str],
        *,
        cls_token: str = "[CLS]",
        sep_token: str = "[SEP]",
        pad_token: str | None = "[PAD]",
        punct: Iterable[str] | str = CLARK_PUNCT,
    ) -> "TokenKinds":
        """Build the masks from token strings.

        ``punct=(".", ",")`` is Clark's set; ``punct="all"`` marks every token made only
        of Unicode punctuation (the ``punct_all`` variant).
        """
        toks = [str(t) for t in tokens]
        if isinstance(punct, str):
            if punct != "all":
                raise ValueError("punct must be an iterable of token strings or 'all'")
            is_p = [is_punct_token(t) for t in toks]
        else:
            pset = set(punct)
            is_p = [t in pset for t in toks]
        return cls(
            is_cls=np.array([t == cls_token for t in toks], dtype=bool),
            is_sep=np.array([t == sep_token for t in toks], dtype=bool),
            is_punct=np.array(is_p, dtype=bool),
            is_pad=np.array([pad_token is not None and t == pad_token for t in toks], dtype=bool),
        )

    @classmethod
    def from_ids(
        cls,
        ids: Sequence[int],
        *,
        cls_id: int,
        sep_id: int,
        pad_id: int | None = None,
        punct_ids: Iterable[int] = (),
    ) -> "TokenKinds":
        """Build the masks from token ids (the robust way: C=101, S=102 for BERT)."""
        a = np.asarray(ids).reshape(-1)
        return cls(
            is_cls=a == cls_id,
            is_sep=a == sep_id,
            is_punct=np.isin(a, np.asarray(list(punct_ids), dtype=a.dtype if a.size else int)),
            is_pad=(a == pad_id) if pad_id is not None else None,
        )

    @classmethod
    def simple(cls, n_tokens: int, *, sep_positions: Sequence[int] | None = None, punct_positions=()) -> "TokenKinds":
        """``[CLS] x ... x [SEP]`` (or [SEP]s at ``sep_positions``); handy for tests."""
        is_cls = np.zeros(n_tokens, bool)
        is_cls[0] = True
        is_sep = np.zeros(n_tokens, bool)
        is_sep[[n_tokens - 1] if sep_positions is None else list(sep_positions)] = True
        is_p = np.zeros(n_tokens, bool)
        is_p[list(punct_positions)] = True
        return cls(is_cls, is_sep, is_p)

    @classmethod
    def of(cls, tokens) -> "TokenKinds":
        """The masks of ``tokens``: a :class:`TokenKinds` itself, anything holding one as ``.kinds``
        (an :class:`~bertgeom.inputs.EncodedInput`, a :class:`~bertgeom.trace.Trace`), or any object
        with ``is_cls``/``is_sep`` (and optionally ``is_punct``/``is_pad``) masks."""
        if isinstance(tokens, cls):
            return tokens
        kinds = getattr(tokens, "kinds", None)
        if isinstance(kinds, cls):
            return kinds
        if hasattr(tokens, "is_cls") and hasattr(tokens, "is_sep"):
            is_cls = np.asarray(tokens.is_cls, dtype=bool)
            punct = getattr(tokens, "is_punct", None)
            return cls(is_cls, tokens.is_sep, np.zeros_like(is_cls) if punct is None else punct,
                       getattr(tokens, "is_pad", None))
        raise TypeError(f"expected token masks (TokenKinds, an encoded input or a trace), got {type(tokens).__name__}")

    # -- derived --------------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self.is_cls.shape[0])

    @property
    def content(self) -> np.ndarray:
        return ~(self.is_cls | self.is_sep | self.is_pad)

    @property
    def real(self) -> np.ndarray:
        return ~self.is_pad

    @property
    def segment_ids(self) -> np.ndarray:
        """Segment index per position (0, 1, ...); a [SEP] belongs to the segment it closes."""
        sep = self.is_sep.astype(np.int64)
        return np.concatenate([[0], np.cumsum(sep)[:-1]]) if self.n else sep

    @property
    def n_segments(self) -> int:
        """Number of segments holding at least one content token (2 for a sentence pair)."""
        seg = self.segment_ids[self.content]
        return int(np.unique(seg).size)

    def rows(self, token_set: str = "content", pad_to: int | None = None) -> np.ndarray:
        """Boolean ``[n]`` (or ``[pad_to]``) selection of the rows in ``token_set`` (:data:`TOKEN_SETS`).

        Rows beyond the tokens (``pad_to`` longer than the input) are padding: only ``"all"`` selects them.
        """
        if token_set not in TOKEN_SETS:
            raise ValueError(f"token_set must be one of {list(TOKEN_SETS)}, got {token_set!r}")
        n = self.n if pad_to is None else int(pad_to)
        if n < self.n:
            raise ValueError(f"cannot pad {self.n} tokens to {n}")
        out = np.zeros(n, dtype=bool)
        if token_set == "all":
            out[:] = True
        elif token_set == "content":
            out[: self.n] = self.content
        else:
            out[: self.n] = self.content | self.is_cls
        return out
