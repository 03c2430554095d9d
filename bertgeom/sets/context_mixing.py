"""Context mixing over a set of inputs: each input's mixing ratio per layer (the five variants of
Kobayashi et al. 2021) and per head (norms), averaged over its tokens, for the Attention Heads page's
*Context mixing* tab and ``prepare-sets``. ALTI is left to the single-input view: its per-input maps
are ``[L, T, T]`` and the set view keeps only small reductions.

References: Kobayashi et al. 2020 (arXiv:2004.10102) §4; Kobayashi et al. 2021 (arXiv:2109.07152) §5,
Table 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from bertgeom.analysis.context_mixing import MIXING_VARIANTS, head_mixing_ratios, mixing_ratios
from bertgeom.sets.inputs import map_over_set

__all__ = ["mixing_over_set"]


def mixing_over_set(loaded, items: Sequence, progress: Callable[[int, int], None] | None = None,
                    layer_weights=None) -> dict[str, np.ndarray]:
    """``{"mixing": [V, N, L], "head_mixing": [N, L, H], "tokens": [N]}`` over the ``N`` inputs of
    ``items`` that could be read (token means of :func:`mixing_ratios`, in :data:`MIXING_VARIANTS`'s
    order, and of :func:`head_mixing_ratios`), plus ``errors`` (how many could not be read).
    ``layer_weights``: the model's (extracted once by the caller), else read from the model."""
    weights = layer_weights if layer_weights is not None else loaded

    def reduce(trace, _item):
        ratios = mixing_ratios(trace, weights)
        return (np.stack([ratios[v].mean(axis=-1) for v in MIXING_VARIANTS]),
                head_mixing_ratios(trace, weights).mean(axis=-1), trace.attentions.shape[-1])

    res = map_over_set(loaded, items, reduce, batch_size=4, progress=progress)
    if not res.results:
        L, H = loaded.num_layers, loaded.num_heads
        return {"mixing": np.zeros((len(MIXING_VARIANTS), 0, L)), "head_mixing": np.zeros((0, L, H)),
                "tokens": np.zeros(0), "errors": np.array([len(res.errors)])}
    return {"mixing": np.stack([r[0] for r in res.results], axis=1).astype(np.float32),
            "head_mixing": np.stack([r[1] for r in res.results]).astype(np.float32),
            "tokens": np.array([r[2] for r in res.results]), "errors": np.array([len(res.errors)])}
