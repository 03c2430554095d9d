"""Reading plotly figure JSON in tests: arrays may come base64-encoded (``bdata``)."""

from __future__ import annotations

import base64

import numpy as np


def plotly_array(x) -> np.ndarray:
    """A plotly JSON array (a list, or ``{"bdata", "dtype", "shape"}``) as a numpy array."""
    if isinstance(x, dict) and "bdata" in x:
        arr = np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"]))
        return arr.reshape([int(s) for s in str(x.get("shape", arr.size)).split(",")])
    return np.asarray(x)


def plotly_values(x) -> list:
    """The same array as (nested) Python lists."""
    if isinstance(x, dict) and "bdata" in x:
        return plotly_array(x).tolist()
    return list(x)
