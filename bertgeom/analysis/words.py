"""Word-level attention for word-piece models (Clark et al. 2019 §4.1).

A word split into several pieces ("play ##ing") is read as one unit: attention *to* a word is the
**sum** of the attention to its pieces (so every row still sums to 1) and attention *from* a word is
the **mean** of its pieces' rows.  With the one-hot piece-to-word matrix ``M [T, W]`` and ``n_w``
pieces per word: ``A_word = diag(1/n) Mᵀ A M`` -- two matrix products over all heads at once.
A text without split words gives back the token map unchanged.  Special tokens ([CLS], [SEP]) are
words of their own.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["word_groups", "word_level"]


def word_groups(tokens: Sequence[str], continuation: str = "##") -> tuple[np.ndarray, list[str]]:
    """``(group [T], words [W])``: the word index of every piece (a piece starting with
    ``continuation`` joins the word before it) and the words spelled out."""
    group, words = [], []
    for i, t in enumerate(tokens):
        t = str(t)
        if i > 0 and t.startswith(continuation) and len(t) > len(continuation):
            words[-1] += t[len(continuation):]
        else:
            words.append(t)
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
