"""Characteristic spike mutations per class, and the rule-based (marker) caller built on them.

One versioned table, ``bertgeom/data/definitions/characteristic_mutations.tsv``, serves training
(label-preserving augmentation, :mod:`.augment`), the rule-based call shown beside the BERT's
(:func:`call_by_markers`, CLI ``classify``), and the mutation view of the classifier page.

How the table is built (:func:`build_characteristic_table`, reproducible from the clone with
``python -m bertgeom.genome.markers build``):

* every spike mutation shared by **all** Nextstrain clades of a class (the class's common
  ancestor in ``nextstrain_clades.tsv``; the definitions list nucleotide substitutions only), and
* every spike substitution, deletion or insertion carried by at least
  :data:`PROFILE_MIN_SHARE` (75 %) of the class's real *training-split* genomes
  (``spike_profiles_train.tsv``): the definitions list few spike sites for, e.g., Omicron.

``gh`` ("pre-VOC") has no characteristic spike mutation of its own (its GISAID marker, ORF3a
Q57H, lies outside the spike and its 19A/19B members lack D614G): it is the call when no VOC's
markers are carried. Its row lists D614G for reference only (``role = context``).

The rule-based call (:func:`call_by_markers`) reads each class's markers in the aligned spike as
*present*, *absent* (the reference or another base is read there) or *missing* (N / ambiguity /
not covered); a VOC class is a candidate when at least :data:`RuleConfig.min_share` of its read
markers are present and at least :data:`RuleConfig.min_present` are present; the best candidate
by ``present - absent`` wins, otherwise the call is ``gh``. One foreign marker, or one own marker
reverted, therefore never changes the call on a genome that carries its class's markers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .classes import CLASSES, VOC_CLASSES
from .reference import SPIKE_END, SPIKE_START, data_path, reference_sequence

TABLE_VERSION = 1
TABLE_FILE = ("definitions", "characteristic_mutations.tsv")
PROFILE_MIN_SHARE = 0.75  #: share of a class's training genomes that must carry a mutation
TABLE_COLUMNS = ("class", "mutation", "kind", "pos", "ref", "alt", "aa", "role", "source", "train_share",
                 "train_genomes")


@dataclass(frozen=True)
class Marker:
    """One characteristic spike mutation of a class, in genome coordinates (MN908947.3, 1-based).

    ``kind``: ``sub`` (``ref`` -> ``alt`` at ``pos``), ``del`` (bases ``pos .. pos+len(ref)-1``
    deleted) or ``ins`` (``alt`` inserted after ``pos``). ``aa`` is the spike amino-acid change
    (``N501Y``, ``del69-70``, ``ins214EPE``; empty when synonymous).
    """

    cls: str
    name: str
    kind: str
    pos: int
    ref: str
    alt: str
    aa: str = ""
    role: str = "marker"  #: "marker" (used by the caller) or "context" (shown only)
    source: str = ""
    train_share: float | None = None
    train_genomes: int = 0

    @property
    def key(self) -> tuple[str, int, str, str]:
        """Identity of the mutation whatever the class (``kind, pos, ref, alt``)."""
        return (self.kind, self.pos, self.ref, self.alt)

    @property
    def label(self) -> str:
        """What a biologist reads: the amino-acid change when there is one, else the nucleotide name."""
        return self.aa or self.name

    @property
    def span(self) -> tuple[int, int]:
        """Spike offsets ``[a, b)`` of the reference bases the mutation touches."""
        a = self.pos - SPIKE_START
        if self.kind == "del":
            return a, a + len(self.ref)
        if self.kind == "ins":
            return a, a + 2
        return a, a + 1


@dataclass(frozen=True)
class MarkerTable:
    """The characteristic mutations of every class (see the module docstring)."""

    markers: tuple[Marker, ...]
    version: int = TABLE_VERSION

    def of(self, cls: str, role: str | None = "marker") -> list[Marker]:
        if cls not in CLASSES:
            raise KeyError(f"unknown class {cls!r}")
        return [m for m in self.markers if m.cls == cls and (role is None or m.role == role)]

    @functools.cached_property
    def keys_of(self) -> dict[str, frozenset]:
        return {c: frozenset(m.key for m in self.of(c, None)) for c in CLASSES}

    def foreign_to(self, cls: str) -> list[Marker]:
        """Markers of other VOC classes that ``cls`` does not carry itself (one per mutation)."""
        own = self.keys_of[cls]
        seen: set = set()
        out = []
        for m in self.markers:
            if m.cls != cls and m.role == "marker" and m.key not in own and m.key not in seen:
                seen.add(m.key)
                out.append(m)
        return out

    def classes_with(self, key) -> list[str]:
        return [c for c in CLASSES if key in self.keys_of[c]]

    def __hash__(self) -> int:
        return id(self)


# ------------------------------------------------------------------------------------------
# Building and loading the table
# ------------------------------------------------------------------------------------------


def _aa_name(kind: str, pos: int, ref: str, alt: str) -> str:
    """Spike amino-acid name of one nucleotide mutation on the reference background."""
    from .align import SpikeCut
    from .mutations import call_mutations

    spike = list(reference_sequence()[SPIKE_START - 1 : SPIKE_END])
    ins: list[tuple[int, str]] = []
    dels: list[tuple[int, int]] = []
    o = pos - SPIKE_START
    if kind == "sub":
        spike[o] = alt
    elif kind == "del":
        for i in range(o, o + len(ref)):
            spike[i] = "-"
        dels.append((pos, len(ref)))
    else:
        ins.append((pos, alt))
    cut = SpikeCut("".join(spike), ins, dels, 1.0, 1, [])
    return " ".join(call_mutations(cut).aa_names(grouped=True))


def build_characteristic_table(min_share: float = PROFILE_MIN_SHARE) -> list[Marker]:
    """The table's rows from the shipped clade definitions and training-genome spike profiles."""
    from .classes import clade_to_class
    from .mutations import GH_SPIKE_MARKERS, load_clade_definitions, load_spike_profiles

    defs = load_clade_definitions()
    prof = load_spike_profiles()
    ref = reference_sequence()
    rows: dict[tuple[str, tuple], dict] = {}

    def add(cls: str, kind: str, pos: int, r: str, a: str, source: str, share=None, n=0, role="marker"):
        key = (cls, (kind, pos, r, a))
        row = rows.setdefault(key, dict(cls=cls, kind=kind, pos=pos, ref=r, alt=a, sources=[], share=share,
                                         n=n, role=role))
        row["sources"].append(source)
        if share is not None:
            row["share"], row["n"] = share, n

    for cls in VOC_CLASSES:
        clades = [c for c in defs.clades if clade_to_class(c) == cls]
        sets = [set(defs.mutations(c, spike_only=True).items()) for c in clades]
        for p, b in sorted(set.intersection(*sets)) if sets else []:
            add(cls, "sub", p, ref[p - 1], b, "nextstrain:" + "/".join(sorted(clades)))
        entries = prof.get(("class", cls), [])
        n_cls = entries[0].n_genomes if entries else 0
        for e in entries:
            if e.freq >= min_share:
                add(cls, e.kind, e.pos, e.ref, e.alt, f"training genomes >= {min_share:.0%}", e.freq, n_cls)
    # shares for definition-only rows, where the profile knows them
    for (cls, key), row in rows.items():
        if row["share"] is None:
            for e in prof.get(("class", cls), []):
                if (e.kind, e.pos, e.ref, e.alt) == key:
                    row["share"], row["n"] = e.freq, e.n_genomes
    for p, b in GH_SPIKE_MARKERS:
        gh = prof.get(("class", "gh"), [])
        share = next((e.freq for e in gh if e.kind == "sub" and e.pos == p and e.alt == b), None)
        add("gh", "sub", p, ref[p - 1], b, "GISAID clade GH marker (not carried by 19A/19B)", share,
            gh[0].n_genomes if gh else 0, role="context")
    out = []
    for (cls, _), r in sorted(rows.items(), key=lambda kv: (CLASSES.index(kv[0][0]), kv[1]["pos"], kv[1]["kind"])):
        if r["kind"] == "sub":
            name = f"{r['ref']}{r['pos']}{r['alt']}"
        elif r["kind"] == "del":
            n = len(r["ref"])
            name = f"del{r['pos']}" if n == 1 else f"del{r['pos']}-{r['pos'] + n - 1}"
        else:
            name = f"ins{r['pos']}:{r['alt']}"
        out.append(Marker(cls, name, r["kind"], r["pos"], r["ref"], r["alt"], _aa_name(r["kind"], r["pos"], r["ref"], r["alt"]),
                          r["role"], "; ".join(dict.fromkeys(r["sources"])),
                          None if r["share"] is None else round(float(r["share"]), 3), int(r["n"])))
    return out


