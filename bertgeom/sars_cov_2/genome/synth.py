"""Synthetic training spikes / genomes for the 8 classes.

A synthetic spike is built in the *same representation as inference*: the 3,822-character aligned
spike (reference spike coordinates, ``-`` deletions, ``N`` missing) plus the list of insertions
(see :mod:`.align`). Steps:

1. background: the reference spike, or a real (training-split) genome's aligned spike as template;
2. class mutations (not with a template): pick one clade of the class (weighted by how many
   training genomes it has, +1 so every clade appears), apply its inherited Nextstrain mutations
   and, each with its observed frequency, the spike mutations of the real training genomes of
   that clade (or its nearest profiled ancestor; deletions and insertions included) - the
   definitions alone miss most spike changes of e.g. Omicron;
3. noise: private substitutions (Poisson, transition-biased), amplicon-dropout N runs
   (200-300 nt, as ARTIC dropouts in the developer genomes), short N runs, missing spike ends,
   IUPAC ambiguity codes.

:func:`realise_genome` turns a synthetic spike into a full genome (reference outside the spike,
plus the clade's genome-wide mutations); aligning that genome with :func:`.align.align_spike`
gives back the same aligned spike and insertions (checked in the tests), so a model trained on
the direct output sees exactly what it will see at inference.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .align import SpikeCut, align_spike
from .classes import CLASSES, clade_to_class
from .mutations import CladeDefinitions, ProfileEntry, load_clade_definitions, load_spike_profiles
from .reference import IUPAC, SPIKE_END, SPIKE_START, reference_sequence, reference_spike


@dataclass(frozen=True)
class SynthConfig:
    """Noise levels (per spike). Defaults follow the developer genomes: ~1 private spike
    substitution, an amplicon dropout in ~1 of 4 spikes, short N runs, rare ambiguity codes."""

    private_rate: float = 1.0  #: Poisson mean of private substitutions
    transition_share: float = 0.7  #: share of private substitutions that are transitions
    dropout_rate: float = 0.25  #: Poisson mean of amplicon dropouts
    dropout_len: tuple[int, int] = (200, 300)  #: dropout length range (inclusive)
    short_n_rate: float = 0.3  #: Poisson mean of short N runs
    short_n_len: tuple[int, int] = (1, 30)
    partial_prob: float = 0.05  #: probability that one end of the spike is missing
    partial_max: int = 400  #: at most this many bases missing at that end
    ambiguous_rate: float = 0.2  #: Poisson mean of IUPAC ambiguity codes
    use_profiles: bool = True  #: add the real training genomes' spike mutations (step 2)

    @classmethod
    def clean(cls) -> "SynthConfig":
        """No noise at all (class mutations only)."""
        return cls(private_rate=0.0, dropout_rate=0.0, short_n_rate=0.0, partial_prob=0.0, ambiguous_rate=0.0)


@dataclass
class SyntheticSpike:
    """A synthetic spike in inference representation, with what was done to it."""

    aligned: str  # 3822 characters, like SpikeCut.aligned
    insertions: list[tuple[int, str]]  # (genome pos after which, bases), like SpikeCut.insertions
    cls: str
    clade: str | None  # None when built from a template
    applied: list[str] = field(default_factory=list)  # class mutations applied (nucleotide names)
    noise: list[str] = field(default_factory=list)  # noise events, e.g. "private C22000T", "dropout 22100-22340"
    template: str | None = None

    def to_cut(self) -> SpikeCut:
        """As a :class:`SpikeCut` (coverage = share of non-uncovered positions is not tracked: 1.0)."""
        dels = _deletion_runs(self.aligned)
        return SpikeCut(self.aligned, list(self.insertions), dels, 1.0, 1, [])


def _deletion_runs(aligned: str) -> list[tuple[int, int]]:
    out = []
    i = aligned.find("-")
    while i != -1:
        j = i
        while j < len(aligned) and aligned[j] == "-":
            j += 1
        out.append((SPIKE_START + i, j - i))
        i = aligned.find("-", j)
    return out


def _rng(seed_or_rng) -> np.random.Generator:
    return seed_or_rng if isinstance(seed_or_rng, np.random.Generator) else np.random.default_rng(seed_or_rng)


def clade_weights(cls: str, defs: CladeDefinitions | None = None) -> dict[str, float]:
    """Sampling weights of the clades of ``cls``: 1 + number of training genomes of that clade."""
    defs = defs or load_clade_definitions()
    prof = load_spike_profiles()
    out = {}
    for c in defs.clades_of_class(cls):
        rows = prof.get(("clade", c), [])
        out[c] = 1.0 + (rows[0].n_genomes if rows else 0)
    return out


def _profile_for_clade(clade: str, defs: CladeDefinitions) -> list[ProfileEntry]:
    prof = load_spike_profiles()
    c: str | None = clade
    seen = set()
    while c is not None and c not in seen:
        seen.add(c)
        if ("clade", c) in prof and clade_to_class(c) == clade_to_class(clade):
            return prof[("clade", c)]
        c = defs.parent.get(c)
    return prof.get(("class", clade_to_class(clade)), [])


_TRANSITION = {"A": "G", "G": "A", "C": "T", "T": "C"}


def _apply_class_mutations(arr: np.ndarray, ins: dict[int, str], clade: str, rng: np.random.Generator,
                           cfg: SynthConfig, defs: CladeDefinitions) -> list[str]:
    applied = []
    fixed_sites = set()
    ref = reference_sequence()
    for p, b in sorted(defs.inherited(clade).items()):
        if SPIKE_START <= p <= SPIKE_END:
            arr[p - SPIKE_START] = ord(b)
            fixed_sites.add(p)
            if ref[p - 1] != b:
                applied.append(f"{ref[p - 1]}{p}{b}")
    if not cfg.use_profiles:
        return applied
    for e in _profile_for_clade(clade, defs):
        if rng.random() >= e.freq:
            continue
        if e.kind == "sub":
            i = e.pos - SPIKE_START
            if e.pos in fixed_sites or arr[i] == ord("-"):
                continue
            arr[i] = ord(e.alt)
        elif e.kind == "del":
            i, n = e.pos - SPIKE_START, len(e.ref)
            if (arr[max(i - 1,
                        0) : i + n + 1] == ord("-")).any() or any(i - 1 <= p - SPIKE_START <= i + n for p in ins):
                continue  # do not merge with another deletion or touch an insertion
            if any(SPIKE_START + j in fixed_sites for j in range(i, i + n)):
                continue
            arr[i : i + n] = ord("-")
        else:
            o = e.pos - SPIKE_START
            if e.pos in ins or (arr[max(o - 1, 0) : o + 2] == ord("-")).any():
                continue
            ins[e.pos] = e.alt
        applied.append(e.name)
    return applied


ABSORB_MARGIN = 12  #: deletions this close to an N run are swallowed by it (see _absorb_deletions)


def _absorb_deletions(arr: np.ndarray, a: int, b: int) -> tuple[int, int]:
    """Grow the N run ``[a, b)`` over deletions that touch it or lie within ``ABSORB_MARGIN`` nt.

    Consensus callers write missing amplicons as N in *reference* length, so a deletion inside a
    dropout is not visible; next to an N run an aligner can slide a gap into the Ns at no cost, so
    an exact representation there is ambiguous. Both cases become plain N.
    """
    L = len(arr)
    changed = True
    while changed:
        changed = False
        lo = max(a - ABSORB_MARGIN, 0)
        hits = np.flatnonzero(arr[lo:a] == ord("-"))
        if hits.size:
            a = lo + int(hits[0])
            while a > 0 and arr[a - 1] == ord("-"):
                a -= 1
            changed = True
        hi = min(b + ABSORB_MARGIN, L)
        hits = np.flatnonzero(arr[b:hi] == ord("-"))
        if hits.size:
            b = b + int(hits[-1]) + 1
            while b < L and arr[b] == ord("-"):
                b += 1
            changed = True
    return a, b


def _add_noise(arr: np.ndarray, rng: np.random.Generator, cfg: SynthConfig) -> list[str]:
    noise = []
    L = len(arr)
    # private substitutions (never on gaps / N)
    for _ in range(rng.poisson(cfg.private_rate)):
        i = int(rng.integers(L))
        b = chr(arr[i])
        if b not in "ACGT":
            continue
        if rng.random() < cfg.transition_share:
            alt = _TRANSITION[b]
        else:
            alt = str(rng.choice([x for x in "ACGT" if x not in (b, _TRANSITION[b])]))
        arr[i] = ord(alt)
        noise.append(f"private {b}{SPIKE_START + i}{alt}")
    # ambiguity codes consistent with the base
    for _ in range(rng.poisson(cfg.ambiguous_rate)):
        i = int(rng.integers(L))
        b = chr(arr[i])
        if b not in "ACGT":
            continue
        codes = [c for c, bases in IUPAC.items() if len(bases) == 2 and b in bases]
        arr[i] = ord(str(rng.choice(codes)))
        noise.append(f"ambiguous {SPIKE_START + i}{chr(arr[i])}")
    # N runs: amplicon dropouts and short runs; deletions stay deletions under N
    runs = [(cfg.dropout_rate, cfg.dropout_len, "dropout"), (cfg.short_n_rate, cfg.short_n_len, "N run")]
    for rate, (lo, hi), label in runs:
        for _ in range(rng.poisson(rate)):
            n = int(rng.integers(lo, hi + 1))
            s = int(rng.integers(-n // 2, L - n // 2))
            a, b = max(s, 0), min(s + n, L)
            if a >= b:
                continue
            a, b = _absorb_deletions(arr, a, b)
            arr[a:b] = ord("N")
            noise.append(f"{label} {SPIKE_START + a}-{SPIKE_START + b - 1}")
    if cfg.partial_prob and rng.random() < cfg.partial_prob:
        n = int(rng.integers(1, cfg.partial_max + 1))
        if rng.random() < 0.5:
            arr[:n] = ord("N")
            noise.append(f"missing start {n}")
        else:
            arr[L - n :] = ord("N")
            noise.append(f"missing end {n}")
    return noise


_GOOD_CONTEXTS: set[tuple[int, str]] = set()  # indel neighbourhoods already checked by alignment


def _indel_contexts(aligned: str, insertions: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Neighbourhoods (offset, text +- ABSORB_MARGIN, insertions inside) of indels that carry a
    non-reference base: there an aligner might place the gap elsewhere."""
    if "-" not in aligned and not insertions:
        return []
    ref = reference_spike()
    spots = [p - SPIKE_START for p, _ in insertions]
    for p, n in _deletion_runs(aligned):
        spots += [p - SPIKE_START - 1, p - SPIKE_START + n]
    out = []
    for o in spots:
        lo, hi = max(o - ABSORB_MARGIN - 12, 0), min(o + ABSORB_MARGIN + 13, len(aligned))
        near = aligned[max(o - ABSORB_MARGIN, 0) : o + ABSORB_MARGIN + 1]
        if any(a != r and a != "-" for a, r in zip(near, ref[max(o - ABSORB_MARGIN, 0) : o + ABSORB_MARGIN + 1])):
            ins = ";".join(f"{p}{b}" for p, b in insertions if lo <= p - SPIKE_START < hi)
            out.append((lo, aligned[lo:hi] + "|" + ins))
    return out


