"""Train the SARS-CoV-2 variant model from a seed (``python -m bertgeom train``).

Recipe (the paper's case study, arXiv 2502.12033 §5, scaled to what a clone can run; the model
card says what the shipped model used):

1. The open developer genomes shipped in ``bertgeom/data/genomes`` are split per class: at most
   half train, the rest validate (:func:`bertgeom.sars_cov_2.genome.dataset.split_real_genomes`).
2. A pool of training spikes mixes (a) synthetic spikes built from the Nextstrain clade definitions
   plus the training genomes' spike profiles with realistic noise, (b) noised copies of the real
   training genomes, (c) the real training genomes themselves; classes are balanced.
3. **Every step draws fresh label-preserving augmentations** of its batch
   (:mod:`bertgeom.sars_cov_2.genome.augment`): foreign characteristic mutations injected (convergence),
   own markers reverted or hidden under N, private substitutions, partial spikes. This is what
   keeps the model from single-k-mer shortcuts (one foreign marker must not flip the call).
4. The model starts from the bundled MiniLM-L6 (6 layers x 12 heads): its English rows of the word
   embedding are replaced by the pool's 12-mers (stride 9) plus the five special tokens; or, with
   ``init_from``, from an existing variant model directory (its vocabulary is kept). It is
   fine-tuned end to end with AdamW, linear warm-up and decay, gradient clipping and label
   smoothing, on ``device`` (``auto``: a GPU when there is one) in bf16 autocast where supported.
5. Checkpoints are written every ``checkpoint_every`` steps (and on Ctrl-C) and hold everything a
   resumed run needs to equal an uninterrupted one bit for bit: weights, optimiser and scheduler,
   every RNG state (torch CPU/CUDA, numpy's and Python's global generators), the data order and
   the seed of the augmentation's per-step generator (``(seed, step)``), and the loss history.
   The data pool (``train_pool.npz``) and checkpoints are written atomically
   (:func:`bertgeom.safety.write_atomically`: a fresh temporary name, then renamed);
   a half-written pool from an older run is detected, reported in one sentence and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import signal
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bertgeom.sars_cov_2.genome.classes import CLASS_TO_ID, CLASSES
from bertgeom.sars_cov_2.genome.reference import data_path
from bertgeom.models import resolve_device  # noqa: F401 - the one device rule, re-exported for the CLI

#: Folder holding ``genomes/open_genomes_dev.fasta.xz`` and its labels: the copy shipped in the package.
BUNDLED_DATA = data_path()


@dataclass
class TrainConfig:
    """Every knob of a training run (saved next to the model for reproducibility)."""

    seed: int = 42
    data_dir: str = ""  #: folder with genomes/open_genomes_dev.*; "" = the copy shipped in bertgeom/data
    init_from: str = ""  #: "" = MiniLM; else a variant model directory to continue from (keeps its vocabulary)
    synth_per_class: int = 120  #: synthetic spikes from definitions + profiles, per class
    template_copies_per_class: int = 100  #: noised copies of real training genomes, per class
    max_real_per_class: int = 250  #: cap on real training genomes per class (gh, the most diverse, has ~200)
    dropout_rate: float = 0.8  #: Poisson mean of amplicon dropouts per synthetic spike (all classes alike,
    #: so that N runs carry no class signal: real VOC genomes of 2021 have more dropouts than 2020 ones)
    augment: dict = field(default_factory=dict)  #: AugmentConfig overrides; {"off": True} disables augmentation
    epochs: float = 1.0
    batch_size: int = 8
    lr_encoder: float = 1.5e-4  #: small BERTs fine-tune well at 1e-4..2e-4
    lr_new: float = 3e-3  #: k-mer embeddings and the classifier start from scratch
    weight_decay: float = 0.01
    warmup_share: float = 0.05
    max_grad_norm: float = 1.0
    label_smoothing: float = 0.05  #: keeps confidences below 1 where evidence is thin
    checkpoint_every: int = 20
    max_steps: int = 0  #: stop (and save) after this many steps; 0 = the whole schedule
    threads: int = 0  #: torch threads (0 = torch's default)
    device: str = "auto"  #: auto | cpu | cuda | mps
    precision: str = "auto"  #: auto (bf16 autocast where the device supports it) | bf16 | fp32
    extra: dict = field(default_factory=dict)

    def data_folder(self) -> Path:
        return Path(self.data_dir) if self.data_dir else BUNDLED_DATA

    def augment_config(self):
        from bertgeom.sars_cov_2.genome.augment import AugmentConfig

        opts = dict(self.augment)
        if opts.pop("off", False):
            return None
        return AugmentConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()})


@dataclass
class Example:
    name: str
    spike: str  # aligned spike, 3822 characters
    cls: str
    origin: str  # "synthetic", "template", "real"
    insertions: list = field(default_factory=list)


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def use_bf16(device: str, precision: str = "auto") -> bool:
    """Whether to train under bf16 autocast: always on CUDA with bf16 support, on a CPU where bf16
    runs faster than fp32 (:func:`bertgeom.forward.bf16_pays_off`: native bf16 units, AVX512-BF16 or
    AMX, measured faster: about 2x there), never for ``precision="fp32"``. oneDNN also claims bf16 on
    an AVX-512 CPU without bf16 units (Intel Xeon family 6 model 106), where it is emulated: a
    training step took 1.6x the CPU time of fp32's there."""
    import torch

    if precision == "fp32":
        return False
    if precision == "bf16":
        return True
    if device == "cuda":
        return torch.cuda.is_bf16_supported()
    if device == "cpu":
        from bertgeom.forward import bf16_pays_off

        return bf16_pays_off("cpu")
    return False


