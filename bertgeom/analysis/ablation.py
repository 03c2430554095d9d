"""Interventions on heads: Kovaleva et al.'s head disabling, and head-by-head checkpoint comparison.

**Disabling** (Kovaleva et al. 2019 §4.6, docs/methods.md §7).  A disabled head's
attention is replaced by the constant ``1/L`` for every query and every *real* key (L = the
number of non-padding tokens), before dropout; nothing is retrained.  Hugging Face's
``head_mask`` would *zero* the head instead, which is a different intervention.

Design choice -- a functional recomputation, no hooks, no copies.  The model loaded by the app
is shared by every session (and thread) of the server and must never be mutated, so this
module neither registers hooks on it nor patches its modules.  :func:`forward_with_disabled_heads`
calls :func:`bertgeom.forward.run_forward` (the one forward with intervention points), which
re-runs the encoder *by hand* from the model's own sub-modules, which are only called, never
changed: ``embeddings`` -> per layer ``query``/``key``/``value`` linears, our softmax (where
disabled heads are swapped for the uniform distribution), ``attention.output``,
``intermediate``, ``output`` -> ``pooler`` and ``classifier``.  This is thread-safe (each call
owns its tensors), costs no deep copy of the weights, and supports a *batch of different
ablations* at once (one ``[L, H]`` mask per batch element), which makes the one-head-at-a-time
sweep of Kovaleva's Figure 8 a few batched passes.  When no attention map is asked for, each
layer runs fused attention (``scaled_dot_product_attention``) and a disabled head's output is
written directly as the mean of V over the real keys (what a uniform map times V gives), so no
``[B, H, T, T]`` tensor is built: the one-head sweep of a 427-token genome took 3.7 s instead of
6.1-7.0 s here, with logits equal to 1e-6.  The recomputation follows
``transformers``' eager BERT code (``eager_attention_forward``: scores ``Q K^T * d^-1/2`` plus
the additive padding mask, softmax, ``@ V``); the tests check that disabling nothing
reproduces the model's own logits, attentions and hidden states.  Supported: BERT-family
encoders with absolute position embeddings (``BertModel``, ``BertForSequenceClassification``
and RoBERTa/ELECTRA-style models with the same layer layout).

**Checkpoint comparison** (Kovaleva et al. §4.3, docs/methods.md §7).  Kovaleva compare
``vec(A_pre)`` and ``vec(A_ft)`` on the *same input*.  Across checkpoints with different
vocabularies (MiniLM's English word pieces vs the variant model's 12-mers) no input
exists that both can read, so two input-free and one same-layer-input comparisons are
offered, all for checkpoints of the same shape (layers, heads, hidden size):

* :func:`weight_cosine` -- cosine (Frobenius) between the heads' bilinear forms
  ``W_QK,h = Q~_h K~_h^T`` (query-key circuit, biases folded in with a homogeneous coordinate)
  and ``W_OV,h = W_O,h W_V,h`` (what the head writes).  Both are invariant to any change of
  basis *inside* the head, so only a change of what the head computes moves them.  Meaningful
  when the two checkpoints share their residual coordinates (a fine-tuned model and its
  parent); unrelated models score about 0.
* :func:`map_cosine_on_shared_inputs` -- Kovaleva's cosine of attention maps, with both
  checkpoints' layer ``l`` applied to the *same* layer input ``X_l`` (the hidden states of one
  model for one input): it isolates how much each head's query-key circuit changed from
  changes further upstream.

All of it is vectorised over layers and heads (``einsum`` on stacked weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from bertgeom.attention import attention_from_weights, softmax
from bertgeom.forward import ForwardError, adapter, run_forward
from bertgeom.tables import head_label

__all__ = [
    "AblationError",
    "disabled_mask",
    "head_names",
    "ForwardResult",
    "forward_with_disabled_heads",
    "cls_cosine",
    "Ablation",
    "ablate",
    "Sweep",
    "sweep_single_heads",
    "sweep_layers",
    "same_shape",
    "weight_cosine",
    "bilinear_cosine",
    "map_cosine_on_shared_inputs",
    "checkpoint_cosines",
]


#: The model cannot be recomputed (one sentence); the forward's own error, kept under this name.
AblationError = ForwardError


# ----------------------------------------------------------------------------------------
# Masks
# ----------------------------------------------------------------------------------------


def disabled_mask(
    num_layers: int,
    num_heads: int,
    heads: Iterable[tuple[int, int]] = (),
    layers: Iterable[int] = (),
) -> np.ndarray:
    """Boolean ``[L, H]`` mask: the 0-based ``(layer, head)`` pairs in ``heads`` and every head of
    the 0-based ``layers`` are disabled."""
    m = np.zeros((int(num_layers), int(num_heads)), dtype=bool)
    for l, h in heads:
        if not (0 <= l < num_layers and 0 <= h < num_heads):
            raise IndexError(f"head ({l}, {h}) outside a {num_layers} x {num_heads} model")
        m[l, h] = True
    for l in layers:
        if not 0 <= l < num_layers:
            raise IndexError(f"layer {l} outside a {num_layers}-layer model")
        m[l, :] = True
    return m


def head_names(mask: np.ndarray) -> list[str]:
    """1-based display names (``"L3 H5"``) of the ``True`` entries of an ``[L, H]`` mask."""
    ll, hh = np.nonzero(np.asarray(mask, dtype=bool))
    return [head_label(l, h) for l, h in zip(ll, hh)]


# ----------------------------------------------------------------------------------------
# Functional forward pass
# ----------------------------------------------------------------------------------------


@dataclass
class ForwardResult:
    """Outputs of :func:`forward_with_disabled_heads` (float32 numpy, batch first).

    ``cls`` is the [CLS] (position 0) vector after every layer ``[B, L+1, D]`` (index 0 is the
    embedding output; when resuming at ``start_layer > 0`` only the layers computed, so
    ``cls[:, -1]`` is always the final layer); ``last_hidden`` the final layer ``[B, T, D]``; ``logits`` ``[B, C]`` for
    a classifier, else None; ``attentions`` ``[B, L, H, T, T]`` when requested.
    """

    cls: np.ndarray
    last_hidden: np.ndarray
    logits: np.ndarray | None = None
    attentions: np.ndarray | None = None
    hidden_states: np.ndarray | None = None  # [B, L+1, T, D] when requested

    @property
    def probs(self) -> np.ndarray | None:
        if self.logits is None:
            return None
        return softmax(self.logits)


def _layers_and_heads(loaded) -> tuple[int, int]:
    """``(layers, heads)`` of the model, read from its architecture adapter."""
    ad = adapter(loaded)
    return ad.num_layers, ad.num_heads


def forward_with_disabled_heads(
    loaded,
    input_ids,
    disabled: np.ndarray | None = None,
    *,
    attention_mask=None,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
    start_layer: int = 0,
    start_hidden=None,
    disable_as: str = "uniform",
    precision: str = "fp32",
) -> ForwardResult:
    """Run the encoder with the heads in ``disabled`` set to uniform attention over real tokens
    (:func:`bertgeom.forward.run_forward`, recomputed: eager when maps are returned, fused SDPA otherwise).

    Parameters
    ----------
    loaded : a :class:`~bertgeom.models.LoadedModel` (or a bare ``transformers`` model); only read.
    input_ids : ``[T]`` or ``[B, T]`` token ids.
    disabled : ``[L, H]`` (same ablation for the whole batch) or ``[B, L, H]`` boolean mask;
        None disables nothing.
    attention_mask : ``[B, T]`` 1 for real tokens, 0 for padding (default: all real).
    start_layer, start_hidden : resume from the *input* of layer ``start_layer`` (``[B, T, D]``,
        e.g. a baseline's hidden states), skipping the unchanged layers below it.  Disabled
        heads below ``start_layer`` are then ignored (the caller vouches that none is set).
    disable_as : ``"uniform"`` (Kovaleva) or ``"zero"`` (the head's output removed, ``head_mask``).
    """
    ids = np.array(input_ids, dtype=np.int64, copy=True)
    if ids.ndim == 1:
        ids = ids[None]
    out = run_forward(
        loaded, ids, attention_mask, attentions=output_attentions, hidden_states=output_hidden_states,
        disabled=disabled, disable_as=disable_as, attention="eager" if output_attentions else "sdpa",
        precision=precision, start_layer=start_layer, start_hidden=start_hidden,
    ).arrays()
    return ForwardResult(
        cls=out["cls"],
        last_hidden=out["last_hidden"],
        logits=out.get("logits"),
        attentions=out.get("attentions"),
        hidden_states=out.get("hidden_states"),
    )


def cls_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity along the last axis (e.g. [CLS] vectors before/after an ablation)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    num = (a * b).sum(-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide(num, den, out=np.full(np.shape(num), np.nan), where=den > 0)


def _batch_size(n_heads: int, T: int, budget: float = 2.0e7) -> int:
    """Ablations per batch so that one layer's ``[B, H, T, T]`` scores stay near ``budget`` floats."""
    return int(max(1, min(64, budget // max(1, n_heads * T * T))))


@dataclass(frozen=True)
class Ablation:
    """One input before and after disabling some heads: the [CLS] vector after every layer
    ``cls_before`` / ``cls_after [L+1, D]`` (index 0 the embeddings) and, for a classifier, the
    logits ``[C]`` (else None)."""

    cls_before: np.ndarray
    cls_after: np.ndarray
    logits_before: np.ndarray | None
    logits_after: np.ndarray | None


def ablate(loaded, input_ids, heads) -> Ablation:
    """Kovaleva's ablation of ``heads`` (0-based ``(layer, head)`` pairs) on one input ``[T]``."""
    mask = disabled_mask(*_layers_and_heads(loaded), heads=heads)
    base = forward_with_disabled_heads(loaded, input_ids)
    after = forward_with_disabled_heads(loaded, input_ids, mask)
    return Ablation(base.cls[0], after.cls[0], None if base.logits is None else base.logits[0],
                    None if after.logits is None else after.logits[0])


@dataclass(frozen=True)
class Sweep:
    """Every head (:func:`sweep_single_heads`) or every layer (:func:`sweep_layers`) disabled in
    turn on one input: the final [CLS] ``cls [L, H, D]`` / ``[L, D]`` and the ``logits [L, H, C]`` /
    ``[L, C]`` (classifiers, else None) of each ablation, beside the intact model's ``base_cls [D]``
    and ``base_logits [C]`` (or None)."""

    cls: np.ndarray
    logits: np.ndarray | None
    base_cls: np.ndarray
    base_logits: np.ndarray | None


def sweep_single_heads(loaded, input_ids, *, budget: float = 2.0e7) -> Sweep:
    """Kovaleva Figure 8 for one input: every head disabled on its own (:class:`Sweep`, ``[L, H, ...]``).
    Ablations of layer ``l`` start from the baseline input of layer ``l`` (the layers below are
    unchanged) and run as batches of one-head masks.
    """
    ids = np.asarray(input_ids).reshape(-1)
    L, H = _layers_and_heads(loaded)
    T = ids.size
    base = forward_with_disabled_heads(loaded, ids, None, output_hidden_states=True)
    D = base.cls.shape[-1]
    out_cls = np.zeros((L, H, D), dtype=np.float32)
    out_logits = None if base.logits is None else np.zeros((L, H, base.logits.shape[-1]), dtype=np.float32)
    bs = _batch_size(H, T, budget)
    for l in range(L):
        for h0 in range(0, H, bs):
            hs = list(range(h0, min(H, h0 + bs)))
            masks = np.zeros((len(hs), L, H), dtype=bool)
            masks[np.arange(len(hs)), l, hs] = True
            res = forward_with_disabled_heads(
                loaded, np.broadcast_to(ids, (len(hs), T)), masks,
                start_layer=l, start_hidden=base.hidden_states[0, l][None],
            )
            out_cls[l, hs] = res.cls[:, -1]
            if out_logits is not None:
                out_logits[l, hs] = res.logits
    return Sweep(out_cls, out_logits, base.cls[0, -1], None if base.logits is None else base.logits[0])


def sweep_layers(loaded, input_ids) -> Sweep:
    """Kovaleva Figure 9 for one input: every head of one layer disabled, for each layer (:class:`Sweep`,
    ``[L, ...]``)."""
    ids = np.asarray(input_ids).reshape(-1)
    L, H = _layers_and_heads(loaded)
    base = forward_with_disabled_heads(loaded, ids, None, output_hidden_states=True)
    cls, logits = [], []
    for l in range(L):
        m = disabled_mask(L, H, layers=[l])
        res = forward_with_disabled_heads(loaded, ids, m, start_layer=l, start_hidden=base.hidden_states[0, l][None])
        cls.append(res.cls[0, -1])
        if res.logits is not None:
            logits.append(res.logits[0])
    return Sweep(np.stack(cls), np.stack(logits) if logits else None, base.cls[0, -1],
                 None if base.logits is None else base.logits[0])


# ----------------------------------------------------------------------------------------
# Checkpoint comparison
# ----------------------------------------------------------------------------------------


def _shape(weights) -> tuple[int, int, int]:
    lw = weights[0]
    return len(weights), int(lw.num_heads), int(lw.d_model)


def same_shape(weights_a, weights_b) -> str | None:
    """None when the two checkpoints (lists of :class:`~bertgeom.weights.LayerWeights`) have the
    same layers, heads and hidden size; otherwise a sentence saying how they differ."""
    a, b = _shape(weights_a), _shape(weights_b)
    if a == b:
        return None
    return (
        f"The checkpoints differ in shape ({a[0]} layers x {a[1]} heads, hidden {a[2]} vs "
        f"{b[0]} x {b[1]}, hidden {b[2]}), so their heads cannot be matched one to one."
    )


def _stack(weights, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Factors ``(A, B)`` ``[L, H, D(+1), d]`` with the head's bilinear form ``A B^T``."""
    if what == "qk":
        # scores = (x W_q^T + b_q)_h . (y W_k^T + b_k)_h = [x,1] Q~ K~^T [y,1]^T
        A = np.stack([np.concatenate([lw.Wq_heads.transpose(0, 2, 1), lw.bq_heads[:, None, :]],
                                     axis=1) for lw in weights])
        B = np.stack([np.concatenate([lw.Wk_heads.transpose(0, 2, 1), lw.bk_heads[:, None, :]],
                                     axis=1) for lw in weights])
    elif what == "ov":
        # head output written to the residual: W_O,h (W_V,h x): A = W_O,h [D, d], B = W_V,h^T [D, d]
        A = np.stack([lw.Wo_heads for lw in weights])
        B = np.stack([lw.Wv_heads.transpose(0, 2, 1) for lw in weights])
    else:
        raise ValueError("what must be 'qk' or 'ov'")
    return A.astype(np.float64), B.astype(np.float64)


def bilinear_cosine(A1: np.ndarray, B1: np.ndarray, A2: np.ndarray, B2: np.ndarray) -> np.ndarray:
    """Frobenius cosine of ``A1 B1^T`` and ``A2 B2^T`` for stacks ``[..., D, d]`` without forming
    the ``D x D`` products: ``<A1 B1^T, A2 B2^T> = sum((A1^T A2) * (B1^T B2))``."""

    def inner(a1, b1, a2, b2):
        ga = np.einsum("...ki,...kj->...ij", a1, a2)
        gb = np.einsum("...ki,...kj->...ij", b1, b2)
        return (ga * gb).sum(axis=(-1, -2))

    num = inner(A1, B1, A2, B2)
    den = np.sqrt(np.maximum(inner(A1, B1, A1, B1), 0) * np.maximum(inner(A2, B2, A2, B2), 0))
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def weight_cosine(weights_a, weights_b) -> dict[str, np.ndarray]:
    """Per-head cosine ``[L, H]`` of the query-key (``"qk"``) and value-output (``"ov"``) circuits
    of two checkpoints of the same shape (lists of :class:`~bertgeom.weights.LayerWeights`)."""
    why = same_shape(weights_a, weights_b)
    if why:
        raise ValueError(why)
    out = {}
    for what in ("qk", "ov"):
        A1, B1 = _stack(weights_a, what)
        A2, B2 = _stack(weights_b, what)
        out[what] = bilinear_cosine(A1, B1, A2, B2)
    return out


def map_cosine_on_shared_inputs(weights_a, weights_b, layer_inputs: np.ndarray) -> dict[str, np.ndarray]:
    """Kovaleva's per-head cosine of attention maps, both checkpoints reading the same layer
    inputs ``[L, T, D]``.  Returns ``{"cos": [L, H], "maps_a": [L, H, T, T], "maps_b": ...}``."""
    why = same_shape(weights_a, weights_b)
    if why:
        raise ValueError(why)
    from bertgeom.analysis.headsim import cosine_similarity_maps

    a = attention_from_weights(weights_a, layer_inputs)
    b = attention_from_weights(weights_b, layer_inputs)
    return {"cos": cosine_similarity_maps(a, b), "maps_a": a.astype(np.float32), "maps_b": b.astype(np.float32)}


def map_cosine_by_layer(weights_a, weights_b, layer_inputs: np.ndarray) -> np.ndarray:
    """``[L, H]``: the ``"cos"`` of :func:`map_cosine_on_shared_inputs`, one layer at a time, without
    keeping the maps (two layers' maps in memory instead of every layer's: 8x less for a 427-token
    genome, and the step that made the comparison slow)."""
    why = same_shape(weights_a, weights_b)
    if why:
        raise ValueError(why)
    from bertgeom.analysis.headsim import cosine_similarity_maps
    from bertgeom.attention import correct_attention

    X = np.asarray(layer_inputs, dtype=np.float64)
    if X.ndim != 3 or X.shape[0] != len(weights_a):
        raise ValueError(f"layer_inputs must be [L={len(weights_a)}, T, D], got {X.shape}")
    return np.stack([cosine_similarity_maps(correct_attention(X[l], wa), correct_attention(X[l], wb))
                     for l, (wa, wb) in enumerate(zip(weights_a, weights_b))])


def checkpoint_cosines(weights_a, weights_b, hidden_states: np.ndarray) -> dict[str, np.ndarray]:
    """Two checkpoints of one shape compared head by head, each ``[L, H]``: the cosines of their
    query-key and value-output circuits (:func:`weight_cosine`) and of their attention maps on the same
    layer inputs ``hidden_states [L, T, D]`` (:func:`map_cosine_by_layer`; Kovaleva et al. 2019 §4.3)."""
    out = weight_cosine(weights_a, weights_b)
    out["maps"] = map_cosine_by_layer(weights_a, weights_b, hidden_states)
    return out
