"""Context mixing over a set of inputs, for the Attention Heads page's *Context mixing* tab and
``prepare-sets``: each input's mixing ratio per layer (the five variants of Kobayashi et al. 2021) and
per head (norms), averaged over its tokens (:func:`mixing_over_set`), and ALTI's small reductions
(:func:`alti_over_set`). ALTI's per-input maps are ``[L, T, T]``; the set views keep only per-input,
per-layer numbers.

ALTI over the set, per input and layer (Ferrando et al. 2022, §3; ``C_l`` one layer's contributions,
``R_l = C_l ... C_1`` their rollout, ``A_l`` attention rollout with r = 0.5 as the single-input tab
draws it, :func:`bertgeom.analysis.flow.rollout`):

* ``alti_self``: the mean over tokens of ``C_l[i, i]``, what a token keeps of itself through the block;
  ``1 - alti_self`` is ALTI's mixing share, read beside the mixing ratios;
* ``rollout_self`` and ``attention_rollout_self``: the mean of ``R_l[i, i]`` and of ``A_l[i, i]``, how
  much of each input token its own position still holds after layer l, by either aggregation;
* ``rank_agreement``: Spearman's rank correlation between row i of ``R_l`` and row i of ``A_l`` (over the
  input tokens j), averaged over the output tokens i: 1 when ALTI and raw attention rank the sources of
  every token alike; ``rank_agreement_first`` the same for row 0 alone (the first token: [CLS], which a
  classifier reads). Ties take their mean rank; a constant row has no correlation and is left out of
  the mean (NaN when every row is constant).

Every token position of the trace counts, the special tokens included (as the single-input maps).

References: Kobayashi et al. 2020 (arXiv:2004.10102) §4; Kobayashi et al. 2021 (arXiv:2109.07152) §5,
Table 1; Ferrando et al. 2022 (arXiv:2203.04212) §3, §4; Abnar & Zuidema 2020 (arXiv:2005.00928)
for attention rollout.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np

from bertgeom.analysis.context_mixing import MIXING_VARIANTS, alti, alti_rollout, head_mixing_ratios, mixing_ratios
from bertgeom.analysis.flow import FLOW_RESIDUAL, rollout
from bertgeom.sets.inputs import map_over_set

__all__ = ["ALTI_SET_ARRAYS", "alti_over_set", "alti_reductions", "mixing_over_set", "row_spearman"]

#: The per-input, per-layer arrays of :func:`alti_over_set` (each ``[N, L]``).
ALTI_SET_ARRAYS = ("alti_self", "rollout_self", "attention_rollout_self", "rank_agreement", "rank_agreement_first")


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


def row_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's rank correlation of every row pair of ``a`` and ``b`` (``[..., T]`` each, same
    shape) -> ``[...]``: the Pearson correlation of their ranks (ties: the mean rank), NaN where
    either row is constant."""
    from scipy.stats import rankdata

    ra = rankdata(np.asarray(a, dtype=np.float64), axis=-1)
    rb = rankdata(np.asarray(b, dtype=np.float64), axis=-1)
    ra -= ra.mean(axis=-1, keepdims=True)
    rb -= rb.mean(axis=-1, keepdims=True)
    denom = np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))
    num = (ra * rb).sum(axis=-1)
    return np.divide(num, denom, out=np.full(num.shape, np.nan), where=denom > 0)


def alti_reductions(contributions: np.ndarray, attentions: np.ndarray) -> dict[str, np.ndarray]:
    """One input's :data:`ALTI_SET_ARRAYS` (each ``[L]``, float64) from its ALTI contributions
    ``[L, T, T]`` (:func:`bertgeom.analysis.context_mixing.alti`) and its attention ``[L, H, T, T]``."""
    c = np.asarray(contributions, dtype=np.float64)
    roll = alti_rollout(c)
    attn_roll = rollout(attentions, FLOW_RESIDUAL)
    idx = np.arange(c.shape[-1])
    rho = row_spearman(roll, attn_roll)  # [L, T]
    with warnings.catch_warnings():  # every row constant (a one-token input): NaN, said in the docstring
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_rho = np.nanmean(rho, axis=-1)
    return {"alti_self": c[:, idx, idx].mean(axis=-1), "rollout_self": roll[:, idx, idx].mean(axis=-1),
            "attention_rollout_self": attn_roll[:, idx, idx].mean(axis=-1), "rank_agreement": mean_rho,
            "rank_agreement_first": rho[:, 0]}


def alti_over_set(loaded, items: Sequence, progress: Callable[[int, int], None] | None = None,
                  layer_weights=None) -> dict[str, np.ndarray]:
    """ALTI's reductions over the ``N`` inputs of ``items`` that could be read: every name of
    :data:`ALTI_SET_ARRAYS` as ``[N, L]`` (float32; see the module docstring), ``tokens [N]``,
    ``names [N]`` and ``errors`` (how many could not be read). ``progress(done, total)`` counts inputs,
    one at a time (ALTI, not the forward pass, is the cost: seconds per genome). ``layer_weights``: the
    model's (extracted once by the caller), else read from the model."""
    weights = layer_weights if layer_weights is not None else loaded

    def reduce(trace, item):
        red = alti_reductions(alti(trace, weights=weights), trace.attentions)
        return red, trace.attentions.shape[-1], item.name

    res = map_over_set(loaded, items, reduce, batch_size=1, progress=progress)
    L = loaded.num_layers
    out = {name: (np.stack([r[0][name] for r in res.results]) if res.results else np.zeros((0, L))).astype(np.float32)
           for name in ALTI_SET_ARRAYS}
    out.update(tokens=np.array([r[1] for r in res.results], dtype=np.int64),
               names=np.array([r[2] for r in res.results], dtype=str), errors=np.array([len(res.errors)]))
    return out
