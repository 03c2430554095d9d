"""bertgeom: the geometry of BERT's attention, as a library behind a Streamlit dashboard.

The package is plain Python (numpy / torch / transformers); Streamlit is imported only
inside :mod:`bertgeom.ui` and the app pages.
"""

__version__ = "0.1.0"
