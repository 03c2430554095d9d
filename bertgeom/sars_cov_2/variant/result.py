"""What the Variant Classifier reports for one genome, as data (no UI): the spike mutations
against the predicted class's defining ones, which token each mutation falls in, the placement on
Nextclade's reference tree (its sentences, its marks along the genome), and the downloadable result
with its manifest."""

from __future__ import annotations

from dataclasses import dataclass

from bertgeom.version import __version__
from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY, CLASSES


def defining_flag(pred: str) -> str:
    """Column name that marks the characteristic mutations of the predicted class."""
    return f"characteristic of {CLASS_DISPLAY.get(pred, pred)}"


def _events(report) -> list[dict]:
    """The spike amino-acid changes as events, one per table row, named as the table and Nextclade name
    them (``S:N501Y``; one ``S:H69-`` per deleted residue; ``S:214:EPE``; a frameshift's codon range)."""
    from bertgeom.sars_cov_2.genome.reference import readable_region

    return [{"kind": m.kind, "start": m.pos, "end": m.end or m.pos, "name": m.qualified, "nuc": list(m.nuc),
             "domain": readable_region(m.pos)} for m in report.amino_acid]


def mutation_events(report) -> list[dict]:
    """The spike's amino-acid events as the mutation table names them (``S:N501Y``, ``S:H69-``), each
    with ``name`` and its nucleotide changes ``nuc``: what the what-if lists too, so the two use one
    name for one change (residues deleted by one deletion share its nucleotides and become one
    what-if entry, ``S:H69- + S:V70-``)."""
    return _events(report)


def mutation_rows(analysis, pred: str, rule_call: str | None = None, gene: str = "S") -> tuple[list[dict], list[str]]:
    """One row per mutation event of ``gene`` (substitution, grouped deletion, insertion, frameshift,
    stop; ``"nuc"``: the nucleotide changes that change no amino acid), read from the analysis's one
    table (:func:`bertgeom.sars_cov_2.genome.pipeline.mutation_table`): its nucleotide changes, the spike domain,
    the classes carrying exactly that change, whether it characterises ``pred``, and whether it is
    *private* (differs from the nearest node of Nextclade's tree: the rows QC's private count counts); and the
    characteristic mutations of ``pred`` (and of ``rule_call`` when it differs) that are missing,
    with why: the reference or another amino acid is read there, or the site is not covered (N)."""
    from bertgeom.sars_cov_2.genome.markers import ABSENT, MISSING, load_marker_table, marker_state
    from bertgeom.sars_cov_2.genome.pipeline import mutation_table
    from bertgeom.sars_cov_2.genome.reference import readable_region

    table = load_marker_table()
    flag = defining_flag(pred)
    col = private_column(analysis)
    rows = []
    for r in mutation_table(analysis):
        if r["gene"] != gene:
            continue
        owners = list(r["carried by"])
        row = {"mutation": r["mutation"] if gene == "nuc" else f"{gene}:{r['mutation']}",
               "nucleotide": r["nucleotides"].replace(" ", ", ")}
        if gene == "S":
            row["domain"] = readable_region(r["position"])
        row.update({flag: "yes" if pred in owners else "",
                    "carried by": ", ".join(CLASS_DISPLAY.get(c, c) for c in owners),
                    col: r["private"]})
        rows.append(row)
    missing = []
    if gene == "S":
        aligned, insertions = analysis.spike.aligned, analysis.spike.insertions
        for cls in dict.fromkeys([pred] + ([rule_call] if rule_call and rule_call != pred else [])):
            if cls not in CLASSES:  # a custom model's own label: no characteristic mutations to miss
                continue
            for m in table.of(cls):
                state = marker_state(m, aligned, insertions)
                if state in (ABSENT, MISSING):
                    why = "not covered (N)" if state == MISSING else "reference or another change"
                    missing.append(f"{m.label} ({m.nucleotides or m.name}; {CLASS_DISPLAY.get(cls, cls)}: {why})")
    return rows, missing


def private_column(analysis) -> str:
    """The name of the table column that marks private rows: it names the lineage of the nearest node
    of Nextclade's tree, which "private" is judged against (as Nextclade's privateNucMutations)."""
    pl = getattr(analysis, "placement", None)
    return f"private (vs. node {pl.lineage or pl.clade})" if pl is not None else "private (vs. nearest node)"


