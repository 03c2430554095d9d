"""Per-layer weights of a Hugging Face BERT-family encoder, as plain numpy arrays.

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
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LayerWeights", "extract_layer_weights", "find_encoder_layers", "layer_weights_of"]


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

    def __post_init__(self) -> None:
        if not self.scaling:
            object.__setattr__(self, "scaling", float(self.head_dim) ** -0.5)

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
    """Return the ``nn.ModuleList`` of encoder layers of a BERT-family model.

    Accepts a bare encoder model (``BertModel``: ``model.encoder.layer``), a model with a task
    head (``BertForSequenceClassification``: ``model.bert.encoder.layer``; generally
    ``model.base_model.encoder.layer``) or any module exposing ``encoder.layer``.
    """
    candidates = [model]
    for attr in ("bert", "roberta", "electra", "base_model"):
        sub = getattr(model, attr, None)
        if sub is not None and sub is not model:
            candidates.append(sub)
    for m in candidates:
        enc = getattr(m, "encoder", None)
        layers = getattr(enc, "layer", None) if enc is not None else None
        if layers is not None:
            return layers
    raise ValueError(
        f"Cannot find `encoder.layer` on {type(model).__name__}: expected a BERT-family model "
        "(BertModel, BertFor*, or a module with .bert/.base_model.encoder.layer)."
    )


def _np(t) -> np.ndarray:
    return t.detach().to("cpu").float().numpy().copy()


def _config_of(model):
    for m in (model, getattr(model, "base_model", None), getattr(model, "bert", None)):
        cfg = getattr(m, "config", None)
        if cfg is not None:
            return cfg
    return None


def extract_layer_weights(model) -> list[LayerWeights]:
    """Extract every encoder layer's weights as :class:`LayerWeights` (float32, (out, in)).

    The model is not modified (no hooks, no dtype/device changes); works for any head
    dimension (``num_heads`` and ``head_dim`` are read from the self-attention module or the
    config).
    """
    import torch  # local: keep `import bertgeom.weights` light

    layers = find_encoder_layers(model)
    cfg = _config_of(model)
    out: list[LayerWeights] = []
    with torch.no_grad():
        for i, layer in enumerate(layers):
            att = layer.attention
            sa = att.self
            so = att.output
            num_heads = getattr(sa, "num_attention_heads", None) or getattr(
                cfg, "num_attention_heads"
            )
            head_dim = getattr(sa, "attention_head_size", None) or (
                sa.query.weight.shape[0] // num_heads
            )
            scaling = getattr(sa, "scaling", None)
            act = getattr(cfg, "hidden_act", "gelu") if cfg is not None else "gelu"
            if not isinstance(act, str):
                act = getattr(act, "__name__", "gelu")

            def bias(lin):
                if lin.bias is None:
                    return np.zeros(lin.weight.shape[0], dtype=np.float32)
                return _np(lin.bias)

            def ln_params(ln):
                g = _np(ln.weight) if ln.weight is not None else None
                n = ln.normalized_shape[0]
                if g is None:
                    g = np.ones(n, dtype=np.float32)
                b = _np(ln.bias) if getattr(ln, "bias", None) is not None else np.zeros(
                    n, dtype=np.float32
                )
                return g, b, float(ln.eps)

            g1, be1, e1 = ln_params(so.LayerNorm)
            g2, be2, e2 = ln_params(layer.output.LayerNorm)
            out.append(
                LayerWeights(
                    index=i,
                    num_heads=int(num_heads),
                    head_dim=int(head_dim),
                    W_q=_np(sa.query.weight),
                    b_q=bias(sa.query),
                    W_k=_np(sa.key.weight),
                    b_k=bias(sa.key),
                    W_v=_np(sa.value.weight),
                    b_v=bias(sa.value),
                    W_o=_np(so.dense.weight),
                    b_o=bias(so.dense),
                    ln1_gamma=g1,
                    ln1_beta=be1,
                    ln1_eps=e1,
                    W_1=_np(layer.intermediate.dense.weight),
                    b_1=bias(layer.intermediate.dense),
                    W_2=_np(layer.output.dense.weight),
                    b_2=bias(layer.output.dense),
                    ln2_gamma=g2,
                    ln2_beta=be2,
                    ln2_eps=e2,
                    hidden_act=str(act),
                    scaling=float(scaling) if scaling else 0.0,
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
