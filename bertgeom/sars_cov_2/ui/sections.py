"""Sections of the Variant Classifier page built on the genome pipeline's one result object
(:class:`bertgeom.sars_cov_2.genome.pipeline.GenomeAnalysis`): the placement on Nextclade's reference
tree (clade, Pango lineage, private mutations, recombinant, the genome track), Nextclade's QC score
rule by rule, and the mutation table of every gene (S first).

Everything shown is read from the analysis; nothing is recomputed here.

References
----------
* Nextclade documentation, "Quality Control" (rules, scores, statuses), "Phylogenetic placement" and
  "Mutation calling" (private mutations: reversions, labelled, unlabelled).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertgeom.safety import plain
from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY
from bertgeom.ui.widgets import chart
from bertgeom.tables import counted

#: The colour of each QC verdict (bertgeom.sars_cov_2.genome.qc.VERDICTS), on every QC line of the page.
VERDICT_COLOUR = {"pass": "green", "warn": "orange", "fail": "red"}
VERDICT_ICON = {"pass": ":material/check_circle:", "warn": ":material/warning:", "fail": ":material/cancel:"}


def verdict_badge(verdict: str, *, icon: bool = False, words: str | None = None) -> str:
    """A verdict in its colour (with its icon), showing ``words`` (default: the verdict itself)."""
    colour = VERDICT_COLOUR.get(verdict)
    words = verdict if words is None else words
    if colour is None:
        return words
    return f":{colour}[{VERDICT_ICON[verdict] + ' ' if icon else ''}{words}]"


def status_badge(status: str) -> str:
    """Nextclade's status (good / mediocre / bad) in the colour of the verdict it maps to."""
    from bertgeom.sars_cov_2.genome.qc import VERDICT_OF_STATUS

    return verdict_badge(VERDICT_OF_STATUS.get(status, ""), words=status)


_GENE_NOTE = {"nuc": "Nucleotide changes that change no amino acid (synonymous, non-coding, between genes)."}


def _listed(items, limit: int = 12) -> str:
    items = list(items)
    if not items:
        return "none"
    more = f" … (+{len(items) - limit} more, all in the JSON download)" if len(items) > limit else ""
    return plain(", ".join(items[:limit])) + more


def render_placement(analysis) -> None:
    """The placement on Nextclade's reference tree: clade, Pango lineage (unaliased when it differs),
    node, the resolution note when several nodes tie, the recombinant call, the private mutations by
    Nextclade's classes and the dataset in use (its genome track: :func:`render_genome_track`)."""
    from bertgeom.sars_cov_2.genome.gate import DIVERGENT, NOT_SARS2
    from bertgeom.sars_cov_2.variant.result import recombinant_sentence

    pl = analysis.placement
    if pl is None:
        return
    st.markdown("#### Placement on Nextclade's reference tree",
                help="The nearest node of Nextclade's reference tree by Nextclade's distance (private "
                     "substitutions plus reversions; N, ambiguous and unsequenced sites count neither way), ties "
                     "going to the node with the largest placement prior, as Nextclade 3 does. The node's clade and "
                     "Pango lineage are the sequence's; its private mutations are its differences from that node, "
                     "in Nextclade's classes, and feed the QC score's private-mutations rule and the 'private' "
                     "column of the tables below.")
    gate = analysis.gate
    if gate is not None and gate.verdict in (NOT_SARS2, DIVERGENT):
        st.caption(f"The sequence is {gate.verdict}: its nearest node below is where it lands, not a lineage it "
                   "belongs to.")
    cls = CLASS_DISPLAY.get(pl.cls, pl.cls)
    named = ("" if cls.lower() in pl.clade_display.lower() else  # "21H (Mu)" already says Mu
             f" (spike: {plain(cls)})" if pl.clade == "recombinant" else f" ({plain(cls)})")
    unaliased = f" (unaliased {plain(pl.unaliased)})" if pl.unaliased and pl.unaliased != pl.lineage else ""
    st.markdown(f"Clade **{plain(pl.clade_display)}**{named} · Pango lineage **{plain(pl.lineage or 'n/a')}**"
                f"{unaliased} · node {plain(pl.node)}")
    note = pl.resolution_note()
    if note:
        st.info(plain(note), icon=":material/account_tree:")
    rec = recombinant_sentence(pl)
    if rec:
        st.warning(plain(rec), icon=":material/call_split:")
    pm = pl.private
    st.markdown(f"**Private mutations** against this node: **{pm.total}** · Nextclade's distance {pl.distance} "
                f"over {pl.called:,} read bases · {pl.divergence_per_kb:.1f} private per kb",
                help="Nextclade's classes: a *reversion* is a change of the node where the sequence reads the "
                     "reference base (named with the node's base first, T241C for C241T); a *labelled* substitution "
                     "is one the dataset's mutation labels name, with the clades that carry it (a hint of "
                     "contamination, co-infection or recombination); *unlabelled* ones are new; deletion ranges "
                     "are deletions the node does not carry.")
    labelled = [f"{m} ({', '.join(c[:3])}{f' +{len(c) - 3}' if len(c) > 3 else ''})" for m, c in pm.labeled]
    st.caption("\n".join(f"- **{label}** ({len(items)}): {_listed(items)}" for label, items in (
        ("reversions", pm.reversions), ("labelled", labelled), ("unlabelled", pm.unlabeled),
        ("deletion ranges", pm.deletion_ranges))))
    st.caption(f"Placed on {plain(pl.dataset)}.")