def qc_score_shown(score: float) -> float:
    """A QC score as every screen shows it (one decimal, as Nextclade's own report does): the batch
    table and the genome view print the same number for the same genome (11.6, not 11.6 and 12)."""
    return round(float(score), 1)


def batch_table(rows: list[dict]):
    """The batch view of ``classify`` rows: name, BERT call ("no call" below the gate), confidence ("—"
    without a call), rule
    call, agreement, Nextstrain clade, Pango lineage and recombinant (from the placement on Nextclade's
    tree), Nextclade QC score and status, spike and whole-genome QC, mutations, the gate's verdict,
    notes, error (a pandas DataFrame, sortable on the page)."""
    import pandas as pd

    from bertgeom.figures.base import probability_label

    out = [{"name": r["name"], "BERT call": CLASS_DISPLAY.get(r["predicted"], r["predicted"]) or (
                "no call" if r.get("gate") and r.get("gate") != "SARS-CoV-2" else ""),
            # as every screen writes a probability: a calibrated 0.99996 is "> 99.9%", never "1"
            "confidence": probability_label(r["confidence"]) if r["confidence"] != "" else "—",
            "rule call": CLASS_DISPLAY.get(r["rule_call"], r["rule_call"]), "agree": r["agrees"],
            "clade": r.get("clade", ""), "lineage": r.get("lineage", ""),
            "recombinant": recombinant_short(r.get("recombinant", "")),
            "QC score": qc_score_shown(r["qc_score"]) if r.get("qc_score") not in ("", None) else None,
            "QC status": r.get("qc_status", ""),
            "spike QC": r["qc"], "genome QC": r["genome_qc"],
            "mutations": r["n_mutations"] if r["n_mutations"] != "" else None,
            "gate": r.get("gate", ""), "notes": r.get("notes", ""), "error": r["error"]} for r in rows]
    return pd.DataFrame(out)


def recombinant_short(cell: str) -> str:
    """The batch table's recombinant cell: the parents (``AY.103 / BA.2.75.2``) or ``designated XD`` of the
    CSV's ``recombinant`` cell (:func:`~bertgeom.sars_cov_2.genome.pipeline.recombinant_cell`), whose
    breakpoint interval the CSV and the genome's own view give; "" when not a recombinant."""
    return cell.removeprefix("yes: ").split(" (breakpoint", 1)[0]


def csv_bytes(rows: list[dict]) -> bytes:
    """The rows as CSV, with formula-like cells quoted (names starting with = + - @)."""
    from bertgeom.safety import csv_bytes as safe_csv_bytes

    return safe_csv_bytes(rows)


@dataclass(frozen=True)
class SecondOpinion:
    """The rule-based marker call beside the BERT's: the class it calls (``call``, shown as ``display``),
    its one-line ``summary`` and ``evidence``, how many of that class's markers the genome carries
    (``matched`` of ``expected``), whether it agrees with the BERT (``agrees``: None where the two are not
    comparable) and the warning a user should see (empty when none)."""

    call: str
    display: str
    summary: str
    evidence: str
    agrees: bool | None
    matched: int = 0
    expected: int = 0
    warning: str = ""


