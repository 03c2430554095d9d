"""The genes of MN908947.3 as Nextclade's SARS-CoV-2 dataset annotates them, and their coordinates.

``bertgeom/data/reference/genome_annotation.gff3`` is the genome annotation of Nextclade's
SARS-CoV-2 dataset (nextstrain/nextclade_data, see PROVENANCE.md): it gives every gene the Variant
Classifier reports, with Nextclade's names and numbering; products are read from the GenBank record
``MN908947.3.gb`` (Nextstrain's annotated reference):

* ``ORF1a`` 266..13468 and ``ORF1b`` 13468..21555: the two parts of ORF1ab, joined by the -1
  ribosomal frameshift at 13468 (that base is read twice: last base of ORF1a's frame, first of
  ORF1b's). ORF1b's residues are numbered from 13468, so ``C14408T`` is ``ORF1b:P314L`` as in
  Nextclade;
* ``S``, ``ORF3a``, ``E``, ``M``, ``ORF6``, ``ORF7a``, ``ORF7b``, ``ORF8``, ``N`` as annotated, and
  ``ORF9b`` (28284..28577, inside N in another frame), so ORF9b:P10S or E27-/N28-/A29- are reported;
* ``ORF10`` (29558..29674) is in neither annotation; it is shown as RefSeq NC_045512.2 (same
  sequence) annotates it, but never counted as private (Nextclade does not translate it):
  :data:`NOT_IN_NEXTCLADE`.

References
----------
* nextstrain/nextclade_data ``data/nextstrain/sars-cov-2/wuhan-hu-1/orfs/genome_annotation.gff3``,
  commit 58ae81b0 (the gene map).
* Nextstrain ncov ``defaults/reference_seq.gb`` (MN908947.3), commit 5993a742 (products).
* NCBI RefSeq NC_045512.2 feature table (ORF10).
* Nextclade documentation, "Translation" and "Mutation calling" (gene names, 1-based codons).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .reference import data_path, reference_sequence, translate

#: Genes reported, in genome order (Nextclade's SARS-CoV-2 names, then ORF10).
GENE_ORDER: tuple[str, ...] = ("ORF1a", "ORF1b", "S", "ORF3a", "E", "M", "ORF6", "ORF7a", "ORF7b", "ORF8", "N",
                               "ORF9b", "ORF10")
#: Added from RefSeq NC_045512.2 where neither annotation has the gene (same sequence).
_REFSEQ_EXTRA = {"ORF10": (29558, 29674, "ORF10 protein")}
#: Genes shown but outside Nextclade's annotation: their rows are never private.
NOT_IN_NEXTCLADE: frozenset[str] = frozenset(_REFSEQ_EXTRA)


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


def parse_gff3_genes(text: str) -> list[tuple[str, int, int]]:
    """``(gene_name, start, end)`` of every ``gene`` feature of a GFF3 gene map (1-based, inclusive)."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 9 or cols[2] != "gene":
            continue
        attrs = dict(kv.strip().split("=", 1) for kv in cols[8].split(";") if "=" in kv)
        name = attrs.get("gene_name") or attrs.get("Name") or attrs.get("gene")
        if name:
            out.append((name, int(cols[3]), int(cols[4])))
    return out


@functools.lru_cache(maxsize=1)
def load_genes() -> dict[str, Gene]:
    """``{name: Gene}`` of :data:`GENE_ORDER`: Nextclade's gene map (``genome_annotation.gff3``) with the
    GenBank record's products, plus ORF10 from RefSeq."""
    products = {g.name: g for g in parse_genbank_cds(data_path("reference", "MN908947.3.gb").read_text())}
    parsed = {}
    for name, a, b in parse_gff3_genes(data_path("reference", "genome_annotation.gff3").read_text()):
        gb = products.get(name)
        parsed[name] = Gene(name, a, b, gb.product if gb else "", "Nextclade's SARS-CoV-2 annotation")
    for name, (a, b, product) in _REFSEQ_EXTRA.items():
        parsed.setdefault(name, Gene(name, a, b, product, "from RefSeq NC_045512.2 (not in Nextclade's annotation)"))
    missing = [g for g in GENE_ORDER if g not in parsed]
    if missing:  # pragma: no cover - guards the shipped file
        raise RuntimeError(f"the reference annotation lacks {missing}")
    return {g: parsed[g] for g in GENE_ORDER}


def genes_at(pos: int) -> list[Gene]:
    """The reported genes whose CDS holds genome ``pos`` (two at ORF1a/ORF1b's 13468, ORF7a/ORF7b's overlap and
    inside ORF9b, which lies in N)."""
    return [g for g in load_genes().values() if g.start <= pos <= g.end]


__all__ = ["GENE_ORDER", "Gene", "NOT_IN_NEXTCLADE", "genes_at", "load_genes", "parse_genbank_cds", "parse_gff3_genes"]
