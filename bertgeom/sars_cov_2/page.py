"""Variant Classifier: paste a SARS-CoV-2 genome, see its variant predicted and explained."""

import json

import numpy as np
import pandas as pd
import streamlit as st

from bertgeom.figures.base import probability_bars, probability_label
from bertgeom.runtime import import_in_background
from bertgeom.sars_cov_2.variant.figures import layer_strip, spike_track
from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY
from bertgeom.sars_cov_2.genome.gate import UNREAD
from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID, genome_analysis
from bertgeom.models import REGISTRY, ModelLoadError, resolve_spec
from bertgeom.inputs import InputError
from bertgeom.ui.cache import cached_model, get_record_trace, paste_records
from bertgeom.sars_cov_2.variant.spec import demo_genomes
from bertgeom.safety import csv_frame
from bertgeom.safety import plain
from bertgeom.sars_cov_2.ui.cache import (
    MAX_BATCH_RECORDS,
    batch_chunks,
    classify_chunk,
    digests,
    name_rows_apart,
    integrated_gradients_for,
    logits_for,
)
from bertgeom.ui.workqueue import BATCH, call_heavy
from bertgeom.ui.names import input_notes, note_line
from bertgeom.sars_cov_2.ui.sections import (
    render_genome_track,
    render_mutation_tables,
    render_placement,
    render_qc_score,
    verdict_badge,
)
from bertgeom.sars_cov_2.genome.qc import PARTIAL
from bertgeom.ui.widgets import chart
from bertgeom.probabilities import class_probabilities
from bertgeom.sars_cov_2.variant.whatif import parse_what_if, what_if_frame, what_if_label
from bertgeom.sars_cov_2.variant.explain import (
    apply_changes,
    attention_rollout,
    cls_attention_by_layer,
    reversion_changes,
    revertible_events,
)
from bertgeom.sars_cov_2.variant.result import (
    batch_table,
    csv_bytes,
    mutation_events,
    mutation_tokens,
    qc_verdicts,
    result_record,
    result_row,
    what_if_record,
    second_opinion,
    spike_bands,
)
from bertgeom.tables import counted

st.title("Variant Classifier")
st.caption(
    "Paste, upload or pick a genome in the sidebar. The spike gene is cut out by aligning to "
    "Wuhan-Hu-1 (MN908947.3) with minimap2 — the paper used BWA on 150-nt chunks — then read as "
    "12-mers with stride 9 by a BERT fine-tuned on open data."
)


def _use_example(i: int) -> None:
    text = demo_genomes()[i]["text"]
    st.session_state["genome_value"] = text
    st.session_state["w_genome"] = text


examples = demo_genomes()
cols = st.columns(len(examples))
for i, (col, g) in enumerate(zip(cols, examples)):
    col.button(CLASS_DISPLAY.get(g["class"], g["class"]), key=f"w_example_{i}", on_click=_use_example,
               args=(i,), help=f"Example: {g['accession'] or g['name']} ({g['clade']}, {g['country'] or 'n/a'}, "
                               f"{g['date'] or 'date n/a'}) — {g['source']}", width="stretch")

model_id = st.session_state["model_id"]
try:
    spec = resolve_spec(model_id)
except ModelLoadError:
    spec = None
if spec is None or spec.input_kind != "spike":
    if VARIANT_MODEL_ID in REGISTRY:
        st.info("This page needs the SARS-CoV-2 variant model.")
        if st.button("Switch to the variant model"):
            st.session_state["model_id"] = VARIANT_MODEL_ID
            st.rerun()
    else:
        st.warning("The variant model's weights are not installed, so genomes cannot be classified here.")
    st.stop()

#: The batch table's columns: the name pinned and whole while the 17 columns scroll sideways, each other
#: column as wide as its cells, so the calls, lineage and QC verdicts fit at 1400 px (they were cut at the edge).
#: The order on screen (the CSV keeps its own): what a Nextclade user reads first (clade, lineage, QC)
#: beside the BERT's call, then the rule call and the per-gene QC that need the scroll.
BATCH_ORDER = ("name", "BERT call", "confidence", "clade", "lineage", "QC status", "QC score", "recombinant",
               "rule call", "agree", "spike QC", "genome QC", "mutations", "gate", "notes", "error")
