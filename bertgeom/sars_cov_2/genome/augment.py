"""Label-preserving augmentation of training spikes that mimics real evolution and sequencing.

Why: a classifier that has only seen each class's full marker set can learn single-k-mer
shortcuts (one Lambda k-mer -> "Lambda"), while SARS-CoV-2 lineages share convergent mutations
(L452R, E484K, K417N, T478K, P681H, ...). Each augmented spike keeps its label, and every change is
made at reference coordinates of the aligned spike (the model's own input representation, see
:mod:`.kmers`):

* **convergence**: 1-3 characteristic mutations of *other* classes (:mod:`.markers`) are
  injected (substitutions, deletions and insertions), never more than
  :attr:`AugmentConfig.max_foreign_share` of one foreign class's markers; with
  :attr:`AugmentConfig.one_class_prob` all of them come from **one** foreign class (two or three
  signature substitutions of one VOC on another lineage: the case that broke the first models);
  half of those that fall on an own marker's codon are kept and replace it (T19R on Omicron's
  T19I, L452Q on Delta's L452R);
* **reversion**: 1-2 of the class's own markers are reverted to the reference base;
* **dropout**: an own marker falls under an N run (a short run or a 200-300 nt amplicon dropout),
  and, independently, one or two real ARTIC V3 / V4.1 amplicons over the spike drop out
  (:func:`artic_dropouts`, the N runs a failed amplicon leaves in a consensus);
* **private substitutions** at realistic rates (Poisson, transition-biased), sometimes a burst of
  1-10 at non-marker sites, and a partial spike (one end missing).

The markers come through one seam, :func:`marker_changes_by_class` ("class -> its marker
nucleotide changes"), so a new marker table format only needs that function adapted.

An augmentation is kept only if the marker-based call (:func:`.markers.call_by_markers`) of the
result still gives the label: so "label-preserving" means what a rule-based caller such as
Nextclade would say, not a guess. Everything is drawn from the ``rng`` passed in, so a run is
reproducible from its seed (and resumable: the trainer seeds each step).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from .markers import MarkerTable, apply_marker, call_by_markers, load_marker_table
from .reference import SPIKE_END, SPIKE_START, data_path


def marker_changes_by_class(table: MarkerTable | None = None) -> dict[str, list]:
    """The one seam to the marker table: class -> its marker nucleotide changes (objects with
    ``kind`` sub/del/ins, ``pos``, ``ref``, ``alt``, ``name``, ``label``, ``span``, ``key``;
    ``role == "marker"`` only, so ``gh`` has none)."""
    from .classes import CLASSES

    table = table or load_marker_table()
    return {c: list(table.of(c)) for c in CLASSES}


@functools.lru_cache(maxsize=1)
def artic_dropouts() -> tuple[tuple[str, int, int, int], ...]:
    """``(scheme, amplicon, start, end)`` of the N run (genome coordinates, 1-based, inclusive) that
    each ARTIC V3 / V4.1 amplicon over the spike leaves when it alone fails
    (``definitions/artic_amplicons_spike.tsv``, derived from the ARTIC primer BED files)."""
    out = []
    for line in data_path("definitions", "artic_amplicons_spike.tsv").read_text().splitlines():
        if line.startswith("#") or line.startswith("scheme") or not line.strip():
            continue
        scheme, amp, _, _, a, b = line.split("\t")
        out.append((scheme, int(amp), max(int(a), SPIKE_START), min(int(b), SPIKE_END)))
    return tuple(out)


def amplicon_dropout(arr: np.ndarray, insertions: dict, rng: np.random.Generator, n: int = 1) -> str:
    """Write N over ``n`` adjacent ARTIC amplicons of one scheme (drawn from ``rng``), in place;
    insertions inside are dropped. Returns the event's name."""
    drops = artic_dropouts()
    scheme = drops[int(rng.integers(len(drops)))][0]
    mine = [d for d in drops if d[0] == scheme]
    i = int(rng.integers(max(1, len(mine) - n + 1)))
    chosen = mine[i : i + n]
    a, b = chosen[0][2] - SPIKE_START, chosen[-1][3] - SPIKE_START + 1
    arr[a:b] = ord("N")
    for p in [p for p in insertions if a - 1 <= p - SPIKE_START < b]:
        del insertions[p]
    return f"N {chosen[0][2]}-{chosen[-1][3]} ({scheme} amplicon{'s' if n > 1 else ''} " \
           f"{'-'.join(str(c[1]) for c in chosen)} dropped out)"


