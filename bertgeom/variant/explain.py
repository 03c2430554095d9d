"""Why did the variant model predict this class? Token-level explanations and mutagenesis.

* :func:`cls_attention_by_layer` — how much [CLS] attends to each token, per layer (mean
  over heads of ``A[l, h, 0, :]``): where the classification token reads.
* :func:`attention_rollout` — Abnar & Zuidema (2020): ``R = Â_L ... Â_1`` with
  ``Â_l = 0.5 * mean_h A_l + 0.5 * I`` (rows renormalised); the [CLS] row of R.
* :func:`integrated_gradients` — Sundararajan et al. (2017) on the input embeddings of the
  k-mer tokens, baseline = the [PAD] embedding at every k-mer position ([CLS]/[SEP] kept),
  Riemann (midpoint) sum over ``steps``; attribution = sum over the embedding dimension.
  :func:`integrated_gradients_checked` adds the completeness check the axiom allows
  (``sum(attr) = f(x) - f(baseline)``): Gauss-Legendre quadrature, refined (16 -> 32 -> ... nodes)
  until the gap is within a tolerance, and the gap it reached is reported, never hidden.
* :func:`apply_changes` / :func:`probabilities_for_spike` — in-silico mutagenesis on the
  aligned spike (reference coordinates, so a change never shifts other tokens).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bertgeom.models import LoadedModel
from bertgeom.trace import Trace


def cls_attention_by_layer(trace: Trace) -> np.ndarray:
    """``[L, T]``: mean over heads of the attention row of [CLS] (position 0), per layer."""
    return trace.attentions[:, :, 0, :].mean(axis=1)


def attention_rollout(trace: Trace, residual: float = 0.5) -> np.ndarray:
    """``[L, T]``: the [CLS] row of the attention rollout after each layer (Abnar & Zuidema 2020).

    Rollout after layer l is ``R_l = M_l ... M_1`` with ``M = residual * A_mean + (1 - residual) * I``,
    rows renormalised. Only row 0 ([CLS]) is wanted, so it is pushed through from the left,
    ``e_0^T M_l ... M_1``: vector-matrix products, O(L^2 T^2) instead of the O(L T^3) of the full
    products (a 427-token genome: ~20x less work on every page run).
    """
    a = trace.attentions.mean(axis=1, dtype=np.float64)  # [L, T, T]
    L, t = a.shape[0], a.shape[-1]
    m = residual * a
    m[:, np.arange(t), np.arange(t)] += 1 - residual
    m /= m.sum(axis=-1, keepdims=True)
    rows = np.empty((L, t))
    for layer in range(L):  # L^2 / 2 vector-matrix products: a handful, not a hot loop
        v = m[layer, 0]
        for earlier in range(layer - 1, -1, -1):
            v = v @ m[earlier]
        rows[layer] = v
    return rows


def integrated_gradients(loaded: LoadedModel, input_ids: np.ndarray, target: int, *, steps: int = 16,
                         batch_size: int = 8) -> np.ndarray:
    """``[T]`` attribution of each token to the ``target`` logit (see module docstring).

    Uses ``inputs_embeds`` with gradients on a detached copy; the shared model's parameters
    are never touched (they do not require grad).
    """
    import torch

    ids = torch.tensor(np.asarray(input_ids, dtype=np.int64))[None, :]  # a copy: shared ids are read-only
    emb_layer = loaded.encoder.embeddings.word_embeddings
    with torch.no_grad():
        x = emb_layer(ids)[0]  # [T, D]
        base = x.clone()
        base[1:-1] = emb_layer.weight[0]  # [PAD] embedding at k-mer positions
    alphas = (torch.arange(steps, dtype=torch.float32) + 0.5) / steps
    mask = torch.ones((1, ids.shape[1]), dtype=torch.long)
    total = torch.zeros_like(x)
    for start in range(0, steps, batch_size):
        a = alphas[start:start + batch_size][:, None, None]
        path = (base[None] + a * (x - base)[None]).detach().requires_grad_(True)
        out = loaded.model(inputs_embeds=path, attention_mask=mask.expand(path.shape[0], -1))
        out.logits[:, target].sum().backward()
        total += path.grad.sum(0)
    attributions = ((x - base) * total / steps).sum(-1)
    return attributions.detach().numpy()


@dataclass(frozen=True)
class IGResult:
    """Integrated gradients with their completeness check."""

    attributions: np.ndarray  #: ``[T]``
    f_input: float  #: target logit at the input
    f_baseline: float  #: target logit at the baseline
    steps: int  #: quadrature nodes used
    tolerance: float

    @property
    def delta(self) -> float:
        return self.f_input - self.f_baseline

    @property
    def gap(self) -> float:
        """Relative completeness gap ``|sum(attr) - delta| / max(|delta|, 1e-6)``."""
        return abs(float(self.attributions.sum()) - self.delta) / max(abs(self.delta), 1e-6)

    @property
    def complete(self) -> bool:
        return self.gap <= self.tolerance

    def summary(self) -> str:
        return (f"attributions sum to {self.attributions.sum():.3f}; f(input) - f(baseline) = {self.delta:.3f} "
                f"(gap {self.gap:.1%} with {self.steps} quadrature nodes"
                + ("" if self.complete else f", above the {self.tolerance:.0%} tolerance: read the track with care") + ")")


def integrated_gradients_checked(loaded: LoadedModel, input_ids: np.ndarray, target: int, *, steps: int = 16,
                                 tolerance: float = 0.05, max_steps: int = 128, batch_size: int = 8) -> IGResult:
    """Integrated gradients by Gauss-Legendre quadrature on ``[0, 1]``, doubling the nodes from
    ``steps`` up to ``max_steps`` until the completeness gap is at most ``tolerance``."""
    import torch

    ids = torch.tensor(np.asarray(input_ids, dtype=np.int64))[None, :]  # a copy: shared ids are read-only
    emb_layer = loaded.encoder.embeddings.word_embeddings
    with torch.no_grad():
        x = emb_layer(ids)[0]
        base = x.clone()
        base[1:-1] = emb_layer.weight[0]
        mask = torch.ones((2, ids.shape[1]), dtype=torch.long)
        ends = loaded.model(inputs_embeds=torch.stack([x, base]), attention_mask=mask).logits[:, target]
    f_x, f_b = float(ends[0]), float(ends[1])
    n = max(2, int(steps))
    while True:
        nodes, weights = np.polynomial.legendre.leggauss(n)
        alphas = torch.as_tensor((nodes + 1) / 2, dtype=torch.float32)
        w = torch.as_tensor(weights / 2, dtype=torch.float32)
        total = torch.zeros_like(x)
        for start in range(0, n, batch_size):
            a = alphas[start:start + batch_size][:, None, None]
            path = (base[None] + a * (x - base)[None]).detach().requires_grad_(True)
            out = loaded.model(inputs_embeds=path, attention_mask=torch.ones((path.shape[0], ids.shape[1]), dtype=torch.long))
            out.logits[:, target].sum().backward()
            total += (path.grad * w[start:start + batch_size][:, None, None]).sum(0)
        attr = ((x - base) * total).sum(-1).detach().numpy()
        result = IGResult(attr, f_x, f_b, n, tolerance)
        if result.complete or n * 2 > max_steps:
            return result
        n *= 2


_NUC = re.compile(r"^([ACGT])?(\d+)([ACGTN-])$")


@dataclass(frozen=True)
class SpikeChange:
    """A nucleotide change in genome coordinates: ``pos`` (1-based) becomes ``alt``."""

    pos: int
    alt: str

    @property
    def name(self) -> str:
        from bertgeom.genome.reference import reference_sequence

        return f"{reference_sequence()[self.pos - 1]}{self.pos}{self.alt}"


def parse_change(text: str) -> SpikeChange:
    """``A23063T`` / ``23063T`` -> :class:`SpikeChange`; must fall inside the spike."""
    from bertgeom.genome.reference import SPIKE_END, SPIKE_START, reference_sequence

    m = _NUC.match((text or "").strip().upper())
    if not m:
        raise ValueError(f"'{text}' is not a nucleotide change like A23063T.")
    ref, pos, alt = m.group(1), int(m.group(2)), m.group(3)
    if not SPIKE_START <= pos <= SPIKE_END:
        raise ValueError(f"Position {pos} is outside the spike gene ({SPIKE_START}-{SPIKE_END}).")
    if ref and reference_sequence()[pos - 1] != ref:
        raise ValueError(f"The reference base at {pos} is {reference_sequence()[pos - 1]}, not {ref}.")
    return SpikeChange(pos, alt)


def apply_changes(aligned_spike: str, changes: list[SpikeChange]) -> str:
    """The aligned spike with each change written at its reference coordinate."""
    from bertgeom.genome.reference import SPIKE_START

    chars = list(aligned_spike)
    for c in changes:
        chars[c.pos - SPIKE_START] = c.alt
    return "".join(chars)


def reversion_changes(aligned_spike: str, mutation) -> list[SpikeChange]:
    """Changes that put a called spike mutation (a NucMutation) back to the reference."""
    from bertgeom.genome.reference import reference_sequence

    ref = reference_sequence()
    if mutation.kind == "sub":
        return [SpikeChange(mutation.pos, ref[mutation.pos - 1])]
    if mutation.kind == "del":
        return [SpikeChange(p, ref[p - 1]) for p in range(mutation.pos, mutation.pos + len(mutation.ref))]
    return []  # insertions are not part of the tokenised spike


def probabilities_for_spike(loaded: LoadedModel, aligned_spike: str) -> np.ndarray:
    """Class probabilities ``[C]`` of an aligned spike (one forward pass, no attentions; calibrated)."""
    from bertgeom.variant.predict import class_probabilities, logits_for_ids

    ids, _ = loaded.tokenizer.encode(aligned_spike, max_length=None)
    return class_probabilities(loaded, logits_for_ids(loaded, ids[None, :]))[0]
