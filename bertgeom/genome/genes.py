"""The genes of MN908947.3, read from its GenBank annotation, and their coordinates.

``bertgeom/data/reference/MN908947.3.gb`` is Nextstrain's annotated reference (see PROVENANCE.md).
Its CDS features give every gene the Variant Classifier reports (Nextclade's gene names and
numbering):

* ``ORF1a`` 266..13468 and ``ORF1b`` 13468..21555: the two parts of ORF1ab, joined by the -1
  ribosomal frameshift at 13468 (that base is read twice: last base of ORF1a's frame, first of
  ORF1b's). ORF1b's residues are numbered from 13468, so ``C14408T`` is ``ORF1b:P314L`` as in
  Nextclade;
* ``S``, ``ORF3a``, ``E``, ``M``, ``ORF6``, ``ORF7a``, ``ORF7b``, ``ORF8``, ``N`` as annotated;
* ``ORF10`` (29558..29674) is not in Nextstrain's record; it is added from RefSeq NC_045512.2,
  whose sequence is identical. ORF9b (inside N, another frame) is parsed but not reported.

References
----------
* Nextstrain ncov ``defaults/reference_seq.gb`` (MN908947.3), commit 5993a742.
* NCBI RefSeq NC_045512.2 feature table (ORF10).
* Nextclade documentation, "Translation" and "Mutation calling" (gene names, 1-based codons).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .reference import data_path, reference_sequence, translate

#: Genes reported, in genome order (Nextclade's SARS-CoV-2 names).
GENE_ORDER: tuple[str, ...] = ("ORF1a", "ORF1b", "S", "ORF3a", "E", "M", "ORF6", "ORF7a", "ORF7b", "ORF8", "N",
                               "ORF10")
#: Added from RefSeq NC_045512.2 where the GenBank record has no CDS (same sequence).
_REFSEQ_EXTRA = {"ORF10": (29558, 29674, "ORF10 protein")}


@dataclass(frozen=True)
class Gene:
    """One coding sequence: genome ``start..end`` (1-based, inclusive), in the forward frame."""

    name: str
    start: int
    end: int
    product: str = ""
    note: str = ""

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    @functools.cached_property
    def protein(self) -> str:
        """The reference protein, a final stop codon removed (ORF1a's part ends at the slippery site, no stop)."""
        prot = translate(reference_sequence()[self.start - 1 : self.end])
        return prot[:-1] if prot.endswith("*") else prot

    @property
    def n_codons(self) -> int:
        """Residues numbered in this gene (the stop codon excluded)."""
        return len(self.protein)

    def codon_of(self, pos: int) -> int | None:
        """1-based residue of the codon holding genome ``pos`` (None outside the residues)."""
        if self.start <= pos <= self.end:
            c = (pos - self.start) // 3 + 1
            return c if c <= self.n_codons else None
        return None

    def codon_span(self, codon: int) -> tuple[int, int]:
        """Genome positions ``(first, last)`` of residue ``codon``'s three bases."""
        first = self.start + 3 * (codon - 1)
        return first, first + 2


def parse_genbank_cds(text: str) -> list[Gene]:
    """The CDS features of a GenBank flat file (simple ``a..b`` locations; joins are not needed here)."""
    genes: list[Gene] = []
    features = text.split("ORIGIN")[0]
    blocks = re.split(r"\n {5}(?=\S)", features)
    for block in blocks:
        m = re.match(r"CDS\s+(\d+)\.\.(\d+)", block)
        if not m:
            continue
        quals = dict(re.findall(r'/(\w+)="([^"]*)"', block.replace("\n", " ")))
        name = quals.get("gene", "")
        genes.append(Gene(name, int(m.group(1)), int(m.group(2)), quals.get("product", ""), quals.get("note", "")))
    return genes


@functools.lru_cache(maxsize=1)
def load_genes() -> dict[str, Gene]:
    """``{name: Gene}`` of :data:`GENE_ORDER`, from the shipped GenBank record (plus ORF10)."""
    parsed = {g.name: g for g in parse_genbank_cds(data_path("reference", "MN908947.3.gb").read_text())}
    for name, (a, b, product) in _REFSEQ_EXTRA.items():
        parsed.setdefault(name, Gene(name, a, b, product, "from RefSeq NC_045512.2"))
    missing = [g for g in GENE_ORDER if g not in parsed]
    if missing:  # pragma: no cover - guards the shipped file
        raise RuntimeError(f"the reference annotation lacks {missing}")
    return {g: parsed[g] for g in GENE_ORDER}


def genes_at(pos: int) -> list[Gene]:
    """The reported genes whose CDS holds genome ``pos`` (two at ORF1a/ORF1b's 13468 and ORF7a/ORF7b's overlap)."""
    return [g for g in load_genes().values() if g.start <= pos <= g.end]


__all__ = ["GENE_ORDER", "Gene", "genes_at", "load_genes", "parse_genbank_cds"]
