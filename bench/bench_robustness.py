"""Wide robustness and calibration benchmark of the variant classifier on real held-out genomes.

On the real **evaluation** genomes (never trained on, not used for calibration;
:func:`bertgeom.sars_cov_2.genome.dataset.split_calibration`) it reports per perturbation kind
(:data:`bertgeom.sars_cov_2.variant.robustness.KINDS`: plain; one, two and three markers of one other class
with every own marker kept; one and two own markers reverted; 1-10 private substitutions at
non-marker sites; real ARTIC V3/V4.1 amplicon dropouts; N runs of 100-500 nt; partial spikes), side
by side for the BERT, the k-mer-count logistic regression trained on the model's own recipe in the
same run, and the rule-based marker call: accuracy, flip rate (also where the rule-based call keeps
its class), wrong calls with confidence >= 0.9 (QC pass / all) and expected calibration error,
for the BERT both with its raw softmax and with its calibrated temperature; and a reliability
diagram (PNG).

``--fit-temperature`` first fits the softmax temperature on the **calibration** genomes and their
perturbations (:mod:`bertgeom.sars_cov_2.variant.calibration`) and, with ``--write-calibration``, stores it
in the model directory's ``calibration.json``.

``--split calibration`` scores the calibration genomes instead: that is where retraining candidates
are compared against the release gates, so the evaluation genomes never take part in choosing the
weights they are reported on (it refuses ``--update-readme`` and ``--write-calibration``).

Not a timed test: it measures the model. Usage::

    python bench/bench_robustness.py [--model DIR] [--checkpoint WORK_DIR/checkpoint.pt --base DIR]
        [--max-per-class 30] [--fit-temperature [--write-calibration]] [--plot PNG] [--update-readme]
        [--split evaluation|calibration]

Writes ``bench/out/robustness.json`` (and, with ``--update-readme``, the robustness block of docs/case_study.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out"


def _genomes(records) -> list:
    """:class:`Genome` records (aligned spike, insertions, spike QC against the true class)."""
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.sars_cov_2.variant.robustness import Genome

    out = []
    for g in records:
        a = analyse_sequence(g.sequence, cls=g.cls)  # QC judged against the true class
        if a.ok:
            out.append(Genome(g.name, g.cls, a.spike.aligned, tuple(a.spike.insertions), a.qc.verdict if a.qc else ""))
    return out


def cap_per_class(genomes: list, max_per_class: int | None, seed: int = 0) -> list:
    from bertgeom.sars_cov_2.genome.classes import CLASSES

    rng = np.random.default_rng(seed)
    capped = []
    for c in CLASSES:
        members = [g for g in genomes if g.cls == c]
        keep = sorted(rng.permutation(len(members))[:max_per_class].tolist()) if max_per_class else range(len(members))
        capped += [members[i] for i in keep]
    return capped


def validation_genomes(max_per_class: int | None, seed: int = 0, split: str = "evaluation"):
    """(all genomes of ``split``, a per-class-capped subset) as :class:`Genome` records.

    ``split="evaluation"`` is what the README and the model card report; ``"calibration"`` is the
    selection split: retraining candidates are compared there, so that the evaluation genomes
    never take part in choosing the weights they are reported on."""
    from bertgeom.sars_cov_2.variant.train import real_genome_parts

    out = _genomes(real_genome_parts()[split])
    return out, cap_per_class(out, max_per_class, seed)


def calibration_genomes(max_per_class: int | None, seed: int = 0) -> list:
    from bertgeom.sars_cov_2.variant.train import real_genome_parts

    return cap_per_class(_genomes(real_genome_parts()["calibration"]), max_per_class, seed)


def bert_logits(model_dir: Path, batch_size: int = 32, bf16: bool = False):
    """(logits callable on ``(aligned, insertions)`` inputs, loaded model) of a variant model directory
    (``bf16``: under bf16 autocast on the CPU, ~2x faster; logits within ~0.02 of fp32)."""
    import torch

    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant import variant_spec
    from bertgeom.sars_cov_2.variant.predict import logits_for_ids

    loaded = load_model(variant_spec(model_dir))
    cache: dict[str, np.ndarray] = {}

    def logits(inputs) -> np.ndarray:
        todo = list(dict.fromkeys(a for a, _ in inputs if a not in cache))
        for i in range(0, len(todo), batch_size):
            chunk = todo[i : i + batch_size]
            ids, _ = loaded.tokenizer.encode_batch(chunk, max_length=None)
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                z = logits_for_ids(loaded, ids)
            for a, row in zip(chunk, z):
                cache[a] = row
        return np.array([cache[a] for a, _ in inputs]).reshape(len(inputs), -1)

    return logits, loaded


def bert_scorer(logits, labels, temperature: float):
    from bertgeom.probabilities import scaled_softmax

    def score(inputs):
        p = scaled_softmax(logits(inputs), temperature)
        return [labels[int(i)] for i in p.argmax(1)], [float(x) for x in p.max(1)]

    return score


def baseline_scorer(loaded):
    """The k-mer-count logistic regression of ``evaluate``, trained on the model's recipe now."""
    from bertgeom.sars_cov_2.variant.predict import kmer_features, recipe_baseline

    clf = recipe_baseline(loaded)
    cache: dict[str, tuple[str, float]] = {}

    def score(inputs):
        todo = list(dict.fromkeys(a for a, _ in inputs if a not in cache))
        if todo:
            proba = clf.predict_proba(kmer_features(loaded.tokenizer, todo))
            for a, p in zip(todo, proba):
                cache[a] = (str(clf.classes_[int(np.argmax(p))]), float(np.max(p)))
        return [cache[a][0] for a, _ in inputs], [cache[a][1] for a, _ in inputs]

    return score


