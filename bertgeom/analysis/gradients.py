"""Gradient importance of attention (Clark et al. 2019 §3.2, Figure 3).

High attention is not the same as importance: Clark et al. found heads that put most of their
attention on [SEP] in the middle layers, yet the loss barely depends on those weights -- the
gradient ``|∂L/∂α_ij|`` of the loss with respect to each attention weight is small exactly where
attention to [SEP] is large, which reads as "attending to [SEP] is a no-op".

Here the attention weights ``α = softmax(QKᵀ/√d)`` of every head are recomputed from the shared
model's own layers (as in :mod:`bertgeom.analysis.ablation`: called, never changed) with the
autograd graph kept, and ``torch.autograd.grad`` returns ``G[l, h, i, j] = |∂L/∂α^{(l,h)}_ij|``
without touching the model's parameter gradients (thread-safe).

Objective: the classifier's cross-entropy ``L = −log p(y)`` for a class ``y`` (the predicted class
by default, or a given one).  A model loaded without a classification head has no loss to
differentiate, and the function says so in words that fit the model (:func:`no_loss_sentence`: whether
its checkpoint ships a masked-word head is read from the model, not assumed).  Clark et al. used
BERT's masked-LM loss on Wikipedia segments.

**Head importance** (Michel, Levy & Neubig 2019 §4.1, :func:`head_importance`): a gate ``ξ_h`` multiplies
each head's output (:func:`bertgeom.forward.run_forward`'s ``head_gates``, never transformers'
``head_mask``, which transformers 5 removed) and ``I_h = E_x |∂L(x)/∂ξ_h|`` at ``ξ = 1``, one backward
pass for every head and every input of a batch (each row has its own gates). Michel et al. normalise
``I`` per layer by its ℓ2 norm (:func:`normalise_per_layer`). The loss ``L``:

* a classifier: the cross-entropy of the input's class (its label over a labelled set; the predicted
  class otherwise);
* an encoder without a classifier: a masked-word loss. MiniLM ships no masked-LM head, so the words
  are predicted through the tied input embeddings, ``logits_i = h_i Eᵀ`` (BERT's masked-LM decoder
  without its transform layer and bias); a model with its own masked-LM head (``cls.predictions``)
  uses that head. 15 % of the content tokens (at least one; a fixed seed) are replaced by [MASK].

References: Clark et al. 2019 (arXiv:1906.04341) §3.2; Michel et al. 2019, *Are Sixteen Heads Really
Better than One?* (arXiv:1905.10650) §4.1 (importance score, per-layer normalisation), §4.2 (pruning
by it: 40 % of bert-base's heads on MNLI without a noticeable loss); docs/methods.md, "Head importance".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertgeom.metricdocs import MetricDoc, doc_table

__all__ = ["AttentionGradients", "attention_gradients", "gradient_by_key_kind", "InputGradients", "input_gradients",
           "HeadImportance",
           "head_importance", "normalise_per_layer", "masked_positions", "IMPORTANCE_DOCS", "MASK_SHARE",
           "no_loss_sentence"]

#: Share of the content tokens a masked-word loss masks (BERT's 15 %).
MASK_SHARE = 0.15

IMPORTANCE_DOCS: dict[str, MetricDoc] = doc_table({
    "importance": ("head importance (|∂L/∂ξ|)", "I_h = E_x |∂L(x)/∂ξ_h| at ξ = 1, ξ_h a gate on head h's output",
                   "Michel 2019 (arXiv:1905.10650) §4.1"),
    "importance_norm": ("head importance, per-layer ℓ2", "I_h / ‖I_layer‖_2",
                        "Michel 2019 (arXiv:1905.10650) §4.1 (normalisation by layer)"),
})


def no_loss_sentence(ad) -> str:
    """Why a model without a classifier has no gradient view, true for this model (``ad``: its
    :class:`~bertgeom.architectures.Adapter`): a masked-word head is named only when its checkpoint has one."""
    if ad.masked_lm:
        return ("This model has no classification head: its checkpoint ships a masked-word head, which bertgeom "
                "does not load, and the gradient view differentiates a classifier's loss.")
    return ("This model has no classification head (and its checkpoint ships no masked-word head), so there is no "
            "loss to take gradients of (the gradient view needs a classifier).")


@dataclass
class AttentionGradients:
    """``grad [L, H, T, T]`` = ``|∂L/∂α|``, ``attn [L, H, T, T]``, the ``target`` class and the ``loss``
    of one input (``[B, ...]`` arrays, ``target``/``loss`` per row, when a batch was asked for).
    ``res["grad"]`` still reads a field, for callers written against the earlier dict."""

    grad: np.ndarray
    attn: np.ndarray
    target: int | np.ndarray
    loss: float | np.ndarray

    def __getitem__(self, key: str):
        return getattr(self, key)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"grad": self.grad, "attn": self.attn, "target": np.asarray(self.target), "loss": np.asarray(self.loss)}

    def to_frame(self):
        """One row per head: mean ``|∂L/∂α|`` and the largest attention weight (single input)."""
        import pandas as pd

        from bertgeom.tables import head_label

        L, H = self.grad.shape[-4], self.grad.shape[-3]
        g = self.grad.reshape(-1, L, H, *self.grad.shape[-2:])[0]
        a = self.attn.reshape(-1, L, H, *self.attn.shape[-2:])[0]
        return pd.DataFrame({"head": [head_label(l, h) for l in range(L) for h in range(H)],
                             "mean |dL/dα|": g.mean(axis=(-1, -2)).ravel(),
                             "max attention": a.max(axis=(-1, -2)).ravel()})


def attention_gradients(loaded, input_ids, target: int | None = None, *, attention_mask=None) -> AttentionGradients:
    """Gradient of the cross-entropy of ``target`` (default: the predicted class) w.r.t. every
    attention weight, for ``input_ids [T]`` (or a batch ``[B, T]``, one backward pass for all rows:
    rows do not interact, so each row's gradient is its own loss's)."""
    import torch
    import torch.nn.functional as F

    from bertgeom.forward import ForwardError, adapter, run_forward

    ad = adapter(loaded)
    model = ad.model
    if ad.head is None:
        raise ForwardError(no_loss_sentence(ad))
    ids_np = np.asarray(input_ids, dtype=np.int64)
    single = ids_np.ndim == 1
    ids = torch.as_tensor(np.array(ids_np.reshape(-1, ids_np.shape[-1]), copy=True))
    dev = next(model.parameters()).device
    with torch.enable_grad():
        # the shared model's parameters do not require gradients: a leaf at the word embeddings still
        # carries every attention weight's gradient, and no parameter gradient is ever stored
        mask_t = None if attention_mask is None else torch.as_tensor(np.asarray(attention_mask)).to(dev)
        words = ad.token_embeddings(ids.to(dev), mask_t).detach().requires_grad_(True)
        out = run_forward(model, inputs_embeds=words, attention_mask=attention_mask, attentions=True,
                          grad=True, attention="eager")
        logits = out.logits
        y = logits.argmax(-1) if target is None else torch.full((ids.shape[0],), int(target), device=dev)
        losses = F.cross_entropy(logits, y, reduction="none")
        grads = torch.autograd.grad(losses.sum(), out.attentions)
    g = torch.stack(grads, dim=1).abs().float().cpu().numpy()  # [B, L, H, T, T]
    a = torch.stack(out.attentions, dim=1).detach().float().cpu().numpy()
    yy, ll = y.cpu().numpy(), losses.detach().float().cpu().numpy()
    if single:
        return AttentionGradients(g[0].copy(), a[0].copy(), int(yy[0]), float(ll[0]))
    return AttentionGradients(g, a, yy, ll)


def gradient_by_key_kind(grad: np.ndarray, attn: np.ndarray, is_cls, is_sep) -> dict[str, np.ndarray]:
    """Per head ``[L, H]``: mean ``|∂L/∂α|`` and mean attention on keys of each kind ([CLS], [SEP],
    other tokens), averaged over query rows and keys of that kind -- Clark's Figure 3 per head."""
    is_cls = np.asarray(is_cls, dtype=bool)
    is_sep = np.asarray(is_sep, dtype=bool)
    kinds = {"[CLS]": is_cls, "[SEP]": is_sep, "other": ~(is_cls | is_sep)}
    out = {}
    for name, m in kinds.items():
        if m.any():
            out[f"grad {name}"] = grad[..., m].mean(axis=(-1, -2))
            out[f"attn {name}"] = attn[..., m].sum(axis=-1).mean(axis=-1)  # share of each row on these keys
    return out


