"""Build the shipped data files from the open developer genomes: their labels (from the placement on
Nextclade's reference tree), the demo genomes, the small validation set and the training spike
profiles.

These builders run the genome pipeline over the developer genomes, so they sit above both
:mod:`.dataset` (loading and the held-out split) and :mod:`.pipeline`; nothing at run time imports
them. Rebuild with::

    python -m bertgeom.sars_cov_2.genome.shipped_files build bertgeom/data

References
----------
* Nextstrain clade definitions and open INSDC genomes: ``bertgeom/data/PROVENANCE.md``.
"""

from __future__ import annotations

import csv
import io
import lzma
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .classes import CLASSES, class_to_label
from .dataset import (
    PROFILE_MIN_FREQ,
    SMALL_PER_CLASS,
    LabelledGenome,
    _key,
    load_dev_genomes,
    read_labels,
    split_real_genomes,
)
from .fasta import SequenceRecord, iter_fasta_file
from .reference import SPIKE_START, data_path

#: The columns the placement writes into ``open_genomes_dev_labels.tsv`` (before ``label``, which
#: is derived from them).
PLACEMENT_COLUMNS = ("nextclade_clade", "nextclade_lineage", "recombinant")


def placement_columns(analysis, previous_label: str = "") -> dict[str, str]:
    """The labels file's placement columns and ``label`` for one analysed genome
    (:func:`~.pipeline.analyse_sequence`).

    * ``nextclade_clade`` / ``nextclade_lineage``: the nearest node of Nextclade's reference tree
      (``recombinant`` as the clade of a designated recombinant);
    * ``recombinant``: the batch table's column (:func:`~.pipeline.recombinant_cell`): "" or
      ``yes: designated XA`` / ``yes: B.1.177.18 / B.1.1.7 (breakpoint 21255-22227)``;
    * ``label``: the placement's 8-class label (:attr:`~.tree.Placement.cls`, the WHO name of the
      nearest node; for a designated recombinant the class of its spike's nearest non-recombinant
      node, which is what a spike-only model can call) in the file's vocabulary
      (:func:`~.classes.class_to_label`: pre-VOC keeps ``GH`` / ``other_preVOC`` from
      ``previous_label``); ``unassigned`` where the gate does not pass (the model cannot read the
      spike, or the genome could not be analysed).
    """
    from .pipeline import recombinant_cell

    pl = analysis.placement if analysis is not None and analysis.error is None else None
    passed = pl is not None and analysis.gate is not None and analysis.gate.passed
    return {"nextclade_clade": pl.clade if pl else "", "nextclade_lineage": pl.lineage if pl else "",
            "recombinant": recombinant_cell(pl), "label": class_to_label(pl.cls if passed else None, previous_label)}


def relabel_dev_genomes(path_fasta: str | os.PathLike, path_labels: str | os.PathLike,
                        tree=None) -> list[tuple[str, str, str]]:
    """Re-derive ``label`` and the placement columns of every row of the labels TSV from the genome
    it names (:func:`placement_columns`), keeping every other column (``nextstrain_clade_by_rules``,
    the old rule-based clade, included); the file is rewritten atomically. A row whose genome is not
    in the FASTA becomes ``unassigned``. Returns ``(name, old label, new label)`` of each change;
    a second run changes nothing."""
    from .pipeline import analyse_sequence

    with open(path_labels, newline="") as fh:
        header = next(csv.reader(fh, delimiter="\t"))
    columns = [c for c in header if c not in PLACEMENT_COLUMNS]
    at = columns.index("label") if "label" in columns else len(columns)
    columns[at:at] = PLACEMENT_COLUMNS
    if "label" not in columns:
        columns.append("label")
    rows = read_labels(path_labels)
    records = {r.name: r for r in iter_fasta_file(path_fasta) if isinstance(r, SequenceRecord)}
    changes = []
    for r in rows:
        rec = records.get(r["name"])
        new = placement_columns(analyse_sequence(rec, tree=tree) if rec is not None else None, r.get("label", ""))
        if new["label"] != r.get("label", ""):
            changes.append((r["name"], r.get("label", ""), new["label"]))
        r.update(new)
    write_tsv(Path(path_labels), rows, columns)
    return changes

