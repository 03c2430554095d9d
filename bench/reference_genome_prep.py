"""Reference implementations of genome preparation, as they were before it was made cheaper (2026-12-02):
verbatim copies of the per-genome functions whose logic changed, kept so that the tests can hold the new
ones to them bit for bit (tests/test_genome_prep_reference.py) and bench/bench_classify.py
(``--prep-only``) can time old against new in the same run.

``reference_analyse_sequence`` is :func:`bertgeom.sars_cov_2.genome.pipeline.analyse_sequence` with
these copies in place of the changed functions: the mutation calls (per-gene numpy comparisons,
dataclass ``replace`` per mutation) and the parser's cleaner. The nearest clade by the definitions (a
Python loop over every clade's sites) and the gate's identity (``np.isin``) are held to their copies
one by one; the pipeline now places on Nextclade's tree and gates with the package's own functions
(issue 42), which are the same on both sides. The whole-genome alignment and the marker call are the package's own:
the alignment did not change, and the marker call's one change (each class's markers listed once per
table, ``MarkerTable.markers_of``) is held to the table's own listing by a test. Raw text is parsed with
``reference_clean_sequence`` (a set of every letter of the record, twice) in place of the parser's
cleaner.

Naming rules changed later are changed in both (2026-12-03: indels read where Nextclade places them,
residues a frameshifting deletion removes before the shifted frame, in-codon insertions named before
the residue), so the equality stays a check of the speed-up and not of an older convention.

Not imported by the package; bench/ and tests/ only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from bertgeom.sars_cov_2.genome.align import (
    AlignmentError,
    GenomeAlignment,
    SpikeCut,
    align_genome,
    cut_spike,
    nextclade_placement,
)
from bertgeom.sars_cov_2.genome.classes import clade_to_class
from bertgeom.sars_cov_2.genome.fasta import (
    _DIGIT_TABLE,
    _NUC_LETTERS,
    _PROTEIN_ALPHABET,
    _VALID,
    _WS_TABLE,
    MAX_RECORD_LEN,
    MIN_NUCLEOTIDE_SHARE,
    RecordError,
    SequenceInputError,
    SequenceRecord,
    _describe,
    _looks_like_prose,
    _plural,
    parse_single,
)
from bertgeom.sars_cov_2.genome.kmers import MAX_LENGTH, seq2kmer
from bertgeom.sars_cov_2.genome.mutations import (
    MISMATCH_WEIGHT,
    AaMutation,
    CladeCall,
    CladeDefinitions,
    GeneReport,
    MutationReport,
    NucMutation,
    _deletion_placement,
    _dom,
    called_share,
    frameshift_leading_deletions,
    frameshift_ranges,
    group_events,
    load_clade_definitions,
    nuc_deletion_name,
    nuc_insertion_name,
)
from bertgeom.sars_cov_2.genome.pipeline import GenomeAnalysis, gate_analysis, place_and_score
from bertgeom.sars_cov_2.genome.qc import genome_qc
from bertgeom.sars_cov_2.genome.tree import load_reference_tree
from bertgeom.sars_cov_2.genome.reference import (
    SPIKE_AA_LEN,
    SPIKE_END,
    SPIKE_START,
    aa_of_genome_pos,
    reference_sequence,
    translate,
    translate_codon,
)

log = logging.getLogger(__name__)


def reference_clean_sequence(raw: str, name: str = "sequence", max_len: int = MAX_RECORD_LEN) -> tuple[str, list[str]]:
    """Clean the sequence lines of one record: drop whitespace and digits, upper-case, U->T, remove
    gaps. Returns ``(sequence, notes)``; raises :class:`SequenceInputError` for non-nucleotide text."""
    notes: list[str] = []
    s = raw.translate(_WS_TABLE)
    no_digits = s.translate(_DIGIT_TABLE)
    if len(no_digits) < len(s):
        notes.append("digits (line numbers) were removed")
    s = no_digits.upper()
    if s.endswith("//"):  # GenBank record terminator
        s = s[:-2]
    n_gap = s.count("-") + s.count(".")
    if n_gap:
        s = s.replace("-", "").replace(".", "")
        notes.append(f"{_plural(n_gap, 'alignment gap character')} ('-' or '.') removed")
    if s.endswith("*"):  # a trailing stop symbol, as some tools write
        s = s.rstrip("*")
        notes.append("a trailing '*' was removed")
    if not s:
        raise SequenceInputError(f"Record '{name}' contains no sequence.")
    if len(s) > max_len:
        raise SequenceInputError(f"Record '{name}' is {len(s):,} characters long, more than the limit of {max_len:,}.")
    distinct = set(s)
    if len(distinct) > 40:
        raise SequenceInputError(f"Record '{name}' is not a nucleotide sequence "
                                 f"(it uses {len(distinct)} different characters).")
    counts = {c: s.count(c) for c in distinct}
    nuc = sum(counts.get(c, 0) for c in _NUC_LETTERS)
    if nuc < MIN_NUCLEOTIDE_SHARE * len(s):
        if distinct <= _VALID | {"U", "X"}:  # every letter is a nucleotide code: ambiguity codes, not protein
            raise SequenceInputError(
                f"Record '{name}' is written mostly in IUPAC ambiguity codes (R, Y, K, M...): only "
                f"{nuc / len(s):.0%} of its letters are A/C/G/T/U/N, too few to read its variant."
            )
        if _looks_like_prose(raw):
            raise SequenceInputError(
                f"Record '{name}' looks like ordinary text (words, not sequence letters); paste a genome or spike "
                "nucleotide sequence (A/C/G/T), or pick an English model in the sidebar to analyse a sentence."
            )
        if len(s) >= 20 and distinct <= _PROTEIN_ALPHABET:
            raise SequenceInputError(
                f"Record '{name}' looks like a protein sequence; paste the nucleotide (A/C/G/T) sequence instead."
            )
        bad = next((c for c in s if c not in _VALID), None)
        what = f", for example {_describe(bad)}" if bad is not None else ""
        raise SequenceInputError(f"Record '{name}' is not a nucleotide sequence (too few A/C/G/T letters{what}).")
    if counts.get("U"):
        notes.append("RNA input: U read as T" if not counts.get("T") else f"{_plural(counts['U'], 'U')} read as T")
        s = s.replace("U", "T")
    if counts.get("X"):
        notes.append(f"{_plural(counts['X'], 'X')} read as N")
        s = s.replace("X", "N")
    if not _VALID.issuperset(set(s)):
        bad = next(c for c in s if c not in _VALID)
        raise SequenceInputError(f"Record '{name}' contains {_describe(bad)}, which is not a nucleotide (IUPAC) code.")
    n_amb = len(s) - sum(counts.get(c, 0) for c in "ACGTUNX")
    if n_amb:
        notes.append(f"{_plural(n_amb, 'IUPAC ambiguity code')} kept")
    return s, notes


_ACGT = np.frombuffer(b"ACGT", dtype=np.uint8)


def _plain(s: str) -> bool:
    return not s.strip("ACGTN-")


def _clades_of_name(name: str, defs: CladeDefinitions) -> tuple[str, ...]:
    if name[:1] in "ACGT" and name[-1:] in "ACGT" and name[1:-1].isdigit():
        return defs.defining_clades(int(name[1:-1]), name[-1])
    return ()


def _base_at(text: str, offset: int, pos: int) -> str:
    """The base of an aligned text (starting at genome ``offset``) at genome ``pos`` (N outside it)."""
    i = pos - offset
    return text[i] if 0 <= i < len(text) else "N"


def reference_call_mutations(aln: GenomeAlignment | SpikeCut, defs: CladeDefinitions | None = None,
                   cut: SpikeCut | None = None) -> MutationReport:
    """Nucleotide mutations and every gene's amino-acid changes of an alignment (whole genome, or a
    spike cut: gene S only); ``cut``: the genome's spike cut when the caller already has it."""
    defs = defs or load_clade_definitions()
    ref = reference_sequence()
    if isinstance(aln, GenomeAlignment):
        cut = cut or cut_spike(aln)
        text, offset, spike_only, covered = aln.aligned, 1, False, aln.covered
    else:
        cut = aln
        text, offset, spike_only, covered = aln.aligned, SPIKE_START, True, aln.covered_mask()
    # the naming step added with Nextclade's indel places (2026-12-03), shared with the package
    text, inss, dels = nextclade_placement(text, covered, aln.insertions, aln.deletions, offset)
    q = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    r = np.frombuffer(ref[offset - 1 : offset - 1 + len(text)].encode("ascii"), dtype=np.uint8)
    idx = np.flatnonzero((q != r) & np.isin(q, _ACGT))

    from bertgeom.sars_cov_2.genome.genes import load_genes

    genes = load_genes()
    examined = ["S"] if spike_only else list(genes)
    gene_aa: dict[str, tuple[list[AaMutation], dict[int, str]]] = {}
    for g in examined:
        gene = genes[g]
        gtext = text[gene.start - offset : gene.end - offset + 1]
        gene_aa[g] = reference_gene_aa_mutations(gene, gtext, dels, inss)
    codon_aa = gene_aa["S"][1]
    nuc: list[NucMutation] = []
    for i in idx.tolist():
        pos = i + offset
        alt = chr(q[i])
        aa = aa_of_genome_pos(pos)
        aa = aa if aa is not None and aa <= SPIKE_AA_LEN else None
        fine, coarse = _dom(aa)
        nuc.append(NucMutation("sub", pos, chr(r[i]), alt, f"{chr(r[i])}{pos}{alt}", aa, fine, coarse,
                               codon_aa.get(aa), defs.defining_clades(pos, alt)))
    for p, n in dels:
        aa = aa_of_genome_pos(p)
        aa = aa if aa is not None and aa <= SPIKE_AA_LEN else None
        fine, coarse = _dom(aa)
        name = nuc_deletion_name(p, n)
        nuc.append(NucMutation("del", p, ref[p - 1 : p - 1 + n], "", name, aa, fine, coarse, codon_aa.get(aa)))
    for p, b in inss:
        aa = aa_of_genome_pos(p) if SPIKE_START <= p < SPIKE_END else None
        fine, coarse = _dom(aa)
        nuc.append(NucMutation("ins", p, "", b, nuc_insertion_name(p, b), aa, fine, coarse, codon_aa.get(aa)))
    nuc.sort(key=lambda m: (m.pos, m.kind))

    # attach nucleotide names to amino-acid changes, gene by gene
    reports: dict[str, GeneReport] = {}
    events_of_nuc: dict[str, list[str]] = {}
    for g in examined:
        gene = genes[g]
        by_codon: dict[int, list[str]] = {}
        for m in nuc:
            first = m.pos + 1 if m.kind == "ins" else m.pos
            last = m.pos + max(len(m.ref), 1) - 1 if m.kind == "del" else first
            if m.kind == "ins":
                first = last = m.pos  # the codon holding the base before the insertion
            if last < gene.start or first > gene.end:
                continue
            c0 = gene.codon_of(max(first, gene.start))
            c1 = gene.codon_of(min(last, gene.end)) or gene.n_codons
            if c0 is None:
                continue
            for c in range(c0, c1 + 1):
                by_codon.setdefault(c, []).append(m.name)
        full = []
        shifting = [m for m in nuc if m.kind in ("del", "ins") and (len(m.ref) + len(m.alt)) % 3]
        for m in gene_aa[g][0]:
            if m.kind == "fs":  # the indels that open or close the shifted range
                lo, hi = gene.codon_span(max(m.pos - 1, 1))[0], gene.codon_span(m.end)[1]
                names = tuple(x.name for x in shifting if x.pos <= hi and lo <= x.pos + max(len(x.ref), 1) - 1)
            else:
                names = tuple(by_codon.get(m.pos, ()))
            clades = tuple(sorted({c for n in names for c in _clades_of_name(n, defs)}))
            full.append(replace(m, nuc=names, defining_clades=clades, gene=g))
        events = group_events(g, full)
        for e in events:
            for n in e.nuc:
                events_of_nuc.setdefault(n, []).append(e.qualified)
        gtext = text[gene.start - offset : gene.end - offset + 1]
        called, _ = called_share(gtext)
        fs = [m.name for m in full if m.kind == "fs"]
        reports[g] = GeneReport(g, full, events, called, gene.length, fs, [m.name for m in full if m.kind == "stop"])
    nuc = [replace(m, aa_changes=tuple(events_of_nuc.get(m.name, ()))) for m in nuc]
    aa_full = reports["S"].aa

    s_text = cut.aligned
    amb = [SPIKE_START + i for i, c in enumerate(s_text) if c not in "ACGTN-"] if not _plain(s_text) else []
    return MutationReport(nuc, aa_full, spike_only, amb, reports)



