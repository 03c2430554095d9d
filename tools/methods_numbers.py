"""Regenerate the figures docs/methods.md states (issue 46, item 8), each line naming the precision it
was computed in and the machine (``bertgeom.runtime.machine_line``).

Sections (all by default; ``--only`` picks some):

* ``eu``   -- docs/methods.md §3.3: the code's ``E_U`` (content query rows) against ``(n² − 1)/(3n)`` (all rows), fp32.
* ``flow`` -- attention flow: the raw (unnormalised) flows of layer 1 and layer 6 of MiniLM, summed over
  the input tokens, for the shipped sentences, fp32.
* ``qk``   -- Queries & keys: AttentionViz's correlation of ``q·k`` with ``‖q − k‖`` on MiniLM, raw and
  normalised, for the first five heads of layer 1 over the shipped sentences, fp32.
* ``bf16`` -- *Numerical precision*: max |Δ| of the attention weights, bf16 autocast against fp32, on the
  Omicron and Alpha demo genomes with the variant model and two sentences with MiniLM.
* ``ig``   -- integrated gradients on the default (Omicron) demo genome: the first attempt's completeness
  gap with 16 nodes placed by the probe and in equal segments, and what equal segments then need, in
  fp32 and in bf16.

Usage: python tools/methods_numbers.py [--only eu flow qk bf16 ig]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SENTENCES_FOR_BF16 = ["The cat sat on the mat.", "A dog barked at the cat, loudly, and ran away."]


def shipped_sentences() -> list[str]:
    from bertgeom.sets.inputs import sentence_set

    return [item.text for item in sentence_set()]


def eu_ratios(loaded, texts) -> list[tuple[int, float, float]]:
    """``(n, E_U of the code, (n² − 1)/(3n))`` per text: the code's is over the content query rows."""
    from bertgeom.analysis.heads import head_features
    from bertgeom.trace import run_trace

    out = []
    for t in texts:
        tr = run_trace(loaded, t)
        n = tr.encoded.n_tokens
        feats = head_features(tr.attentions, tr)
        ratio = feats["mean_dist"] / feats["mean_dist_norm"]  # = E_U wherever mean_dist > 0
        eu = float(np.nanmedian(np.where(feats["mean_dist"] > 0, ratio, np.nan)))
        out.append((n, eu, (n * n - 1) / (3 * n)))
    return out


def raw_flow_sums(loaded, texts) -> list[tuple[int, float, float]]:
    """``(n, Σ raw flow after layer 1, after the last layer)`` per text, to the [CLS] output token."""
    from bertgeom.analysis.flow import attention_flow
    from bertgeom.trace import run_trace

    out = []
    for t in texts:
        A = run_trace(loaded, t).attentions
        raw = attention_flow(A, target=0, normalize=False, layers=[0, A.shape[0] - 1]).sum(axis=1)
        out.append((A.shape[-1], float(raw[0]), float(raw[-1])))
    return out


def qk_correlations(loaded, texts) -> list[tuple[int, int, float, float]]:
    """``(layer, head, raw r, normalised r)`` of every head: AttentionViz's correlation over the set of
    ``texts``."""
    from bertgeom.analysis.qk_embedding import collect_head_qk, dot_distance_correlation, layer_record
    from bertgeom.trace import run_trace
    from bertgeom.weights import extract_layer_weights

    traces = [run_trace(loaded, t) for t in texts]
    lw = extract_layer_weights(loaded.model)
    out = []
    for layer in range(loaded.num_layers):
        records = [layer_record(tr, layer) for tr in traces]
        for h in range(loaded.num_heads):
            qk = collect_head_qk(records, lw, layer, h)
            out.append((layer, h, dot_distance_correlation(qk, normalise=False),
                        dot_distance_correlation(qk, normalise=True)))
    return out


def bf16_attention_change(loaded, texts) -> list[float]:
    """max |Δ| of every attention weight, bf16 autocast against fp32, per input."""
    from bertgeom.inputs import encode_input
    from bertgeom.trace import forward, pad_batch

    out = []
    for t in texts:
        ids, mask = pad_batch(loaded, [encode_input(loaded, t)])
        maps = {}
        for prec in ("fp32", "bf16"):
            res = forward(loaded, ids, mask, hidden_states=False, precision=prec)
            maps[prec] = np.stack([a[0].float().cpu().numpy() for a in res.attentions])
        out.append(float(np.abs(maps["bf16"] - maps["fp32"]).max()))
    return out


