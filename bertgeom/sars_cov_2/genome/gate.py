"""Is this sequence SARS-CoV-2, and can the model read its spike? The gate in front of the variant model's call.

The model was trained on SARS-CoV-2 spikes; it gives *some* class to any input (a random 79 %
identity mutant of Wuhan-Hu-1 came out "gh" at 0.9999; an all-N spike came out "alpha" at 0.999).
The gate decides one of:

* ``SARS-CoV-2``: the model's call is shown;
* ``too divergent``: related, but farther from *every node of Nextclade's reference tree* than any
  real SARS-CoV-2 (a sarbecovirus such as RaTG13 at ~96 %, or a heavily corrupted genome): no call;
* ``not SARS-CoV-2``: no call;
* ``spike not read``: SARS-CoV-2, but most of the 12-mers the model reads hold N or are unknown to
  its vocabulary, so its probabilities would say nothing about this spike: no call.

The numbers:

* **divergence** from the nearest tree node (:mod:`.tree`): private mutations (Nextclade's distance
  plus private deletion ranges) per 1,000 read bases. Against that node every real spike of the
  2020-2024 genomes set beside Nextclade is >= 99.41 % identical (<= 5.9 per kb; XBB >= 99.87 %) and
  every whole genome >= 99.72 %: above :data:`DIVERGENCE_MAX_PER_KB` (10 per kb = 99.0 %) is too
  divergent. Identity to Wuhan-Hu-1 is *not* the test (an XBB spike is 98.9 % identical to it);
* **identity** to Wuhan-Hu-1 over the aligned, called bases, only as the "not SARS-CoV-2" floor:
  below :data:`IDENTITY_RELATED` (85 %, about the pangolin coronaviruses; SARS-CoV-1 is ~79 %);
* **aligned share**: called aligned bases over the query's A C G T bases: below
  :data:`ALIGNED_RELATED` (50 %) most of the input is something else; below :data:`ALIGNED_SARS2`
  (90 %) too much of it is, for a call;
* **unread share** of the model's input: 12-mers holding N (or another non-base) or unknown to the
  vocabulary; above :data:`MAX_UNREAD_SHARE` (50 %) there is no call.

A sequence that does not align at all (a shuffled genome, another virus) never reaches the gate: the
alignment already refuses it ("does not align to the SARS-CoV-2 reference"). The thresholds are this
tool's (reconstructed, not from the paper) and each is a module constant.

References
----------
* Nextclade documentation, "Phylogenetic placement" (the nearest node and its distance).
* Zhou et al. (2020), Nature 579:270 (RaTG13, 96.2 % identity); Lam et al. (2020), Nature 583:282
  (pangolin coronaviruses, 85.5-92.4 %); Lu et al. (2020), Lancet 395:565 (SARS-CoV-1, ~79 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SARS2, DIVERGENT, NOT_SARS2, UNREAD = "SARS-CoV-2", "too divergent", "not SARS-CoV-2", "spike not read"
IDENTITY_RELATED = 0.85  #: below this identity to Wuhan-Hu-1 the sequence is not SARS-CoV-2
ALIGNED_SARS2 = 0.90  #: share of the query's bases that must align for a call
ALIGNED_RELATED = 0.50  #: below this share most of the input is something else
DIVERGENCE_MAX_PER_KB = 10.0  #: private mutations per read kb to the nearest tree node above which: too divergent
MAX_UNREAD_SHARE = 0.5  #: above this share of unread model k-mers (N or unknown): no call

#: Bool per byte value: A, C, G or T (a look-up, where ``np.isin`` sorted the genome per call).
_IS_ACGT = np.zeros(256, dtype=bool)
_IS_ACGT[np.frombuffer(b"ACGT", dtype=np.uint8)] = True


@dataclass(frozen=True)
class Gate:
    """The gate's decision with its numbers and, when it refuses, one sentence why."""

    verdict: str  #: SARS-CoV-2 / too divergent / not SARS-CoV-2 / spike not read
    identity: float  #: identity to the reference over the aligned, called bases
    aligned_share: float  #: called aligned bases / the query's A C G T bases
    private: int  #: private mutations against the nearest tree node
    reason: str = ""  #: why no call ("" when the verdict is SARS-CoV-2)
    divergence_per_kb: float = 0.0  #: private mutations per read kb against the nearest tree node
    unread_share: float = 0.0  #: share of the model's k-mers holding N or unknown to its vocabulary
    node: str = ""  #: the nearest node's lineage

    @property
    def passed(self) -> bool:
        return self.verdict == SARS2

    def summary(self) -> str:
        return (f"{self.verdict}: {self.divergence_per_kb:.1f} private mutations per kb against the nearest tree "
                f"node ({self.node or 'n/a'}), {self.identity:.2%} identity to Wuhan-Hu-1, "
                f"{self.aligned_share:.0%} of the input aligned, {self.unread_share:.0%} of the spike's k-mers unread")


