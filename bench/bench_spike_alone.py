"""Every shipped genome against its own spike pasted alone (issue 42's "Done when": a spike pasted alone
from any shipped genome gets the same class as its genome; the suite checks a sample for time).

Classifies each shipped genome (demo, validation_small, the developer set) whole, then its spike cut as a
user cuts it (aligned to Wuhan-Hu-1 21563-25384, gaps and end N removed), with the shipped variant model,
and prints how many agree, how many spikes alone were refused where the genome was called, and each
disagreement. Run: ``python bench/bench_spike_alone.py [--limit N]``; the CPU is printed beside the counts.

References: Bonino, Ghione, Cirrincione 2025 (arXiv 2502.12033), the case study (spike 12-mers, stride 9).
"""

from __future__ import annotations

import argparse
import platform
import time


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="at most this many genomes (0: all)")
    args = ap.parse_args(argv)

    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.genome.align import align_genome, cut_spike
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes, load_dev_genomes, load_validation_small
    from bertgeom.sars_cov_2.genome.fasta import SequenceRecord
    from bertgeom.sars_cov_2.genome.reference import data_path
    from bertgeom.sars_cov_2.variant import variant_spec
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    genomes = [("demo", r.name, r.sequence) for r, _ in load_demo_genomes()]
    genomes += [("validation_small", r.name, r.sequence) for r, _ in load_validation_small()]
    genomes += [("dev", g.name, g.sequence) for g in load_dev_genomes(
        data_path("genomes", "open_genomes_dev.fasta.xz"), data_path("genomes", "open_genomes_dev_labels.tsv"))]
    genomes = [(src, f"{src}:{name}", seq) for src, name, seq in genomes]  # one name per record
    if args.limit:
        genomes = genomes[: args.limit]
    model = load_model(variant_spec())
    t0 = time.perf_counter()

    def spike_alone(seq: str) -> str:
        return cut_spike(align_genome(seq)).aligned.replace("-", "").strip("N")

    whole = {p.name: p for p in classify_stream(model, [SequenceRecord(n, s, []) for _, n, s in genomes])}
    alone = {p.name: p for p in classify_stream(model, [SequenceRecord(n, spike_alone(s), []) for _, n, s in genomes])}
    called = [(src, n) for src, n, _ in genomes if whole[n].predicted]
    refused = [(src, n, alone[n].gate) for src, n in called if not alone[n].predicted]
    differ = [(src, n, whole[n].predicted, alone[n].predicted) for src, n in called
              if alone[n].predicted and alone[n].predicted != whole[n].predicted]
    same = len(called) - len(refused) - len(differ)
    print(f"CPU: {cpu_name()} ({platform.machine()}), {time.perf_counter() - t0:.0f} s")
    print(f"genomes: {len(genomes)}; called whole: {len(called)}; spike alone gets the same class: {same}; "
          f"refused alone: {len(refused)}; another class alone: {len(differ)}")
    for row in refused + differ:
        print("  ", *row)
    return 0 if not refused and not differ else 1


if __name__ == "__main__":
    raise SystemExit(main())
