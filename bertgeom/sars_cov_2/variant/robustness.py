"""Robustness of a variant classifier to one mutation: foreign-marker injections, own-marker reversions.

Why: a genome that keeps every marker of its class must keep its call when it gains **one**
characteristic mutation of another class (convergent evolution: L452R, E484K, K417N, T478K, P681H
occur in several lineages) or loses **one** of its own (reversion, or an amplicon dropout). A
rule-based caller (Nextclade, :func:`bertgeom.sars_cov_2.genome.markers.call_by_markers`) never flips there;
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

The **wide benchmark** (:func:`wide_perturbations`, :func:`score_kinds`) adds the cases real
genomes bring (:data:`KINDS`): two and three markers of **one** other class with every own marker
kept (convergent evolution), two own markers reverted, 1-10 private substitutions at non-marker
sites, real ARTIC V3 / V4.1 amplicon dropouts over the spike, random N runs of 100-500 nt, and
partial spikes. Per kind and classifier it reports accuracy, flip rate (also where the rule-based
call keeps its class), wrong calls with confidence >= 0.9 (QC pass / all) and the expected
calibration error (:func:`expected_calibration_error`, Guo et al. 2017, arXiv:1706.04599).

References: Guo, Pleiss, Sun & Weinberger, "On Calibration of Modern Neural Networks" (ICML 2017,
arXiv:1706.04599, §2 ECE and reliability diagrams, §4.2 temperature scaling); ARTIC network primer
schemes V3 and V4.1 (artic-network/artic-ncov2019).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from bertgeom.sars_cov_2.genome.augment import amplicon_dropout, marker_changes_by_class, private_substitutions
from bertgeom.sars_cov_2.genome.classes import VOC_CLASSES
from bertgeom.sars_cov_2.genome.markers import MarkerTable, apply_marker, load_marker_table, marker_state
from bertgeom.sars_cov_2.genome.reference import SPIKE_START

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


#: The kinds of the wide benchmark, in report order, with what each one is.
KINDS = {
    "plain": "the genome as it is",
    "foreign1": "+1 marker of one other class",
    "foreign2": "+2 markers of one other class",
    "foreign3": "+3 markers of one other class",
    "revert1": "-1 own marker (reverted)",
    "revert2": "-2 own markers (reverted)",
    "private": "+1-10 private substitutions (non-marker sites)",
    "dropout": "ARTIC V3/V4.1 amplicon dropout (N)",
    "n_run": "N run of 100-500 nt",
    "partial": "partial spike (one end missing, 300-1200 nt)",
}

#: Draws per genome and kind (the plain genome counts once).
DEFAULT_DRAWS = {"foreign1": 2, "foreign2": 3, "foreign3": 2, "revert1": 1, "revert2": 1, "private": 2,
                 "dropout": 2, "n_run": 1, "partial": 1}


def _copy(g: Genome) -> tuple[np.ndarray, dict]:
    return np.frombuffer(g.aligned.encode("ascii"), dtype=np.uint8).copy(), dict(g.insertions)


def _done(gi: int, kind: str, change: str, arr: np.ndarray, ins: dict) -> Perturbed:
    return Perturbed(gi, kind, change, arr.tobytes().decode("ascii"), tuple(sorted(ins.items())))


def wide_perturbations(genomes: Sequence[Genome], seed: int = 0, draws: dict[str, int] | None = None,
                       table: MarkerTable | None = None) -> list[Perturbed]:
    """The perturbations of every kind in :data:`KINDS` but ``plain`` (``draws`` per genome and kind),
    reproducible from ``seed``. Foreign markers are never put on an own marker's site (every own
    marker is kept) and all come from one donor class per draw."""
    table = table or load_marker_table()
    draws = {**DEFAULT_DRAWS, **(draws or {})}
    by_class = marker_changes_by_class(table)
    all_sites = {i for ms in by_class.values() for m in ms for i in range(*m.span)}
    rng = np.random.default_rng([seed, 2026])
    out: list[Perturbed] = []
    for gi, g in enumerate(genomes):
        own = by_class.get(g.cls, [])
        own_keys = {m.key for m in table.of(g.cls, role=None)}
        own_sites = {i for m in own for i in range(*m.span)}
        for k in (1, 2, 3):
            donors = {}
            for c in VOC_CLASSES:
                if c == g.cls:
                    continue
                usable = [m for m in by_class.get(c, []) if m.key not in own_keys
                          and not own_sites.intersection(range(*m.span))
                          # a change the genome already carries (G142D of Omicron on a Delta) is no injection
                          and marker_state(m, g.aligned, g.insertions) != "present"]
                if len(usable) >= k:
                    donors[c] = usable
            names = sorted(donors)
            for _ in range(draws[f"foreign{k}"]):
                if not names:
                    break
                donor = names[int(rng.integers(len(names)))]
                pool = donors[donor]
                for _try in range(4):
                    arr, ins = _copy(g)
                    picked = [pool[int(i)] for i in rng.permutation(len(pool))[:k]]
                    spans = [set(range(*m.span)) for m in picked]
                    if any(spans[i] & spans[j] for i in range(k) for j in range(i)):
                        continue
                    if all(apply_marker(arr, ins, m) for m in picked):
                        out.append(_done(gi, f"foreign{k}", f"+{' +'.join(m.label for m in picked)} ({donor})",
                                         arr, ins))
                        break
        present = [m for m in own if marker_state(m, g.aligned, g.insertions) == "present"]
        for k in (1, 2):
            for _ in range(draws[f"revert{k}"]):
                if len(present) < k:
                    break
                arr, ins = _copy(g)
                picked = [present[int(i)] for i in rng.permutation(len(present))[:k]]
                if all(apply_marker(arr, ins, m, revert=True) for m in picked):
                    out.append(_done(gi, f"revert{k}", f"-{' -'.join(m.label for m in picked)} ({g.cls})", arr, ins))
        for _ in range(draws["private"]):
            arr, ins = _copy(g)
            n = int(rng.integers(1, 11))
            ev = private_substitutions(arr, n, rng, set(all_sites))
            out.append(_done(gi, "private", f"{len(ev)} private", arr, ins))
        for _ in range(draws["dropout"]):
            arr, ins = _copy(g)
            out.append(_done(gi, "dropout", amplicon_dropout(arr, ins, rng, 1), arr, ins))
        for _ in range(draws["n_run"]):
            arr, ins = _copy(g)
            length = int(rng.integers(100, 501))
            a = int(rng.integers(0, len(arr) - length))
            arr[a : a + length] = ord("N")
            for p in [p for p in ins if a - 1 <= p - SPIKE_START < a + length]:
                del ins[p]
            out.append(_done(gi, "n_run", f"N run {length} nt", arr, ins))
        for _ in range(draws["partial"]):
            arr, ins = _copy(g)
            n = int(rng.integers(300, 1201))
            if rng.random() < 0.5:
                arr[:n] = ord("N")
                ins = {p: v for p, v in ins.items() if p - SPIKE_START >= n}
                change = f"missing start {n} nt"
            else:
                arr[len(arr) - n :] = ord("N")
                ins = {p: v for p, v in ins.items() if p - SPIKE_START < len(arr) - n - 1}
                change = f"missing end {n} nt"
            out.append(_done(gi, "partial", change, arr, ins))
    return out


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[bool], bins: int = 15) -> float:
    """ECE (Guo et al. 2017, §2): the |accuracy - mean confidence| of equal-width confidence bins,
    weighted by the bin's share of the samples (top-label confidence)."""
    conf = np.asarray(confidence, dtype=float)
    ok = np.asarray(correct, dtype=float)
    if not len(conf):
        return float("nan")
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
    ece = 0.0
    for b in range(bins):
        m = which == b
        if m.any():
            ece += m.mean() * abs(ok[m].mean() - conf[m].mean())
    return float(ece)


