"""Is this sequence SARS-CoV-2 at all? The gate in front of the variant model's call.

The model was trained on SARS-CoV-2 spikes; it gives *some* class to any input, and a random 79 %
identity mutant of Wuhan-Hu-1 (about SARS-CoV-1's distance) came out "gh" at 0.9999. The gate reads
three numbers of the alignment and decides one of:

* ``SARS-CoV-2``: the model's call is shown;
* ``too divergent``: related (a sarbecovirus such as RaTG13 at ~96 %, or a heavily corrupted
  genome), but farther from Wuhan-Hu-1 than any SARS-CoV-2 the model knows: no call;
* ``not SARS-CoV-2``: no call.

The numbers:

* **identity**: share of the aligned, called query bases (A C G T in reference coordinates) equal to
  the reference base: the farthest of the 567 shipped developer genomes (2019-2023, 19A to 23I) is
  at 99.59 %; SARS-CoV-2 needs :data:`IDENTITY_SARS2` (99 %, 2.4 x that distance), below
  :data:`IDENTITY_RELATED` (85 %, about the pangolin coronaviruses; SARS-CoV-1 is ~79 %) it is not
  SARS-CoV-2;
* **aligned share**: called aligned bases over the query's A C G T bases (what of the input aligned):
  the shipped genomes' lowest is 98.5 %; SARS-CoV-2 needs :data:`ALIGNED_SARS2` (90 %), below
  :data:`ALIGNED_RELATED` (50 %) most of the input is something else;
* **private load**: private nucleotide changes against the nearest clade's profile
  (:mod:`.profiles`): the shipped genomes' most is 87 (a recombinant-like 20B genome);
  more than :data:`PRIVATE_MAX` (150) is too divergent.

A sequence that does not align at all (a shuffled genome, another virus) never reaches the gate: the
alignment already refuses it ("does not align to the SARS-CoV-2 reference").

References
----------
* Zhou et al. (2020), Nature 579:270 (RaTG13, 96.2 % identity); Lam et al. (2020), Nature 583:282
  (pangolin coronaviruses, 85.5-92.4 %); Lu et al. (2020), Lancet 395:565 (SARS-CoV-1, ~79 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SARS2, DIVERGENT, NOT_SARS2 = "SARS-CoV-2", "too divergent", "not SARS-CoV-2"
IDENTITY_SARS2 = 0.99  #: identity to Wuhan-Hu-1 over the aligned part needed for a call
IDENTITY_RELATED = 0.85  #: below this identity the sequence is not SARS-CoV-2
ALIGNED_SARS2 = 0.90  #: share of the query's bases that must align for a call
ALIGNED_RELATED = 0.50  #: below this share most of the input is something else
PRIVATE_MAX = 150  #: more private nucleotide changes than this: too divergent

#: Bool per byte value: A, C, G or T (a look-up, where ``np.isin`` sorted the genome per call).
_IS_ACGT = np.zeros(256, dtype=bool)
_IS_ACGT[np.frombuffer(b"ACGT", dtype=np.uint8)] = True


@dataclass(frozen=True)
class Gate:
    """The gate's decision with its three numbers and, when it refuses, one sentence why."""

    verdict: str  #: SARS-CoV-2 / too divergent / not SARS-CoV-2
    identity: float  #: identity to the reference over the aligned, called bases
    aligned_share: float  #: called aligned bases / the query's A C G T bases
    private: int  #: private nucleotide changes against the nearest clade's profile
    reason: str = ""  #: why no call ("" when the verdict is SARS-CoV-2)

    @property
    def passed(self) -> bool:
        return self.verdict == SARS2

    def summary(self) -> str:
        return (f"{self.verdict}: {self.identity:.2%} identity to Wuhan-Hu-1 over the aligned part, "
                f"{self.aligned_share:.0%} of the input aligned, {self.private} private changes")


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


def sequence_gate(aligned: str, sequence: str, private: int) -> Gate:
    """The :class:`Gate` of one aligned sequence (``aligned``: reference-coordinate text from genome
    position 1; ``sequence``: the input as parsed; ``private``: its private nucleotide changes)."""
    identity, called = identity_to_reference(aligned)
    share = min(1.0, called / max(query_bases(sequence), 1))
    if identity < IDENTITY_RELATED or share < ALIGNED_RELATED:
        why = (f"only {identity:.1%} identical to SARS-CoV-2 (Wuhan-Hu-1) where it aligns (SARS-CoV-2 genomes: "
               f"at least {IDENTITY_SARS2:.0%})" if identity < IDENTITY_RELATED else
               f"only {share:.0%} of it aligns to SARS-CoV-2")
        return Gate(NOT_SARS2, identity, share, private,
                    f"Not SARS-CoV-2: {why}, so the variant model makes no call.")
    if identity < IDENTITY_SARS2 or share < ALIGNED_SARS2 or private > PRIVATE_MAX:
        parts = []
        if identity < IDENTITY_SARS2:
            parts.append(f"{identity:.1%} identity to Wuhan-Hu-1 (SARS-CoV-2 genomes: at least {IDENTITY_SARS2:.0%})")
        if share < ALIGNED_SARS2:
            parts.append(f"only {share:.0%} of it aligns")
        if private > PRIVATE_MAX:
            parts.append(f"{private} private changes (SARS-CoV-2 genomes: at most {PRIVATE_MAX})")
        return Gate(DIVERGENT, identity, share, private,
                    f"Too divergent for the variant model: {' and '.join(parts)}, so it makes no call.")
    return Gate(SARS2, identity, share, private)


__all__ = ["ALIGNED_RELATED", "ALIGNED_SARS2", "DIVERGENT", "Gate", "IDENTITY_RELATED", "IDENTITY_SARS2",
           "NOT_SARS2", "PRIVATE_MAX", "SARS2", "identity_to_reference", "query_bases", "sequence_gate"]
