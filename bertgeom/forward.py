"""One forward pass with intervention points, and the precision policy, stated once.

Every part of bertgeom that runs a model goes through :func:`run_forward` (traces, set runners,
precompute, head disabling, attention gradients, integrated gradients, classification). Its
intervention points:

* ``attentions`` / ``hidden_states`` -- which internals are returned;
* ``disabled`` -- heads disabled (``[L, H]`` for the batch or ``[B, L, H]``, one ablation per row),
  by ``disable_as="uniform"`` (Kovaleva et al.'s constant ``1/n`` over the real keys) or ``"zero"``
  (the head's output removed, what Hugging Face's former ``head_mask`` did);
* ``head_gates`` -- a multiplicative gate on every head's output (``[L, H]`` or ``[B, L, H]``, 1 = as
  trained), applied to the head's slice of the context before ``attention.output.dense``: Michel et
  al.'s xi_h; a gate tensor that requires grad gives ``dL/dxi_h`` (never transformers' ``head_mask``);
* ``remove_skips`` / ``remove_mlps`` -- Dong et al.'s path ablations: every layer without its two
  residual connections (``LN(dense(ctx))`` and ``LN(dense(ffn))``), or with its feed-forward block
  replaced by the identity (the layer's output is the attention block's), LayerNorms kept;
* ``grad`` -- autograd kept (through the attention weights when they are returned, through the input
  embeddings with ``inputs_embeds``); otherwise ``torch.inference_mode``;
* ``inputs_embeds`` -- word embeddings in place of token ids (integrated gradients interpolates them);
* ``start_layer`` / ``start_hidden`` -- resume at a layer's input (an ablation leaves the layers below
  unchanged);
* ``attention`` -- ``"model"`` (the model's own forward, whatever attention it was loaded with: eager
  for the shared model), ``"eager"`` or ``"sdpa"`` (the functional recomputation below), ``"auto"``
  (the model's own when nothing is intervened on, else eager when attention weights are wanted and
  fused SDPA when not);
* ``precision`` -- ``"fp32"`` or ``"bf16"`` (autocast on fp32 weights; see :func:`resolve_precision`);
* device -- every input tensor is moved to the model's device; outputs stay there.

**Functional recomputation, no hooks, no copies.** The loaded model is shared by every session of a
server and never mutated: the recomputation reads the model through its architecture adapter
(:func:`bertgeom.architectures.adapter_of`: the family's own embedding module, then per layer views of
its own Q/K/V/O and MLP weights and its LayerNorm modules) and runs one layer function for every family
(:func:`_layer`: post- or pre-LayerNorm, plain or gated MLP, absolute or rotary positions, global or
local attention), doing the attention itself as transformers' eager code does (scores
``Q K^T d^-1/2`` plus the padding mask, softmax, ``@ V``). The tests check that it reproduces the
model's own logits, attention weights and hidden states for BERT, RoBERTa, ELECTRA, DistilBERT,
ALBERT, ESM-2 and ModernBERT (tests/test_architectures.py). Without attention maps a uniform head's
output is written directly as the mean of V over the real keys (what a uniform map times V gives), so
no ``[B, H, T, T]`` tensor is built. Head disabling is this engine's own intervention (transformers 5
dropped ``head_mask``), so it works on every family.

**Precision policy.** :func:`resolve_precision`: ``auto`` means bf16 for forwards whose numbers
nobody reads one by one (classification, and attributions whose completeness is checked) on a device
with bf16 units -- a CUDA GPU that supports it, or a CPU where torch reports AVX-512/AMX bf16 kernels
(``torch.backends.cpu.get_cpu_capability()``, ``torch.ops.mkldnn._is_mkldnn_bf16_supported()``) --
and fp32 everywhere else; analyses read as numbers (attention maps, head features, cone index) stay
fp32 unless asked. docs/methods.md ("Numerical precision") measures what bf16 changes.

References: Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT", §4.6 (head disabling);
Michel et al. 2019, "Are Sixteen Heads Really Better than One?" (arXiv:1905.10650) §2.3, §4.1 (head
masking, the gates' gradients); Dong et al. 2021, "Attention is Not All You Need" (arXiv:2103.03404) §4
(path ablations: the authors' surgery modules remove the skips and replace the MLP by the identity); PyTorch
``scaled_dot_product_attention`` and ``torch.autocast`` documentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "PRECISIONS",
    "PURPOSES",
    "ForwardError",
    "ForwardOutput",
    "bf16_pays_off",
    "bf16_supported",
    "matmul_peak",
    "resolve_precision",
    "run_forward",
    "model_parts",
    "adapter",
]

#: The choices of ``--precision``.
PRECISIONS = ("auto", "fp32", "bf16")

#: What a forward is for, and whether ``auto`` may run it in bf16 there: classification (a call and
#: probabilities) and attributions (their completeness gap is checked and shown) may; analyses whose
#: numbers are read one by one (attention maps, head features, cone index, ablation effects) may not.
PURPOSES = {"classify": True, "attribution": True, "analysis": False}


class ForwardError(ValueError):
    """The model cannot be recomputed by :func:`run_forward` (one sentence)."""


def bf16_supported(device: str = "cpu") -> bool:
    """Whether ``device`` has bf16 matrix units torch uses: a CUDA GPU with bf16, or a CPU whose
    capability torch reports as AVX-512 or AMX with oneDNN bf16 kernels available."""
    import torch

    kind = str(device).split(":")[0]
    if kind == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if kind != "cpu":
        return False
    try:
        capability = str(torch.backends.cpu.get_cpu_capability()).upper()
        return capability.startswith(("AVX512", "AMX")) and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # noqa: BLE001 - an older or stripped torch: no bf16 claim
        return False


#: bf16 counts as faster on a CPU when its matmuls run at least this many times the fp32 rate.
BF16_MIN_SPEEDUP = 1.2
_BF16_PAYS_OFF: dict[str, bool] = {}


def matmul_peak(dtype_name: str, n: int = 2048, repeats: int = 5) -> float:
    """Best FLOP/s of an ``n x n`` CPU matmul in ``dtype_name`` (``fp32``/``bf16``) on this machine,
    now: one warm-up (the kernel's first call picks and prepares it), then the best of ``repeats``."""
    import time

    import torch

    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    with torch.inference_mode():
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        torch.mm(a, b)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def bf16_pays_off(device: str = "cpu") -> bool:
    """Whether bf16 is worth running on ``device``: :func:`bf16_supported`, and on a CPU its matmuls
    measured at least :data:`BF16_MIN_SPEEDUP` times as fast as fp32's (:func:`matmul_peak` of a
    1024-wide product, once per process: ~0.1 s). The units alone do not settle it: an Intel Xeon
    (family 6 model 207) under a hypervisor that hides its AMX reports AVX-512 bf16 and oneDNN bf16
    kernels, yet ran bf16 matmuls at about half its fp32 rate, so bf16 made every forward slower there."""
    kind = str(device).split(":")[0]
    if not bf16_supported(device):
        return False
    if kind != "cpu":
        return True
    if kind not in _BF16_PAYS_OFF:
        _BF16_PAYS_OFF[kind] = matmul_peak("bf16", 1024) / matmul_peak("fp32", 1024) >= BF16_MIN_SPEEDUP
    return _BF16_PAYS_OFF[kind]


def resolve_precision(precision: str = "auto", device: str = "cpu", purpose: str = "analysis") -> str:
    """``"fp32"`` or ``"bf16"`` for a forward with ``purpose`` (a key of :data:`PURPOSES`) on ``device``.

    ``auto`` -> bf16 when the purpose allows it and :func:`bf16_pays_off` (bf16 units that run
    faster than fp32 here), else fp32; ``fp32`` and ``bf16`` as asked (bf16 runs anywhere, only slower
    without bf16 units). Raises ``ValueError`` with one sentence for an unknown choice."""
    precision = (precision or "auto").strip().lower()
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use auto, fp32 or bf16.")
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}: one of {', '.join(PURPOSES)}.")
    if precision != "auto":
        return precision
    return "bf16" if PURPOSES[purpose] and bf16_pays_off(device) else "fp32"


