"""The open developer genomes (INSDC, via Nextstrain): loading, the held-out split, shipped subsets.

The split is deterministic and independent of row order and of numpy versions: inside each class
the genomes are ordered by ``sha256(f"{seed}:{name}")`` and the first ``floor(n * TRAIN_FRACTION)``
go to training (so at most half of each class trains), the rest to validation. ``unassigned``
genomes are dropped. :func:`split_calibration` divides the validation part once more, per class
and by another hash, into a **calibration** third (fits the variant model's temperature, never
scored) and the **evaluation** rest (every reported metric), so confidence is calibrated on genomes
kept apart from both training and evaluation. ``validation_small`` and the demo genomes are taken from
the validation part only, so a model trained on the training part never saw them.

The shipped files (``bertgeom/data/genomes`` and the spike profiles) are rebuilt by
:mod:`bertgeom.sars_cov_2.genome.shipped_files`
(``python -m bertgeom.sars_cov_2.genome.shipped_files build bertgeom/data``).
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple

from .classes import CLASSES, label_to_class
from .fasta import SequenceRecord, iter_fasta_file
from .reference import data_path

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
