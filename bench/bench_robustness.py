"""Robustness benchmark of the variant classifier: one foreign marker in, one own marker out.

On the real validation genomes (never trained on) it reports, side by side for the BERT, the
k-mer-count logistic regression trained on the model's own recipe in the same run, and the
rule-based marker call (:mod:`bertgeom.genome.markers`):

* accuracy on the plain validation genomes, and how many were called wrongly with confidence >= 0.9;
* the flip rate when each genome gains one characteristic mutation of another class (foreign) or
  loses one of its own (revert): see :mod:`bertgeom.variant.robustness`.

Not a timed test: it measures the model. Usage::

    python bench/bench_robustness.py [--model DIR] [--checkpoint WORK_DIR/checkpoint.pt --base DIR]
                                     [--max-per-class 60] [--update-readme]

Writes ``bench/out/robustness.json`` (and, with ``--update-readme``, the README's robustness table).
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


def validation_genomes(max_per_class: int | None, seed: int = 0):
    """(all validation genomes, a per-class-capped subset) as :class:`Genome` records."""
    from bertgeom.genome.classes import CLASSES
    from bertgeom.genome.pipeline import analyse_sequence
    from bertgeom.variant.robustness import Genome
    from bertgeom.variant.train import real_genomes

    _, validation = real_genomes()
    out = []
    for g in validation:
        a = analyse_sequence(g.sequence, cls=g.cls)  # QC judged against the true class
        if not a.ok:
            continue
        out.append(Genome(g.name, g.cls, a.spike.aligned, tuple(a.spike.insertions), a.qc.verdict if a.qc else ""))
    rng = np.random.default_rng(seed)
    capped = []
    for c in CLASSES:
        members = [g for g in out if g.cls == c]
        keep = sorted(rng.permutation(len(members))[:max_per_class].tolist()) if max_per_class else range(len(members))
        capped += [members[i] for i in keep]
    return out, capped


def bert_classifier(model_dir: Path, batch_size: int = 32):
    """(classify, confidence) callables of a variant model directory on aligned spikes."""
    import torch

    from bertgeom.models import load_model
    from bertgeom.variant import variant_spec
    from bertgeom.variant.predict import logits_for_ids

    loaded = load_model(variant_spec(model_dir))
    cache: dict[str, np.ndarray] = {}

    def probs(inputs):
        todo = [a for a, _ in inputs if a not in cache]
        for i in range(0, len(todo), batch_size):
            chunk = todo[i : i + batch_size]
            ids, _ = loaded.tokenizer.encode_batch(chunk, max_length=None)
            with torch.inference_mode():
                z = logits_for_ids(loaded, ids)
            z = np.exp(z - z.max(1, keepdims=True))
            for a, p in zip(chunk, z / z.sum(1, keepdims=True)):
                cache[a] = p
        return [cache[a] for a, _ in inputs]

    labels = loaded.labels
    return (lambda xs: [labels[int(np.argmax(p))] for p in probs(xs)],
            lambda xs: [float(np.max(p)) for p in probs(xs)], loaded)


def baseline_classifier(loaded):
    """The k-mer-count logistic regression of ``evaluate``, trained on the model's recipe now."""
    from bertgeom.variant.predict import kmer_features, recipe_baseline

    clf = recipe_baseline(loaded)

    def classify(inputs):
        return list(clf.predict(kmer_features(loaded.tokenizer, [a for a, _ in inputs])))

    def confidence(inputs):
        return list(clf.predict_proba(kmer_features(loaded.tokenizer, [a for a, _ in inputs])).max(1))

    return classify, confidence


def rule_classifier():
    from bertgeom.genome.markers import call_by_markers

    return lambda inputs: [call_by_markers(a, ins).call for a, ins in inputs]