def rule_scorer():
    from bertgeom.sars_cov_2.genome.markers import call_by_markers

    def score(inputs):
        return [call_by_markers(a, ins).call for a, ins in inputs], None

    return score


def export_checkpoint(checkpoint: Path, base: Path, out: Path) -> Path:
    """A model directory from a training checkpoint (config and vocabulary of ``base``)."""
    import shutil

    import torch

    from bertgeom.sars_cov_2.genome.kmers import KmerVocab
    from bertgeom.sars_cov_2.variant import build_variant_model, save_variant_model

    config = json.loads((base / "config.json").read_text())
    model = build_variant_model(config)
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["model"]
    model.load_state_dict(state)
    save_variant_model(model, KmerVocab.load(base / "kmer_vocab.json"), out)
    shutil.copy(base / "config.json", out / "config.json")
    return out


def fit_model_temperature(logits, labels, max_per_class: int, seed: int,
                          draws: dict | None = None) -> tuple[float, dict]:
    """The temperature fitted on the calibration genomes and their wide perturbations (half the
    weight on the plain genomes, half on the perturbed ones), and what it was fitted on."""
    from bertgeom.probabilities import scaled_softmax
    from bertgeom.sars_cov_2.variant.calibration import fit_temperature
    from bertgeom.sars_cov_2.variant.robustness import expected_calibration_error, wide_perturbations

    cal = calibration_genomes(None, seed)
    capped = cap_per_class(cal, max_per_class, seed)
    pert = wide_perturbations(capped, seed=seed + 1, draws=draws)
    inputs = [(g.aligned, g.insertions) for g in cal] + [(p.aligned, p.insertions) for p in pert]
    y = np.array([labels.index(g.cls) for g in cal] + [labels.index(capped[p.base].cls) for p in pert])
    w = np.array([0.5 / len(cal)] * len(cal) + [0.5 / max(1, len(pert))] * len(pert))
    t0 = time.time()
    z = logits(inputs)
    t = fit_temperature(z, y, w)
    seconds = round(time.time() - t0, 1)
    ece = {}
    for name, temp in (("raw", 1.0), ("calibrated", t)):
        p = scaled_softmax(z, temp)
        ok = p.argmax(1) == y
        ece[name] = {"plain": expected_calibration_error(p.max(1)[: len(cal)], ok[: len(cal)]),
                     "perturbed": expected_calibration_error(p.max(1)[len(cal):], ok[len(cal):])}
    return t, {"genomes": len(cal), "perturbed": len(pert), "max_per_class_perturbed": max_per_class,
               "seed": seed + 1, "split": "split_calibration(seed 0), never trained on or evaluated",
               "weights": "half plain genomes, half their perturbations", "ece_on_calibration_set": ece,
               "seconds": seconds, "device": "cpu"}


