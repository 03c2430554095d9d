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
by default, or a given one).  Models without a classification head (MiniLM ships neither a
classifier nor its masked-language-model head) have no loss to differentiate, and the function
says so.  Clark et al. used BERT's masked-LM loss on Wikipedia segments.
"""

from __future__ import annotations

import numpy as np

__all__ = ["attention_gradients", "gradient_by_key_kind"]


def attention_gradients(loaded, input_ids, target: int | None = None) -> dict[str, np.ndarray | int]:
    """``{"grad": [L, H, T, T] |∂L/∂α|, "attn": [L, H, T, T], "target": y, "loss": L}`` for one input."""
    import torch

    from bertgeom.analysis.ablation import AblationError, _model_parts

    model, base, emb, layers, head = _model_parts(loaded)
    if head is None:
        raise AblationError("This model has no classification head, so there is no loss to take gradients of "
                            "(the gradient view needs a classifier, such as the variant model).")
    ids = torch.tensor(np.asarray(input_ids, dtype=np.int64).reshape(1, -1))  # a copy: shared ids are read-only
    probs_all = []
    with torch.enable_grad():
        # the shared model's parameters may not require gradients: a graph rooted at the embeddings
        # still carries every attention weight's gradient, and no parameter gradient is ever stored
        x = emb(input_ids=ids, token_type_ids=torch.zeros_like(ids)).detach().requires_grad_(True)
        B, T, _ = x.shape
        for layer in layers:
            sa = layer.attention.self
            n_heads, d = int(sa.num_attention_heads), int(sa.attention_head_size)

            def split(lin, x=x):
                return lin(x).view(B, T, n_heads, d).transpose(1, 2)

            q, k, v = split(sa.query), split(sa.key), split(sa.value)
            probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * (d**-0.5), dim=-1)
            probs_all.append(probs)
            ctx = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, n_heads * d)
            att_out = layer.attention.output(ctx, x)
            x = layer.output(layer.intermediate(att_out), att_out)
        logits = head(x)[0]
        y = int(torch.argmax(logits)) if target is None else int(target)
        loss = torch.nn.functional.cross_entropy(logits[None], torch.tensor([y]))
        grads = torch.autograd.grad(loss, probs_all)
    return {
        "grad": torch.stack([g[0] for g in grads]).abs().float().numpy().copy(),
        "attn": torch.stack([p[0] for p in probs_all]).detach().float().numpy().copy(),
        "target": y,
        "loss": float(loss.detach()),
    }


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