def ig_first_gaps(loaded, text: str, precision: str) -> dict:
    """Completeness gaps of integrated gradients on ``text`` in ``precision`` (never switched): the
    first attempt of 16 nodes placed by the probe and in equal segments, and equal segments refined
    (nodes used, gap, the trail)."""
    import torch

    from bertgeom.analysis.attributions import PROBE_INTERVALS, _first_edges, _ig_setup, _refine
    from bertgeom.trace import run_trace

    tr = run_trace(loaded, text)
    ids = np.asarray(tr.encoded.input_ids)
    target = int(np.argmax(tr.logits))  # the predicted class, as the page and bench/bench_attributions.py
    _, f32 = _ig_setup(loaded, ids, target, "fp32")
    with torch.no_grad():
        ends = f32(torch.tensor([[[1.0]], [[0.0]]]))
    f_x, f_b = float(ends[0]), float(ends[1])
    kw = dict(tolerance=0.05, batch_size=16, nodes_per_segment=4)
    out = {}
    for name, probe in (("probe", PROBE_INTERVALS), ("equal", 0)):
        edges = _first_edges(loaded, ids, target, precision, f_b, f_x, 4, probe)
        out[name] = _refine(loaded, ids, target, f_x, f_b, precision, edges=edges, max_steps=16, **kw).gap
    edges = _first_edges(loaded, ids, target, precision, f_b, f_x, 4, 0)
    refined = _refine(loaded, ids, target, f_x, f_b, precision, edges=edges, max_steps=128, **kw)
    out["equal_refined"] = (refined.steps, refined.gap, refined.note)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["eu", "flow", "qk", "bf16", "ig"])
    args = ap.parse_args(argv)
    from bertgeom.models import load_model
    from bertgeom.runtime import machine_line

    print(f"machine: {machine_line()}")
    minilm = load_model("minilm-l6")
    sentences = shipped_sentences()
    if "eu" in args.only:
        rows = eu_ratios(minilm, sentences)
        low = [1 - eu / full for _n, eu, full in rows]
        print(f"[eu] fp32, MiniLM, {len(rows)} shipped sentences: the code's E_U (content query rows) is "
              f"{min(low):.1%}-{max(low):.1%} below (n²-1)/(3n)")
    if "flow" in args.only:
        rows = raw_flow_sums(minilm, sentences)
        first, last = [r[1] for r in rows], [r[2] for r in rows]
        print(f"[flow] fp32, MiniLM, {len(rows)} shipped sentences ({min(r[0] for r in rows)}-"
              f"{max(r[0] for r in rows)} tokens), raw flows to [CLS] summed over the input tokens: "
              f"after layer 1 {min(first):.2f}-{max(first):.2f}, after layer 6 {min(last):.1f}-{max(last):.1f}")
    if "qk" in args.only:
        rows = qk_correlations(minilm, sentences)
        worse = [r for r in rows if r[3] > r[2]]
        l, h, raw, norm = max(rows, key=lambda r: r[3] - r[2])
        print(f"[qk] fp32, MiniLM, every head, {len(sentences)} shipped sentences: AttentionViz's correlation of "
              f"q·k with ‖q − k‖ is weaker (higher) under the normalisation on {len(worse)} of {len(rows)} heads, "
              f"most at layer {l + 1} head {h + 1} ({raw:+.2f} raw -> {norm:+.2f} normalised); normalised it ranges "
              f"{min(r[3] for r in rows):+.2f} to {max(r[3] for r in rows):+.2f} (raw {min(r[2] for r in rows):+.2f} "
              f"to {max(r[2] for r in rows):+.2f})")
    if "bf16" in args.only or "ig" in args.only:
        from bertgeom.models import REGISTRY
        from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
        from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

        if VARIANT_MODEL_ID not in REGISTRY:
            print("[bf16/ig] the shipped variant model is not installed")
            return
        variant = load_model(VARIANT_MODEL_ID)
        demos = {meta.get("class", ""): rec for rec, meta in load_demo_genomes()}
        genomes = {c: f">{demos[c].name}\n{demos[c].sequence}\n" for c in ("omicron", "alpha")}
    if "bf16" in args.only:
        v = bf16_attention_change(variant, list(genomes.values()))
        m = bf16_attention_change(minilm, SENTENCES_FOR_BF16)
        print("[bf16] bf16 autocast vs fp32, attention weights max |Δ|: variant model "
              + ", ".join(f"{c} {x:.3f}" for c, x in zip(genomes, v))
              + "; MiniLM " + ", ".join(f"{x:.3f}" for x in m))
    if "ig" in args.only:
        for prec in ("fp32", "bf16"):
            r = ig_first_gaps(variant, genomes["omicron"], prec)
            steps, gap, note = r["equal_refined"]
            print(f"[ig] {prec}, variant model, Omicron demo genome, 16 nodes: probe-placed gap {r['probe']:.1%}, "
                  f"equal segments {r['equal']:.1%}; equal segments refined: {steps} nodes, {gap:.1%} ({note})")


if __name__ == "__main__":
    main()
