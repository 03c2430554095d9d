"""Why did the variant model predict this class? Token-level explanations and mutagenesis.

* :func:`cls_attention_by_layer` — how much [CLS] attends to each token, per layer (mean
  over heads of ``A[l, h, 0, :]``): where the classification token reads.
* :func:`attention_rollout` — Abnar & Zuidema (2020): ``R = Â_L ... Â_1`` with
  ``Â_l = 0.5 * mean_h A_l + 0.5 * I`` (rows renormalised); the [CLS] row of R.
* :func:`integrated_gradients` — Sundararajan et al. (2017) on the input embeddings of the
  k-mer tokens, baseline = the [PAD] embedding at every k-mer position ([CLS]/[SEP] kept),
  Riemann (midpoint) sum over ``steps``; attribution = sum over the embedding dimension. Built on
  captum's ``LayerIntegratedGradients`` (Kokhlikyan et al. 2020), path points batched.
  :func:`integrated_gradients_checked` adds the completeness check the axiom allows
  (``sum(attr) = f(x) - f(baseline)``, captum's convergence delta): composite Gauss-Legendre
  quadrature, refined only on the path segments whose own check fails, and the gap it reached is
  reported, never hidden (docs/methods.md, "Integrated gradients").
* :func:`apply_changes` / :func:`probabilities_for_spike` — in-silico mutagenesis on the
  aligned spike (reference coordinates, so a change never shifts other tokens);
  :func:`revertible_events` names what can be reverted as the mutation table does (``S:N501Y``,
  ``del69-70``), one entry per event however many bases it spans.

References
----------
Abnar & Zuidema 2020, *Quantifying attention flow in transformers* (arXiv:2005.00928): rollout.
Sundararajan, Taly & Yan 2017, *Axiomatic attribution for deep networks* (arXiv:1703.01365, §3):
integrated gradients and completeness. Kokhlikyan et al. 2020, *Captum* (arXiv:2009.07896).
de Boor 1973, *Good approximation by splines with variable knots*: breakpoints that equidistribute a
measure of change, the placement :func:`path_edges` uses. docs/methods.md, "Integrated gradients".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bertgeom.analysis.flow import FLOW_RESIDUAL, residual_attention
from bertgeom.models import LoadedModel
from bertgeom.trace import Trace


def cls_attention_by_layer(trace: Trace) -> np.ndarray:
    """``[L, T]``: mean over heads of the attention row of [CLS] (position 0), per layer."""
    return trace.attentions[:, :, 0, :].mean(axis=1)


def attention_rollout(trace: Trace, residual: float = FLOW_RESIDUAL) -> np.ndarray:
    """``[L, T]``: the [CLS] row of the attention rollout after each layer (Abnar & Zuidema 2020).

    Rollout after layer l is ``R_l = M_l ... M_1`` with ``M = residual * A_mean + (1 - residual) * I``,
    rows renormalised. Only row 0 ([CLS]) is wanted, so it is pushed through from the left,
    ``e_0^T M_l ... M_1``: vector-matrix products, O(L^2 T^2) instead of the O(L T^3) of the full
    products (a 427-token genome: ~20x less work on every page run).
    """
    m = residual_attention(trace.attentions, residual)  # [L, T, T], the graph flow.rollout multiplies out
    L, t = m.shape[0], m.shape[-1]
    rows = np.empty((L, t))
    for layer in range(L):  # L^2 / 2 vector-matrix products: a handful, not a hot loop
        v = m[layer, 0]
        for earlier in range(layer - 1, -1, -1):
            v = v @ m[earlier]
        rows[layer] = v
    return rows


class _PathEmbedding:
    """The word embeddings along the straight path from the baseline ``b`` to the input ``x``:
    ``alpha -> b + alpha (x - b)``, a private module (so captum's hook sits on it, never on the shared
    model, which other sessions may be running at the same moment)."""

    def __new__(cls, x, b):
        import torch

        class PathEmbedding(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.x, self.b = x, b

            def forward(self, alpha):  # alpha [N, 1, 1] -> [N, T, D]
                return self.b[None] + alpha.to(self.x.dtype) * (self.x - self.b)[None]

        return PathEmbedding()


def _ig_setup(loaded: LoadedModel, input_ids: np.ndarray, target: int, precision: str):
    """``(path module, forward_func)`` for captum: ``forward_func(alpha)`` is the ``target`` logit at the
    path points (fused SDPA attention, autograd kept, on the model's device, in ``precision``)."""
    import torch

    from bertgeom.forward import run_forward

    emb = loaded.encoder.embeddings.word_embeddings
    dev = emb.weight.device
    ids = torch.as_tensor(np.array(input_ids, dtype=np.int64, copy=True)).to(dev)  # a copy: shared ids are read-only
    with torch.no_grad():
        x = emb(ids)  # [T, D]
        base = x.clone()
        base[1:-1] = emb.weight[0]  # [PAD] embedding at k-mer positions, [CLS]/[SEP] kept
    path = _PathEmbedding(x, base)

    def forward_func(alpha):
        out = run_forward(loaded, inputs_embeds=path(alpha), grad=True, attention="sdpa", precision=precision,
                          logits_only=True)  # only a logit is read: the last layer for [CLS] alone
        return out.logits[:, target].float()

    return path, forward_func


def _ig_precision(loaded: LoadedModel, precision: str) -> str:
    from bertgeom.forward import resolve_precision

    return resolve_precision(precision, loaded.device, "attribution")


def integrated_gradients(loaded: LoadedModel, input_ids: np.ndarray, target: int, *, steps: int = 16,
                         batch_size: int = 8, precision: str = "fp32") -> np.ndarray:
    """``[T]`` attribution of each token to the ``target`` logit by the midpoint rule over ``steps``
    points (see module docstring): captum's ``LayerIntegratedGradients`` over the path embedding,
    ``batch_size`` path points per forward and backward pass. The shared model is never touched."""
    import torch
    from captum.attr import LayerIntegratedGradients

    path, f = _ig_setup(loaded, input_ids, target, _ig_precision(loaded, precision))
    one = torch.ones((1, 1, 1), device=path.x.device)
    attr = LayerIntegratedGradients(f, path).attribute(one, one * 0, n_steps=int(steps), method="riemann_middle",
                                                       internal_batch_size=int(batch_size))
    return attr[0].sum(-1).detach().float().cpu().numpy()


@dataclass(frozen=True)
class IGResult:
    """Integrated gradients with their completeness check."""

    attributions: np.ndarray  #: ``[T]``
    f_input: float  #: target logit at the input
    f_baseline: float  #: target logit at the baseline
    steps: int  #: quadrature nodes used
    tolerance: float
    note: str = ""  #: what the refinement did when it did not simply converge
    precision: str = "fp32"

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
                f"(gap {self.gap:.1%} with {self.steps} quadrature nodes, {self.precision}"
                + ("" if self.complete else f", above the {self.tolerance:.0%} tolerance: read the track with care")
                + ")" + (f"; {self.note}" if self.note else ""))