def run(model_dir: Path, max_per_class: int, seed: int, fit: bool = False, write: bool = False,
        plot: Path | None = None, draws: dict | None = None, cal_max_per_class: int | None = None,
        bf16: bool = False, split: str = "evaluation") -> dict:
    from bertgeom.sars_cov_2.variant.calibration import write_calibration
    from bertgeom.sars_cov_2.variant.robustness import KINDS, reliability_bins, score_kinds, wide_perturbations

    t0 = time.time()
    all_val, capped = validation_genomes(max_per_class, seed, split)
    index = {g.name: i for i, g in enumerate(all_val)}
    pert = [p.__class__(index[capped[p.base].name], p.kind, p.change, p.aligned, p.insertions)
            for p in wide_perturbations(capped, seed=seed, draws=draws)]
    logits, loaded = bert_logits(model_dir, bf16=bf16)
    labels = list(loaded.labels)
    temperature = float(loaded.extra.get("temperature", 1.0))
    calibration = None
    if fit:
        temperature, fitted_on = fit_model_temperature(logits, labels, cal_max_per_class or max_per_class, seed, draws)
        fitted_on["precision"] = "bf16 autocast (CPU)" if bf16 else "fp32"
        calibration = {"temperature": temperature, **fitted_on}
        if write:
            write_calibration(model_dir, temperature, loaded.weights_hash, fitted_on)
        print(f"fitted temperature {temperature:.4f} on {fitted_on['genomes']} calibration genomes + "
              f"{fitted_on['perturbed']} perturbations ({time.time() - t0:.0f} s)", flush=True)
    rule = rule_scorer()
    rule_plain, _ = rule([(g.aligned, g.insertions) for g in all_val])
    rule_pert, _ = rule([(p.aligned, p.insertions) for p in pert])
    scorers = {"BERT variant model": bert_scorer(logits, labels, temperature),
               "BERT, raw softmax": bert_scorer(logits, labels, 1.0),
               "k-mer count logistic regression": baseline_scorer(loaded),
               "rule-based marker call": rule}
    reports, reliability = {}, {}
    for name, fn in scorers.items():
        scores = score_kinds(fn, all_val, pert, (rule_plain, rule_pert))
        reports[name] = {k: v.__dict__ for k, v in scores.items()}
        if name != "rule-based marker call":
            plain_c, plain_conf = fn([(g.aligned, g.insertions) for g in all_val])
            pert_c, pert_conf = fn([(p.aligned, p.insertions) for p in pert])
            ok_plain = [c == g.cls for c, g in zip(plain_c, all_val)]
            ok_pert = [c == all_val[p.base].cls for c, p in zip(pert_c, pert)]
            reliability[name] = {"plain": reliability_bins(plain_conf, ok_plain),
                                 "perturbed": reliability_bins(pert_conf, ok_pert)}
        print(f"{name}: scored ({time.time() - t0:.0f} s)", flush=True)
    from bertgeom.sars_cov_2.variant.predict import eval_report

    truth = [g.cls for g in all_val]
    evaluation = {}  # the format of `python -m bertgeom evaluate --json` (for the model card)
    for name, key in (("BERT variant model", "model"), ("rule-based marker call", "rules"),
                      ("k-mer count logistic regression", "baseline")):
        calls, _ = scorers[name]([(g.aligned, g.insertions) for g in all_val])
        evaluation[key] = eval_report(name, truth, calls, labels).__dict__
    evaluation["skipped"] = []
    result = {"model": str(model_dir.name), "weights": loaded.weights_hash, "temperature": temperature,
              "evaluation": evaluation, "split": split,
              "calibration": calibration, "evaluation_genomes": len(all_val), "perturbed_bases": len(capped),
              "max_per_class": max_per_class, "seed": seed, "perturbations": len(pert), "draws": draws or {},
              "precision": "bf16 autocast (CPU)" if bf16 else "fp32",
              "kinds": KINDS, "seconds": round(time.time() - t0, 1), "reports": reports,
              "reliability": reliability}
    if plot:
        reliability_plot(result, plot)
    return result