@dataclass
class ForwardOutput:
    """What :func:`run_forward` returns: torch tensors on the model's device, batch first.

    ``logits [B, C]`` (None without a classifier); ``hidden_states`` the ``L+1`` layer states
    ``[B, T, D]`` (only the layers computed when resuming at ``start_layer``; None unless asked);
    ``attentions`` the ``L`` maps ``[B, H, T, T]`` (None unless asked); ``cls [B, L'+1, D]`` the
    [CLS] vector after every layer computed; ``last_hidden [B, T, D]``; ``precision`` as run."""

    last_hidden: Any = None
    cls: Any = None
    logits: Any = None
    hidden_states: tuple | None = None
    attentions: tuple | None = None
    precision: str = "fp32"

    def arrays(self) -> dict[str, np.ndarray]:
        """Float32 numpy copies (on the CPU) of what was computed, stacked: ``hidden_states
        [B, L+1, T, D]``, ``attentions [B, L, H, T, T]``, ``cls``, ``last_hidden``, ``logits``."""
        import torch

        def np32(t):
            return t.detach().float().cpu().numpy().copy()

        out = {}
        if self.last_hidden is not None:
            out["last_hidden"] = np32(self.last_hidden)
        if self.cls is not None:
            out["cls"] = np32(self.cls)
        if self.logits is not None:
            out["logits"] = np32(self.logits)
        if self.hidden_states is not None:
            out["hidden_states"] = np32(torch.stack(self.hidden_states, dim=1))
        if self.attentions is not None:
            out["attentions"] = np32(torch.stack(self.attentions, dim=1))
        return out

    def to_frame(self, labels=()):
        """One row per batch element: its logits (columns named by ``labels`` when given)."""
        import pandas as pd

        if self.logits is None:
            return pd.DataFrame()
        lg = self.logits.detach().float().cpu().numpy()
        cols = list(labels) if len(labels) == lg.shape[1] else [f"logit {i}" for i in range(lg.shape[1])]
        return pd.DataFrame(lg, columns=cols)


