"""One forward pass per (model, input): the :class:`Trace` every analysis reads.

A trace holds the tokens with their coordinates in the user's input (character spans for
text, nucleotide spans in the spike for genomes), the attention of every head
``[L, H, T, T]``, the hidden states ``[L+1, T, D]`` and, for a classifier, logits and
probabilities. Queries and keys are *derived on demand* from the hidden states and the
layer weights (:mod:`bertgeom.attention`), so a trace stays small and the model is run once.

Everything runs under ``torch.inference_mode()``; the shared model is never mutated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bertgeom.attention import softmax
from bertgeom.inputs import EncodedInput, InputError, Record, encode_input, encode_record  # noqa: F401 - InputError re-exported
from bertgeom.models import LoadedModel


@dataclass
class Trace:
    """Result of one forward pass (float32 numpy arrays, cropped to real tokens)."""

    model_id: str
    encoded: EncodedInput
    attentions: np.ndarray  # [L, H, T, T]
    hidden_states: np.ndarray  # [L+1, T, D]
    logits: np.ndarray | None = None  # [C]
    labels: tuple[str, ...] = ()
    #: Every layer's weights (:class:`bertgeom.weights.LayerWeights`), for ``trace["q", layer]``;
    #: :func:`bertgeom.trace` fills it, a bare :func:`run_trace` leaves it out.
    layer_weights: Any = field(default=None, repr=False, compare=False)

    #: The names ``trace[name, layer]`` answers (after TransformerLens' activation cache).
    ACTIVATIONS = ("q", "k", "v", "pattern", "resid")

    @property
    def tokens(self) -> list[str]:
        return self.encoded.tokens

    @property
    def kinds(self):
        """The input's token masks (:class:`bertgeom.tokens.TokenKinds`)."""
        return self.encoded.kinds

    def __getitem__(self, key):
        """``trace["q", layer]`` (also ``"k"``, ``"v"``): the per-head queries, keys or values of a
        layer, ``[H, T, d_head]``, recomputed from the layer's input ``hidden_states[layer]`` and its
        weights (biases included, as the model computes them); ``trace["pattern", layer]`` the
        attention ``[H, T, T]``; ``trace["resid", layer]`` the hidden states ``[T, D]`` entering
        layer ``layer`` (``layer = L``: the output)."""
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] in self.ACTIVATIONS):
            raise KeyError(f"index a trace as trace[name, layer] with name one of {self.ACTIVATIONS}, got {key!r}")
        name, layer = key
        if name == "pattern":
            return self.attentions[layer]
        if name == "resid":
            return self.hidden_states[layer]
        if self.layer_weights is None:
            raise KeyError(f"trace[{name!r}, {layer}] needs the layer weights: make the trace with "
                           "bertgeom.trace(model, text) (or set trace.layer_weights).")
        from bertgeom.attention import project_qkv

        q, k, v = project_qkv(self.hidden_states[layer], self.layer_weights[layer])
        return {"q": q, "k": k, "v": v}[name]

    def head_features(self, **options):
        """Every per-head feature of this input (:func:`bertgeom.analysis.heads.head_features`)."""
        from bertgeom.analysis.heads import head_features

        return head_features(self.attentions, self.encoded, **options)

    def cone(self, token_set: str = "content", *, normalized: bool = False) -> np.ndarray:
        """The cone index of the hidden states per layer, ``[L+1]`` (embeddings first), over the rows
        of ``token_set`` (:func:`bertgeom.analysis.cone.hidden_state_cone_curve`)."""
        from bertgeom.analysis.cone import hidden_state_cone_curve

        curve = hidden_state_cone_curve(self.hidden_states, self.encoded.token_rows(token_set), normalized=normalized)
        return np.asarray(curve, dtype=np.float64)

    def pattern_labels(self, thresholds=None):
        """The pattern labels of every head (Kovaleva's classes, the 2025 paper's gates, Clark's
        behaviours; :func:`bertgeom.analysis.patterns.classify_heads`)."""
        from bertgeom.analysis.patterns import classify_heads

        return classify_heads(self.head_features(), thresholds)

    def read_only(self) -> "Trace":
        """Mark every array of the trace (and of its encoded input) read-only, in place, and return it.

        Why: a server shares one trace object between sessions (no copy per read); an analysis that
        tried to write into it would then change what every session sees, so it fails loudly instead.
        """
        arrays = [self.attentions, self.hidden_states, self.logits,
                  *(v for v in vars(self.encoded).values() if isinstance(v, np.ndarray))]
        for a in arrays:
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
        return self

    @property
    def num_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.attentions.shape[1])

    @property
    def probs(self) -> np.ndarray | None:
        """The raw softmax of the logits (temperature 1). What a screen, the CLI or the tour shows is
        :func:`bertgeom.probabilities.class_probabilities` (calibrated); tests/test_one_probability.py
        checks that no screen reads this."""
        if self.logits is None:
            return None
        return softmax(self.logits)

    @property
    def predicted(self) -> str | None:
        if self.logits is None or not self.labels:
            return None
        return self.labels[int(np.argmax(self.logits))]

    @property
    def axis_labels(self) -> list[str]:
        """Token labels for plot axes, made unique by their position."""
        base = self.encoded.axis_labels or self.encoded.tokens
        return [f"{i}:{t}" for i, t in enumerate(base)]