def second_opinion(analysis, pred: str, confidence: float, min_confidence: float = 0.9) -> SecondOpinion:
    """The rule-based marker call beside the BERT's (:func:`bertgeom.sars_cov_2.genome.markers.call_cut`), with
    its evidence and the warning a user should see: disagreement, or a low BERT confidence. A class
    outside the eight (a custom model's own label) is "not comparable" (``agrees`` None)."""
    from bertgeom.sars_cov_2.genome.markers import call_cut

    rule = analysis.rule if getattr(analysis, "rule", None) is not None else call_cut(analysis.spike)
    display = CLASS_DISPLAY.get(rule.call, rule.call)
    if pred not in CLASSES:  # a custom model's class labels are data: its own names are compared with nothing
        return SecondOpinion(
            rule.call, display, rule.summary(), "not comparable", None,
            warning=(f"The model's class '{pred}' is not one of the eight classes the rule-based call knows "
                     f"({', '.join(CLASSES)}), so the two calls are not comparable; the rules read "
                     f"{display} ({rule.summary()})."))
    ev = rule.evidence.get(rule.call)
    evidence = (f"{len(ev.present)} of {ev.n_markers} markers" if rule.call != "gh" and ev else
                "no VOC's characteristic markers carried" + (f" ({rule.reason.split('(', 1)[1]}"
                                                              if "(" in rule.reason else ""))
    warning = ""
    if rule.call != pred:
        warning = (f"The BERT ({CLASS_DISPLAY.get(pred, pred)}, {confidence:.0%}) and the rule-based call "
                   f"from characteristic mutations ({display}: {rule.summary()}) disagree. Check the "
                   "mutation table and the QC card before trusting either.")
    elif confidence < min_confidence:
        warning = (f"The BERT is unsure ({confidence:.0%} < {min_confidence:.0%}), although the rule-based "
                   f"call agrees ({rule.summary()}).")
    return SecondOpinion(rule.call, display, rule.summary(), evidence, rule.call == pred,
                         len(ev.present) if ev else 0, ev.n_markers if ev else 0, warning)


