"""Per-layer weights of an encoder of any family bertgeom reads, as plain numpy arrays.

The weights are read through the model's architecture adapter (:func:`bertgeom.architectures.adapter_of`),
so BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, ESM-2 and ModernBERT give the same fields. What differs
between families is said by fields, never by module names: ``placement`` (``post``: LayerNorm after each
residual sum, ``ln1`` = after attention, ``ln2`` = after the MLP; ``pre``: ``ln1`` before attention,
``ln2`` before the MLP), ``position_scheme`` (``absolute``: positions are in the layer input;
``rotary``: Q and K are rotated by position after the projections, so ``W_q``/``W_k`` alone do not give
the scores), ``W_gate`` (ModernBERT's gated MLP), ``window`` (local attention) and ``shared_with``
(ALBERT: the layer whose weights this one reuses).

Layout convention (kept from PyTorch / Hugging Face, see docs/methods.md §8): every dense
weight is stored **(out, in)**, so a linear map is ``y = x @ W.T + b``.

For head ``h`` with ``s = slice(h * head_dim, (h + 1) * head_dim)``:

* ``W_q[s, :]``, ``W_k[s, :]``, ``W_v[s, :]`` (``head_dim x d``) are the head's query / key /
  value maps (rows of the (out, in) matrix), with biases ``b_q[s]`` etc.;
* ``W_o[:, s]`` (``d x head_dim``) is the part of ``attention.output.dense`` that acts on the
  head's output ``Z_h`` (columns of the (out, in) matrix).

The official code of the paper sliced **columns** of ``W_q/W_k/W_v`` instead (``X @ W_q[:, s]``);
see :mod:`bertgeom.analysis.subspace` ("faithful" mode).

The extraction never mutates the model: tensors are detached, moved to CPU, converted to
float32 and copied.  The result is a list of small frozen dataclasses of numpy arrays, which
pickle cleanly (cache-friendly, e.g. for ``st.cache_data`` in the UI layer).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace

import numpy as np

__all__ = ["LayerWeights", "extract_layer_weights", "find_encoder_layers", "layer_weights_of", "weight_geometry_notes"]


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """Weights of one encoder layer (float32 numpy arrays, HF (out, in) layout).

    Attributes
    ----------
    index: 0-based layer index.
    num_heads, head_dim: attention geometry (``d_model = num_heads * head_dim`` for BERT).
    W_q, W_k, W_v: (d, d) self-attention projections; b_q, b_k, b_v: (d,).
    W_o: (d, d) ``attention.output.dense``; b_o: (d,).
    ln1_gamma, ln1_beta, ln1_eps: ``attention.output.LayerNorm``.
    W_1: (ffn, d) ``intermediate.dense``; b_1: (ffn,).
    W_2: (d, ffn) ``output.dense``; b_2: (d,).
    ln2_gamma, ln2_beta, ln2_eps: ``output.LayerNorm``.
    hidden_act: activation name of the MLP (``"gelu"`` for BERT).
    scaling: attention score scale, ``1/sqrt(head_dim)``.
    """

    index: int
    num_heads: int
    head_dim: int
    W_q: np.ndarray
    b_q: np.ndarray
    W_k: np.ndarray
    b_k: np.ndarray
    W_v: np.ndarray
    b_v: np.ndarray
    W_o: np.ndarray
    b_o: np.ndarray
    ln1_gamma: np.ndarray
    ln1_beta: np.ndarray
    ln1_eps: float
    W_1: np.ndarray
    b_1: np.ndarray
    W_2: np.ndarray
    b_2: np.ndarray
    ln2_gamma: np.ndarray
    ln2_beta: np.ndarray
    ln2_eps: float
    hidden_act: str = "gelu"
    scaling: float = field(default=0.0)
    placement: str = "post"
    position_scheme: str = "absolute"
    W_gate: np.ndarray | None = None
    window: int | None = None
    shared_with: int = -1
    ln1_present: bool = True
    rotary_inv_freq: np.ndarray | None = None
    rotary_scaling: float = 1.0

    def __post_init__(self) -> None:
        if not self.scaling:
            object.__setattr__(self, "scaling", float(self.head_dim) ** -0.5)
        if self.shared_with < 0:
            object.__setattr__(self, "shared_with", self.index)

    @property
    def rotary(self) -> bool:
        """True when Q and K are rotated by position (their weight-space product is not the score)."""
        return self.position_scheme == "rotary"

    @property
    def shared(self) -> bool:
        """True when this layer reuses an earlier layer's weights (ALBERT)."""
        return self.shared_with != self.index

    # ---- shapes -------------------------------------------------------------------------
    @property
    def d_model(self) -> int:
        return int(self.W_q.shape[1])

    @property
    def all_head_size(self) -> int:
        return self.num_heads * self.head_dim

    def head_slice(self, h: int) -> slice:
        if not 0 <= h < self.num_heads:
            raise IndexError(f"head {h} out of range (num_heads={self.num_heads})")
        return slice(h * self.head_dim, (h + 1) * self.head_dim)

    # ---- per-head blocks, stacked over heads -------------------------------------------
    def _rows(self, W: np.ndarray) -> np.ndarray:
        # (H*dh, d) -> (H, dh, d): row block s of W for each head
        return W.reshape(self.num_heads, self.head_dim, W.shape[1])

    @property
    def Wq_heads(self) -> np.ndarray:
        """[H, head_dim, d]: ``W_q[s_h, :]`` (the head's query map, (out, in))."""
        return self._rows(self.W_q)

    @property
    def Wk_heads(self) -> np.ndarray:
        """[H, head_dim, d]: ``W_k[s_h, :]``."""
        return self._rows(self.W_k)

    @property
    def Wv_heads(self) -> np.ndarray:
        """[H, head_dim, d]: ``W_v[s_h, :]``."""
        return self._rows(self.W_v)

    @property
    def Wo_heads(self) -> np.ndarray:
        """[H, d, head_dim]: ``W_o[:, s_h]`` (columns of the output dense acting on head h)."""
        d_out = self.W_o.shape[0]
        return self.W_o.reshape(d_out, self.num_heads, self.head_dim).transpose(1, 0, 2)

    @property
    def bq_heads(self) -> np.ndarray:
        """[H, head_dim]."""
        return self.b_q.reshape(self.num_heads, self.head_dim)

    @property
    def bk_heads(self) -> np.ndarray:
        return self.b_k.reshape(self.num_heads, self.head_dim)

    @property
    def bv_heads(self) -> np.ndarray:
        return self.b_v.reshape(self.num_heads, self.head_dim)

    @property
    def nbytes(self) -> int:
        return int(
            sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))
        )