def write_characteristic_table(markers: Iterable[Marker], path=None) -> None:
    path = path or data_path(*TABLE_FILE)
    lines = [
        f"# bertgeom characteristic spike mutations per class, table version {TABLE_VERSION}",
        "# Built by `python -m bertgeom.genome.markers build` from definitions/nextstrain_clades.tsv (mutations",
        "# shared by every clade of a class) and definitions/spike_profiles_train.tsv (spike mutations of >= 75%",
        "# of the class's training-split genomes). Genome coordinates of MN908947.3, 1-based; see PROVENANCE.md.",
        "\t".join(TABLE_COLUMNS),
    ]
    for m in markers:
        lines.append("\t".join([m.cls, m.name, m.kind, str(m.pos), m.ref, m.alt, m.aa, m.role, m.source,
                                "" if m.train_share is None else f"{m.train_share:.3f}", str(m.train_genomes)]))
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def parse_characteristic_table(text: str) -> MarkerTable:
    version = TABLE_VERSION
    rows = []
    header = None
    for line in text.splitlines():
        if line.startswith("#"):
            if "table version" in line:
                version = int(line.rsplit(" ", 1)[-1])
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        if header is None:
            header = parts
            continue
        r = dict(zip(header, parts))
        rows.append(Marker(r["class"], r["mutation"], r["kind"], int(r["pos"]), r["ref"], r["alt"], r.get("aa", ""),
                           r.get("role", "marker"), r.get("source", ""),
                           float(r["train_share"]) if r.get("train_share") else None, int(r.get("train_genomes") or 0)))
    return MarkerTable(tuple(rows), version)