#: Intervals of the probe grid that places the first segments (0: equal segments, no probe).
PROBE_INTERVALS = 8
#: Share of a first segment's width given by the logit's change along the path (the rest is uniform).
PROBE_MIX = 0.5


def path_edges(alphas: np.ndarray, values: np.ndarray, segments: int, mix: float = PROBE_MIX) -> np.ndarray:
    """``segments + 1`` increasing edges on ``[0, 1]`` that give every segment an equal share of
    ``mix * |Δf| + (1 - mix) * dα`` (piecewise linear between the probe points ``alphas``, where the
    logit is ``values``): segments narrow where the logit moves and stay wide where it is flat, and a
    flat path (or ``mix = 0``) gives equal segments: equidistribution, the textbook placement of a
    composite rule's breakpoints (see the module's References)."""
    alphas = np.asarray(alphas, dtype=np.float64)
    widths = np.diff(alphas)
    change = np.abs(np.diff(np.asarray(values, dtype=np.float64)))
    moved = change / change.sum() if change.sum() > 0 else widths
    cum = np.concatenate([[0.0], np.cumsum(mix * moved + (1 - mix) * widths)])
    inner = np.interp(np.arange(1, segments) / segments * cum[-1], cum, alphas)
    return np.concatenate([[0.0], inner, [1.0]])


