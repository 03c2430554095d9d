"""Subspace Directions' *Faithful vs correct* per head: MiniLM (6 x 12, hidden 384) against the pretrained
AntiBERTy (8 x 8, hidden 512), the issue-43 target being AntiBERTy within 3x of MiniLM per head.

Both are measured in the same run, at the same input length (13 tokens, the example sentence's) and at
AntiBERTy's full heavy chain (122 tokens): the faithful pass on the input padded to 512 positions
(:func:`bertgeom.sets.subspace.padded_hidden_states`) and then D1-D3 of every head from the official
code's hand-made attention (:func:`bertgeom.sets.subspace.data_geometry`, ``faithful=True``), the work
the tab waits for. Reported: seconds, milliseconds per head and the ratio per head to MiniLM's.

Usage: ``python bench/bench_faithful_per_head.py [--repeats 2]`` (needs ``pip install antiberty==0.1.3``);
writes ``bench/out/faithful_per_head.json`` and prints a Markdown table naming the CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "out"
SENTENCE = "The cat sat on the mat because it was tired."
HEAVY = ("EVQLVESGGGLVQPGGSLRLSCAASGFNIKDTYIHWVRQAPGKGLEWVARIYPTNGYTRYADSVKGRFTISADTSKNTAYLQMNSLRAEDTAVYYC"
         "SRWGGDGFYAMDYWGQGTLVTVSS")


def faithful_seconds(loaded, text: str, repeats: int) -> tuple[float, int, int]:
    """Median seconds of the faithful geometry of every head, the number of heads and of tokens."""
    import bertgeom as bg
    from bertgeom.sets.subspace import data_geometry, padded_hidden_states
    from bertgeom.weights import layer_weights_of

    tr = bg.trace(loaded, text)
    lws = layer_weights_of(loaded.model)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        data_geometry(tr, lws, faithful=True, padded_hidden=padded_hidden_states(loaded, tr))
        times.append(time.perf_counter() - t0)
    L, H, T, _ = tr.attentions.shape
    return statistics.median(times), L * H, T


def main(argv=None) -> int:
    from antiberty_folder import write_antiberty_folder
    from bench_families import cpu_name

    import bertgeom as bg

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        antiberty = bg.load_model(str(write_antiberty_folder(Path(tmp) / "antiberty")))
        minilm = bg.load_model("minilm-l6")
        base = None
        for name, loaded, text in (("MiniLM-L6", minilm, SENTENCE),
                                   ("AntiBERTy", antiberty, " ".join(HEAVY[:11])),  # 13 tokens, as the sentence
                                   ("AntiBERTy", antiberty, " ".join(HEAVY))):
            s, heads, tokens = faithful_seconds(loaded, text, args.repeats)
            per_head = s / heads
            base = base or per_head
            rows.append({"model": name, "heads": heads, "tokens": tokens, "seconds": round(s, 2),
                         "ms_per_head": round(1000 * per_head, 1), "ratio_per_head": round(per_head / base, 2)})
    cpu = cpu_name()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "faithful_per_head.json").write_text(json.dumps({"cpu": cpu, "rows": rows}, indent=1))
    print(f"Faithful vs correct, every head (CPU: {cpu}; median of {args.repeats})\n")
    print("| model | heads | tokens | seconds | ms per head | per head vs MiniLM |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['heads']} | {r['tokens']} | {r['seconds']} | {r['ms_per_head']} | "
              f"{r['ratio_per_head']}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
