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

Probabilities are the calibrated ones every screen shows (:func:`bertgeom.probabilities.class_probabilities`);
beside them each row carries the class's log-odds (:func:`~bertgeom.probabilities.class_log_odds`),
which still move where a calibrated probability sits above 99.9%.

The *What if?* box reads changes in the old bertgeom names and in Nextclade's
(:func:`parse_what_if`): ``A23063T`` / ``23063T``, a run of bases ``22577GG`` / ``GG22577CA``, one
deleted base ``A21765-`` / ``21765-``, and deletions ``del21765-21770`` or Nextclade's range
``21765-21770``; :func:`search_aliases` gives a mutation's other spellings (``S:del69-70`` and
``S:H69-, S:V70-``), so either finds it in the revert list.

References: in-silico mutagenesis as in the Variant Classifier page; the characteristic-mutation
table is ``bertgeom/data/definitions/characteristic_mutations.tsv`` (``bertgeom.sars_cov_2.genome.markers``);
Nextclade's mutation names: docs.nextstrain.org/projects/nextclade, "Output files" (nucleotide
deletions as ranges, amino-acid deletions per residue ``S:H69-``, insertions ``S:214:EPE``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from bertgeom.tables import counted

__all__ = ["MarkerChange", "box_entries", "candidate_changes", "parse_what_if", "rank_changes", "search_aliases",
           "tour_change", "what_if_frame", "what_if_label"]


@dataclass(frozen=True)
class MarkerChange:
    """A set of marker reversions (``revert=True``) or additions, with a name a biologist reads."""

    label: str
    markers: tuple
    revert: bool

    def nucleotide_changes(self) -> list[str]:
        """The change as one ``posALT`` per base (what the *What if?* box reads, :func:`parse_what_if`):
        each base the markers touch, set to the reference (revert) or the marker's base. A marker
        of several bases (``G22577C+G22578A``) gives one entry per base."""
        out = []
        for m in self.markers:
            if m.kind == "sub":
                new = m.ref if self.revert else m.alt
                out += [f"{m.pos + i}{base}" for i, base in enumerate(new)]
            elif m.kind == "del":
                for i, base in enumerate(m.ref):
                    out.append(f"{m.pos + i}{base if self.revert else '-'}")
        return out


def _domain(m) -> str:
    from bertgeom.sars_cov_2.genome.reference import domain_of_aa

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
    from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY, CLASSES
    from bertgeom.sars_cov_2.genome.markers import load_marker_table, marker_state

    table = table or load_marker_table()
    shown = lambda c: CLASS_DISPLAY.get(c, c)  # noqa: E731 - the class as every screen names it
    own = [m for m in table.of(cls, role=None) if m.kind in ("sub", "del") and marker_state(m, aligned) == "present"]
    out = [MarkerChange(f"revert {m.label}", (m,), True) for m in own]
    by_domain: dict[str, list] = {}
    for m in own:
        by_domain.setdefault(_domain(m), []).append(m)
    for dom, ms in by_domain.items():
        if dom and 1 < len(ms) < len(own):
            out.append(MarkerChange(f"revert the {len(ms)} {shown(cls)} markers in {dom} "
                                    f"({', '.join(m.label for m in ms)})",
                                    tuple(ms), True))
    if len(own) > 1:
        out.append(MarkerChange(f"revert all {len(own)} {shown(cls)} markers", tuple(own), True))
    own_keys = table.keys_of[cls]
    for other in CLASSES:
        if other == cls:
            continue
        add = [m for m in table.of(other) if m.kind in ("sub", "del") and m.key not in own_keys
               and marker_state(m, aligned) == "absent"]
        if add:
            out.append(MarkerChange(f"add the {len(add)} {shown(other)} markers it lacks", tuple(add), False))
    return out


def _apply(aligned: str, change: MarkerChange) -> str | None:
    from bertgeom.sars_cov_2.genome.markers import apply_marker

    arr = np.frombuffer(aligned.encode("ascii"), dtype=np.uint8).copy()
    ins: dict = {}
    ok = [apply_marker(arr, ins, m, revert=change.revert) for m in change.markers]
    return arr.tobytes().decode("ascii") if all(ok) else None


