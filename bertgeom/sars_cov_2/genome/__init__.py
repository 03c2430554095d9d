"""SARS-CoV-2 sequence pipeline (no UI): parse -> align to MN908947.3 -> spike cut -> mutations,
clade, QC -> the paper's 12-mer tokens; plus synthetic training spikes and the open developer data.

Entry point for pages and the CLI: :func:`bertgeom.sars_cov_2.genome.pipeline.analyse_sequence`.
Submodules are imported explicitly (``from bertgeom.sars_cov_2.genome.align import align_spike``); importing
this package loads nothing heavy.
"""
