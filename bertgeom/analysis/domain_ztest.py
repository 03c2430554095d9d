"""Top-head domain test: which heads send more of their strong attention to a token domain than
the domain's share of the tokens would predict.

For head h, over a set of inputs (the class's correct predictions), on the paper's zeroed maps
([SEP] onwards removed) and strong weights ``A_ij > θ`` (θ = 0.3):

* sample 1 (the head): ``x₁`` = strong entries whose key j lies in the domain D, out of
  ``n₁`` = all strong entries of the head;
* sample 2 (the background): ``x₂`` = kept tokens in D, out of ``n₂`` = all kept tokens.

One-sided two-proportion z-test with the pooled proportion ``p = (x₁ + x₂) / (n₁ + n₂)``:
``z = (x₁/n₁ − x₂/n₂) / sqrt(p (1 − p) (1/n₁ + 1/n₂))``, p-value ``1 − Φ(z)`` (the same statistic
as statsmodels' ``proportions_ztest(..., alternative="larger")``, here on whole ``[L, H]`` arrays),
then a Bonferroni correction over all ``L·H`` heads: significant when ``p < α / (L·H)``.

Source: the domain-proportion analysis of "The geometry of BERT" (Bonino et al. 2025, §4,
after Vig et al. 2021, "BERTology meets biology", who test attention to binding sites against
their background frequency the same way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

__all__ = ["DomainTest", "domain_ztest"]


@dataclass
class DomainTest:
    """Per-head result ``[L, H]``: the head's share on the domain, z, one-sided p, the Bonferroni
    threshold ``alpha_heads = α / (L·H)``, significant heads, and the background share."""

    share: np.ndarray
    background: float
    z: np.ndarray
    p: np.ndarray
    alpha: float
    alpha_heads: float
    significant: np.ndarray
    n_strong: np.ndarray

    def rows(self) -> dict[str, np.ndarray]:
        """Per-head columns for a table or CSV."""
        return {"strong_entries": self.n_strong, "share_on_domain": self.share, "background_share":
                np.full(self.share.shape, self.background), "z": self.z, "p_value": self.p,
                "p_bonferroni": np.minimum(1.0, self.p * self.p.size), "significant": self.significant}


def domain_ztest(x1, n1, x2: float, n2: float, alpha: float = 0.05) -> DomainTest:
    """One-sided pooled two-proportion z-test of ``x1/n1`` (per head, any shape) against the
    background ``x2/n2``, Bonferroni-corrected over every entry of ``x1`` (see module docstring).
    Heads without a strong entry (``n1 = 0``) get z = NaN, p = 1 and are never significant."""
    x1 = np.asarray(x1, dtype=np.float64)
    n1 = np.broadcast_to(np.asarray(n1, dtype=np.float64), x1.shape)
    if (x1 < 0).any() or (x1 > n1).any() or not 0 <= x2 <= n2 or n2 <= 0:
        raise ValueError("counts must satisfy 0 <= x <= n, with a non-empty background")
    with np.errstate(invalid="ignore", divide="ignore"):
        p1 = x1 / n1
        p2 = x2 / n2
        pool = (x1 + x2) / (n1 + n2)
        se = np.sqrt(pool * (1.0 - pool) * (1.0 / n1 + 1.0 / n2))
        z = np.where(n1 > 0, (p1 - p2) / se, np.nan)
    z = np.where((n1 > 0) & (se == 0), 0.0, z)  # both proportions 0 or 1: no evidence either way
    p = np.where(np.isnan(z), 1.0, norm.sf(np.nan_to_num(z)))
    alpha_heads = alpha / max(x1.size, 1)
    return DomainTest(share=np.where(n1 > 0, p1, np.nan), background=float(p2), z=z, p=p, alpha=alpha,
                      alpha_heads=alpha_heads, significant=p < alpha_heads, n_strong=n1.astype(np.int64))