def export_checkpoint(checkpoint: Path, base: Path, out: Path) -> Path:
    """A model directory from a training checkpoint (config and vocabulary of ``base``)."""
    import shutil

    import torch

    from bertgeom.genome.kmers import KmerVocab
    from bertgeom.variant import build_variant_model, save_variant_model

    config = json.loads((base / "config.json").read_text())
    model = build_variant_model(config)
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["model"]
    model.load_state_dict(state)
    save_variant_model(model, KmerVocab.load(base / "kmer_vocab.json"), out)
    shutil.copy(base / "config.json", out / "config.json")
    return out


def run(model_dir: Path, max_per_class: int, seed: int) -> dict:
    from bertgeom.variant.robustness import perturbations, score

    t0 = time.time()
    all_val, capped = validation_genomes(max_per_class, seed)
    pert = perturbations(capped, seed=seed)
    bert, bert_conf, loaded = bert_classifier(model_dir)
    base, base_conf = baseline_classifier(loaded)
    rule = rule_classifier()
    reports = {}
    for name, fn, conf in (("BERT variant model", bert, bert_conf), ("k-mer count logistic regression", base, base_conf),
                           ("rule-based marker call", rule, None)):
        full = score(name, fn, all_val, [], conf)
        rep = score(name, fn, capped, pert)
        rep.accuracy, rep.n_plain = full.accuracy, full.n_plain
        rep.wrong_confident, rep.wrong_confident_qc_pass = full.wrong_confident, full.wrong_confident_qc_pass
        reports[name] = rep.__dict__
    result = {"model": str(model_dir.name), "weights": loaded.weights_hash, "validation_genomes": len(all_val),
              "perturbed_bases": len(capped), "max_per_class": max_per_class, "seed": seed,
              "seconds": round(time.time() - t0, 1), "reports": reports}
    return result


def table(result: dict) -> str:
    rows = ["| classifier | accuracy (plain) | wrong with conf. >= 0.9 (QC pass / all) | flips: +1 foreign marker "
            "| flips: -1 own marker |", "|---|---|---|---|---|"]
    for name, r in result["reports"].items():
        f = r["flip_rate"]
        n = r["n_perturbed"]
        conf = "n/a" if name.startswith("rule") else f"{r['wrong_confident_qc_pass']} / {r['wrong_confident']}"
        rows.append(f"| {name} | {r['accuracy']:.1%} of {r['n_plain']} | {conf} | {f.get('foreign', 0):.1%} of "
                    f"{n.get('foreign', 0)} | {f.get('revert', 0):.1%} of {n.get('revert', 0)} |")
    return "\n".join(rows)


def update_readme(result: dict) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from readme_blocks import replace_block

    replace_block("robustness", table(result) + "\n\n"
                  f"Real validation genomes: {result['validation_genomes']} (accuracy); perturbations on "
                  f"{result['perturbed_bases']} of them (at most {result['max_per_class']} per class), seed "
                  f"{result['seed']}; `python bench/bench_robustness.py --update-readme`.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="", help="variant model directory (default: the shipped one)")
    ap.add_argument("--checkpoint", default="", help="score a training checkpoint instead (needs --base)")
    ap.add_argument("--base", default="", help="model directory whose config and vocabulary the checkpoint uses")
    ap.add_argument("--max-per-class", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default=str(OUT / "robustness.json"))
    ap.add_argument("--update-readme", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from bertgeom.variant import VARIANT_DIR

    model_dir = Path(args.model) if args.model else VARIANT_DIR
    if args.checkpoint:
        import tempfile

        model_dir = export_checkpoint(Path(args.checkpoint), Path(args.base), Path(tempfile.mkdtemp()) / "checkpoint_model")
    result = run(model_dir, args.max_per_class, args.seed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(table(result))
    for name, r in result["reports"].items():
        worst = sorted(((f / n, c, f, n) for c, (f, n) in r["flips_by_change"].items() if f), reverse=True)[:6]
        if worst:
            print(f"\n{name}: most flipping changes: " + "; ".join(f"{c} {f}/{n}" for _, c, f, n in worst))
    if args.update_readme:
        update_readme(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