def model_parts(loaded):
    """``(model, base, embeddings, layers, head)`` of a supported model; ``head(seq) -> logits`` or None.

    Kept for callers written against the BERT layout: ``layers`` are the adapter's
    :class:`~bertgeom.architectures.LayerParts`, ``embeddings`` the model's embedding module. New code
    reads :func:`bertgeom.architectures.adapter_of` instead. Raises :class:`ForwardError` (one sentence)
    for a model the recomputation does not follow."""
    ad = adapter(loaded)
    return ad.model, ad.base, getattr(ad.base, "embeddings", None), ad.layers, ad.head


def adapter(loaded):
    """The model's :class:`~bertgeom.architectures.Adapter`, or :class:`ForwardError` with its sentence."""
    from bertgeom.architectures import ArchitectureError, adapter_of

    try:
        return adapter_of(loaded)
    except ArchitectureError as exc:
        raise ForwardError(str(exc)) from exc


def _as_long(x, dev):
    """A long tensor on ``dev`` from numpy / list / tensor (always a copy: shared ids are read-only)."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().to(device=dev, dtype=torch.long).clone()
    return torch.as_tensor(np.array(x, dtype=np.int64, copy=True)).to(dev)


@dataclass
class LayerContext:
    """What every layer of one forward shares: ``key_real [B, T]`` bool (None: every key real), the
    uniform weights ``[B, T]``, the rotary tables by key (``(cos, sin)`` ``[1, T, d]``) and the
    local-attention masks by window (``[T, T]`` bool, True where a key is within the window)."""

    key_real: Any
    uniform_w: Any
    rotary: dict
    windows: dict


def layer_context(ad, x, key_real, uniform_w) -> LayerContext:
    """The :class:`LayerContext` of a forward whose layer input is ``x [B, T, D]``."""
    import torch

    T = int(x.shape[1])
    rot, win = {}, {}
    pos = torch.arange(T, device=x.device)
    for lp in ad.layers:
        if lp.rotary is not None and lp.rotary not in rot:
            rot[lp.rotary] = ad.rotary(lp.rotary, x, pos[None])
        if lp.window is not None and lp.window not in win:
            win[lp.window] = (pos[:, None] - pos[None, :]).abs() <= lp.window
    return LayerContext(key_real, uniform_w, rot, win)


def _attention_block(ad, lp, x, ctx: LayerContext, dis_bh, *, need_attn: bool, fused: bool, zero: bool,
                     cls_only: bool, gates_bh=None):
    """The attention sub-block of one layer: ``(W_o · heads, probs or None)``, ``[B, Tq, D]``;
    ``gates_bh [B, H]`` multiplies each head's output before ``W_o`` (None: ungated)."""
    import torch

    B, T, _ = x.shape
    H, d = lp.num_heads, lp.head_dim
    xq = x[:, :1] if cls_only else x
    Tq = int(xq.shape[1])

    def split(W, b, inp, rows):
        return torch.nn.functional.linear(inp, W, b).view(B, rows, H, d).transpose(1, 2)

    q, k, v = split(lp.W_q, lp.b_q, xq, Tq), split(lp.W_k, lp.b_k, x, T), split(lp.W_v, lp.b_v, x, T)
    scale = d**-0.5
    if lp.rotary is not None:
        from bertgeom.architectures import _rotate

        cos, sin = ctx.rotary[lp.rotary]
        if lp.scale_before_rotary:
            q, scale = q * scale, 1.0
        qc, qs = (cos[:, :1], sin[:, :1]) if cls_only else (cos, sin)
        q, _ = _rotate(q, q, qc, qs)
        _, k = _rotate(k, k, cos, sin)
    allowed = None if ctx.key_real is None else ctx.key_real[:, None, None, :]
    if lp.window is not None:
        near = ctx.windows[lp.window][:1] if cls_only else ctx.windows[lp.window]
        allowed = near[None, None] if allowed is None else allowed & near[None, None]
    probs = None
    if not fused:
        scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale
        if allowed is not None:
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        if dis_bh is not None:
            if zero:
                probs = torch.where(dis_bh[:, :, None, None], torch.zeros_like(probs), probs)
            else:
                probs = torch.where(dis_bh[:, :, None, None], ctx.uniform_w[:, None, None, :].to(probs.dtype), probs)
        heads = torch.matmul(probs.to(v.dtype), v)
    else:  # fused attention; a uniform head's output is the mean of V over the real keys, one row for all queries
        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)
        if dis_bh is not None:
            if zero:
                repl = torch.zeros_like(heads[:, :, :1])
            else:
                repl = torch.matmul(ctx.uniform_w[:, None, None, :].to(v.dtype), v)  # [B, H, 1, d]
            heads = torch.where(dis_bh[:, :, None, None], repl.to(heads.dtype), heads)
    if gates_bh is not None:
        heads = heads * gates_bh[:, :, None, None].to(heads.dtype)
    heads = heads.transpose(1, 2).reshape(B, Tq, H * d)
    return torch.nn.functional.linear(heads, lp.W_o, lp.b_o), (probs if need_attn else None)