BATCH_COLUMNS = {  # widths in pixels, from the longest usual cell ("GH / pre-VOC", "21G (Lambda)", "BA.2.75.2")
    "name": st.column_config.TextColumn(pinned=True, width=240),
    "BERT call": st.column_config.TextColumn(width=95),
    "confidence": st.column_config.TextColumn(width=78),
    "rule call": st.column_config.TextColumn(width=95),
    "agree": st.column_config.TextColumn(width=55, help="Does the BERT call agree with the rule call?"),
    "clade": st.column_config.TextColumn(width=105),
    "lineage": st.column_config.TextColumn(width=85),
    "recombinant": st.column_config.TextColumn(width=105, help="The parents, when the placement finds a "
                                               "recombinant; its breakpoints are in the CSV and the genome view."),
    "QC score": st.column_config.NumberColumn(width=75, help="Nextclade's overall QC score (0 is best)."),
    "QC status": st.column_config.TextColumn(width=80, help="Nextclade's status: good, mediocre or bad."),
    "spike QC": st.column_config.TextColumn(width=75),
    "genome QC": st.column_config.TextColumn(width=80),
    "mutations": st.column_config.NumberColumn(width=75),
}

try:
    loaded = cached_model(model_id)
except ModelLoadError as exc:  # a broken model folder (custom models on): one sentence, as the other pages
    st.error(plain(exc))
    st.stop()
text = (st.session_state.get("genome_value") or "").strip()
if not text:  # only the genome in the box is ever shown: an empty box shows how to start, nothing else
    link_note = st.session_state.get("_link_note")
    if link_note and link_note[1] == (st.session_state.get("text_value"), st.session_state.get("genome_value")):
        st.warning(link_note[0], icon=":material/link_off:")
    st.info("**To start**, paste a SARS-CoV-2 genome (FASTA or the bare sequence; whole genome, partial or "
            "spike only) into the sidebar's box and press Ctrl+Enter, upload a FASTA file there (one or many "
            "records, .gz and .xz too), or click one of the example genomes above.", icon=":material/start:")
    st.stop()
try:  # the paste read once into records (name, cleaned sequence, reading notes, digest): the table,
    # the trace and the notes below all read these, keyed by each record's digest
    records = paste_records(loaded, text)
except InputError as exc:
    st.error(plain(exc))
    st.stop()

if len(records) > 1:
    st.subheader(f"{len(records)} records")
    if len(records) > MAX_BATCH_RECORDS:
        st.warning(f"The table covers the first {MAX_BATCH_RECORDS} records, to keep the app responsive for "
                   "everyone; classify larger files with `python -m bertgeom classify FILE --out table.csv`.")
    # chunk by chunk, each a pure cached call taking its own heavy-work slot (a single genome waiting
    # elsewhere goes between two chunks); the progress bar and any queue notice are the page's own
    chunks = batch_chunks(records, MAX_BATCH_RECORDS)
    n_rows = sum(len(c) for c in chunks)
    bar = st.progress(0.0, text=f"Classifying {n_rows} records…")
    rows: list[dict] = []
    for chunk in chunks:
        rows += call_heavy(classify_chunk, loaded, digests(chunk), chunk, what="classifying the records",
                           priority=BATCH)
        bar.progress(len(rows) / n_rows, text=f"Classified {len(rows)} of {n_rows} records…")
    bar.empty()
    rows, renamed = name_rows_apart(rows)  # records sharing a name: name, name#2 (original_name keeps the header's)
    # the table's cells as the CSV writes them (a formula-like name gets its apostrophe): Streamlit's
    # own table download writes the cells it is given
    table = csv_frame(batch_table(rows))
    if renamed:
        st.caption("ℹ️ " + plain(renamed))
    st.caption("One row per record (sortable). Click a row to open that genome's full view below."
               + (" The table's forward passes run in bf16 (this CPU has bf16 units), the genome view in fp32, "
                  "so a probability may differ in its last digit." if rows and rows[0].get("model_precision") == "bf16"
                  else ""))
    event = st.dataframe(table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                         key="w_batch_table", column_config=BATCH_COLUMNS,
                         column_order=[c for c in BATCH_ORDER if c in table.columns]  # a new column: at the end,
                         + [c for c in table.columns if c not in BATCH_ORDER])  # never hidden
    st.download_button("Download all predictions (CSV)", csv_bytes(rows), "predictions.csv", "text/csv")
    placed_on = sorted({r["nextclade_dataset"] for r in rows if r.get("nextclade_dataset")})
    if placed_on:  # lineage and recombinant columns: from the placement on this tree
        st.caption("Lineages, clades and recombinants from the placement on " + plain(", ".join(placed_on)) + ".")
    picked = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    # a row of an earlier, longer table: the first
    chosen = int(picked[0]) if picked and int(picked[0]) < len(rows) else 0
    if rows[chosen].get("error"):
        st.error(plain(f"Record '{rows[chosen]['name']}' cannot be shown: {rows[chosen]['error']}"))
        st.stop()
    record = records[chosen]
