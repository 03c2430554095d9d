"""What a model reads: user input turned into tokens, by input kind, and the spec of each input kind.

A paste is read once into typed :class:`Record` s by its input kind (:attr:`InputKind.parse`: a
name, the cleaned content, how it was read, a digest that caches key by); a record is read into an
:class:`EncodedInput`: the token ids with where each token came from (character spans for text,
nucleotide spans for a genome) and which tokens are [CLS], [SEP] and punctuation
(:class:`~bertgeom.tokens.TokenKinds`). An :class:`InputKind` (after LIT's specs) describes one
kind of input once: its parser and encoder, its example inputs and shipped sets, its class names,
its token domains and what the pages can offer for it. Generic code (the analyses, sets, figures, pages)
asks the spec, never the kind's name. Text is built in; a plug-in registers its own kind with
:func:`register_input_kind` (``bertgeom.sars_cov_2.variant`` registers the SARS-CoV-2 genome).

Where it sits: above the model registry (:mod:`bertgeom.models`), below the forward pass.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bertgeom.models import PluginRegistry
from bertgeom.tokens import CLARK_PUNCT, TokenKinds
from bertgeom.tables import counted, word_for

if TYPE_CHECKING:
    from bertgeom.models import LoadedModel

#: Upper bound on pasted text, in characters, before tokenisation (bounded work).
MAX_TEXT_CHARS = 20_000


class InputError(ValueError):
    """User input that cannot be analysed; the message is one clear sentence."""


@dataclass(frozen=True)
class InputItem:
    """One input of a set: a display name, the text the model reads, an optional class label."""

    name: str
    text: str
    label: str | None = None


@dataclass(frozen=True)
class Record:
    """One record of a paste, read once by its input kind (:attr:`InputKind.parse`).

    ``name``: the record's name as the user gave it (a FASTA header's first word; ``"input"`` for a
    paste that is one record). ``content``: what the kind's encoder reads, cleaned (a genome's
    upper-case DNA, a text stripped). ``notes``: how the record was read (``RNA input: U read as T``),
    shown beside anything computed from it. ``error``: why the record cannot be read (its content is
    then empty; it keeps its place among the others). ``digest``: a hash of all of it, what caches
    of computations on the record are keyed by (two records with one digest read the same).
    """

    name: str
    content: str
    notes: tuple[str, ...] = ()
    error: str = ""
    digest: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "notes", tuple(str(n) for n in self.notes))
        payload = json.dumps([self.name, self.content, list(self.notes), self.error], ensure_ascii=False)
        object.__setattr__(self, "digest", hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:32])

    @property
    def ok(self) -> bool:
        return not self.error


def one_record(text: str) -> tuple[Record, ...]:
    """The default :attr:`InputKind.parse`: the whole paste is one record (text stripped, as
    :func:`normalise_text`), named ``"input"``."""
    return (Record("input", normalise_text(text)),)


def records_note(records: Sequence[Record]) -> str:
    """What a view of a paste's first record says about the others ("" for a one-record paste)."""
    if len(records) < 2:
        return ""
    bad = sum(not r.ok for r in records)
    unread = f" ({bad} of them cannot be read)" if bad else ""
    return f"The input holds {len(records)} records{unread}; this view shows the first, '{records[0].name}'."


#: The domain of every token of one input, in token order, ``""`` for special tokens (the names come
#: from the input kind's :attr:`InputKind.domains`; e.g. the spike's ``NTD``, ``RBD``...).
TokenDomains = tuple[str, ...]


