"""Sidebar input for spike models: paste, upload or pick an example genome."""

from __future__ import annotations

import streamlit as st

from bertgeom.genome.classes import CLASS_DISPLAY
from bertgeom.safety import MAX_INPUT_BYTES, plain

from bertgeom.variant import MAX_GENOME_INPUT_BYTES

#: Largest upload file (compressed or not; config.toml's server.maxUploadSize says the same 20 MB):
#: the one input limit of every uploader.
MAX_UPLOAD_BYTES = MAX_INPUT_BYTES
#: Uploads longer than this stay on the server and are not copied into the text box (a browser
#: text area holding megabytes of sequence slows every rerun).
BOX_SHOW_LIMIT = 200_000


@st.cache_data(show_spinner=False)
def demo_genomes() -> list[dict]:
    """The shipped example genomes (one per class) with provenance."""
    from bertgeom.genome.dataset import load_demo_genomes

    return [
        {"name": rec.name, "text": f">{rec.name}\n{rec.sequence}", "class": meta.get("class", ""),
         "accession": meta.get("insdc_accession", ""), "date": meta.get("date", ""),
         "country": meta.get("country", ""), "clade": meta.get("clade", ""), "source": meta.get("source", "")}
        for rec, meta in load_demo_genomes()
    ]


def example_label(g: dict) -> str:
    acc = g["accession"] or g["name"]
    return f"{CLASS_DISPLAY.get(g['class'], g['class'])} — {acc} ({g['clade']})"


def _set_genome(text: str) -> None:
    st.session_state["genome_value"] = text
    st.session_state["w_genome"] = text


def _on_genome_change() -> None:
    st.session_state["genome_value"] = st.session_state["w_genome"]
    st.session_state.pop("genome_upload_note", None)


def _on_example() -> None:
    idx = st.session_state.get("w_genome_example")
    if idx is not None and idx >= 0:
        _set_genome(demo_genomes()[idx]["text"])


def read_upload(name: str, data: bytes) -> tuple[str, str]:
    """``(text, problem)`` of an uploaded file: the readable records as FASTA text (empty when none)
    and one sentence about what could not be read (empty when all was read). Never raises."""
    from bertgeom.genome.fasta import RecordError, SequenceInputError, TruncatedInputError, parse_sequences

    if len(data) > MAX_UPLOAD_BYTES:
        return "", f"'{name}' is larger than {MAX_UPLOAD_BYTES // 2**20} MB."
    problem = ""
    try:
        records = parse_sequences(data, max_bytes=MAX_GENOME_INPUT_BYTES, tolerant=True)
    except TruncatedInputError as exc:
        records, problem = exc.records, f"'{name}': {exc}"
    except SequenceInputError as exc:
        return "", f"'{name}': {exc}"
    if getattr(records, "notice", ""):  # e.g. unreadable bytes after the last gzip member (as the CLI)
        problem = (problem + " " if problem else "") + f"'{name}': {records.notice}"
    bad = [r for r in records if isinstance(r, RecordError)]
    if bad:
        problem = (problem + " " if problem else "") + (
            f"'{name}': {len(bad)} record(s) could not be read and were left out: "
            + "; ".join(r.message for r in bad[:3]) + (" …" if len(bad) > 3 else ""))
    text = "\n".join(f">{r.name}\n{r.sequence}" for r in records if not isinstance(r, RecordError))
    return text, problem


def _on_upload() -> None:
    up = st.session_state.get("w_genome_upload")
    if up is None:
        return
    st.session_state.pop("genome_upload_note", None)
    text, problem = read_upload(up.name, up.getvalue())
    if problem:
        st.session_state["genome_upload_error"] = problem
    else:
        st.session_state.pop("genome_upload_error", None)
    if not text:
        return
    if len(text) <= BOX_SHOW_LIMIT:
        _set_genome(text)
        return
    # large: processed on the server, never pushed into the browser's text box
    st.session_state["genome_value"] = text
    st.session_state["w_genome"] = ""
    st.session_state["genome_upload_note"] = (f"Using the upload '{plain(up.name)}': {text.count('>'):,} records, "
                                              f"{len(text) / 1e6:.1f} M characters, kept on the server (too large "
                                              "for the box). Type or pick an example to replace it.")


def genome_input_box() -> str:
    """Text area + upload + example picker; returns the current genome text."""
    if not st.session_state.get("genome_value"):
        st.session_state["genome_value"] = demo_genomes()[-1]["text"]  # Omicron: a rich first view
    if "w_genome" not in st.session_state:
        st.session_state["w_genome"] = st.session_state["genome_value"]
    examples = demo_genomes()
    st.selectbox("Example genomes (open data)", [-1] + list(range(len(examples))), key="w_genome_example",
                 format_func=lambda i: "— pick an example genome —" if i < 0 else example_label(examples[i]),
                 on_change=_on_example,
                 help="Real INSDC genomes redistributed by Nextstrain (MIT); none was used to train the model.")
    limit = f"{MAX_GENOME_INPUT_BYTES // 2**20} MB"
    st.text_area("Genome or spike sequence (FASTA or bare)", key="w_genome", on_change=_on_genome_change,
                 height=120, max_chars=MAX_GENOME_INPUT_BYTES,
                 help=f"Whole genome, partial or spike-only; RNA (U) and lower case are fine. Input limit: {limit} "
                      "of sequence, pasted or uploaded (after decompression); the page classifies the first 200 records.")
    st.file_uploader(f"…or upload FASTA (.fasta, .fa, .gz, .xz; up to {limit})",
                     type=["fasta", "fa", "fna", "txt", "gz", "xz"], key="w_genome_upload", on_change=_on_upload)
    if st.session_state.get("genome_upload_note"):
        st.caption(st.session_state["genome_upload_note"])
    if st.session_state.get("genome_upload_error"):
        st.error(plain(st.session_state["genome_upload_error"]))
    return st.session_state["genome_value"]
