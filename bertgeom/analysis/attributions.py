"""Integrated gradients of a sequence classifier's logit, with their completeness check.

* :func:`integrated_gradients` — Sundararajan et al. (2017) on the input embeddings, baseline = the
  PAD embedding (the tokenizer's own PAD id) at every content position (the first and last tokens kept),
  Riemann (midpoint) sum over ``steps``; attribution = sum over the embedding dimension. Built on
  captum's ``LayerIntegratedGradients`` (Kokhlikyan et al. 2020) over a private path module, path
  points batched, so the shared model is never hooked.
* :func:`integrated_gradients_checked` adds the completeness check the axiom allows
  (``sum(attr) = f(x) - f(baseline)``, captum's convergence delta): composite Gauss-Legendre
  quadrature, first segments placed by a probe of the logit along the path (:func:`path_edges`),
  refined only on the segments whose own check fails; the gap it reached is reported, never hidden.

Generic over models: any classifier of a family the architecture adapter reads (the variant model's
page uses it for its spike track). Gradients need torch, so this stays on torch whatever backend
classifies.

References
----------
Sundararajan, Taly & Yan 2017, *Axiomatic attribution for deep networks* (arXiv:1703.01365, §3):
integrated gradients and completeness. Kokhlikyan et al. 2020, *Captum* (arXiv:2009.07896).
de Boor 1973, *Good approximation by splines with variable knots*: breakpoints that equidistribute a
measure of change, the placement :func:`path_edges` uses. docs/methods.md, "Integrated gradients".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertgeom.models import LoadedModel


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

    from bertgeom.architectures import adapter_of, specials_of

    ad = adapter_of(loaded)
    dev = ad.word_embeddings.weight.device
    pad_id = specials_of(loaded.tokenizer, loaded.config).pad_id  # RoBERTa's <pad> is 1, BERT's [PAD] 0
    ids = torch.as_tensor(np.array(input_ids, dtype=np.int64, copy=True)).to(dev)  # a copy: shared ids are read-only
    with torch.no_grad():
        x = ad.token_embeddings(ids[None])[0]  # [T, E], as the embedding module uses them
        base = x.clone()
        pad = torch.full((1, 1), pad_id, dtype=torch.long, device=dev)
        base[1:-1] = ad.token_embeddings(pad)[0, 0]  # the PAD embedding at content positions, first/last kept
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
        ends = f32(torch.tensor([[[1.0]], [[0.0]]], device=next(loaded.model.parameters()).device))
    f_x, f_b = float(ends[0]), float(ends[1])
    k = max(1, min(int(nodes_per_segment), int(steps)))
    edges = _first_edges(loaded, input_ids, target, prec, f_b, f_x, max(1, int(steps) // k), int(probe))
    kw = dict(edges=edges, tolerance=tolerance, max_steps=max_steps, batch_size=batch_size, nodes_per_segment=k)
    res = _refine(loaded, input_ids, target, f_x, f_b, prec, **kw)
    if prec == "bf16" and not res.complete:
        again = _refine(loaded, input_ids, target, f_x, f_b, "fp32", **kw)
        res, other = (again, res) if again.gap <= res.gap else (res, again)
        extra = f"bf16 gave a {other.gap:.1%} gap, fp32 {res.gap:.1%}: the {res.precision} run is kept"
        note = "; ".join(filter(None, [res.note, extra]))
        res = IGResult(res.attributions, f_x, f_b, res.steps, tolerance, note=note, precision=res.precision)
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
