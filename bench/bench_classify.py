"""Throughput of ``classify`` per backend, end to end vs the forward bound and the machine's own matmul
peak, in one run.

End to end = parse -> align (minimap2) -> cut spike -> mutations/QC -> tokenise -> batched
forward, exactly what ``python -m bertgeom classify`` does (:func:`classify_stream`, its backend and
precision policy). The forward bound = the same classifier's batched forward passes on the same, already
tokenised inputs. Targets (issue 34): the chosen forward >= 50% of this machine's matmul peak in its
precision; end to end >= 0.85 of that bound; every call kept and max |Δlogit| <= 0.05 against fp32 torch.

**The backend table.** Side by side on the same tokenised genomes, interleaved chunk by chunk (every
row on each chunk of the largest batch, in an order rotated per chunk; then end to end over all the
genomes in one run, as the CLI classifies a file) in rounds (medians):
torch eager fp32 (the analysis model), torch SDPA fp32 and bf16 (the classification copy, [CLS]-only
last layer), OpenVINO f32 and bf16 (inference-precision hint) and ONNX Runtime fp32 (all graph
optimisations) on the same exported graph when installed, torch.compile with ``--compile`` (minutes
to compile), the chosen backend in one stream with every thread, and at other batch sizes. Each row:
genomes/s, its speed relative to torch SDPA fp32 *of the same round* (the median of the per-round
ratios, which a shared host's load moves far less than the rates), its FLOP/s as a share of the
matmul peak in its precision measured in the same round (median over rounds), and, on the shipped
validation genomes, max |Δlogit| and calls agreeing with torch fp32.

Measured in the same run, so that a shared, busy machine still gives honest ratios:

* the machine, named (:func:`bertgeom.runtime.machine_line`: CPU model, the ISA torch reports, its
  bf16/VNNI/AMX units, the runtime versions) on every printed table;
* the machine's own fp32 and bf16 matmul rate (``[2048 x 2048] @ [2048 x 2048]``, best of a few, every
  round): the forward's achieved FLOP/s is reported as a share of the measured peak (a forward of the
  variant model is ~9.2 GFLOP: 6 layers, 427 tokens, hidden 384, FFN 1536, the last layer for [CLS] alone);
* the fused attention kernels alone at the forward's shapes (bf16): the part of the forward no matrix
  unit speeds up (its softmax is exp-bound);
* end to end with the chosen backend: with one stream, with the default forward streams
  (:func:`bertgeom.sars_cov_2.variant.predict.default_streams`: one per core on the CPU, one thread each) and with
  ``--workers`` preparation processes. The bound is the faster of the two ways to run the chosen
  backend's forwards alone (one stream with every thread, or the streams); end to end's share of it is
  the median of the per-round shares.

* the preparation of a genome from its FASTA text (parse, align, mutations, clade, QC, gate, marker
  call, tokens) in CPU ms per genome, now against the reference copies of what it ran before it was
  made cheaper (``bench/reference_genome_prep.py``), interleaved rounds, ``time.process_time``; and the
  end-to-end ceiling each leaves beside the forward's CPU per genome. ``--prep-only`` measures just
  that, without a model, in seconds (``--forward-cpu-ms`` adds the ceiling column from a forward's CPU
  measured before).

``--update-readme`` writes the tables into README.md (block ``classify-speed``) and docs/speed.md
(block ``backends``), each with the machine's line.

Usage: python bench/bench_classify.py [--n 64] [--batch-size 16] [--model ID|DIR] [--device auto]
                                      [--workers 2] [--precision auto] [--backend auto] [--repeats 3]
                                      [--compile] [--agreement-n 0] [--json out.json] [--update-readme]
       python bench/bench_classify.py --prep-only [--n 64] [--repeats 5] [--forward-cpu-ms 72]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _records(n: int):
    from bertgeom.sars_cov_2.genome.fasta import parse_sequences
    from bertgeom.sars_cov_2.variant.spec import genome_set

    base = [parse_sequences(it.text)[0] for it in genome_set()]
    return [base[i % len(base)] for i in range(n)]


def _texts(n: int) -> list[str]:
    """The FASTA text of ``n`` genomes: the shipped genome set, cycled (as :func:`_records`)."""
    from bertgeom.sars_cov_2.variant.spec import genome_set

    base = [it.text for it in genome_set()]
    return [base[i % len(base)] for i in range(n)]


def preparation_cpu(texts: list[str], vocab, max_tokens: int = 512, repeats: int = 3) -> dict:
    """CPU ms per genome of preparing each genome from its FASTA text (parse, align, cut, mutations,
    clade, QC, gate, marker call, 12-mer tokens): :func:`~bertgeom.sars_cov_2.genome.pipeline.analyse_sequence`
    now against the reference copy of what it ran before it was made cheaper
    (``bench/reference_genome_prep.py``), in ``repeats`` interleaved rounds (the order of the two
    alternating per round), timed with ``time.process_time`` (CPU time, which a busy shared host moves
    far less than wall time). The ratio is the median of the per-round ratios."""
    from reference_genome_prep import reference_analyse_sequence

    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence

    fns = {"reference": reference_analyse_sequence, "now": analyse_sequence}
    for fn in fns.values():  # warm-up: the aligner's index, the tables, the per-process constants
        fn(texts[0], vocab=vocab, max_length=max_tokens)
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for k in range(max(1, repeats)):
        for name in (("reference", "now") if k % 2 == 0 else ("now", "reference")):
            fn = fns[name]
            c0 = time.process_time()
            for t in texts:
                fn(t, vocab=vocab, max_length=max_tokens)
            cpu[name].append(time.process_time() - c0)
    n = len(texts)
    return {
        "preparation_reference_cpu_ms_per_genome": 1000 * float(np.median(cpu["reference"])) / n,
        "preparation_now_cpu_ms_per_genome": 1000 * float(np.median(cpu["now"])) / n,
        "preparation_speedup": float(np.median([a / b for a, b in zip(cpu["reference"], cpu["now"])])),
        "preparation_rounds": max(1, repeats),
    }


def preparation_markdown(prep: dict, forward_cpu_ms: float | None = None) -> str:
    """The preparation's CPU per genome, before and now (same run), and, given the forward's CPU per
    genome, the end-to-end ceiling each leaves (forward CPU / (forward + preparation) CPU)."""
    ref, now = prep["preparation_reference_cpu_ms_per_genome"], prep["preparation_now_cpu_ms_per_genome"]
    lines = ["| preparation of a genome from its FASTA text (CPU time) | ms/genome | ceiling of end to end / forward "
             "bound |",
             "|---|---|---|"]
    for label, ms in (("before (bench/reference_genome_prep.py, same run)", ref), ("now", now)):
        ceiling = (f"{forward_cpu_ms / (forward_cpu_ms + ms):.2f} (forward {forward_cpu_ms:.0f} ms)"
                   if forward_cpu_ms else "—")
        lines.append(f"| {label} | {ms:.1f} | {ceiling} |")
    lines.append(f"| now vs before (median of {prep['preparation_rounds']} interleaved rounds) | "
                 f"{prep['preparation_speedup']:.2f}x less CPU | |")
    return "\n".join(lines)


def forward_flop(loaded, tokens: int, cls_only_last: bool = True) -> float:
    """Multiply-add FLOPs of one forward of ``tokens`` tokens (projections, attention, FFN, x2).

    ``cls_only_last``: the classification forward's last layer (``run_forward(logits_only=True)``):
    keys and values for every token, the query, attention, output projection and FFN for [CLS] alone."""
    cfg = loaded.config
    d, f, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    per_layer = 2 * tokens * (4 * d * d + 2 * d * f) + 2 * 2 * tokens * tokens * d
    if not cls_only_last:
        return L * per_layer
    last = 2 * tokens * 2 * d * d + 2 * (2 * d * d + 2 * d * f) + 2 * 2 * tokens * d
    return (L - 1) * per_layer + last


def attention_kernel_seconds(loaded, batch: int, tokens: int, dtype_name: str, repeats: int = 3) -> float:
    """Seconds of the fused attention kernels alone for one batch's forward (``L - 1`` full layers at
    ``[batch, heads, tokens, head_dim]`` plus the [CLS]-only last layer), best of ``repeats``: the part
    of the forward that no matmul unit speeds up (its softmax is exp-bound on a CPU)."""
    import torch

    cfg = loaded.config
    H, L = cfg.num_attention_heads, cfg.num_hidden_layers
    dh = cfg.hidden_size // H
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    q, k, v = (torch.randn(batch, H, tokens, dh).to(dtype) for _ in range(3))
    q1 = q[:, :, :1].contiguous()
    sdpa = torch.nn.functional.scaled_dot_product_attention
    best = float("inf")
    with torch.inference_mode():
        sdpa(q, k, v)
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(L - 1):
                sdpa(q, k, v)
            sdpa(q1, k, v)
            best = min(best, time.perf_counter() - t0)
    return best


def _pad(ids: list[np.ndarray]) -> np.ndarray:
    from bertgeom.sars_cov_2.variant.predict import pad_rows

    return pad_rows(ids)


def _token_ids(loaded, records) -> list[np.ndarray]:
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence

    ids = [np.asarray(analyse_sequence(r, vocab=loaded.tokenizer).token_ids) for r in records]
    return [x[: int(np.count_nonzero(x))] for x in ids if np.count_nonzero(x)]


def run_forwards(fn, padded: np.ndarray, batch_size: int, streams: int, threads_each: int) -> float:
    """Seconds to run ``fn`` over ``padded`` the way :func:`classify_stream` splits it
    (:func:`bertgeom.backends.time_in_streams`: ``streams`` Python threads, ``batch_size // streams``
    rows per call), each stream with ``threads_each`` torch threads."""

    from bertgeom.backends import time_in_streams
    from bertgeom.runtime import torch_threads

    with torch_threads(threads_each * streams):  # time_in_streams gives each stream its share of these
        return time_in_streams(fn, padded, batch_size, streams)[0]


def compiled_forward(fc):
    """torch.compile of the classification graph (dynamic shapes) of a torch :class:`FastClassifier`."""
    import torch

    from bertgeom.backends import _graph_module

    graph = torch.compile(_graph_module(fc.model), dynamic=True)

    def logits(ids):
        ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        with torch.inference_mode():
            return graph(ids, (ids != 0).long()).float().numpy()

    return logits


def backend_table_markdown(out: dict) -> str:
    """The backend table (markdown) with the machine's line under it."""
    lines = ["| backend | precision | streams x threads | batch | genomes/s | vs torch fp32 (same rounds) | "
             "share of matmul peak | max \\|Δlogit\\| | calls kept |", "|---|---|---|---|---|---|---|---|---|"]
    for r in out["backends"]:
        mark = " **(auto)**" if r.get("chosen") else ""
        kept = f"{r['same_call']}/{r['agreement_genomes']}" if r.get("same_call") is not None else "—"
        dl = f"{r['max_abs_logit_diff']:.1e}" if r.get("max_abs_logit_diff") is not None else "—"
        lines.append(f"| {r['backend']}{mark} | {r['precision']} | {r['streams']} x {r['threads']} | {r['batch']} | "
                     f"{r['genomes_per_s']:.1f} | {r['vs_torch_fp32']:.2f}x | {100 * r['share_of_peak']:.0f}% | {dl} | "
                     f"{kept} |")
    return "\n".join(lines)


