"""The version of bertgeom, written once: the package face, pyproject.toml and the result manifests read it."""

__version__ = "0.1.0"