def identity_to_reference(aligned: str) -> tuple[float, int]:
    """``(identity, called)``: share of the A/C/G/T positions of a reference-coordinate text (starting
    at genome position 1) that equal the reference base, and how many such positions there are."""
    from .reference import reference_sequence

    q = np.frombuffer(aligned.encode("ascii"), dtype=np.uint8)
    r = np.frombuffer(reference_sequence()[: len(aligned)].encode("ascii"), dtype=np.uint8)
    called = _IS_ACGT[q]
    n = int(np.count_nonzero(called))
    return (float((q[called] == r[called]).mean()) if n else 0.0), n


def query_bases(sequence: str) -> int:
    """A C G T bases of the (cleaned) input sequence."""
    s = sequence.upper().encode("ascii", "replace")
    return len(s) - len(s.translate(None, b"ACGT"))


def unread_share(kmers, token_ids=None, unk_id: int | None = None) -> float:
    """Share of the model's k-mers it cannot read: holding N or another non-base, or (with the
    encoded ``token_ids`` and the vocabulary's ``unk_id``) unknown to the vocabulary."""
    if not kmers:
        return 1.0
    bad = np.array([bool(k.upper().translate(_BASE_OR_GAP)) for k in kmers])
    if token_ids is not None and unk_id is not None:
        ids = np.asarray(token_ids)[1: 1 + len(kmers)]
        bad[: len(ids)] |= ids == unk_id
    return float(bad.mean())


_BASE_OR_GAP = str.maketrans("", "", "ACGT-")


def sequence_gate(aligned: str, sequence: str, placement, unread: float = 0.0, spike_coverage: float = 1.0) -> Gate:
    """The :class:`Gate` of one aligned sequence (``aligned``: reference-coordinate text from genome
    position 1; ``sequence``: the input as parsed; ``placement``: its
    :class:`~bertgeom.sars_cov_2.genome.tree.Placement`; ``unread``: :func:`unread_share` of the
    model's input; ``spike_coverage``: the share of the spike the sequence covers)."""
    identity, called = identity_to_reference(aligned)
    share = min(1.0, called / max(query_bases(sequence), 1))
    private = placement.distance + len(placement.private.deletion_ranges)
    per_kb = placement.divergence_per_kb
    nums = dict(divergence_per_kb=per_kb, unread_share=unread, node=placement.lineage)
    if identity < IDENTITY_RELATED or share < ALIGNED_RELATED:
        why = (f"only {identity:.1%} identical to SARS-CoV-2 (Wuhan-Hu-1) where it aligns (real SARS-CoV-2: "
               f"above 98%)" if identity < IDENTITY_RELATED else f"only {share:.0%} of it aligns to SARS-CoV-2")
        return Gate(NOT_SARS2, identity, share, private, f"Not SARS-CoV-2: {why}, so the variant model makes no call.",
                    **nums)
    if per_kb > DIVERGENCE_MAX_PER_KB or share < ALIGNED_SARS2:
        parts = []
        if per_kb > DIVERGENCE_MAX_PER_KB:
            parts.append(f"{private} private mutations against its nearest lineage on Nextclade's tree "
                         f"({placement.lineage}), {per_kb:.1f} per kb where real SARS-CoV-2 has at most about 6")
        if share < ALIGNED_SARS2:
            parts.append(f"only {share:.0%} of it aligns")
        return Gate(DIVERGENT, identity, share, private,
                    f"Too divergent for the variant model: {' and '.join(parts)}, so it makes no call.", **nums)
    if spike_coverage == 0:
        return Gate(UNREAD, identity, share, private,
                    "No call: the sequence does not cover the spike (S gene), the only part the variant model reads; "
                    "its clade and lineage come from the rest.", **{**nums, "unread_share": 1.0})
    if unread > MAX_UNREAD_SHARE:
        return Gate(UNREAD, identity, share, private,
                    f"No call: {unread:.0%} of the spike's 12-mers the model reads hold N (not sequenced) or are "
                    f"unknown to it, so its class probabilities would not describe this spike.", **nums)
    return Gate(SARS2, identity, share, private, **nums)


__all__ = ["ALIGNED_RELATED", "ALIGNED_SARS2", "DIVERGENCE_MAX_PER_KB", "DIVERGENT", "Gate", "IDENTITY_RELATED",
           "MAX_UNREAD_SHARE", "NOT_SARS2", "SARS2", "UNREAD", "identity_to_reference", "query_bases",
           "sequence_gate", "unread_share"]