def summary_markdown(out: dict) -> str:
    """Targets of issue 34 on this machine, from one run."""
    c = out["chosen"]
    kept_all = (out['chosen_same_call'] == out['validation_genomes']
                and out['chosen_max_abs_logit_diff'] <= 0.05)
    return "\n".join([
        "| target | measured | met |", "|---|---|---|",
        f"| forward >= 50% of the matmul peak in its precision ({c}) | {100 * out['chosen_share_of_peak']:.0f}% "
        f"(peak {out['chosen_peak_gflops']:.0f} GFLOP/s, forward {out['chosen_forward_gflops']:.0f}) | "
        f"{'yes' if out['chosen_share_of_peak'] >= 0.5 else 'no'} |",
        f"| end to end >= 0.85 of the forward bound (each round against its own bound; median) | "
        f"{out['end_to_end_share_of_bound']:.2f} (rounds: "
        f"{', '.join(f'{x:.2f}' for x in out.get('end_to_end_share_each_round', []))}; medians of the rates: "
        f"{out['end_to_end_genomes_per_s']:.1f} of {out['bound_genomes_per_s']:.1f} genomes/s) | "
        f"{'yes' if out['end_to_end_share_of_bound'] >= 0.85 else 'no'} |",
        f"| (its ceiling here: a genome costs the cores {out['forward_cpu_ms_per_genome']:.0f} ms of CPU in the "
        "forward and "
        f"{out['preparation_cpu_ms_per_genome']:.0f} ms in the preparation, so with every core busy end to end reaches "
        f"at most {out['forward_cpu_ms_per_genome']:.0f} / {out['end_to_end_cpu_ms_per_genome']:.0f} of the bound) | "
        f"ceiling {out['end_to_end_ceiling_share']:.2f}; cores busy {100 * out['forward_core_utilisation']:.0f}% in "
        f"the forward, {100 * out['end_to_end_core_utilisation']:.0f}% end to end | "
        f"{'reachable' if out['end_to_end_ceiling_share'] >= 0.85 else 'out of reach'} |",
        f"| `--backend auto` runs the fastest path that keeps every call | auto runs {c} ({out['chosen_how']}); "
        f"fastest in this table: {out['fastest_kept']} | {'yes' if out['fastest_kept'] == c else 'no'} |",
        f"| every call kept, max \\|Δlogit\\| <= 0.05 vs torch fp32 | {out['chosen_same_call']}/"
        f"{out['validation_genomes']}, {out['chosen_max_abs_logit_diff']:.1e} | "
        f"{'yes' if kept_all else 'no'} |",
    ])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64, help="genomes timed (the shipped set, cycled)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--model", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="auto",
                    help="device of the classification copy (auto: a GPU when there is one)")
    ap.add_argument("--workers", type=int, default=2, help="preparation processes for the parallel end-to-end run")
    ap.add_argument("--precision", default="auto", help="precision of the end-to-end runs (auto: the policy's)")
    ap.add_argument("--backend", default="auto", help="backend of the end-to-end runs (auto: the policy's)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="interleaved rounds of every forward row and the end-to-end runs; medians reported "
                         "(a shared host's load moves the absolute rate by 10%% or more, the ratios much less)")
    ap.add_argument("--compile", action="store_true", help="add torch.compile rows (compiling takes minutes)")
    ap.add_argument("--agreement-n", type=int, default=0,
                    help="validation genomes for |Δlogit| and calls (0: all shipped ones)")
    ap.add_argument("--update-readme", action="store_true",
                    help="write the tables into README.md and docs/speed.md (with the machine's line)")
    ap.add_argument("--prep-only", action="store_true",
                    help="only the preparation's CPU per genome, before and now (no model, a few seconds)")
    ap.add_argument("--forward-cpu-ms", type=float, default=0.0,
                    help="with --prep-only: a forward's CPU ms per genome measured before, for the ceiling column")
    args = ap.parse_args(argv)

    if args.prep_only:
        from bertgeom.runtime import machine_line
        from bertgeom.sars_cov_2.genome.kmers import KmerVocab
        from bertgeom.sars_cov_2.genome.reference import data_path

        vocab = KmerVocab.load(data_path("variant_model", "kmer_vocab.json"))
        prep = preparation_cpu(_texts(args.n), vocab, repeats=args.repeats)
        prep["machine"] = machine_line()
        print(f"machine: {prep['machine']}\n{preparation_markdown(prep, args.forward_cpu_ms or None)}")
        if args.json:
            Path(args.json).write_text(json.dumps(prep, indent=1))
        return prep

    from bertgeom.backends import available_backends, choose_backend
    from bertgeom.forward import matmul_peak
    from bertgeom.models import REGISTRY, load_model, resolve_device
    from bertgeom.runtime import machine, machine_line
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.sars_cov_2.variant.predict import (classify_stream, default_streams, fast_classifier,
                                          held_out_genomes, logits_for_ids)

    model_id = args.model or (VARIANT_MODEL_ID if VARIANT_MODEL_ID in REGISTRY else "")
    if not model_id:
        import tempfile

        from bertgeom.sars_cov_2.variant import build_tiny_variant_model

        model_id = str(build_tiny_variant_model(Path(tempfile.mkdtemp()) / "tiny"))
    loaded = load_model(model_id)
    device = resolve_device(args.device)
    info = machine()
    print(f"machine: {machine_line(info)}", flush=True)
    records = _records(args.n)
    # what --backend auto runs: the choice measured on this machine (measured now, once, if it never was)
    from bertgeom.backends import stored_choice
    from bertgeom.sars_cov_2.variant.predict import measure_backends, measured_backend_needed

    if measured_backend_needed(loaded, device, args.precision, args.backend):
        measure_backends(loaded, device, args.precision, log=lambda m: print("  " + m, flush=True))
    measured = stored_choice(loaded.weights_hash, device, args.precision) if args.backend == "auto" else None
    chosen_backend, chosen_prec = choose_backend(args.backend, device, args.precision, weights=loaded.weights_hash)
    chosen = f"{chosen_backend} {chosen_prec}"
    how_chosen = (f"measured on this machine ({measured.measured_at}, `python -m bertgeom choose-backend`)"
                  if measured is not None else ("asked for" if args.backend != "auto" else "the CPU rule"))
    print(f"  auto runs {chosen}: {how_chosen}", flush=True)

    prep = preparation_cpu(_texts(args.n), loaded.tokenizer, loaded.max_tokens, repeats=args.repeats)
    ids = _token_ids(loaded, records)  # the timed genomes, tokenised once (not timed)
    padded = _pad(ids)
    flop = sum(forward_flop(loaded, len(x)) for x in ids)
    n = len(records)
    streams = default_streams(device)
    cores = max(1, __import__("torch").get_num_threads())
    each = max(1, cores // streams)

    # the rows: (name, precision, callable, streams, threads, batch)
    rows: list[dict] = []

    def add(name, prec, fn, n_streams, threads, batch, chosen_row=False):
        rows.append(dict(backend=name, precision=prec, fn=fn, streams=n_streams, threads=threads, batch=batch,
                         chosen=chosen_row, times=[], cpu=[]))

    add("torch eager (analysis model)", "fp32", lambda x: logits_for_ids(loaded, x), 1, cores, args.batch_size)
    fcs = {}
    for backend, prec in [("torch", "fp32"), ("torch", "bf16"), ("openvino", "fp32"), ("openvino", "bf16"),
                          ("onnxruntime", "fp32")]:
        if backend not in available_backends() or (backend != "torch" and device != "cpu"):
            continue
        t0 = time.perf_counter()
        fcs[backend, prec] = fc = fast_classifier(loaded, device, prec, backend)
        note = "" if backend == "torch" else ", its export and compiled blobs cached on disk"
        print(f"  ready: {backend} {prec} ({time.perf_counter() - t0:.1f} s{note})", flush=True)
        add(backend + (" SDPA" if backend == "torch" else ""), prec, fc.logits, streams, each, args.batch_size,
            chosen_row=(backend, prec) == (chosen_backend, chosen_prec))
    if args.compile and device == "cpu":
        for prec in ("fp32",):
            t0 = time.perf_counter()
            fn = compiled_forward(fcs["torch", prec])
            fn(padded[:2])
            print(f"  ready: torch.compile {prec} ({time.perf_counter() - t0:.1f} s)", flush=True)
            add("torch.compile", prec, fn, streams, each, args.batch_size)
    best_fc = fcs.get((chosen_backend, chosen_prec)) or fast_classifier(loaded, device, chosen_prec, chosen_backend)
    if streams > 1:
        add(f"{chosen_backend} (one stream, every thread)", chosen_prec, best_fc.logits, 1, cores, args.batch_size)
    for b in (4, 32):
        if b != args.batch_size:
            add(f"{chosen_backend} (batch {b})", chosen_prec, best_fc.logits, streams, each, b)

    def end_to_end(streams_arg, workers=1) -> tuple[float, int]:
        t0 = time.perf_counter()
        k = sum(p.error == "" for p in classify_stream(loaded, records, batch_size=args.batch_size, workers=workers,
                                                       device=device, precision=chosen_prec, streams=streams_arg,
                                                       backend=chosen_backend))
        return time.perf_counter() - t0, k

    for r in rows:  # warm-up (first calls compile kernels / runtimes)
        r["fn"](padded[: max(1, r["batch"] // r["streams"])])
    end_to_end("auto")
    peaks = {"fp32": [], "bf16": []}
    e2e = {"one": [], "streams": []}
    e2e_cpu: list[float] = []
    n_ok = None
    # Interleaved finely: each round walks the genomes in chunks of the largest batch; on every chunk
    # each row runs (in an order rotated per chunk), then classify end to end on the same records, so a
    # change of the host's load within a round hits every row alike. A round's time of a row is the sum
    # over its chunks.
    chunk = max(r["batch"] for r in rows)
    starts = list(range(0, n, chunk))
    ok = {"one": 0, "streams": 0}
    for rnd in range(max(1, args.repeats)):
        for p in peaks:
            peaks[p].append(matmul_peak(p))
        for r in rows:
            r["times"].append(0.0)
            r["cpu"].append(0.0)
        e2e["one"].append(0.0)
        e2e["streams"].append(0.0)
        e2e_cpu.append(0.0)
        for c, s0 in enumerate(starts):
            k = (rnd * len(starts) + c) % len(rows)
            for r in rows[k:] + rows[:k]:
                c0 = time.process_time()  # CPU seconds of every thread of this process
                r["times"][-1] += run_forwards(r["fn"], padded[s0 : s0 + chunk], r["batch"], r["streams"], r["threads"])
                r["cpu"][-1] += time.process_time() - c0
        # end to end as a user runs it: one classify over all the round's genomes (as the CLI streams a
        # file), so its batches start and drain once per run, not once per chunk of the table above
        for key, streams_arg in (("one", 1), ("streams", "auto")):
            t0, c0 = time.perf_counter(), time.process_time()
            preds = list(classify_stream(loaded, records, batch_size=args.batch_size, device=device,
                                         precision=chosen_prec, streams=streams_arg, backend=chosen_backend))
            e2e[key][-1] += time.perf_counter() - t0
            if key == "streams":
                e2e_cpu[-1] += time.process_time() - c0
            ok[key] += sum(p.error == "" for p in preds)
        print(f"  round {rnd + 1}: " + ", ".join(f"{r['backend']} {r['precision']} {n / r['times'][-1]:.1f}/s"
                                                  for r in rows[:6]) + f"; end to end {n / e2e['streams'][-1]:.1f}/s",
              flush=True)
    assert ok["one"] == ok["streams"]
    n_ok = ok["streams"] // max(1, args.repeats)
    peak = {p: float(np.median(v)) for p, v in peaks.items()}
    base = next(r for r in rows if r["backend"] == "torch SDPA" and r["precision"] == "fp32")
    for r in rows:
        r["seconds"] = float(np.median(r["times"]))
        r["genomes_per_s"] = n / r["seconds"]
        r["vs_torch_fp32"] = float(np.median([b / t for b, t in zip(base["times"], r["times"])]))

    # agreement with torch fp32 on the shipped validation genomes (one untimed pass per distinct forward)
    val, _ = held_out_genomes()
    if args.agreement_n:
        val = val[: args.agreement_n]
    vpad = _pad(_token_ids(loaded, val))
    bs = args.batch_size

    def all_logits(fn):
        return np.concatenate([fn(vpad[s : s + bs]) for s in range(0, len(vpad), bs)])

    ref = all_logits(fcs["torch", "fp32"].logits)
    seen: dict = {}
    for r in rows:
        key = id(getattr(r["fn"], "__self__", r["fn"]))
        if key not in seen:
            lg = all_logits(r["fn"])
            seen[key] = (int((lg.argmax(1) == ref.argmax(1)).sum()), float(np.abs(lg - ref).max()))
        r["same_call"], r["max_abs_logit_diff"] = seen[key]
        r["agreement_genomes"] = len(vpad)

    t_attn = attention_kernel_seconds(loaded, min(args.batch_size, n), padded.shape[1], chosen_prec) * n / min(
        args.batch_size, n)
    t0 = time.perf_counter()
    _token_ids(loaded, records)
    t_prep = time.perf_counter() - t0
    t_par, n_par = end_to_end(1, workers=args.workers) if device == "cpu" or args.workers > 1 else (float("nan"), n_ok)
    assert n_par == n_ok

    t_e2e, t_e2e_one = float(np.median(e2e["streams"])), float(np.median(e2e["one"]))
    chosen_rows = [r for r in rows if r["precision"] == chosen_prec and r["batch"] == args.batch_size
                   and r["fn"] == best_fc.logits]
    t_bound = min(r["seconds"] for r in chosen_rows)
    # per round (the load of a shared host moves between rounds, less within one): the bound of the round
    # (its faster way to run the chosen forwards), end to end's share of it and the share of the round's peak
    bound_r = [min(r["times"][k] for r in chosen_rows) for k in range(len(e2e["streams"]))]
    e2e_share = float(np.median([b / t for b, t in zip(bound_r, e2e["streams"])]))
    peak_share = float(np.median([flop / b / p for b, p in zip(bound_r, peaks[chosen_prec])]))
    # CPU accounting (every thread of the process, per round): what one genome costs the cores in the
    # chosen forward alone and end to end; their difference is the preparation. With every core busy in
    # both, end to end can reach at most forward CPU / end-to-end CPU of the bound.
    bound_row = min(chosen_rows, key=lambda r: r["seconds"])
    fwd_cpu = float(np.median(bound_row["cpu"])) / n
    e2e_cpu_g = float(np.median(e2e_cpu)) / n
    cores_n = max(1, int(info.get("cores") or cores))
    for r in rows:
        r["share_of_peak"] = float(np.median([flop / t / p for t, p in zip(r["times"], peaks[r["precision"]])]))
    # the fastest row run the way classify runs (default streams, the batch size) that keeps every call
    kept = [r for r in rows if r["streams"] == streams and r["batch"] == args.batch_size
            and r["backend"] != rows[0]["backend"]
            and r.get("same_call") == len(vpad) and r["max_abs_logit_diff"] <= 0.05]
    top = max(kept, key=lambda r: r["genomes_per_s"])
    fastest_kept = f"{top['backend'].replace(' SDPA', '')} {top['precision']}"
    torch_row = {p: next(r for r in rows if r["backend"] == "torch SDPA" and r["precision"] == p)
                 for p in ("fp32", "bf16")}
    crow = next(r for r in chosen_rows if r["streams"] == streams)
    out = {
        "machine": machine_line(info),
        "machine_info": info,
        "model": loaded.spec.id if loaded.spec.id != model_id else Path(model_id).name,
        "device": device,
        "chosen": chosen,
        "chosen_how": how_chosen,
        "fastest_kept": fastest_kept,
        "policy_precision": chosen_prec,
        "genomes": n,
        "classified": n_ok,
        "matmul_peak_fp32_gflops": peak["fp32"] / 1e9,
        "matmul_peak_bf16_gflops": peak["bf16"] / 1e9,
        "forward_gflop_per_genome": flop / n / 1e9,
        "analysis_forward_genomes_per_s": rows[0]["genomes_per_s"],
        "forward_fp32_genomes_per_s": torch_row["fp32"]["genomes_per_s"],
        "forward_bf16_genomes_per_s": torch_row["bf16"]["genomes_per_s"],
        "forward_fp32_share_of_fp32_peak": torch_row["fp32"]["share_of_peak"],
        "forward_bf16_share_of_bf16_peak": torch_row["bf16"]["share_of_peak"],
        "bf16_over_fp32_forward": torch_row["bf16"]["vs_torch_fp32"],
        "preprocessing_ms_per_genome": 1000 * t_prep / n,
        "attention_kernels_share_of_bound": t_attn / t_bound,
        "ceiling_attention_only_per_s": n / t_attn,
        "repeats": max(1, args.repeats),
        "streams": streams,
        "bound_genomes_per_s": n / t_bound,
        "chosen_share_of_peak": peak_share,
        "chosen_peak_gflops": peak[chosen_prec] / 1e9,
        "chosen_forward_gflops": flop / t_bound / 1e9,
        "chosen_same_call": crow["same_call"],
        "chosen_max_abs_logit_diff": crow["max_abs_logit_diff"],
        "end_to_end_genomes_per_s_each_round": [n / t for t in e2e["streams"]],
        "end_to_end_genomes_per_s": n / t_e2e,
        "end_to_end_share_of_bound": e2e_share,
        "end_to_end_share_each_round": [b / t for b, t in zip(bound_r, e2e["streams"])],
        "forward_cpu_ms_per_genome": 1000 * fwd_cpu,
        "end_to_end_cpu_ms_per_genome": 1000 * e2e_cpu_g,
        "preparation_cpu_ms_per_genome": 1000 * (e2e_cpu_g - fwd_cpu),
        "end_to_end_ceiling_share": fwd_cpu / e2e_cpu_g,
        **prep,
        "end_to_end_ceiling_share_from_preparation_now":
            fwd_cpu / (fwd_cpu + prep["preparation_now_cpu_ms_per_genome"] / 1000),
        "forward_core_utilisation": float(np.median(bound_row["cpu"])) / bound_row["seconds"] / cores_n,
        "end_to_end_core_utilisation": float(np.median(e2e_cpu)) / t_e2e / cores_n,
        "end_to_end_one_stream_genomes_per_s": n / t_e2e_one,
        "workers": args.workers,
        "end_to_end_parallel_genomes_per_s": n / t_par,
        "parallel_share_of_bound": t_bound / t_par,
        "validation_genomes": len(vpad),
        "fp32_bf16_same_call": torch_row["bf16"]["same_call"],
        "fp32_bf16_max_abs_logit_diff": torch_row["bf16"]["max_abs_logit_diff"],
        "backends": [{k: v for k, v in r.items() if k not in ("fn", "times", "cpu")}
                     | {"rounds_genomes_per_s": [n / t for t in r["times"]]}
                     for r in rows],
    }
    print(f"\n{'measure':40s} value")
    for k, v in out.items():
        if k in ("backends", "machine_info"):
            continue
        print(f"{k:40s} {v:.3f}" if isinstance(v, float) else f"{k:40s} {v}")
    table = backend_table_markdown(out)
    stamp = (f"_{out['model']}, {n} genomes (the shipped genome set, cycled), {out['repeats']} interleaved rounds, "
             f"medians; {time.strftime('%Y-%m-%d')}; machine: {out['machine']}; "
             f"`python bench/bench_classify.py --n {args.n} --repeats {args.repeats} --update-readme`_")
    print(f"\nmachine: {out['machine']}\n{table}\n\n{summary_markdown(out)}\n\n"
          f"{preparation_markdown(prep, 1000 * fwd_cpu)}")
    if args.update_readme:
        from readme_blocks import ROOT, replace_block

        body = f"{table}\n\n{summary_markdown(out)}\n\n{stamp}"
        replace_block("backends", body, "## Measured here", readme=ROOT / "docs" / "speed.md")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return out


if __name__ == "__main__":
    main()
