"""Batch precompute for surveillance-sized genome sets, on one machine or a Ray cluster.

``python -m bertgeom precompute INPUT.fasta[.xz] LABELS.tsv --out results/`` computes, per genome,
the prediction, QC, cone index per layer, [CLS] vectors per layer (optionally reduced) and selected
per-head features (Parquet rows), and per class the class-mean attention maps over correctly
classified genomes (NumPy), with a manifest (model hash, parameters, input checksum). The input is
cut into shards of consecutive records; a shard is done when its files and done marker exist, so an
interrupted run resumes where it stopped. The dashboard opens the directory with
:func:`load_results`. The package is generic over input kinds: the model's input kind supplies how
its files are read and what it stores per record (``InputKind.precompute``, a
:class:`~bertgeom.inputs.PrecomputeSpec`; the genome plug-in's reads FASTA), so nothing here
imports a plug-in.

Python API::

    from bertgeom.precompute import PrecomputeConfig, precompute, load_results

    summary = precompute("genomes.fasta.xz", "labels.tsv", "results/",
                         config=PrecomputeConfig(shard_size=256, maps="layer-mean", cls_dims=32),
                         engine="local", workers=2)          # or engine="ray", address="auto"
    res = load_results("results/")
    res.records          # pandas DataFrame, one row per record
    res.class_curves()   # per-class cone-index curves (mean, sd, n)
    res.maps["omicron"]  # class-mean attention [L, T, T] (float32, memory-mapped)
"""

from bertgeom.precompute.core import (
    DEFAULT_FEATURES,
    MAP_MODES,
    ClsBasis,
    PrecomputeConfig,
    PrecomputeError,
    ShardComputer,
    ShardInput,
)
from bertgeom.precompute.engines import LocalEngine, RayEngine
from bertgeom.precompute.run import RunSummary, precompute
from bertgeom.precompute.store import PrecomputeResults, load_results

__all__ = [
    "DEFAULT_FEATURES",
    "MAP_MODES",
    "ClsBasis",
    "LocalEngine",
    "PrecomputeConfig",
    "PrecomputeError",
    "PrecomputeResults",
    "RayEngine",
    "RunSummary",
    "ShardComputer",
    "ShardInput",
    "load_results",
    "precompute",
]
