"""Streamlit layer of bertgeom: cached wrappers, shared state and widgets.

This is the only part of the package that imports Streamlit.
"""
