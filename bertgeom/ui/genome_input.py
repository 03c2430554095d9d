"""Sidebar input for spike models: paste, upload or pick an example genome."""

from __future__ import annotations

import streamlit as st

from bertgeom.genome.classes import CLASS_DISPLAY

#: Largest upload read into the genome box (the server's own limit is in config.toml).
MAX_UPLOAD_BYTES = 20 * 1024 * 1024


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


def _on_example() -> None:
    idx = st.session_state.get("w_genome_example")
    if idx is not None and idx >= 0:
        _set_genome(demo_genomes()[idx]["text"])


def _on_upload() -> None:
    up = st.session_state.get("w_genome_upload")
    if up is None:
        return
    data = up.getvalue()
    if len(data) > MAX_UPLOAD_BYTES:
        st.session_state["genome_upload_error"] = f"'{up.name}' is larger than {MAX_UPLOAD_BYTES // 2**20} MB."
        return
    st.session_state.pop("genome_upload_error", None)
    from bertgeom.genome.fasta import SequenceInputError, parse_sequences

    try:
        records = parse_sequences(data)
    except SequenceInputError as exc:
        st.session_state["genome_upload_error"] = f"'{up.name}': {exc}"
        return
    text = "\n".join(f">{r.name}\n{r.sequence}" for r in records)
    _set_genome(text)


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
    st.text_area("Genome or spike sequence (FASTA or bare)", key="w_genome", on_change=_on_genome_change,
                 height=120, help="Whole genome, partial or spike-only; RNA (U) and lower case are fine.")
    st.file_uploader("…or upload FASTA (.fasta, .fa, .gz, .xz)", type=["fasta", "fa", "fna", "txt", "gz", "xz"],
                     key="w_genome_upload", on_change=_on_upload)
    if st.session_state.get("genome_upload_error"):
        st.error(st.session_state["genome_upload_error"])
    return st.session_state["genome_value"]