def _layer(ad, lp, x, ctx: LayerContext, dis_bh, *, need_attn: bool, fused: bool, zero: bool,
           cls_only: bool = False, gates_bh=None, paths: tuple[bool, bool] = (True, True)):
    """One encoder layer of any family (:class:`~bertgeom.architectures.LayerParts`: post- or pre-LN,
    plain or gated MLP, absolute or rotary positions, global or local attention); heads in ``dis_bh
    [B, H]`` uniform (or zeroed), each head's output scaled by ``gates_bh [B, H]``. Returns
    ``(output, probs or None)``.

    ``paths`` = (skips, MLP) kept: Dong et al.'s path ablations drop the two residual connections
    (the LayerNorms stay where the family has them) or the feed-forward block (the layer's output is
    the attention block's).

    ``cls_only``: only the [CLS] row is computed as a query (keys and values from every token), so the
    output is ``[B, 1, D]``: the last layer of a forward that only needs the [CLS] vector. The one
    layer: the fused export (:mod:`bertgeom.backends`) runs this function too."""
    skips, mlp = paths
    kw = dict(need_attn=need_attn, fused=fused, zero=zero, cls_only=cls_only, gates_bh=gates_bh)
    xq = x[:, :1] if cls_only else x
    if lp.placement == "pre":
        a_in = lp.ln_attn(x) if lp.ln_attn is not None else x
        att, probs = _attention_block(ad, lp, a_in, ctx, dis_bh, **kw)
        h = xq + att if skips else att
        if not mlp:
            return h, probs
        m = ad.mlp(lp, lp.ln_mlp(h))
        return (h + m if skips else m), probs
    att, probs = _attention_block(ad, lp, x, ctx, dis_bh, **kw)
    h = lp.ln_attn(xq + att if skips else att)
    if not mlp:
        return h, probs
    m = ad.mlp(lp, h)
    return lp.ln_mlp(h + m if skips else m), probs


