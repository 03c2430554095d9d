"""Plotly figures, no Streamlit: :mod:`~bertgeom.figures.base` (layout, palettes, the clickable
head grid, matrix heatmaps) and one module per page (heads, subspace, cone, variant)."""
