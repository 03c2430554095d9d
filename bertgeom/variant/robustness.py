"""Robustness of a variant classifier to one mutation: foreign-marker injections, own-marker reversions.

Why: a genome that keeps every marker of its class must keep its call when it gains **one**
characteristic mutation of another class (convergent evolution: L452R, E484K, K417N, T478K, P681H
occur in several lineages) or loses **one** of its own (reversion, or an amplicon dropout). A
rule-based caller (Nextclade, :func:`bertgeom.genome.markers.call_by_markers`) never flips there;
a classifier that learnt single-k-mer shortcuts does.

From real held-out genomes (already aligned: their aligned spikes and insertions) this module
builds, at reference coordinates of the aligned spike (exact for substitutions, the model's own
input representation):

* **foreign**: each genome + one characteristic mutation of another class that its class does
  not carry (the issue's signature markers T19R, D80A, T76I, K417N wherever they are foreign,
  plus ``foreign_per_genome`` drawn at random from the table);
* **revert**: each genome - one of its own class's markers that it carries (``revert_per_genome``
  drawn at random; ``gh`` genomes revert D614G).

and scores any set of classifiers (callables from a list of ``(aligned, insertions)`` to class
names) by the **flip rate**: the share of perturbed genomes whose call differs from the call of
the same classifier on the unperturbed genome, next to accuracy on the plain genomes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from bertgeom.genome.markers import MarkerTable, apply_marker, load_marker_table, marker_state

#: The foreign markers named in the project's robustness issue (measured there on the first model).
SIGNATURE_FOREIGN = ("C21618G", "A21801C", "C21789T", "G22813T")  # T19R delta, D80A beta, T76I lambda, K417N beta


@dataclass(frozen=True)
class Genome:
    """One labelled genome in the model's input representation."""

    name: str
    cls: str
    aligned: str
    insertions: tuple = ()
    qc: str = ""  #: spike QC verdict (pass / warn / fail) when known


@dataclass(frozen=True)
class Perturbed:
    """A genome with one change: ``kind`` is ``foreign`` or ``revert``; ``change`` names it."""

    base: int  # index of the unperturbed genome
    kind: str
    change: str
    aligned: str
    insertions: tuple = ()


def perturbations(genomes: Sequence[Genome], table: MarkerTable | None = None, seed: int = 0,
                  foreign_per_genome: int = 2, revert_per_genome: int = 1,
                  signature: Sequence[str] = SIGNATURE_FOREIGN) -> list[Perturbed]:
    """The foreign and revert sets of the module docstring (reproducible from ``seed``)."""
    table = table or load_marker_table()
    rng = np.random.default_rng(seed)
    out: list[Perturbed] = []
    for gi, g in enumerate(genomes):
        pool = table.foreign_to(g.cls)
        named = [m for m in pool if m.name in signature]
        rest = [m for m in pool if m.name not in signature]
        picks = named + [rest[int(i)] for i in rng.permutation(len(rest))[:foreign_per_genome]]
        for m in picks:
            arr = np.frombuffer(g.aligned.encode("ascii"), dtype=np.uint8).copy()
            ins = dict(g.insertions)
            if apply_marker(arr, ins, m):
                out.append(Perturbed(gi, "foreign", f"+{m.label} ({m.cls})", arr.tobytes().decode("ascii"),
                                     tuple(sorted(ins.items()))))
        own = [m for m in table.of(g.cls, role=None) if marker_state(m, g.aligned, g.insertions) == "present"]
        for i in rng.permutation(len(own))[:revert_per_genome]:
            m = own[int(i)]
            arr = np.frombuffer(g.aligned.encode("ascii"), dtype=np.uint8).copy()
            ins = dict(g.insertions)
            if apply_marker(arr, ins, m, revert=True):
                out.append(Perturbed(gi, "revert", f"-{m.label} ({g.cls})", arr.tobytes().decode("ascii"),
                                     tuple(sorted(ins.items()))))
    return out


Classifier = Callable[[list[tuple[str, tuple]]], list[str]]


@dataclass
class RobustnessReport:
    """Accuracy on the plain genomes and flip rates per perturbation kind, for one classifier."""

    name: str
    accuracy: float
    n_plain: int
    flip_rate: dict[str, float] = field(default_factory=dict)
    n_perturbed: dict[str, int] = field(default_factory=dict)
    flips_by_change: dict[str, tuple[int, int]] = field(default_factory=dict)  # change -> (flips, n)
    wrong_confident: int = 0  #: plain genomes called wrongly with confidence >= 0.9 (when known)
    wrong_confident_qc_pass: int = 0  #: the same, among genomes whose spike passes QC


def score(name: str, classify: Classifier, genomes: Sequence[Genome], perturbed: Sequence[Perturbed],
          confidence: Callable[[list[tuple[str, tuple]]], list[float]] | None = None) -> RobustnessReport:
    """Run ``classify`` on the plain and perturbed genomes and count flips (module docstring)."""
    plain_inputs = [(g.aligned, g.insertions) for g in genomes]
    plain = classify(plain_inputs)
    pert = classify([(p.aligned, p.insertions) for p in perturbed]) if perturbed else []
    acc = float(np.mean([c == g.cls for c, g in zip(plain, genomes)])) if genomes else float("nan")
    rep = RobustnessReport(name, acc, len(genomes))
    for kind in sorted({p.kind for p in perturbed}):
        idx = [i for i, p in enumerate(perturbed) if p.kind == kind]
        flips = [pert[i] != plain[perturbed[i].base] for i in idx]
        rep.flip_rate[kind] = float(np.mean(flips))
        rep.n_perturbed[kind] = len(idx)
    by: dict[str, list[bool]] = {}
    for i, p in enumerate(perturbed):
        by.setdefault(p.change, []).append(pert[i] != plain[p.base])
    rep.flips_by_change = {k: (int(sum(v)), len(v)) for k, v in sorted(by.items())}
    if confidence is not None:
        conf = confidence(plain_inputs)
        wrong = [c != g.cls and p >= 0.9 for c, p, g in zip(plain, conf, genomes)]
        rep.wrong_confident = int(sum(wrong))
        rep.wrong_confident_qc_pass = int(sum(w and g.qc == "pass" for w, g in zip(wrong, genomes)))
    return rep


__all__ = ["Genome", "Perturbed", "RobustnessReport", "SIGNATURE_FOREIGN", "perturbations", "score"]