def integrated_gradients_checked(loaded: LoadedModel, input_ids: np.ndarray, target: int, *, steps: int = 16,
                                 tolerance: float = 0.05, max_steps: int = 128, batch_size: int = 16,
                                 precision: str = "auto", nodes_per_segment: int = 4,
                                 probe: int = PROBE_INTERVALS) -> IGResult:
    """Integrated gradients by composite Gauss-Legendre quadrature on ``[0, 1]``, refined where the
    completeness check fails, until the gap is at most ``tolerance`` or ``max_steps`` nodes are used.

    The first attempt splits ``[0, 1]`` into ``steps / nodes_per_segment`` segments of
    ``nodes_per_segment`` Gauss-Legendre nodes, placed by :func:`path_edges` from the logit at the
    ``probe - 1`` inner points of an even grid (one forward pass without gradients, the attribution
    precision): the variant model's logit jumps on a short stretch of the path, and equal segments
    put all of it in one, which then had to be halved (``probe = 0``: equal segments).

    Completeness holds on every segment ``[a, b]`` of the path (its attributions sum to ``f(b) - f(a)``;
    the difference is captum's convergence delta, taken with fp32 values of ``f`` at the breakpoints,
    one batched forward per round), so each round halves only the segments whose delta exceeds their
    share ``tolerance * |Δ| * (b - a)``, worst first, within the node budget; the others keep their
    result. All segments of a round go through one captum call, ``batch_size`` path points per forward
    and backward pass. When a round makes the total gap worse, the best attempt is kept and the result
    says so. ``f(input)`` and ``f(baseline)`` are always fp32. ``precision``: ``auto`` follows
    :func:`bertgeom.forward.resolve_precision` for attributions (bf16 where the device has bf16 units);
    a bf16 run that stays above the tolerance is redone in fp32 and the better of the two kept (said in
    the result).
    """
    import torch

    prec = _ig_precision(loaded, precision)
    _, f32 = _ig_setup(loaded, input_ids, target, "fp32")
    with torch.no_grad():
        ends = f32(torch.tensor([[[1.0]], [[0.0]]], device=loaded.encoder.embeddings.word_embeddings.weight.device))
    f_x, f_b = float(ends[0]), float(ends[1])
    k = max(1, min(int(nodes_per_segment), int(steps)))
    edges = _first_edges(loaded, input_ids, target, prec, f_b, f_x, max(1, int(steps) // k), int(probe))
    kw = dict(edges=edges, tolerance=tolerance, max_steps=max_steps, batch_size=batch_size, nodes_per_segment=k)
    res = _refine(loaded, input_ids, target, f_x, f_b, prec, **kw)
    if prec == "bf16" and not res.complete:
        again = _refine(loaded, input_ids, target, f_x, f_b, "fp32", **kw)
        res, other = (again, res) if again.gap <= res.gap else (res, again)
        extra = f"bf16 gave a {other.gap:.1%} gap, fp32 {res.gap:.1%}: the {res.precision} run is kept"
        res = IGResult(res.attributions, f_x, f_b, res.steps, tolerance, note="; ".join(filter(None, [res.note, extra])),
                       precision=res.precision)
    return res


def _first_edges(loaded: LoadedModel, input_ids, target: int, prec: str, f_b: float, f_x: float, segments: int,
                 probe: int) -> np.ndarray:
    """The first attempt's segment edges (see :func:`integrated_gradients_checked`)."""
    if segments < 2 or probe < 2:
        return np.linspace(0.0, 1.0, segments + 1)
    import torch

    path, f = _ig_setup(loaded, input_ids, target, prec)
    grid = np.linspace(0.0, 1.0, probe + 1)
    with torch.no_grad():
        inner = f(torch.tensor(grid[1:-1], dtype=torch.float32, device=path.x.device)[:, None, None])
    values = np.concatenate([[f_b], inner.float().cpu().numpy(), [f_x]])  # the ends in fp32, as known
    return path_edges(grid, values, segments)


def _refine(loaded: LoadedModel, input_ids, target: int, f_x: float, f_b: float, prec: str, *, edges: np.ndarray,
            tolerance: float, max_steps: int, batch_size: int, nodes_per_segment: int) -> IGResult:
    """The refinement loop of :func:`integrated_gradients_checked` in one precision, from ``edges``."""
    import torch
    from captum.attr import LayerIntegratedGradients

    path, f = _ig_setup(loaded, input_ids, target, prec)
    _, f32 = _ig_setup(loaded, input_ids, target, "fp32") if prec != "fp32" else (path, f)
    lig = LayerIntegratedGradients(f, path)
    dev = path.x.device
    f_at = {0.0: f_b, 1.0: f_x}  # fp32 target logit at the path's breakpoints

    def known(alphas) -> None:
        new = sorted({float(a) for a in alphas} - set(f_at))
        if new:
            with torch.no_grad():
                vals = f32(torch.tensor(new, dtype=torch.float32, device=dev)[:, None, None])
            f_at.update(zip(new, vals.float().cpu().numpy().tolist()))

    k = int(nodes_per_segment)
    todo = [(float(a), float(b)) for a, b in zip(edges[:-1], edges[1:])]  # segments to (re)compute
    done: dict[tuple[float, float], tuple[np.ndarray, float]] = {}  # segment -> (attributions [T], delta)
    span = max(abs(f_x - f_b), 1e-6)
    best: IGResult | None = None
    history: list[tuple[int, float]] = []
    while True:
        hi = torch.tensor([b for _, b in todo], dtype=torch.float32, device=dev)[:, None, None]
        lo = torch.tensor([a for a, _ in todo], dtype=torch.float32, device=dev)[:, None, None]
        attr = lig.attribute(hi, lo, n_steps=k, method="gausslegendre", internal_batch_size=int(batch_size))
        seg_attr = attr.sum(-1).detach().float().cpu().numpy()  # [S, T]
        known([a for seg in todo for a in seg])  # one forward for the new breakpoints
        for (a, b), row in zip(todo, seg_attr):  # the segment's convergence delta (captum's definition)
            done[(a, b)] = (row, float(row.sum()) - (f_at[b] - f_at[a]))
        segs = sorted(done)
        res = IGResult(np.sum([done[s][0] for s in segs], axis=0), f_x, f_b, k * len(segs), tolerance, precision=prec)
        history.append((res.steps, res.gap))
        if best is None or res.gap < best.gap:
            best = res
        failing = sorted((s for s in segs if abs(done[s][1]) > tolerance * span * (s[1] - s[0])),
                         key=lambda s: -abs(done[s][1]))
        room = (int(max_steps) - res.steps) // k  # each split adds one segment of k nodes
        if res.complete or not failing or room < 1:
            break
        todo = []
        for a, b in failing[:room]:
            del done[(a, b)]
            m = (a + b) / 2
            todo += [(a, m), (m, b)]
    trail = " -> ".join(f"{n} nodes {g:.1%}" for n, g in history)
    if best is not res:
        return IGResult(best.attributions, f_x, f_b, best.steps, tolerance, precision=prec,
                        note=f"refining ({trail}) made the gap worse; the attempt with {best.steps} nodes is kept")
    if len(history) > 1:
        return IGResult(res.attributions, f_x, f_b, res.steps, tolerance, precision=prec,
                        note=f"refined where the check failed: {trail}")
    return res


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


@dataclass(frozen=True)
class RevertibleEvent:
    """One thing the what-if can put back to the reference: a mutation event of the spike's table
    (a substitution, a deletion; events sharing a base are one entry, e.g. ``S:L24- + S:P25- +
    S:P26- + S:A27S`` from one deletion) or a base change with no amino-acid effect."""

    name: str  #: as the mutation table writes it (``S:N501Y``, ``S:H69- + S:V70-``); a silent change by its base
    mutations: tuple  #: the NucMutations it reverts
    silent: bool = False  #: a base change with no amino-acid effect (in no table row)
    aliases: tuple = ()  #: earlier names the search also finds (``del69-70``, ``del21765-21770``)

    @property
    def nucleotides(self) -> str:
        return ", ".join(m.name for m in self.mutations)

    @property
    def label(self) -> str:
        also = f"; also {', '.join(self.aliases)}" if self.aliases else ""
        if self.silent:
            return f"{self.name} (no amino-acid change{also})"
        return f"{self.name} ({self.nucleotides}{also})"


def legacy_names(names: list[str], mutations) -> tuple[str, ...]:
    """The grouped forms bertgeom wrote before it took Nextclade's (``del69-70`` for ``S:H69- +
    S:V70-``, ``del21765-21770`` for ``21765-21770``), so a what-if search in either form finds the entry."""
    import re

    residues = sorted(int(m.group(1)) for n in names if (m := re.match(r"^S:[A-Z*](\d+)-$", n)))
    out = []
    if residues:
        runs, start = [], residues[0]
        for a, b in zip(residues, residues[1:] + [None]):
            if b != a + 1:
                runs.append((start, a))
                start = b
        out += [f"del{a}" if a == b else f"del{a}-{b}" for a, b in runs]
    out += [f"del{m.name}" for m in mutations if m.kind == "del"]
    return tuple(out)


def revertible_events(report, events: list[dict]) -> list[RevertibleEvent]:
    """The spike's substitutions and deletions grouped as the mutation table's ``events`` (rows with
    ``name`` and ``nuc``, see ``bertgeom.variant.result.mutation_events``), in genome order. Events
    that share a nucleotide change become one entry (reverting that base undoes both); a base change
    that is in no event (synonymous) is an entry of its own, named by the base."""
    nuc = [m for m in report.spike_nucleotide if m.kind in ("sub", "del")]
    by_name = {m.name: m for m in nuc}
    groups: list[tuple[list[str], list]] = []  # (event names, mutations), merged on shared bases
    for e in events:
        muts = [by_name[n] for n in e["nuc"] if n in by_name]
        if not muts:
            continue  # an insertion: not part of the tokenised spike
        hit = [g for g in groups if any(m in g[1] for m in muts)]
        names, members = [e["name"]], list(muts)
        for g in hit:
            groups.remove(g)
            names = g[0] + names
            members = g[1] + [m for m in members if m not in g[1]]
        groups.append((list(dict.fromkeys(names)), list(dict.fromkeys(members))))
    grouped = {id(m) for _, ms in groups for m in ms}
    out = [RevertibleEvent(" + ".join(names), tuple(sorted(ms, key=lambda m: m.pos)), aliases=legacy_names(names, ms))
           for names, ms in groups]
    out += [RevertibleEvent(m.name, (m,), silent=True) for m in nuc if id(m) not in grouped]
    return sorted(out, key=lambda e: e.mutations[0].pos)


def probabilities_for_spike(loaded: LoadedModel, aligned_spike: str) -> np.ndarray:
    """Class probabilities ``[C]`` of an aligned spike (one forward pass, no attentions; calibrated)."""
    from bertgeom.variant.predict import class_probabilities, logits_for_ids

    ids, _ = loaded.tokenizer.encode(aligned_spike, max_length=None)
    return class_probabilities(loaded, logits_for_ids(loaded, ids[None, :]))[0]