def validation_small_names(genomes: list[LabelledGenome], seed: int = 0, per_class: int = SMALL_PER_CLASS) -> list[str]:
    """The ``validation_small`` subset: per class the first ``per_class`` validation genomes in hash
    order whose spike does not fail QC for missing data (N share <= ``qc.N_SHARE_FAIL``)."""
    from .pipeline import analyse_sequence

    split = split_real_genomes(genomes, seed)
    val = set(split.validation)
    by_name = {g.name: g for g in genomes}
    out = []
    for cls in CLASSES:
        names = sorted((g.name for g in genomes if g.cls == cls and g.name in val), key=lambda n: _key(seed, n))
        picked = 0
        for n in names:
            if picked >= per_class:
                break
            res = analyse_sequence(SequenceRecord(n, by_name[n].sequence, []))
            checks = res.qc.checks if res.qc is not None else None
            if checks is not None and checks.get("missing data") != "fail" and checks.get("coverage") != "fail":
                out.append(n)
                picked += 1
    return out


def demo_genome_names(genomes: list[LabelledGenome], seed: int = 0) -> list[str]:
    """One demo genome per class from the validation split: near-complete (>= 29,000 nt), carrying
    its class's core defining spike mutations, and best by (spike QC verdict, N in the spike, N in
    the genome, ambiguous spike bases, no INSDC accession, split hash)."""
    from .mutations import class_defining_mutations
    from .pipeline import analyse_sequence

    from .qc import VERDICTS

    rank = {v: i for i, v in enumerate(VERDICTS)}
    val = set(split_real_genomes(genomes, seed).validation)
    out = []
    for cls in CLASSES:
        core = [m.name for m in class_defining_mutations(cls)]
        best = None
        for g in genomes:
            if g.cls != cls or g.name not in val or len(g.sequence) < 29000:
                continue
            res = analyse_sequence(SequenceRecord(g.name, g.sequence, []), cls=cls)
            if res.qc is None or not all(res.mutations.has(n) for n in core):
                continue
            key = (rank[res.qc.verdict], res.qc.n_count, g.n_count, res.qc.ambiguous, g.insdc_accession == "",
                   _key(seed, g.name))
            if best is None or key < best[0]:
                best = (key, g.name)
        if best is None:  # pragma: no cover - every class has a usable genome in the developer set
            raise RuntimeError(f"no demo genome for class {cls}")
        out.append(best[1])
    return out


def profile_aa_name(kind: str, pos: int, ref: str, alt: str) -> str:
    """The amino-acid name of one indel as every table of the project writes it (Nextclade's form on
    the reference background: ``E156G F157- R158-``, one deletion per residue). Substitutions
    keep the name read in their genomes (a codon with two changes reads as one amino-acid change)."""
    from .markers import _aa_name

    return _aa_name(kind, pos, ref, alt)


def spike_profiles(genomes: Iterable[LabelledGenome], min_freq: float = PROFILE_MIN_FREQ) -> list[dict[str, Any]]:
    """Frequencies of spike mutations (substitutions and indels) per class and per Nextstrain clade.

    A substitution's frequency is over the genomes whose base at that site is called (not N); an
    indel's over all genomes of the group. Used by QC (expected mutations of a class) and by
    :mod:`.synth` (realistic class mutations missing from the sparse clade definitions). Build it
    from the *training* split only.
    """
    from .align import align_spike

    groups: dict[tuple[str, str], list] = defaultdict(list)
    for g in genomes:
        if g.cls is None:
            continue
        try:
            cut = align_spike(g.sequence)
        except ValueError:
            continue
        groups[("class", g.cls)].append(cut)
        if g.clade:
            groups[("clade", g.clade)].append(cut)
    from .mutations import call_mutations

    rows = []
    for (gtype, gname), cuts in sorted(groups.items()):
        n = len(cuts)
        counts: Counter = Counter()
        info = {}
        called: Counter = Counter()
        for cut in cuts:
            rep = call_mutations(cut, indel_places="alignment")  # where the text has them, as the tables read
            for m in rep.spike_nucleotide:
                key = (m.kind, m.pos, m.ref, m.alt)
                counts[key] += 1
                info[key] = m
        for key, c in counts.items():
            kind, pos, ref, alt = key
            if kind == "sub":
                den = sum(1 for cut in cuts if cut.aligned[pos - SPIKE_START] in "ACGT")
            else:
                den = n
            freq = c / max(den, 1)
            if freq >= min_freq:
                m = info[key]
                rows.append(dict(group_type=gtype, group=gname, n_genomes=n, mutation=m.name, kind=kind,
                                 pos=pos, ref=ref, alt=alt,
                                 aa=(m.aa or "") if kind == "sub" else profile_aa_name(kind, pos, ref, alt),
                                 freq=round(freq, 3)))
    rows.sort(key=lambda r: (r["group_type"], r["group"], r["pos"], r["kind"]))
    return rows