def reference_gene_aa_mutations(gene, text: str, deletions: Iterable[tuple[int, int]],
                                insertions: Iterable[tuple[int, str]]) -> tuple[list[AaMutation], dict[int, str]]:
    """Amino-acid changes of one gene from its aligned text (``gene.length`` characters in reference
    coordinates, ``-`` deleted, ``N`` missing) and the genome indels touching it; with
    ``{residue: name}`` of the change at each residue. Names follow Nextclade (module docstring)."""
    s = text
    g0, g1 = gene.start, gene.end
    ref_s = reference_sequence()[g0 - 1 : g1]
    prot = gene.protein
    n_aa = len(prot)
    spike = gene.name == "S"
    handled: set[int] = set()  # 0-based codon indices dealt with by indel logic
    out: list[AaMutation] = []

    def add(kind: str, pos: int, ref_aa: str, alt: str, name: str) -> None:
        fine, coarse = _dom(pos) if spike else (None, None)
        out.append(AaMutation(kind, pos, ref_aa, alt, name, fine, coarse, gene=gene.name))

    shift_begins = {begin for begin, _ in frameshift_ranges(gene, deletions, insertions)}
    for p, n in deletions:
        a, b = max(p, g0), min(p + n - 1, g1)
        if a > b:
            continue
        p, n = a, b - a + 1
        s0 = p - g0
        e0 = s0 + n
        cs, ce = s0 // 3, min(-(-e0 // 3), n_aa)
        if cs >= n_aa:
            continue
        if n % 3:  # named below as the codon range it shifts, after the residues it deletes first
            for i in frameshift_leading_deletions(s0, n, shift_begins, n_aa):
                add("del", i + 1, prot[i], "-", f"{prot[i]}{i + 1}-")
            handled.update(range(cs, ce))
            continue
        k = n // 3
        region = s[3 * cs : 3 * ce]
        qbases = region.replace("-", "")
        m = ce - cs
        if len(qbases) != 3 * (m - k):  # another indel in the same codons: name per codon
            continue
        q_aas = translate(qbases)
        best_j = _deletion_placement(prot[cs:ce], q_aas, k)
        rest_idx = [cs + i for i in range(m) if not best_j <= i < best_j + k]
        for i in range(cs + best_j, cs + best_j + k):
            add("del", i + 1, prot[i], "-", f"{prot[i]}{i + 1}-")
        for ci, qa in zip(rest_idx, q_aas):
            if qa not in ("X", prot[ci]):
                kind = "stop" if qa == "*" else "sub"
                add(kind, ci + 1, prot[ci], qa, f"{prot[ci]}{ci + 1}{qa}")
        handled.update(range(cs, ce))

    for p, b in insertions:
        if not g0 <= p < g1:
            continue
        o = p - g0  # 0-based gene offset of the base before the insertion
        L = len(b)
        c = o // 3
        if c >= n_aa:
            continue
        if L % 3:  # named below as the codon range it shifts
            handled.add(c)
            continue
        if (o + 1) % 3 == 0:  # between codons c and c+1
            add("ins", c + 1, "", translate(b), f"{c + 1}:{translate(b)}")
            continue
        codon = s[3 * c : 3 * c + 3]
        cut_at = o % 3 + 1
        aas = translate(codon[:cut_at] + b + codon[cut_at:])
        r = prot[c]
        if aas[0] == r:
            add("ins", c + 1, "", aas[1:], f"{c + 1}:{aas[1:]}")
        elif aas[-1] == r:
            add("ins", c, "", aas[:-1], f"{c}:{aas[:-1]}")
        else:  # the naming changed with the package's (2026-12-03): inserted before, last residue substituted
            add("ins", c, "", aas[:-1], f"{c}:{aas[:-1]}")
            if aas[-1] != "X":
                add("stop" if aas[-1] == "*" else "sub", c + 1, r, aas[-1], f"{r}{c + 1}{aas[-1]}")
        handled.add(c)

    # codons read out of frame (after a frameshifting indel, up to one that restores the frame):
    # their residues are not called, as Nextclade masks a frameshift's range; each range is one
    # frameshift named by its codons (a compensated pair of indels is one range)
    for begin, end in frameshift_ranges(gene, deletions, insertions):
        handled.update(range(begin, min(end, n_aa)))
        ref_aa = prot[begin] if begin < n_aa else "*"
        fine, coarse = _dom(begin + 1) if spike else (None, None)
        out.append(AaMutation("fs", begin + 1, ref_aa, "fs", f"{begin + 1}-{end}", fine, coarse, gene=gene.name,
                              end=end))

    # plain codon substitutions (vectorised pre-filter on differing codons)
    q = np.frombuffer(s[: 3 * n_aa].encode("ascii"), dtype=np.uint8).reshape(-1, 3)
    rr = np.frombuffer(ref_s[: 3 * n_aa].encode("ascii"), dtype=np.uint8).reshape(-1, 3)
    diff = np.flatnonzero((q != rr).any(axis=1) & ~(q == ord("N")).any(axis=1))
    for c in diff.tolist():
        if c in handled:
            continue
        codon = s[3 * c : 3 * c + 3]
        if "-" in codon:
            continue  # part of a deletion already named
        qa = translate_codon(codon)
        if qa in ("X", prot[c]):
            continue
        kind = "stop" if qa == "*" else "sub"
        add(kind, c + 1, prot[c], qa, f"{prot[c]}{c + 1}{qa}")

    order = {"del": 0, "sub": 1, "stop": 1, "fs": 1, "ins": 2}
    out.sort(key=lambda m: (m.pos, order[m.kind]))
    codon_aa: dict[int, str] = {}
    for m in out:
        if m.kind != "ins":
            codon_aa.setdefault(m.pos, m.name)
    return out, codon_aa