@dataclass
class EncodedInput:
    """Model-ready tokens for one input, with where each token came from.

    ``spans[i] = (start, end)`` is the half-open range the token covers in the input
    (characters of the text, or 0-based nucleotides of the aligned spike); special
    tokens have ``(-1, -1)``. ``axis_labels``: a label per token for plot axes (e.g. genome
    positions). ``domains``: the :data:`TokenDomains` of an input kind that names domains (else
    ``None``). ``annotation``: what the input kind's plug-in learned while reading the input (the
    genome kind keeps its analysis of the genome here); it is the plug-in's own type, and generic
    code never reads it.
    """

    key: str
    input_ids: np.ndarray
    tokens: list[str]
    spans: np.ndarray
    span_unit: str
    is_cls: np.ndarray
    is_sep: np.ndarray
    is_punct: np.ndarray
    notes: list[str] = field(default_factory=list)
    axis_labels: list[str] | None = None
    domains: TokenDomains | None = None
    annotation: object = None

    def __post_init__(self) -> None:
        if self.domains is not None:
            self.domains = tuple(str(d) for d in self.domains)
            if len(self.domains) != len(self.tokens):
                raise ValueError(f"{len(self.domains)} token domains for {len(self.tokens)} tokens")

    @property
    def n_tokens(self) -> int:
        return int(len(self.tokens))

    @property
    def kinds(self) -> TokenKinds:
        """The input's token masks ([CLS], [SEP], punctuation) as the one mask type the analyses read."""
        kinds = self.__dict__.get("_kinds")
        if kinds is None:
            kinds = TokenKinds(self.is_cls, self.is_sep, self.is_punct)
            self.__dict__["_kinds"] = kinds
        return kinds

    @property
    def content_mask(self) -> np.ndarray:
        return self.kinds.content

    def token_rows(self, token_set: str, pad_to: int | None = None) -> np.ndarray:
        """Boolean ``[T]`` (or ``[pad_to]``) selection of the tokens in ``token_set``
        (:data:`bertgeom.tokens.TOKEN_SETS`; padding rows only in ``"all"``)."""
        return self.kinds.rows(token_set, pad_to)


def normalise_text(text: str) -> str:
    """The cache key of a text input: trailing/leading white space only is dropped."""
    return (text or "").strip()


def _scanned_offsets(text: str, tokens: list[str], special: set, ids: np.ndarray) -> np.ndarray:
    """``[T, 2]`` character spans of ``tokens`` found in order in ``text`` (case-insensitive, subword
    markers dropped); ``(0, 0)`` for special tokens and for a token that cannot be found (an unknown)."""
    low = text.lower()
    out = np.zeros((len(tokens), 2), dtype=np.int64)
    at = 0
    for i, (t, tid) in enumerate(zip(tokens, ids.tolist())):
        if tid in special:
            continue
        piece = t.lstrip("#").lstrip("\u0120\u2581").lower()
        j = low.find(piece, at) if piece else -1
        if j >= 0:
            out[i] = (j, j + len(piece))
            at = j + len(piece)
    return out


def encode_text(loaded: LoadedModel, text: str) -> EncodedInput:
    """Tokenise English (or any) text with the model's own tokenizer, keeping char offsets."""
    key = normalise_text(text)
    if not key:
        raise InputError("The input is empty: type or pick a sentence first.")
    if len(key) > MAX_TEXT_CHARS:
        raise InputError(
            f"The text has {len(key):,} characters; bertgeom reads at most {MAX_TEXT_CHARS:,} at once."
        )
    tok = loaded.tokenizer
    # the text kind's own step: a Hugging Face tokenizer's character offsets
    try:
        enc = tok(key, return_offsets_mapping=True, truncation=False, add_special_tokens=True)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    except (NotImplementedError, KeyError):  # a Python tokenizer (ESM-2's amino acids) gives no offsets: find each
        ids = np.asarray(tok(key, truncation=False, add_special_tokens=True)["input_ids"], dtype=np.int64)
        offsets = _scanned_offsets(key, tok.convert_ids_to_tokens(ids.tolist()), set(tok.all_special_ids or []),
                                   ids)
    notes: list[str] = []
    limit = loaded.max_tokens
    if len(ids) > limit:
        notes.append(
            f"The text is {len(ids)} tokens long; the model reads {limit}, so only the first "
            f"{limit - 2} word pieces are analysed."
        )
        ids = np.concatenate([ids[: limit - 1], ids[-1:]])
        offsets = np.concatenate([offsets[: limit - 1], offsets[-1:]])
    # from here on only what every tokenizer offers (bertgeom.tokens.Tokenizer)
    tokens = tok.convert_ids_to_tokens(ids.tolist())
    special = set(tok.all_special_ids or [])
    is_special = np.array([i in special for i in ids.tolist()])
    # a tokenizer without [CLS]/[SEP] names its ends BOS/EOS (ESM-2's <cls> ... <eos>: no sep_token)
    cls_id = tok.cls_token_id if tok.cls_token_id is not None else getattr(tok, "bos_token_id", None)
    sep_id = tok.sep_token_id if tok.sep_token_id is not None else getattr(tok, "eos_token_id", None)
    is_cls = ids == (-1 if cls_id is None else cls_id)
    is_sep = ids == (-1 if sep_id is None else sep_id)
    spans = offsets.copy()
    spans[is_special] = -1
    # Clark's "." and "," (what docs/methods.md and the labels say), not every punctuation token (issue 46)
    is_punct = np.array([(not s) and t in CLARK_PUNCT for t, s in zip(tokens, is_special)])
    n_unk = 0 if tok.unk_token_id is None else int((ids == tok.unk_token_id).sum())
    if n_unk:
        notes.append(f"{counted(n_unk, 'token')} {word_for(n_unk, 'is', 'are')} unknown to the model's vocabulary "
                     "([UNK]).")
    return EncodedInput(key, ids, tokens, spans, "char", is_cls, is_sep, is_punct, notes)


