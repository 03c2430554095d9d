"""analyse_sequence end to end, the shipped data, and the held-out split."""


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bertgeom.sars_cov_2.genome.classes import CLASSES, class_to_label, label_to_class
from bertgeom.sars_cov_2.genome.dataset import (
    load_demo_genomes,
    load_dev_genomes,
    load_validation_small,
    read_labels,
    split_real_genomes,
)
from bertgeom.sars_cov_2.genome.fasta import RecordError, SequenceRecord
from bertgeom.sars_cov_2.genome.kmers import KmerVocab
from bertgeom.sars_cov_2.genome.pipeline import analyse_many, analyse_sequence
from bertgeom.sars_cov_2.genome.reference import data_path, reference_spike

DEV = data_path("genomes")  # the open developer genomes ship with the package


def test_analyse_demo_genome():
    rec, meta = load_demo_genomes()[1]
    vocab = KmerVocab.build([reference_spike()])
    res = analyse_sequence(rec, vocab=vocab)
    assert res.ok and res.error is None
    assert res.clade.cls == meta["class"] == "lambda"
    assert res.qc.verdict == "pass"
    assert len(res.kmers) == 425 and res.token_ids.shape == (512,) and 0 < res.unk_rate < 1
    assert "L452Q" in res.mutations.aa_names()
    paper = analyse_sequence(rec, representation="paper")
    assert len(paper.model_input) == 3822 - 21  # Lambda's 21-nt deletion removed


@pytest.mark.parametrize("bad", ["", "MFVFLVLLPLVSSQCVNLTTRTQLPP", "ACGT", "ACGTTGCA" * 200, b"\x00\x01"])
def test_never_raises(bad):
    res = analyse_sequence(bad if isinstance(bad, str) else bad.decode("latin-1"))
    assert not res.ok and res.error and res.error.endswith(".")


def test_not_covering_spike_and_record_error():
    from bertgeom.sars_cov_2.genome.reference import reference_sequence

    # a sequence without its spike is still analysed and placed (its mutations, clade and QC are
    # shown), but the gate makes no model call and says why in one sentence
    res = analyse_sequence(SequenceRecord("orf1", reference_sequence()[1000:5000], []))
    assert res.ok and not res.callable and res.error is None
    assert res.gate.verdict == "spike not read" and "does not cover the spike" in res.gate.reason
    # the reference's stretch 1001-5000 reads the same in B (19A) and A (19B): a tie, said in a note
    assert res.clade.clade in ("19A", "19B") and res.placement.distance == 0 and res.placement.region == "partial"
    assert res.placement.ties > 1 and any("equally near" in n for n in res.notes)
    out = list(analyse_many([RecordError("x", 0, "Record 'x' contains no sequence.")]))
    assert out[0].error == "Record 'x' contains no sequence."


