"""Mutation calling, clade definitions and the class mapping (bertgeom.sars_cov_2.genome.mutations/classes)."""

import functools

import pytest

from bertgeom.sars_cov_2.genome.align import align_genome
from bertgeom.sars_cov_2.genome.classes import CLASSES, clade_to_class, label_to_class
from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
from bertgeom.sars_cov_2.genome.mutations import (
    aa_effect_of_sub,
    call_mutations,
    class_defining_mutations,
    class_expected_sites,
    load_clade_definitions,
    nearest_clade,
    spike_sites_of,
)
from bertgeom.sars_cov_2.genome.reference import SPIKE_START, domain_of_aa, reference_sequence, reference_spike_protein


def edit(subs=(), deletions=(), insertions=()):
    g = list(reference_sequence())
    for p, b in subs:
        g[p - 1] = b
    for p, n in deletions:
        for i in range(p - 1, p - 1 + n):
            g[i] = ""
    for p, b in insertions:
        g[p - 1] += b
    return "".join(g)


@functools.lru_cache(maxsize=1)
def demo():
    return [(meta, align_genome(rec.sequence)) for rec, meta in load_demo_genomes()]


def test_n501y_is_a23063t():
    assert aa_effect_of_sub(23063, "T") == "N501Y"
    rep = call_mutations(align_genome(edit(subs=[(23063, "T")])))
    (nuc,) = rep.nucleotide
    assert nuc.name == "A23063T" and nuc.aa == "N501Y" and nuc.domain == "RBD" and nuc.coarse_domain == "S1"
    assert "20I" in nuc.defining_clades and "20H" in nuc.defining_clades
    (aa,) = rep.amino_acid
    assert aa.name == "N501Y" and aa.domain == "RBD" and aa.nuc == ("A23063T",)
    assert "20I" in aa.defining_clades


def test_del69_70_and_del144():
    rep = call_mutations(align_genome(edit(deletions=[(21765, 6), (21991, 3)])))
    assert rep.aa_names() == ["H69-", "V70-", "Y144-"]  # Nextclade: one deletion per residue
    assert rep.aa_names(grouped=False) == ["H69-", "V70-", "Y144-"]
    # Nextclade: closed nucleotide ranges, an in-frame gap on a codon boundary where the repeat allows it:
    # Nextclade 1.4.1's output (tests/data/nextclade_1.4.1/nextclade.tsv, OU186099) writes 21992-21994
    assert rep.nuc_names() == ["21765-21770", "21992-21994"]
    assert rep.has("21765-21770") and rep.has("H69-")


def test_out_of_phase_deletion_with_substitution():
    # Delta: 22029-22034 deleted -> E156G F157- R158-, as Nextclade names it
    rep = call_mutations(align_genome(edit(deletions=[(22029, 6)])))
    assert rep.aa_names() == ["F157-", "R158-", "E156G"] or rep.aa_names() == ["E156G", "F157-", "R158-"]


def test_ba1_deletion_is_named_as_nextstrain_names_it():
    rep = call_mutations(align_genome(edit(deletions=[(21987, 9)])))
    assert rep.aa_names() == ["G142D", "V143-", "Y144-", "Y145-"]


def test_insertion_ins214EPE():
    rep = call_mutations(align_genome(edit(insertions=[(22204, "GAGCCAGAA")])))
    assert rep.aa_names() == ["214:EPE"]  # Nextclade writes S:214:EPE
    assert rep.nuc_names() == ["22204:GAGCCAGAA"]


def test_frameshift_and_stop_naming():
    rep = call_mutations(align_genome(edit(deletions=[(23000, 1)])))
    assert [m.kind for m in rep.amino_acid] == ["fs"]
    prot = reference_spike_protein()
    q = prot.index("Q", 100) + 1  # first Gln after residue 100; CAA/CAG -> TAA/TAG is a stop
    stop = call_mutations(align_genome(edit(subs=[(SPIKE_START + 3 * (q - 1), "T")])))
    assert [(m.kind, m.name) for m in stop.amino_acid] == [("stop", f"Q{q}*")]


def test_n_and_ambiguous_are_not_mutations():
    g = edit(subs=[(23063, "N"), (23064, "N"), (23403, "R")])  # R = A/G at D614G's site
    rep = call_mutations(align_genome(g))
    assert rep.nucleotide == []
    assert rep.ambiguous_spike_positions == [23403]


