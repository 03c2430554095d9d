"""What every tab of the Subspace Directions page reads (:class:`View`: the page view with the page's
settings and the layer weights) and the helpers several tabs share."""

from __future__ import annotations

from dataclasses import dataclass

from bertgeom.ui.state import PageView

#: Short names of the data-space quantities for narrow tables.
DATA_SHORT = {"attn_rank": "D2 · rank r_ε(A)", "attn_rank_norm": "D2 · r_ε(A) / n", "delta_A": "D1 · δ_A",
              "out_energy_top1": "D3 · energy in direction 1", "delta_out": "D3 · δ_out"}

@dataclass
class View(PageView):
    """What every tab reads: the page view with the page's settings and the layer weights."""

    eps: float
    token_set: str
    rank_rtol: float | None
    sym_rtol: float
    nbins: int
    faithful: bool
    lws: list

    @property
    def wh(self) -> str:
        """The model's weights hash (part of every cache key)."""
        return self.loaded.weights_hash


def file_safe(s: str) -> str:
    """``s`` as a piece of a download's file name (letters, digits, ``-_.``; the last 60 characters)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(s))[-60:]