def real_genome_parts(data_dir: Path | None = None) -> dict[str, list]:
    """The open developer genomes as ``train`` / ``calibration`` / ``evaluation`` lists of
    :class:`LabelledGenome` (``data_dir``: default the shipped copy): at most half of each class
    trains (:func:`~bertgeom.sars_cov_2.genome.dataset.split_real_genomes`, seed 0); a third of the rest fits the
    temperature (:func:`~bertgeom.sars_cov_2.genome.dataset.split_calibration`), the others are evaluated."""
    from bertgeom.sars_cov_2.genome.dataset import load_dev_genomes, split_calibration, split_real_genomes

    folder = Path(data_dir) if data_dir else BUNDLED_DATA
    fasta, labels = folder / "genomes" / "open_genomes_dev.fasta.xz", folder / "genomes" / "open_genomes_dev_labels.tsv"
    for f in (fasta, labels):
        if not f.is_file():
            raise FileNotFoundError(f"no developer genomes at '{f}' (expected genomes/open_genomes_dev.fasta.xz "
                                    "and genomes/open_genomes_dev_labels.tsv under the data folder).")
    genomes = load_dev_genomes(fasta, labels)
    split = split_real_genomes(genomes, seed=0)
    cal = split_calibration(genomes, seed=0)
    by_name = {g.name: g for g in genomes}
    return {"train": [by_name[n] for n in split.train], "calibration": [by_name[n] for n in cal.calibration],
            "evaluation": [by_name[n] for n in cal.evaluation]}


def real_genomes(data_dir: Path | None = None):
    """(train, evaluation) lists of :class:`LabelledGenome`: the evaluation genomes are the validation
    half less its calibration third (:func:`real_genome_parts`)."""
    parts = real_genome_parts(data_dir)
    return parts["train"], parts["evaluation"]


def build_examples(cfg: TrainConfig) -> tuple[list[Example], list]:
    """The training examples and the real validation genomes (not analysed yet)."""
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.sars_cov_2.genome.synth import SynthConfig, synth_batch, synth_from_template

    rng = np.random.default_rng(cfg.seed)
    train_real, validation = real_genomes(cfg.data_folder())
    examples: list[Example] = []
    templates: dict[str, list] = {c: [] for c in CLASSES}
    rng_real = np.random.default_rng(cfg.seed + 1)
    capped = []
    for cls in CLASSES:
        members = [g for g in train_real if g.cls == cls]
        keep = sorted(rng_real.permutation(len(members))[: cfg.max_real_per_class].tolist())
        capped += [members[i] for i in keep]
    from bertgeom.sars_cov_2.genome.markers import call_cut

    dropped = []
    for g in capped:
        a = analyse_sequence(g.sequence)
        if a.ok and a.qc is not None and a.qc.verdict != "fail":
            if call_cut(a.spike).call != g.cls:
                # the spike's markers contradict the genome-wide label (a recombinant such as Delta x
                # Omicron, or a clade call that fell back on N): the model reads the spike only
                dropped.append(g.name)
                continue
            examples.append(Example(g.name, a.spike.aligned, g.cls, "real", list(a.spike.insertions)))
            templates[g.cls].append((g.name, a.spike))
    _log(f"real training genomes: {len(examples)} " + str({c: len(v) for c, v in templates.items()})
         + (f"; left out {len(dropped)} whose spike markers contradict their label: {', '.join(dropped)}"
            if dropped else ""))
    noise = SynthConfig(dropout_rate=cfg.dropout_rate)
    for s in synth_batch(cfg.synth_per_class, seed=cfg.seed, config=noise):
        examples.append(Example(f"synth-{s.clade}", s.aligned, s.cls, "synthetic", list(s.insertions)))
    for cls in CLASSES:
        pool = templates[cls]
        if not pool:
            continue
        for i in range(cfg.template_copies_per_class):
            name, cut = pool[int(rng.integers(len(pool)))]
            s = synth_from_template(cut, cls, rng, config=noise, name=name)
            examples.append(Example(f"copy-{name}", s.aligned, cls, "template", list(s.insertions)))
    _log(f"training examples: {len(examples)} " + str({c: sum(e.cls == c for e in examples) for c in CLASSES}))
    return examples, validation