def box_entries(aligned: str, change: MarkerChange) -> list[str]:
    """The change as the *What if?* box reads it (:func:`parse_what_if`), one entry per marker: the
    bases the marker writes as one run (``22577GG``, ``21765ACATGT`` to restore a deletion,
    ``23063T``) or a deleted stretch as Nextclade's range (``21765-21770``). Typing them into the box
    gives the same spike as the search scored (a test checks it)."""
    from bertgeom.sars_cov_2.genome.reference import SPIKE_START

    out = []
    for m in change.markers:
        after = _apply(aligned, MarkerChange("", (m,), change.revert))
        if after is None:
            continue
        diff = [i for i, (x, y) in enumerate(zip(aligned, after)) if x != y]
        if not diff:
            continue
        lo, hi = diff[0], diff[-1]
        new = after[lo:hi + 1]
        if set(new) == {"-"}:
            out.append(f"{SPIKE_START + lo}-{SPIKE_START + hi}" if hi > lo else f"{SPIKE_START + lo}-")
        elif "-" not in new:
            out.append(f"{SPIKE_START + lo}{new}")
        else:  # bases and gaps in one span: one entry per position
            out += [f"{SPIKE_START + i}{after[i]}" for i in diff]
    return out


def rank_changes(loaded, aligned: str, cls: str, *, table=None, batch_size: int = 8) -> list[dict]:
    """Every candidate scored by the model: ``{"change", "n_markers", "nucleotides" (the *What if?*
    box's entries, :func:`box_entries`), "n_entries", "p_before",
    "p_after", "drop", "new_call", "p_new_call", "logodds_before", "logodds_after"}`` (``cls``'s
    calibrated probability and log-odds before/after), sorted by ``drop`` (largest first; fewer
    markers first on ties)."""
    from bertgeom.probabilities import class_log_odds, class_probabilities
    from bertgeom.sars_cov_2.variant.predict import logits_for_ids

    labels = list(loaded.labels)
    target = labels.index(cls)
    changes = [(c, s) for c in candidate_changes(aligned, cls, table) for s in [_apply(aligned, c)] if s is not None]
    seqs = [aligned] + [s for _, s in changes]
    ids = np.stack([loaded.tokenizer.encode(s, max_length=None)[0] for s in seqs])
    logits = np.concatenate([logits_for_ids(loaded, ids[i:i + batch_size]) for i in range(0, len(ids), batch_size)])
    probs = class_probabilities(loaded, logits)
    odds = class_log_odds(loaded, logits)[:, target]
    base = probs[0]
    rows = []
    for (c, _), p, lo in zip(changes, probs[1:], odds[1:]):
        k = int(np.argmax(p))
        entries = box_entries(aligned, c)
        rows.append({"change": c.label, "n_markers": len(c.markers), "nucleotides": " ".join(entries),
                     "n_entries": len(entries),
                     "p_before": float(base[target]), "p_after": float(p[target]),
                     "drop": float(base[target] - p[target]),
                     "logodds_before": float(odds[0]), "logodds_after": float(lo),
                     "new_call": labels[k], "p_new_call": float(p[k])})
    # calibrated probabilities near 1 tie at four decimals: the log-odds break the tie
    rows.sort(key=lambda r: (-round(r["drop"], 4), r["logodds_after"], r["n_markers"]))
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
    from bertgeom.sars_cov_2.variant import genome_analysis

    return rank_changes(loaded, genome_analysis(encoded).spike.aligned, cls, **kwargs)


# ---- the What if? box: names in bertgeom's and Nextclade's forms ---------------------------------
_SUB = re.compile(r"^([ACGT]*)(\d+)([ACGTN]+|-)$")  # [REF]POS ALT, ALT one base or a run; POS- deletes one base
_RANGE = re.compile(r"^(?:DEL)?(\d+)(?:-(\d+))?$")  # del21765-21770, 21765-21770, del21765


