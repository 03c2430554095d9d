"""Write the shipped variant model's card (``MODEL_CARD.md``) and ``metrics.json``.

``python -m bertgeom.sars_cov_2.variant.card MODEL_DIR EVAL.json [ROBUSTNESS.json]`` after ``python -m bertgeom
evaluate ... --json EVAL.json`` (and ``python bench/bench_robustness.py --fit-temperature
--write-calibration --plot MODEL_DIR/reliability.png --out ROBUSTNESS.json``): the numbers in the
card always come from an evaluation run; a ``reliability.png`` beside the card is shown in it.
``--before TITLE=RESULT.json`` (repeatable, with ``--after TITLE`` and ``--note TEXT``) adds a
*Before and after* table: the model this one replaces, scored by the same benchmark, beside it
(kept in ``metrics.json`` as ``previous``, so the card regenerates from it alone).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from bertgeom.tables import counted, word_for


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


def _stage_line(stage: dict) -> str:
    summ = stage.get("summary") or {}
    src = f"continued from `{stage['init_from']}`" if stage.get("init_from") else "from the bundled MiniLM-L6"
    off = (stage.get("augment") or {}).get("off") or "augment" not in stage
    aug = "no augmentation" if off else "per-step augmentation"
    return (f"{src}; seed {stage.get('seed', 42)}; {stage.get('epochs')} "
            f"{word_for(1 if stage.get('epochs') == 1 else 2, 'epoch', 'epochs')} of batch {stage.get('batch_size')} "
            f"({summ.get('steps', 'n/a')} steps, {summ.get('train_examples', 'n/a')} pool examples), encoder lr "
            f"{stage.get('lr_encoder')}, new-parameter lr {stage.get('lr_new')}, {aug}; "
            f"{summ.get('train_seconds', 'n/a')} s on {summ.get('device', 'cpu')}"
            f"{' (bf16)' if summ.get('bf16') else ''} with "
            f"{counted(stage['threads'], 'thread') if stage.get('threads') else 'all threads'}"
            + (f" ({', '.join(f'{k}={v}' for k, v in overrides.items())})" if (overrides := {
                k: v for k, v in (stage.get("augment") or {}).items() if k != "off"}) else "")
            + (f". {(stage.get('extra') or {}).get('note')}" if (stage.get("extra") or {}).get("note") else ""))


def _held_out_sentence(train_cfg: dict) -> str:
    """The training data's last sentence: no held-out genome was trained on, or which ones were
    (``extra.held_out_seen`` of the last stage's config: ``{"stages": "1-6", "genomes": {name: part}}``,
    the genomes that stages trained on an earlier labelling's split saw and that are held out now)."""
    seen = (train_cfg.get("extra") or {}).get("held_out_seen") or {}
    if not seen.get("genomes"):
        return "The model never saw an evaluation or calibration genome."
    names = ", ".join(f"{n} ({part})" for n, part in seen["genomes"].items())
    return (f"Stages {seen.get('stages', '')} trained on the split of the labels before the placement, whose "
            f"training part held {counted(len(seen['genomes']), 'genome')} that "
            f"{word_for(len(seen['genomes']), 'is', 'are')} held out now: {names}; the figures "
            "below count them.")


def _introduction(cfg: dict, train_cfg: dict, size_mb: float, stage_lines: str, cmd: str, cal_line: str) -> str:
    """The card from its title to the training data: what the model does, its architecture, recipe and data."""
    return f"""# SARS-CoV-2 variant BERT (spike 12-mers) — model card

**What it does.** Reads the spike gene of a SARS-CoV-2 genome as overlapping 12-mers (stride 9,
425 tokens between [CLS] and [SEP]) and predicts one of 8 classes: gh (pre-VOC: GISAID clade GH
and every other pre-VOC lineage — GH's own marker lies outside the spike), lambda, mu, alpha, beta,
delta, gamma, omicron. It reproduces the case study of Bonino, Ghione & Cirrincione (2025,
arXiv:2502.12033, §5) at the scale of a laptop CPU.

**Architecture.** `BertForSequenceClassification`, 6 layers x 12 heads, hidden 384 (MiniLM-L6
geometry), {cfg.get('vocab_size')} tokens (5 special + the training pool's 12-mers; MiniLM's English rows
were dropped since spike inputs never use them). Weights: fp16 safetensors, {size_mb:.1f} MB.

**Recipe.** Training stages, oldest first (each from `python -m bertgeom train`; the last one is
`{cmd}`):

{stage_lines}
{cal_line}
Every stage fine-tunes end to end with AdamW, linear warm-up ({train_cfg.get('warmup_share')}) and decay,
gradient clipping {train_cfg.get('max_grad_norm')}; the stages with augmentation also use label smoothing
{train_cfg.get('label_smoothing', 0)}. They draw fresh **label-preserving augmentations** for every example of
every step (`bertgeom.sars_cov_2.genome.augment`; defaults, overridden where a stage says so): 1-3 characteristic
mutations of other classes injected (convergent evolution; half the examples by default; with
`one_class_prob` all from one other class; one that falls on an own marker's codon replaces it), 1-2 own
markers reverted (30 %), an own marker under an N run (20 %), private substitutions (with
`private_burst_prob` a burst of 1-10 at non-marker sites), real ARTIC amplicon dropouts
(`amplicon_prob`) and partial spikes; an augmentation is kept only if the rule-based marker call still
gives the label.

**Training data** (open data only, no GISAID), shipped in `bertgeom/data/genomes`:
* {train_cfg.get('synth_per_class')} synthetic spikes per class from the Nextstrain clade definitions
  (reference + inherited clade mutations + the training genomes' spike mutation profiles) with
  realistic noise (private substitutions, amplicon-dropout N runs, short N runs, partial ends,
  ambiguity codes);
* {train_cfg.get('template_copies_per_class')} noised copies per class of the real training genomes;
* the real training genomes themselves (at most {train_cfg.get('max_real_per_class')} per class), less any
  whose spike markers contradict its label (the rule-based call of its spike; a genome whose QC
  fails is left out too).

Real genomes: 567 open INSDC genomes redistributed by Nextstrain (MIT), labelled by their placement
on Nextclade's reference tree (the class of the nearest node's WHO name; for a designated
recombinant the class of its spike; `unassigned`, and left out, where the model cannot read the
spike: `bertgeom/data/PROVENANCE.md`); at most half of each class is used for training
(`split_real_genomes`, seed 0); of the rest a third per class calibrates the temperature
(`split_calibration`, seed 0) and the others are the evaluation genomes below.
{_held_out_sentence(train_cfg)}

"""


def _training_command(train_cfg: dict) -> str:
    """The ``python -m bertgeom train`` command line of the last training stage."""
    cmd = "python -m bertgeom train"
    if train_cfg.get("init_from"):
        cmd += f" --init-from {train_cfg['init_from'].split(' ')[0]}"
    cmd += (f" --seed {train_cfg.get('seed', 42)} --epochs {train_cfg.get('epochs')} --batch-size "
            f"{train_cfg.get('batch_size')} --lr-encoder "
            f"{train_cfg.get('lr_encoder')} --lr-new {train_cfg.get('lr_new')} --threads "
            f"{train_cfg.get('threads') or 0}")
    return cmd + "".join(f" --augment {k}={json.dumps(v, separators=(',', ':'))}"
                         for k, v in (train_cfg.get("augment") or {}).items() if k != "off")


def _calibration_paragraph(robustness: dict) -> str:
    """The card's **Calibration** paragraph ("" when the run fitted no temperature)."""
    cal = robustness.get("calibration") or {}
    if not cal:
        return ""
    return (f"\n**Calibration.** Temperature scaling (Guo et al. 2017, arXiv:1706.04599): the logits are "
            f"divided by T = {robustness['temperature']:.3f} (`calibration.json`, tied to the weights' hash), "
            f"fitted by NLL on the {cal.get('genomes')} real **calibration** genomes (never trained on, never "
            "evaluated; retraining candidates are compared on them too, `--split calibration`) and "
            f"{cal.get('perturbed')} perturbations of them (half the weight each), in "
            f"{cal.get('seconds', 'n/a')} s on {cal.get('device', 'cpu')} ({robustness.get('precision', 'fp32')}). "
            "Every probability the CLI, the page "
            "and its low-confidence warning show is the calibrated one; the call itself does not change.\n")


def _robustness_section(model_dir: Path, robustness: dict) -> str:
    """The card's *Robustness and calibration* section: the per-kind tables, the reliability diagram
    when it sits beside the card, and the release gates."""
    from bertgeom.sars_cov_2.variant.robustness import markdown_tables, release_gates

    gates = "\n".join(f"* {'met' if g['ok'] else '**not met**'}: {k}" for k, g in release_gates(robustness).items())
    png = "\n![Reliability diagram](reliability.png)\n" if (model_dir / "reliability.png").is_file() else ""
    return f"""
## Robustness and calibration

`python bench/bench_robustness.py` ({robustness.get('precision', 'fp32')} forward passes) on the
{robustness['evaluation_genomes']} real evaluation genomes (the plain row) and {robustness['perturbations']} \
perturbations of {robustness['perturbed_bases']} of them (at most
{robustness['max_per_class']} per class, seed {robustness['seed']}): two and three markers of **one** other
class with every own marker kept (convergent evolution: a rule-based caller keeps the class), own
markers reverted, 1-10 private substitutions at non-marker sites, real ARTIC V3/V4.1 amplicon
dropouts over the spike, random N runs of 100-500 nt and partial spikes. Flips count calls that
differ from the same classifier's call on the plain genome (in brackets: among the perturbations
where the rule-based call keeps its class). The k-mer baseline is trained on this model's recipe in
the same run; the rule-based marker call gives no probabilities.

{markdown_tables(robustness)}
{png}
Release criteria of the project's robustness issue, on these genomes:

{gates}
"""


def comparison_column(title: str, result: dict) -> dict:
    """The figures of one wide benchmark result (``bench/bench_robustness.py``'s JSON, or a
    ``metrics.json``'s ``robustness``) that the card's before/after table sets side by side."""
    from bertgeom.sars_cov_2.variant.robustness import release_gates

    bert = result["reports"]["BERT variant model"]
    raw = result["reports"].get("BERT, raw softmax", bert)
    ev = result["evaluation"]
    gates = release_gates(result)
    return {"title": title, "weights": result.get("weights", ""), "temperature": result["temperature"],
            "n": ev["model"]["n"], "accuracy": ev["model"]["accuracy"], "macro_f1": ev["model"]["macro_f1"],
            "rules_accuracy": ev["rules"]["accuracy"], "kmer_accuracy": ev["baseline"]["accuracy"],
            "perturbations": result["perturbations"],
            "flips": {k: v["flip_rate"] for k, v in bert.items() if k != "plain"},
            "wrong_confident_qc_pass": sum(v.get("wrong_confident_qc_pass") or 0 for v in bert.values()),
            "wrong_confident": sum(v.get("wrong_confident") or 0 for v in bert.values()),
            "ece_plain": bert["plain"]["ece"], "ece_plain_raw": raw["plain"]["ece"],
            "ece_worst_kind": max(v["ece"] for k, v in bert.items() if k != "plain"),
            "gates_met": sum(bool(g["ok"]) for g in gates.values()), "gates": len(gates)}


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _comparison_table(title: str, note: str, cols: list[dict], head_rows: list) -> str:
    """A card section: ``cols`` (:func:`comparison_column`) side by side, ``head_rows`` then the rows
    every comparison shares (flips per perturbation kind, confident errors, release gates)."""
    from bertgeom.sars_cov_2.variant.robustness import KINDS

    rows = list(head_rows)
    rows += [(f"flips: {KINDS[k]}", (lambda k: lambda c: _pct(c["flips"].get(k)))(k)) for k in KINDS if k != "plain"]
    rows += [("wrong with conf. >= 0.9, all kinds (QC pass / all)",
              lambda c: f"{c['wrong_confident_qc_pass']} / {c['wrong_confident']}"),
             ("release gates met", lambda c: f"{c['gates_met']} of {c['gates']}")]
    lines = ["| figure | " + " | ".join(c["title"] for c in cols) + " |", "|---|" + "---|" * len(cols)]
    lines += [f"| {name} | " + " | ".join(fn(c) for c in cols) + " |" for name, fn in rows]
    return f"\n## {title}\n\n" + (f"{note}\n\n" if note else "") + "\n".join(lines) + "\n"


def _before_after_section(previous: dict, robustness: dict) -> str:
    """The card's *Before and after*: the columns of ``previous`` (figures of the model this one
    replaced, :func:`comparison_column`) beside this model's, row by row."""
    cols = list(previous["columns"]) + [comparison_column(previous.get("after", "this model"), robustness)]
    rows = [("evaluation genomes", lambda c: str(c["n"])),
            ("BERT: accuracy / macro-F1", lambda c: f"{_pct(c['accuracy'])} / {c['macro_f1']:.3f}"),
            ("rule-based call: accuracy", lambda c: _pct(c["rules_accuracy"])),
            ("k-mer baseline: accuracy", lambda c: _pct(c["kmer_accuracy"])),
            ("temperature T", lambda c: f"{c['temperature']:.3f}"),
            ("ECE, plain genomes (calibrated / raw)", lambda c: f"{c['ece_plain']:.3f} / {c['ece_plain_raw']:.3f}"),
            ("ECE, worst perturbation kind", lambda c: f"{c['ece_worst_kind']:.3f}"),
            ("perturbations", lambda c: str(c["perturbations"]))]
    return _comparison_table("Before and after", previous.get("note", ""), cols, rows)


def _candidates_section(candidates: dict) -> str:
    """The card's *Candidates not shipped*: retrained weights scored on the calibration genomes (where
    candidates are compared, so the evaluation genomes never take part in choosing), beside the
    shipped weights on the same genomes, and why they were not shipped."""
    rows = [("calibration genomes", lambda c: str(c["n"])),
            ("BERT: accuracy", lambda c: _pct(c["accuracy"])),
            ("temperature T", lambda c: f"{c['temperature']:.3f}"),
            ("perturbations", lambda c: str(c["perturbations"]))]
    return _comparison_table("Candidates not shipped", candidates.get("note", ""), list(candidates["columns"]), rows)


def _metrics_section(evaluation: dict) -> str:
    """The card's *Metrics on real held-out genomes*: BERT beside the rule-based call and the k-mer
    baseline, per class, and the confusion matrix."""
    model, base, rules = evaluation["model"], evaluation.get("baseline"), evaluation.get("rules")
    return f"""## Metrics on real held-out genomes

Evaluated with `python -m bertgeom evaluate` on the {model['n']} real evaluation genomes (open data,
not trained on, not used for calibration), next to the rule-based marker call \
(`bertgeom.sars_cov_2.genome.markers`, the second opinion the
CLI and the page show) and a logistic regression on k-mer counts trained on the same recipe in the
same run.

| classifier | accuracy | macro-F1 |
|---|---|---|
| BERT variant model | {model['accuracy']:.4f} | {model['macro_f1']:.4f} |
""" + (f"| rule-based marker call | {rules['accuracy']:.4f} | {rules['macro_f1']:.4f} |\n" if rules else "") + (
        f"| k-mer count logistic regression | {base['accuracy']:.4f} | {base['macro_f1']:.4f} |\n"
        if base else "") + f"""
Per class (BERT):

{_table(model)}

Confusion matrix (BERT):

{_confusion(model)}
"""


def _limits_section() -> str:
    """The card's *Limits*: what the model cannot be trusted with."""
    return """## Limits

* The VOC classes have few real genomes here (lambda and mu: 6 each in the whole open set, so 3
  held out); per-class recall on those rests on a handful of genomes. The paper's GISAID test set
  (9,881 genomes) cannot be redistributed.
* Labels are genome-wide placements on Nextclade's reference tree (a designated recombinant takes
  its spike's class); a genome whose spike disagrees with its placement (an undesignated
  recombinant, an N-heavy spike) cannot be right for any spike-only classifier.
* `gh` means "pre-VOC": from the spike alone GH cannot be told apart from other D614G lineages.
* Lineages that appeared after the clade definitions used here (or recombinants) are forced into
  one of the 8 classes; watch the low-confidence warning, the rule-based second opinion and the QC card.
* Robustness was measured for up to three markers of one other class with every own marker kept;
  a genome that carries most of another class's markers (a real recombinant) can and should change
  the call. Calibration was fitted and measured on a few hundred open genomes (most of them pre-VOC):
  confidence on lineages unlike these is not guaranteed to be calibrated.
* Alignment uses minimap2 (the paper used BWA on 150-nt chunks) and keeps reference
  coordinates (deletions as '-', insertions recorded, not inserted).
* k-mers never seen in training are read as [UNK]; the UNK rate is reported per genome.
"""


def write_card(model_dir: Path, evaluation: dict, robustness: dict | None = None) -> str:
    """Write ``MODEL_CARD.md`` and ``metrics.json`` in ``model_dir`` from an evaluation run (and the
    robustness benchmark's result); return the card's text."""
    cfg = json.loads((model_dir / "config.json").read_text())
    train_cfg = cfg.get("bertgeom_train_config", {})
    summary_path = model_dir / "train_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    stages = list(cfg.get("bertgeom_train_history") or []) + [{**train_cfg, "summary": summary}]
    size_mb = (model_dir / "model.safetensors").stat().st_size / 2**20
    stage_lines = "\n".join(f"{i}. {_stage_line(st)}." for i, st in enumerate(stages, 1))
    with_robustness = bool(robustness and "kinds" in robustness)
    cal_line = _calibration_paragraph(robustness) if with_robustness else ""
    previous = evaluation.get("previous")
    candidates = evaluation.get("candidates")
    text = (_introduction(cfg, train_cfg, size_mb, stage_lines, _training_command(train_cfg), cal_line)
            + _metrics_section(evaluation)
            + (_robustness_section(model_dir, robustness) if with_robustness else "")
            + (_before_after_section(previous, robustness) if previous and with_robustness else "")
            + (_candidates_section(candidates) if candidates else "") + "\n"
            + _limits_section())
    (model_dir / "MODEL_CARD.md").write_text(text)
    metrics = {"model": evaluation["model"], "rules": evaluation.get("rules"), "baseline": evaluation.get("baseline"),
               "skipped": evaluation.get("skipped", [])}
    if previous:
        metrics["previous"] = previous
    if candidates:
        metrics["candidates"] = candidates
    if robustness:
        metrics["robustness"] = robustness
    (model_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return text


def _main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bertgeom.sars_cov_2.variant.card",
                                 description="write MODEL_CARD.md and metrics.json from an evaluation run")
    ap.add_argument("model_dir")
    ap.add_argument("results", nargs="+", help="ROBUSTNESS.json (the wide benchmark, which carries its evaluation) "
                                                "or EVAL.json [ROBUSTNESS.json]")
    ap.add_argument("--before", action="append", default=[], metavar="TITLE=JSON",
                    help="a column of the before/after table: a benchmark result of the model this one replaces "
                         "(or a metrics.json, whose robustness is read), under TITLE")
    ap.add_argument("--after", default="this model", help="the title of this model's column")
    ap.add_argument("--note", default="", help="one paragraph above the before/after table")
    ap.add_argument("--keep-before", action="store_true",
                    help="keep the before/after columns (and note) of the model directory's metrics.json")
    ap.add_argument("--candidate", action="append", default=[], metavar="TITLE=JSON",
                    help="a column of the *Candidates not shipped* table: a benchmark result on the calibration "
                         "split (bench_robustness.py --split calibration), under TITLE")
    ap.add_argument("--candidate-note", default="", help="one paragraph above the candidates table")
    args = ap.parse_args(argv)
    if len(args.results) > 2:
        ap.error("at most EVAL.json and ROBUSTNESS.json")
    first = json.loads(Path(args.results[0]).read_text())
    if len(args.results) == 1 and "evaluation" in first:  # the wide benchmark's result carries its evaluation
        evaluation, robustness = dict(first["evaluation"]), first
    else:
        evaluation = dict(first)
        robustness = json.loads(Path(args.results[1]).read_text()) if len(args.results) == 2 else None
    if args.before:
        columns = []
        for spec in args.before:
            title, _, path = spec.rpartition("=")
            result = json.loads(Path(path).read_text())
            columns.append(comparison_column(title, result.get("robustness", result)))
        evaluation["previous"] = {"note": args.note, "after": args.after, "columns": columns}
    elif args.keep_before:
        kept = json.loads((Path(args.model_dir) / "metrics.json").read_text()).get("previous")
        if kept:
            evaluation["previous"] = kept
    if args.candidate:
        columns = []
        for spec in args.candidate:
            title, _, path = spec.rpartition("=")
            columns.append(comparison_column(title, json.loads(Path(path).read_text())))
        evaluation["candidates"] = {"note": args.candidate_note, "columns": columns}
    write_card(Path(args.model_dir), evaluation, robustness)


if __name__ == "__main__":
    _main(sys.argv[1:])
