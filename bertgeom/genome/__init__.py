"""SARS-CoV-2 sequence pipeline (no UI): parse -> align to MN908947.3 -> spike cut -> mutations,
clade, QC -> the paper's 12-mer tokens; plus synthetic training spikes and the open developer data.

Entry point for pages and the CLI: :func:`bertgeom.genome.pipeline.analyse_sequence`.
Submodules are imported explicitly (``from bertgeom.genome.align import align_spike``); importing
this package loads nothing heavy.
"""