def render_genome_track(analysis) -> None:
    """The sequence along the genome against its nearest tree node: its changes (private, reversions,
    on the node's path), what it does not read, and each recombinant breakpoint interval with its parents."""
    from bertgeom.sars_cov_2.variant.figures import genome_track
    from bertgeom.sars_cov_2.variant.result import genome_marks

    pl = analysis.placement
    if pl is None:
        return
    st.markdown("#### Along the genome")
    chart(genome_track(**genome_marks(analysis)), "w_genome_track")
    st.caption(f"Every nucleotide change against Wuhan-Hu-1, sorted against the nearest tree node "
               f"({plain(pl.lineage or pl.node)}): private (not on the node), reversions (a change of the node "
               "that the sequence does not carry) and the changes on the node's path; grey where the sequence is "
               "not read (N or not covered)"
               + ("; shaded orange, each breakpoint interval, from the last site that favours the parent before it "
                  "to the first that favours the parent after it (named above each part)"
                  if pl.recombinant and pl.recombinant.parents else "") + ".")


def render_qc_score(analysis) -> None:
    """Nextclade's QC score (its six rules): overall status and score, and one row per rule."""
    q = analysis.qc_score
    if q is None:
        return
    from bertgeom.sars_cov_2.variant.result import qc_score_shown

    st.markdown(f"##### QC score (Nextclade's rules): **{status_badge(q.status)}** · {qc_score_shown(q.score):.1f}",
                help="The six rules of Nextclade's QC with the parameters of its SARS-CoV-2 dataset (pathogen.json, "
                     "shipped as data), scored as its documentation describes (not its code): each rule scores 0 "
                     "(clean) to 100 (the 'bad' threshold) and beyond; overall = sum of squared rule scores / 100; "
                     "good < 30, mediocre < 100, bad otherwise. Missing data: (N - 300) x 100 / 2700 over the whole "
                     "genome; mixed sites: 10 per 100; private mutations (nucleotides): 4 per substitution seen in "
                     "another clade, 1 per other substitution, 1 per deletion range, 6 per reversion, minus 8 "
                     "typical, x 100 / 24; SNP clusters: 50 per cluster of more than 6 private substitutions in "
                     "100 nt; frameshifts and premature stops: 75 each, except the ~320 frameshifts and 90 stops "
                     "the dataset lists as known (Mu's ORF3a:257-276, Alpha's ORF8:Q27* ...).")
    for r in q.rules.values():
        st.caption(f"• **{r.name}** — {status_badge(r.status)} ({qc_score_shown(r.score):.1f}): {r.message}")
    genome_cov = 1 - q.rules["missing data"].count / 29903
    if genome_cov < 0.5:
        st.caption(f"ℹ️ The sequence covers {genome_cov:.0%} of the genome, so missing data rates it bad, as in "
                   "Nextclade; the spike card above is what the model's input depends on.")