else:
    record = records[0]

try:
    trace = get_record_trace(loaded, record)
except InputError as exc:
    st.error(plain(exc))
    st.stop()
analysis = genome_analysis(trace.encoded)
probs = class_probabilities(loaded, trace.logits)  # calibrated: the warning below reads these
labels = list(trace.labels)
pred = trace.predicted
confidence = float(probs.max())
qc = analysis.qc



def result_downloads(notes: list[str], what_if: dict | None = None) -> None:
    """The JSON and CSV of this genome's result, carrying what the screen says: the reading notes,
    the model's and the dataset's versions, and the what-if changes with the call after them."""
    c1, c2 = st.columns(2)
    c1.download_button("Download result (JSON)", json.dumps(result_record(
        loaded, analysis, pred, labels, probs, notes=notes, what_if=what_if), indent=1).encode(),
        "variant_result.json", "application/json")
    c2.download_button("Download result (CSV)", csv_bytes([result_row(
        loaded, analysis, pred, labels, probs, notes=notes, what_if=what_if)]), "variant_result.csv", "text/csv")


gate = analysis.gate
no_call = gate is not None and not gate.passed  # outside the model's world: no class probability as a call
if no_call:  # above everything else about this record
    st.error(f"**{gate.verdict}** — {plain(gate.reason)} ({gate.summary().split(': ', 1)[1]}; thresholds in "
             "docs/methods.md, \"Which sequences get a call\".)", icon=":material/block:")
st.subheader(plain(analysis.name), anchor=False)
# the record's reading notes (RNA input: U read as T, ...) first, as on every page that takes the same paste
resolution = analysis.placement.resolution_note() if analysis.placement is not None else ""
shown_notes = input_notes(trace.encoded.notes, record.notes)  # the downloads carry the same notes
for note in shown_notes:
    if note != resolution:  # said in the placement section, beside the lineage it qualifies
        st.caption(note_line(note))

left, right = st.columns([2, 3], gap="large")
with left:
    st.markdown("#### Quality control (spike)")
    st.markdown(f"**Verdict: {verdict_badge(qc.verdict, icon=True)}**")
    c1, c2 = st.columns(2)
    c1.metric("Spike coverage", f"{qc.coverage:.1%}", help="Called bases: a base or a deletion was read there.")
    c2.metric("N in spike", f"{qc.n_share:.1%}", help="N or not covered: 100% minus the coverage.")
    c1.metric("Ambiguous bases", qc.ambiguous)
    c2.metric("Frameshifts", len(qc.frameshifts))
    c1.metric("Private mutations", len(qc.private), help="Spike changes that differ from the nearest node of "
              "Nextclade's reference tree" + (f" ({analysis.placement.lineage})" if analysis.placement else "")
              + ": the S rows marked private below.")
    unread = gate.unread_share if gate is not None else (analysis.unk_rate or 0)
    c2.metric("Unread k-mers", f"{unread:.1%}", help="The model's 12-mers holding N (not sequenced) or unknown to "
              f"its vocabulary ({(analysis.unk_rate or 0):.1%} unknown); above 50% there is no call.")
    for reason in qc.reasons:
        st.caption(f"• {reason}")
    gqc = analysis.genome_qc
    if gqc is not None:
        st.markdown("##### Whole genome", help="Checks of the whole sequence, kept apart from the spike checks "
                    "above: the model reads only the spike, so these do not change its input.")
        if gqc.verdict == PARTIAL:
            st.caption(f"ℹ️ {gqc.reasons[0].capitalize()}.")
        else:
            st.markdown(f"Verdict: **{verdict_badge(gqc.verdict)}** · coverage {gqc.coverage:.1%} · "
                        f"{gqc.missing:,} bases missing · {gqc.ambiguous} ambiguous · "
                        f"{counted(len(gqc.frameshifts), 'frameshift')} (known ones apart)")
            for reason in gqc.reasons:
                st.caption(f"• {reason}")
    render_qc_score(analysis)
    with st.expander("The three QC verdicts side by side"):
        st.caption("Spike QC judges the model's input; genome QC and the QC score judge the rest of the sequence, "
                   "which the model never reads, so a genome can pass one and fail another.")
        st.table(pd.DataFrame(qc_verdicts(analysis)).set_index("check"))