def _exactify(spike: SyntheticSpike) -> SyntheticSpike:
    """Canonicalise ``spike`` unless every risky indel neighbourhood was already verified."""
    ctx = _indel_contexts(spike.aligned, spike.insertions)
    if not ctx or all(c in _GOOD_CONTEXTS for c in ctx):
        return spike
    canon = canonicalise(spike)
    if canon.aligned == spike.aligned and canon.insertions == spike.insertions and len(_GOOD_CONTEXTS) < 200_000:
        _GOOD_CONTEXTS.update(ctx)
    return canon


def _finish(arr: np.ndarray, ins: dict[int, str]) -> tuple[str, list[tuple[int, str]]]:
    aligned = arr.tobytes().decode("ascii")
    # an insertion next to missing data cannot be seen by an aligner either: drop it
    keep = []
    for p, b in sorted(ins.items()):
        o = p - SPIKE_START
        if aligned[o] in "N-" or (o + 1 < len(aligned) and aligned[o + 1] in "N-"):
            continue
        keep.append((p, b))
    return aligned, keep


def synth_spike(cls: str, rng: np.random.Generator | int | None = None, config: SynthConfig | None = None,
                clade: str | None = None, defs: CladeDefinitions | None = None, exact: bool = True) -> SyntheticSpike:
    """One synthetic spike of class ``cls`` from the reference + class mutations + noise.

    ``clade`` forces the clade (it must belong to ``cls``); otherwise it is sampled with
    :func:`clade_weights`. ``exact``: when a changed base sits next to an indel (where an aligner
    may place the gap differently), the spike is passed through :func:`canonicalise` (~10 ms).
    """
    if cls not in CLASSES:
        raise ValueError(f"unknown class {cls!r}")
    rng = _rng(rng)
    cfg = config or SynthConfig()
    defs = defs or load_clade_definitions()
    if clade is None:
        w = clade_weights(cls, defs)
        names = sorted(w)
        p = np.array([w[c] for c in names])
        clade = names[int(rng.choice(len(names), p=p / p.sum()))]
    elif clade_to_class(clade) != cls:
        raise ValueError(f"clade {clade} is not in class {cls}")
    arr = np.frombuffer(reference_spike().encode("ascii"), dtype=np.uint8).copy()
    ins: dict[int, str] = {}
    applied = _apply_class_mutations(arr, ins, clade, rng, cfg, defs)
    noise = _add_noise(arr, rng, cfg)
    aligned, insertions = _finish(arr, ins)
    out = SyntheticSpike(aligned, insertions, cls, clade, applied, noise)
    return _exactify(out) if exact else out