@dataclass(frozen=True)
class Example:
    """An example input offered by the sidebar: the picker's line, the text, its class (if known)."""

    title: str
    text: str
    label: str | None = None


#: What a page may offer for an input kind (``InputKind.capabilities``):
CAPABILITIES = {
    "words": "word pieces can be merged into whole words (text)",
    "aligned_positions": "a token position means the same place in every input (genomes on the spike axis)",
    "official_padding": "the reference code's 512-position padded matrices are the natural default",
    "precomputed_results": "sets may come from a precompute results directory",
}


@dataclass(frozen=True)
class PreparedRecord:
    """One record of a precompute input read by its input kind: the name stored with it, its tokens
    (``None`` when it could not be analysed, with ``error`` saying why) and the kind's own per-record
    columns (:attr:`PrecomputeSpec.columns`; values ``None`` when unknown)."""

    name: str
    encoded: EncodedInput | None
    error: str = ""
    columns: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class PrecomputeSpec:
    """What batch precompute (:mod:`bertgeom.precompute`) needs from an input kind: the kind's plug-in
    says it once, and precompute's generic driver asks it (it never imports the plug-in).

    ``read_records(path)`` streams the records of an input file in order (each with a ``name``; a
    record whose ``stream_error`` is true ends a damaged file, its ``message`` says why).
    ``to_payload(record)`` / ``from_payload(list)`` turn one record into a JSON list and back (the
    shard payloads that travel to workers). ``prepare(record, tokenizer, max_tokens)`` tokenises one
    record -> :class:`PreparedRecord`. ``columns``: the kind's per-record columns ``(name, type)``
    with types ``"string"``, ``"int32"`` or ``"float32"``, stored after the class probabilities.
    ``read_labels(path)``: ``name -> class`` from the labels file. ``map_tokens(loaded)``: the token
    count ``T`` of the class-mean maps (inputs with exactly ``T`` tokens share positions).
    ``model_spec(directory)``: the :class:`~bertgeom.models.ModelSpec` of a model directory of this
    kind (how workers rebuild the model), ``model_files`` the files of such a directory, and
    ``default_model`` the model id used when none is given."""

    read_records: Callable[[object], Iterable]
    to_payload: Callable[[object], list]
    from_payload: Callable[[list], object]
    prepare: Callable[[object, object, int], PreparedRecord]
    read_labels: Callable[[object], dict]
    map_tokens: Callable[[LoadedModel], int]
    model_spec: Callable[[object], object]
    columns: tuple[tuple[str, str], ...] = ()
    model_files: tuple[str, ...] = ("config.json", "model.safetensors")
    default_model: str = ""


@dataclass(frozen=True)
class KindWords:
    """How the pages word one kind of input: its nouns, the sidebar's labels and help, the set pickers'
    descriptions, the notes under token charts. Plain text only: what the kind *is* (how it is read,
    its sets, classes and domains) stays in :class:`InputKind`, so a plug-in reads its data without
    its wording and a translation or a teaching variant changes only this."""

    noun: str = "input"
    plural: str = "inputs"
    box_label: str = "Input"  # the sidebar's input box
    box_help: str = ""
    examples_label: str = ""  # the examples picker ("": "Example <plural>")
    examples_help: str = ""
    upload_label: str = ""  # the sidebar's file uploader ("": "…or upload a file")
    shipped_set_description: str = "the shipped inputs"
    set_upload_label: str = "your own set (a .txt file, one input per line)"
    domain_noun: str = "domain"  # what a token domain is called ("spike domain")
    token_note: str = ""  # a note under per-token charts
    changed_token_note: str = ""  # why Compare two inputs marks tokens (""): it names the changed ones
    link_send: str = ""  # what a sender sends along when a link cannot hold a pasted input ("the FASTA")