PROFILE_COLUMNS = ("group_type", "group", "n_genomes", "mutation", "kind", "pos", "ref", "alt", "aa", "freq")


def write_tsv(path: Path, rows: list[dict[str, Any]], columns: Iterable[str]) -> None:
    """Write ``rows`` as a TSV with ``columns`` (missing values -> ""), atomically: a reader (or a
    build that stops half-way) sees the old file or the whole new one."""
    from bertgeom.safety import write_bytes_atomically

    columns = list(columns)
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([r.get(c, "") for c in columns])
    write_bytes_atomically(path, buf.getvalue().encode())


def _write_fasta(fh, name: str, seq: str, width: int = 80) -> None:
    fh.write(f">{name}\n")
    for i in range(0, len(seq), width):
        fh.write(seq[i : i + width] + "\n")


GENOME_COLUMNS = ("name", "class", "insdc_accession", "date", "country", "clade", "source")


def build_shipped_files(shared_data: str | os.PathLike, seed: int = 0, relabel: bool = True,
                        log=print) -> dict[str, Path]:
    """Re-derive the developer genomes' labels from their placement (``relabel``; the labels TSV
    beside the FASTA in ``shared_data`` is rewritten, :func:`relabel_dev_genomes`), then write demo
    genomes, validation_small and the training spike profiles into ``bertgeom/data``; ``log`` gets
    one line per changed label."""
    shared = Path(shared_data)
    fasta, labels = shared / "genomes" / "open_genomes_dev.fasta.xz", shared / "genomes" / "open_genomes_dev_labels.tsv"
    if relabel:
        changes = relabel_dev_genomes(fasta, labels)
        log(f"labels from the placement: {len(changes)} changed")
        for name, old, new in changes:
            log(f"  {name}: {old} -> {new}")
    genomes = load_dev_genomes(fasta, labels)
    by_name = {g.name: g for g in genomes}
    split = split_real_genomes(genomes, seed)
    out_dir = data_path("genomes")
    out_dir.mkdir(parents=True, exist_ok=True)

    def meta(g: LabelledGenome) -> dict[str, str]:
        return {"name": g.name, "class": g.cls or "", "insdc_accession": g.insdc_accession, "date": g.date,
                "country": g.country, "clade": g.clade, "source": g.source}

    # profiles first: QC (used to pick the demo genomes) reads them
    train = set(split.train)
    prof = spike_profiles([g for g in genomes if g.name in train])
    prof_path = data_path("definitions", "spike_profiles_train.tsv")
    write_tsv(prof_path, prof, PROFILE_COLUMNS)
    from . import mutations

    mutations.load_spike_profiles.cache_clear()
    mutations.class_expected_sites.cache_clear()

    demo = demo_genome_names(genomes, seed)
    with open(out_dir / "demo_genomes.fasta", "w") as fh:
        for n in demo:
            _write_fasta(fh, n, by_name[n].sequence)
    write_tsv(out_dir / "demo_genomes.tsv", [meta(by_name[n]) for n in demo], GENOME_COLUMNS)

    small = validation_small_names(genomes, seed)
    with lzma.open(out_dir / "validation_small.fasta.xz", "wt", preset=9 | lzma.PRESET_EXTREME) as fh:
        for n in small:
            _write_fasta(fh, n, by_name[n].sequence)
    write_tsv(out_dir / "validation_small.tsv", [meta(by_name[n]) for n in small], GENOME_COLUMNS)

    return {"labels": labels, "demo": out_dir / "demo_genomes.fasta",
            "validation_small": out_dir / "validation_small.fasta.xz", "profiles": prof_path}


if __name__ == "__main__":  # pragma: no cover
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: python -m bertgeom.sars_cov_2.genome.shipped_files build bertgeom/data  "
                 "(a folder holding genomes/open_genomes_dev.*)")
    for k, v in build_shipped_files(sys.argv[2]).items():
        print(k, v, v.stat().st_size)