def parse_what_if(text: str) -> tuple[list, int, list[str]]:
    """The changes typed into the *What if?* box: ``(SpikeChange list, entries read, problems)``.

    Entries are separated by spaces or commas; each is one of ``A23063T`` / ``23063T`` (Nextclade's
    substitution; the reference letter, when given, is checked), a run of bases ``22577GG`` /
    ``GG22577CA`` (consecutive positions), ``A21765-`` / ``21765-`` (one base deleted), or a
    deletion ``del21765-21770`` / Nextclade's ``21765-21770`` / ``del21765``. Each problem is one
    sentence naming the entry; a bad entry never stops the others."""
    from bertgeom.sars_cov_2.genome.reference import SPIKE_END, SPIKE_START, reference_sequence
    from bertgeom.sars_cov_2.variant.explain import SpikeChange

    ref = reference_sequence()
    changes, n, problems = [], 0, []
    for tok in [t for t in (text or "").replace(",", " ").split() if t]:
        word = tok.strip().upper()
        sub, rng = _SUB.match(word), _RANGE.match(word)
        if sub:
            refs, start, alts = sub.group(1), int(sub.group(2)), sub.group(3)
            positions = list(range(start, start + len(alts)))
            new = list(alts)
            if refs and len(refs) != len(alts):
                problems.append(f"'{tok}' has {counted(len(refs), 'reference base')} "
                                f"but {counted(len(alts), 'new one')}.")
                continue
        elif rng and (word.startswith("DEL") or rng.group(2)):
            start, end = int(rng.group(1)), int(rng.group(2) or rng.group(1))
            if end < start or end - start >= 300:
                problems.append(f"'{tok}' is not a deletion range like 21765-21770 (start, then a later end).")
                continue
            refs, positions = "", list(range(start, end + 1))
            new = ["-"] * len(positions)
        else:
            problems.append(f"'{tok}' is not a change the box reads: a substitution like A23063T, a run of bases "
                            "like 22577GG, or a deletion like del21765-21770 or 21765-21770.")
            continue
        outside = [p for p in positions if not SPIKE_START <= p <= SPIKE_END]
        if outside:
            problems.append(f"'{tok}': position {outside[0]} is outside the spike gene ({SPIKE_START}-{SPIKE_END}).")
            continue
        if refs and "".join(ref[p - 1] for p in positions) != refs:
            problems.append(f"'{tok}': the reference at {positions[0]} reads "
                            f"{''.join(ref[p - 1] for p in positions)}, not {refs}.")
            continue
        changes += [SpikeChange(p, b) for p, b in zip(positions, new)]
        n += 1
    return changes, n, problems


_AA_DEL = re.compile(r"^(?:([A-Za-z0-9]+):)?del(\d+)(?:-(\d+))?$")  # S:del69-70 (bertgeom's older form)
_AA_RES_DEL = re.compile(r"^(?:([A-Za-z0-9]+):)?([A-Z*])(\d+)-$")  # S:H69- (Nextclade's, one residue)
_NUC_DEL = re.compile(r"^del(\d+)(?:-(\d+))?$")  # del21765-21770 (older) <-> 21765-21770 (Nextclade)
_NUC_RANGE = re.compile(r"^(\d+)-(\d+)$")
_INS_OLD = re.compile(r"^(?:([A-Za-z0-9]+):)?ins(\d+)([A-Z*]+)$")  # S:ins214EPE <-> S:214:EPE
_INS_NEW = re.compile(r"^([A-Za-z0-9]+):(\d+):([A-Z*]+)$")


def search_aliases(name: str) -> list[str]:
    """Other spellings of one mutation name, so a search in either bertgeom's older form or
    Nextclade's finds it: ``del69-70`` <-> ``H69-, V70-`` (spike residues; with or without ``S:``),
    ``del21765-21770`` <-> ``21765-21770``, ``S:ins214EPE`` <-> ``S:214:EPE``. Empty when the name
    has no other form (a substitution is written alike by both)."""
    from bertgeom.sars_cov_2.genome.reference import SPIKE_AA_LEN, reference_spike_protein

    name = (name or "").strip()
    m = _AA_DEL.match(name)
    if m and (m.group(1) or int(m.group(2)) <= SPIKE_AA_LEN):  # residues: a spike has 1273
        gene, a, b = m.group(1), int(m.group(2)), int(m.group(3) or m.group(2))
        if (gene or "S") == "S" and 0 <= b - a < 50:
            protein = reference_spike_protein()
            prefix = f"{gene}:" if gene else ""
            return [f"{prefix}{protein[i - 1]}{i}-" for i in range(a, b + 1) if 1 <= i <= len(protein)]
        return []
    m = _NUC_DEL.match(name)
    if m:
        return [f"{m.group(1)}-{m.group(2)}"] if m.group(2) else []
    m = _NUC_RANGE.match(name)
    if m:
        return [f"del{m.group(1)}-{m.group(2)}"]
    m = _AA_RES_DEL.match(name)
    if m:
        prefix = f"{m.group(1)}:" if m.group(1) else ""
        return [f"{prefix}del{m.group(3)}"]
    m = _INS_OLD.match(name)
    if m:
        return [f"{m.group(1) or 'S'}:{m.group(2)}:{m.group(3)}"]
    m = _INS_NEW.match(name)
    if m:
        return [f"{m.group(1)}:ins{m.group(2)}{m.group(3)}"]
    return []