def augmented_copies(pool: list[Example], copies: int, seed: int, augment) -> list[Example]:
    """``copies`` augmented draws of every pool example (for the k-mer baseline's training set)."""
    from bertgeom.sars_cov_2.genome.augment import augment_spike

    rng = np.random.default_rng([seed, 7919])
    out = list(pool)
    if augment is None:
        return out
    for _ in range(copies):
        for e in pool:
            a = augment_spike(e.spike, e.cls, rng, e.insertions, augment)
            out.append(Example(e.name, a.aligned, e.cls, e.origin + "+augmented", a.insertions))
    return out


def init_from_minilm(vocab_size: int, seed: int):
    """A ``BertForSequenceClassification`` with MiniLM's encoder and a fresh k-mer embedding.

    Special tokens keep MiniLM's rows ([PAD], [UNK], [CLS], [SEP], [MASK]); each k-mer row
    is drawn from a normal with the mean and per-dimension sd of MiniLM's English rows
    (the distribution new tokens get when added to a vocabulary).
    """
    import torch
    from transformers import BertModel

    from bertgeom.models import minilm_dir
    from bertgeom.sars_cov_2.variant import build_variant_model

    base = BertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager", use_safetensors=True,
                                     local_files_only=True)
    cfg = base.config.to_dict()
    cfg.update(vocab_size=vocab_size, num_labels=len(CLASSES), id2label={i: c for i, c in enumerate(CLASSES)},
               label2id=dict(CLASS_TO_ID), pad_token_id=0, architectures=["BertForSequenceClassification"])
    torch.manual_seed(seed)
    model = build_variant_model(cfg)
    state = {k: v for k, v in base.state_dict().items() if not k.startswith("embeddings.word_embeddings")}
    missing, unexpected = model.bert.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    old = base.embeddings.word_embeddings.weight.detach()
    mean, sd = old.mean(0), old.std(0)
    g = torch.Generator().manual_seed(seed)
    new = mean + sd * torch.randn(vocab_size, old.shape[1], generator=g)
    tok = base.config  # MiniLM ids of the special tokens
    special_ids = [0, 100, 101, 102, 103]  # [PAD] [UNK] [CLS] [SEP] [MASK] in the uncased vocab
    new[:5] = old[special_ids]
    del tok
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight.copy_(new)
    return model


def init_from_variant(path: Path):
    """A trainable copy of an existing variant model directory, with its k-mer vocabulary."""
    from safetensors.torch import load_file

    from bertgeom.sars_cov_2.genome.kmers import KmerVocab
    from bertgeom.sars_cov_2.variant import build_variant_model

    path = Path(path)
    model = build_variant_model(json.loads((path / "config.json").read_text()))
    state = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}  # safetensors: no pickle
    model.load_state_dict(state, strict=False)
    return model, KmerVocab.load(path / "kmer_vocab.json")


class TrainingInterrupted(Exception):
    """Ctrl-C during training: the checkpoint at ``step`` was written and the run can be resumed."""

    def __init__(self, step: int, total: int, work_dir: Path):
        super().__init__(f"interrupted at step {step}/{total}; the checkpoint in '{work_dir}' holds it, "
                         "rerun the same command to resume.")
        self.step, self.total, self.work_dir = step, total, work_dir


class CorruptPool(Exception):
    """``train_pool.npz`` cannot be read (a run killed while writing it with an older version)."""


