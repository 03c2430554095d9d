"""Which marker change moves a genome's call most? A search over its class's marker reversions and
other classes' marker additions, scored by the model itself (not picked by hand).

Candidates, all at reference coordinates of the aligned spike (the model's input):

* each of its class's characteristic mutations that it carries, reverted alone;
* all of them in one spike domain, reverted together; and all of them at once;
* each other class's characteristic markers that it lacks, added together.

Each candidate is one forward pass (batched); the result lists every candidate with the predicted
class's probability before and after, sorted by how far it fell. A teaching tour uses the top row:
a change that really moves the call (one own marker alone rarely does: the shipped model was
trained not to flip on one marker; see README, robustness).

References: in-silico mutagenesis as in the Variant Classifier page; the characteristic-mutation
table is ``bertgeom/data/definitions/characteristic_mutations.tsv`` (``bertgeom.genome.markers``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MarkerChange", "candidate_changes", "rank_changes", "tour_change"]


@dataclass(frozen=True)
class MarkerChange:
    """A set of marker reversions (``revert=True``) or additions, with a name a biologist reads."""

    label: str
    markers: tuple
    revert: bool

    def nucleotide_changes(self) -> list[str]:
        """The change as ``posALT`` substitutions (the Variant Classifier's *Add substitutions* box
        reads them): each base the markers touch, set to the reference (revert) or the marker's base."""
        out = []
        for m in self.markers:
            if m.kind == "sub":
                out.append(f"{m.pos}{m.ref if self.revert else m.alt}")
            elif m.kind == "del":
                for i, base in enumerate(m.ref):
                    out.append(f"{m.pos + i}{base if self.revert else '-'}")
        return out


def _domain(m) -> str:
    from bertgeom.genome.reference import domain_of_aa

    digits = "".join(ch if ch.isdigit() else " " for ch in (m.aa or "")).split()
    if not digits:
        return ""
    try:
        return domain_of_aa(int(digits[0])).fine
    except ValueError:
        return ""


def candidate_changes(aligned: str, cls: str, table=None) -> list[MarkerChange]:
    """The candidates of the module docstring for a genome of class ``cls`` (substitutions and
    deletions only: insertions are not part of the tokenised spike)."""
    from bertgeom.genome.classes import CLASSES
    from bertgeom.genome.markers import load_marker_table, marker_state

    table = table or load_marker_table()
    own = [m for m in table.of(cls, role=None) if m.kind in ("sub", "del") and marker_state(m, aligned) == "present"]
    out = [MarkerChange(f"revert {m.label}", (m,), True) for m in own]
    by_domain: dict[str, list] = {}
    for m in own:
        by_domain.setdefault(_domain(m), []).append(m)
    for dom, ms in by_domain.items():
        if dom and 1 < len(ms) < len(own):
            out.append(MarkerChange(f"revert the {len(ms)} {cls} markers in {dom} ({', '.join(m.label for m in ms)})",
                                    tuple(ms), True))
    if len(own) > 1:
        out.append(MarkerChange(f"revert all {len(own)} {cls} markers", tuple(own), True))
    own_keys = table.keys_of[cls]
    for other in CLASSES:
        if other == cls:
            continue
        add = [m for m in table.of(other) if m.kind in ("sub", "del") and m.key not in own_keys
               and marker_state(m, aligned) == "absent"]
        if add:
            out.append(MarkerChange(f"add the {len(add)} {other} markers it lacks", tuple(add), False))
    return out


def _apply(aligned: str, change: MarkerChange) -> str | None:
    from bertgeom.genome.markers import apply_marker

    arr = np.frombuffer(aligned.encode("ascii"), dtype=np.uint8).copy()
    ins: dict = {}
    ok = [apply_marker(arr, ins, m, revert=change.revert) for m in change.markers]
    return arr.tobytes().decode("ascii") if all(ok) else None


def rank_changes(loaded, aligned: str, cls: str, *, table=None, batch_size: int = 8) -> list[dict]:
    """Every candidate scored by the model: ``{"change", "n_markers", "nucleotides", "p_before",
    "p_after", "drop", "new_call", "p_new_call"}`` (``cls``'s probability before/after), sorted by
    ``drop`` (largest first; fewer markers first on ties)."""
    from bertgeom.attention import softmax
    from bertgeom.variant.predict import logits_for_ids

    labels = list(loaded.labels)
    target = labels.index(cls)
    changes = [(c, s) for c in candidate_changes(aligned, cls, table) for s in [_apply(aligned, c)] if s is not None]
    seqs = [aligned] + [s for _, s in changes]
    ids = np.stack([loaded.tokenizer.encode(s, max_length=None)[0] for s in seqs])
    probs = np.concatenate([softmax(logits_for_ids(loaded, ids[i:i + batch_size]))
                            for i in range(0, len(ids), batch_size)])
    base = probs[0]
    rows = []
    for (c, _), p in zip(changes, probs[1:]):
        k = int(np.argmax(p))
        rows.append({"change": c.label, "n_markers": len(c.markers), "nucleotides": " ".join(c.nucleotide_changes()),
                     "p_before": float(base[target]), "p_after": float(p[target]),
                     "drop": float(base[target] - p[target]),
                     "new_call": labels[k], "p_new_call": float(p[k])})
    rows.sort(key=lambda r: (-round(r["drop"], 4), r["n_markers"]))
    return rows


def tour_change(rows: list[dict], cls: str) -> dict | None:
    """The change a tour shows: the one with the fewest markers among those that change the call,
    else the one that lowers ``cls``'s probability most (``rows`` from :func:`rank_changes`)."""
    flips = [r for r in rows if r["new_call"] != cls]
    if flips:
        return min(flips, key=lambda r: (r["n_markers"], -r["drop"]))
    return rows[0] if rows else None


def rank_changes_for_trace(loaded, encoded, cls: str, **kwargs) -> list[dict]:
    """:func:`rank_changes` on the aligned spike an encoded genome carries (what generic UI code holds)."""
    return rank_changes(loaded, encoded.extra["analysis"].spike.aligned, cls, **kwargs)
