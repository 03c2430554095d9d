"""Word-level attention for word-piece models (Clark et al. 2019 §4.1).

A word split into several pieces ("play ##ing") is read as one unit: attention *to* a word is the
**sum** of the attention to its pieces (so every row still sums to 1) and attention *from* a word is
the **mean** of its pieces' rows.  With the one-hot piece-to-word matrix ``M [T, W]`` and ``n_w``
pieces per word: ``A_word = diag(1/n) Mᵀ A M`` -- two matrix products over all heads at once.
A text without split words gives back the token map unchanged.  Special tokens ([CLS], [SEP]) are
words of their own.  Which pieces continue a word follows the tokenizer's marker (``##``, ``Ġ``, ``▁``
or none; :class:`bertgeom.architectures.Specials`), so RoBERTa-style and character vocabularies group
as their own tokenizers split.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["word_groups", "word_level"]


def word_groups(tokens: Sequence[str], continuation: str = "##", *, specials=None,
                is_special: Sequence[bool] | None = None) -> tuple[np.ndarray, list[str]]:
    """``(group [T], words [W])``: the word index of every piece and the words spelled out.

    By default a piece starting with ``continuation`` (WordPiece's ``##``) joins the word before it.
    With ``specials`` (a :class:`bertgeom.architectures.Specials`) the tokenizer's own marker decides:
    ``##`` marks a continuation, byte-level BPE's ``Ġ`` and SentencePiece's ``▁`` mark a word's *start*
    (a piece without it continues the word before), and no marker (a character vocabulary) makes every
    token a word. Special tokens (``is_special``) are words of their own, and the piece after one starts a word."""
    special = [False] * len(tokens) if is_special is None else [bool(x) for x in is_special]
    group, words = [], []
    for i, t in enumerate(tokens):
        t = str(t)
        if specials is None:
            joins = i > 0 and t.startswith(continuation) and len(t) > len(continuation) and not special[i]
            piece = t[len(continuation):] if joins else t
        else:
            joins = (i > 0 and not special[i] and specials.continues_word(t, previous_special=special[i - 1])
                     and len(specials.strip(t)) > 0)
            piece = specials.strip(t) if not special[i] else t
        if joins:
            words[-1] += piece
        else:
            words.append(piece)
        group.append(len(words) - 1)
    return np.array(group, dtype=np.int64), words


def word_level(attention: np.ndarray, group: np.ndarray) -> np.ndarray:
    """``[..., W, W]`` word-level map of ``attention [..., T, T]``: sum over the attended word's
    pieces, mean over the attending word's pieces."""
    a = np.asarray(attention, dtype=np.float64)
    g = np.asarray(group, dtype=np.int64)
    W = int(g.max()) + 1 if g.size else 0
    M = np.zeros((g.size, W))
    M[np.arange(g.size), g] = 1.0
    rows = M.T / M.sum(axis=0)[:, None]  # [W, T]: mean over a word's pieces
    return rows @ a @ M