def private_substitutions(arr: np.ndarray, n: int, rng: np.random.Generator, avoid: set[int]) -> list[str]:
    """``n`` transition-biased substitutions at ACGT sites outside ``avoid`` (spike offsets), in place."""
    events = []
    for _ in range(4 * n):
        if len(events) >= n:
            break
        i = int(rng.integers(len(arr)))
        b = chr(arr[i])
        if b not in _TRANSITION or i in avoid:
            continue
        alt = (_TRANSITION[b] if rng.random() < 0.7
               else str(rng.choice([x for x in "ACGT" if x not in (b, _TRANSITION[b])])))
        arr[i] = ord(alt)
        avoid.add(i)
        events.append(f"private {b}{SPIKE_START + i}{alt}")
    return events


_TRANSITION = {"A": "G", "G": "A", "C": "T", "T": "C"}
_ACGT = np.frombuffer(b"ACGT", dtype=np.uint8)


@dataclass(frozen=True)
class AugmentConfig:
    """Probabilities and sizes of each augmentation (per training example)."""

    foreign_prob: float = 0.5  #: inject foreign characteristic mutations
    foreign_counts: tuple[float, float, float] = (0.6, 0.3, 0.1)  #: P(1), P(2), P(3) foreign mutations
    one_class_prob: float = 0.0  #: all foreign mutations from one foreign class (convergence on one VOC)
    max_foreign_share: float = 0.34  #: at most this share of one foreign class's markers
    same_site_prob: float = 0.5  #: accept a foreign mutation at an own marker's site (it replaces that marker)
    revert_prob: float = 0.3  #: revert own markers to the reference
    revert_counts: tuple[float, float] = (0.75, 0.25)  #: P(1), P(2) reverted markers
    mask_prob: float = 0.2  #: hide one own marker under an N run
    mask_amplicon_share: float = 0.5  #: that N run is an amplicon dropout (200-300 nt), else 1-30 nt
    private_rate: float = 0.5  #: Poisson mean of extra private substitutions
    private_burst_prob: float = 0.0  #: 1-10 more private substitutions at non-marker sites
    amplicon_prob: float = 0.0  #: one (or, a quarter of the time, two adjacent) ARTIC amplicons drop out
    partial_prob: float = 0.05  #: one spike end missing (up to ``partial_max`` nt)
    partial_max: int = 900
    tries: int = 4  #: draws before giving up and returning the spike unchanged

    @classmethod
    def none(cls) -> "AugmentConfig":
        return cls(foreign_prob=0.0, revert_prob=0.0, mask_prob=0.0, private_rate=0.0, partial_prob=0.0)

    @classmethod
    def convergent(cls) -> "AugmentConfig":
        """The rates of the robust retraining (issue: two or three markers of one other class are
        the common real case; private noise and amplicon dropouts as in real consensus genomes)."""
        return cls(foreign_prob=0.8, foreign_counts=(0.3, 0.4, 0.3), one_class_prob=0.75, max_foreign_share=0.45,
                   same_site_prob=1.0, private_rate=1.0, private_burst_prob=0.25, amplicon_prob=0.25,
                   partial_prob=0.08)


@dataclass
class Augmented:
    """An augmented aligned spike with what was done to it (nucleotide names, in order)."""

    aligned: str
    insertions: list[tuple[int, str]]
    events: list[str] = field(default_factory=list)


def _n_run(arr: np.ndarray, centre: int, length: int, rng: np.random.Generator) -> tuple[int, int]:
    start = centre - int(rng.integers(0, length))
    a, b = max(start, 0), min(start + length, len(arr))
    # an N run swallows deletions it touches (consensus callers write missing amplicons at reference length)
    while a > 0 and arr[a - 1] == ord("-"):
        a -= 1
    while b < len(arr) and arr[b] == ord("-"):
        b += 1
    arr[a:b] = ord("N")
    return a, b


