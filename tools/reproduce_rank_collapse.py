"""Dong et al.'s rank-collapse check on bert-base-cased, printed beside the published curves.

    python tools/reproduce_rank_collapse.py                     # needs network access once
    python tools/reproduce_rank_collapse.py --model DIR --texts FILE   # a local copy, offline

Their setup (Dong, Cordonnier & Loukas 2021, arXiv:2103.03404, §4 and Figure 2): bert-base-cased, the
first 32 wiki_bio test texts that fill 128 tokens (truncated to 128), the mean of
``‖X − 1 meanᵀ‖₁,∞ / ‖X‖₁,∞`` per hidden state for the full model and with the skips and MLPs
removed. The published numbers were decoded from the authors' figure file (±0.005). Here the curves
come from :func:`bertgeom.analysis.collapse.rank_collapse_curves` (the forward engine's path
ablations). :func:`reproduce_rank_collapse` is the check; ``main`` prints it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

#: Mean ratio per hidden state 0..12, pretrained bert-base-cased (Dong et al. 2021, Figure 2, decoded).
DONG_PUBLISHED = {
    "full": [0.687, 0.666, 0.559, 0.504, 0.466, 0.401, 0.379, 0.380, 0.390, 0.391, 0.395, 0.369, 0.310],
    "no_mlp": [0.687, 0.717, 0.636, 0.489, 0.353, 0.223, 0.205, 0.240, 0.233, 0.174, 0.141, 0.096, 0.074],
    "attention_only": [0.687, 0.676, 0.315, 0.139, 0.031, 0.003, 0, 0, 0, 0, 0, 0, 0],
    "no_skip": [0.687, 0.433, 0.209, 0.040, 0.002, 0, 0, 0, 0, 0, 0, 0, 0],
}

OFFLINE = ("Offline, this check needs a local copy of bert-base-cased (a folder with config.json, "
           "model.safetensors and the tokenizer: --model DIR) and a text file of at least 32 English texts of "
           "128 tokens or more, one per line (--texts FILE); with network access it downloads both once "
           "(the model from the Hugging Face hub, the wiki_bio test split through the datasets package).")

N_TEXTS = 32
MAX_TOKENS = 128


class NeedsNetwork(RuntimeError):
    """The model or the texts are not here and cannot be downloaded."""


def _texts_from_hub(tokenizer, n: int, max_tokens: int) -> list[str]:
    try:
        import datasets
    except ImportError as exc:
        raise NeedsNetwork(OFFLINE) from exc
    try:  # the parquet conversion of wiki_bio: no dataset script runs
        data = datasets.load_dataset("wiki_bio", revision="refs/convert/parquet", split="test")
    except Exception as exc:  # noqa: BLE001 - no network, no such revision: say what is needed
        raise NeedsNetwork(OFFLINE) from exc
    return _long_enough((row["target_text"] for row in data), tokenizer, n, max_tokens)


def _long_enough(texts, tokenizer, n: int, max_tokens: int) -> list[str]:
    """The first ``n`` texts that fill ``max_tokens`` tokens, as Dong et al. picked them."""
    kept = []
    for t in texts:
        if len(tokenizer(t, truncation=True, max_length=max_tokens)["input_ids"]) >= max_tokens:
            kept.append(t)
            if len(kept) == n:
                break
    return kept


def reproduce_rank_collapse(model: str = "bert-base-cased", texts: str | Path | None = None, *,
                            n_texts: int = N_TEXTS, max_tokens: int = MAX_TOKENS) -> dict[str, np.ndarray]:
    """The mean ratio per hidden state of each path variant (``name -> [L+1]``) on Dong et al.'s setup.

    ``model``: a hub id (downloaded, safetensors only) or a local folder; ``texts``: a file of texts,
    one per line (default: the wiki_bio test split). Raises :class:`NeedsNetwork` with one sentence
    saying what an offline run needs when the model or the texts cannot be had."""
    from transformers import AutoModel, AutoTokenizer

    from bertgeom.analysis.collapse import rank_collapse_curves

    local = Path(model).is_dir()
    try:
        tok = AutoTokenizer.from_pretrained(model, local_files_only=local)
        net = AutoModel.from_pretrained(model, attn_implementation="eager", use_safetensors=True,
                                        local_files_only=local).eval()
    except OSError as exc:
        raise NeedsNetwork(OFFLINE) from exc
    if texts is not None:
        lines = [s.strip() for s in Path(texts).read_text(encoding="utf-8").splitlines() if s.strip()]
        picked = _long_enough(lines, tok, n_texts, max_tokens)
    else:
        picked = _texts_from_hub(tok, n_texts, max_tokens)
    if len(picked) < n_texts:
        raise NeedsNetwork(f"Only {len(picked)} of the texts fill {max_tokens} tokens; {n_texts} are needed. "
                           + OFFLINE)
    enc = tok(picked, truncation=True, max_length=max_tokens, padding="max_length", return_tensors="np")
    curves = rank_collapse_curves(net, enc["input_ids"], enc["attention_mask"])
    return {k: v.mean(axis=0) for k, v in curves.items()}


def table(ours: dict[str, np.ndarray]) -> str:
    """bertgeom's curve beside the published one, a line per variant and hidden state."""
    lines = ["variant          layer  published  bertgeom"]
    for name, pub in DONG_PUBLISHED.items():
        for layer, p in enumerate(pub):
            o = ours[name][layer] if name in ours and layer < len(ours[name]) else float("nan")
            lines.append(f"{name:<16} {layer:>5}  {p:>9.3f}  {o:>8.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert-base-cased", help="hub id or local folder (safetensors)")
    ap.add_argument("--texts", default=None, help="a file of texts, one per line (default: wiki_bio's test split)")
    args = ap.parse_args(argv)
    try:
        ours = reproduce_rank_collapse(args.model, args.texts)
    except NeedsNetwork as exc:
        print(exc)
        return 2
    print("Rank collapse (Dong et al. 2021, Figure 2), mean ‖X − 1 meanᵀ‖₁,∞ / ‖X‖₁,∞ over the texts:")
    print(table(ours))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, as the other tools
    sys.exit(main())
