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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AttentionGradients", "attention_gradients", "gradient_by_key_kind", "no_loss_sentence"]


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
