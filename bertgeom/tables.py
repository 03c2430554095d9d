"""Per-head names and tables, one format for all of bertgeom.

Arrays are 0-based ``[layer, head]``; what users read is 1-based, as in the papers:
:func:`head_label` gives ``"L8 H10"`` for ``(7, 9)``, and :func:`per_head_frame` turns ``[L, H]``
arrays into one row per head with 1-based ``layer`` and ``head`` columns (what every CSV holds).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd


def head_label(layer: int, head: int) -> str:
    """1-based display name of the 0-based head ``(layer, head)``: ``(7, 9) -> "L8 H10"``."""
    return f"L{int(layer) + 1} H{int(head) + 1}"


def head_labels(num_layers: int, num_heads: int) -> list[str]:
    """Labels of every head, layer by layer (the order of ``array.reshape(L * H)``)."""
    return [head_label(l, h) for l in range(num_layers) for h in range(num_heads)]


def per_head_frame(columns: Mapping[str, np.ndarray], *, prefix: str = "") -> pd.DataFrame:
    """One row per head (1-based ``layer`` and ``head``), one column per ``[L, H]`` array."""
    first = np.asarray(next(iter(columns.values())))
    L, H = first.shape[:2]
    cols = {"layer": np.repeat(np.arange(1, L + 1), H), "head": np.tile(np.arange(1, H + 1), L)}
    cols.update({prefix + k: np.asarray(v).reshape(L * H) for k, v in columns.items()})
    return pd.DataFrame(cols)


def top_arcs(attention: np.ndarray, labels, *, theta: float = 0.3, limit: int = 50) -> list[dict]:
    """Entries ``A[i, j] >= theta`` sorted by weight: the head's strongest links."""
    a = np.asarray(attention)
    i, j = np.nonzero(a >= theta)
    order = np.argsort(-a[i, j], kind="stable")[:limit]
    return [
        {"query": labels[i[k]], "key": labels[j[k]], "query_pos": int(i[k]), "key_pos": int(j[k]),
         "offset": int(j[k] - i[k]), "weight": float(a[i[k], j[k]])}
        for k in order
    ]


def arcs_frame(attention: np.ndarray, labels, *, theta: float = 0.3, limit: int = 200, domains=None) -> pd.DataFrame:
    """:func:`top_arcs` as a table; with ``domains`` (one per token) the query's and key's domains too."""
    df = pd.DataFrame(top_arcs(attention, labels, theta=theta, limit=limit))
    if domains is not None and len(df):
        df.insert(2, "query_domain", [domains[i] or "-" for i in df["query_pos"]])
        df.insert(3, "key_domain", [domains[j] or "-" for j in df["key_pos"]])
    return df