@dataclass(frozen=True)
class InputGradients:
    """One input's :class:`AttentionGradients` (``gradients.grad``, ``.attn``, ``.loss``) and their
    means by key kind (:func:`gradient_by_key_kind`: ``"grad [SEP]"``, ``"attn other"``... ``[L, H]``,
    a kind absent from the input left out), what the *Gradient importance* tab draws."""

    gradients: AttentionGradients
    kinds: dict[str, np.ndarray]


def input_gradients(loaded, encoded, target: int | None = None) -> InputGradients:
    """:func:`attention_gradients` of one encoded input (``encoded.input_ids``, ``.is_cls``, ``.is_sep``)
    with their means by key kind (Clark et al. 2019, Figure 3 per head)."""
    res = attention_gradients(loaded, encoded.input_ids, target)
    return InputGradients(res, gradient_by_key_kind(res.grad, res.attn, encoded.is_cls, encoded.is_sep))


@dataclass
class HeadImportance:
    """``importance [B, L, H]`` = ``|∂L/∂ξ_h|`` per input (``[L, H]`` for one input), the ``loss`` per
    input and the ``objective`` used (``"cross-entropy"``, ``"masked-word (tied embeddings)"`` or
    ``"masked-word (the model's head)"``)."""

    importance: np.ndarray
    loss: np.ndarray
    objective: str


def normalise_per_layer(importance: np.ndarray) -> np.ndarray:
    """``I / ‖I_layer‖_2`` over the heads of each layer (Michel et al. §4.1); a zero layer stays 0."""
    I = np.asarray(importance, dtype=np.float64)
    n = np.sqrt((I * I).sum(axis=-1, keepdims=True))
    return np.divide(I, n, out=np.zeros_like(I), where=n > 0)


