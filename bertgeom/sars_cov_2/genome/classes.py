"""The 8 variant classes of the paper and how Nextstrain clades / dataset labels map onto them.

Class ids follow the paper's ``config/general_config.yaml`` (Bonino 2025 (arXiv:2502.12033), case
study; the authors' released code):
``gh:0, lambda:1, mu:2, alpha:3, beta:4, delta:5, gamma:6, omicron:7``.

``gh`` means "pre-VOC": the GISAID clade GH *and* every other pre-VOC lineage, because GH's
own marker (ORF3a Q57H) lies outside the spike (see ``bertgeom/data/PROVENANCE.md``).
"""

from __future__ import annotations

import re

CLASSES: tuple[str, ...] = ("gh", "lambda", "mu", "alpha", "beta", "delta", "gamma", "omicron")
CLASS_TO_ID: dict[str, int] = {c: i for i, c in enumerate(CLASSES)}
VOC_CLASSES: tuple[str, ...] = tuple(c for c in CLASSES if c != "gh")

#: WHO-style display names for the UI.
CLASS_DISPLAY: dict[str, str] = {
    "gh": "GH / pre-VOC",
    "lambda": "Lambda",
    "mu": "Mu",
    "alpha": "Alpha",
    "beta": "Beta",
    "delta": "Delta",
    "gamma": "Gamma",
    "omicron": "Omicron",
}

_EXPLICIT_CLADES: dict[str, str] = {
    "20I": "alpha",
    "20H": "beta",
    "20J": "gamma",
    "21A": "delta",
    "21I": "delta",
    "21J": "delta",
    "21G": "lambda",
    "21H": "mu",
    "21K": "omicron",
    "21L": "omicron",
    "21M": "omicron",
}

_DEV_LABELS: dict[str, str | None] = {
    "alpha": "alpha",
    "beta": "beta",
    "gamma": "gamma",
    "delta": "delta",
    "lambda": "lambda",
    "mu": "mu",
    "omicron": "omicron",
    "gh": "gh",
    "other_prevoc": "gh",
    "unassigned": None,
}

#: The label ``open_genomes_dev_labels.tsv`` writes for each VOC class (WHO names).
_VOC_LABELS: dict[str, str] = {"lambda": "Lambda", "mu": "Mu", "alpha": "Alpha", "beta": "Beta", "delta": "Delta",
                               "gamma": "Gamma", "omicron": "Omicron"}
#: The two pre-VOC labels of the dataset: GISAID's GH and the rest (both the class ``gh``).
PRE_VOC_LABELS: tuple[str, ...] = ("GH", "other_preVOC")

_CLADE_RE = re.compile(r"^(\d\d)([A-Z])")


def clade_to_class(clade: str) -> str:
    """Map a Nextstrain clade name (``"21K"``, ``"21K (BA.1)"`` ...) to one of :data:`CLASSES`.

    20I alpha, 20H beta, 20J gamma, 21A/21I/21J delta, 21G lambda, 21H mu, 21K/21L/21M and every
    clade of year 22-26 omicron; everything else (19A, 19B, 20A-20G, 21B-21F) is pre-VOC -> ``gh``.
    """
    m = _CLADE_RE.match(clade.strip())
    if not m:
        raise ValueError(f"not a Nextstrain clade name: {clade!r}")
    key = m.group(1) + m.group(2)
    if key in _EXPLICIT_CLADES:
        return _EXPLICIT_CLADES[key]
    if 22 <= int(m.group(1)) <= 26:
        return "omicron"
    return "gh"


def label_to_class(label: str) -> str | None:
    """Map a label of ``open_genomes_dev_labels.tsv`` (``Alpha``, ``GH``, ``other_preVOC`` ...) to a class.

    ``unassigned`` maps to ``None`` (such genomes are dropped from training and validation).
    """
    key = str(label).strip().lower()
    if key not in _DEV_LABELS:
        raise ValueError(f"unknown dataset label: {label!r}")
    return _DEV_LABELS[key]


def class_to_label(cls: str | None, previous: str = "") -> str:
    """The dataset label for a class, the inverse of :func:`label_to_class`: the WHO name of a VOC
    (``Alpha`` ...), ``unassigned`` for ``None``; for ``gh``, ``previous`` when it is ``GH`` or
    ``other_preVOC`` (the spike cannot tell GH from the other pre-VOC lineages, so a row keeps that
    distinction from its earlier label), else ``other_preVOC``."""
    if cls is None:
        return "unassigned"
    if cls == "gh":
        return previous if previous in PRE_VOC_LABELS else "other_preVOC"
    if cls not in _VOC_LABELS:
        raise ValueError(f"unknown class: {cls!r}")
    return _VOC_LABELS[cls]