# -------------------------------------------------------------------------------------------
def find_encoder_layers(model):
    """The adapter's per-layer parts (:class:`bertgeom.architectures.LayerParts`) of ``model``.

    Raises ``ValueError`` (one sentence naming the supported families) for a model bertgeom does not read."""
    from bertgeom.architectures import adapter_of

    return adapter_of(model).layers


def _np(t) -> np.ndarray:
    return t.detach().to("cpu").float().numpy().copy()


def _ln_params(ln, n: int):
    """``(gamma, beta, eps)`` of a LayerNorm module (ones / zeros where it has no affine part or bias)."""
    if ln is None:
        return np.ones(n, dtype=np.float32), np.zeros(n, dtype=np.float32), 0.0
    g = _np(ln.weight) if getattr(ln, "weight", None) is not None else np.ones(n, dtype=np.float32)
    b = _np(ln.bias) if getattr(ln, "bias", None) is not None else np.zeros(n, dtype=np.float32)
    return g, b, float(ln.eps)


def extract_layer_weights(model) -> list[LayerWeights]:
    """Extract every encoder layer's weights as :class:`LayerWeights` (float32, (out, in)).

    The model is not modified (no hooks, no dtype/device changes); any family the architecture adapter
    reads (see the module docstring), any head dimension."""
    import torch  # local: keep `import bertgeom.weights` light

    from bertgeom.architectures import adapter_of

    ad = adapter_of(model)
    out: list[LayerWeights] = []

    def bias(b, n):
        return np.zeros(n, dtype=np.float32) if b is None else _np(b)

    with torch.no_grad():
        for lp in ad.layers:
            if lp.shared_with != lp.index:  # ALBERT: the same arrays, read once
                out.append(replace(out[lp.shared_with], index=lp.index, shared_with=lp.shared_with))
                continue
            D = int(lp.W_q.shape[1])
            g1, be1, e1 = _ln_params(lp.ln_attn, D)
            g2, be2, e2 = _ln_params(lp.ln_mlp, D)
            W1 = _np(lp.W_1)
            b1 = bias(lp.b_1, W1.shape[0])
            W_gate = None
            if lp.gated:
                half = W1.shape[0] // 2
                W1, W_gate, b1 = W1[:half].copy(), W1[half:].copy(), b1[:half].copy()
            out.append(
                LayerWeights(
                    index=lp.index, num_heads=int(lp.num_heads), head_dim=int(lp.head_dim),
                    W_q=_np(lp.W_q), b_q=bias(lp.b_q, lp.W_q.shape[0]),
                    W_k=_np(lp.W_k), b_k=bias(lp.b_k, lp.W_k.shape[0]),
                    W_v=_np(lp.W_v), b_v=bias(lp.b_v, lp.W_v.shape[0]),
                    W_o=_np(lp.W_o), b_o=bias(lp.b_o, lp.W_o.shape[0]),
                    ln1_gamma=g1, ln1_beta=be1, ln1_eps=e1,
                    W_1=W1, b_1=b1, W_2=_np(lp.W_2), b_2=bias(lp.b_2, lp.W_2.shape[0]),
                    ln2_gamma=g2, ln2_beta=be2, ln2_eps=e2,
                    hidden_act=lp.act_name, scaling=lp.scaling, placement=lp.placement,
                    position_scheme="rotary" if lp.rotary is not None else "absolute", W_gate=W_gate,
                    window=lp.window, shared_with=lp.shared_with, ln1_present=lp.ln_attn is not None,
                    rotary_inv_freq=None if lp.rotary is None else _np(ad.rotary_freqs[lp.rotary][0]),
                    rotary_scaling=1.0 if lp.rotary is None else float(ad.rotary_freqs[lp.rotary][1]),
                )
            )
    return out