def test_shipped_files_small_and_consistent():
    files = [p for sub in ("genomes", "definitions", "reference") for p in data_path(sub).iterdir() if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1_000_000
    demo = load_demo_genomes()
    assert [m["class"] for _, m in demo] == list(CLASSES)
    small = load_validation_small()
    counts = {c: sum(m["class"] == c for _, m in small) for c in CLASSES}
    assert all(1 <= n <= 5 for n in counts.values())


def test_split_rules_on_toy_rows():
    rows = [{"name": f"a{i}", "label": "Alpha"} for i in range(7)] + [{"name": f"g{i}",
                                                                       "label": "other_preVOC"} for i in range(4)]
    rows += [{"name": "u", "label": "unassigned"}]
    tr, va = split_real_genomes(rows)
    assert len([n for n in tr if n.startswith("a")]) == 3 and len([n for n in tr if n.startswith("g")]) == 2
    assert "u" not in tr + va and not set(tr) & set(va)
    assert split_real_genomes(list(reversed(rows))) == (tr, va)  # independent of row order
    assert split_real_genomes(rows, seed=1) != (tr, va)
    pd = pytest.importorskip("pandas")
    assert split_real_genomes(pd.DataFrame(rows)) == (tr, va)


def test_shipped_genomes_are_held_out():
    labels = read_labels(DEV / "open_genomes_dev_labels.tsv")
    split = split_real_genomes(labels)
    val = set(split.validation)
    by_cls = {}
    for r in labels:
        by_cls.setdefault(label_to_class(r["label"]), []).append(r["name"])
    assert set(by_cls) == set(CLASSES) | {None}
    for cls, names in by_cls.items():
        n_train = sum(n in set(split.train) for n in names)
        assert n_train == (len(names) // 2 if cls else 0)
    assert {r.name for r, _ in load_validation_small()} <= val
    assert {r.name for r, _ in load_demo_genomes()} <= val


def test_class_to_label_inverts_label_to_class_and_keeps_the_pre_voc_label():
    for cls in CLASSES:
        assert label_to_class(class_to_label(cls)) == cls
    assert class_to_label(None) == "unassigned" and label_to_class(class_to_label(None)) is None
    assert class_to_label("gh", "GH") == "GH" and class_to_label("gh", "other_preVOC") == "other_preVOC"
    assert class_to_label("gh", "Delta") == class_to_label("gh", "unassigned") == "other_preVOC"
    assert class_to_label("alpha", "GH") == "Alpha"
    with pytest.raises(ValueError):
        class_to_label("iota")


#: Labels the one-site clade rule got wrong, as the placement on Nextclade's tree reads them
#: (bertgeom/data/PROVENANCE.md): (name, old label, clade, lineage, new label).
RELABELLED = [
    ("England/QEUH-3267E648/2022", "Delta", "recombinant", "XBC.1", "Omicron"),  # its spike's class
    ("ON629031", "other_preVOC", "21L", "BA.2", "Omicron"),
    ("USA/CA-CDC-LC0024684/2021", "other_preVOC", "20I", "B.1.1.7", "Alpha"),
    ("USA/WA-UW-21051815536/2021", "other_preVOC", "20I", "B.1.1.7", "Alpha"),
    ("OU219033", "other_preVOC", "recombinant", "XA", "Alpha"),
    ("OU570677", "other_preVOC", "21I", "AY.68", "Delta"),
    ("OY532792", "other_preVOC", "recombinant", "GL.1", "Omicron"),
    ("USA/CA-CDC-LC0027675/2021", "other_preVOC", "21E", "P.3", "unassigned"),  # 52 % of its spike k-mers hold N
    ("USA/CA-CZB-1052/2020", "unassigned", "19A", "B", "other_preVOC"),
    ("Australia/VIC970/2020", "unassigned", "19A", "B", "other_preVOC"),
    ("Australia/VIC969/2020", "unassigned", "20C", "B.1", "other_preVOC"),
]


@pytest.mark.parametrize("name,old,clade,lineage,new", RELABELLED, ids=[r[0] for r in RELABELLED])
def test_shipped_labels_of_the_genomes_the_clade_rule_got_wrong(name, old, clade, lineage, new):
    row = {r["name"]: r for r in read_labels(DEV / "open_genomes_dev_labels.tsv")}[name]
    assert (row["nextclade_clade"], row["nextclade_lineage"], row["label"]) == (clade, lineage, new)
    assert row["recombinant"].startswith("yes: ") == (clade == "recombinant")


def test_shipped_labels_are_reproduced_from_the_placement(tmp_path):
    """``relabel_dev_genomes`` (run by the shipped-files build) on a copy of the shipped labels changes
    nothing, byte for byte: every label and placement column is what the placement gives today."""
    import shutil

    from bertgeom.sars_cov_2.genome.shipped_files import relabel_dev_genomes

    copy = tmp_path / "labels.tsv"
    shutil.copy(DEV / "open_genomes_dev_labels.tsv", copy)
    assert relabel_dev_genomes(DEV / "open_genomes_dev.fasta.xz", copy) == []
    assert copy.read_bytes() == (DEV / "open_genomes_dev_labels.tsv").read_bytes()


def test_relabelling_keeps_the_other_columns_and_the_pre_voc_label(tmp_path):
    from bertgeom.sars_cov_2.genome.fasta import iter_fasta_file
    from bertgeom.sars_cov_2.genome.shipped_files import relabel_dev_genomes

    recs = {r.name: r for r in iter_fasta_file(DEV / "open_genomes_dev.fasta.xz")
            if r.name in ("ON629031", "OU167955", "USA/CA-CZB-1136/2020")}
    fasta = tmp_path / "g.fasta"
    fasta.write_text("".join(f">{n}\n{r.sequence}\n" for n, r in recs.items()))
    labels = tmp_path / "labels.tsv"
    labels.write_text("name\tnextstrain_clade_by_rules\tlabel\tlength\n"
                      "ON629031\t20B\tother_preVOC\t1\nOU167955\t20I\tAlpha\t2\n"
                      "USA/CA-CZB-1136/2020\t20C\tGH\t3\nmissing\t\tBeta\t4\n")
    changes = relabel_dev_genomes(fasta, labels)
    assert changes == [("ON629031", "other_preVOC", "Omicron"), ("missing", "Beta", "unassigned")]
    rows = read_labels(labels)
    assert list(rows[0]) == ["name", "nextstrain_clade_by_rules", "nextclade_clade", "nextclade_lineage",
                             "recombinant", "label", "length"]
    assert [(r["nextstrain_clade_by_rules"], r["label"], r["length"]) for r in rows] == [
        ("20B", "Omicron", "1"), ("20I", "Alpha", "2"), ("20C", "GH", "3"), ("", "unassigned", "4")]
    assert rows[0]["nextclade_lineage"] == "BA.2" and rows[3]["nextclade_clade"] == ""
    assert relabel_dev_genomes(fasta, labels) == []


def test_load_dev_genomes():
    g = load_dev_genomes(DEV / "open_genomes_dev.fasta.xz", DEV / "open_genomes_dev_labels.tsv")
    assert len(g) == 567 and {x.cls for x in g} == set(CLASSES) | {None}
    assert all(len(x.sequence) > 28000 for x in g)


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="ACGTNacgtnRY>\n -", max_size=400))
def test_fuzz_pipeline_never_raises(text):
    res = analyse_sequence(text)
    assert res.ok or res.error


def test_no_streamlit_import():
    import subprocess
    import sys

    code = ("import sys, bertgeom.sars_cov_2.genome.pipeline, bertgeom.sars_cov_2.genome.synth, "
            "bertgeom.sars_cov_2.genome.dataset; print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
