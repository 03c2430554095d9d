"""Train the shipped SARS-CoV-2 variant model from a seed (``python -m bertgeom train``).

Recipe (paper_spec §3.4, scaled to a 2-core CPU):

1. Real open genomes (``shared/data``) are split per class: at most half train, the rest
   validate (:func:`bertgeom.genome.dataset.split_real_genomes`).
2. The training set mixes (a) synthetic spikes built from the Nextstrain clade definitions
   plus the training genomes' spike profiles with realistic noise, (b) noised copies of the
   real training genomes, (c) the real training genomes themselves; classes are balanced.
3. The model starts from the bundled MiniLM-L6 (6 layers x 12 heads): its English rows of
   the word embedding are replaced by the training set's 12-mers (stride 9) plus the five
   special tokens (the paper *adds* k-mers to BERT's vocabulary; English rows are never
   used by spike inputs, so they are dropped to keep the weights small), then
   ``BertForSequenceClassification`` is fine-tuned end to end with AdamW, linear warm-up and
   decay, gradient clipping 1.0.
4. Checkpoints are written every ``checkpoint_every`` steps; an interrupted run resumes.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from bertgeom.genome.classes import CLASS_TO_ID, CLASSES

DEFAULT_SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@dataclass
class TrainConfig:
    """Every knob of a training run (saved next to the model for reproducibility)."""

    seed: int = 42
    shared_data: str = str(DEFAULT_SHARED)
    synth_per_class: int = 120  #: synthetic spikes from definitions + profiles, per class
    template_copies_per_class: int = 100  #: noised copies of real training genomes, per class
    max_real_per_class: int = 250  #: cap on real training genomes per class (gh, the most diverse, has ~200)
    dropout_rate: float = 0.8  #: Poisson mean of amplicon dropouts per synthetic spike (all classes alike,
    #: so that N runs carry no class signal: real VOC genomes of 2021 have more dropouts than 2020 ones)
    epochs: float = 1.0
    batch_size: int = 8
    lr_encoder: float = 1.5e-4  #: small BERTs fine-tune well at 1e-4..2e-4
    lr_new: float = 3e-3  #: k-mer embeddings and the classifier start from scratch
    weight_decay: float = 0.01
    warmup_share: float = 0.05
    max_grad_norm: float = 1.0
    checkpoint_every: int = 20
    max_steps: int = 0  #: stop (and save) after this many steps; 0 = the whole schedule
    threads: int = 0  #: torch threads (0 = torch's default)
    extra: dict = field(default_factory=dict)


@dataclass
class Example:
    name: str
    spike: str  # aligned spike, 3822 characters
    cls: str
    origin: str  # "synthetic", "template", "real"


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def real_genomes(shared: Path):
    """(train, validation) lists of :class:`LabelledGenome` with their analysed spikes."""
    from bertgeom.genome.dataset import load_dev_genomes, split_real_genomes

    genomes = load_dev_genomes(shared / "genomes" / "open_genomes_dev.fasta.xz",
                               shared / "genomes" / "open_genomes_dev_labels.tsv")
    split = split_real_genomes(genomes, seed=0)
    by_name = {g.name: g for g in genomes}
    return [by_name[n] for n in split.train], [by_name[n] for n in split.validation]


def build_examples(cfg: TrainConfig) -> tuple[list[Example], list]:
    """The training examples and the real validation genomes (not analysed yet)."""
    from bertgeom.genome.pipeline import analyse_sequence
    from bertgeom.genome.synth import SynthConfig, synth_batch, synth_from_template

    rng = np.random.default_rng(cfg.seed)
    train_real, validation = real_genomes(Path(cfg.shared_data))
    examples: list[Example] = []
    templates: dict[str, list] = {c: [] for c in CLASSES}
    rng_real = np.random.default_rng(cfg.seed + 1)
    capped = []
    for cls in CLASSES:
        members = [g for g in train_real if g.cls == cls]
        keep = sorted(rng_real.permutation(len(members))[: cfg.max_real_per_class].tolist())
        capped += [members[i] for i in keep]
    for g in capped:
        a = analyse_sequence(g.sequence)
        if a.ok and a.qc is not None and a.qc.verdict != "fail":
            examples.append(Example(g.name, a.spike.aligned, g.cls, "real"))
            templates[g.cls].append((g.name, a.spike))
    _log(f"real training genomes: {len(examples)} " + str({c: len(v) for c, v in templates.items()}))
    noise = SynthConfig(dropout_rate=cfg.dropout_rate)
    for s in synth_batch(cfg.synth_per_class, seed=cfg.seed, config=noise):
        examples.append(Example(f"synth-{s.clade}", s.aligned, s.cls, "synthetic"))
    for cls in CLASSES:
        pool = templates[cls]
        if not pool:
            continue
        for i in range(cfg.template_copies_per_class):
            name, cut = pool[int(rng.integers(len(pool)))]
            s = synth_from_template(cut, cls, rng, config=noise, name=name)
            examples.append(Example(f"copy-{name}", s.aligned, cls, "template"))
    _log(f"training examples: {len(examples)} " + str({c: sum(e.cls == c for e in examples) for c in CLASSES}))
    return examples, validation


def init_from_minilm(vocab_size: int, seed: int):
    """A ``BertForSequenceClassification`` with MiniLM's encoder and a fresh k-mer embedding.

    Special tokens keep MiniLM's rows ([PAD], [UNK], [CLS], [SEP], [MASK]); each k-mer row
    is drawn from a normal with the mean and per-dimension sd of MiniLM's English rows
    (the distribution new tokens get when added to a vocabulary).
    """
    import torch
    from transformers import BertModel

    from bertgeom.models import minilm_dir
    from bertgeom.variant import build_variant_model

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


def _encode(vocab, spikes: list[str]) -> np.ndarray:
    ids, _ = vocab.encode_batch(spikes, max_length=None)
    return ids


def train(cfg: TrainConfig, out_dir: Path, work_dir: Path) -> dict:
    """Run (or resume) training; writes the model to ``out_dir`` and returns its metrics."""
    import torch

    from bertgeom.genome.kmers import KmerVocab
    from bertgeom.variant import save_variant_model

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    work_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    data_file = work_dir / "train_data.npz"
    vocab_file = work_dir / "kmer_vocab.json"
    if data_file.is_file() and vocab_file.is_file():
        vocab = KmerVocab.load(vocab_file)
        with np.load(data_file, allow_pickle=False) as d:
            ids, y = d["ids"], d["y"]
        _log(f"resumed data: {len(y)} examples, vocabulary {len(vocab)}")
    else:
        examples, _ = build_examples(cfg)
        vocab = KmerVocab.build([e.spike for e in examples])
        ids = _encode(vocab, [e.spike for e in examples])
        y = np.array([CLASS_TO_ID[e.cls] for e in examples], dtype=np.int64)
        vocab.save(vocab_file)
        np.savez(data_file, ids=ids, y=y)
        _log(f"vocabulary: {len(vocab)} tokens; data prepared in {time.time() - t0:.0f} s")

    model = init_from_minilm(len(vocab), cfg.seed)
    new_params = [p for n, p in model.named_parameters() if "word_embeddings" in n or n.startswith("classifier")]
    new_ids = {id(p) for p in new_params}
    enc_params = [p for p in model.parameters() if id(p) not in new_ids]
    opt = torch.optim.AdamW([
        {"params": enc_params, "lr": cfg.lr_encoder},
        {"params": new_params, "lr": cfg.lr_new},
    ], weight_decay=cfg.weight_decay, eps=1e-8)
    n = len(y)
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = max(1, int(round(steps_per_epoch * cfg.epochs)))
    warm = max(1, int(total * cfg.warmup_share))

    def lr_lambda(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    rng = np.random.default_rng(cfg.seed)
    order = np.concatenate([rng.permutation(n) for _ in range(math.ceil(cfg.epochs) + 1)])
    step = 0
    elapsed_before = 0.0  # training seconds spent before a resume (kept in the checkpoint)
    ckpt = work_dir / "checkpoint.pt"
    if ckpt.is_file():
        state = torch.load(ckpt, map_location="cpu", weights_only=True)  # our own file; tensors only
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step = int(state["step"])
        elapsed_before = float(state.get("elapsed", 0.0))
        _log(f"resumed from step {step}/{total}")
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss()
    running: list[float] = []
    hits: list[float] = []
    t_train = time.time()
    stop_at = min(total, cfg.max_steps) if cfg.max_steps else total
    while step < stop_at:
        idx = order[step * cfg.batch_size:(step + 1) * cfg.batch_size]
        batch = torch.from_numpy(ids[idx])
        mask = (batch != 0).long()
        logits = model(input_ids=batch, attention_mask=mask).logits
        loss = loss_fn(logits, torch.from_numpy(y[idx]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        running.append(float(loss.detach()))
        hits.append(float((logits.detach().argmax(-1) == torch.from_numpy(y[idx])).float().mean()))
        if step % 10 == 0 or step == total:
            rate = (time.time() - t_train) / max(1, len(running))
            _log(f"step {step}/{total} loss {np.mean(running[-10:]):.4f} batch accuracy {np.mean(hits[-10:]):.3f} "
                 f"({rate:.1f} s/step)")
        if step % cfg.checkpoint_every == 0 or step == stop_at:
            tmp = ckpt.with_suffix(".tmp")
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "step": step,
                        "elapsed": elapsed_before + time.time() - t_train}, tmp)
            os.replace(tmp, ckpt)
    model.eval()
    config_extra = {"bertgeom_k": vocab.k, "bertgeom_stride": vocab.stride, "bertgeom_train_config": asdict(cfg)}
    save_variant_model(model, vocab, out_dir, extra_config=config_extra)
    summary = {"train_examples": int(n), "vocab_size": len(vocab), "steps": step, "schedule_steps": total,
               "train_seconds": round(elapsed_before + time.time() - t0, 1), "final_loss": float(np.mean(running[-20:])) if running else None}
    (out_dir / "train_summary.json").write_text(json.dumps(summary, indent=1))
    _log(f"saved model to {out_dir}: {summary}")
    return summary