with right:
    st.markdown("#### Prediction")
    if no_call:
        st.markdown("### No call")
        st.caption(plain(gate.reason) + (
            " The placement, the QC and the mutation tables on this page are read from the rest of the sequence; "
            "the model's probabilities are not shown." if gate.verdict == UNREAD else
            " The QC and the mutation tables on this page are still computed against Wuhan-Hu-1, for what they "
            "are worth; the model's probabilities are not shown."))
        opinion = None
    else:
        min_conf = st.slider("Warn below this confidence", 0.5, 0.99, 0.9, 0.01, key="w_min_conf")
        st.markdown(f"### {plain(CLASS_DISPLAY.get(pred, pred))} — {probability_label(confidence)}")  # labels are data
        opinion = second_opinion(analysis, pred, confidence, min_conf)
        mark = {True: ":green[:material/check_circle: agrees]", False: ":red[:material/error: disagrees]",
                None: ":gray[:material/help: not comparable]"}[opinion.agrees]
        st.markdown(f"**Second opinion** (rule-based, from each class's characteristic spike mutations): "
                    f"**{opinion.display}** — {opinion.evidence}, {mark}",
                    help="The table of characteristic mutations ships with the app "
                         "(bertgeom/data/definitions/characteristic_mutations.tsv): mutations shared by every "
                         "Nextstrain clade of a class, plus those carried by >= 75% of its training genomes. "
                         "A class is called when >= 60% of its readable markers (and at least 3) are present.")
        if qc.verdict == "fail":
            st.warning("Low confidence: the sequence fails QC, so treat this prediction with caution.")
        if opinion.warning:
            (st.error if opinion.agrees is False else st.warning)(plain(opinion.warning))
        chart(probability_bars(labels, {"probability": probs}, display=CLASS_DISPLAY, highlight=pred), "w_probs")
    render_placement(analysis)

render_genome_track(analysis)

# ---- mutations -------------------------------------------------------------------------------
report = analysis.mutations
aligned = analysis.spike.aligned
# below the gate the tables shade what characterises the nearest clade's class, not the model's call
render_mutation_tables(analysis, analysis.clade.cls if no_call else pred, opinion.call if opinion else None)
if no_call:  # nothing below reads anything but the model's call: the downloads say why there is none
    st.caption("No track of which parts of the spike drove the call, and no what-if: both read the model's call, "
               "and there is none for this sequence.")
    result_downloads(shown_notes)
    st.stop()

# ---- explanation track ----------------------------------------------------------------------
st.markdown("#### Which parts of the spike drove the prediction?")
axis = trace.encoded.axis_labels
domains = trace.encoded.domains
cls_att = cls_attention_by_layer(trace)
rollout = attention_rollout(trace)
c1, c2 = st.columns([3, 1])
import_in_background("captum.attr")  # the checkbox below then starts without captum's ~0.5 s import
with c2:
    layer = st.number_input("[CLS] attention of layer", 1, trace.num_layers, trace.num_layers, key="w_cls_layer")
    use_ig = st.checkbox("Integrated gradients", value=False, key="w_ig",
                         help="Attribution of each k-mer to the predicted class (Gauss-Legendre quadrature, "
                              "refined until the attributions add up to f(input) - f(baseline) within 5%). "
                              "About 2-3 s of computing on a 2-core server for a typical genome when nobody "
                              "else is computing (then it takes every core; about twice as long on one), "
                              "longer when the check needs more nodes: the node cap below trades exactness "
                              "for time.")
    ig_nodes = st.select_slider("Integrated gradients: nodes at most", [8, 16, 32, 64, 128], value=128,
                                key="w_ig_nodes",
                                help="Integrated gradients starts at 16 Gauss-Legendre nodes in segments of 4 "
                                     "(fewer if capped), narrow where a quick probe sees the logit move along the "
                                     "path, and halves the segments whose completeness check fails "
                                     "until the gap is within 5% or this cap is reached; the line under the track "
                                     "says how complete the result is.")
