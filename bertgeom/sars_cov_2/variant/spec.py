"""The SARS-CoV-2 genome as an input kind: everything the generic pages ask about it, said once.

:data:`GENOME` is the :class:`~bertgeom.inputs.InputKind` of the case study's models: its parser
(a paste read once into records) and encoder (align, cut the spike, tokenise), its example
genomes and shipped sets (open INSDC genomes redistributed by Nextstrain), its class names, its
token domains (the spike's domains, in order), the pages it enables (the Variant Classifier) and
what batch precompute reads (:data:`~bertgeom.sars_cov_2.variant.precompute.GENOME_PRECOMPUTE`).
:func:`register` hands the family to the library: the loader, the genome kind and, when its
weights are present, the shipped model as the default of the picker. Nothing registers itself on
import; ``bertgeom/__init__.py`` calls :func:`register` once for the shipped family.

Where it sits: the variant plug-in, above the genome pipeline (:mod:`bertgeom.sars_cov_2.genome`) and the
generic input layer (:mod:`bertgeom.inputs`).
"""

from __future__ import annotations

import csv
import io
from functools import lru_cache
from pathlib import Path

from bertgeom.sars_cov_2.genome.classes import CLASS_DISPLAY, CLASSES
from bertgeom.sars_cov_2.genome.reference import DOMAIN_ORDER
from bertgeom.extensions import (PageSpec, StartExample, TourStep, register_page, register_start_example,
                                 register_tour_step)
from bertgeom.inputs import Example, InputError, InputItem, InputKind, KindWords, register_input_kind
from bertgeom.models import REGISTRY, register_commands, register_loader
from bertgeom.sars_cov_2.variant import (
    INPUT_KIND,
    MAX_GENOME_INPUT_BYTES,
    VARIANT_DIR,
    VARIANT_MODEL_ID,
    _recognise,
    encode_genome_record,
    load_variant,
    parse_genome_records,
    variant_spec,
)
from bertgeom.sars_cov_2.variant.precompute import GENOME_PRECOMPUTE
from bertgeom.tables import counted, word_for

#: Upload file types of genome boxes (plain or compressed FASTA).
FASTA_TYPES = ("fasta", "fa", "fna", "txt", "gz", "xz", "bz2")  # what the CLI reads, bz2 included


@lru_cache(maxsize=1)
def demo_genomes() -> tuple[dict, ...]:
    """The shipped example genomes (one per class) with provenance."""
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

    return tuple(
        {"name": rec.name, "text": f">{rec.name}\n{rec.sequence}", "class": meta.get("class", ""),
         "accession": meta.get("insdc_accession", ""), "date": meta.get("date", ""),
         "country": meta.get("country", ""), "clade": meta.get("clade", ""), "source": meta.get("source", "")}
        for rec, meta in load_demo_genomes()
    )


def example_label(g: dict) -> str:
    """The picker's line for a demo genome: class — accession (clade)."""
    acc = g["accession"] or g["name"]
    return f"{CLASS_DISPLAY.get(g['class'], g['class'])} — {acc} ({g['clade']})"


def genome_examples() -> tuple[Example, ...]:
    """The demo genomes as sidebar examples; the last (Omicron) is the richest first view."""
    return tuple(Example(example_label(g), g["text"], g["class"] or None) for g in demo_genomes())


@lru_cache(maxsize=2)
def genome_set(which: str = "validation_small") -> tuple[InputItem, ...]:
    """Shipped real genomes with their class: ``validation_small`` (~35) or ``demo`` (one per class).
    Read once per process (immutable items): every set view asked for it several times per rerun,
    and decompressing and parsing the ~1 MB of FASTA took ~0.05 s each time."""
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes, load_validation_small

    pairs = load_validation_small() if which == "validation_small" else load_demo_genomes()
    return tuple(InputItem(rec.name, f">{rec.name}\n{rec.sequence}", meta.get("class") or None) for rec, meta in pairs)