# --------------------------------------------------------------------------------------------
# Class-level helpers


def reference_nearest_clade(aln: GenomeAlignment | SpikeCut, classes: Iterable[str] | None = None,
                  defs: CladeDefinitions | None = None, mismatch_weight: int = MISMATCH_WEIGHT) -> CladeCall:
    """The deepest clade the genome is consistent with: score = matches - ``mismatch_weight`` x
    mismatches over the clade's inherited sites (N or uncovered sites count neither way). Ties go to
    a clade one of whose own sites (those its parent lacks) the genome carries (a descendant whose
    own sites are all N, e.g. outside a spike-only input, is not credited), then to the deeper clade,
    and between siblings of equal depth (23A and
    23D, whose own sites an XBB.1.9 genome all carries: F486P and ORF8:G8* arose in both) to the
    later-designated one, the more specific name (Nextstrain numbers clades in order of designation)."""
    defs = defs or load_clade_definitions()
    if isinstance(aln, GenomeAlignment):
        text, offset = aln.aligned, 1
    else:
        text, offset = aln.aligned, SPIKE_START
    allowed = set(classes) if classes is not None else None
    best = None
    for order, c in enumerate(defs.clades):
        cls = clade_to_class(c)
        if allowed is not None and cls not in allowed:
            continue
        m = mm = miss = 0
        for p, b in defs.inherited(c).items():
            i = p - offset
            base = text[i] if 0 <= i < len(text) else "N"
            if base not in "ACGT":
                miss += 1
            elif base == b:
                m += 1
            else:
                mm += 1
        own = defs.own[c]
        supported = not own or any(_base_at(text, offset, p) == b for p, b in own.items())
        key = (m - mismatch_weight * mm, supported, defs.depth(c), order)
        if best is None or key > best[0]:
            best = (key, CladeCall(c, cls, defs.display.get(c, c), m, mm, miss))
    if best is None:
        raise ValueError("no clade in the requested classes")
    return best[1]



