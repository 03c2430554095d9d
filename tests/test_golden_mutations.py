"""Golden tests of the genome pipeline: every gene's mutations of the demo genomes against lists
derived by an independent method, the model's tokens unchanged by the one-pass pipeline, and the
attribution cases a biologist checks first (E484K/R/A, G339D/H, G142D, a clean BA.2)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
from bertgeom.sars_cov_2.genome.genes import GENE_ORDER, load_genes
from bertgeom.sars_cov_2.genome.markers import load_marker_table
from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence, carried_by, mutation_table
from bertgeom.sars_cov_2.genome.reference import reference_sequence
from bertgeom.tables import counted

DATA = Path(__file__).parent / "data"


@functools.lru_cache(maxsize=1)
def demo():
    return {rec.name: (meta, analyse_sequence(rec)) for rec, meta in load_demo_genomes()}


def edit(subs=(), base: str | None = None) -> str:
    g = list(base or reference_sequence())
    for p, b in subs:
        g[p - 1] = b
    return "".join(g)


def s_row(analysis, name: str) -> dict:
    rows = [r for r in mutation_table(analysis) if r["gene"] == "S" and r["mutation"] == name]
    assert len(rows) == 1, (name, [r["mutation"] for r in mutation_table(analysis) if r["gene"] == "S"])
    return rows[0]


def _normal(gene: str, events) -> list[str]:
    """Our Nextclade-form rows in the independent derivation's older form: consecutive deleted residues
    grouped (``del69-70``), a frameshift by the codon of its first indel (``fs256``)."""
    from bertgeom.sars_cov_2.genome.profiles import nuc_key

    out: list[str] = []
    run: list[int] = []
    for e in list(events) + [None]:
        if e is not None and e.kind == "del" and (not run or e.start == run[-1] + 1):
            run.append(e.start)
            continue
        if run:
            out.append(f"del{run[0]}" if len(run) == 1 else f"del{run[0]}-{run[-1]}")
            run = []
        if e is None:
            break
        if e.kind == "del":
            run.append(e.start)
        elif e.kind == "ins":
            pos, _, aas = e.name.partition(":")
            out.append(f"ins{pos}{aas}")
        elif e.kind == "fs":
            first = min(nuc_key(n)[1] for n in e.nuc)
            out.append(f"fs{load_genes()[gene].codon_of(first)}")
        else:
            out.append(e.name)
    return out


def test_genes_come_from_the_genbank_record_with_orf1b_after_the_frameshift():
    genes = load_genes()
    assert list(genes) == list(GENE_ORDER)
    assert (genes["ORF1a"].start, genes["ORF1a"].end, genes["ORF1b"].start) == (266, 13468, 13468)
    assert (genes["S"].start, genes["S"].end, genes["S"].n_codons) == (21563, 25384, 1273)
    assert genes["ORF1b"].protein.startswith("RVCGVSAARL")  # read in the -1 frame from the slippery site
    assert genes["ORF1b"].codon_of(14408) == 314  # C14408T is ORF1b:P314L, as Nextclade numbers it
    assert genes["ORF10"].n_codons == 38 and genes["N"].n_codons == 419


def test_every_gene_of_every_demo_genome_matches_the_independent_derivation():
    """tests/data/golden_demo_mutations.json was made by tools/golden_mutations.py: Biopython's
    Gotoh alignment of each gene region and a BLOSUM62 peptide alignment (no bertgeom code)."""
    golden = json.loads((DATA / "golden_demo_mutations.json").read_text())["genomes"]
    assert len(golden) == 8
    for name, (meta, a) in demo().items():
        assert set(a.mutations.genes) == set(GENE_ORDER)
        for g, gr in a.mutations.genes.items():
            if g in golden[name]:  # ORF9b (added with Nextclade's annotation) is not in the derivation
                assert _normal(g, gr.events) == golden[name][g], (meta["class"], g)


def test_known_nextclade_names_on_the_demo_genomes():
    by_class = {meta["class"]: a for meta, a in demo().values()}
    names = {c: {e.qualified for e in a.mutations.events} for c, a in by_class.items()}
    assert {"S:H69-", "S:V70-", "S:Y144-", "ORF1a:S3675-", "ORF1a:F3677-", "ORF8:Q27*", "N:R203K"} <= names["alpha"]
    assert {"S:E156G", "S:F157-", "S:R158-", "ORF8:D119-", "ORF8:F120-", "ORF1b:P314L"} <= names["delta"]
    assert {"S:L24-", "S:P26-", "S:A27S", "S:G339H", "N:E31-", "N:S33-", "ORF9b:E27-", "ORF6:D61L"} <= names["omicron"]
    assert "ORF1b:P314L" in names["gh"] and "ORF3a:Q57H" in names["gh"]
    mu = by_class["mu"].mutations.genes["ORF3a"]
    assert mu.frameshifts == ["257-276"] and [e.name for e in mu.events][-1] == "257-276"  # Nextclade: ORF3a:257-276
    assert by_class["alpha"].mutations.genes["ORF8"].stops == ["Q27*", "K68*"]


def test_token_ids_of_the_demo_genomes_are_unchanged():
    """What the model reads (spike 12-mers, stride 9) is what it read before the one-pass pipeline
    (ids recorded from commit 16859aa with the shipped vocabulary)."""
    from bertgeom.sars_cov_2.genome.kmers import KmerVocab
    from bertgeom.sars_cov_2.variant import VARIANT_DIR

    recorded = json.loads((DATA / "demo_token_ids.json").read_text())["token_ids"]
    vocab = KmerVocab.load(VARIANT_DIR / "kmer_vocab.json")
    for rec, _meta in load_demo_genomes():
        a = analyse_sequence(rec, vocab=vocab)
        ids = np.asarray(a.token_ids)
        assert ids[ids != 0].tolist() == recorded[rec.name], rec.name
        assert np.array_equal(a.arrays()["token_ids"], ids)


def test_e484k_e484r_e484a_are_three_changes_tagged_by_their_own_carriers():
    omicron = next(a for meta, a in demo().values() if meta["class"] == "omicron")
    k = analyse_sequence(edit([(23012, "A")]))  # GAA -> AAA
    r = analyse_sequence(edit([(23012, "A"), (23013, "G")]))  # GAA -> AGA, as on the BA.2 genome OP523232
    assert s_row(k, "E484K")["nucleotides"] == "G23012A"
    assert {"beta", "gamma", "mu"} <= set(s_row(k, "E484K")["carried by"])
    row_a = s_row(omicron, "E484A")
    assert "omicron" in row_a["carried by"] and not {"beta", "gamma", "mu"} & set(row_a["carried by"])
    row_r = s_row(r, "E484R")  # G23012A + A23013G is neither E484K nor E484A
    assert row_r["nucleotides"] == "G23012A A23013G"
    assert row_r["carried by"] == carried_by("S:E484R") == ()


def test_g339d_and_g339h_are_read_per_codon():
    d = analyse_sequence(edit([(22578, "A")]))  # GGT -> GAT
    h = analyse_sequence(edit([(22577, "C"), (22578, "A")]))  # GGT -> CAT
    assert [e.name for e in d.mutations.genes["S"].events] == ["G339D"]
    assert [e.name for e in h.mutations.genes["S"].events] == ["G339H"]  # one change, not G339R + G339D
    assert s_row(h, "G339H")["nucleotides"] == "G22577C G22578A"
    labels = {m.aa for m in load_marker_table().of("omicron")}
    assert not {"G339R", "G339D"} & labels
    # G339H (BA.2.75, XBB) is carried by 73 % of Omicron's training genomes since the labels came from
    # the placement (BA.1, BA.2 and BA.5 carry G339D), under the shipped table's 75 %: built at 70 % from
    # the same genomes, the table reads it as one codon-level row, never as G339R + G339D
    from bertgeom.sars_cov_2.genome.markers import build_characteristic_table, training_reports

    at70 = [m for m in build_characteristic_table(min_share=0.7, reports=training_reports()) if m.cls == "omicron"]
    g339 = [m for m in at70 if m.aa.startswith("G339")]
    assert [(m.aa, m.nucleotides) for m in g339] == [("G339H", "G22577C G22578A")]
    assert carried_by("S:G339H") == ("omicron",)  # the XBB clades' profiles
    assert "omicron" in carried_by("S:G339D")  # BA.1 (21K) carries G339D in its clade profile


def test_g142d_on_delta_is_tagged_delta_and_omicron():
    delta = next(a for meta, a in demo().values() if meta["class"] == "delta")
    assert delta.clade.clade == "21J"
    assert {"delta", "omicron"} <= set(s_row(delta, "G142D")["carried by"])


def test_a_clean_ba2_has_no_private_spike_change_and_qc_counts_the_rows_it_marks():
    from bertgeom.sars_cov_2.genome.dataset import load_dev_genomes
    from bertgeom.sars_cov_2.genome.reference import data_path

    genomes = {g.name: g for g in load_dev_genomes(data_path("genomes", "open_genomes_dev.fasta.xz"),
                                                   data_path("genomes", "open_genomes_dev_labels.tsv"))}
    a = analyse_sequence(genomes["ON544943"].sequence)  # 21L (BA.2), validation split, no N
    assert a.clade.clade == "21L"
    assert a.private.in_gene("S") == () and a.qc.private == [] and a.qc.verdict == "pass"
    assert not any(r.startswith("S:") for r in a.private.reversions)
    marked = [f"{r['gene']}:{r['mutation']}" if r["gene"] != "nuc" else r["mutation"]
              for r in mutation_table(a) if r["private"] == "yes"]
    assert marked == list(a.private.rows)  # rows holding a private nucleotide
    assert a.qc_score.rules["private mutations"].count == len(a.private.private)  # counted on nucleotides
    assert f"{counted(len(a.private.private), 'private nucleotide change')} against the nearest tree node (BA.2)" in \
        a.qc_score.rules["private mutations"].message
    # against the tree's BA.2 node the genome reads the reference at ORF6:D61L's three bases: three
    # reversions, each weighing 6 in today's QC rule (so the genome is "mediocre", not "good")
    assert a.private.reversions == ("C27382G", "T27383A", "C27384T")
    assert a.qc_score.rules["private mutations"].score == 75.0 and a.qc_score.status == "mediocre"


def test_coverage_and_n_add_up_on_every_card():
    masked = list(reference_sequence())
    for i in range(22000, 22400):  # an amplicon dropout in the spike
        masked[i] = "N"
    a = analyse_sequence("".join(masked))
    assert a.qc.coverage + a.qc.n_share == pytest.approx(1.0)
    assert a.qc.coverage < 0.95 and a.qc.n_count >= 400
    assert a.genome_qc.coverage == pytest.approx(1 - a.genome_qc.missing / 29903)
    assert a.mutations.genes["S"].coverage == pytest.approx(a.qc.coverage, abs=1e-3)
    assert a.qc_score.rules["missing data"].count == a.genome_qc.missing


def test_the_result_object_gives_the_batch_and_csv_fields_in_one_pass():
    for meta, a in demo().values():
        row = a.summary_row()
        assert row["clade"].startswith(meta["clade"]) and row["qc_status"] in ("good", "mediocre", "bad")
        frame = a.to_frame()
        assert set(frame["gene"]) <= set(GENE_ORDER) | {"nuc"}
        assert len(a.to_frame("S")) == len(a.mutations.genes["S"].events)
        assert (frame["private"] == "yes").sum() == len(a.private.rows)
        assert row["private"] == len(a.private.private)  # the QC counts nucleotides


def test_shipped_clade_profiles_are_what_the_builder_makes():
    from bertgeom.sars_cov_2.genome.markers import training_reports
    from bertgeom.sars_cov_2.genome.profiles import build_clade_profiles, load_clade_profiles

    shipped = load_clade_profiles()
    assert shipped.version == 2
    rebuilt = build_clade_profiles([(clade, rep, text) for _c, clade, rep, text
                                    in training_reports(indel_places="nextclade") if clade])
    assert tuple(rebuilt) == shipped.rows
    omicron_clades = {r.clade for r in shipped.rows if r.cls == "omicron"}
    assert {"21K", "21L", "22B", "23A"} <= omicron_clades  # each Nextstrain clade under its class
    assert "S:G339H" in shipped.profile("22D") and "S:G339D" in shipped.profile("21L")
