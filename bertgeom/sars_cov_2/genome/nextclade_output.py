"""One analysed sequence as a row of Nextclade's own output (its TSV columns and NDJSON records), so a
pipeline can swap Nextclade for bertgeom or set the two side by side.

The column names and the cell forms are those of Nextclade 3's ``--output-tsv`` (section "Analysis
results (tabular)" of its documentation): comma-joined lists (``C241T,C3037T``), nucleotide deletions
as closed ranges (``21765-21770``), insertions after a reference base (``22204:GAGCCAGAA``), missing
and ambiguous bases as ranges (``1-54``, ``R:1234``), frameshifts as gene and codon range
(``ORF3a:257-276``), private mutations and the QC rules under their dotted names, 1-based positions.
Columns Nextclade has and bertgeom does not compute (PCR primer changes, phenotype values, the
relative-to-founder mutations) are left out rather than written empty. bertgeom's own columns
follow Nextclade's: ``recombinant``, the variant model's call (``variant``, ``variant_confidence``,
``variant_gate``), the reading notes (``variant_notes``), the model's weights hash (``variant_model``) and
the ``dataset`` in use.

References
----------
* Nextclade documentation, "Output files: Analysis results (tabular)" and "Analysis results (JSON)".
"""

from __future__ import annotations

import json

#: Nextclade 3's columns, in its order (those bertgeom computes), then bertgeom's own.
NEXTCLADE_COLUMNS: tuple[str, ...] = (
    "seqName", "clade", "Nextclade_pango", "partiallyAliased", "clade_nextstrain", "clade_who", "clade_display",
    "qc.overallScore", "qc.overallStatus", "totalSubstitutions", "totalDeletions", "totalInsertions",
    "totalFrameShifts", "totalMissing", "totalNonACGTNs", "totalAminoacidSubstitutions", "totalAminoacidDeletions",
    "totalAminoacidInsertions", "alignmentStart", "alignmentEnd", "substitutions", "deletions", "insertions",
    "frameShifts", "aaSubstitutions", "aaDeletions", "aaInsertions",
    "privateNucMutations.reversionSubstitutions", "privateNucMutations.labeledSubstitutions",
    "privateNucMutations.unlabeledSubstitutions", "privateNucMutations.totalReversionSubstitutions",
    "privateNucMutations.totalLabeledSubstitutions", "privateNucMutations.totalUnlabeledSubstitutions",
    "privateNucMutations.totalPrivateSubstitutions", "missing", "nonACGTNs",
    "qc.missingData.missingDataThreshold", "qc.missingData.score", "qc.missingData.status",
    "qc.missingData.totalMissing", "qc.mixedSites.mixedSitesThreshold", "qc.mixedSites.score",
    "qc.mixedSites.status", "qc.mixedSites.totalMixedSites", "qc.privateMutations.cutoff",
    "qc.privateMutations.excess", "qc.privateMutations.score", "qc.privateMutations.status",
    "qc.privateMutations.total", "qc.snpClusters.clusteredSNPs", "qc.snpClusters.score", "qc.snpClusters.status",
    "qc.snpClusters.totalSNPs", "qc.frameShifts.frameShifts", "qc.frameShifts.totalFrameShifts",
    "qc.frameShifts.frameShiftsIgnored", "qc.frameShifts.totalFrameShiftsIgnored", "qc.frameShifts.score",
    "qc.frameShifts.status", "qc.stopCodons.stopCodons", "qc.stopCodons.totalStopCodons", "qc.stopCodons.score",
    "qc.stopCodons.status", "errors",
)
#: ``variant_notes``: what was done to the input before the model read it (reverse complement, U read
#: as T, the spike cut out) and, with no call, why; ``variant_model``: the weights' hash of the model that
#: called it, so a row says which model and which dataset made it
BERTGEOM_COLUMNS: tuple[str, ...] = ("recombinant", "variant", "variant_confidence", "variant_gate", "variant_notes",
                                     "variant_model", "dataset")
TSV_COLUMNS: tuple[str, ...] = NEXTCLADE_COLUMNS + BERTGEOM_COLUMNS


