"""What every tab of the Attention Heads page reads (:class:`View`: the page view with the input's
per-head features, labels and thresholds) and the helpers several tabs share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bertgeom.analysis.patterns import PatternThresholds
from bertgeom.ui import heads_cache as hc
from bertgeom.ui.state import PageView


@dataclass
class View(PageView):
    """What every tab reads: the page view with the input's per-head features, labels and thresholds."""

    table: Any
    labels: dict
    th: PatternThresholds


def hover_labels(labels: list[str], domains: list[str] | None) -> list[str]:
    """Token labels for a map's hover text, with each token's domain when there is one."""
    if domains is None:
        return [str(x) for x in labels]
    return [f"{x} · {d}" if d else str(x) for x, d in zip(labels, domains)]


def token_groups(v: View) -> list[str] | None:
    """One group label per token when the input kind has them (for genomes, the domains)."""
    groups = getattr(v, "domains", None)
    return list(groups) if groups is not None else None


def shipped_set_summary(loaded) -> hc.SetSummary:
    """The shipped set's statistics (prepared ahead, or computed with a progress bar while the model
    runs over the set)."""
    return hc.set_summary(loaded)