def forward(loaded: LoadedModel, input_ids, attention_mask, *, attentions: bool = True, hidden_states: bool = True,
            precision: str = "fp32"):
    """The model's own forward pass (no gradients) on ``[B, n]`` ids and mask, on the model's device:
    :func:`bertgeom.forward.run_forward` with nothing intervened on. Returns its
    :class:`~bertgeom.forward.ForwardOutput` (``attentions``, ``hidden_states`` when asked; ``logits``)."""
    from bertgeom.forward import run_forward

    out = run_forward(loaded, input_ids, attention_mask, attentions=attentions, hidden_states=hidden_states,
                      attention="model", precision=precision)
    if attentions and len(out.attentions) != loaded.num_layers:
        raise RuntimeError("The model returned no attention weights; it must run with eager attention.")
    return out


def pad_batch(loaded: LoadedModel, encoded: list[EncodedInput], width: int | None = None):
    """``(input_ids, attention_mask)`` torch tensors ``[B, width]`` (default: the longest input).

    Raises :class:`InputError` when an input is longer than ``width``.
    """
    import torch

    n = max(e.n_tokens for e in encoded) if width is None else int(width)
    if any(e.n_tokens > n for e in encoded):
        raise InputError(f"An input is longer than {n} tokens and cannot be padded to {n}.")
    pad_id = int(getattr(loaded.config, "pad_token_id", 0) or 0)
    ids = torch.full((len(encoded), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), n), dtype=torch.long)
    for b, e in enumerate(encoded):
        ids[b, : e.n_tokens] = torch.tensor(np.asarray(e.input_ids))  # a copy: shared ids are read-only
        mask[b, : e.n_tokens] = 1
    return ids, mask


def run_batch(loaded: LoadedModel, encoded: list[EncodedInput]) -> list[Trace]:
    """One padded forward pass over several inputs; each trace is cropped to its tokens."""
    import torch

    if not encoded:
        return []
    ids, mask = pad_batch(loaded, encoded)
    out = forward(loaded, ids, mask)
    attn = torch.stack(out.attentions, dim=1)  # [B, L, H, n, n]
    hidden = torch.stack(out.hidden_states, dim=1)  # [B, L+1, n, D]
    logits = getattr(out, "logits", None)
    traces = []
    for b, e in enumerate(encoded):
        t = e.n_tokens
        traces.append(
            Trace(
                model_id=loaded.spec.id,
                encoded=e,
                attentions=attn[b, :, :, :t, :t].float().cpu().numpy().copy(),
                hidden_states=hidden[b, :, :t].float().cpu().numpy().copy(),
                logits=None if logits is None else logits[b].float().cpu().numpy().copy(),
                labels=loaded.labels,
            )
        )
    return traces


def run_trace(loaded: LoadedModel, text_or_encoded: str | Record | EncodedInput) -> Trace:
    """Encode (if needed) and run one input: the single forward pass the pages share. A text is read
    by the model's input kind (its first record); a :class:`~bertgeom.inputs.Record` of a paste
    already read (:attr:`~bertgeom.inputs.InputKind.parse`) is encoded as it is, not parsed again."""
    if isinstance(text_or_encoded, EncodedInput):
        enc = text_or_encoded
    elif isinstance(text_or_encoded, Record):
        enc = encode_record(loaded, text_or_encoded)
    else:
        enc = encode_input(loaded, text_or_encoded)
    return run_batch(loaded, [enc])[0]
