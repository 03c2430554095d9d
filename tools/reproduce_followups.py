"""Reproduce published numbers of the papers that follow the seed paper, on the public checkpoints they
used, beside bertgeom's own computation (issue 44). Needs network access to the Hugging Face Hub (or
the checkpoints already in the local Hugging Face cache); offline it says what it would need.

    python tools/reproduce_followups.py            # every check
    python tools/reproduce_followups.py --list     # the checks' names
    python tools/reproduce_followups.py mixing     # one check by name

A check is one function in :data:`CHECKS` (name -> function returning the lines to print); a new
check is one function and one entry.

Published numbers (copied with provenance, not recomputed):

* Kobayashi et al. 2021 (arXiv:2109.07152, Table 1; the values printed by the authors' notebook
  ``emnlp2021/run.ipynb`` in gorokoba560/norm-analysis-of-transformer): bert-base-uncased on Clark et
  al.'s 992 Wikipedia segments (at most 128 tokens, 12 % of the non-special tokens replaced by [MASK],
  seed 0), the mean mixing ratio in %: Attn-W 96.41, Attn-N 85.28, AttnRes-W 48.21, AttnRes-N 22.25,
  AttnResLn-N 18.75. That corpus is not shipped; this script uses bertgeom's own example sentences
  with the same masking rule, so expect the same ordering and nearby values, not equal ones.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Kobayashi et al. 2021, Table 1 (bert-base-uncased), mean mixing ratio in %.
KOBAYASHI_2021_BERT_BASE = {"Attn-W": 96.41, "Attn-N": 85.28, "AttnRes-W": 48.21, "AttnRes-N": 22.25,
                            "AttnResLn-N": 18.75}
#: Their masking: this share of the non-special tokens replaced by [MASK], with this seed.
MASK_SHARE, MASK_SEED = 0.12, 0

OFFLINE_SENTENCE = ("This check needs {model} from the Hugging Face Hub (network access, or the model "
                    "already in the local Hugging Face cache); nothing was computed.")


class NeedsNetwork(RuntimeError):
    """A checkpoint could not be loaded: the sentence says what is needed."""


def load_hub_model(name: str):
    """``(tokenizer, eager model)`` of a public checkpoint, safetensors only, from the local Hugging Face
    cache or the Hub; :class:`NeedsNetwork` when neither has it."""
    from transformers import AutoModel, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(name)
        model = AutoModel.from_pretrained(name, attn_implementation="eager", use_safetensors=True).eval()
    except Exception as exc:  # noqa: BLE001 - offline, no cache, blocked: all one answer
        raise NeedsNetwork(OFFLINE_SENTENCE.format(model=name)) from exc
    return tok, model


def masked_ids(tok, sentence: str, rng: np.random.Generator) -> list[int]:
    """The sentence's ids with :data:`MASK_SHARE` of its non-special tokens replaced by [MASK]."""
    ids = tok(sentence, truncation=True, max_length=128)["input_ids"]
    inner = np.arange(1, len(ids) - 1)
    n = int(round(MASK_SHARE * inner.size))
    for i in rng.choice(inner, size=n, replace=False) if n else []:
        ids[int(i)] = tok.mask_token_id
    return ids


def check_mixing_ratio(model_name: str = "bert-base-uncased") -> list[str]:
    """Kobayashi et al. 2021's mean mixing ratio on bert-base-uncased, five variants."""
    import torch

    from bertgeom.analysis.context_mixing import MIXING_VARIANTS, mixing_ratios
    from bertgeom.examples import example_sentences

    tok, model = load_hub_model(model_name)
    rng = np.random.default_rng(MASK_SEED)
    sums = {v: 0.0 for v in MIXING_VARIANTS}
    count = 0
    sentences = example_sentences()
    for sentence in sentences:
        ids = masked_ids(tok, sentence, rng)
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
        trace = SimpleNamespace(attentions=torch.stack(out.attentions)[:, 0].numpy(),
                                hidden_states=torch.stack(out.hidden_states)[:, 0].numpy())
        ratios = mixing_ratios(trace, weights=model)
        for v in MIXING_VARIANTS:
            sums[v] += float(ratios[v].sum())
        count += ratios[MIXING_VARIANTS[0]].size
    lines = [f"Mixing ratio, published for bert-base-uncased (Kobayashi et al. 2021, Table 1), mean over tokens "
             f"and layers; bertgeom on {model_name}, its {len(sentences)} example sentences, {MASK_SHARE:.0%} masked:",
             f"  {'variant':12s} {'published %':>12s} {'bertgeom %':>11s}"]
    for v in MIXING_VARIANTS:
        lines.append(f"  {v:12s} {KOBAYASHI_2021_BERT_BASE[v]:12.2f} {100 * sums[v] / count:11.2f}")
    return lines


#: Every check, by name, in the order they run (name -> function returning the lines to print).
def check_rank_collapse() -> list[str]:
    """Dong et al. 2021's rank collapse of bert-base-cased per layer (tools/reproduce_rank_collapse.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reproduce_rank_collapse",
                                                  Path(__file__).with_name("reproduce_rank_collapse.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        ours = module.reproduce_rank_collapse()
    except module.NeedsNetwork as exc:
        raise NeedsNetwork(str(exc)) from exc
    return ["Rank collapse (Dong et al. 2021), mean residual ratio per hidden state:", module.table(ours)]


CHECKS = {
    "mixing": check_mixing_ratio,
    "rank-collapse": check_rank_collapse,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Reproduce the follow-up papers' published numbers.")
    ap.add_argument("checks", nargs="*", help=f"names among {', '.join(CHECKS)} (default: all)")
    ap.add_argument("--list", action="store_true", help="print the checks' names and stop")
    args = ap.parse_args(argv)
    if args.list:
        for name, fn in CHECKS.items():
            print(f"{name}: {fn.__doc__.splitlines()[0]}")
        return 0
    unknown = [c for c in args.checks if c not in CHECKS]
    if unknown:
        print(f"Unknown check {unknown[0]!r}: choose among {', '.join(CHECKS)}.")
        return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    status = 0
    for name in args.checks or list(CHECKS):
        try:
            print("\n".join(CHECKS[name]()))
        except NeedsNetwork as exc:
            print(str(exc))
            status = 1
        print()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