@dataclass(frozen=True)
class InputKind:
    """Everything generic code asks about one kind of input, described once by the plug-in owning it.

    ``parse(text) -> tuple[Record, ...]`` reads a paste once into its records (default
    :func:`one_record`: the whole text; raise :class:`InputError` for a paste nothing can be read
    of); ``encode(loaded, record) -> EncodedInput`` reads one record into tokens. A kind whose
    input is one record may give ``encoder(loaded, text) -> EncodedInput`` instead of ``encode``
    (it then reads ``record.content``). Generic code reads a paste with
    :func:`encode_input` (its first record) or :meth:`encode_record`. ``examples()`` are the sidebar's
    examples; ``shipped_set()`` the default set of the "over many inputs" views and ``demo_set()``
    a small one (one per class) to compare against; ``read_set(data, labels)`` reads a user's
    uploaded set (bytes; ``labels`` an optional TSV). ``class_names`` maps class ids to the names a
    user reads. ``domains`` (in order) name the token domains the encoder writes into
    ``EncodedInput.domains`` (``""`` for special tokens); ``domain_share(d)`` is the
    reference share (%) of tokens in domain ``d``. ``pages`` are extra pages the kind enables
    (``"classifier"``); ``capabilities`` are keys of :data:`CAPABILITIES`; ``classify`` classifies
    whole records for :func:`bertgeom.classify` (``None``: the kind's models do not);
    ``precompute`` is what :mod:`bertgeom.precompute` needs to run over files of this kind
    (:class:`PrecomputeSpec`; ``None``: precompute refuses the kind's models). ``prepare_ahead(loaded,
    log)`` is work ``prepare-sets`` does ahead for one of the kind's models, so a server's first request
    does not wait for it (the case study measures which backend classifies fastest on the machine).
    """

    # what it is and how it is read: a paste into records, a record into tokens
    name: str
    words: KindWords = KindWords()  # how the pages word it (nouns, labels, notes)
    encoder: Callable[[LoadedModel, str], EncodedInput] | None = None
    parse: Callable[[str], tuple[Record, ...]] = one_record
    encode: Callable[[LoadedModel, Record], EncodedInput] | None = None
    max_input_chars: int = 20_000
    # the sidebar's input box: its session key (default "<name>_value"), labels, examples, uploads
    session_key: str = ""
    examples: Callable[[], Sequence[Example]] = lambda: ()
    upload_reader: Callable[[str, bytes], tuple[str, str]] | None = None
    upload_types: tuple[str, ...] = ()
    # sets of inputs: the shipped one, a small demo one, and a user's upload
    shipped_set: Callable[[], tuple[InputItem, ...]] = lambda: ()
    demo_set: Callable[[], tuple[InputItem, ...]] | None = None
    read_set: Callable[..., tuple[InputItem, ...]] | None = None
    set_upload_types: tuple[str, ...] = ("txt",)
    labelled_uploads: bool = False
    # classes and token domains
    class_names: Mapping[str, str] = field(default_factory=dict)
    featured_class: str = ""  # the class a set view shows first, when the set holds it ("": all inputs)
    domains: tuple[str, ...] = ()
    default_domain: str = ""
    domain_share: Callable[[str], float] | None = None
    # share links, timing, extra pages and capabilities
    link_param: str = "example"
    link_text: bool = True
    sweep_seconds: float = 1.0
    pages: tuple[str, ...] = ()
    capabilities: frozenset[str] = frozenset()
    # whole-record classification (bertgeom.classify): ``classify(loaded, data, batch_size)`` -> one
    # prediction per record of ``data`` (text, bytes or a path), for kinds whose models call records
    classify: Callable[..., list] | None = None
    # batch precompute (bertgeom.precompute): ``None`` for kinds it cannot read
    precompute: PrecomputeSpec | None = None
    # work ahead of a server's first request (prepare-sets): ``prepare_ahead(loaded, log)``
    prepare_ahead: Callable[..., None] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.capabilities) - set(CAPABILITIES)
        if unknown:
            raise ValueError(f"unknown capabilities {sorted(unknown)}; known: {sorted(CAPABILITIES)}")
        if not self.session_key:
            object.__setattr__(self, "session_key", f"{self.name}_value")
        if self.encoder is None and self.encode is None:
            raise ValueError(f"input kind '{self.name}' needs an encode (record -> tokens) or an encoder "
                             "(text -> tokens)")

    def encode_record(self, loaded: LoadedModel, record: Record) -> EncodedInput:
        """``record`` (one of :attr:`parse`'s) as model-ready tokens; a record that could not be
        read raises its error as :class:`InputError`."""
        if record.error:
            raise InputError(record.error)
        if self.encode is not None:
            return self.encode(loaded, record)
        return self.encoder(loaded, record.content)

    def can(self, capability: str) -> bool:
        """True when pages may offer ``capability`` (a key of :data:`CAPABILITIES`) for this kind."""
        return capability in self.capabilities

    @property
    def has_domains(self) -> bool:
        return bool(self.domains)

    def class_name(self, c) -> str:
        """The display name of class ``c`` (unknown ids unchanged)."""
        return self.class_names.get(str(c), str(c))