def _check_options(precision: str, attention: str, disable_as: str) -> None:
    if precision not in ("fp32", "bf16"):
        raise ValueError("precision must be 'fp32' or 'bf16' (resolve 'auto' with resolve_precision), "
                         f"got {precision!r}")
    if attention not in ("auto", "model", "eager", "sdpa"):
        raise ValueError(f"attention must be auto, model, eager or sdpa, got {attention!r}")
    if disable_as not in ("uniform", "zero"):
        raise ValueError(f"disable_as must be 'uniform' or 'zero', got {disable_as!r}")


def _batch(input_ids, inputs_embeds, attention_mask, dev):
    """``(ids [B, T] or None, embeddings [B, T, D] or None, B, T, real-token mask [B, T] bool on the CPU)``,
    the inputs on the model's device."""
    import torch

    x_in = ids = None
    if inputs_embeds is not None:
        x_in = inputs_embeds if isinstance(inputs_embeds, torch.Tensor) else torch.as_tensor(np.asarray(inputs_embeds))
        if x_in.ndim == 2:
            x_in = x_in[None]
        x_in = x_in.to(dev)
        B, T = int(x_in.shape[0]), int(x_in.shape[1])
    else:
        ids = _as_long(input_ids, dev)
        if ids.ndim == 1:
            ids = ids[None]
        B, T = (int(s) for s in ids.shape)
    if attention_mask is None:
        mask_cpu = np.ones((B, T), dtype=bool)
    elif isinstance(attention_mask, torch.Tensor):
        mask_cpu = attention_mask.detach().to("cpu").numpy().reshape(B, T).astype(bool)
    else:
        mask_cpu = np.asarray(attention_mask).reshape(B, T).astype(bool)
    return ids, x_in, B, T, mask_cpu


def _attention_path(attention: str, *, attentions: bool, hidden_states: bool, logits_only: bool,
                    disabled, start_layer: int, start_hidden, grad: bool, rewired: bool = False) -> str:
    """``"model"``, ``"eager"`` or ``"sdpa"``: what ``attention`` resolves to for these requests
    (``auto``: the model's own forward unless something is intervened on), or a ValueError for a
    combination that cannot be honoured."""
    if logits_only and (attentions or hidden_states):
        raise ValueError("logits_only computes only the [CLS] row of the last layer: no attentions or hidden states")
    intervened = disabled is not None or start_layer or start_hidden is not None or grad or rewired
    if logits_only and attention in ("auto", "model"):
        attention = "sdpa"  # the model's own forward computes every row, and no attention weights are wanted
    if attention == "auto":
        attention = "model" if not intervened else ("eager" if attentions else "sdpa")
    if attention == "model" and intervened and (disabled is not None or start_layer or start_hidden is not None
                                                or rewired):
        raise ValueError("disabled heads, head gates, path ablations and resuming need the recomputed forward "
                         "(attention='eager' or 'sdpa')")
    if attention == "sdpa" and attentions:
        raise ValueError("fused SDPA returns no attention weights: use attention='eager' or 'model'")
    return attention