def reference_identity_to_reference(aligned: str) -> tuple[float, int]:
    """``(identity, called)``: share of the A/C/G/T positions of a reference-coordinate text (starting
    at genome position 1) that equal the reference base, and how many such positions there are."""
    q = np.frombuffer(aligned.encode("ascii"), dtype=np.uint8)
    r = np.frombuffer(reference_sequence()[: len(aligned)].encode("ascii"), dtype=np.uint8)
    called = np.isin(q, np.frombuffer(b"ACGT", dtype=np.uint8))
    n = int(called.sum())
    return (float((q[called] == r[called]).mean()) if n else 0.0), n



def reference_parse_single(text: str) -> SequenceRecord:
    """``parse_single`` with :func:`reference_clean_sequence` in place of the parser's cleaner (swapped
    in for the call: bench and tests only, one thread at a time)."""
    from bertgeom.sars_cov_2.genome import fasta

    now = fasta.clean_sequence
    fasta.clean_sequence = reference_clean_sequence
    try:
        return parse_single(text)
    finally:
        fasta.clean_sequence = now


def reference_analyse_sequence(record: SequenceRecord | RecordError | str, vocab=None,
                               cls: str | None = None, representation: str = "aligned",
                               max_length: int = MAX_LENGTH) -> GenomeAnalysis:
    """Reference copy of ``analyse_sequence``: align, cut the spike, call mutations, place on the
    reference tree, QC, tokenise and gate one record.

    * ``record``: a parsed :class:`SequenceRecord`, a :class:`RecordError` from
      :func:`~bertgeom.sars_cov_2.genome.fasta.iter_fasta_file`, or raw text (parsed as one sequence);
    * ``vocab``: when given, ``token_ids``/``unk_rate`` are filled (``[CLS]`` k-mers ``[SEP]`` ``[PAD]``);
    * ``cls``: the predicted class to judge private mutations against (default: nearest clade's);
    * ``representation``: ``"aligned"`` (default, 3,822 reference-coordinate characters) or
      ``"paper"`` (deletions removed, insertions kept, as the paper's pipeline).
    """
    if isinstance(record, RecordError):
        return GenomeAnalysis(name=record.name, error=record.message)
    if isinstance(record, str):
        try:
            record = reference_parse_single(record)
        except SequenceInputError as exc:
            return GenomeAnalysis(name="sequence", error=str(exc))
    res = GenomeAnalysis(name=record.name, notes=list(record.notes), input_length=len(record.sequence))
    try:
        aln = align_genome(record.sequence)
        res.alignment = aln
        cut = cut_spike(aln)
        res.notes += [n for n in cut.notes if n not in res.notes]
        res.spike = cut
        res.mutations = reference_call_mutations(aln, cut=cut)
        res.genome_qc = genome_qc(aln, res.mutations)
        place_and_score(res, aln, cut, load_reference_tree(), cls)
        text = cut.aligned if representation == "aligned" else cut.paper_sequence()
        res.model_input = text
        res.kmers = seq2kmer(text)
        if vocab is not None:
            res.token_ids, res.unk_rate = vocab.encode(text, max_length=max_length)
        if representation == "paper" and len(res.kmers) > max_length - 2:
            res.notes.append(f"{len(res.kmers)} k-mers: truncated to {max_length - 2} as in the paper")
        gate_analysis(res, record.sequence, vocab)
    except (AlignmentError, SequenceInputError) as exc:
        res.error = str(exc)
    except Exception as exc:  # never raise for a bad sequence
        log.exception("analyse_sequence failed for %s", record.name)
        res.error = f"The sequence could not be analysed ({type(exc).__name__}: {exc})."
    return res
