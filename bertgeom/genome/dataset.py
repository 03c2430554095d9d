"""The open developer genomes (INSDC, via Nextstrain): loading, the held-out split, shipped subsets.

The split is deterministic and independent of row order and of numpy versions: inside each class
the genomes are ordered by ``sha256(f"{seed}:{name}")`` and the first ``floor(n * TRAIN_FRACTION)``
go to training (so at most half of each class trains), the rest to validation. ``unassigned``
genomes are dropped. :func:`split_calibration` divides the validation part once more, per class
and by another hash, into a **calibration** third (fits the variant model's temperature, never
scored) and the **evaluation** rest (every reported metric), so confidence is calibrated on genomes
kept apart from both training and evaluation. ``validation_small`` and the demo genomes are taken from the validation part
only, so a model trained on the training part never saw them.

Rebuild the shipped files (``bertgeom/data/genomes`` and the spike profiles) with::

    python -m bertgeom.genome.dataset build bertgeom/data
"""

from __future__ import annotations

import csv
import hashlib
import lzma
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .classes import CLASSES, label_to_class
from .fasta import SequenceRecord, iter_fasta_file
from .reference import SPIKE_START, data_path

TRAIN_FRACTION = 0.5  #: share of each class that may be used for training (floor)
CALIBRATION_FRACTION = 1 / 3  #: share of each class's validation genomes kept for calibration (floor)
SMALL_PER_CLASS = 5  #: genomes per class in ``validation_small``
PROFILE_MIN_FREQ = 0.1  #: spike mutations rarer than this in a group are not written to the profile


@dataclass
class LabelledGenome:
    """One developer genome with its label row (``cls`` is None for ``unassigned``)."""

    name: str
    sequence: str
    label: str
    cls: str | None
    clade: str
    insdc_accession: str
    date: str
    country: str
    source: str
    n_count: int


class Split(NamedTuple):
    """Names of the training and validation genomes (each ordered by class, then by hash)."""

    train: list[str]
    validation: list[str]


class CalibrationSplit(NamedTuple):
    """The validation genomes divided into calibration and evaluation names (by class, then hash)."""

    calibration: list[str]
    evaluation: list[str]