def labelled_fasta_set(fasta: bytes | str, labels_tsv: bytes | str | None = None) -> tuple[InputItem, ...]:
    """A user's set: FASTA records, labelled from a TSV (``name`` + ``label``/``class`` columns)
    or, without a TSV, from a ``|label`` suffix in each header (``>seq1|omicron``). The file is held
    to the one input limit of every uploader (:data:`bertgeom.safety.MAX_INPUT_BYTES`); records
    sharing a name are told apart as name, name#2 (the header stays in the text)."""
    from bertgeom.sars_cov_2.genome.classes import label_to_class
    from bertgeom.sars_cov_2.genome.fasta import SequenceInputError, parse_sequences
    from bertgeom.safety import MAX_INPUT_BYTES, NameDeduper

    try:
        records = parse_sequences(fasta, max_bytes=MAX_INPUT_BYTES)
    except SequenceInputError as exc:
        raise InputError(str(exc)) from None
    labels: dict[str, str] = {}
    if labels_tsv:
        text = labels_tsv.decode("utf-8", "replace") if isinstance(labels_tsv, bytes) else labels_tsv
        reader = csv.DictReader(io.StringIO(text), delimiter="\t")
        col = next((c for c in ("label", "class", "cls") if c in (reader.fieldnames or [])), None)
        if "name" not in (reader.fieldnames or []) or col is None:
            raise InputError("The labels file needs a 'name' column and a 'label' (or 'class') column, tab-separated.")
        labels = {row["name"]: row[col] for row in reader}
    items, unique = [], NameDeduper()
    for rec in records:
        raw = labels.get(rec.name) or (rec.name.rsplit("|", 1)[1] if "|" in rec.name else None)
        label = None
        if raw:
            try:
                label = raw.strip().lower() if raw.strip().lower() in CLASSES else label_to_class(raw.strip())
            except ValueError:
                raise InputError(
                    f"'{raw.strip()[:40]}' (record '{rec.name[:40]}') is not one of the classes "
                    f"{', '.join(CLASSES)} nor a known dataset label."
                ) from None
        items.append(InputItem(unique(rec.name), f">{rec.name}\n{rec.sequence}", label))
    return tuple(items)


def read_upload(name: str, data: bytes) -> tuple[str, str]:
    """``(text, problem)`` of an uploaded file: the readable records as FASTA text (empty when none)
    and one sentence about what could not be read (empty when all was read). Never raises."""
    from bertgeom.sars_cov_2.genome.fasta import RecordError, SequenceInputError, TruncatedInputError, parse_sequences

    if len(data) > MAX_GENOME_INPUT_BYTES:
        return "", f"'{name}' is larger than {MAX_GENOME_INPUT_BYTES // 10**6} MB ({MAX_GENOME_INPUT_BYTES:,} bytes)."
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
            f"'{name}': {counted(len(bad), 'record')} could not be read "
            f"and {word_for(len(bad), 'was', 'were')} left out: "
            + "; ".join(r.message for r in bad[:3]) + (" …" if len(bad) > 3 else ""))
    text = "\n".join(f">{r.name}\n{r.sequence}" for r in records if not isinstance(r, RecordError))
    return text, problem


def domain_token_share(dom: str) -> float:
    """Percentage of the spike's tokens ([CLS] counted, [SEP] not) that lie in the domain ``dom``."""
    from bertgeom.sars_cov_2.genome.kmers import token_axis

    axis = token_axis()
    doms = ["[CLS]" if (not d and i == 0) else d for i, d in enumerate(axis.domain)]
    return 100.0 * sum(d == dom for d in doms[:-1]) / (len(doms) - 1)


def classify_genomes(loaded, genomes, batch_size: int = 16, precision: str = "auto") -> list:
    """Classify SARS-CoV-2 genomes (FASTA text, bytes or a path to a FASTA file; whole, partial or
    spike only) with the variant model ``loaded``: one :class:`bertgeom.sars_cov_2.variant.predict.Prediction`
    per record, in input order (:func:`bertgeom.classify` for this kind). ``precision``: ``fp32``,
    ``bf16`` or ``auto`` (bf16 where the CPU has bf16 units); each prediction records the one used."""
    from pathlib import Path

    from bertgeom.sars_cov_2.genome.fasta import SequenceInputError, parse_sequences
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    if isinstance(genomes, Path):
        genomes = genomes.read_bytes()
    try:
        records = parse_sequences(genomes, tolerant=True)
    except SequenceInputError as exc:
        raise InputError(str(exc)) from None
    return list(classify_stream(loaded, records, batch_size=batch_size, precision=precision))


def choose_backend_ahead(loaded, log=None) -> None:
    """``prepare-sets``' work ahead for a variant model: measure which backend classifies fastest on this
    machine (:func:`bertgeom.sars_cov_2.variant.predict.measure_backends`), once per machine and weights,
    so the page's batches and ``classify`` run it. A failure is logged, never raised."""
    from bertgeom.sars_cov_2.variant.predict import measure_backends, measured_backend_needed

    try:
        if loaded.labels and measured_backend_needed(loaded):
            measure_backends(loaded, log=log)
    except Exception as exc:  # noqa: BLE001 - ahead-of-time work only; auto then follows the CPU rule
        if log:
            log(f"measuring the classifier's backends failed: {exc}")


