"""The SARS-CoV-2 case study as a plug-in: genomes as an input kind, the variant BERT and its page.

Everything special to SARS-CoV-2 lives here, in one package the core never imports: the genome
pipeline (:mod:`.genome`: FASTA, alignment to MN908947.3, the spike cut, Nextclade-style mutation
names and QC, k-mer tokens), the variant model (:mod:`.variant`: its loader, input kind, prediction,
training, the what-if), the Variant Classifier page (``page.py``) and its cached calls (:mod:`.ui`).
:func:`register` hands it to the library (the ``bertgeom.plugins`` entry point in pyproject.toml
names it; :data:`bertgeom.models.SHIPPED_PLUGINS` too, for a checkout run without installing).

Importing this package loads nothing of it: the subpackages load when the registries are first read.

References
----------
Bonino, Ghione, Cirrincione 2025, "The geometry of BERT", arXiv 2502.12033, the case study (a BERT
over spike-gene 12-mers classifying 8 variants); docs/case_study.md and docs/methods.md.
"""

from __future__ import annotations


def register():
    """Register the family: its loader, the genome input kind, the shipped model and the classifier page."""
    from bertgeom.sars_cov_2.variant.spec import register as register_family

    return register_family()
