"""The Variant Classifier's placement cases (issue 42), built from the shipped genomes: a spike-only
XBB, a genome whose spike is all N, and a Delta/Omicron recombinant. The page tests
(``tests/test_variant_page.py``) and ``tools/screenshot_placement.py`` read the same sequences.
Each function returns one FASTA record as text."""

from __future__ import annotations


def _sequence(item) -> str:
    return "".join(item.text.splitlines()[1:])


def spike_only_xbb() -> str:
    """The spike of the first open genome of clade 22F/23A whose spike alone is placed on an XBB
    lineage (OP971202, XBB.1.5.13 in the shipped dataset), cut as the page would cut it."""
    from bertgeom.sars_cov_2.genome.align import align_genome, cut_spike
    from bertgeom.sars_cov_2.genome.dataset import read_labels
    from bertgeom.sars_cov_2.genome.fasta import SequenceRecord, iter_fasta_file
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.sars_cov_2.genome.reference import data_path

    clades = {r["name"]: r["nextstrain_clade_by_rules"]
              for r in read_labels(data_path("genomes", "open_genomes_dev_labels.tsv"))}
    for rec in iter_fasta_file(data_path("genomes", "open_genomes_dev.fasta.xz")):
        if clades.get(rec.name) in ("22F", "23A"):
            spike = cut_spike(align_genome(rec.sequence)).aligned.replace("-", "")
            if analyse_sequence(SequenceRecord(rec.name, spike, [])).placement.lineage.startswith("XBB"):
                return f">{rec.name}_spike\n{spike}"
    raise LookupError("no XBB genome among the open genomes")


def all_n_spike() -> str:
    """The Omicron example with its spike (21563-25384, reference coordinates) replaced by N."""
    from bertgeom.sars_cov_2.genome.align import align_genome
    from bertgeom.sars_cov_2.variant.spec import genome_set

    aligned = align_genome(_sequence(genome_set("demo")[7])).aligned
    return ">omicron_spike_all_N\n" + (aligned[:21562] + "N" * (25384 - 21562) + aligned[25384:]).replace("-", "")


def delta_omicron_recombinant() -> str:
    """The Delta example's 5' part (to 21,000, reference coordinates) joined to the Omicron example's 3' part."""
    from bertgeom.sars_cov_2.genome.align import align_genome
    from bertgeom.sars_cov_2.variant.spec import genome_set

    delta, omicron = (align_genome(_sequence(genome_set("demo")[i])).aligned for i in (5, 7))
    return ">delta_5prime_omicron_3prime\n" + (delta[:21000] + omicron[21000:]).replace("-", "")


def batch() -> str:
    """Six records: the Alpha, Delta and Omicron examples, the recombinant, the all-N spike and the spike-only XBB."""
    from bertgeom.sars_cov_2.variant.spec import genome_set

    demo = genome_set("demo")
    return "\n".join([demo[3].text, demo[5].text, demo[7].text, delta_omicron_recombinant(), all_n_spike(),
                      spike_only_xbb()])