def reliability_plot(result: dict, path: Path) -> Path:
    """Reliability diagram (accuracy per confidence bin against the diagonal; marker area ~ genomes in
    the bin, the calibrated BERT's counts written beside its points) of the BERT (raw and calibrated)
    and the k-mer baseline, on the plain evaluation genomes and on all perturbations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.4), sharey=True)
    styles = {"BERT variant model": ("#1f77b4", "o", f"BERT, T = {result['temperature']:.2f}"),
              "BERT, raw softmax": ("#9ecae1", "s", "BERT, raw softmax (T = 1)"),
              "k-mer count logistic regression": ("#ff7f0e", "^", "k-mer logistic regression")}
    for ax, part, title in zip(axes, ("plain", "perturbed"), ("plain evaluation genomes", "all perturbations")):
        ax.plot([0, 1], [0, 1], color="#999", lw=1, ls="--")
        for name, (color, marker, label) in styles.items():
            bins = [b for b in result["reliability"].get(name, {}).get(part, []) if b["n"]]
            if not bins:
                continue
            key = "plain" if part == "plain" else None
            ece = result["reports"][name]["plain"]["ece"] if key else None
            x, y = [b["confidence"] for b in bins], [b["accuracy"] for b in bins]
            ax.plot(x, y, color=color, lw=0.8, alpha=0.7)
            ax.scatter(x, y, s=[12 + 6 * np.sqrt(b["n"]) for b in bins], color=color, marker=marker, zorder=3,
                       label=label + (f" (ECE {ece:.3f})" if ece is not None else ""))
            if name == "BERT variant model":
                for b in bins:
                    ax.annotate(str(b["n"]), (b["confidence"], b["accuracy"]), textcoords="offset points",
                                xytext=(4, -10), fontsize=7, color=color)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("confidence (top probability), 10 bins")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("accuracy in the bin")
    fig.suptitle(f"Reliability of the variant classifier ({result['evaluation_genomes']} evaluation genomes, "
                 f"{result['perturbations']} perturbations of them)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def tables(result: dict) -> str:
    from bertgeom.sars_cov_2.variant.robustness import markdown_tables

    return markdown_tables(result)


def note(result: dict) -> str:
    return (f"Real evaluation genomes: {result['evaluation_genomes']} (plain row; never trained on, not used for "
            f"calibration); perturbations on {result['perturbed_bases']} of them (at most {result['max_per_class']} "
            f"per class), {result['perturbations']} in all, seed {result['seed']}; the BERT's probabilities are "
            f"temperature-scaled (T = {result['temperature']:.3f}, fitted on the calibration genomes); "
            "`python bench/bench_robustness.py --update-readme`.")


def update_readme(result: dict) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from readme_blocks import replace_block

    replace_block("robustness", tables(result) + "\n\n" + note(result))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="", help="variant model directory (default: the shipped one)")
    ap.add_argument("--checkpoint", default="", help="score a training checkpoint instead (needs --base)")
    ap.add_argument("--base", default="", help="model directory whose config and vocabulary the checkpoint uses")
    ap.add_argument("--max-per-class", type=int, default=30, help="genomes per class that are perturbed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--fit-temperature", action="store_true", help="fit the temperature on the calibration genomes")
    ap.add_argument("--write-calibration", action="store_true", help="store it in the model's calibration.json")
    ap.add_argument("--plot", default="", help="write the reliability diagram to this PNG")
    ap.add_argument("--cal-max-per-class", type=int, default=0, help="calibration genomes per class that are perturbed")
    ap.add_argument("--draws", action="append", default=[], metavar="KIND=N",
                    help="perturbations per genome of one kind (bertgeom.sars_cov_2.variant.robustness.DEFAULT_DRAWS)")
    ap.add_argument("--bf16", action="store_true", help="forward passes under bf16 autocast (about 2x faster on a CPU)")
    ap.add_argument("--split", choices=("evaluation", "calibration"), default="evaluation",
                    help="genomes scored: evaluation (reported) or calibration (where candidates are compared)")
    ap.add_argument("--out", default=str(OUT / "robustness.json"))
    ap.add_argument("--update-readme", action="store_true")
    args = ap.parse_args(argv)
    if args.split != "evaluation" and (args.update_readme or args.write_calibration):
        print("--update-readme and --write-calibration report and ship results of the evaluation split only: "
              "--split calibration compares candidates", file=sys.stderr)
        return 2
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from bertgeom.sars_cov_2.variant import VARIANT_DIR

    model_dir = Path(args.model) if args.model else VARIANT_DIR
    if args.checkpoint:
        import tempfile

        model_dir = export_checkpoint(Path(args.checkpoint), Path(args.base),
                                      Path(tempfile.mkdtemp()) / "checkpoint_model")
    draws = {k: int(v) for k, _, v in (d.partition("=") for d in args.draws)}
    result = run(model_dir, args.max_per_class, args.seed, args.fit_temperature, args.write_calibration,
                 Path(args.plot) if args.plot else None, draws, args.cal_max_per_class or None, args.bf16,
                 args.split)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    from bertgeom.sars_cov_2.variant.robustness import release_gates

    result["gates"] = release_gates(result)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(tables(result))
    print("\nrelease gates (issue 26): " + "; ".join(f"{'PASS' if g['ok'] else 'FAIL'} {k} ({g['value']})"
                                                 for k, g in result["gates"].items()))
    for name, rep in result["reports"].items():
        bad = [f"{k}: {e}" for k, v in rep.items() for e in v.get("examples", [])[:2]]
        if bad:
            print(f"\n{name}: flips, e.g. " + "; ".join(bad[:10]))
    if args.update_readme:
        update_readme(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
