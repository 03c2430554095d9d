"""The Variant Classifier page's own Streamlit code: its caches and its sections.

This is the one part of ``bertgeom.ui`` that belongs to an input kind (genomes, through the
variant plug-in); the generic UI modules beside it never import it.
"""
