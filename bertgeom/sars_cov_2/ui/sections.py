"""Sections of the Variant Classifier page built on the genome pipeline's one result object
(:class:`bertgeom.sars_cov_2.genome.pipeline.GenomeAnalysis`): the nearest clade, Nextclade's QC score
rule by rule, and the mutation table of every gene (S first).

Everything shown is read from the analysis; nothing is recomputed here.

References
----------
* Nextclade documentation, "Quality Control" (rules, scores, statuses) and "Mutation calling".
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY

_STATUS = {"good": ":green[good]", "mediocre": ":orange[mediocre]", "bad": ":red[bad]"}
_GENE_NOTE = {"nuc": "Nucleotide changes that change no amino acid (synonymous, non-coding, between genes)."}


def render_nearest_clade(analysis) -> None:
    """One line: the nearest Nextstrain clade, its class, and what private changes are judged against."""
    c = analysis.clade
    if c is None:
        return
    from bertgeom.sars_cov_2.genome.profiles import load_clade_profiles

    prof = load_clade_profiles().profile(c.clade)
    n_genomes = max((r.n_genomes for r in prof.values()), default=0)
    cls = CLASS_DISPLAY.get(c.cls, c.cls)
    named = f" ({cls})" if cls.lower() not in c.display.lower() else ""  # "21H (Mu)" already says Mu
    st.markdown(f"Nearest Nextstrain clade: **{c.display}**{named}",
                help="The clade of the Nextstrain definitions (clades.tsv) whose defining sites the genome matches "
                     "best. Its profile — the changes its definition implies plus those of at least 60% of its "
                     "training genomes — is what 'private' is judged against, in place of the nearest node of "
                     "Nextclade's tree.")
    st.caption(f"{c.matches} of {c.matches + c.mismatches} defining sites match"
               + (f", {c.missing} not read" if c.missing else "")
               + f" · profile: {len(prof)} changes"
               + (f" (definition + {n_genomes} training genome{'s' if n_genomes != 1 else ''})" if n_genomes else
                  " (definition only)"))


def render_qc_score(analysis) -> None:
    """Nextclade's QC score (its six rules): overall status and score, and one row per rule."""
    q = analysis.qc_score
    if q is None:
        return
    st.markdown(f"##### QC score (Nextclade's rules): **{_STATUS.get(q.status, q.status)}** · {q.score:.0f}",
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
        st.caption(f"• **{r.name}** — {_STATUS.get(r.status, r.status)} ({r.score:.0f}): {r.message}")
    genome_cov = 1 - q.rules["missing data"].count / 29903
    if genome_cov < 0.5:
        st.caption(f"ℹ️ The sequence covers {genome_cov:.0%} of the genome, so missing data rates it bad, as in "
                   "Nextclade; the spike card above is what the model's input depends on.")


def _gene_label(analysis, gene: str) -> str:
    if gene == "nuc":
        return f"other nt ({len(analysis.mutations.other_nucleotide)})"
    return f"{gene} ({len(analysis.mutations.genes[gene].events)})"


def render_mutation_tables(analysis, pred: str, rule_call: str | None = None) -> None:
    """The mutation table of one gene at a time (a selector, S first), with the gene's called share,
    frameshifts and premature stops; rows private to the nearest clade are marked, and the rows
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
        st.caption(f"{gene}: {len(gr.events)} amino-acid change(s) against Wuhan-Hu-1 · coverage {gr.coverage:.1%} "
                   f"(called bases) · {len(gr.frameshifts)} frameshift(s)"
                   + (f" ({', '.join(shifts)})" if shifts else "")
                   + f" · {len(gr.stops)} premature stop(s)" + (f" ({', '.join(gr.stops)})" if gr.stops else "")
                   + f" · {n_private} private")
    if gene != "nuc" and rep.genes[gene].coverage == 0:
        st.info(f"The sequence does not cover {gene}, so its mutations cannot be read.")
    elif rows:
        frame = pd.DataFrame(rows)
        flag = defining_flag(pred)
        st.dataframe(frame.style.apply(lambda r: ["background-color: #fde2d9" if r[flag] else "" for _ in r], axis=1),
                     hide_index=True, width="stretch")
    else:
        st.write(f"No change in {gene} against Wuhan-Hu-1." if gene != "nuc" else "No such nucleotide change.")
    st.caption("Compared with the Wuhan-Hu-1 reference (MN908947.3) and the genes of Nextclade's SARS-CoV-2 "
               "annotation (ORF10 as RefSeq has it, never private), named as Nextclade names them (S:H69-, "
               "S:214:EPE, 21765-21770, ORF3a:257-276); 'carried by' lists the classes whose characteristic table "
               "or clade profiles hold exactly this change (not another change at the same site); 'private' = one "
               "of its nucleotides is not in the profile of the nearest clade, "
               f"{analysis.clade.display if analysis.clade else 'n/a'}.")
    if missing:
        st.caption("Characteristic mutations expected but missing: " + "; ".join(missing))


__all__ = ["render_mutation_tables", "render_nearest_clade", "render_qc_score"]
