"""bertgeom: the geometry of BERT's attention, as a library behind a Streamlit dashboard.

The package is plain Python (numpy / torch / transformers); Streamlit is imported only
inside :mod:`bertgeom.ui` and the app pages.
"""

__version__ = "0.1.0"

# The SARS-CoV-2 case study plugs itself in: its model loader, its genome encoder and the
# shipped model as the registry's default (see bertgeom.variant._register).
from bertgeom import variant as _variant  # noqa: E402,F401
