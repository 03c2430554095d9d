"""Batch classification of genomes and the evaluation report (CLI ``classify`` and ``evaluate``).

:func:`classify_stream` reads any number of records lazily (parse -> align -> tokenise in
the caller's process, forward passes batched), yielding one :class:`Prediction` per record;
a bad record yields a row with its error, never an exception.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from bertgeom.cache import CacheKey, Memo, cached
from bertgeom.probabilities import class_probabilities
from bertgeom.models import LoadedModel


def _agreement(predicted: str | None, rule_call: str | None) -> str:
    """The ``agrees`` cell: yes, no, or "not comparable" for a class outside the eight (a custom
    model's own label); empty when either call is missing."""
    from bertgeom.sars_cov_2.genome.classes import CLASSES

    if not (predicted and rule_call):
        return ""
    if predicted not in CLASSES:
        return "not comparable"
    return "yes" if predicted == rule_call else "no"


@dataclass
class Prediction:
    """One classified record (``error`` set when it could not be classified)."""

    name: str
    predicted: str | None = None
    probs: dict[str, float] = field(default_factory=dict)
    qc: str = ""
    qc_reasons: str = ""
    genome_qc: str = ""  #: whole-genome QC verdict (pass/warn/fail/partial), separate from the spike QC
    n_mutations: int | None = None
    unk_rate: float | None = None
    rule_call: str = ""  #: the rule-based marker call (bertgeom.sars_cov_2.genome.markers), a second opinion
    rule_evidence: str = ""  #: its evidence, e.g. "delta: 7/7 markers"
    clade: str = ""  #: nearest Nextstrain clade (display name, e.g. "21J (Delta)")
    lineage: str = ""  #: Pango lineage of the nearest node of Nextclade's reference tree
    recombinant: str = ""  #: "" or the recombinant call (pipeline.recombinant_cell)
    dataset: str = ""  #: the Nextclade dataset (name and tag) the record was placed on
    qc_score: float | None = None  #: Nextclade QC score (bertgeom.sars_cov_2.genome.qc.qc_score)
    qc_status: str = ""  #: good / mediocre / bad
    spike: str = field(default="", repr=False)  #: the aligned spike read (not a CSV column)
    #: the record as a row of Nextclade's own output (genome.nextclade_output), when asked for; not a CSV column
    nextclade: dict = field(default_factory=dict, repr=False)
    #: SARS-CoV-2 / too divergent / not SARS-CoV-2 (bertgeom.sars_cov_2.genome.gate); no call unless SARS-CoV-2
    gate: str = ""
    notes: str = ""  #: what was done to the input (reverse complement, U->T, trimmed, cut spike) and, with no call, why
    error: str = ""
    #: the forward's precision (fp32 / bf16) and runtime: what produced ``probs`` (issue 46: bf16 moves them)
    precision: str = ""
    backend: str = ""

    def row(self, labels: Iterable[str], model_version: str, precision: str = "", backend: str = "") -> dict:
        """Flat CSV row: name, prediction, one probability column per class, QC, mutations, nearest
        clade, Pango lineage and recombinant call, version, the Nextclade dataset placed on (and
        ``model_precision``, the forward's fp32/bf16, and ``model_backend``, the runtime that ran it,
        when given)."""
        # the confidence at the probabilities' own precision (6 decimals): a batch padded otherwise moves the
        # 8th digit, and the CSV says the same number in its p_* column
        out = {"name": self.name, "predicted": self.predicted or "",
               "confidence": round(max(self.probs.values()), 6) if self.probs else ""}
        for c in labels:
            p = self.probs.get(c)
            out[f"p_{c}"] = "" if p is None else round(p, 6)
        out.update(qc=self.qc, qc_reasons=self.qc_reasons, genome_qc=self.genome_qc,
                   n_mutations="" if self.n_mutations is None else self.n_mutations,
                   unk_rate="" if self.unk_rate is None else round(self.unk_rate, 4),
                   rule_call=self.rule_call, rule_evidence=self.rule_evidence, clade=self.clade,
                   lineage=self.lineage, recombinant=self.recombinant,
                   qc_score="" if self.qc_score is None else self.qc_score, qc_status=self.qc_status,
                   agrees=_agreement(self.predicted, self.rule_call),
                   gate=self.gate, notes=self.notes, error=self.error, model_version=model_version,
                   nextclade_dataset=self.dataset)
        if precision:
            out["model_precision"] = precision
        if backend:
            out["model_backend"] = backend
        return out


def logits_for_ids(loaded: LoadedModel, ids: np.ndarray, precision: str = "fp32") -> np.ndarray:
    """Logits ``[B, C]`` for a batch of padded id rows (PAD = 0), no attentions kept, on the model's
    device (:func:`bertgeom.forward.run_forward`, the model's own forward)."""
    from bertgeom.forward import run_forward

    ids = np.asarray(ids)
    out = run_forward(loaded, ids, (ids != 0), attention="model", precision=precision)
    return out.logits.float().cpu().numpy()


class FastClassifier:
    """A copy of a variant model for classification only (:func:`bertgeom.models.inference_copy`:
    SDPA attention, no attention weights kept) on ``device`` (``auto``: a GPU when there is one), run by
    ``backend`` in ``precision`` as :func:`bertgeom.backends.choose_backend` decides (``auto``: what
    measured fastest on this kind of CPU, docs/speed.md: torch bf16 with AMX, OpenVINO bf16 with
    AVX-512 bf16 and no AMX, OpenVINO f32 with AVX2 only; torch when the ``fast`` extra is absent).
    The shared model (eager, fp32, for the analyses) is untouched.

    On torch the forward is :func:`bertgeom.forward.run_forward` with ``logits_only``: the last layer
    computes the [CLS] row alone, since the classifier reads nothing else (~15% less work, same logits);
    a model the recomputation does not follow (:func:`bertgeom.forward.model_parts` says which) runs its
    own forward. OpenVINO and ONNX Runtime run the same graph exported once to ONNX (cached on disk by
    the weights' hash, :func:`bertgeom.backends.exported_onnx`), compiled per calling thread count: a
    caller's ``torch.get_num_threads()`` is its share of the cores, as for torch.

    ``FastClassifier(loaded, "cpu", "fp32", "torch").logits(ids)`` equals :func:`logits_for_ids` to ~1e-5.
    """

    def __init__(self, loaded: LoadedModel, device: str = "auto", precision: str = "auto", backend: str = "auto"):
        import threading

        import torch

        from bertgeom.backends import choose_backend
        from bertgeom.models import inference_copy, resolve_device

        dev = resolve_device(device)
        from bertgeom.forward import ForwardError, model_parts

        private = inference_copy(loaded, dev, attentions=False)  # SDPA, on the device, shared model untouched
        if private is loaded:  # nothing to copy was needed, but the dtype change must not reach the shared model
            import copy
            import dataclasses

            private = dataclasses.replace(loaded, model=copy.deepcopy(loaded.model))
        try:  # the recomputation follows this model: its [CLS]-only last layer can be used (and exported)
            model_parts(private.model)
            follows = True
        except ForwardError:
            follows = False
        self.backend, self.precision = choose_backend(backend if follows or backend != "auto" else "torch",
                                                      dev, precision)
        if self.backend != "torch" and not follows:
            from bertgeom.backends import BackendError

            raise BackendError(f"the {self.backend} backend runs BERT-layout classifiers only; use --backend torch.")
        self.device = private.device
        self.attention = "sdpa" if follows else "model"
        self._runs: dict[int, object] = {}
        self._lock = threading.Lock()
        self.model = private.model
        if self.backend != "torch":
            try:
                self._runtime(max(1, torch.get_num_threads()))  # export and compile now: errors surface here, once
            except Exception as exc:  # noqa: BLE001 - an automatic choice falls back; an asked-for one reports
                if (backend or "auto").strip().lower() != "auto":
                    raise
                import warnings

                warnings.warn(f"the {self.backend} backend could not be used ({exc}); classifying with torch.",
                              RuntimeWarning, stacklevel=2)
                self.backend = "torch"
        self.dtype = torch.bfloat16 if self.precision == "bf16" and self.backend == "torch" else torch.float32
        self.model = self.model.to(dtype=self.dtype)

    def _runtime(self, threads: int):
        """The runtime compiled for callers with ``threads`` threads each (as many such calls at once as
        the cores hold), made on first use."""
        from bertgeom.backends import runtime_classifier
        from bertgeom.runtime import usable_cores

        with self._lock:
            run = self._runs.get(threads)
            if run is None:
                run = self._runs[threads] = runtime_classifier(self.model, self.backend, self.precision, threads,
                                                               streams=max(1, usable_cores() // threads))
        return run

    def logits(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids)
        if self.backend != "torch":
            import torch

            return self._runtime(max(1, torch.get_num_threads()))(ids)
        from bertgeom.forward import run_forward

        out = run_forward(self.model, ids, (ids != 0), attention=self.attention, precision=self.precision,
                          logits_only=self.attention == "sdpa")
        return out.logits.float().cpu().numpy()

    @property
    def label(self) -> str:
        """``"bf16"`` on torch, ``"bf16 (openvino)"`` on another runtime: what ran, for CSVs and tables."""
        return self.precision if self.backend == "torch" else f"{self.precision} ({self.backend})"


#: The fast classifiers made in this process, keyed by (weights hash, device, backend, precision): server
#: threads share the model, so a build (an export or a compile can take seconds) runs once per key under
#: that key's lock (:func:`bertgeom.cache.cached`), and the shared ``loaded`` is never written to.
FAST_CLASSIFIERS = Memo("fast-classifier", 4)


def fast_classifier_key(weights_hash: str, device: str, backend: str, precision: str) -> CacheKey:
    return CacheKey.of("fast-classifier", 1, weights=weights_hash, device=device, backend=backend, precision=precision)


def fast_classifier(loaded: LoadedModel, device: str = "auto", precision: str = "auto",
                    backend: str = "auto") -> FastClassifier:
    """The :class:`FastClassifier` of ``loaded`` for ``(device, backend, precision)``, made once per
    process and key (:data:`FAST_CLASSIFIERS`: a server classifies many requests with one copy)."""
    from bertgeom.backends import choose_backend
    from bertgeom.models import resolve_device

    dev = resolve_device(device)
    want_backend, want_precision = choose_backend(backend, dev, precision, weights=loaded.weights_hash)
    key = fast_classifier_key(loaded.weights_hash, dev, want_backend, want_precision)
    fc = cached(key, lambda: FastClassifier(loaded, dev, want_precision, want_backend), memo=FAST_CLASSIFIERS,
                disk=None)
    ran = fast_classifier_key(loaded.weights_hash, dev, fc.backend, fc.precision)
    if ran != key and ran not in FAST_CLASSIFIERS:  # it fell back (e.g. to torch): known by what it runs too
        FAST_CLASSIFIERS.put(ran, fc)
    return fc


def measure_backends(loaded: LoadedModel, device: str = "cpu", precision: str = "auto", n: int = 16,
                     rounds: int = 2, batch_size: int = 16, log=None):
    """Time every candidate path of the classification forward on this machine
    (:func:`bertgeom.backends.candidate_paths`: torch, OpenVINO, ONNX Runtime; fp32, and bf16 where the
    CPU has bf16 units) on ``n`` shipped validation genomes, the way :func:`classify_stream` runs them
    (its default streams, ``batch_size``), and store the fastest that keeps every call of torch fp32
    with max |Δlogit| <= 0.05 (:func:`bertgeom.backends.pick_fastest`) as what ``--backend auto`` runs
    here for these weights and this asked ``precision``. About half a minute on 2 cores; done once per
    machine, weights and runtime versions (``prepare-sets``, ``choose-backend``, and a large ``classify``
    run do it). Returns the :class:`~bertgeom.backends.MeasuredChoice`."""
    import datetime

    from bertgeom.backends import MeasuredChoice, candidate_paths, measure_paths, pick_fastest, store_choice
    from bertgeom.models import resolve_device
    from bertgeom.runtime import machine, machine_line

    t0 = time.perf_counter()
    dev = resolve_device(device)
    info = machine()
    val, _ = held_out_genomes()
    step = max(1, len(val) // max(1, n))
    ids = [x for _, x in (prepare_record(r, loaded.tokenizer, loaded.max_tokens) for r in val[::step][:n])
           if x is not None]
    padded = pad_rows(ids)
    forwards, errors = {}, {}
    for b, p in candidate_paths(dev, precision, info):
        try:
            fc = fast_classifier(loaded, dev, p, b)
            if (fc.backend, fc.precision) != (b, p):
                raise RuntimeError(f"it ran as {fc.backend} {fc.precision}")
            forwards[b, p] = fc.logits
        except Exception as exc:  # noqa: BLE001 - a path that cannot run here is a failed trial, not an error
            errors[b, p] = f"could not run: {exc}"[:200]
    if ("torch", "fp32") not in forwards:  # the reference, even when only bf16 was asked for
        forwards = {("torch", "fp32"): fast_classifier(loaded, dev, "fp32", "torch").logits, **forwards}
    if log:
        log(f"timing {len(forwards)} ways to run the classifier on this machine ({machine_line(info)}), once")
    trials = measure_paths(forwards, padded, batch_size, default_streams(dev), rounds=rounds, errors=errors)
    want = (precision or "auto").strip().lower()
    eligible = [t for t in trials if want not in ("fp32", "bf16") or t.precision == want]
    backend, prec = pick_fastest(eligible)
    choice = MeasuredChoice(backend, prec, tuple(trials), machine_line(info),
                            datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                            round(time.perf_counter() - t0, 1))
    path = store_choice(choice, loaded.weights_hash, dev, precision, info)
    if log:
        log(f"--backend auto runs {backend} {prec} here (measured in {choice.seconds:.0f} s; kept in {path})")
    return choice


def measured_backend_needed(loaded: LoadedModel, device: str = "cpu", precision: str = "auto",
                            backend: str = "auto") -> bool:
    """True when ``auto`` on this CPU has more than one path to choose from and nothing was measured here
    yet for these weights and this precision (so :func:`measure_backends` would change the choice)."""
    from bertgeom.backends import candidate_paths, stored_choice
    from bertgeom.models import resolve_device

    dev = resolve_device(device)
    if (backend or "auto").strip().lower() != "auto" or dev != "cpu" or len(candidate_paths(dev, precision)) < 2:
        return False
    try:  # only a classifier the fast path follows has several backends
        from bertgeom.forward import model_parts

        model_parts(loaded.model)
    except Exception:  # noqa: BLE001
        return False
    return stored_choice(loaded.weights_hash, dev, precision) is None


def prepare_record(rec, vocab, max_tokens: int, dataset: str | None = None,
                   nextclade: bool = False) -> tuple[Prediction, np.ndarray | None]:
    """Parse, align, cut, QC, call markers and tokenise one record (the CPU part of classification):
    one :func:`~bertgeom.sars_cov_2.genome.pipeline.analyse_sequence` pass, read field by field.
    ``dataset``: the Nextclade dataset to place on (a folder or zip; default the shipped one);
    ``nextclade``: also fill :attr:`Prediction.nextclade` (the record in Nextclade's output columns)."""
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.sars_cov_2.genome.tree import load_reference_tree

    a = analyse_sequence(rec, vocab=vocab, max_length=max_tokens, tree=load_reference_tree(dataset))
    pred = Prediction(name=a.name)
    if nextclade:
        from bertgeom.sars_cov_2.genome.nextclade_output import nextclade_row

        pred.nextclade = nextclade_row(a)
    pred.notes = "; ".join(a.input_notes())
    if a.error:
        pred.error = a.error
        return pred, None
    ids = np.asarray(a.token_ids)
    ids = ids[: int(np.count_nonzero(ids))]  # drop padding: rows are re-padded per batch
    pred.qc = a.qc.verdict if a.qc else ""
    pred.qc_reasons = "; ".join(a.qc.reasons) if a.qc else ""
    if a.genome_qc is not None:
        pred.genome_qc = a.genome_qc.verdict + (f" ({'; '.join(a.genome_qc.reasons)})" if a.genome_qc.reasons else "")
    pred.n_mutations = len(a.mutations.nucleotide) if a.mutations else None
    pred.unk_rate = a.unk_rate
    pred.rule_call, pred.rule_evidence = a.rule.call, a.rule.summary()
    summary = a.summary_row()
    pred.clade, pred.qc_status = summary["clade"], summary["qc_status"]
    pred.lineage, pred.recombinant = summary["lineage"], summary["recombinant"]
    pred.dataset = a.placement.dataset if a.placement is not None else ""
    pred.qc_score = summary["qc_score"] if summary["qc_score"] != "" else None
    pred.spike = a.spike.aligned
    pred.gate = a.gate.verdict if a.gate else ""
    if a.gate is not None and not a.gate.passed:  # outside the model's world: no probability, no call
        pred.rule_call = pred.rule_evidence = ""  # nor the marker rule's class: it assumes SARS-CoV-2 too
        pred.notes = a.gate.reason + (f" Input: {pred.notes}." if pred.notes else "")
        return pred, None
    return pred, ids


_WORKER_STATE: dict = {}


def _init_worker(vocab, max_tokens: int, options: dict) -> None:  # pragma: no cover - runs in worker processes
    _WORKER_STATE.update(vocab=vocab, max_tokens=max_tokens, options=options)


def _prepare_in_worker(rec):  # pragma: no cover - runs in worker processes
    return prepare_record(rec, _WORKER_STATE["vocab"], _WORKER_STATE["max_tokens"], **_WORKER_STATE["options"])


def prepared_stream(records: Iterable, vocab, max_tokens: int, workers: int = 1,
                    window: int = 64, dataset: str | None = None,
                    nextclade: bool = False) -> Iterator[tuple[Prediction, np.ndarray | None]]:
    """:func:`prepare_record` over a stream, in input order; with ``workers > 1`` in that many
    processes, fed ``window`` records per worker at a time so memory stays bounded."""
    options = {"dataset": dataset, "nextclade": nextclade}
    if workers <= 1:
        for rec in records:
            yield prepare_record(rec, vocab, max_tokens, **options)
        return
    import itertools
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork of a process that holds torch threads
    it = iter(records)
    with ctx.Pool(workers, initializer=_init_worker, initargs=(vocab, max_tokens, options)) as pool:
        while True:
            chunk = list(itertools.islice(it, window * workers))
            if not chunk:
                break
            yield from pool.imap(_prepare_in_worker, chunk, chunksize=4)


def default_streams(device: str | None = None, workers: int = 1) -> int:
    """Forward streams :func:`classify_stream` runs by default: one per usable core (at most 8) on the
    CPU, each with one torch thread; 1 on a GPU or when ``workers`` processes prepare the records.

    On 2 cores, two one-thread streams that each prepare and classify their own batches measured
    40-42 genomes/s end to end, against 31-34/s for one stream whose forward uses both cores (its
    preparation then leaves a core idle, and a two-thread forward spends ~12% in synchronisation)."""
    from bertgeom.runtime import usable_cores

    if workers > 1 or (device or "cpu") != "cpu":
        return 1
    return max(1, min(8, usable_cores()))


def pad_rows(rows) -> np.ndarray:
    """Token-id rows of different lengths as one ``[B, T]`` int64 batch, PAD (0) after each row."""
    ids = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    return ids


def _fill_predictions(loaded: LoadedModel, forward, pending: list, batch_size: int) -> None:
    """Probabilities and calls of the prepared ``pending`` ``(Prediction, ids)``: rows sorted by
    length and cut into batches, so each batch pads only to its own longest row."""
    rows = [(k, ids) for k, (_, ids) in enumerate(pending) if ids is not None]
    rows.sort(key=lambda r: len(r[1]))
    for s in range(0, len(rows), batch_size):
        chunk = rows[s : s + batch_size]
        probs = class_probabilities(loaded, forward(pad_rows([r for _, r in chunk])))
        for (k, _), p in zip(chunk, probs):
            pred = pending[k][0]
            pred.probs = {c: float(v) for c, v in zip(loaded.labels, p)}
            pred.predicted = loaded.labels[int(np.argmax(p))]


def classify_stream(loaded: LoadedModel, records: Iterable, *, batch_size: int = 16, workers: int = 1,
                    device: str | None = None, precision: str = "auto", window: int = 4,
                    streams: int | str = "auto", backend: str = "auto", dataset: str | None = None,
                    nextclade: bool = False) -> Iterator[Prediction]:
    """Classify records (``SequenceRecord``/``RecordError``/str) lazily, in input order.

    ``workers``: processes for the CPU part (parse, align, tokenise). The forward passes run on the
    model's :func:`fast_classifier` (``backend`` and ``precision`` as :func:`bertgeom.backends.choose_backend`
    resolves them; bf16 where the device has bf16 units) on ``device`` (``None``: the CPU). Up to
    ``window * batch_size`` prepared records are held, sorted by length and cut into batches, so each
    batch pads only to its own longest row; predictions still come out in input order.

    ``streams`` (``"auto"``: :func:`default_streams`): threads that each prepare and classify whole
    batches, sharing the caller's torch threads (one each on 2 cores) and ``batch_size`` (each stream's
    batch is ``batch_size // streams`` records, so as many records are in a forward at once as with
    one stream, and each sorts only its own batch by length); the calls are the same as with one
    stream. Not combined with ``workers > 1``.

    ``dataset``: the Nextclade dataset the records are placed on (default the shipped one);
    ``nextclade``: fill each :attr:`Prediction.nextclade` (Nextclade's output columns).
    """
    n_streams = default_streams(device, workers) if streams == "auto" else int(streams)
    if n_streams < 1:
        raise ValueError("streams must be at least 1 (or 'auto').")
    if n_streams > 1 and workers > 1:
        raise ValueError("use preparation workers or forward streams, not both.")
    fc = fast_classifier(loaded, device or "cpu", precision, backend)
    for pred in _classify_stream(loaded, fc.logits, records, batch_size, workers, window, n_streams, dataset,
                                 nextclade):
        if pred.probs:
            pred.precision, pred.backend = fc.precision, fc.backend
        yield pred


def _classify_stream(loaded, forward, records, batch_size, workers, window, n_streams, dataset, nextclade):
    """:func:`classify_stream`'s predictions from ``forward`` (the fast classifier's logits)."""
    if n_streams > 1:
        yield from _classify_in_streams(loaded, forward, records, max(1, int(batch_size) // n_streams), n_streams,
                                        {"dataset": dataset, "nextclade": nextclade})
        return
    pending: list[tuple[Prediction, np.ndarray | None]] = []

    def flush() -> Iterator[Prediction]:
        _fill_predictions(loaded, forward, pending, batch_size)
        for pred, _ in pending:
            yield pred
        pending.clear()

    for pred, ids in prepared_stream(records, loaded.tokenizer, loaded.max_tokens, workers, dataset=dataset,
                                     nextclade=nextclade):
        pending.append((pred, ids))
        if sum(i is not None for _, i in pending) >= batch_size * max(1, int(window)):
            yield from flush()
    yield from flush()


def _classify_in_streams(loaded: LoadedModel, forward, records: Iterable, batch_size: int,
                         streams: int, options: dict | None = None) -> Iterator[Prediction]:
    """:func:`classify_stream` over ``streams`` threads: the records are read here, in order, in
    batches; each thread prepares and classifies a batch with its share of the caller's torch
    threads; at most ``2 * streams`` batches are in flight and results come back in input order."""
    import itertools
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from bertgeom.runtime import torch_threads

    per_stream = max(1, torch.get_num_threads() // streams)

    def classify_batch(chunk: list) -> list[Prediction]:
        with torch_threads(per_stream):
            pending = [prepare_record(r, loaded.tokenizer, loaded.max_tokens, **(options or {})) for r in chunk]
            _fill_predictions(loaded, forward, pending, batch_size)
        return [pred for pred, _ in pending]

    it = iter(records)
    inflight: deque = deque()
    with ThreadPoolExecutor(streams, thread_name_prefix="bertgeom-classify") as pool:
        try:
            while True:
                while len(inflight) < 2 * streams:
                    chunk = list(itertools.islice(it, max(1, int(batch_size))))
                    if not chunk:
                        break
                    inflight.append(pool.submit(classify_batch, chunk))
                if not inflight:
                    return
                yield from inflight.popleft().result()
        finally:  # a consumer that stops early (or an interrupt) leaves no batch queued behind it
            for f in inflight:
                f.cancel()


@dataclass
class EvalReport:
    """Metrics of one classifier on labelled genomes."""

    name: str
    accuracy: float
    macro_f1: float
    per_class: dict[str, dict[str, float]]
    confusion: list[list[int]]
    labels: list[str]
    n: int

    def table(self) -> str:
        head = f"{'class':10s} {'precision':>9s} {'recall':>7s} {'f1':>6s} {'support':>7s}"
        lines = [f"{self.name}: accuracy {self.accuracy:.4f}  macro-F1 {self.macro_f1:.4f}  (n = {self.n})", head]
        for c in self.labels:
            m = self.per_class[c]
            lines.append(f"{c:10s} {m['precision']:9.3f} {m['recall']:7.3f} {m['f1']:6.3f} {int(m['support']):7d}")
        lines.append("confusion (rows: true, columns: predicted) " + " ".join(f"{c[:5]:>5s}" for c in self.labels))
        for c, row in zip(self.labels, self.confusion):
            lines.append(f"{c:10s} " + " ".join(f"{v:5d}" for v in row))
        return "\n".join(lines)


def eval_report(name: str, y_true: list[str], y_pred: list[str], labels: list[str]) -> EvalReport:
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    present = [lab for lab in labels if lab in set(y_true)]
    return EvalReport(
        name=name,
        accuracy=float(accuracy_score(y_true, y_pred)),
        macro_f1=float(f1_score(y_true, y_pred, labels=present, average="macro", zero_division=0)),
        per_class={c: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
                   for i, c in enumerate(labels)},
        confusion=confusion_matrix(y_true, y_pred, labels=labels).tolist(),
        labels=list(labels),
        n=len(y_true),
    )


def kmer_count_matrix(vocab, spikes: list[str]):
    """Sparse bag-of-k-mers counts ``[n, |vocab|]`` (the logistic-regression baseline's features)."""
    from scipy.sparse import csr_matrix

    ids, _ = vocab.encode_batch(spikes, max_length=None, add_special_tokens=False)
    rows = np.repeat(np.arange(len(spikes)), ids.shape[1])
    data = np.ones(ids.size, dtype=np.float32)
    m = csr_matrix((data, (rows, ids.ravel())), shape=(len(spikes), len(vocab)))
    m.sum_duplicates()
    return m


def kmer_features(vocab, spikes: list[str]):
    """The baseline's features: ``log1p`` of the k-mer counts."""
    x = kmer_count_matrix(vocab, spikes)
    x.data = np.log1p(x.data)
    return x


def train_kmer_baseline(vocab, spikes: list[str], classes: list[str], seed: int = 0):
    """Logistic regression on k-mer counts (log1p), trained on the model's own training recipe."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(max_iter=2000, C=1.0, random_state=seed)
    clf.fit(kmer_features(vocab, spikes), classes)
    return clf


def recipe_baseline(loaded: LoadedModel, data_dir: str | None = None):
    """The k-mer baseline trained now on ``loaded``'s own recipe (its saved config; a model from before
    augmentation existed had none), from the developer genomes in ``data_dir`` (default: shipped)."""
    from bertgeom.sars_cov_2.variant.train import TrainConfig, augmented_copies, build_examples

    cfg_dict = loaded.model.config.to_dict().get("bertgeom_train_config") or {}
    cfg = TrainConfig(**{k: v for k, v in cfg_dict.items() if k in TrainConfig.__dataclass_fields__})
    if "augment" not in cfg_dict:
        cfg.augment = {"off": True}
    cfg.data_dir, cfg.init_from = data_dir or "", ""
    pool, _ = build_examples(cfg)
    examples = augmented_copies(pool, 2, cfg.seed, cfg.augment_config())
    return train_kmer_baseline(loaded.tokenizer, [e.spike for e in examples], [e.cls for e in examples])


def read_labels_tsv(path) -> dict[str, str]:
    """``name`` -> class from a TSV with ``name`` and ``label`` (dataset labels) or ``class`` columns."""
    import csv

    from bertgeom.sars_cov_2.genome.classes import CLASSES, label_to_class

    out = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                if any("\x00" in (v or "") for v in row.values() if isinstance(v, str)):
                    raise UnicodeError
                raw = (row.get("class") or row.get("label") or "").strip()
                cls = raw.lower() if raw.lower() in CLASSES else label_to_class(raw)
                if row.get("name") and cls:
                    out[row["name"]] = cls
    except (UnicodeError, csv.Error):
        raise ValueError(f"The labels file '{path}' is not a UTF-8 text TSV (name and label columns).") from None
    return out


def held_out_genomes(data_dir: str | None = None):
    """``(records, truth)`` of the evaluation genomes of the open developer set (never trained on, not
    used for calibration): :func:`bertgeom.sars_cov_2.genome.dataset.split_real_genomes` and
    :func:`~bertgeom.sars_cov_2.genome.dataset.split_calibration`, seed 0."""
    from bertgeom.sars_cov_2.genome.fasta import SequenceRecord
    from bertgeom.sars_cov_2.variant.train import real_genomes

    _, validation = real_genomes(data_dir)
    return [SequenceRecord(g.name, g.sequence) for g in validation], {g.name: g.cls for g in validation}


def evaluate(loaded: LoadedModel, fasta, labels_tsv, *, baseline_data: str | None = None,
             batch_size: int = 16, progress=None, workers: int = 1, device: str | None = None,
             precision: str = "auto", streams: int | str = "auto", backend: str = "auto") -> dict:
    """Model, rule-based call and k-mer logistic-regression baseline on labelled genomes (``fasta`` +
    ``labels_tsv``; ``fasta=None``: the held-out developer genomes); returns the reports.

    The baseline is trained in the same run on the model's own training recipe (regenerated
    from the seed and ``baseline_data``, the folder holding the open developer set, ``True`` for the
    copy shipped in the package; with the recipe's augmentation, two augmented draws per example);
    ``None`` skips it.
    """
    from bertgeom.sars_cov_2.genome.fasta import RecordError, SequenceInputError, iter_fasta_file

    if fasta is None:  # the held-out split of the open developer genomes shipped in the package
        records, truth = held_out_genomes(baseline_data if isinstance(baseline_data, str) else None)
    else:
        truth = read_labels_tsv(labels_tsv)
        records = [r for r in iter_fasta_file(fasta) if isinstance(r, RecordError) or r.name in truth]
        broken = next((r for r in records if getattr(r, "stream_error", False)), None)
        if broken is not None:  # a metric over part of the file would read as the whole file's
            raise SequenceInputError(broken.message)
        if not any(r.ok for r in records):
            raise SequenceInputError(f"No record of '{fasta}' is a labelled nucleotide sequence.")
    y_true, y_pred, y_rule, spikes, skipped = [], [], [], [], []
    for i, pred in enumerate(classify_stream(loaded, records, batch_size=batch_size, workers=workers, device=device,
                                                 precision=precision, streams=streams, backend=backend)):
        if progress:
            progress(i + 1, len(records))
        if pred.error or pred.name not in truth:
            skipped.append((pred.name, pred.error or "no label"))
            continue
        y_true.append(truth[pred.name])
        y_pred.append(pred.predicted)
        y_rule.append(pred.rule_call)
        spikes.append(pred.spike)
    labels = list(loaded.labels)
    result = {"model": eval_report("BERT variant model", y_true, y_pred, labels),
              "rules": eval_report("rule-based marker call", y_true, y_rule, labels), "skipped": skipped,
              "precision": fast_classifier(loaded, device or "cpu", precision, backend).label}
    if baseline_data:
        clf = recipe_baseline(loaded, baseline_data if isinstance(baseline_data, str) else None)
        y_base = clf.predict(kmer_features(loaded.tokenizer, spikes))
        result["baseline"] = eval_report("k-mer count logistic regression", y_true, list(y_base), labels)
    return result