def reliability_bins(confidence: Sequence[float], correct: Sequence[bool], bins: int = 10) -> list[dict]:
    """Per confidence bin: its range, sample count, mean confidence and accuracy (reliability diagram)."""
    conf = np.asarray(confidence, dtype=float)
    ok = np.asarray(correct, dtype=float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
    out = []
    for b in range(bins):
        m = which == b
        out.append({"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": int(m.sum()),
                    "confidence": float(conf[m].mean()) if m.any() else None,
                    "accuracy": float(ok[m].mean()) if m.any() else None})
    return out


@dataclass
class KindScore:
    """One classifier on one perturbation kind."""

    n: int
    accuracy: float
    flip_rate: float | None = None  #: call differs from the same classifier's call on the plain genome
    n_rule_kept: int = 0  #: perturbations where the rule-based call kept its plain call
    flip_rate_rule_kept: float | None = None  #: flip rate among those
    wrong_confident: int | None = None  #: wrong with confidence >= 0.9
    wrong_confident_qc_pass: int | None = None  #: the same, where the genome's spike passes QC
    ece: float | None = None
    examples: list[str] = field(default_factory=list)  #: a few flips / confident errors, for the log


Scorer = Callable[[list[tuple[str, tuple]]], tuple[list[str], list[float] | None]]


def score_kinds(calls_and_conf: Scorer, genomes: Sequence[Genome], perturbed: Sequence[Perturbed],
                rule_calls: tuple[list[str], list[str]] | None = None, threshold: float = 0.9) -> dict[str, KindScore]:
    """Per kind (``plain`` first): accuracy against the true class, flip rate, flip rate where the
    rule-based call kept its class (``rule_calls``: its plain and perturbed calls), confident errors
    and ECE (when the classifier gives confidences)."""
    plain_calls, plain_conf = calls_and_conf([(g.aligned, g.insertions) for g in genomes])
    pert_calls, pert_conf = calls_and_conf([(p.aligned, p.insertions) for p in perturbed]) if perturbed else ([], [])
    out: dict[str, KindScore] = {}
    kinds = ["plain"] + [k for k in KINDS if k != "plain" and any(p.kind == k for p in perturbed)]
    for kind in kinds:
        if kind == "plain":
            idx = list(range(len(genomes)))
            truth = [g.cls for g in genomes]
            calls, conf = plain_calls, plain_conf
            qc = [g.qc for g in genomes]
            base_calls = None
        else:
            idx = [i for i, p in enumerate(perturbed) if p.kind == kind]
            truth = [genomes[perturbed[i].base].cls for i in idx]
            calls = [pert_calls[i] for i in idx]
            conf = None if pert_conf is None else [pert_conf[i] for i in idx]
            qc = [genomes[perturbed[i].base].qc for i in idx]
            base_calls = [plain_calls[perturbed[i].base] for i in idx]
        correct = [c == t for c, t in zip(calls, truth)]
        ks = KindScore(len(idx), float(np.mean(correct)) if idx else float("nan"))
        if base_calls is not None and idx:
            flips = [c != b for c, b in zip(calls, base_calls)]
            ks.flip_rate = float(np.mean(flips))
            if rule_calls is not None:
                rp, rq = rule_calls
                kept = [rq[i] == rp[perturbed[i].base] for i in idx]
                ks.n_rule_kept = int(sum(kept))
                ks.flip_rate_rule_kept = float(np.mean([f for f, k in zip(flips, kept) if k])) if any(kept) else None
            ks.examples = [f"{genomes[perturbed[i].base].name} ({t}) {perturbed[i].change} -> {c}"
                           for i, f, c, t in zip(idx, flips, calls, truth) if f][:5]
        if conf is not None and idx:
            wrong = [not ok and p >= threshold for ok, p in zip(correct, conf)]
            ks.wrong_confident = int(sum(wrong))
            ks.wrong_confident_qc_pass = int(sum(w and q == "pass" for w, q in zip(wrong, qc)))
            ks.ece = expected_calibration_error(conf, correct)
        out[kind] = ks
    return out


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def markdown_tables(result: dict) -> str:
    """Two markdown tables of a wide benchmark result (``bench/bench_robustness.py``), one row per kind: \
calls (accuracy, flips) and confidence (confident errors, ECE)."""
    reps = result["reports"]
    bert, base, rule = (reps["BERT variant model"], reps["k-mer count logistic regression"],
                        reps["rule-based marker call"])
    raw = reps.get("BERT, raw softmax", bert)
    kinds = result["kinds"]
    rows = ["| perturbation | n | BERT: accuracy | BERT: flips (where the rule call keeps its class) | k-mer: accuracy "
            "| k-mer: flips | rules: accuracy | rules: flips |", "|---|---|---|---|---|---|---|---|"]
    for k in bert:
        b, m, r = bert[k], base[k], rule[k]
        flips = "" if b["flip_rate"] is None else (f"{_pct(b['flip_rate'])} ({_pct(b['flip_rate_rule_kept'])} of "
                                                   f"{b['n_rule_kept']})")
        rows.append(f"| {kinds[k]} | {b['n']} | {_pct(b['accuracy'])} | {flips or '—'} | {_pct(m['accuracy'])} | "
                    f"{'—' if m['flip_rate'] is None else _pct(m['flip_rate'])} | {_pct(r['accuracy'])} | "
                    f"{'—' if r['flip_rate'] is None else _pct(r['flip_rate'])} |")
    conf = ["| perturbation | BERT: wrong with conf. >= 0.9 (QC pass / all) | BERT: ECE "
            "| BERT raw softmax: wrong >= 0.9 "
            "| BERT raw: ECE | k-mer: wrong >= 0.9 | k-mer: ECE |", "|---|---|---|---|---|---|---|"]
    for k in bert:
        b, w, m = bert[k], raw[k], base[k]
        conf.append(f"| {kinds[k]} | {b['wrong_confident_qc_pass']} / {b['wrong_confident']} | {b['ece']:.3f} | "
                    f"{w['wrong_confident_qc_pass']} / {w['wrong_confident']} | {w['ece']:.3f} | "
                    f"{m['wrong_confident_qc_pass']} / {m['wrong_confident']} | {m['ece']:.3f} |")
    return "\n".join(rows) + "\n\n" + "\n".join(conf)


def release_gates(result: dict) -> dict[str, dict]:
    """The robustness and calibration criteria a retrained model must meet before it replaces the
    shipped one (project issue 26), checked on a wide benchmark result: name -> {ok, value}."""
    bert, rule = result["reports"]["BERT variant model"], result["reports"]["rule-based marker call"]
    f2 = bert.get("foreign2", {}).get("flip_rate_rule_kept")
    f1 = bert.get("foreign1", {}).get("flip_rate")
    worst = max((v.get("wrong_confident_qc_pass") or 0) for v in bert.values())
    ece = bert["plain"]["ece"]
    return {
        "+2 markers of one other class flip <= 1% where the rule-based call keeps the class":
            {"ok": f2 is not None and f2 <= 0.01, "value": f2},
        "no QC-pass genome wrong with confidence >= 0.9 on any kind": {"ok": worst == 0, "value": worst},
        "plain accuracy >= the rule-based call's": {"ok": bert["plain"]["accuracy"] >= rule["plain"]["accuracy"],
                                                    "value": [bert["plain"]["accuracy"], rule["plain"]["accuracy"]]},
        "+1 marker of one other class flips <= 0.5%": {"ok": f1 is not None and f1 <= 0.005, "value": f1},
        "ECE <= 0.02 on the plain evaluation genomes (calibrated)": {"ok": ece is not None and ece <= 0.02,
                                                                     "value": ece},
    }


__all__ = ["DEFAULT_DRAWS", "Genome", "KINDS", "KindScore", "Perturbed", "RobustnessReport", "SIGNATURE_FOREIGN",
           "expected_calibration_error", "markdown_tables", "perturbations", "release_gates", "reliability_bins",
           "score", "score_kinds", "wide_perturbations"]
