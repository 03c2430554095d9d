"""The repository root, when Python imports it as ``bertgeom``: the real package in its place.

A clone named ``bertgeom`` seen from its parent folder (``git clone ... bertgeom`` and stay there):
the current directory comes first on ``sys.path``, so Python would take the clone's folder for the
``bertgeom`` package. Without this file it is a namespace package with nothing in it (no
``__init__.py``), found before the installed package (an editable install's finder is asked only after
the path): ``bertgeom.load_model`` is missing and ``python -m bertgeom classify`` fails on its data
files. This file loads the package that sits inside the clone, ``bertgeom/bertgeom/``, under its own
name, as if the import had been made from the repository root: ``import bertgeom`` means this
checkout's package from both folders (``tests/test_clone_parent_folder.py``).

Under any other name (a clone folder not called ``bertgeom``) the root is not a package anyone
imports, and this file does nothing.
"""

if __name__ == "bertgeom":
    import importlib.util as _util
    import os as _os
    import sys as _sys

    _inner = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "bertgeom")
    _spec = _util.spec_from_file_location(__name__, _os.path.join(_inner, "__init__.py"),
                                          submodule_search_locations=[_inner])
    _package = _util.module_from_spec(_spec)
    _sys.modules[__name__] = _package  # the import statement returns what sys.modules holds once this file ran
    _spec.loader.exec_module(_package)