def _models_own_forward(model, ids, x_in, mask, contexts, *, attentions: bool, hidden_states: bool,
                        precision: str) -> ForwardOutput:
    """The model's own forward, run inside ``contexts`` (the grad guard and the autocast)."""
    guard, autocast = contexts
    with guard, autocast:
        kw = dict(inputs_embeds=x_in) if ids is None else dict(input_ids=ids)
        out = model(**kw, attention_mask=mask, output_attentions=attentions,
                    output_hidden_states=hidden_states, return_dict=True)
    if attentions and (out.attentions is None or out.attentions[0] is None):
        raise RuntimeError("The model returned no attention weights; it must run with eager attention.")
    hs = tuple(out.hidden_states) if hidden_states else None
    last = out.hidden_states[-1] if hidden_states else getattr(out, "last_hidden_state", None)
    return ForwardOutput(
        last_hidden=last,
        cls=None if hs is None else _stack_cls(hs),
        logits=getattr(out, "logits", None),
        hidden_states=hs,
        attentions=tuple(out.attentions) if attentions else None,
        precision=precision,
    )


def _stack_cls(hidden_states):
    """``[B, L+1, D]``: the [CLS] row of every hidden state."""
    import torch

    return torch.stack([h[:, 0] for h in hidden_states], dim=1)


def _disabled_heads(disabled, B: int, L: int, n_heads: int, start_layer: int, dev):
    """``(disabled [B, L, H] bool on the device, any disabled per layer [L] on the CPU)``, or
    ``(None, None)`` when no head is disabled."""
    import torch

    if disabled is None:
        return None, None
    dis_np = np.asarray(disabled, dtype=bool)
    if dis_np.shape == (L, n_heads):
        dis_np = np.broadcast_to(dis_np, (B, L, n_heads))
    if dis_np.shape != (B, L, n_heads):
        raise ValueError(f"disabled must be [L, H] = {(L, n_heads)} or [B, L, H], got {dis_np.shape}")
    if start_layer > 0 and dis_np[:, :start_layer].any():
        raise ValueError("disabled heads below start_layer would be ignored")
    dis_any = dis_np.any(axis=(0, 2))  # [L], decided on the CPU: no device round trip per layer
    return torch.from_numpy(np.array(dis_np, dtype=bool, copy=True)).to(dev), dis_any


def _head_gates(head_gates, B: int, L: int, n_heads: int, dev):
    """``[B, L, H]`` gates on the device (a tensor keeps its autograd graph), or None."""
    import torch

    if head_gates is None:
        return None
    g = head_gates if isinstance(head_gates, torch.Tensor) else torch.as_tensor(
        np.array(head_gates, dtype=np.float32, copy=True))
    if tuple(g.shape) == (L, n_heads):
        g = g.expand(B, L, n_heads)
    if tuple(g.shape) != (B, L, n_heads):
        raise ValueError(f"head_gates must be [L, H] = {(L, n_heads)} or [B, L, H], got {tuple(g.shape)}")
    return g.to(dev)


def _first_hidden(ad, ids, x_in, mask, start_hidden, start_layer: int, B: int, dev, dtype):
    """The input of layer ``start_layer``: the embeddings (``start_layer = 0``, through the adapter:
    the family's embedding module and its projection to the hidden size) or ``start_hidden``
    broadcast to the batch (called inside the caller's grad and autocast contexts)."""
    import torch

    if start_hidden is None:
        if start_layer:
            raise ValueError("start_layer > 0 needs start_hidden")
        return ad.embed(ids, x_in, mask)
    x = start_hidden if isinstance(start_hidden, torch.Tensor) else torch.as_tensor(
        np.array(start_hidden, dtype=np.float32, copy=True))
    x = x.to(device=dev, dtype=dtype)
    if x.ndim == 2:
        x = x[None]
    return x.expand(B, -1, -1) if x.shape[0] == 1 and B > 1 else x


