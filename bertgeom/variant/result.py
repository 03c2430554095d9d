"""What the Variant Classifier reports for one genome, as data (no UI): the spike mutations
against the predicted class's defining ones, which token each mutation falls in, and the
downloadable result with its manifest."""

from __future__ import annotations

from bertgeom import __version__
from bertgeom.genome.classes import CLASS_DISPLAY


def defining_flag(pred: str) -> str:
    """Column name that marks the characteristic mutations of the predicted class."""
    return f"characteristic of {CLASS_DISPLAY.get(pred, pred)}"


def _events(report) -> list[dict]:
    """The spike amino-acid changes as events: consecutive deleted residues become one ``del69-70``
    row (as Nextstrain writes them), with the union of their nucleotide changes."""
    from bertgeom.genome.reference import readable_region

    events: list[dict] = []
    for m in report.amino_acid:
        last = events[-1] if events else None
        if m.kind == "del" and last is not None and last["kind"] == "del" and m.pos == last["end"] + 1:
            last["end"] = m.pos
            last["nuc"] = list(dict.fromkeys(last["nuc"] + list(m.nuc)))
            continue
        events.append({"kind": m.kind, "start": m.pos, "end": m.pos, "name": m.name, "nuc": list(m.nuc),
                       "domain": readable_region(m.pos)})
    for e in events:
        if e["kind"] == "del":
            e["name"] = f"del{e['start']}" if e["start"] == e["end"] else f"del{e['start']}-{e['end']}"
    return events


def mutation_rows(analysis, pred: str, rule_call: str | None = None) -> tuple[list[dict], list[str]]:
    """One row per spike mutation event (substitution, grouped deletion, insertion) with its
    nucleotide changes, domain, the classes it characterises (``characteristic_mutations.tsv``),
    whether it characterises ``pred``, and whether it is a marker of no class (not in the table at all;
    not to be read as QC's *private* mutations, which are judged against the class's whole training
    profile, so one screen never gives one word two counts); and
    the characteristic mutations of ``pred`` (and of ``rule_call`` when it differs) that are
    missing, with why: the reference base is read there, or the site is not covered (N)."""
    from bertgeom.genome.markers import ABSENT, MISSING, load_marker_table, marker_state

    table = load_marker_table()
    classes_of: dict[str, list[str]] = {}
    for m in table.markers:
        classes_of.setdefault(m.name, []).append(m.cls)
    flag = defining_flag(pred)
    rows = []
    for e in _events(analysis.mutations):
        owners = sorted({c for n in e["nuc"] for c in classes_of.get(n, [])}, key=list(CLASS_DISPLAY).index)
        rows.append({"mutation": e["name"], "nucleotide": ", ".join(e["nuc"]), "domain": e["domain"],
                     flag: "yes" if pred in owners else "",
                     "characteristic of": ", ".join(CLASS_DISPLAY.get(c, c) for c in owners),
                     "marker of no class": "" if owners else "yes"})
    missing = []
    aligned, insertions = analysis.spike.aligned, analysis.spike.insertions
    for cls in dict.fromkeys([pred] + ([rule_call] if rule_call and rule_call != pred else [])):
        for m in table.of(cls):
            state = marker_state(m, aligned, insertions)
            if state in (ABSENT, MISSING):
                why = "not covered (N)" if state == MISSING else "reference or another base"
                missing.append(f"{m.label} ({m.name}; {CLASS_DISPLAY.get(cls, cls)}: {why})")
    return rows, missing


def batch_table(rows: list[dict]):
    """The batch view of ``classify`` rows: name, BERT call, confidence, rule call, agreement, spike and
    whole-genome QC, mutations, error (a pandas DataFrame, sortable on the page)."""
    import pandas as pd

    out = [{"name": r["name"], "BERT call": CLASS_DISPLAY.get(r["predicted"], r["predicted"]),
            "confidence": r["confidence"] if r["confidence"] != "" else None,
            "rule call": CLASS_DISPLAY.get(r["rule_call"], r["rule_call"]), "agree": r["agrees"],
            "spike QC": r["qc"], "genome QC": r["genome_qc"], "mutations": r["n_mutations"] if r["n_mutations"] != "" else None,
            "error": r["error"]} for r in rows]
    return pd.DataFrame(out)


def csv_bytes(rows: list[dict]) -> bytes:
    """The rows as CSV, with formula-like cells quoted (names starting with = + - @)."""
    from bertgeom.safety import csv_bytes as safe_csv_bytes

    return safe_csv_bytes(rows)


def second_opinion(analysis, pred: str, confidence: float, min_confidence: float = 0.9) -> dict:
    """The rule-based marker call beside the BERT's (:func:`bertgeom.genome.markers.call_cut`), with
    its evidence and the warning a user should see: disagreement, or a low BERT confidence."""
    from bertgeom.genome.markers import call_cut

    rule = call_cut(analysis.spike)
    ev = rule.evidence.get(rule.call)
    out = {"call": rule.call, "display": CLASS_DISPLAY.get(rule.call, rule.call), "summary": rule.summary(),
           "agrees": rule.call == pred, "matched": len(ev.present) if ev else 0,
           "expected": ev.n_markers if ev else 0, "warning": "",
           "evidence": (f"{len(ev.present)} of {ev.n_markers} markers" if rule.call != "gh" and ev else
                        "no VOC's characteristic markers carried" + (f" ({rule.reason.split('(', 1)[1]}"
                                                                      if "(" in rule.reason else ""))}
    if rule.call != pred:
        out["warning"] = (f"The BERT ({CLASS_DISPLAY.get(pred, pred)}, {confidence:.0%}) and the rule-based call "
                          f"from characteristic mutations ({out['display']}: {rule.summary()}) disagree. Check the "
                          "mutation table and the QC card before trusting either.")
    elif confidence < min_confidence:
        out["warning"] = (f"The BERT is unsure ({confidence:.0%} < {min_confidence:.0%}), although the rule-based "
                          f"call agrees ({rule.summary()}).")
    return out


def mutation_tokens(report, vocab, n_tokens: int) -> dict[int, str]:
    """``token index -> mutation names`` for the spike mutations (token 0 is [CLS]; the k-mer
    starting at spike offset ``i * stride`` is token ``i + 1``)."""
    from bertgeom.genome.reference import SPIKE_START

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
    return {
        "manifest": manifest(loaded), "name": analysis.name, "predicted": pred,
        "probabilities": {c: float(p) for c, p in zip(labels, probs)},
        "qc": {"verdict": qc.verdict, "reasons": qc.reasons, "coverage": qc.coverage, "n_share": qc.n_share,
               "frameshifts": qc.frameshifts, "private": qc.private},
        "mutations": report.aa_names(), "nucleotide_mutations": report.nuc_names(spike_only=True),
    }


def result_row(loaded, analysis, pred: str, labels, probs) -> dict:
    """One flat row of the result (the CSV download)."""
    return {"name": analysis.name, "predicted": pred, **{f"p_{c}": float(p) for c, p in zip(labels, probs)},
            "qc": analysis.qc.verdict, "mutations": " ".join(analysis.mutations.aa_names()), **manifest(loaded)}
