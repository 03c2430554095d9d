"""Why did the variant model predict this class? Token-level explanations and mutagenesis.

* :func:`cls_attention_by_layer` — how much [CLS] attends to each token, per layer (mean
  over heads of ``A[l, h, 0, :]``): where the classification token reads.
* :func:`attention_rollout` — Abnar & Zuidema (2020): ``R = Â_L ... Â_1`` with
  ``Â_l = 0.5 * mean_h A_l + 0.5 * I`` (rows renormalised); the [CLS] row of R.
* integrated gradients of the k-mer tokens (baseline: [PAD] at every k-mer) live with the other
  generic analyses, :mod:`bertgeom.analysis.attributions`.
* :func:`apply_changes` / :func:`probabilities_for_spike` — in-silico mutagenesis on the
  aligned spike (reference coordinates, so a change never shifts other tokens);
  :func:`revertible_events` names what can be reverted as the mutation table does (``S:N501Y``,
  ``del69-70``), one entry per event however many bases it spans.

References
----------
Abnar & Zuidema 2020, *Quantifying attention flow in transformers* (arXiv:2005.00928): rollout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from bertgeom.analysis.flow import FLOW_RESIDUAL, rollout_row
from bertgeom.models import LoadedModel
from bertgeom.trace import Trace


def cls_attention_by_layer(trace: Trace) -> np.ndarray:
    """``[L, T]``: mean over heads of the attention row of [CLS] (position 0), per layer."""
    return trace.attentions[:, :, 0, :].mean(axis=1)


def attention_rollout(trace: Trace, residual: float = FLOW_RESIDUAL) -> np.ndarray:
    """``[L, T]``: the [CLS] row of the attention rollout after each layer (Abnar & Zuidema 2020), by
    :func:`bertgeom.analysis.flow.rollout_row` (the one rollout, the one the Attention flow tab uses)."""
    return rollout_row(trace.attentions, 0, residual)


_NUC = re.compile(r"^([ACGT])?(\d+)([ACGTN-])$")


@dataclass(frozen=True)
class SpikeChange:
    """A nucleotide change in genome coordinates: ``pos`` (1-based) becomes ``alt``."""

    pos: int
    alt: str

    @property
    def name(self) -> str:
        from bertgeom.sars_cov_2.genome.reference import reference_sequence

        return f"{reference_sequence()[self.pos - 1]}{self.pos}{self.alt}"


def parse_change(text: str) -> SpikeChange:
    """``A23063T`` / ``23063T`` -> :class:`SpikeChange`; must fall inside the spike."""
    from bertgeom.sars_cov_2.genome.reference import SPIKE_END, SPIKE_START, reference_sequence

    m = _NUC.match((text or "").strip().upper())
    if not m:
        raise ValueError(f"'{text}' is not a nucleotide change like A23063T.")
    ref, pos, alt = m.group(1), int(m.group(2)), m.group(3)
    if not SPIKE_START <= pos <= SPIKE_END:
        raise ValueError(f"Position {pos} is outside the spike gene ({SPIKE_START}-{SPIKE_END}).")
    if ref and reference_sequence()[pos - 1] != ref:
        raise ValueError(f"The reference base at {pos} is {reference_sequence()[pos - 1]}, not {ref}.")
    return SpikeChange(pos, alt)


def apply_changes(aligned_spike: str, changes: list[SpikeChange]) -> str:
    """The aligned spike with each change written at its reference coordinate."""
    from bertgeom.sars_cov_2.genome.reference import SPIKE_START

    chars = list(aligned_spike)
    for c in changes:
        chars[c.pos - SPIKE_START] = c.alt
    return "".join(chars)


def reversion_changes(aligned_spike: str, mutation) -> list[SpikeChange]:
    """Changes that put a called spike mutation (a NucMutation) back to the reference."""
    from bertgeom.sars_cov_2.genome.reference import reference_sequence

    ref = reference_sequence()
    if mutation.kind == "sub":
        return [SpikeChange(mutation.pos, ref[mutation.pos - 1])]
    if mutation.kind == "del":
        return [SpikeChange(p, ref[p - 1]) for p in range(mutation.pos, mutation.pos + len(mutation.ref))]
    return []  # insertions are not part of the tokenised spike


@dataclass(frozen=True)
class RevertibleEvent:
    """One thing the what-if can put back to the reference: a mutation event of the spike's table
    (a substitution, a deletion; events sharing a base are one entry, e.g. ``S:L24- + S:P25- +
    S:P26- + S:A27S`` from one deletion) or a base change with no amino-acid effect."""

    name: str  #: as the mutation table writes it (``S:N501Y``, ``S:H69- + S:V70-``); a silent change by its base
    mutations: tuple  #: the NucMutations it reverts
    silent: bool = False  #: a base change with no amino-acid effect (in no table row)
    aliases: tuple = ()  #: earlier names the search also finds (``del69-70``, ``del21765-21770``)

    @property
    def nucleotides(self) -> str:
        return ", ".join(m.name for m in self.mutations)

    @property
    def label(self) -> str:
        also = f"; also {', '.join(self.aliases)}" if self.aliases else ""
        if self.silent:
            return f"{self.name} (no amino-acid change{also})"
        return f"{self.name} ({self.nucleotides}{also})"


def legacy_names(names: list[str], mutations) -> tuple[str, ...]:
    """The grouped forms bertgeom wrote before it took Nextclade's (``del69-70`` for ``S:H69- +
    S:V70-``, ``del21765-21770`` for ``21765-21770``), so a what-if search in either form finds the entry."""
    import re

    residues = sorted(int(m.group(1)) for n in names if (m := re.match(r"^S:[A-Z*](\d+)-$", n)))
    out = []
    if residues:
        runs, start = [], residues[0]
        for a, b in zip(residues, residues[1:] + [None]):
            if b != a + 1:
                runs.append((start, a))
                start = b
        out += [f"del{a}" if a == b else f"del{a}-{b}" for a, b in runs]
    out += [f"del{m.name}" for m in mutations if m.kind == "del"]
    return tuple(out)


def revertible_events(report, events: list[dict]) -> list[RevertibleEvent]:
    """The spike's substitutions and deletions grouped as the mutation table's ``events`` (rows with
    ``name`` and ``nuc``, see ``bertgeom.sars_cov_2.variant.result.mutation_events``), in genome order. Events
    that share a nucleotide change become one entry (reverting that base undoes both); a base change
    that is in no event (synonymous) is an entry of its own, named by the base."""
    nuc = [m for m in report.spike_nucleotide if m.kind in ("sub", "del")]
    by_name = {m.name: m for m in nuc}
    groups: list[tuple[list[str], list]] = []  # (event names, mutations), merged on shared bases
    for e in events:
        muts = [by_name[n] for n in e["nuc"] if n in by_name]
        if not muts:
            continue  # an insertion: not part of the tokenised spike
        hit = [g for g in groups if any(m in g[1] for m in muts)]
        names, members = [e["name"]], list(muts)
        for g in hit:
            groups.remove(g)
            names = g[0] + names
            members = g[1] + [m for m in members if m not in g[1]]
        groups.append((list(dict.fromkeys(names)), list(dict.fromkeys(members))))
    grouped = {id(m) for _, ms in groups for m in ms}
    out = [RevertibleEvent(" + ".join(names), tuple(sorted(ms, key=lambda m: m.pos)), aliases=legacy_names(names, ms))
           for names, ms in groups]
    out += [RevertibleEvent(m.name, (m,), silent=True) for m in nuc if id(m) not in grouped]
    return sorted(out, key=lambda e: e.mutations[0].pos)


def probabilities_for_spike(loaded: LoadedModel, aligned_spike: str) -> np.ndarray:
    """Class probabilities ``[C]`` of an aligned spike (one forward pass, no attentions; calibrated)."""
    from bertgeom.probabilities import class_probabilities
    from bertgeom.sars_cov_2.variant.predict import logits_for_ids

    ids, _ = loaded.tokenizer.encode(aligned_spike, max_length=None)
    return class_probabilities(loaded, logits_for_ids(loaded, ids[None, :]))[0]