tracks = {f"[CLS] attention, layer {layer}": cls_att[layer - 1], "attention rollout": rollout[-1]}
if use_ig:
    ig, ig_summary, ig_complete = call_heavy(integrated_gradients_for, loaded, trace.encoded.input_ids,
                                             labels.index(pred), min(16, ig_nodes), ig_nodes,
                                             what="integrated gradients")
    tracks["integrated gradients"] = ig
mut_tokens = mutation_tokens(report, loaded.tokenizer, len(axis))
with c1:
    chart(spike_track(tracks, axis, domains, mutation_tokens=mut_tokens,
                      bands=spike_bands(analysis, loaded.tokenizer.stride, len(axis))), "w_track")
if use_ig:
    (st.caption if ig_complete else st.warning)(f"Integrated gradients: {ig_summary}.")
with st.expander("[CLS] attention of every layer"):
    chart(layer_strip(cls_att, axis), "w_strip")

# ---- in-silico mutagenesis -------------------------------------------------------------------
st.markdown("#### What if? In-silico mutagenesis")
st.caption("Revert mutations to the reference or add substitutions, and see the probabilities change. "
           "Changes are written at reference coordinates, so no other token moves.")
# one entry per event of the mutation table, named as there (S:H69- + S:V70-, S:N501Y), however many bases it spans
revertible = revertible_events(report, mutation_events(report))
# one above the other at the page's width: side by side, the Revert box showed one of two chips
revert = st.multiselect("Revert", range(len(revertible)), key="w_revert",
                        format_func=lambda i: what_if_label(revertible[i]) if i < len(revertible) else "?",
                        help="Type a name from the mutation table to find it, in bertgeom's or Nextclade's form "
                             "(del69-70 or H69-, N501Y, del21765-21770 or 21765-21770).")
add_text = st.text_input("Add changes (e.g. A23063T, 22577GG, 21765-21770)", key="w_add",
                         help="Substitutions as Nextclade writes them (A23063T or 23063T), a run of bases "
                              "(22577GG), one deleted base (21765-) or a deletion range (21765-21770 or "
                              "del21765-21770); separate entries by spaces or commas.")
changes, n_events = [], 0
for i in (i for i in revert if i < len(revertible)):
    n_events += 1
    for m in revertible[i].mutations:
        changes += reversion_changes(aligned, m)
added, n_added, problems = parse_what_if(add_text)
changes += added
n_events += n_added
for p in problems:
    st.warning(plain(p), icon=":material/edit_off:")  # one entry the box cannot read; the others still count
if changes:
    after_logits = logits_for(loaded, apply_changes(aligned, changes))
    st.dataframe(what_if_frame(loaded, trace.logits, after_logits, [CLASS_DISPLAY.get(c, c) for c in labels]),
                 hide_index=True, width="stretch")
    new_probs = class_probabilities(loaded, after_logits)
    new_pred = labels[int(np.argmax(new_probs))]
    st.markdown(f"Prediction after {counted(n_events, 'change')}: **{plain(CLASS_DISPLAY.get(new_pred, new_pred))}** "
                f"({probability_label(new_probs.max())})")
    st.caption("Log-odds ln(p / (1 − p)) of the calibrated probability: they keep moving where the probability "
               "shows as > 99.9% (+2.3 is ten times the odds).")

# ---- downloads -------------------------------------------------------------------------------
result_downloads(shown_notes, what_if_record([what_if_label(revertible[i]) for i in revert if i < len(revertible)],
                                             add_text or "", problems, n_events if changes else 0, labels,
                                             new_probs if changes else ()))
with st.expander("Model card"):
    card = loaded.extra.get("card") or ""
    if not card:
        st.markdown("No model card was found next to the weights.")
    elif loaded.spec.id == VARIANT_MODEL_ID:  # the package's own card
        st.markdown(card)
    else:  # a custom folder's card is shown as its text: its markdown could fetch images or form links
        st.text(card)