def _save_pool(path: Path, examples: list[Example]) -> None:
    """Write the pool atomically (:func:`bertgeom.safety.write_atomically`)."""
    spikes = np.frombuffer("".join(e.spike for e in examples).encode("ascii"),
                           dtype=np.uint8).reshape(len(examples), -1)
    meta = [[e.name, e.cls, e.origin, e.insertions] for e in examples]
    from bertgeom.safety import write_atomically

    write_atomically(path, lambda fh: np.savez(fh, spikes=spikes, meta=np.array(json.dumps(meta))))


def _load_pool(path: Path) -> list[Example]:
    """The pool written by :func:`_save_pool`; :class:`CorruptPool` when it is truncated or foreign."""
    try:
        with np.load(path, allow_pickle=False) as d:
            spikes, meta = d["spikes"], json.loads(str(d["meta"]))
        return [Example(n, spikes[i].tobytes().decode("ascii"), c, o, [tuple(x) for x in ins])
                for i, (n, c, o, ins) in enumerate(meta)]
    except (zipfile.BadZipFile, EOFError, KeyError, ValueError, OSError) as exc:
        raise CorruptPool(f"{path.name} is unreadable ({type(exc).__name__})") from None


def rng_states(device: str) -> dict:
    """Every global random state a training step reads (dropout, any numpy/Python draw)."""
    import torch

    states = {"torch_cpu": torch.get_rng_state(), "numpy": json.dumps(_np_state_to_json(np.random.get_state())),
              "python": json.dumps(_py_state_to_json(random.getstate()))}
    if device == "cuda":
        states["torch_cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict, device: str) -> None:
    import torch

    torch.set_rng_state(states["torch_cpu"].cpu())
    np.random.set_state(_np_state_from_json(json.loads(states["numpy"])))
    random.setstate(_py_state_from_json(json.loads(states["python"])))
    if device == "cuda" and "torch_cuda" in states:
        torch.cuda.set_rng_state_all([s.cpu() for s in states["torch_cuda"]])


def _np_state_to_json(st) -> list:
    name, keys, pos, has_gauss, cached = st
    return [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]


def _np_state_from_json(v):
    return (v[0], np.array(v[1], dtype=np.uint32), v[2], v[3], v[4])


def _py_state_to_json(st) -> list:
    version, internal, gauss = st
    return [version, list(internal), gauss]


def _py_state_from_json(v):
    return (v[0], tuple(v[1]), v[2])


#: Config fields that shape the trajectory: a checkpoint written under other values is not resumed
#: (``epochs`` may change: a longer or shorter schedule continues from the same steps).
_TRAJECTORY_FIELDS = ("seed", "init_from", "synth_per_class", "template_copies_per_class", "max_real_per_class",
                      "dropout_rate", "augment", "batch_size", "lr_encoder", "lr_new", "weight_decay",
                      "warmup_share", "max_grad_norm", "label_smoothing", "precision")


def trajectory_fingerprint(cfg: TrainConfig) -> str:
    d = public_config(cfg)
    return hashlib.sha256(json.dumps({k: d[k] for k in _TRAJECTORY_FIELDS}, sort_keys=True).encode()).hexdigest()[:16]


class _StopOnSigint:
    """While active, a first Ctrl-C asks the loop to stop after the current step and write its
    checkpoint; a second one interrupts at once (the previous checkpoint stays valid)."""

    def __init__(self):
        self.requested = False
        self._old = None

    def __enter__(self):
        if threading_main():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, self._old)

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def step_batch(pool: list[Example], idx: np.ndarray, vocab, seed: int, step: int,
               augment) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and labels of one training step: the pool examples ``idx``, each freshly augmented
    with a generator seeded by ``(seed, step)`` (so a resumed run draws the same batches)."""
    from bertgeom.sars_cov_2.genome.augment import augment_spike

    rng = np.random.default_rng([seed, step])
    spikes = []
    for i in idx:
        e = pool[int(i)]
        spikes.append(augment_spike(e.spike, e.cls, rng, e.insertions, augment).aligned if augment else e.spike)
    ids, _ = vocab.encode_batch(spikes, max_length=None)
    return ids, np.array([CLASS_TO_ID[pool[int(i)].cls] for i in idx], dtype=np.int64)


def _training_pool(cfg: TrainConfig, work_dir: Path, t0: float):
    """The examples and k-mer vocabulary of a run: read back from ``work_dir`` when a run left them there
    (a half-written pool is reported and rebuilt), built and saved otherwise."""
    from bertgeom.sars_cov_2.genome.kmers import KmerVocab

    pool_file = work_dir / "train_pool.npz"
    vocab_file = work_dir / "kmer_vocab.json"
    pool = None
    if pool_file.is_file() and vocab_file.is_file():
        try:
            pool = _load_pool(pool_file)
            vocab = KmerVocab.load(vocab_file)
            _log(f"resumed data: {len(pool)} examples, vocabulary {len(vocab)}")
        except CorruptPool as exc:
            _log(f"{exc}: it was probably half-written by an interrupted run; rebuilding the data pool "
                 "(and starting the training over, since its checkpoint used that pool).")
            pool = None
            for stale in (work_dir / "checkpoint.pt", pool_file):
                stale.unlink(missing_ok=True)
    if pool is None:
        pool, _ = build_examples(cfg)
        if cfg.init_from:
            vocab = KmerVocab.load(Path(cfg.init_from) / "kmer_vocab.json")
        else:
            vocab = KmerVocab.build([e.spike for e in pool])
        vocab.save(vocab_file)
        _save_pool(pool_file, pool)
        _log(f"vocabulary: {len(vocab)} tokens; data prepared in {time.time() - t0:.0f} s")
    return pool, vocab


def _optimizer_and_schedule(model, cfg: TrainConfig, n_examples: int):
    """AdamW with its own learning rate for the new parameters (k-mer embeddings, classifier) and a linear
    warm-up and decay over the run's steps: ``(optimizer, scheduler, total steps)``."""
    import torch

    new_params = [p for n, p in model.named_parameters() if "word_embeddings" in n or n.startswith("classifier")]
    new_ids = {id(p) for p in new_params}
    enc_params = [p for p in model.parameters() if id(p) not in new_ids]
    opt = torch.optim.AdamW([
        {"params": enc_params, "lr": cfg.lr_encoder},
        {"params": new_params, "lr": cfg.lr_new},
    ], weight_decay=cfg.weight_decay, eps=1e-8)
    steps_per_epoch = math.ceil(n_examples / cfg.batch_size)
    total = max(1, int(round(steps_per_epoch * cfg.epochs)))
    warm = max(1, int(total * cfg.warmup_share))

    def lr_lambda(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    return opt, sched, total


def _save_trained(model, vocab, cfg: TrainConfig, out_dir: Path) -> None:
    """Write the trained model to ``out_dir`` (CPU, no machine path in its config) with its training
    config and, when it continued from another model, that model's lineage."""
    from bertgeom.sars_cov_2.variant import save_variant_model

    model.eval()
    model.to("cpu")
    model.config.name_or_path = ""  # no machine path in the shipped config
    config_extra = {"bertgeom_k": vocab.k, "bertgeom_stride": vocab.stride, "bertgeom_train_config": public_config(cfg)}
    save_variant_model(model, vocab, out_dir, extra_config=config_extra)
    if cfg.init_from:
        record_lineage(out_dir, Path(cfg.init_from))


def train(cfg: TrainConfig, out_dir: Path, work_dir: Path) -> dict:
    """Run (or resume) training; writes the model to ``out_dir`` and returns a summary."""
    import torch


    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    bf16 = use_bf16(device, cfg.precision)
    augment = cfg.augment_config()
    work_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    pool, vocab = _training_pool(cfg, work_dir, t0)

    if cfg.init_from:
        model, init_vocab = init_from_variant(Path(cfg.init_from))
        if len(init_vocab) != len(vocab):
            raise ValueError(f"the work directory's vocabulary does not match the model at {cfg.init_from}")
    else:
        model = init_from_minilm(len(vocab), cfg.seed)
    model.to(device)
    n = len(pool)
    opt, sched, total = _optimizer_and_schedule(model, cfg, n)
    rng = np.random.default_rng(cfg.seed)
    order = np.concatenate([rng.permutation(n) for _ in range(math.ceil(cfg.epochs) + 1)])
    step = 0
    elapsed_before = 0.0  # training seconds spent before a resume (kept in the checkpoint)
    running: list[float] = []
    hits: list[float] = []
    fingerprint = trajectory_fingerprint(cfg)

    def order_hash(steps: int) -> str:  # the data order of the first ``steps`` steps
        return hashlib.sha256(order[: steps * cfg.batch_size].tobytes()).hexdigest()[:16]

    ckpt = work_dir / "checkpoint.pt"
    if ckpt.is_file():
        state = torch.load(ckpt, map_location=device, weights_only=True)  # our own file; tensors only
        if state.get("fingerprint", fingerprint) != fingerprint:
            raise ValueError(f"the checkpoint in '{work_dir}' was written by a run with other settings (seed, "
                             "schedule, learning rates or augmentation); use another --work-dir or the same settings.")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step = int(state["step"])
        elapsed_before = float(state.get("elapsed", 0.0))
        running, hits = list(state.get("losses", [])), list(state.get("hits", []))
        if "rng" in state:
            restore_rng_states(state["rng"], device)
        if state.get("order_hash", order_hash(step)) != order_hash(step):
            raise ValueError(f"the data order of the checkpoint in '{work_dir}' differs from this run's.")
        _log(f"resumed from step {step}/{total}")

    def save_checkpoint() -> None:
        from bertgeom.safety import write_atomically

        state = {"model": model.state_dict(), "optimizer": opt.state_dict(),
                 "scheduler": sched.state_dict(), "step": step, "rng": rng_states(device),
                 "augment_seed": [cfg.seed, step], "order_hash": order_hash(step), "fingerprint": fingerprint,
                 "losses": running, "hits": hits, "elapsed": elapsed_before + time.time() - t_train}
        write_atomically(ckpt, lambda fh: torch.save(state, fh))

    model.train()
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=cfg.label_smoothing)
    t_train = time.time()
    start_step = step
    stop_at = min(total, cfg.max_steps) if cfg.max_steps else total
    if step == 0:  # a fresh run: dropout and any global draw start from the seed (with --init-from too)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        random.seed(cfg.seed)
    interrupted = False
    with _StopOnSigint() as sigint:
        _log(f"training on {device}{' (bf16 autocast)' if bf16 else ''}, {total} steps of {cfg.batch_size}, "
             f"augmentation {'on' if augment else 'off'}")
        while step < stop_at:
            idx = order[step * cfg.batch_size:(step + 1) * cfg.batch_size]
            ids, y_np = step_batch(pool, idx, vocab, cfg.seed, step, augment)
            batch = torch.from_numpy(ids).to(device)
            y = torch.from_numpy(y_np).to(device)
            with torch.autocast(device_type="cuda" if device == "cuda" else "cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(input_ids=batch, attention_mask=(batch != 0).long()).logits
            loss = loss_fn(logits.float(), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            running.append(float(loss.detach()))
            hits.append(float((logits.detach().argmax(-1) == y).float().mean()))
            if step % 10 == 0 or step == total:
                rate = (time.time() - t_train) / max(1, step - start_step)
                _log(f"step {step}/{total} loss {np.mean(running[-10:]):.4f} batch accuracy {np.mean(hits[-10:]):.3f} "
                     f"({rate:.1f} s/step)")
            if sigint.requested or step % cfg.checkpoint_every == 0 or step == stop_at:
                save_checkpoint()
            if sigint.requested:
                interrupted = True
                break
    if interrupted:
        raise TrainingInterrupted(step, total, work_dir)
    _save_trained(model, vocab, cfg, out_dir)
    summary = {"train_examples": int(n), "vocab_size": len(vocab), "steps": step, "schedule_steps": total,
               "examples_seen": int(step * cfg.batch_size), "device": device, "bf16": bf16,
               "train_seconds": round(elapsed_before + time.time() - t0, 1),
               "final_loss": float(np.mean(running[-20:])) if running else None}
    (out_dir / "train_summary.json").write_text(json.dumps(summary, indent=1))
    _log(f"saved model to {out_dir}: {summary}")
    return summary


def record_lineage(model_dir: Path, base_dir: Path) -> list[dict]:
    """Write into ``model_dir/config.json`` the training stages of the model it continued from
    (``bertgeom_train_history``: the base's own history, then the base's config and summary)."""
    base = json.loads((base_dir / "config.json").read_text())
    summary_file = base_dir / "train_summary.json"
    stage = {k: v for k, v in (base.get("bertgeom_train_config") or {}).items() if k != "shared_data"}
    stage["summary"] = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    history = list(base.get("bertgeom_train_history") or []) + [stage]
    path = model_dir / "config.json"
    config = json.loads(path.read_text())
    config["bertgeom_train_history"] = history
    path.write_text(json.dumps(config, indent=1, sort_keys=True))
    return history


def public_config(cfg: TrainConfig) -> dict:
    """The config as saved with a model: no machine paths (folders are kept by name only)."""
    d = asdict(cfg)
    for key in ("data_dir", "init_from"):
        if d[key]:
            d[key] = Path(d[key]).name
    return d
