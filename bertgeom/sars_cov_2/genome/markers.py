"""Characteristic spike mutations per class, and the rule-based (marker) caller built on them.

One versioned table, ``bertgeom/data/definitions/characteristic_mutations.tsv``, serves training
(label-preserving augmentation, :mod:`.augment`), the rule-based call shown beside the BERT's
(:func:`call_by_markers`, CLI ``classify``), and the mutation view of the classifier page.

How the table is built (:func:`build_characteristic_table`, reproducible from the clone with
``python -m bertgeom.sars_cov_2.genome.markers build``):

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
from .reference import SPIKE_START, data_path, reference_sequence, translate_codon

TABLE_VERSION = 3  #: 3: Nextclade names (H69- V70-, 143:T, 22299-22319); 2 wrote del69-70
TABLE_FILE = ("definitions", "characteristic_mutations.tsv")
PROFILE_MIN_SHARE = 0.75  #: share of a class's training genomes that must carry a mutation
TABLE_COLUMNS = ("class", "gene", "aa", "nucleotides", "mutation", "kind", "pos", "ref", "alt", "role", "source",
                 "train_share", "train_genomes")


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
    gene: str = "S"
    nucleotides: str = ""  #: the nucleotide changes behind the row, e.g. "G22577C G22578A"

    @functools.cached_property
    def aa_names(self) -> tuple[str, ...]:
        """The amino-acid events of the row as the mutation tables name them (``("E156G", "del157-158")``)."""
        return tuple(self.aa.split())

    @property
    def qualified(self) -> tuple[str, ...]:
        """Nextclade's gene-qualified names of the row's amino-acid events (``("S:E156G", "S:del157-158")``)."""
        return tuple(f"{self.gene}:{a}" for a in self.aa_names)

    @functools.cached_property
    def codon_level(self) -> bool:
        """True for an amino-acid substitution read codon by codon (present = that amino acid there)."""
        return self.kind == "sub" and len(self.aa_names) == 1 and not self.aa.startswith(("del", "ins"))

    @property
    def key(self) -> tuple[str, int, str, str]:
        """Identity of the mutation whatever the class (``kind, pos, ref, alt``)."""
        return (self.kind, self.pos, self.ref, self.alt)

    @property
    def label(self) -> str:
        """What a biologist reads: the amino-acid change when there is one, else the nucleotide name."""
        return self.aa or self.name

    @functools.cached_property
    def span(self) -> tuple[int, int]:
        """Spike offsets ``[a, b)`` of the reference bases the mutation touches."""
        a = self.pos - SPIKE_START
        if self.kind == "del":
            return a, a + len(self.ref)
        if self.kind == "ins":
            return a, a + 2
        if self.codon_level:  # the whole codon: the amino acid is what is read and written
            return (a // 3) * 3, (a // 3) * 3 + 3
        return a, a + len(self.ref)

    @property
    def codon(self) -> str:
        """For a codon-level row: the reference codon with the row's bases (``GGT`` -> ``CAT`` for G339H)."""
        from .reference import reference_spike

        c = ((self.pos - SPIKE_START) // 3) * 3
        codon = list(reference_spike()[c : c + 3])
        for i, (r, x) in enumerate(zip(self.ref, self.alt)):
            if r != x:
                codon[self.pos - SPIKE_START - c + i] = x
        return "".join(codon)


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
    def markers_of(self) -> dict[str, tuple[Marker, ...]]:
        """``{class: its markers}`` (role "marker"), listed once per table for the rule call."""
        return {c: tuple(self.of(c)) for c in CLASSES}

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

    spike = list(reference_sequence()[SPIKE_START - 1 : SPIKE_START - 1 + 3822])
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


def _is_sub_name(name: str) -> bool:
    return name[:1] in "ACGT" and name[-1:] in "ACGT" and name[1:-1].isdigit()


def training_reports(data_dir=None, indel_places: str = "alignment") -> list[tuple[str, str, object, str]]:
    """``(class, clade, mutation report, aligned genome)`` of every training-split developer genome
    (:func:`~.dataset.split_real_genomes`, seed 0). ``indel_places``: where the reports name the
    indels (:func:`~.mutations.call_mutations`): the characteristic table reads them where the
    alignment's text has them (``"alignment"``, what :func:`marker_state` reads back), the clade
    profiles by Nextclade's names (``"nextclade"``, what the tables name)."""
    from pathlib import Path

    from .align import AlignmentError, align_genome
    from .dataset import load_dev_genomes, split_real_genomes
    from .mutations import call_mutations

    folder = Path(data_dir) if data_dir else data_path()
    genomes = load_dev_genomes(folder / "genomes" / "open_genomes_dev.fasta.xz",
                               folder / "genomes" / "open_genomes_dev_labels.tsv")
    train = set(split_real_genomes(genomes, seed=0).train)
    out = []
    for g in genomes:
        if g.name not in train or g.cls is None:
            continue
        try:
            aln = align_genome(g.sequence)
        except AlignmentError:
            continue
        out.append((g.cls, g.clade, call_mutations(aln, indel_places=indel_places), aln.aligned))
    return out


def _spike_keys(rep) -> dict[tuple, dict]:
    """The spike rows one report gives the table: amino-acid substitutions read per codon (key
    ``("aa", name)``), indels as nucleotide events (``("nuc", kind, pos, ref, alt)``) and
    synonymous substitutions (``("nuc", "sub", pos, ref, alt)``), each with its Marker fields."""
    ref = reference_sequence()
    out: dict[tuple, dict] = {}
    s = rep.genes.get("S")
    if s is None:
        return out
    for e in s.events:
        if e.kind in ("sub", "stop") and e.nuc and all(_is_sub_name(n) for n in e.nuc):
            subs = sorted((int(n[1:-1]), n[-1]) for n in e.nuc)
            a, b = subs[0][0], subs[-1][0]
            block = list(ref[a - 1 : b])
            for p, alt in subs:
                block[p - a] = alt
            name = "+".join(f"{ref[p - 1]}{p}{alt}" for p, alt in subs)
            out[("aa", e.name)] = dict(kind="sub", pos=a, ref=ref[a - 1 : b], alt="".join(block), aa=e.name,
                                       name=name, nucleotides=" ".join(e.nuc), sites=list(range(*s_codon(e.start))))
    for m in rep.spike_nucleotide:
        events = [x.split(":", 1)[1] for x in m.aa_changes if x.startswith("S:")]
        if m.kind in ("del", "ins"):
            out[("nuc", m.kind, m.pos, m.ref, m.alt)] = dict(kind=m.kind, pos=m.pos, ref=m.ref, alt=m.alt,
                                                             aa=" ".join(events), name=m.name, nucleotides=m.name,
                                                             sites=None)
        elif not events:
            out[("nuc", "sub", m.pos, m.ref, m.alt)] = dict(kind="sub", pos=m.pos, ref=m.ref, alt=m.alt, aa="",
                                                            name=m.name, nucleotides=m.name, sites=[m.pos])
    return out


def s_codon(residue: int) -> tuple[int, int]:
    """Genome ``[first, last + 1)`` of spike residue ``residue``."""
    first = SPIKE_START + 3 * (residue - 1)
    return first, first + 3


def build_characteristic_table(min_share: float = PROFILE_MIN_SHARE, reports=None) -> list[Marker]:
    """The table's rows (module docstring) from the clade definitions and the training genomes,
    read codon by codon: an amino-acid change is one row whatever bases make it."""
    from .classes import clade_to_class
    from .mutations import GH_SPIKE_MARKERS, load_clade_definitions
    from .profiles import definition_report, readable

    defs = load_clade_definitions()
    reports = reports if reports is not None else training_reports()
    by_class: dict[str, list[tuple[object, str]]] = {}
    for cls, _clade, rep, text in reports:
        by_class.setdefault(cls, []).append((rep, text))
    out: list[Marker] = []

    def share_of(key, info, items) -> float:
        carried = sum(1 for rep, _ in items if key in _spike_keys(rep))
        if info["sites"] is None:
            den = len(items)
        else:
            den = sum(1 for rep, text in items if key in _spike_keys(rep) or readable(text, info["sites"]))
        return carried / max(den, 1)

    for cls in CLASSES:
        items = by_class.get(cls, [])
        n = len(items)
        rows: dict[tuple, dict] = {}
        if cls in VOC_CLASSES:
            clades = [c for c in defs.clades if clade_to_class(c) == cls]
            core = None
            for c in clades:
                keys = _spike_keys(definition_report(c, defs))
                core = dict(keys) if core is None else {k: v for k, v in core.items() if k in keys}
            for k, info in (core or {}).items():
                rows[k] = dict(info, sources=["nextstrain:" + "/".join(sorted(clades))])
            seen: dict[tuple, dict] = {}
            for rep, _ in items:
                for k, info in _spike_keys(rep).items():
                    seen.setdefault(k, info)
            for k, info in seen.items():
                sh = share_of(k, info, items)
                if sh >= min_share:
                    rows.setdefault(k, dict(info, sources=[]))["sources"].append(f"training genomes >= {min_share:.0%}")
            role = "marker"
        else:  # gh: D614G for reference only (19A/19B lack it)
            for p, b in GH_SPIKE_MARKERS:
                ref = reference_sequence()[p - 1]
                rows[("aa", "D614G")] = dict(kind="sub", pos=p, ref=ref, alt=b, aa="D614G", name=f"{ref}{p}{b}",
                                             nucleotides=f"{ref}{p}{b}", sites=list(range(*s_codon(614))),
                                             sources=["GISAID clade GH marker (not carried by 19A/19B)"])
            role = "context"
        for k, info in sorted(rows.items(), key=lambda kv: (kv[1]["pos"], kv[1]["kind"])):
            sh = share_of(k, info, items) if items else None
            out.append(Marker(cls, info["name"], info["kind"], info["pos"], info["ref"], info["alt"], info["aa"], role,
                              "; ".join(dict.fromkeys(info["sources"])), None if sh is None else round(sh, 3), n,
                              "S", info["nucleotides"]))
    return out


def write_characteristic_table(markers: Iterable[Marker], path=None) -> None:
    path = path or data_path(*TABLE_FILE)
    lines = [
        f"# bertgeom characteristic spike mutations per class, table version {TABLE_VERSION}",
        "# Built by `python -m bertgeom.sars_cov_2.genome.markers build` from definitions/nextstrain_clades.tsv "
        "(changes",
        "# shared by every clade of a class) and the training-split developer genomes (spike changes of >= 75%",
        "# of a class's genomes), read codon by codon: one row per amino-acid change (aa, named as Nextclade",
        "# names it in gene S) with the nucleotides that make it; indels and synonymous changes as nucleotide",
        "# events. mutation/kind/pos/ref/alt: the nucleotide block (MN908947.3, 1-based); see PROVENANCE.md.",
        "\t".join(TABLE_COLUMNS),
    ]
    for m in markers:
        lines.append("\t".join([m.cls, m.gene, m.aa, m.nucleotides, m.name, m.kind, str(m.pos), m.ref, m.alt, m.role,
                                m.source, "" if m.train_share is None else f"{m.train_share:.3f}",
                                str(m.train_genomes)]))
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def parse_characteristic_table(text: str) -> MarkerTable:
    from .reference import read_versioned_tsv

    version, table = read_versioned_tsv(text, "table version", TABLE_VERSION)
    rows = []
    for r in table:
        rows.append(Marker(r["class"], r["mutation"], r["kind"], int(r["pos"]), r["ref"], r["alt"], r.get("aa", ""),
                           r.get("role", "marker"), r.get("source", ""),
                           float(r["train_share"]) if r.get("train_share") else None, int(r.get("train_genomes") or 0),
                           r.get("gene", "S") or "S", r.get("nucleotides", "") or r["mutation"]))
    return MarkerTable(tuple(rows), version)


@functools.lru_cache(maxsize=1)
def load_marker_table() -> MarkerTable:
    """The shipped table (cached)."""
    return parse_characteristic_table(data_path(*TABLE_FILE).read_text())


# ------------------------------------------------------------------------------------------
# Reading markers in a spike, and the rule-based call
# ------------------------------------------------------------------------------------------

PRESENT, ABSENT, MISSING = "present", "absent", "missing"
_ACGT_U8 = np.frombuffer(b"ACGT", dtype=np.uint8)


def marker_state(m: Marker, aligned: str, insertions: Iterable[tuple[int, str]] = ()) -> str:
    """``present``, ``absent`` or ``missing`` for marker ``m`` in an aligned spike (3,822 characters,
    reference coordinates, ``-`` deletions, ``N`` missing) with its insertions."""
    a, b = m.span
    if m.kind == "sub" and m.codon_level:
        codon = aligned[a:b] if 0 <= a < len(aligned) else ""
        if len(codon) < 3:
            return MISSING
        if "-" in codon:
            return ABSENT
        q = translate_codon(codon)
        if q == "X":
            return MISSING
        return PRESENT if q == m.aa[-1] else ABSENT
    if m.kind == "sub":
        seg = aligned[a:b] if 0 <= a and b <= len(aligned) else ""
        changed = [i for i, (r, x) in enumerate(zip(m.ref, m.alt)) if r != x]
        if seg and all(seg[i] == m.alt[i] for i in changed):
            return PRESENT
        return ABSENT if seg and all(seg[i] in "ACGT-" for i in changed) else MISSING
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
        unread = f" ({len(self.missing)} unread)" if self.missing else ""
        return f"{len(self.present)}/{self.n_markers} markers{unread}"


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
        for m in table.markers_of[cls]:
            groups[marker_state(m, aligned, insertions)].append(m.label)
        ev[cls] = ClassEvidence(cls, tuple(groups[PRESENT]), tuple(groups[ABSENT]), tuple(groups[MISSING]))
    cands = [ev[c] for c in VOC_CLASSES if len(ev[c].present) >= cfg.min_present and ev[c].share >= cfg.min_share]
    if not cands:
        best = max((ev[c] for c in VOC_CLASSES), key=lambda e: (e.share, len(e.present)))
        return RuleCall("gh", ev, f"gh: no VOC's markers carried (closest {best.cls}: {best.summary()})")
    win = max(cands, key=lambda e: (e.score, len(e.present), -len(e.absent)))
    return RuleCall(win.cls, ev, f"{win.cls}: {win.summary()}")


def call_cut(cut, table: MarkerTable | None = None, config: RuleConfig | None = None) -> RuleCall:
    """:func:`call_by_markers` on a :class:`~bertgeom.sars_cov_2.genome.align.SpikeCut`."""
    return call_by_markers(cut.aligned, cut.insertions, table, config)


def apply_marker(arr: np.ndarray, insertions: dict[int, str], m: Marker, revert: bool = False) -> bool:
    """Put marker ``m`` into (or, with ``revert``, take it out of) an aligned spike held as a uint8
    array plus an insertion dict, in place, at its reference coordinates. Returns False (and changes
    nothing) where that is not possible cleanly: the site is N/ambiguous, or touches another indel."""
    a, b = m.span
    seg = arr[a:b]
    if m.kind == "sub" and m.codon_level:
        if b > len(arr) or not np.isin(seg, _ACGT_U8).all():
            return False
        from .reference import reference_spike

        arr[a:b] = np.frombuffer((reference_spike()[a:b] if revert else m.codon).encode("ascii"), dtype=np.uint8)
        return True
    if m.kind == "sub":
        changed = [i for i, (r, x) in enumerate(zip(m.ref, m.alt)) if r != x]
        if b > len(arr) or any(chr(arr[a + i]) not in "ACGT" for i in changed):
            return False
        for i in changed:
            arr[a + i] = ord(m.ref[i] if revert else m.alt[i])
        return True
    if m.kind == "del":
        if revert:
            if (not (seg == ord("-")).all() or (a > 0 and arr[a - 1] == ord("-"))
                    or (b < len(arr) and arr[b] == ord("-"))):
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
        sys.exit("usage: python -m bertgeom.sars_cov_2.genome.markers build")
    from .profiles import PROFILE_FILE, build_clade_profiles, write_clade_profiles

    reports = training_reports()
    rows = build_characteristic_table(reports=reports)
    write_characteristic_table(rows)
    print(f"wrote {len(rows)} rows to {data_path(*TABLE_FILE)}")
    named = training_reports(indel_places="nextclade")
    prof = build_clade_profiles([(clade, rep, text) for _cls, clade, rep, text in named if clade])
    write_clade_profiles(prof)
    print(f"wrote {len(prof)} rows to {data_path(*PROFILE_FILE)}")