def nextclade_row(analysis) -> dict:
    """One analysed sequence (:class:`~.pipeline.GenomeAnalysis`) as a row of :data:`TSV_COLUMNS`
    (bertgeom's ``variant`` and ``variant_confidence`` are the caller's, from the model's call)."""
    row: dict = dict.fromkeys(TSV_COLUMNS, "")
    row["seqName"] = analysis.name
    if analysis.error or analysis.mutations is None or analysis.placement is None:
        row["errors"] = analysis.error or "not analysed"
        return row
    pl = analysis.placement
    from .mutations import nextclade_columns

    row.update(nextclade_columns(analysis.mutations, analysis.alignment))
    row.update({"clade": pl.clade, "Nextclade_pango": pl.lineage, "partiallyAliased": pl.unaliased,
                "clade_nextstrain": pl.clade, "clade_who": pl.who, "clade_display": pl.clade_display})
    pm = pl.private
    row["privateNucMutations.reversionSubstitutions"] = ",".join(pm.reversions)
    row["privateNucMutations.labeledSubstitutions"] = ",".join(f"{s}|{'&'.join(lab)}" for s, lab in pm.labeled)
    row["privateNucMutations.unlabeledSubstitutions"] = ",".join(pm.unlabeled)
    row["privateNucMutations.totalReversionSubstitutions"] = len(pm.reversions)
    row["privateNucMutations.totalLabeledSubstitutions"] = len(pm.labeled)
    row["privateNucMutations.totalUnlabeledSubstitutions"] = len(pm.unlabeled)
    row["privateNucMutations.totalPrivateSubstitutions"] = len(pm.reversions) + len(pm.labeled) + len(pm.unlabeled)
    qc = analysis.qc_score
    params = qc.params
    rules = qc.rules
    row["qc.overallScore"] = qc.score
    row["qc.overallStatus"] = qc.status
    md, ms, pr = rules["missing data"], rules["mixed sites"], rules["private mutations"]
    sn, fs, st = rules["snp clusters"], rules["frameshifts"], rules["stop codons"]
    pp = params["private mutations"]
    weighted = qc.weighted_private
    row.update({
        "qc.missingData.missingDataThreshold": params["missing data"]["threshold"]
        + params["missing data"]["score_bias"],
        "qc.missingData.score": md.score, "qc.missingData.status": md.status,
        "qc.missingData.totalMissing": md.count,
        "qc.mixedSites.mixedSitesThreshold": params["mixed sites"]["threshold"], "qc.mixedSites.score": ms.score,
        "qc.mixedSites.status": ms.status, "qc.mixedSites.totalMixedSites": ms.count,
        "qc.privateMutations.cutoff": pp["cutoff"], "qc.privateMutations.excess": max(0, weighted - pp["typical"]),
        "qc.privateMutations.score": pr.score, "qc.privateMutations.status": pr.status,
        "qc.privateMutations.total": weighted,
        "qc.snpClusters.clusteredSNPs": ",".join(qc.clusters),
        "qc.snpClusters.score": sn.score, "qc.snpClusters.status": sn.status, "qc.snpClusters.totalSNPs": sn.count,
        "qc.frameShifts.frameShifts": ",".join(qc.frameshifts), "qc.frameShifts.totalFrameShifts": len(qc.frameshifts),
        "qc.frameShifts.frameShiftsIgnored": ",".join(qc.frameshifts_ignored),
        "qc.frameShifts.totalFrameShiftsIgnored": len(qc.frameshifts_ignored), "qc.frameShifts.score": fs.score,
        "qc.frameShifts.status": fs.status, "qc.stopCodons.stopCodons": ",".join(qc.stops),
        "qc.stopCodons.totalStopCodons": len(qc.stops), "qc.stopCodons.score": st.score,
        "qc.stopCodons.status": st.status,
    })
    from .pipeline import recombinant_cell

    row["recombinant"] = recombinant_cell(pl)
    row["dataset"] = pl.dataset
    if analysis.gate is not None:
        row["variant_gate"] = analysis.gate.verdict
    return row


def ndjson_record(row: dict) -> str:
    """One TSV row as an NDJSON line: Nextclade's dotted names nested (``qc.missingData.score`` ->
    ``{"qc": {"missingData": {"score": ...}}}``), comma lists as JSON lists."""
    out: dict = {}
    for key, value in row.items():
        parts = key.split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        if isinstance(value, str) and key not in _TEXT_COLUMNS and ("," in value or key in _LIST_COLUMNS):
            value = [v for v in value.split(",") if v]
        node[parts[-1]] = value
    return json.dumps(out, ensure_ascii=False)


#: cells that are one text, whatever commas they hold
_TEXT_COLUMNS = frozenset({"seqName", "errors", "recombinant", "dataset", "clade_display", "variant_notes"})
_LIST_COLUMNS = frozenset({"substitutions", "deletions", "insertions", "frameShifts", "aaSubstitutions",
                           "aaDeletions", "aaInsertions", "missing", "nonACGTNs",
                           "privateNucMutations.reversionSubstitutions", "privateNucMutations.labeledSubstitutions",
                           "privateNucMutations.unlabeledSubstitutions", "qc.frameShifts.frameShifts",
                           "qc.frameShifts.frameShiftsIgnored", "qc.stopCodons.stopCodons",
                           "qc.snpClusters.clusteredSNPs"})

__all__ = ["BERTGEOM_COLUMNS", "NEXTCLADE_COLUMNS", "TSV_COLUMNS", "ndjson_record", "nextclade_row"]