def _draw(aligned: str, insertions, cls: str, rng: np.random.Generator, cfg: AugmentConfig,
          table: MarkerTable) -> Augmented:
    arr = np.frombuffer(aligned.encode("ascii"), dtype=np.uint8).copy()
    ins = dict(insertions)
    events: list[str] = []
    own = table.of(cls, role=None)  # gh: its context marker D614G may be reverted too (19A/19B lack it)
    own_sites = {i for m in own for i in range(*m.span)}
    touched: set[int] = set()
    if rng.random() < cfg.foreign_prob:
        n = 1 + int(rng.choice(len(cfg.foreign_counts), p=np.asarray(cfg.foreign_counts) / sum(cfg.foreign_counts)))
        pool = table.foreign_to(cls)
        if rng.random() < cfg.one_class_prob:
            by_class = marker_changes_by_class(table)
            others = [c for c in by_class if c != cls and by_class[c]]
            donor = others[int(rng.integers(len(others)))]
            donor_keys = {m.key for m in by_class[donor]}
            pool = [m for m in pool if m.key in donor_keys]
        per_class: dict[str, int] = {}
        for i in rng.permutation(len(pool))[: 4 * n]:
            if n == 0:
                break
            m = pool[int(i)]
            holders = [c for c in table.classes_with(m.key) if c != cls]
            if any(per_class.get(c, 0) + 1 > cfg.max_foreign_share * len(table.of(c)) for c in holders):
                continue
            if touched.intersection(range(*m.span)):
                continue  # one change per site
            if own_sites.intersection(range(*m.span)) and rng.random() >= cfg.same_site_prob:
                continue  # same codon as an own marker (T19R on Omicron's T19I): the own marker is lost too
            if apply_marker(arr, ins, m):
                touched.update(range(*m.span))
                for c in holders:
                    per_class[c] = per_class.get(c, 0) + 1
                events.append(f"+{m.name} ({m.cls} {m.label})")
                n -= 1
    if own and rng.random() < cfg.revert_prob:
        n = 1 + int(rng.choice(len(cfg.revert_counts), p=np.asarray(cfg.revert_counts) / sum(cfg.revert_counts)))
        for i in rng.permutation(len(own))[:n]:
            m = own[int(i)]
            if not touched.intersection(range(*m.span)) and apply_marker(arr, ins, m, revert=True):
                events.append(f"-{m.name} (reverted {m.label})")
    if own and rng.random() < cfg.mask_prob:
        m = own[int(rng.integers(len(own)))]
        length = int(rng.integers(200, 301)) if rng.random() < cfg.mask_amplicon_share else int(rng.integers(1, 31))
        a, b = _n_run(arr, m.pos - SPIKE_START, length, rng)
        for p in [p for p in ins if a - 1 <= p - SPIKE_START < b]:
            del ins[p]
        events.append(f"N {SPIKE_START + a}-{SPIKE_START + b - 1} (over {m.label})")
    if cfg.amplicon_prob and rng.random() < cfg.amplicon_prob:
        events.append(amplicon_dropout(arr, ins, rng, 2 if rng.random() < 0.25 else 1))
    for _ in range(rng.poisson(cfg.private_rate)):
        i = int(rng.integers(len(arr)))
        b = chr(arr[i])
        if b not in _TRANSITION:
            continue
        alt = (_TRANSITION[b] if rng.random() < 0.7
               else str(rng.choice([x for x in "ACGT" if x not in (b, _TRANSITION[b])])))
        arr[i] = ord(alt)
        events.append(f"private {b}{SPIKE_START + i}{alt}")
    if cfg.private_burst_prob and rng.random() < cfg.private_burst_prob:
        marker_sites = {i for ms in marker_changes_by_class(table).values() for m in ms for i in range(*m.span)}
        events += private_substitutions(arr, int(rng.integers(1, 11)), rng, marker_sites | touched)
    if rng.random() < cfg.partial_prob:
        n = int(rng.integers(1, cfg.partial_max + 1))
        if rng.random() < 0.5:
            arr[:n] = ord("N")
            events.append(f"missing start {n}")
        else:
            arr[len(arr) - n :] = ord("N")
            events.append(f"missing end {n}")
        ins = {p: s for p, s in ins.items() if chr(arr[min(p - SPIKE_START, len(arr) - 1)]) != "N"}
    return Augmented(arr.tobytes().decode("ascii"), sorted(ins.items()), events)


def augment_spike(aligned: str, cls: str, rng: np.random.Generator, insertions=(), config: AugmentConfig | None = None,
                  table: MarkerTable | None = None) -> Augmented:
    """One label-preserving augmentation of an aligned spike of class ``cls`` (module docstring).

    If the marker call of the original already differs from ``cls`` (a real genome whose spike
    lacks markers), only changes that keep that call are accepted; if no draw within
    ``config.tries`` passes, the spike comes back unchanged with no events.
    """
    cfg = config or AugmentConfig()
    table = table or load_marker_table()
    insertions = list(insertions)
    before = call_by_markers(aligned, insertions, table).call
    for _ in range(cfg.tries):
        out = _draw(aligned, insertions, cls, rng, cfg, table)
        if not out.events or call_by_markers(out.aligned, out.insertions, table).call == before:
            return out
    return Augmented(aligned, insertions, [])


__all__ = ["AugmentConfig", "Augmented", "amplicon_dropout", "artic_dropouts", "augment_spike",
           "marker_changes_by_class", "private_substitutions"]