def masked_positions(content_mask, share: float = MASK_SHARE, seed: int = 0) -> np.ndarray:
    """``[B, T]`` bool: ``share`` of each row's content tokens (at least one), drawn with ``seed``."""
    content = np.atleast_2d(np.asarray(content_mask, dtype=bool))
    rng = np.random.default_rng(seed)
    out = np.zeros_like(content)
    for b, row in enumerate(content):  # one draw per input (rows differ in length)
        idx = np.flatnonzero(row)
        if idx.size:
            k = max(1, int(round(share * idx.size)))
            out[b, rng.choice(idx, size=k, replace=False)] = True
    return out


def _mask_token_id(loaded) -> int | None:
    tok = getattr(loaded, "tokenizer", None)
    mid = getattr(tok, "mask_token_id", None)
    return None if mid is None else int(mid)


def _word_matrix(word_embeddings):
    """The ``[V, D_emb]`` word-embedding matrix of an adapter's ``word_embeddings`` (a module or a tensor)."""
    return getattr(word_embeddings, "weight", word_embeddings)


def head_importance(loaded, input_ids, attention_mask=None, *, targets=None, content_mask=None,
                    mask_share: float = MASK_SHARE, seed: int = 0) -> HeadImportance:
    """``|∂L/∂ξ_h|`` of every head for ``input_ids [T]`` (or a padded batch ``[B, T]`` with
    ``attention_mask``): one forward with gates ``ξ = 1`` and one backward (module docstring).

    ``targets``: the class of each input for a classifier (an int, or one per row; default: the
    predicted class). ``content_mask [B, T]``: the tokens a masked-word loss may mask (default: every
    real token but the first and the last). Raises :class:`~bertgeom.forward.ForwardError` (one
    sentence) for an encoder with neither a classifier nor a [MASK] token."""
    import torch
    import torch.nn.functional as F

    from bertgeom.forward import ForwardError, adapter, run_forward

    ad = adapter(loaded)
    model, head = ad.model, ad.head
    ids_np = np.asarray(input_ids, dtype=np.int64)
    single = ids_np.ndim == 1
    ids = np.array(ids_np.reshape(-1, ids_np.shape[-1]), copy=True)
    B, T = ids.shape
    real = (np.ones((B, T), dtype=bool) if attention_mask is None
            else np.asarray(attention_mask).reshape(B, T).astype(bool))
    L, H = ad.num_layers, ad.num_heads
    dev = next(model.parameters()).device
    mlm_head = getattr(getattr(model, "cls", None), "predictions", None)
    objective = "cross-entropy"
    picked = None
    if head is None:
        mask_id = _mask_token_id(loaded)
        if mask_id is None:
            raise ForwardError("This encoder has neither a classifier nor a [MASK] token, so head importance has "
                               "no loss to differentiate.")
        if content_mask is None:
            content_mask = real.copy()
            last = real.sum(axis=1) - 1
            content_mask[:, 0] = False
            content_mask[np.arange(B), np.maximum(last, 0)] = False
        picked = masked_positions(np.asarray(content_mask, dtype=bool).reshape(B, T) & real, mask_share, seed)
        ids_in = np.where(picked, mask_id, ids)
        objective = "masked-word (the model's head)" if mlm_head is not None else "masked-word (tied embeddings)"
        if mlm_head is None and _word_matrix(ad.word_embeddings).shape[-1] != ad.hidden_size:
            raise ForwardError("This encoder's word embeddings are narrower than its hidden states and it ships no "
                               "masked-word head here, so head importance has no masked-word loss to differentiate.")
    else:
        ids_in = ids
    with torch.enable_grad():
        gates = torch.ones((B, L, H), device=dev, requires_grad=True)
        out = run_forward(model, ids_in, real.astype(np.int64), head_gates=gates, grad=True, attention="eager")
        if head is not None:
            logits = out.logits
            if targets is None:
                y = logits.argmax(-1)
            else:
                y = torch.as_tensor(np.broadcast_to(np.asarray(targets, dtype=np.int64), (B,)).copy(), device=dev)
            losses = F.cross_entropy(logits, y, reduction="none")
        else:
            hidden = out.last_hidden
            word_logits = (mlm_head(hidden) if mlm_head is not None
                           else hidden @ _word_matrix(ad.word_embeddings).T)  # [B, T, V]
            per_token = F.cross_entropy(word_logits.transpose(1, 2), torch.as_tensor(ids, device=dev),
                                        reduction="none")  # [B, T]
            where = torch.as_tensor(picked, device=dev, dtype=per_token.dtype)
            losses = (per_token * where).sum(-1) / where.sum(-1).clamp_min(1.0)
        (grad,) = torch.autograd.grad(losses.sum(), gates)
    imp = grad.abs().float().cpu().numpy()
    loss = losses.detach().float().cpu().numpy()
    if single:
        return HeadImportance(imp[0].copy(), loss[:1].copy(), objective)
    return HeadImportance(imp, loss, objective)