def what_if_label(event) -> str:
    """A revert entry's label (:class:`~bertgeom.sars_cov_2.variant.explain.RevertibleEvent`) with its names'
    other spellings appended (:func:`search_aliases`), so typing either form finds it."""
    names = [n.strip() for n in event.name.split("+")] + [m.name for m in event.mutations]
    also = list(dict.fromkeys(a for n in names for a in search_aliases(n)))
    return event.label + (f" · also {', '.join(also)}" if also else "")


def what_if_frame(loaded, logits_before, logits_after, class_names):
    """The what-if's table: per class the calibrated probability before and after (as every screen
    writes it, ``> 99.9%``) and the log-odds before, after and their change, which still moves where
    the probability sits above 99.9% (a pandas DataFrame)."""
    import pandas as pd

    from bertgeom.figures.base import probability_label
    from bertgeom.probabilities import class_log_odds, class_probabilities

    pb, pa = class_probabilities(loaded, logits_before), class_probabilities(loaded, logits_after)
    lb, la = class_log_odds(loaded, logits_before), class_log_odds(loaded, logits_after)
    return pd.DataFrame({"class": list(class_names), "before": [probability_label(p) for p in pb],
                         "after": [probability_label(p) for p in pa],
                         "log-odds before": [f"{x:.2f}" for x in lb], "log-odds after": [f"{x:.2f}" for x in la],
                         "change of log-odds": [f"{x:+.2f}" for x in la - lb]})


def genome_facts(loaded, trace) -> dict:
    """What the tour's genome step says about one genome: its call and calibrated probability and
    log-odds, the change :func:`tour_change` picks, the number of candidates and the strongest
    single marker (``rows`` of :func:`rank_changes`)."""
    from bertgeom.probabilities import class_log_odds, class_probabilities

    probs = class_probabilities(loaded, trace.logits)
    k = int(np.argmax(probs))
    pred = loaded.labels[k]
    rows = rank_changes_for_trace(loaded, trace.encoded, pred)
    single = [r for r in rows if r["n_markers"] == 1]
    return {"pred": pred, "p": float(probs[k]), "logodds": float(class_log_odds(loaded, trace.logits)[k]),
            "pick": tour_change(rows, pred), "n": len(rows),
            "best_single": min(single, key=lambda r: r["logodds_after"]) if single else None}


def genome_sentence(facts: dict) -> str:
    """The tour's genome sentence from :func:`genome_facts` (also printed by ``python -m bertgeom
    tour`` for the README): numbers as the Variant Classifier page writes them."""
    from bertgeom.figures.base import probability_label
    from bertgeom.inputs import INPUT_KINDS
    from bertgeom.tables import counted

    name = INPUT_KINDS.class_name(facts["pred"])
    pick, single = facts["pick"], facts["best_single"]
    # every number here is one the page it opens prints: the probability and log-odds in the what-if
    # table (two decimals, as there), the box's count and the call after it; the tour's browser test
    # holds each to the page's own text
    text = f"The model calls this genome **{name}** ({probability_label(facts['p'])}, log-odds {facts['logodds']:.2f})."
    if pick is None:
        return text
    new = INPUT_KINDS.class_name(pick["new_call"])
    n = pick.get("n_entries", pick["n_markers"])
    changed = pick["new_call"] != facts["pred"]
    # the verbs follow the numbers as printed: a probability that prints the same "stays"; a pick that
    # raises it (no change tried lowers it) is not said to lower it
    before, after = probability_label(facts["p"]), probability_label(pick["p_after"])
    verb = ("changes the call" if changed else
            "moves it most" if after != before and pick["p_after"] > facts["p"] else "lowers it most")
    moves = (f"stays at {after}" if after == before else
             f"{'falls' if pick['p_after'] < facts['p'] else 'rises'} to {after}")
    text += (f" Of the marker changes tried with the model, the smallest that {verb} is to "
             f"**{pick['change']}** ({counted(n, 'change')} in the *What if?* box below): {name} {moves} and the "
             f"call {'becomes' if changed else 'stays'} **{new}** ({probability_label(pick['p_new_call'])}).")
    if single is not None:
        typed = f" (type `{single['nucleotides']}` alone in the box)" if single.get("nucleotides") else ""
        text += (" One marker alone barely matters (the model was trained not to flip on one marker): try the "
                 f"strongest, **{single['change']}**{typed}, and watch {name}'s log-odds in the table.")
    return text