#: The genome input kind of the case study's models.
GENOME = InputKind(
    name=INPUT_KIND,
    words=KindWords(
        noun="genome",
        plural="genomes",
        box_label="Genome or spike sequence (FASTA or bare)",
        box_help=(f"Whole genome, partial or spike-only; RNA (U) and lower case are fine. Input limit: "
                  f"{MAX_GENOME_INPUT_BYTES // 10**6} MB of sequence, pasted or uploaded (after decompression); "
                  "the page classifies the first 200 records."),
        examples_label="Example genomes (open data)",
        examples_help="Real INSDC genomes redistributed by Nextstrain (MIT); none was used to train the model.",
        upload_label=f"…or upload FASTA (.fasta, .fa, .gz, .xz, .bz2; up to {MAX_GENOME_INPUT_BYTES // 10**6} MB)",
        shipped_set_description="the labelled real genomes shipped with bertgeom (validation_small, held out "
                                "from training)",
        set_upload_label="your own labelled FASTA (header suffix |class, e.g. >seq1|omicron)",
        domain_noun="spike domain",
        token_note="Spike tokens are labelled by amino-acid range; hover shows the spike domain.",
        changed_token_note="their k-mer carries a mutation in one genome only",
        link_send="the FASTA",
    ),
    parse=parse_genome_records,
    encode=encode_genome_record,
    examples=genome_examples,
    shipped_set=genome_set,
    demo_set=lambda: genome_set("demo"),
    read_set=labelled_fasta_set,
    set_upload_types=FASTA_TYPES,
    labelled_uploads=True,
    upload_reader=read_upload,
    upload_types=FASTA_TYPES,
    max_input_chars=MAX_GENOME_INPUT_BYTES,
    class_names=dict(CLASS_DISPLAY),
    featured_class="omicron",  # the paper's figures show Omicron's sequences
    domains=tuple(DOMAIN_ORDER),
    default_domain="RBD",
    domain_share=domain_token_share,
    link_param="genome",
    link_text=False,
    session_key="genome_value",
    sweep_seconds=23.0,
    pages=("classifier",),
    capabilities=frozenset({"aligned_positions", "official_padding", "precomputed_results"}),
    classify=classify_genomes,
    precompute=GENOME_PRECOMPUTE,
    prepare_ahead=choose_backend_ahead,
)


def _add_commands(sub) -> None:
    """The case study's commands (:mod:`bertgeom.sars_cov_2.variant.cli`), imported when the parser is built."""
    from bertgeom.sars_cov_2.variant.cli import register as add

    add(sub)


#: The Variant Classifier page (``bertgeom/sars_cov_2/page.py``), offered with the genome models.
CLASSIFIER_PAGE = PageSpec(key="classifier", title="Variant Classifier", url_path="classifier",
                           script=str(Path(__file__).resolve().parents[1] / "page.py"),
                           icon=":material/coronavirus:", section="Classify",
                           summary="paste a SARS-CoV-2 genome (BERT reads it cut into 12-letter *k-mers*, its "
                                   "tokens): quality check, predicted variant, mutations, and which parts of the "
                                   "spike drove the prediction.")


#: The home page's one-click starts: the shipped Omicron genome on the classifier, an Alpha genome on
#: Attention Heads (examples 7 and 3 of :func:`_examples`).
HOME_STARTS = (
    StartExample("A SARS-CoV-2 genome (the variant BERT of the case study)", "An Omicron genome → Variant Classifier",
                 VARIANT_MODEL_ID, 7, page="classifier"),
    StartExample("A SARS-CoV-2 genome (the variant BERT of the case study)", "An Alpha genome → Attention Heads",
                 VARIANT_MODEL_ID, 3, page="heads"),
)


def _tour_facts(loaded, trace) -> dict:
    """The genome step's numbers: the call and the ranked marker changes
    (:func:`bertgeom.sars_cov_2.variant.whatif.genome_facts`)."""
    from bertgeom.sars_cov_2.variant.whatif import genome_facts

    return genome_facts(loaded, trace)


def _tour_sentence(facts: dict) -> str:
    from bertgeom.sars_cov_2.variant.whatif import genome_sentence

    return genome_sentence(facts)


def _tour_what_if(facts: dict) -> dict[str, str | None]:
    """The picked change's entries in the classifier's *What if?* box (its revert box cleared)."""
    pick = facts["pick"]
    return {"w_add": pick["nucleotides"], "w_revert": None} if pick and pick["nucleotides"] else {}


#: The guided tour's genome step: the demo Omicron genome (example 7) on the Variant Classifier, with the
#: smallest marker change that moves the call in its *What if?* box (``python -m bertgeom tour`` prints
#: the same sentence for docs/guide.md).
TOUR_GENOME_STEP = TourStep(
    "A genome: which change moves the call?", "classifier", VARIANT_MODEL_ID, 7, facts=_tour_facts,
    sentence=_tour_sentence, widget_values=_tour_what_if,
    work_label="Scoring the genome's marker changes with the model…", version=2)


def register() -> InputKind:
    """Register the case study's family with the library (idempotent): the ``variant`` loader with
    its directory recogniser, the genome input kind, its page, commands, home starts and tour step
    and, when its weights are shipped, the variant model as the picker's first and default model.
    Returns the genome kind."""
    register_loader("variant", load_variant, recognise=_recognise)
    register_input_kind(GENOME)
    register_page(CLASSIFIER_PAGE)
    register_commands("sars-cov-2", _add_commands)
    for start in HOME_STARTS:
        register_start_example(start)
    register_tour_step(TOUR_GENOME_STEP)
    if (VARIANT_DIR / "model.safetensors").is_file():
        REGISTRY.add(variant_spec(), first=True)
    return GENOME