def read_labels(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of a labels TSV as dicts of strings (missing values -> "")."""
    with open(path, newline="") as fh:
        return [{k: (v or "") for k, v in row.items()} for row in csv.DictReader(fh, delimiter="\t")]


def load_dev_genomes(path_fasta_xz: str | os.PathLike, path_labels: str | os.PathLike) -> list[LabelledGenome]:
    """Read the developer FASTA (any compression) and join it with its labels TSV by name.

    Records without a label row are skipped; unreadable records are skipped too.
    """
    rows = {r["name"]: r for r in read_labels(path_labels)}
    out = []
    for rec in iter_fasta_file(path_fasta_xz):
        if not isinstance(rec, SequenceRecord) or rec.name not in rows:
            continue
        r = rows[rec.name]
        out.append(
            LabelledGenome(
                name=rec.name,
                sequence=rec.sequence,
                label=r.get("label", ""),
                cls=label_to_class(r.get("label", "unassigned")),
                clade=r.get("nextstrain_clade_by_rules", ""),
                insdc_accession=r.get("insdc_accession", ""),
                date=r.get("date", ""),
                country=r.get("country", "") or _country_from_name(rec.name),
                source=(r.get("source_files", "") or "").split(",")[0],
                n_count=int(r.get("n_count") or rec.sequence.count("N")),
            )
        )
    return out


def _country_from_name(name: str) -> str:
    """``USA/GA-CDC-.../2021`` -> ``USA`` (strain-style names only; accessions give "")."""
    parts = name.split("/")
    return parts[0] if len(parts) >= 3 else ""


def _rows(labels: Any) -> list[dict[str, Any]]:
    if hasattr(labels, "to_dict"):  # a pandas DataFrame
        return list(labels.to_dict("records"))
    out = []
    for r in labels:
        out.append(r if isinstance(r, dict) else vars(r))
    return out


def _class_of_row(r: dict[str, Any]) -> str | None:
    if r.get("cls") in CLASSES:
        return r["cls"]
    if "label" in r and r["label"] is not None and str(r["label"]) != "nan":
        return label_to_class(str(r["label"]))
    return None


def _key(seed: int, name: str) -> str:
    return hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()


def split_real_genomes(labels_df_or_rows: Any, seed: int = 0, train_fraction: float = TRAIN_FRACTION) -> Split:
    """Deterministic stratified split of the real genomes into train / validation names.

    ``labels_df_or_rows``: a DataFrame or rows (dicts or :class:`LabelledGenome`) with ``name`` and
    ``label`` (dataset label) or ``cls``. Per class ``floor(n * train_fraction)`` genomes train
    (at most half by default), the rest validate; ``unassigned`` is dropped.
    """
    if not 0 <= train_fraction <= 0.5:
        raise ValueError("train_fraction must be in [0, 0.5]: at most half of each class may train")
    by_class: dict[str, list[str]] = defaultdict(list)
    for r in _rows(labels_df_or_rows):
        cls = _class_of_row(r)
        if cls is not None:
            by_class[cls].append(str(r["name"]))
    train, val = [], []
    for cls in CLASSES:
        names = sorted(set(by_class.get(cls, [])), key=lambda n: _key(seed, n))
        k = math.floor(len(names) * train_fraction)
        train += names[:k]
        val += names[k:]
    return Split(train, val)


def split_calibration(labels_df_or_rows: Any, seed: int = 0,
                      calibration_fraction: float = CALIBRATION_FRACTION) -> CalibrationSplit:
    """Deterministic per-class split of :func:`split_real_genomes`'s validation part: in the order of
    ``sha256(f"calibration:{seed}:{name}")`` the first ``floor(n_val * calibration_fraction)`` of each
    class calibrate (a class with 3 validation genomes gives 1), the rest evaluate."""
    if not 0 <= calibration_fraction < 1:
        raise ValueError("calibration_fraction must be in [0, 1)")
    rows = _rows(labels_df_or_rows)
    val = set(split_real_genomes(rows, seed).validation)
    by_class: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        cls = _class_of_row(r)
        if cls is not None and str(r["name"]) in val:
            by_class[cls].append(str(r["name"]))
    cal, ev = [], []
    for cls in CLASSES:
        names = sorted(set(by_class.get(cls, [])), key=lambda n: _key(seed, f"calibration:{n}"))
        k = math.floor(len(names) * calibration_fraction)
        cal += names[:k]
        ev += names[k:]
    return CalibrationSplit(cal, ev)


def validation_small_names(genomes: list[LabelledGenome], seed: int = 0, per_class: int = SMALL_PER_CLASS) -> list[str]:
    """The ``validation_small`` subset: per class the first ``per_class`` validation genomes in hash
    order whose spike does not fail QC for missing data (N share <= ``qc.N_SHARE_FAIL``)."""
    from .pipeline import analyse_sequence

    split = split_real_genomes(genomes, seed)
    val = set(split.validation)
    by_name = {g.name: g for g in genomes}
    out = []
    for cls in CLASSES:
        names = sorted((g.name for g in genomes if g.cls == cls and g.name in val), key=lambda n: _key(seed, n))
        picked = 0
        for n in names:
            if picked >= per_class:
                break
            res = analyse_sequence(SequenceRecord(n, by_name[n].sequence, []))
            if res.qc is not None and res.qc.checks.get("missing data") != "fail" and res.qc.checks.get("coverage") != "fail":
                out.append(n)
                picked += 1
    return out


def demo_genome_names(genomes: list[LabelledGenome], seed: int = 0) -> list[str]:
    """One demo genome per class from the validation split: near-complete (>= 29,000 nt), carrying
    its class's core defining spike mutations, and best by (spike QC verdict, N in the spike, N in
    the genome, ambiguous spike bases, no INSDC accession, split hash)."""
    from .mutations import class_defining_mutations
    from .pipeline import analyse_sequence

    rank = {"pass": 0, "warn": 1, "fail": 2}
    val = set(split_real_genomes(genomes, seed).validation)
    out = []
    for cls in CLASSES:
        core = [m.name for m in class_defining_mutations(cls)]
        best = None
        for g in genomes:
            if g.cls != cls or g.name not in val or len(g.sequence) < 29000:
                continue
            res = analyse_sequence(SequenceRecord(g.name, g.sequence, []), cls=cls)
            if res.qc is None or not all(res.mutations.has(n) for n in core):
                continue
            key = (rank[res.qc.verdict], res.qc.n_count, g.n_count, res.qc.ambiguous, g.insdc_accession == "",
                   _key(seed, g.name))
            if best is None or key < best[0]:
                best = (key, g.name)
        if best is None:  # pragma: no cover - every class has a usable genome in the developer set
            raise RuntimeError(f"no demo genome for class {cls}")
        out.append(best[1])
    return out


def profile_aa_name(kind: str, pos: int, ref: str, alt: str) -> str:
    """The amino-acid name of one indel as every table of the project writes it (Nextstrain style
    on the reference background: ``E156G del157-158``, not the per-residue ``F157-``). Substitutions
    keep the name read in their genomes (a codon with two changes reads as one amino-acid change)."""
    from .markers import _aa_name

    return _aa_name(kind, pos, ref, alt)


def spike_profiles(genomes: Iterable[LabelledGenome], min_freq: float = PROFILE_MIN_FREQ) -> list[dict[str, Any]]:
    """Frequencies of spike mutations (substitutions and indels) per class and per Nextstrain clade.

    A substitution's frequency is over the genomes whose base at that site is called (not N); an
    indel's over all genomes of the group. Used by QC (expected mutations of a class) and by
    :mod:`.synth` (realistic class mutations missing from the sparse clade definitions). Build it
    from the *training* split only.
    """
    from .align import align_spike

    groups: dict[tuple[str, str], list] = defaultdict(list)
    for g in genomes:
        if g.cls is None:
            continue
        try:
            cut = align_spike(g.sequence)
        except ValueError:
            continue
        groups[("class", g.cls)].append(cut)
        if g.clade:
            groups[("clade", g.clade)].append(cut)
    from .mutations import call_mutations

    rows = []
    for (gtype, gname), cuts in sorted(groups.items()):
        n = len(cuts)
        counts: Counter = Counter()
        info = {}
        called: Counter = Counter()
        for cut in cuts:
            rep = call_mutations(cut)
            for m in rep.spike_nucleotide:
                key = (m.kind, m.pos, m.ref, m.alt)
                counts[key] += 1
                info[key] = m
        for key, c in counts.items():
            kind, pos, ref, alt = key
            if kind == "sub":
                den = sum(1 for cut in cuts if cut.aligned[pos - SPIKE_START] in "ACGT")
            else:
                den = n
            freq = c / max(den, 1)
            if freq >= min_freq:
                m = info[key]
                rows.append(dict(group_type=gtype, group=gname, n_genomes=n, mutation=m.name, kind=kind,
                                 pos=pos, ref=ref, alt=alt,
                                 aa=(m.aa or "") if kind == "sub" else profile_aa_name(kind, pos, ref, alt),
                                 freq=round(freq, 3)))
    rows.sort(key=lambda r: (r["group_type"], r["group"], r["pos"], r["kind"]))
    return rows


PROFILE_COLUMNS = ("group_type", "group", "n_genomes", "mutation", "kind", "pos", "ref", "alt", "aa", "freq")


def write_tsv(path: Path, rows: list[dict[str, Any]], columns: Iterable[str]) -> None:
    columns = list(columns)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([r.get(c, "") for c in columns])


def _write_fasta(fh, name: str, seq: str, width: int = 80) -> None:
    fh.write(f">{name}\n")
    for i in range(0, len(seq), width):
        fh.write(seq[i : i + width] + "\n")


GENOME_COLUMNS = ("name", "class", "insdc_accession", "date", "country", "clade", "source")


def build_shipped_files(shared_data: str | os.PathLike, seed: int = 0) -> dict[str, Path]:
    """Write demo genomes, validation_small and the training spike profiles into ``bertgeom/data``."""
    shared = Path(shared_data)
    genomes = load_dev_genomes(shared / "genomes" / "open_genomes_dev.fasta.xz",
                               shared / "genomes" / "open_genomes_dev_labels.tsv")
    by_name = {g.name: g for g in genomes}
    split = split_real_genomes(genomes, seed)
    out_dir = data_path("genomes")
    out_dir.mkdir(parents=True, exist_ok=True)

    def meta(g: LabelledGenome) -> dict[str, str]:
        return {"name": g.name, "class": g.cls or "", "insdc_accession": g.insdc_accession, "date": g.date,
                "country": g.country, "clade": g.clade, "source": g.source}

    # profiles first: QC (used to pick the demo genomes) reads them
    train = set(split.train)
    prof = spike_profiles([g for g in genomes if g.name in train])
    prof_path = data_path("definitions", "spike_profiles_train.tsv")
    write_tsv(prof_path, prof, PROFILE_COLUMNS)
    from . import mutations

    mutations.load_spike_profiles.cache_clear()
    mutations.class_expected_sites.cache_clear()

    demo = demo_genome_names(genomes, seed)
    with open(out_dir / "demo_genomes.fasta", "w") as fh:
        for n in demo:
            _write_fasta(fh, n, by_name[n].sequence)
    write_tsv(out_dir / "demo_genomes.tsv", [meta(by_name[n]) for n in demo], GENOME_COLUMNS)

    small = validation_small_names(genomes, seed)
    with lzma.open(out_dir / "validation_small.fasta.xz", "wt", preset=9 | lzma.PRESET_EXTREME) as fh:
        for n in small:
            _write_fasta(fh, n, by_name[n].sequence)
    write_tsv(out_dir / "validation_small.tsv", [meta(by_name[n]) for n in small], GENOME_COLUMNS)

    return {"demo": out_dir / "demo_genomes.fasta", "validation_small": out_dir / "validation_small.fasta.xz",
            "profiles": prof_path}


def load_demo_genomes() -> list[tuple[SequenceRecord, dict[str, str]]]:
    """The shipped demo genomes (one per class) with their metadata rows, in class order."""
    meta = {r["name"]: r for r in read_labels(data_path("genomes", "demo_genomes.tsv"))}
    return [(r, meta[r.name]) for r in iter_fasta_file(data_path("genomes", "demo_genomes.fasta"))
            if isinstance(r, SequenceRecord)]


def load_validation_small() -> list[tuple[SequenceRecord, dict[str, str]]]:
    """The shipped ``validation_small`` genomes (~5 per class) with their metadata rows."""
    meta = {r["name"]: r for r in read_labels(data_path("genomes", "validation_small.tsv"))}
    return [(r, meta[r.name]) for r in iter_fasta_file(data_path("genomes", "validation_small.fasta.xz"))
            if isinstance(r, SequenceRecord)]


if __name__ == "__main__":  # pragma: no cover
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: python -m bertgeom.genome.dataset build bertgeom/data  (a folder holding genomes/open_genomes_dev.*)")
    for k, v in build_shipped_files(sys.argv[2]).items():
        print(k, v, v.stat().st_size)
