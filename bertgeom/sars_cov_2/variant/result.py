"""What the Variant Classifier reports for one genome, as data (no UI): the spike mutations
against the predicted class's defining ones, which token each mutation falls in, and the
downloadable result with its manifest."""

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
    *private* (not in the nearest clade's profile: the rows QC's private count counts); and the
    characteristic mutations of ``pred`` (and of ``rule_call`` when it differs) that are missing,
    with why: the reference or another amino acid is read there, or the site is not covered (N)."""
    from bertgeom.sars_cov_2.genome.markers import ABSENT, MISSING, load_marker_table, marker_state
    from bertgeom.sars_cov_2.genome.pipeline import mutation_table
    from bertgeom.sars_cov_2.genome.reference import readable_region

    table = load_marker_table()
    flag = defining_flag(pred)
    clade = analysis.clade.display if analysis.clade is not None else "the nearest clade"
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
                    f"private (not in {clade})": r["private"]})
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
    """The name of the table column that marks private rows (it names the clade judged against)."""
    clade = analysis.clade.display if analysis.clade is not None else "the nearest clade"
    return f"private (not in {clade})"


def batch_table(rows: list[dict]):
    """The batch view of ``classify`` rows: name, BERT call ("no call" below the gate), confidence, rule
    call, agreement, nearest clade, Nextclade QC score and status, spike and whole-genome QC,
    mutations, the gate's verdict, notes, error (a pandas DataFrame, sortable on the page)."""
    import pandas as pd

    from bertgeom.figures.base import probability_label

    out = [{"name": r["name"], "BERT call": CLASS_DISPLAY.get(r["predicted"], r["predicted"]) or (
                "no call" if r.get("gate") and r.get("gate") != "SARS-CoV-2" else ""),
            # as every screen writes a probability: a calibrated 0.99996 is "> 99.9%", never "1"
            "confidence": probability_label(r["confidence"]) if r["confidence"] != "" else None,
            "rule call": CLASS_DISPLAY.get(r["rule_call"], r["rule_call"]), "agree": r["agrees"],
            "nearest clade": r.get("clade", ""),
            "QC score": r.get("qc_score") if r.get("qc_score") not in ("", None) else None,
            "QC status": r.get("qc_status", ""),
            "spike QC": r["qc"], "genome QC": r["genome_qc"], "mutations": r["n_mutations"] if r["n_mutations"] != "" else None,
            "gate": r.get("gate", ""), "notes": r.get("notes", ""), "error": r["error"]} for r in rows]
    return pd.DataFrame(out)


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


def result_record(loaded, analysis, pred: str, labels, probs) -> dict:
    """The full result of one genome (the JSON download)."""
    qc, report = analysis.qc, analysis.mutations
    gate = getattr(analysis, "gate", None)
    called = gate is None or gate.passed  # below the gate: no class probability, no call
    return {
        "manifest": manifest(loaded), "name": analysis.name, "predicted": pred if called else None,
        "probabilities": {c: float(p) for c, p in zip(labels, probs)} if called else {},
        **({"gate": {"verdict": gate.verdict, "identity": gate.identity, "aligned_share": gate.aligned_share,
                     "private": gate.private, "reason": gate.reason}} if gate is not None else {}),
        "qc": {"verdict": qc.verdict, "reasons": qc.reasons, "coverage": qc.coverage, "n_share": qc.n_share,
               "frameshifts": [f"S:{f}" for f in qc.frameshifts], "private": qc.private},
        "mutations": [m.qualified for m in report.amino_acid], "nucleotide_mutations": report.nuc_names(spike_only=True),
        **_genome_fields(analysis),
    }


def _genome_fields(analysis) -> dict:
    """Nearest clade, QC score by rule and every gene's changes, from the one analysis (JSON download)."""
    if getattr(analysis, "qc_score", None) is None:
        return {}
    q = analysis.qc_score
    return {"nearest_clade": analysis.clade.clade,
            "qc_score": {"score": q.score, "status": q.status,
                         "rules": {k: {"score": r.score, "status": r.status, "count": r.count, "message": r.message}
                                   for k, r in q.rules.items()}},
            "private": list(analysis.private.private), "reversions": list(analysis.private.reversions),
            "genes": {g: {"coverage": gr.coverage, "mutations": [e.name for e in gr.events],
                          "frameshifts": gr.frameshifts, "stops": gr.stops}
                      for g, gr in analysis.mutations.genes.items()}}


def result_row(loaded, analysis, pred: str, labels, probs) -> dict:
    """One flat row of the result (the CSV download)."""
    extra = analysis.summary_row() if hasattr(analysis, "summary_row") else {}
    gate = getattr(analysis, "gate", None)
    called = gate is None or gate.passed  # below the gate: no class probability, no call
    return {"name": analysis.name, "predicted": pred if called else "",
            **{f"p_{c}": float(p) if called else "" for c, p in zip(labels, probs)},
            "qc": analysis.qc.verdict, "clade": extra.get("clade", ""), "qc_score": extra.get("qc_score", ""),
            "qc_status": extra.get("qc_status", ""),
            "mutations": " ".join(m.qualified for m in analysis.mutations.amino_acid),
            "gate": gate.verdict if gate else "", "notes": gate.reason if gate and not called else "",
            **manifest(loaded)}


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
        rows.append({"check": "QC score (Nextclade-like)", "verdict": f"{score.status} ({score.score:.0f})",
                     "reads": "Nextclade's rules over the whole genome: missing data, mixed sites, private "
                              "mutations, frameshifts, stop codons",
                     "for the call": "none directly; the number to set beside Nextclade's own qc.overallScore"})
    return rows