@functools.lru_cache(maxsize=1)
def load_marker_table() -> MarkerTable:
    """The shipped table (cached)."""
    return parse_characteristic_table(data_path(*TABLE_FILE).read_text())


# ------------------------------------------------------------------------------------------
# Reading markers in a spike, and the rule-based call
# ------------------------------------------------------------------------------------------

PRESENT, ABSENT, MISSING = "present", "absent", "missing"


def marker_state(m: Marker, aligned: str, insertions: Iterable[tuple[int, str]] = ()) -> str:
    """``present``, ``absent`` or ``missing`` for marker ``m`` in an aligned spike (3,822 characters,
    reference coordinates, ``-`` deletions, ``N`` missing) with its insertions."""
    a, b = m.span
    if m.kind == "sub":
        base = aligned[a] if 0 <= a < len(aligned) else "N"
        if base == m.alt:
            return PRESENT
        return ABSENT if base in "ACGT-" else MISSING
    if m.kind == "del":
        seg = aligned[a:b]
        if len(seg) == b - a and set(seg) == {"-"}:
            # the deleted run must be exactly this one (not part of a longer deletion)
            left = aligned[a - 1] if a > 0 else "N"
            right = aligned[b] if b < len(aligned) else "N"
            return PRESENT if left != "-" and right != "-" else ABSENT
        return ABSENT if all(c in "ACGT-" for c in seg) and len(seg) == b - a else MISSING
    ins = dict(insertions)
    if ins.get(m.pos) == m.alt:
        return PRESENT
    around = aligned[max(a - 1, 0) : b + 1]
    return ABSENT if around and all(c in "ACGT" for c in around) else MISSING


@dataclass(frozen=True)
class ClassEvidence:
    """How the markers of one class read in a spike."""

    cls: str
    present: tuple[str, ...]
    absent: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def n_markers(self) -> int:
        return len(self.present) + len(self.absent) + len(self.missing)

    @property
    def share(self) -> float:
        """Present share of the markers that could be read (present + absent)."""
        read = len(self.present) + len(self.absent)
        return len(self.present) / read if read else 0.0

    @property
    def score(self) -> int:
        return len(self.present) - len(self.absent)

    def summary(self) -> str:
        return f"{len(self.present)}/{self.n_markers} markers" + (f" ({len(self.missing)} unread)" if self.missing else "")


@dataclass(frozen=True)
class RuleConfig:
    """Thresholds of the rule-based call (adjustable; defaults keep every real dev genome right)."""

    min_share: float = 0.6  #: present / (present + absent) for a VOC to be a candidate
    min_present: int = 3  #: and at least this many markers present