def mutation_tokens(report, vocab, n_tokens: int) -> dict[int, str]:
    """``token index -> mutation names`` for the spike mutations (token 0 is [CLS]; the k-mer
    starting at spike offset ``i * stride`` is token ``i + 1``)."""
    from bertgeom.sars_cov_2.genome.reference import SPIKE_START

    out: dict[int, str] = {}
    for m in report.spike_nucleotide:
        tok = 1 + max(0, (m.pos - SPIKE_START) // vocab.stride)
        if tok < n_tokens - 1:
            out[tok] = (out.get(tok, "") + " " + (m.aa or m.name)).strip()
    return out


def manifest(loaded) -> dict:
    """How a result was made: app and model versions, the k-mer recipe, reference and aligner."""
    return {"app": "bertgeom", "app_version": __version__, "model": loaded.spec.id, "model_hash": loaded.weights_hash,
            "k": loaded.tokenizer.k, "stride": loaded.tokenizer.stride, "reference": "MN908947.3",
            "aligner": "minimap2 (mappy)"}


def what_if_record(reverted, added: str, not_read, n_changes: int, labels, probs_after) -> dict:
    """The what-if changes on screen and the call they give (the downloads carry it, so a file says
    which edited genome its 'after' numbers belong to): the reverted events as the box names them,
    the added entries as typed, the entries the box could not read (not applied), the number of
    changes and the probabilities after them. ``{}`` when nothing was changed."""
    if not n_changes:
        return {}
    k = int(max(range(len(labels)), key=lambda i: probs_after[i]))
    return {"reverted": list(reverted), "added": added.strip(), "not_read": list(not_read), "n_changes": n_changes,
            "predicted_after": labels[k], "probabilities_after": {c: float(p) for c, p in zip(labels, probs_after)}}


def _notes(analysis, notes) -> list[str]:
    """The reading notes the page shows above the analysis, after the gate's reason when there is no call."""
    gate = getattr(analysis, "gate", None)
    return ([gate.reason] if gate is not None and not gate.passed else []) + [str(n) for n in notes]


def result_record(loaded, analysis, pred: str, labels, probs, *, notes=(), what_if: dict | None = None) -> dict:
    """The full result of one genome (the JSON download): ``notes`` are the reading notes the page
    shows (reverse complement detected, U read as T ...), ``what_if`` the changes on screen
    (:func:`what_if_record`)."""
    qc, report = analysis.qc, analysis.mutations
    gate = getattr(analysis, "gate", None)
    called = gate is None or gate.passed  # below the gate: no class probability, no call
    return {
        "manifest": {**manifest(loaded), "nextclade_dataset": dataset_name(analysis)}, "name": analysis.name,
        "notes": _notes(analysis, notes), **({"what_if": what_if} if what_if else {}),
        "predicted": pred if called else None,
        "probabilities": {c: float(p) for c, p in zip(labels, probs)} if called else {},
        **({"gate": {"verdict": gate.verdict, "identity": gate.identity, "aligned_share": gate.aligned_share,
                     "private": gate.private, "divergence_per_kb": gate.divergence_per_kb,
                     "unread_share": gate.unread_share, "node": gate.node, "reason": gate.reason}}
           if gate is not None else {}),
        "qc": {"verdict": qc.verdict, "reasons": qc.reasons, "coverage": qc.coverage, "n_share": qc.n_share,
               "frameshifts": [f"S:{f}" for f in qc.frameshifts], "private": qc.private},
        "mutations": [m.qualified for m in report.amino_acid],
        "nucleotide_mutations": report.nuc_names(spike_only=True),
        **_genome_fields(analysis),
    }


def _genome_fields(analysis) -> dict:
    """Nearest clade, QC score by rule and every gene's changes, from the one analysis (JSON download)."""
    if getattr(analysis, "qc_score", None) is None:
        return {}
    q = analysis.qc_score
    return {"nearest_clade": analysis.clade.clade, "lineage": analysis.clade.lineage,
            "placement": placement_record(getattr(analysis, "placement", None)),
            "qc_score": {"score": q.score, "status": q.status,
                         "rules": {k: {"score": r.score, "status": r.status, "count": r.count, "message": r.message}
                                   for k, r in q.rules.items()}},
            "private": list(analysis.private.private), "reversions": list(analysis.private.reversions),
            "genes": {g: {"coverage": gr.coverage, "mutations": [e.name for e in gr.events],
                          "frameshifts": gr.frameshifts, "stops": gr.stops}
                      for g, gr in analysis.mutations.genes.items()}}


def result_row(loaded, analysis, pred: str, labels, probs, *, notes=(), what_if: dict | None = None) -> dict:
    """One flat row of the result (the CSV download), with the same ``notes`` and ``what_if`` as
    :func:`result_record` (the changes joined in one cell, the call and its probability after them)."""
    extra = analysis.summary_row() if hasattr(analysis, "summary_row") else {}
    gate = getattr(analysis, "gate", None)
    called = gate is None or gate.passed  # below the gate: no class probability, no call
    return {"name": analysis.name, "predicted": pred if called else "",
            **{f"p_{c}": float(p) if called else "" for c, p in zip(labels, probs)},
            "qc": analysis.qc.verdict, "clade": extra.get("clade", ""), "lineage": extra.get("lineage", ""),
            "recombinant": extra.get("recombinant", ""), "qc_score": extra.get("qc_score", ""),
            "qc_status": extra.get("qc_status", ""),
            "mutations": " ".join(m.qualified for m in analysis.mutations.amino_acid),
            "gate": gate.verdict if gate else "", "notes": "; ".join(_notes(analysis, notes)),
            "what_if": " ".join([*(what_if or {}).get("reverted", []), (what_if or {}).get("added", "")]).strip(),
            "predicted_after_what_if": (what_if or {}).get("predicted_after", ""),
            "p_after_what_if": max((what_if or {}).get("probabilities_after", {}).values(), default=""),
            **manifest(loaded), "nextclade_dataset": dataset_name(analysis)}


def dataset_name(analysis) -> str:
    """The Nextclade dataset (name and tag) the analysis was placed on ("" when it was not placed)."""
    pl = getattr(analysis, "placement", None)
    return pl.dataset if pl is not None else ""


def placement_record(placement) -> dict:
    """The placement on Nextclade's reference tree as the JSON download writes it: the dataset, the
    node, its clade and Pango lineage, the distance, the private mutations by Nextclade's classes,
    the tie (resolution) and the recombinant call ({} when there is no placement)."""
    if placement is None:
        return {}
    pm, rec = placement.private, placement.recombinant
    return {"dataset": placement.dataset, "node": placement.node, "clade": placement.clade,
            "clade_display": placement.clade_display, "lineage": placement.lineage,
            "unaliased": placement.unaliased or placement.lineage, "who": placement.who, "region": placement.region,
            "distance": placement.distance, "called": placement.called,
            "divergence_per_kb": round(placement.divergence_per_kb, 3), "ties": placement.ties,
            "tied_lineages": list(placement.tied_lineages), "tied_clades": list(placement.tied_clades),
            "resolution_note": placement.resolution_note(),
            "private": {"reversions": list(pm.reversions),
                        "labeled": [{"mutation": m, "clades": list(c)} for m, c in pm.labeled],
                        "unlabeled": list(pm.unlabeled), "deletion_ranges": list(pm.deletion_ranges)},
            "recombinant": None if rec is None else {
                "parents": list(rec.parents), "parent_clades": list(rec.parent_clades),
                "breakpoints": [list(b) for b in rec.breakpoints], "gain": rec.gain, "designated": rec.designated,
                "summary": recombinant_sentence(placement)}}


def _recombinant_root(placement) -> str:
    """The designated recombinant (``XBB``) a placement's lineage descends from, from its unaliased
    name (``XBB.1.5.70.1`` for GK.1); "" when the name does not start from one."""
    root = (placement.unaliased or placement.lineage or "").split(".")[0]
    return root if root.startswith("X") else ""


def recombinant_sentence(placement) -> str:
    """One sentence on a recombinant placement ("" when there is none): the designated recombinant
    lineage the sequence sits on, and/or the parents of its parts (5' to 3') with the breakpoint
    intervals between the informative sites."""
    rec = getattr(placement, "recombinant", None)
    if rec is None:
        return ""
    split = ""
    if rec.parents:
        names = [f"{lin} ({cl})" if cl else lin for lin, cl in zip(rec.parents, rec.parent_clades)]
        where = ["5' part"] + ["middle part"] * (len(names) - 2) + ["3' part"]
        parts = ", ".join(f"its {w} nearest {n}" for w, n in zip(where, names))
        bps = " and ".join(f"{a:,} and {b:,}" for a, b in rec.breakpoints)
        split = (f"{parts}, breakpoint{'s' if len(rec.breakpoints) > 1 else ''} between {bps} "
                 f"({rec.gain} fewer private mutations than on any one node)")
    if not rec.designated:
        return (f"Possible recombinant, not on a designated recombinant lineage: {split}." if split else "")
    root = _recombinant_root(placement)
    unaliased = placement.unaliased if placement.unaliased and placement.unaliased != rec.designated else ""
    if not root or root == rec.designated:
        lineage = f"{rec.designated}, a designated recombinant lineage"
    else:
        lineage = (f"{rec.designated}{f' ({unaliased})' if unaliased else ''}, a descendant of the designated "
                   f"recombinant {root}")
    return f"Recombinant: it sits on {lineage}" + (f"; {split}." if split else ".")


#: The kinds of nucleotide changes :func:`genome_marks` sorts, in the track's order (top first).
MARK_KINDS = ("private", "reversion", "on the node's path")


def genome_marks(analysis) -> dict:
    """What the genome track (:func:`~bertgeom.sars_cov_2.variant.figures.genome_track`) draws, read
    from the one analysis: ``genes`` ``(name, start, end)``; ``unread`` stretches ``(first, last)``
    (N or not covered); ``marks``, per kind of :data:`MARK_KINDS`, ``(position, label)`` of each
    nucleotide change: *private* (not on the nearest node), *reversion* (a change of the node where the
    sequence reads the reference base) or on the node's path; and ``bands`` ``(after, before, label)``,
    one per recombinant breakpoint interval, labelled with the parents on either side."""
    from bertgeom.sars_cov_2.genome.genes import load_genes
    from bertgeom.sars_cov_2.genome.profiles import nuc_key
    from bertgeom.sars_cov_2.genome.reference import REFERENCE_LEN

    genes = [(g.name, g.start, g.end) for g in load_genes().values()]
    unread: list[tuple[int, int]] = []
    aln = getattr(analysis, "alignment", None)
    if aln is not None:
        import numpy as np

        q = np.frombuffer(aln.aligned.encode("ascii", "replace"), dtype=np.uint8)
        read = np.isin(q, np.frombuffer(b"ACGT-", dtype=np.uint8))
        edges = np.flatnonzero(np.diff(np.r_[0, (~read).astype(np.int8), 0]))
        unread = [(int(a) + 1, int(b)) for a, b in zip(edges[::2], edges[1::2])]
    private = set(analysis.private.private) if getattr(analysis, "private", None) is not None else set()
    marks: dict[str, list[tuple[int, str]]] = {k: [] for k in MARK_KINDS}
    for m in analysis.mutations.nucleotide if analysis.mutations is not None else []:
        label = m.name + (f" ({', '.join(m.aa_changes)})" if m.aa_changes else "")
        marks["private" if m.name in private else "on the node's path"].append((m.pos, label))
    pl = getattr(analysis, "placement", None)
    if pl is not None:
        node = pl.lineage or pl.node
        for r in pl.private.reversions:
            key = nuc_key(r)
            if key:
                marks["reversion"].append((key[1], f"{r} (reversion: {node} carries {r[-1]}{key[1]}{r[0]})"))
    return {"length": REFERENCE_LEN, "genes": genes, "unread": unread, "marks": marks,
            "bands": breakpoint_bands(pl)}


def breakpoint_bands(placement) -> list[tuple[int, int, str]]:
    """``(after, before, "5' parent | 3' parent")`` of each breakpoint interval of a recombinant
    placement with parents (genome positions; empty otherwise)."""
    rec = getattr(placement, "recombinant", None)
    if rec is None or not rec.parents:
        return []
    return [(a, b, f"{rec.parents[i]} | {rec.parents[i + 1]}") for i, (a, b) in enumerate(rec.breakpoints)
            if i + 1 < len(rec.parents)]


def spike_bands(analysis, stride: int, n_tokens: int) -> list[tuple[int, int, str]]:
    """The recombinant breakpoint intervals of :func:`genome_marks` that reach into the spike, in the
    spike track's token coordinates ``(first token, last token, label)`` (token 0 is [CLS]; the k-mer
    starting at spike offset ``i * stride`` is token ``i + 1``)."""
    from bertgeom.sars_cov_2.genome.reference import SPIKE_END, SPIKE_START

    out = []
    for a, b, label in breakpoint_bands(getattr(analysis, "placement", None)):
        if b < SPIKE_START or a > SPIKE_END:
            continue
        lo = 1 + max(0, min(a, SPIKE_END) - SPIKE_START) // stride
        hi = 1 + max(0, min(b, SPIKE_END) - SPIKE_START) // stride
        out.append((min(lo, n_tokens - 2), min(hi, n_tokens - 2), label))
    return out


def qc_verdicts(analysis) -> list[dict]:
    """The three QC verdicts of one genome side by side, each with what it reads and what it means
    for the model's call: the spike QC (the model's input), the whole-genome QC (the rest of the
    sequence, which the model never reads) and the Nextclade-like QC score (Nextclade's rules over
    the whole genome, to set beside Nextclade). A row per verdict the analysis has."""
    rows = []
    qc = getattr(analysis, "qc", None)
    if qc is not None:
        rows.append({"check": "Spike QC", "verdict": qc.verdict,
                     "reads": "the spike gene only: coverage, N, ambiguous bases, frameshifts, private changes",
                     "for the call": "the model's whole input: a fail means the call may rest on missing data"})
    gqc = getattr(analysis, "genome_qc", None)
    if gqc is not None:
        rows.append({"check": "Genome QC", "verdict": gqc.verdict,
                     "reads": "the whole sequence outside the spike: coverage, missing and ambiguous bases, "
                              "frameshifting indels",
                     "for the call": "none directly (the model reads only the spike); says whether the "
                                     "sequence is a good genome"})
    score = getattr(analysis, "qc_score", None)
    if score is not None:
        from bertgeom.sars_cov_2.genome.qc import VERDICT_OF_STATUS

        verdict = VERDICT_OF_STATUS.get(score.status, score.status)  # one vocabulary; Nextclade's word beside it
        # the score as the batch table and the score's heading print it (one decimal: 1.6, never 2 beside 1.6)
        rows.append({"check": "QC score (Nextclade-like)",
                     "verdict": f"{verdict} ({score.status}, {qc_score_shown(score.score):.1f})",
                     "reads": "Nextclade's rules over the whole genome: missing data, mixed sites, private "
                              "mutations, frameshifts, stop codons",
                     "for the call": "none directly; the number to set beside Nextclade's own qc.overallScore"})
    return rows