def test_clade_inheritance_and_classes():
    defs = load_clade_definitions()
    s = defs.inherited("20I")
    assert s[23063] == "T" and s[28881] == "A" and s[23403] == "G"  # own, from 20B, from 20A
    assert defs.inherited("21K")[23599] == "G"  # via 21M
    assert defs.display["21G"] == "21G (Lambda)"
    assert clade_to_class("20I") == "alpha" and clade_to_class("20H") == "beta" and clade_to_class("20J") == "gamma"
    assert {clade_to_class(c) for c in ("21A", "21I", "21J")} == {"delta"}
    assert clade_to_class("21G") == "lambda" and clade_to_class("21H") == "mu"
    assert {clade_to_class(c) for c in ("21K", "21L", "21M", "22B", "23I", "24A", "25C", "26B")} == {"omicron"}
    assert {clade_to_class(c) for c in ("19A", "19B", "20A", "20G", "21B", "21F")} == {"gh"}
    assert label_to_class("other_preVOC") == "gh" and label_to_class("GH") == "gh"
    assert label_to_class("unassigned") is None
    assert set(CLASSES) == {clade_to_class(c) for c in defs.clades}


def test_class_defining_mutations():
    lam = {m.aa for m in class_defining_mutations("lambda")}
    assert {"L452Q", "F490S", "D614G"} <= lam
    assert [m.name for m in class_defining_mutations("gh")] == ["A23403G"]
    alpha = {m.aa for m in class_defining_mutations("alpha")}
    assert "N501Y" in alpha
    omi_union = class_defining_mutations("omicron", mode="union")
    assert len(omi_union) > len(class_defining_mutations("omicron"))
    assert all(m.in_spike for m in omi_union)
    with pytest.raises(ValueError):
        class_defining_mutations("alpha", clade="21K")
    assert (22917, "A") in class_expected_sites("lambda")


def test_demo_genomes_carry_their_class_markers():
    assert [meta["class"] for meta, _ in demo()] == list(CLASSES)
    for meta, aln in demo():
        cls = meta["class"]
        rep = call_mutations(aln)
        missing = [m.name for m in class_defining_mutations(cls) if not rep.has(m.name)]
        assert not missing, (cls, missing)
        assert nearest_clade(aln).cls == cls
        status = spike_sites_of(aln.aligned[SPIKE_START - 1 : SPIKE_START - 1 + 3822],
                                [(m.pos, m.alt) for m in class_defining_mutations(cls)])
        assert set(status.values()) == {"present"}
    lam = dict((m["class"], a) for m, a in demo())["lambda"]
    names = call_mutations(lam).aa_names()
    assert "L452Q" in names and "F490S" in names
    alpha = call_mutations(dict((m["class"], a) for m, a in demo())["alpha"]).aa_names()
    assert {"H69-", "V70-", "Y144-", "N501Y", "P681H"} <= set(alpha)


def test_domain_lookup():
    assert domain_of_aa(501) == ("RBD", "S1")
    assert domain_of_aa(1) == ("SP", "SP")
    assert domain_of_aa(700).fine == "no domain 2" and domain_of_aa(700).coarse == "S2"
    assert domain_of_aa(1213).fine == "HR2" and domain_of_aa(1214).fine == "TM" and domain_of_aa(1238).fine == "CT"
    with pytest.raises(ValueError):
        domain_of_aa(1274)


def test_residues_a_frameshifting_deletion_removes_before_the_shift_are_deleted():
    """Nextclade 1.4.1 (tests/data/nextclade_1.4.1/nextclade.tsv): Mu's 26158-26161 is ORF3a:V256- and the
    frameshift ORF3a:257-276; Delta's 27498-27616 ORF7a:C35- .. ORF7a:V74- and ORF7a:75-122."""
    mu = call_mutations(align_genome(edit(deletions=[(26158, 4)]))).genes["ORF3a"]
    assert [e.name for e in mu.events] == ["V256-", "257-276"] and mu.frameshifts == ["257-276"]
    delta = call_mutations(align_genome(edit(deletions=[(27498, 119)]))).genes["ORF7a"]
    names = [e.name for e in delta.events]
    assert names[0] == "C35-" and names[-2:] == ["V74-", "75-122"] and len(names) == 41


def test_an_insertion_inside_a_codon_is_named_before_the_residue_it_changes():
    """22205:CGGCAGGCT turns D215 (GAT) into AAGY: Nextclade 1.4.1 wrote S:D215Y (USA/JW1285/2021)."""
    rep = call_mutations(align_genome(edit(insertions=[(22205, "CGGCAGGCT")])))
    assert rep.aa_names() == ["214:AAG", "D215Y"]