#: One extraction per torch model object (freed with the model).
_EXTRACTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def layer_weights_of(model) -> list[LayerWeights]:
    """:func:`extract_layer_weights` of ``model``, extracted once per model object and then shared
    (the arrays are read-only): what :func:`bertgeom.trace` attaches to each trace."""
    found = _EXTRACTED.get(model)
    if found is None:
        found = extract_layer_weights(model)
        for lw in found:
            for value in vars(lw).values():
                if isinstance(value, np.ndarray):
                    value.flags.writeable = False
        _EXTRACTED[model] = found
    return found


def weight_geometry_notes(layer_weights) -> list[str]:
    """What the weight-space views show for this model where their definition (made for BERT: absolute
    positions, one set of weights per layer, post-LN) does not carry over; one sentence each, none for BERT.
    docs/methods.md ("Other encoder families") says the same."""
    lws = list(layer_weights)
    notes = []
    if any(lw.rotary for lw in lws):
        notes.append(
            "This model rotates queries and keys by their positions (rotary embeddings) after W_Q and W_K, so the "
            "weight-space search form W_Q W_Kᵀ is the score of two tokens at the same position only; for tokens i "
            "and j the score is q_iᵀ R(j−i) k_j with a rotation R. The weight views show that zero-offset form; the "
            "data views (this input, across inputs) read the model's own rotated attention.")
    if any(lw.window is not None for lw in lws):
        w = next(lw.window for lw in lws if lw.window is not None)
        local = ", ".join(f"L{lw.index + 1}" for lw in lws if lw.window is not None)
        many = sum(lw.window is not None for lw in lws) > 1
        notes.append(f"{'Layers' if many else 'Layer'} {local} {'attend' if many else 'attends'} locally: each "
                     f"token sees only the keys within {w} positions of it "
                     "(the other layers attend globally). Keys outside the window get zero weight in the maps.")
    if any(lw.shared for lw in lws):
        notes.append(
            "This model shares one set of weights across its layers (ALBERT), so every weight-space value is the "
            "same in every row of a grid: the rows show one shared layer, repeated; what differs between layers "
            "is the input each reads, which the data views show.")
    if any(lw.placement == "pre" for lw in lws):
        notes.append(
            "This model normalises each sub-block's input (pre-LayerNorm) instead of the residual sum: its heads "
            "read LN(x), and the stream after attention is the residual sum x + attention itself.")
    return notes