def _gene_label(analysis, gene: str) -> str:
    if gene == "nuc":
        return f"other nt ({len(analysis.mutations.other_nucleotide)})"
    return f"{gene} ({len(analysis.mutations.genes[gene].events)})"


#: The mutation table's columns: "carried by" (up to eight class names) gets the room, the short ones are
#: narrow (its cells were clipped at 1400 px).
_MUTATION_COLUMNS = {
    "carried by": st.column_config.TextColumn(width="large"),
    "kind": st.column_config.TextColumn(width="small"),
    "position": st.column_config.NumberColumn(width="small"),
    "private": st.column_config.TextColumn(width="small"),
}


def render_mutation_tables(analysis, pred: str, rule_call: str | None = None) -> None:
    """The mutation table of one gene at a time (a selector, S first), with the gene's called share,
    frameshifts and premature stops; rows private to the nearest tree node are marked, and the rows
    characteristic of the predicted class are shaded."""
    from bertgeom.sars_cov_2.variant.result import defining_flag, mutation_rows, private_column

    st.markdown("#### Mutations by gene")
    rep = analysis.mutations
    genes = ["S"] + [g for g in rep.genes if g != "S"] + ["nuc"]
    labels = {g: _gene_label(analysis, g) for g in genes}
    gene = st.segmented_control("Gene", genes, default="S", format_func=labels.get, key="w_gene",
                                label_visibility="collapsed") or "S"
    col = private_column(analysis)
    rows, missing = mutation_rows(analysis, pred, rule_call, gene=gene)
    if gene == "nuc":
        st.caption(_GENE_NOTE["nuc"] + " Changes in the first 100 and last 200 bases are not judged private.")
    else:
        gr = rep.genes[gene]
        n_private = sum(r[col] == "yes" for r in rows)
        from bertgeom.sars_cov_2.genome.qc import known_frameshift

        shifts = [f"{gene}:{f}" + (" known, no QC points" if known_frameshift(gene, f) else "") for f in gr.frameshifts]
        st.caption(f"{gene}: {counted(len(gr.events), 'amino-acid change')} against Wuhan-Hu-1 "
                   f"· coverage {gr.coverage:.1%} "
                   f"(called bases) · {counted(len(gr.frameshifts), 'frameshift')}"
                   + (f" ({', '.join(shifts)})" if shifts else "")
                   + f" · {counted(len(gr.stops), 'premature stop')}"
                   + (f" ({', '.join(gr.stops)})" if gr.stops else "")
                   + f" · {n_private} private")
    if gene != "nuc" and rep.genes[gene].coverage == 0:
        st.info(f"The sequence does not read {gene} (all N or not covered), so its mutations cannot be read.")
    elif rows:
        frame = pd.DataFrame(rows)
        flag = defining_flag(pred)
        st.dataframe(frame.style.apply(lambda r: ["background-color: #fde2d9" if r[flag] else "" for _ in r], axis=1),
                     hide_index=True, width="stretch", column_config=_MUTATION_COLUMNS)
    else:
        st.write(f"No change in {gene} against Wuhan-Hu-1." if gene != "nuc" else "No such nucleotide change.")
    st.caption("Compared with the Wuhan-Hu-1 reference (MN908947.3) and the genes of Nextclade's SARS-CoV-2 "
               "annotation (ORF10 as RefSeq has it, never private), named as Nextclade names them (S:H69-, "
               "S:214:EPE, 21765-21770, ORF3a:257-276); 'carried by' lists the classes whose characteristic table "
               "or clade profiles hold exactly this change (not another change at the same site); 'private' = one "
               "of its nucleotides differs from the nearest node of Nextclade's tree ("
               + (plain(f"{analysis.placement.lineage}, {analysis.placement.node}") if analysis.placement else "n/a")
               + "; see the placement above).")
    if missing and (gene == "nuc" or rep.genes[gene].coverage > 0):  # an unread gene misses everything: said above
        st.caption("Characteristic mutations expected but missing: " + "; ".join(missing))


__all__ = ["render_genome_track", "render_mutation_tables", "render_placement", "render_qc_score"]
