"""One adapter per encoder family: where a model keeps its embeddings, layers and per-head weights.

Every part of bertgeom that looks inside a model (the forward engine's recomputed layers, the weight
geometry, the fused export, attribution, gradients and ablation) reads the model through
:func:`adapter_of`, never through a family's module names. An :class:`Adapter` says, for one loaded
model:

* ``embed(ids | token embeddings, mask) -> [B, T, D]``: the family's own embedding module, plus what
  the family does before the first layer (ELECTRA's ``embeddings_project`` when the embedding size
  differs from the hidden size, ALBERT's ``embedding_hidden_mapping_in``);
* ``token_embeddings(ids, mask)``: the word vectors the embedding module adds positions to, as it uses
  them (ESM-2 rescales them for its token dropout), so a gradient or a path integral taken at them is
  one of the model's own;
* per layer, a :class:`LayerParts`: Q/K/V/O weights and biases in the (out, in) layout of
  ``torch.nn.Linear`` (views of the model's own parameters: no copy, the shared model never changes),
  the two LayerNorms and where they sit (``post``: BERT, after each residual sum; ``pre``: ESM-2 and
  ModernBERT, before each sub-block), the MLP (gated for ModernBERT), the rotary table a layer reads,
  a local-attention window (ModernBERT's alternating local/global layers) and, for ALBERT, which layer's
  weights a layer shares;
* ``final_norm`` (pre-LN families normalise the last layer's output), the position scheme
  (``absolute``, ``rotary``), the classification head and what it reads;
* the tokenizer's specials (:class:`Specials`: CLS/SEP/PAD/MASK ids and the subword marker: WordPiece
  ``##`` marks a continuation, byte-level BPE ``Ġ`` and SentencePiece ``▁`` mark a word's start, a
  character vocabulary has none).

Families: BERT (and BERT-layout checkpoints such as BioBERT, SciBERT, ProtBERT, DNABERT-1), RoBERTa /
XLM-R / CamemBERT, ELECTRA, DistilBERT, ALBERT, ESM-2 (also the Nucleotide Transformer's layout) and
ModernBERT. Any other model (a decoder, an unknown layout) gets :class:`ArchitectureError`, one
sentence naming the families that are supported.

References
----------
TransformerLens, ``loading_from_pretrained`` / ``pretrained/weight_conversions`` (the per-family
conversion to one set of names; Nanda & Bloom 2022). Devlin et al. 2019 (BERT, arXiv:1810.04805);
Liu et al. 2019 (RoBERTa, arXiv:1907.11692); Clark et al. 2020 (ELECTRA, arXiv:2003.10555); Sanh et al.
2019 (DistilBERT, arXiv:1910.01108); Lan et al. 2020 (ALBERT, arXiv:1909.11942, §3.1 cross-layer
sharing); Lin et al. 2023 (ESM-2, Science 379:1123); Dalla-Torre et al. 2024 (Nucleotide Transformer);
Warner et al. 2024 (ModernBERT, arXiv:2412.13663, §2.1); Su et al. 2021 (RoFormer, arXiv:2104.09864).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FAMILIES",
    "Adapter",
    "ArchitectureError",
    "LayerParts",
    "Specials",
    "adapter_of",
    "build_random_encoder",
    "family_of_config",
    "specials_of",
    "supported_families_sentence",
    "torch_model",
]


class ArchitectureError(ValueError):
    """The model is not of a family bertgeom reads (one sentence naming those it does)."""


#: ``model_type`` (transformers config) -> family name shown to users.
FAMILIES = {
    "bert": "BERT",
    "roberta": "RoBERTa",
    "xlm-roberta": "RoBERTa",
    "camembert": "RoBERTa",
    "electra": "ELECTRA",
    "distilbert": "DistilBERT",
    "albert": "ALBERT",
    "esm": "ESM-2",
    "modernbert": "ModernBERT",
}


def supported_families_sentence() -> str:
    """The families bertgeom reads, as one phrase."""
    return ("BERT (also BioBERT, SciBERT, ProtBERT, DNABERT-1), RoBERTa/XLM-R/CamemBERT, ELECTRA, DistilBERT, "
            "ALBERT, ESM-2/Nucleotide Transformer and ModernBERT encoders")


def family_of_config(config) -> str:
    """The family of a transformers config (a key of :data:`FAMILIES`' values), or ArchitectureError."""
    if config is None:
        raise ArchitectureError(f"This is not a transformers model; bertgeom reads {supported_families_sentence()}.")
    mt = str(getattr(config, "model_type", "") or "")
    if getattr(config, "is_decoder", False) or mt not in FAMILIES:
        what = "a decoder" if getattr(config, "is_decoder", False) else f"a '{mt or 'unknown'}' model"
        raise ArchitectureError(f"This is {what}; bertgeom reads {supported_families_sentence()}.")
    pos = getattr(config, "position_embedding_type", "absolute") or "absolute"
    if mt == "esm" and pos not in ("absolute", "rotary"):
        raise ArchitectureError(f"This ESM model uses '{pos}' positions; bertgeom reads ESM with rotary or "
                                "absolute positions.")
    if mt != "esm" and pos != "absolute":  # transformers 5 computes absolute positions whatever the config says
        raise ArchitectureError(f"This model was configured with '{pos}' positions, which transformers 5 no "
                                "longer computes for this family; bertgeom reads it with absolute positions only.")
    return FAMILIES[mt]


# ---------------------------------------------------------------------------------------------
# Tokenizer specials
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Specials:
    """The ids of the tokenizer's special tokens and its subword marker.

    ``marker``: ``"##"`` (WordPiece: a piece that continues a word starts with it), ``"Ġ"`` (byte-level
    BPE) or ``"▁"`` (SentencePiece: a piece that *starts* a word starts with it), ``""`` (none: every
    token is its own word, as in a character vocabulary of amino acids or nucleotides)."""

    cls_id: int | None
    sep_id: int | None
    pad_id: int
    mask_id: int | None
    marker: str = "##"

    @property
    def marks_continuation(self) -> bool:
        """True when the marker flags a word's continuation (``##``), False when it flags a word's start."""
        return self.marker == "##"

    def continues_word(self, token: str, previous_special: bool = False) -> bool:
        """Whether ``token`` continues the word of the token before it."""
        if not self.marker or previous_special:
            return False
        if self.marks_continuation:
            return token.startswith("##")
        return not token.startswith(self.marker)

    def strip(self, token: str) -> str:
        """``token`` without its subword marker."""
        if self.marker and token.startswith(self.marker):
            return token[len(self.marker):]
        return token


def _marker_of(tokenizer) -> str:
    """Read the subword marker from the vocabulary (not from the class name: a BERT-layout model may
    carry a character or k-mer vocabulary)."""
    vocab = {}
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 - a tokenizer without a readable vocabulary: no marker
        return ""
    toks = list(vocab)[:50000]
    counts = {m: sum(1 for t in toks if isinstance(t, str) and t.startswith(m)) for m in ("##", "Ġ", "▁")}
    best = max(counts, key=counts.get)
    return best if counts[best] >= max(1, len(toks) // 100) else ""


def specials_of(tokenizer, config=None) -> Specials:
    """:class:`Specials` of a tokenizer (the model's config fills the PAD id when the tokenizer has none)."""

    def tid(name):
        v = getattr(tokenizer, name, None)
        return None if v is None else int(v)

    cls_id = tid("cls_token_id")
    if cls_id is None:
        cls_id = tid("bos_token_id")
    sep_id = tid("sep_token_id")
    if sep_id is None:
        sep_id = tid("eos_token_id")
    pad = tid("pad_token_id")
    if pad is None:
        pad = int(getattr(config, "pad_token_id", 0) or 0) if config is not None else 0
    return Specials(cls_id, sep_id, pad, tid("mask_token_id"), _marker_of(tokenizer))


# ---------------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------------
@dataclass
class LayerParts:
    """One encoder layer as weights (torch tensors that are the model's own parameters or views of them).

    ``W_q, W_k, W_v`` ``[H*d, D]`` and ``W_o`` ``[D, H*d]`` in the (out, in) layout, biases ``[out]`` or
    None (ModernBERT has none); ``ln_attn`` / ``ln_mlp`` the LayerNorm modules (None where the layer has
    none: ModernBERT's first layer reads its input unnormalised), placed per ``placement``:

    * ``post``: ``h = LN_attn(x + Attn(x))``, ``y = LN_mlp(h + MLP(h))`` (BERT, RoBERTa, ELECTRA,
      DistilBERT, ALBERT);
    * ``pre``: ``h = x + Attn(LN_attn(x))``, ``y = h + MLP(LN_mlp(h))`` (ESM-2, ModernBERT).

    ``MLP(u) = W_2 act(W_1 u + b_1) + b_2``, or with ``gated``: ``W_2 (act(a) * g)`` where ``[a, g]`` are
    the two halves of ``W_1 u`` (ModernBERT's GLU). ``rotary``: the key of the rotary table the layer
    reads (None: absolute positions, added by the embeddings); ``window``: keys farther than this from
    the query are masked (None: global attention); ``scale_before_rotary``: the query is scaled by
    ``d^-1/2`` before the rotation (ESM's order; the same numbers up to rounding); ``shared_with``: the
    first layer whose weights this layer reuses (ALBERT), else its own index."""

    index: int
    num_heads: int
    head_dim: int
    W_q: Any
    b_q: Any
    W_k: Any
    b_k: Any
    W_v: Any
    b_v: Any
    W_o: Any
    b_o: Any
    ln_attn: Any
    ln_mlp: Any
    W_1: Any
    b_1: Any
    W_2: Any
    b_2: Any
    act: Callable
    act_name: str
    placement: str = "post"
    gated: bool = False
    rotary: str | None = None
    window: int | None = None
    scale_before_rotary: bool = False
    shared_with: int = -1

    def __post_init__(self) -> None:
        if self.shared_with < 0:
            self.shared_with = self.index

    @property
    def scaling(self) -> float:
        return float(self.head_dim) ** -0.5


def _lin(x, W, b):
    import torch.nn.functional as F

    return F.linear(x, W, b)


_ACT_NAMES = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python", "relu", "silu", "swish", "tanh")


def _act_name(act, fallback: str) -> str:
    """The activation's name as configs spell it (the config's own when it is one of those)."""
    if str(fallback).lower() in _ACT_NAMES:
        return str(fallback).lower()
    name = getattr(act, "__name__", None) or type(act).__name__
    low = str(name).lower()
    if "gelu" in low:
        return "gelu"
    if "relu" in low:
        return "relu"
    if "silu" in low or "swish" in low:
        return "silu"
    if "tanh" in low:
        return "tanh"
    return fallback


# ---------------------------------------------------------------------------------------------
# The adapter
# ---------------------------------------------------------------------------------------------
@dataclass
class Adapter:
    """A loaded model seen through its family's layout (see the module docstring). Built by :func:`adapter_of`."""

    family: str
    model: Any
    base: Any
    layers: list[LayerParts]
    embed_fn: Callable
    token_embed_fn: Callable
    word_embeddings: Any
    final_norm: Any = None
    position_scheme: str = "absolute"
    rotary_fn: Callable | None = None
    head: Callable | None = None
    head_reads: str = "cls"
    shared_layers: bool = False
    rotary_freqs: dict = field(default_factory=dict)  #: rotary key -> (inverse frequencies [d/2], scaling)
    notes: dict = field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_heads(self) -> int:
        return int(self.layers[0].num_heads)

    @property
    def head_dim(self) -> int:
        return int(self.layers[0].head_dim)

    @property
    def hidden_size(self) -> int:
        return int(self.layers[0].W_q.shape[1])

    @property
    def pre_ln(self) -> bool:
        return self.layers[0].placement == "pre"

    @property
    def masked_lm(self) -> bool:
        """True when the checkpoint ships a masked-word (MLM) head: named in its config's architectures
        (bertgeom loads the bare encoder of such a checkpoint, so the head is then not loaded)."""
        archs = getattr(self.model.config, "architectures", None) or []
        return any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in archs) or type(self.model).__name__.endswith(
            "ForMaskedLM")

    @property
    def has_classifier(self) -> bool:
        return self.head is not None

    def embed(self, ids=None, inputs_embeds=None, attention_mask=None):
        """Layer 0's input ``[B, T, D]`` from token ids, or from :meth:`token_embeddings` (``inputs_embeds``)."""
        return self.embed_fn(ids, inputs_embeds, attention_mask)

    def token_embeddings(self, ids, attention_mask=None):
        """The word vectors ``[B, T, E]`` the embedding module adds positions to, as the model uses them."""
        return self.token_embed_fn(ids, attention_mask)

    def rotary(self, key: str, x, positions):
        """``(cos, sin)`` ``[1, T, d]`` of rotary table ``key`` at ``positions`` ``[1, T]``."""
        return self.rotary_fn(key, x, positions)

    def classify(self, seq, mask=None):
        """Logits ``[B, C]`` of the classification head on the last hidden state ``seq`` (None without one);
        ``mask`` ``[B, T]`` for a head that pools every real token (ModernBERT's mean pooling)."""
        if self.head is None:
            return None
        return self.head(seq, mask) if self.head_reads == "all" else self.head(seq)

    def mlp(self, lp: LayerParts, u):
        """The layer's MLP on ``u`` (gated or not)."""
        h = _lin(u, lp.W_1, lp.b_1)
        if lp.gated:
            a, g = h.chunk(2, dim=-1)
            h = lp.act(a) * g
        else:
            h = lp.act(h)
        return _lin(h, lp.W_2, lp.b_2)


def _zeros_tt(ids, x):
    import torch

    ref = ids if ids is not None else x[..., 0]
    return torch.zeros(tuple(ref.shape[:2]), dtype=torch.long, device=ref.device)


# ---- BERT layout (BERT, RoBERTa, ELECTRA, ALBERT share the embedding module's call) ----------
def _bert_like_embed(emb, after=None):
    def embed(ids, x, mask):
        tt = _zeros_tt(ids, x)
        out = emb(input_ids=ids, token_type_ids=tt) if ids is not None else emb(inputs_embeds=x, token_type_ids=tt)
        return after(out) if after is not None else out

    return embed


def _plain_token_embed(word):
    def tokens(ids, mask):
        return word(ids)

    return tokens


def _bert_layer(i, layer, cfg) -> LayerParts:
    sa, so = layer.attention.self, layer.attention.output
    H = int(getattr(sa, "num_attention_heads", cfg.num_attention_heads))
    d = int(getattr(sa, "attention_head_size", sa.query.weight.shape[0] // H))
    act = layer.intermediate.intermediate_act_fn
    return LayerParts(i, H, d, sa.query.weight, sa.query.bias, sa.key.weight, sa.key.bias, sa.value.weight,
                      sa.value.bias, so.dense.weight, so.dense.bias, so.LayerNorm, layer.output.LayerNorm,
                      layer.intermediate.dense.weight, layer.intermediate.dense.bias, layer.output.dense.weight,
                      layer.output.dense.bias, act, _act_name(act, str(getattr(cfg, "hidden_act", "gelu"))))


def _pooler_head(model, base):
    """BERT/ALBERT-style classifier: dropout + linear on the pooler's output, or a head reading the sequence."""
    from torch import nn

    classifier = getattr(model, "classifier", None)
    if classifier is None or model is base:
        return None
    if isinstance(classifier, nn.Linear):
        pooler = getattr(base, "pooler", None)
        if pooler is None:
            raise ArchitectureError("A linear classifier without a pooler is not supported.")
        act = getattr(base, "pooler_activation", None)  # ALBERT: pooler is a bare Linear, then tanh

        def head(seq):
            pooled = pooler(seq[:, 0]) if act is not None else pooler(seq)
            return classifier(act(pooled) if act is not None else pooled)

        return head

    def head(seq):  # RoBERTa/ELECTRA-style heads read the sequence ([CLS] row) themselves
        return classifier(seq)

    return head


def _bert_family(model, family: str) -> Adapter:
    base = model.base_model
    cfg = model.config
    emb = base.embeddings
    after = None
    if family == "ELECTRA" and getattr(base, "embeddings_project", None) is not None:
        after = base.embeddings_project  # ELECTRA-small: embedding 128 -> hidden 256
    layers = [_bert_layer(i, layer, cfg) for i, layer in enumerate(base.encoder.layer)]
    return Adapter(family, model, base, layers, _bert_like_embed(emb, after), _plain_token_embed(emb.word_embeddings),
                   emb.word_embeddings, head=_pooler_head(model, base))


def _albert(model) -> Adapter:
    base = model.base_model
    cfg = model.config
    enc = base.encoder
    n, groups = int(cfg.num_hidden_layers), int(cfg.num_hidden_groups)
    inner = int(cfg.inner_group_num)
    layers = []
    first_of: dict[int, int] = {}
    for i in range(n):
        g = int(i / (n / groups))
        for j, al in enumerate(enc.albert_layer_groups[g].albert_layers):
            k = len(layers)
            att = al.attention
            H = int(att.num_attention_heads)
            d = int(att.attention_head_size)
            lp = LayerParts(k, H, d, att.query.weight, att.query.bias, att.key.weight, att.key.bias, att.value.weight,
                            att.value.bias, att.dense.weight, att.dense.bias, att.LayerNorm, al.full_layer_layer_norm,
                            al.ffn.weight, al.ffn.bias, al.ffn_output.weight, al.ffn_output.bias, al.activation,
                            _act_name(al.activation, str(cfg.hidden_act)),
                            shared_with=first_of.setdefault(g * inner + j, k))
            layers.append(lp)
    emb = base.embeddings
    return Adapter("ALBERT", model, base, layers, _bert_like_embed(emb, enc.embedding_hidden_mapping_in),
                   _plain_token_embed(emb.word_embeddings), emb.word_embeddings, head=_pooler_head(model, base),
                   shared_layers=groups < n * inner)


def _distilbert(model) -> Adapter:
    base = model.base_model
    emb = base.embeddings
    layers = []
    for i, blk in enumerate(base.transformer.layer):
        a = blk.attention
        H = int(a.n_heads)
        d = int(a.attention_head_size)
        act = blk.ffn.activation
        layers.append(LayerParts(i, H, d, a.q_lin.weight, a.q_lin.bias, a.k_lin.weight, a.k_lin.bias, a.v_lin.weight,
                                 a.v_lin.bias, a.out_lin.weight, a.out_lin.bias, blk.sa_layer_norm,
                                 blk.output_layer_norm, blk.ffn.lin1.weight, blk.ffn.lin1.bias, blk.ffn.lin2.weight,
                                 blk.ffn.lin2.bias, act, _act_name(act, str(model.config.activation))))

    def embed(ids, x, mask):
        return emb(input_ids=ids, inputs_embeds=x)

    head = None
    if getattr(model, "pre_classifier", None) is not None:
        import torch

        def head(seq):  # DistilBertForSequenceClassification: pre_classifier, ReLU, classifier on [CLS]
            return model.classifier(torch.relu(model.pre_classifier(seq[:, 0])))

    return Adapter("DistilBERT", model, base, layers, embed, _plain_token_embed(emb.word_embeddings),
                   emb.word_embeddings, head=head)


def _rotate(q, k, cos, sin):
    """RoFormer's rotation of the query and key halves (the families' own ``apply_rotary_pos_emb``)."""
    import torch

    def half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    qf, kf = q.float(), k.float()
    return (qf * cos + half(qf) * sin).to(q.dtype), (kf * cos + half(kf) * sin).to(k.dtype)


def _esm(model) -> Adapter:
    base = model.base_model
    cfg = model.config
    emb = base.embeddings
    rotary = (getattr(cfg, "position_embedding_type", "absolute") or "absolute") == "rotary"
    from transformers.models.esm.modeling_esm import gelu as esm_gelu

    layers = []
    for i, layer in enumerate(base.encoder.layer):
        sa = layer.attention.self
        H, d = int(sa.num_attention_heads), int(sa.attention_head_size)
        layers.append(LayerParts(i, H, d, sa.query.weight, sa.query.bias, sa.key.weight, sa.key.bias, sa.value.weight,
                                 sa.value.bias, layer.attention.output.dense.weight, layer.attention.output.dense.bias,
                                 layer.attention.LayerNorm, layer.LayerNorm, layer.intermediate.dense.weight,
                                 layer.intermediate.dense.bias, layer.output.dense.weight, layer.output.dense.bias,
                                 esm_gelu, "gelu", placement="pre", rotary="rotary" if rotary else None,
                                 scale_before_rotary=True))

    def token_embed(ids, mask):
        """ESM's word vectors with its token-dropout rescaling (mask tokens zeroed, the rest scaled by
        ``(1 - 0.12) / (1 - share of mask tokens)``), as its embedding module applies them to ids."""
        x = emb.word_embeddings(ids)
        if emb.token_dropout:
            is_mask = ids == emb.mask_token_id
            x = x.masked_fill(is_mask.unsqueeze(-1), 0.0)
            lengths = mask.sum(-1) if mask is not None else ids.shape[1]
            observed = is_mask.sum(-1).float() / lengths
            x = (x * (1 - 0.15 * 0.8) / (1 - observed)[:, None, None]).to(x.dtype)
        return x

    def embed(ids, x, mask):
        if ids is not None:
            return emb(input_ids=ids, attention_mask=mask)
        return emb(inputs_embeds=x, attention_mask=mask)

    def rotary_fn(key, x, positions):
        return base.rotary_embeddings(x, positions)

    head = None
    if getattr(model, "classifier", None) is not None:
        head = model.classifier  # EsmClassificationHead reads the <cls> row of the sequence
    freqs = {}
    if rotary:
        re_ = base.rotary_embeddings
        freqs["rotary"] = (re_.inv_freq, float(getattr(re_, "attention_scaling", 1.0) or 1.0))
    return Adapter("ESM-2", model, base, layers, embed, token_embed, emb.word_embeddings,
                   final_norm=base.encoder.emb_layer_norm_after, position_scheme="rotary" if rotary else "absolute",
                   rotary_fn=rotary_fn if rotary else None, head=head, rotary_freqs=freqs)


def _modernbert(model) -> Adapter:
    base = model.base_model
    cfg = model.config
    emb = base.embeddings
    window = int(cfg.sliding_window)
    layers = []
    for i, layer in enumerate(base.layers):
        a = layer.attn
        H = int(cfg.num_attention_heads)
        d = int(a.head_dim)
        Wqkv = a.Wqkv.weight.view(3, H * d, -1)
        bqkv = None if a.Wqkv.bias is None else a.Wqkv.bias.view(3, H * d)
        from torch import nn

        ln_attn = None if isinstance(layer.attn_norm, nn.Identity) else layer.attn_norm
        local = layer.attention_type == "sliding_attention"
        act = layer.mlp.act
        layers.append(LayerParts(i, H, d, Wqkv[0], None if bqkv is None else bqkv[0], Wqkv[1],
                                 None if bqkv is None else bqkv[1], Wqkv[2], None if bqkv is None else bqkv[2],
                                 a.Wo.weight, a.Wo.bias, ln_attn, layer.mlp_norm, layer.mlp.Wi.weight,
                                 layer.mlp.Wi.bias, layer.mlp.Wo.weight, layer.mlp.Wo.bias, act,
                                 _act_name(act, str(cfg.hidden_activation)), placement="pre", gated=True,
                                 rotary=layer.attention_type, window=window if local else None))

    def embed(ids, x, mask):
        return emb(input_ids=ids) if ids is not None else emb(inputs_embeds=x)

    def token_embed(ids, mask):
        return emb.tok_embeddings(ids)

    def rotary_fn(key, x, positions):
        return base.rotary_emb(x, positions, key)

    head, reads = None, "cls"
    if getattr(model, "classifier", None) is not None and getattr(model, "head", None) is not None:
        pooling = cfg.classifier_pooling

        def head(seq, mask=None):
            if pooling == "mean":
                import torch

                m = (torch.ones(seq.shape[:2], dtype=seq.dtype, device=seq.device) if mask is None
                     else mask.to(seq.dtype))
                pooled = (seq * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True)
            else:
                pooled = seq[:, 0]
            return model.classifier(model.drop(model.head(pooled)))

        reads = "all" if pooling == "mean" else "cls"
    re_ = base.rotary_emb
    freqs = {lt: (getattr(re_, f"{lt}_inv_freq"), float(getattr(re_, f"{lt}_attention_scaling", 1.0) or 1.0))
             for lt in set(cfg.layer_types)}
    return Adapter("ModernBERT", model, base, layers, embed, token_embed, emb.tok_embeddings,
                   final_norm=base.final_norm, position_scheme="rotary", rotary_fn=rotary_fn, head=head,
                   head_reads=reads, rotary_freqs=freqs,
                   notes={"local_window": window, "layer_types": list(cfg.layer_types)})


_BUILDERS = {
    "BERT": lambda m: _bert_family(m, "BERT"),
    "RoBERTa": lambda m: _bert_family(m, "RoBERTa"),
    "ELECTRA": lambda m: _bert_family(m, "ELECTRA"),
    "DistilBERT": _distilbert,
    "ALBERT": _albert,
    "ESM-2": _esm,
    "ModernBERT": _modernbert,
}

_ADAPTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def torch_model(loaded):
    """The transformers model of a :class:`~bertgeom.models.LoadedModel`, or ``loaded`` itself when it is
    one (a ModernBERT classifier has a ``.model`` attribute of its own: the bare encoder)."""
    from torch import nn

    return loaded if isinstance(loaded, nn.Module) else loaded.model


def adapter_of(loaded) -> Adapter:
    """The :class:`Adapter` of a :class:`~bertgeom.models.LoadedModel` or a bare transformers model,
    built once per model object. Raises :class:`ArchitectureError` (one sentence) for a model bertgeom
    does not read."""
    model = torch_model(loaded)
    found = _ADAPTERS.get(model)
    if found is None:
        family = family_of_config(getattr(model, "config", None))
        try:
            found = _BUILDERS[family](model)
        except AttributeError as exc:
            raise ArchitectureError(f"{type(model).__name__} is a {family} model without the {family} layout "
                                    f"bertgeom reads ({exc}).") from exc
        _ADAPTERS[model] = found
    return found


# ---------------------------------------------------------------------------------------------
# Random models of every family (tests and benchmarks)
# ---------------------------------------------------------------------------------------------
def build_random_encoder(family: str, *, layers: int = 2, heads: int = 4, hidden: int = 32, vocab_size: int = 100,
                         num_labels: int = 0, seed: int = 0, max_positions: int = 512, pad_token_id: int = 0,
                         **extra):
    """A seeded random encoder of ``family`` (a key of the builders: ``BERT``, ``RoBERTa``, ``ELECTRA``,
    ``DistilBERT``, ``ALBERT``, ``ESM-2``, ``ModernBERT``) built from its transformers config, eager
    attention, with a sequence-classification head when ``num_labels``; ``extra`` goes to the config."""
    import torch
    import transformers as tf

    common = dict(vocab_size=vocab_size, num_hidden_layers=layers, num_attention_heads=heads, hidden_size=hidden,
                  intermediate_size=hidden * 4, max_position_embeddings=max_positions, pad_token_id=pad_token_id)
    if family == "BERT":
        cfg = tf.BertConfig(**common)
    elif family == "RoBERTa":
        cfg = tf.RobertaConfig(**{**common, "max_position_embeddings": max_positions + pad_token_id + 1})
    elif family == "ELECTRA":
        cfg = tf.ElectraConfig(**common, embedding_size=extra.pop("embedding_size", max(8, hidden // 2)))
    elif family == "DistilBERT":
        cfg = tf.DistilBertConfig(vocab_size=vocab_size, n_layers=layers, n_heads=heads, dim=hidden,
                                  hidden_dim=hidden * 4, max_position_embeddings=max_positions,
                                  pad_token_id=pad_token_id)
    elif family == "ALBERT":
        cfg = tf.AlbertConfig(**common, embedding_size=extra.pop("embedding_size", max(8, hidden // 2)))
    elif family == "ESM-2":
        cfg = tf.EsmConfig(**common, position_embedding_type="rotary", token_dropout=True,
                           emb_layer_norm_before=False, mask_token_id=extra.pop("mask_token_id", vocab_size - 1))
    elif family == "ModernBERT":
        ids = {k: extra.pop(k, None) for k in ("bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")}
        cfg = tf.ModernBertConfig(vocab_size=vocab_size, num_hidden_layers=layers, num_attention_heads=heads,
                                  hidden_size=hidden, intermediate_size=hidden * 2,
                                  max_position_embeddings=max_positions, pad_token_id=pad_token_id,
                                  local_attention=extra.pop("local_attention", 8),
                                  global_attn_every_n_layers=extra.pop("global_attn_every_n_layers", 2), **ids)
    else:
        raise ArchitectureError(f"no random model for '{family}': one of {', '.join(_BUILDERS)}.")
    for k, v in extra.items():
        setattr(cfg, k, v)
    cfg.num_labels = max(num_labels, 2)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    cls = tf.AutoModelForSequenceClassification if num_labels else tf.AutoModel
    model = cls.from_config(cfg, attn_implementation="eager")
    return model.eval()