def run_forward(
    loaded,
    input_ids=None,
    attention_mask=None,
    *,
    inputs_embeds=None,
    attentions: bool = False,
    hidden_states: bool = False,
    disabled=None,
    disable_as: str = "uniform",
    grad: bool = False,
    attention: str = "auto",
    precision: str = "fp32",
    start_layer: int = 0,
    start_hidden=None,
    logits_only: bool = False,
    head_gates=None,
    remove_skips: bool = False,
    remove_mlps: bool = False,
) -> ForwardOutput:
    """Run ``loaded`` (a :class:`~bertgeom.models.LoadedModel` or a bare transformers model; only
    read) with the intervention points of the module docstring.

    ``input_ids`` ``[T]`` or ``[B, T]`` (numpy, list or tensor); ``attention_mask`` ``[B, T]`` 1 for
    real tokens (default: all real); ``inputs_embeds`` ``[B, T, D]`` word embeddings instead of ids
    (position and token-type embeddings are added by the model's embedding module).

    ``logits_only``: the caller needs the logits (and the [CLS] vectors) only, as classification
    does; the functional forward then computes the last layer for the [CLS] query alone (the pooler
    reads nothing else), about a sixth less work for a 6-layer model, and ``last_hidden`` is
    ``[B, 1, D]``. It excludes ``attentions`` and ``hidden_states``; gradients (``grad``) flow as usual
    (integrated gradients reads only a logit).

    ``head_gates`` ``[L, H]`` or ``[B, L, H]`` (tensor or array) scales each head's output;
    ``remove_skips`` / ``remove_mlps`` are the path ablations (module docstring). Each needs the
    functional recomputation (``attention='auto'`` picks it).
    """
    import contextlib

    import torch

    _check_options(precision, attention, disable_as)
    from bertgeom.architectures import torch_model

    model = torch_model(loaded)
    param = next(model.parameters())
    dev = param.device
    ids, x_in, B, T, mask_cpu = _batch(input_ids, inputs_embeds, attention_mask, dev)
    attention = _attention_path(attention, attentions=attentions, hidden_states=hidden_states,
                                logits_only=logits_only, disabled=disabled, start_layer=start_layer,
                                start_hidden=start_hidden, grad=grad,
                                rewired=head_gates is not None or remove_skips or remove_mlps)
    autocast = (torch.autocast(dev.type, dtype=torch.bfloat16)
                if precision == "bf16" and param.dtype != torch.bfloat16 else contextlib.nullcontext())
    guard = torch.enable_grad() if grad else torch.inference_mode()
    mask = torch.from_numpy(mask_cpu.astype(np.int64)).to(dev)

    if attention == "model":
        return _models_own_forward(model, ids, x_in, mask, (guard, autocast), attentions=attentions,
                                   hidden_states=hidden_states, precision=precision)

    ad = adapter(model)
    L = ad.num_layers
    n_heads = ad.num_heads
    dis, dis_any = _disabled_heads(disabled, B, L, n_heads, start_layer, dev)
    gates = _head_gates(head_gates, B, L, n_heads, dev)
    paths = (not remove_skips, not remove_mlps)
    all_real = bool(mask_cpu.all())
    shorten = logits_only and ad.head_reads == "cls"  # a head pooling every token needs every row
    with guard, autocast:
        x = _first_hidden(ad, ids, x_in, mask, start_hidden, start_layer, B, dev, param.dtype)
        key_real = None if all_real else mask.bool()
        real = mask.float()
        uniform_w = real / real.sum(-1, keepdim=True)  # [B, T]
        ctx = layer_context(ad, x, key_real, uniform_w)
        cls = [x[:, 0]] if start_layer == 0 else []
        hiddens = [x] if (hidden_states and start_layer == 0) else []
        attns = []
        for l in range(start_layer, L):
            dis_l = dis[:, l] if dis is not None and dis_any[l] else None
            x, p = _layer(ad, ad.layers[l], x, ctx, dis_l, need_attn=attentions, fused=attention == "sdpa",
                          zero=disable_as == "zero", cls_only=shorten and l == L - 1,
                          gates_bh=None if gates is None else gates[:, l], paths=paths)
            if l == L - 1 and ad.final_norm is not None:
                x = ad.final_norm(x)  # pre-LN families: the last hidden state is normalised (as theirs)
            cls.append(x[:, 0])
            if hidden_states:
                hiddens.append(x)
            if attentions:
                attns.append(p)
        logits = ad.classify(x, mask)
    return ForwardOutput(
        last_hidden=x,
        cls=torch.stack(cls, dim=1),
        logits=logits,
        hidden_states=tuple(hiddens) if hidden_states else None,
        attentions=tuple(attns) if attentions else None,
        precision=precision,
    )
