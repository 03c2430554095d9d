"""Write the shipped variant model's card (``MODEL_CARD.md``) and ``metrics.json``.

``python -m bertgeom.variant.card MODEL_DIR EVAL.json`` after ``python -m bertgeom evaluate
... --json EVAL.json``: the numbers in the card always come from an evaluation run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _table(report: dict) -> str:
    lines = ["| class | precision | recall | F1 | genomes |", "|---|---|---|---|---|"]
    for c in report["labels"]:
        m = report["per_class"][c]
        lines.append(f"| {c} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {m['support']} |")
    return "\n".join(lines)


def _confusion(report: dict) -> str:
    labs = report["labels"]
    lines = ["| true \\ predicted | " + " | ".join(labs) + " |", "|---|" + "---|" * len(labs)]
    for c, row in zip(labs, report["confusion"]):
        lines.append(f"| {c} | " + " | ".join(str(v) for v in row) + " |")
    return "\n".join(lines)


def write_card(model_dir: Path, evaluation: dict) -> str:
    cfg = json.loads((model_dir / "config.json").read_text())
    train_cfg = cfg.get("bertgeom_train_config", {})
    summary_path = model_dir / "train_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    model, base = evaluation["model"], evaluation.get("baseline")
    size_mb = (model_dir / "model.safetensors").stat().st_size / 2**20
    text = f"""# SARS-CoV-2 variant BERT (spike 12-mers) — model card

**What it does.** Reads the spike gene of a SARS-CoV-2 genome as overlapping 12-mers (stride 9,
425 tokens between [CLS] and [SEP]) and predicts one of 8 classes: gh (pre-VOC: GISAID clade GH
and every other pre-VOC lineage — GH's own marker lies outside the spike), lambda, mu, alpha, beta,
delta, gamma, omicron. It reproduces the case study of Bonino, Ghione & Cirrincione (2025) at the
scale of a laptop CPU.

**Architecture.** `BertForSequenceClassification`, 6 layers x 12 heads, hidden 384 (MiniLM-L6
geometry), {cfg.get('vocab_size')} tokens (5 special + the training set's 12-mers; MiniLM's English rows
were dropped since spike inputs never use them). Weights: fp16 safetensors, {size_mb:.1f} MB.

**Recipe** (`python -m bertgeom train --epochs {train_cfg.get('epochs')} --threads {train_cfg.get('threads') or 2}`, seed {train_cfg.get('seed')}):
start from the bundled pretrained all-MiniLM-L6-v2 encoder; new k-mer embeddings drawn from the
distribution of MiniLM's token embeddings; fine-tune end to end with AdamW (encoder lr
{train_cfg.get('lr_encoder')}, new embeddings and classifier lr {train_cfg.get('lr_new')}), batch
{train_cfg.get('batch_size')}, linear warm-up ({train_cfg.get('warmup_share')}) and decay, gradient clipping
{train_cfg.get('max_grad_norm')}. Training took {summary.get('train_seconds', 'n/a')} s with
{train_cfg.get('threads') or 'all'} CPU thread(s) on a 2-core machine that was running other jobs
({summary.get('steps', 'n/a')} steps, {summary.get('train_examples', 'n/a')} examples; amplicon
dropouts drawn with mean {train_cfg.get('dropout_rate', 'n/a')} per synthetic spike).

**Training data** (open data only, no GISAID):
* {train_cfg.get('synth_per_class')} synthetic spikes per class from the Nextstrain clade definitions
  (reference + inherited clade mutations + the training genomes' spike mutation profiles) with
  realistic noise (private substitutions, amplicon-dropout N runs, short N runs, partial ends,
  ambiguity codes);
* {train_cfg.get('template_copies_per_class')} noised copies per class of the real training genomes;
* the real training genomes themselves (at most {train_cfg.get('max_real_per_class')} per class).

Real genomes: 567 open INSDC genomes redistributed by Nextstrain (MIT), labelled by Nextstrain clade
rules; at most half of each class is used for training (`split_real_genomes`, seed 0) and the rest
is the validation set below. The model never saw a validation genome.

## Metrics on real held-out genomes

Evaluated with `python -m bertgeom evaluate` on the {model['n']} real validation genomes (open data,
not trained on), next to a logistic regression on k-mer counts trained on the same recipe in the
same run.

| classifier | accuracy | macro-F1 |
|---|---|---|
| BERT variant model | {model['accuracy']:.4f} | {model['macro_f1']:.4f} |
""" + (f"| k-mer count logistic regression | {base['accuracy']:.4f} | {base['macro_f1']:.4f} |\n" if base else "") + f"""
Per class (BERT):

{_table(model)}

Confusion matrix (BERT):

{_confusion(model)}

## Limits

* The VOC classes have few real genomes here (lambda and mu: 6 each in the whole open set, so 3
  held out); per-class recall on those rests on a handful of genomes. The paper's GISAID test set
  (9,881 genomes) cannot be redistributed.
* `gh` means "pre-VOC": from the spike alone GH cannot be told apart from other D614G lineages.
* Lineages that appeared after the clade definitions used here (or recombinants) are forced into
  one of the 8 classes; watch the low-confidence warning and the QC card.
* Alignment uses minimap2 (the paper used BWA on 150-nt chunks) and keeps reference
  coordinates (deletions as '-', insertions recorded, not inserted).
* k-mers never seen in training are read as [UNK]; the UNK rate is reported per genome.
"""
    (model_dir / "MODEL_CARD.md").write_text(text)
    metrics = {"model": model, "baseline": base, "skipped": evaluation.get("skipped", [])}
    (model_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return text


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m bertgeom.variant.card MODEL_DIR EVAL.json")
    write_card(Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()))