def synth_from_template(template: SpikeCut, cls: str, rng: np.random.Generator | int | None = None,
                        config: SynthConfig | None = None, name: str | None = None,
                        exact: bool = True) -> SyntheticSpike:
    """A noised copy of a real genome's spike (its own mutations kept, new noise added)."""
    rng = _rng(rng)
    cfg = config or SynthConfig()
    arr = np.frombuffer(template.aligned.encode("ascii"), dtype=np.uint8).copy()
    ins = dict(template.insertions)
    noise = _add_noise(arr, rng, cfg)
    aligned, insertions = _finish(arr, ins)
    out = SyntheticSpike(aligned, insertions, cls, None, [], noise, template=name)
    return _exactify(out) if exact else out


def synth_batch(n_per_class: int | dict[str, int], seed: int = 0,
                config: SynthConfig | None = None) -> list[SyntheticSpike]:
    """``n_per_class`` synthetic spikes of each class (or ``{cls: n}``), reproducible from ``seed``;
    each class uses its own child generator so adding a class does not change the others."""
    counts = n_per_class if isinstance(n_per_class, dict) else {c: n_per_class for c in CLASSES}
    out = []
    children = np.random.SeedSequence(seed).spawn(len(CLASSES))
    defs = load_clade_definitions()
    for cls, ss in zip(CLASSES, children):
        rng = np.random.default_rng(ss)
        for _ in range(counts.get(cls, 0)):
            out.append(synth_spike(cls, rng, config, defs=defs))
    return out


