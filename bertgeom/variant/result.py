"""What the Variant Classifier reports for one genome, as data (no UI): the spike mutations
against the predicted class's defining ones, which token each mutation falls in, and the
downloadable result with its manifest."""

from __future__ import annotations

from bertgeom import __version__
from bertgeom.genome.classes import CLASS_DISPLAY


def defining_flag(pred: str) -> str:
    """Column name that marks the mutations defining the predicted class."""
    return f"defines {CLASS_DISPLAY.get(pred, pred)}"


def mutation_rows(analysis, pred: str) -> tuple[list[dict], list[str]]:
    """The spike amino-acid changes (one row each, those defining ``pred`` flagged) and the
    defining mutations of ``pred`` that the genome lacks (with why: reference base or not covered)."""
    from bertgeom.genome.mutations import class_defining_mutations
    from bertgeom.genome.reference import SPIKE_START

    report, aligned = analysis.mutations, analysis.spike.aligned
    defining = class_defining_mutations(pred)
    defining_names = {m.name for m in defining}
    present = {m.name for m in report.spike_nucleotide}
    rows = [{"mutation": m.name, "nucleotide": ", ".join(m.nuc), "domain": m.domain or "",
             defining_flag(pred): "yes" if set(m.nuc) & defining_names else "",
             "defining clades": ", ".join(m.defining_clades)} for m in report.amino_acid]
    missing = []
    for m in defining:
        if m.name not in present:
            base = aligned[m.pos - SPIKE_START]
            missing.append(f"{m.aa or m.name} ({m.name}: {'not covered' if base in 'N-' else 'reference base'})")
    return rows, missing


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