@dataclass(frozen=True)
class RuleCall:
    """The marker call of one spike, with the evidence for every class."""

    call: str
    evidence: dict[str, ClassEvidence] = field(default_factory=dict)
    reason: str = ""

    def summary(self) -> str:
        if self.call == "gh":
            return self.reason
        return f"{self.call}: {self.evidence[self.call].summary()}"


def call_by_markers(aligned: str, insertions: Iterable[tuple[int, str]] = (), table: MarkerTable | None = None,
                    config: RuleConfig | None = None) -> RuleCall:
    """Rule-based class of an aligned spike from the characteristic-mutation table (module docstring)."""
    table = table or load_marker_table()
    cfg = config or RuleConfig()
    insertions = list(insertions)
    ev: dict[str, ClassEvidence] = {}
    for cls in CLASSES:
        groups: dict[str, list[str]] = {PRESENT: [], ABSENT: [], MISSING: []}
        for m in table.of(cls):
            groups[marker_state(m, aligned, insertions)].append(m.label)
        ev[cls] = ClassEvidence(cls, tuple(groups[PRESENT]), tuple(groups[ABSENT]), tuple(groups[MISSING]))
    cands = [ev[c] for c in VOC_CLASSES if len(ev[c].present) >= cfg.min_present and ev[c].share >= cfg.min_share]
    if not cands:
        best = max((ev[c] for c in VOC_CLASSES), key=lambda e: (e.share, len(e.present)))
        return RuleCall("gh", ev, f"gh: no VOC's markers carried (closest {best.cls}: {best.summary()})")
    win = max(cands, key=lambda e: (e.score, len(e.present), -len(e.absent)))
    return RuleCall(win.cls, ev, f"{win.cls}: {win.summary()}")


def call_cut(cut, table: MarkerTable | None = None, config: RuleConfig | None = None) -> RuleCall:
    """:func:`call_by_markers` on a :class:`~bertgeom.genome.align.SpikeCut`."""
    return call_by_markers(cut.aligned, cut.insertions, table, config)


def apply_marker(arr: np.ndarray, insertions: dict[int, str], m: Marker, revert: bool = False) -> bool:
    """Put marker ``m`` into (or, with ``revert``, take it out of) an aligned spike held as a uint8
    array plus an insertion dict, in place, at its reference coordinates. Returns False (and changes
    nothing) where that is not possible cleanly: the site is N/ambiguous, or touches another indel."""
    a, b = m.span
    seg = arr[a:b]
    if m.kind == "sub":
        if chr(arr[a]) not in "ACGT":
            return False
        arr[a] = ord(m.ref if revert else m.alt)
        return True
    if m.kind == "del":
        if revert:
            if not (seg == ord("-")).all() or (a > 0 and arr[a - 1] == ord("-")) or (b < len(arr) and arr[b] == ord("-")):
                return False
            arr[a:b] = np.frombuffer(m.ref.encode("ascii"), dtype=np.uint8)
            return True
        lo, hi = max(a - 1, 0), min(b + 1, len(arr))
        if not np.isin(arr[lo:hi], np.frombuffer(b"ACGT", dtype=np.uint8)).all():
            return False
        if any(lo <= p - SPIKE_START < hi for p in insertions):
            return False
        arr[a:b] = ord("-")
        return True
    if revert:
        if insertions.get(m.pos) != m.alt:
            return False
        del insertions[m.pos]
        return True
    if m.pos in insertions or not np.isin(arr[max(a - 1, 0) : b + 1], np.frombuffer(b"ACGT", dtype=np.uint8)).all():
        return False
    insertions[m.pos] = m.alt
    return True


__all__ = [
    "ABSENT", "ClassEvidence", "MISSING", "Marker", "MarkerTable", "PRESENT", "RuleCall", "RuleConfig",
    "TABLE_VERSION", "apply_marker", "build_characteristic_table", "call_by_markers", "call_cut",
    "load_marker_table", "marker_state", "parse_characteristic_table", "write_characteristic_table",
]  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    import sys

    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m bertgeom.genome.markers build")
    rows = build_characteristic_table()
    write_characteristic_table(rows)
    print(f"wrote {len(rows)} rows to {data_path(*TABLE_FILE)}")