def realise_genome(spike: SyntheticSpike, defs: CladeDefinitions | None = None) -> str:
    """A full genome carrying ``spike``: the reference with the clade's genome-wide mutations
    outside the spike, and the spike with deletions removed and insertions put in place."""
    defs = defs or load_clade_definitions()
    ref = list(reference_sequence())
    if spike.clade is not None:
        for p, b in defs.inherited(spike.clade).items():
            if not SPIKE_START <= p <= SPIKE_END:
                ref[p - 1] = b
    ins = {p - SPIKE_START: b for p, b in spike.insertions}
    mid = []
    for i, c in enumerate(spike.aligned):
        if c != "-":
            mid.append(c)
        if i in ins:
            mid.append(ins[i])
    return "".join(ref[: SPIKE_START - 1]) + "".join(mid) + "".join(ref[SPIKE_END:])


def canonicalise(spike: SyntheticSpike) -> SyntheticSpike:
    """Re-derive the spike through the real pipeline (realise the genome, align, cut): use when
    exact agreement with inference must be guaranteed; ~10 ms per spike."""
    cut = align_spike(realise_genome(spike))
    return replace(spike, aligned=cut.aligned, insertions=list(cut.insertions))


__all__ = ["SynthConfig", "SyntheticSpike", "canonicalise", "clade_weights", "realise_genome", "synth_batch",
           "synth_from_template", "synth_spike"]