def _sentence_examples() -> tuple[Example, ...]:
    from bertgeom.examples import example_sentences

    return tuple(Example(s, s) for s in example_sentences())


def _sentence_set() -> tuple[InputItem, ...]:
    from bertgeom.examples import example_sentences

    return tuple(InputItem(f"s{i + 1}", s, None) for i, s in enumerate(example_sentences()))


def _lines_set(data: bytes | str, labels=None) -> tuple[InputItem, ...]:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    if not lines:
        raise InputError("The uploaded file holds no sentence.")
    return tuple(InputItem(f"line {i + 1}", s) for i, s in enumerate(lines))


#: English (or any) text read by the model's own tokenizer: the built-in kind.
TEXT = InputKind(
    name="text",
    words=KindWords(
        noun="sentence",
        plural="sentences",
        box_label="Input sentence",
        shipped_set_description="the English sentences shipped with bertgeom",
    ),
    encoder=encode_text,
    examples=_sentence_examples,
    shipped_set=_sentence_set,
    read_set=_lines_set,
    max_input_chars=MAX_TEXT_CHARS,
    capabilities=frozenset({"words"}),
)


class InputKinds(PluginRegistry):
    """The registered input kinds by name: one object, changed in place (an earlier
    ``from bertgeom.inputs import INPUT_KINDS`` always sees the current kinds)."""

    def register(self, kind: InputKind) -> InputKind:
        dict.__setitem__(self, kind.name, kind)
        return kind

    def of(self, what) -> InputKind:
        """The kind of ``what``: a kind name, a :class:`~bertgeom.models.ModelSpec` or a loaded model."""
        name = what if isinstance(what, str) else getattr(getattr(what, "spec", what), "input_kind", None)
        kind = self.get(name)
        if kind is None:
            raise InputError(f"No registered input kind reads '{name}' input.")
        return kind

    def class_name(self, c) -> str:
        """The display name of class ``c`` in whichever registered kind names it (unknown ids unchanged)."""
        for kind in self.values():
            if str(c) in kind.class_names:
                return kind.class_names[str(c)]
        return str(c)

    def all_class_names(self) -> dict[str, str]:
        """Every registered kind's class names, merged (first registration wins)."""
        out: dict[str, str] = {}
        for kind in self.values():
            for k, v in kind.class_names.items():
                out.setdefault(k, v)
        return out


#: The input kinds every part of bertgeom reads (:meth:`InputKinds.of`).
INPUT_KINDS = InputKinds(text=TEXT)


def register_input_kind(kind: InputKind) -> InputKind:
    """Let models whose spec says ``input_kind == kind.name`` be read and shown as ``kind`` describes."""
    return INPUT_KINDS.register(kind)


def input_kind_of(what) -> InputKind:
    """The :class:`InputKind` of a kind name, a model spec or a loaded model."""
    return INPUT_KINDS.of(what)


def _kind_reading(loaded: LoadedModel) -> InputKind:
    kind = INPUT_KINDS.get(loaded.spec.input_kind)
    if kind is None:
        raise InputError(f"No encoder reads '{loaded.spec.input_kind}' input (model '{loaded.spec.id}').")
    return kind


def encode_record(loaded: LoadedModel, record: Record) -> EncodedInput:
    """One record of a paste (:attr:`InputKind.parse`) as tokens, read by ``loaded``'s input kind."""
    return _kind_reading(loaded).encode_record(loaded, record)


def encode_input(loaded: LoadedModel, text: str) -> EncodedInput:
    """Turn user input into tokens with ``loaded``'s input kind: the paste's first record (a note
    says so when it holds more)."""
    kind = _kind_reading(loaded)
    records = kind.parse(text)
    encoded = kind.encode_record(loaded, records[0])
    note = records_note(records)
    if note:
        encoded.notes.insert(0, note)
    return encoded
