"""The ``classify`` CLI never loses or corrupts output and answers user errors in one sentence
(issue 16, items 2, 5 and 8); its rows carry the rule-based second opinion (issue 11)."""

from __future__ import annotations

import csv
from pathlib import Path
import gzip

import pytest
from cli_run import bertgeom_cli

from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes


def _run(*args):
    """``python -m bertgeom classify ARGS``, in this process (tests/cli_run.py)."""
    return bertgeom_cli("classify", *args)


@pytest.fixture(scope="module")
def demo_blocks():
    return [(r.name, gzip.compress(f">{r.name}\n{r.sequence}\n".encode())) for r, _ in load_demo_genomes()][:4]


def test_a_truncated_file_keeps_the_intact_rows_names_the_stop_and_exits_2(tiny_variant_dir, tmp_path, demo_blocks):
    cut = tmp_path / "cut.fasta.gz"
    blob = demo_blocks[3][1]
    cut.write_bytes(b"".join(b for _, b in demo_blocks[:3]) + blob[: len(blob) // 2])
    out = tmp_path / "keep.csv"
    out.write_text("previous results\n")
    r = _run(cut, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"inside record '{demo_blocks[3][0]}'" in r.stderr
    assert out.read_text() == "previous results\n"  # a failed run never replaces OUT (issue 25, item 5)
    (partial,) = tmp_path.glob("keep.csv.*.partial")  # a name of this run's own (issue 33, item 6)
    assert str(partial) in r.stderr and "left as it was" in r.stderr
    rows = list(csv.DictReader(partial.open()))
    assert [row["name"] for row in rows] == [n for n, _ in demo_blocks]
    assert all(row["predicted"] for row in rows[:3]) and "truncated" in rows[3]["error"]
    assert all(row["rule_call"] for row in rows[:3]) and {"rule_call", "rule_evidence", "agrees"} <= set(rows[0])
    # nearest clade and the Nextclade-like QC score come from the same one-pass analysis
    assert [row["clade"] for row in rows[:3]] == ["20C", "21G (Lambda)", "21H (Mu)"]
    assert all(row["qc_status"] in ("good", "mediocre", "bad") and float(row["qc_score"]) >= 0 for row in rows[:3])


def test_a_failed_run_leaves_the_previous_output_as_it_was(tmp_path, demo_blocks):
    good = tmp_path / "g.fasta.gz"
    good.write_bytes(demo_blocks[0][1])
    out = tmp_path / "keep.csv"
    out.write_text("previous results\n")
    broken = tmp_path / "broken_model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    (broken / "kmer_vocab.json").write_text("[]")
    (broken / "model.safetensors").write_bytes(b"garbage")
    r = _run(good, "--model", broken, "--out", out)
    assert r.returncode == 3 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert out.read_text() == "previous results\n"


def test_output_errors_are_one_sentence(tiny_variant_dir, tmp_path, demo_blocks):
    good = tmp_path / "g.fasta.gz"
    good.write_bytes(demo_blocks[0][1])
    r = _run(good, "--model", tiny_variant_dir, "--out", tmp_path / "no_such_dir" / "x.csv")
    assert r.returncode == 4 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = _run(tmp_path / "missing.fasta", "--model", tiny_variant_dir)
    assert r.returncode == 2 and "No file at" in r.stderr


def test_names_that_look_like_formulas_are_neutralised(tiny_variant_dir, tmp_path):
    rec = next(r for r, _ in load_demo_genomes())
    fasta = tmp_path / "f.fasta"
    fasta.write_text(f">=HYPERLINK(\"http://x\")\n{rec.sequence}\n>@SUM(A1)\n{rec.sequence}\n")
    out = tmp_path / "o.csv"
    assert _run(fasta, "--model", tiny_variant_dir, "--out", out).returncode == 0
    names = [row["name"] for row in csv.DictReader(out.open())]
    assert names == ["'=HYPERLINK(\"http://x\")", "'@SUM(A1)"]


def test_parallel_preparation_keeps_input_order_and_bad_records_in_place(tiny_variant):
    from bertgeom.sars_cov_2.genome.fasta import RecordError
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    recs = [r for r, _ in load_demo_genomes()]
    stream = [recs[0], RecordError("broken", 1, "Record 'broken' contains no sequence."), *recs[1:5], "ACGT" * 3]
    one = [p.row(tiny_variant.labels, "v") for p in classify_stream(tiny_variant, stream, batch_size=3)]
    two = [p.row(tiny_variant.labels, "v") for p in classify_stream(tiny_variant, stream, batch_size=3, workers=2)]
    assert one == two
    assert [r["name"] for r in one][:2] == [recs[0].name, "broken"] and one[1]["error"]


def test_forward_streams_give_the_one_stream_rows_in_input_order(tiny_variant):
    """Two streams (threads that each prepare and classify their own batches) give row for row what
    one stream gives, bad records in place, and leave the caller's torch threads as they were."""
    import torch

    from bertgeom.sars_cov_2.genome.fasta import RecordError
    from bertgeom.sars_cov_2.variant.predict import classify_stream, default_streams

    recs = [r for r, _ in load_demo_genomes()]
    stream = [recs[0], RecordError("broken", 1, "Record 'broken' contains no sequence."), *recs[1:7], "ACGT" * 3]
    before = torch.get_num_threads()
    one = [p.row(tiny_variant.labels, "v") for p in classify_stream(tiny_variant, stream, batch_size=4, streams=1)]
    two = [p.row(tiny_variant.labels, "v")
           for p in classify_stream(tiny_variant, iter(stream), batch_size=4, streams=2)]
    assert one == two and len(two) == len(stream)
    assert [r["name"] for r in two][:2] == [recs[0].name, "broken"] and two[1]["error"] and two[-1]["error"]
    assert torch.get_num_threads() == before
    assert default_streams("cuda") == 1 and default_streams("cpu", workers=2) == 1 and default_streams("cpu") >= 1
    with pytest.raises(ValueError):
        list(classify_stream(tiny_variant, stream, streams=2, workers=2))


def test_a_consumer_that_stops_early_leaves_no_stream_running(tiny_variant):
    import threading

    from bertgeom.sars_cov_2.variant.predict import classify_stream

    recs = [r for r, _ in load_demo_genomes()] * 3
    gen = classify_stream(tiny_variant, recs, batch_size=2, streams=2)
    first = next(gen)
    gen.close()  # the pool is shut down: no thread of it is left behind
    assert first.name == recs[0].name
    assert not [t for t in threading.enumerate() if t.name.startswith("bertgeom-classify")]


def test_streams_and_workers_together_are_refused_in_one_sentence(tiny_variant_dir, tmp_path, demo_blocks):
    good = tmp_path / "g.fasta.gz"
    good.write_bytes(demo_blocks[0][1])
    r = _run(good, "--model", tiny_variant_dir, "--streams", "2", "--workers", "2")
    assert r.returncode == 2 and "not both" in r.stderr and "Traceback" not in r.stderr
    r = _run(good, "--model", tiny_variant_dir, "--streams", "two")
    assert r.returncode == 2 and "positive whole number" in r.stderr and "Traceback" not in r.stderr


def test_the_fast_classifier_matches_the_analysis_model(tiny_variant):
    import numpy as np

    from bertgeom.sars_cov_2.variant.predict import FastClassifier, logits_for_ids

    texts = [r.sequence[21000:25500] for r, _ in load_demo_genomes()]
    ids, _ = tiny_variant.tokenizer.encode_batch([t[:3822] for t in texts], max_length=None)
    ids[2, 300:] = 0  # a shorter, padded row
    fast = FastClassifier(tiny_variant, "cpu", "fp32", "torch")  # other runtimes: tests/test_backends.py
    assert fast.device == "cpu" and fast.model is not tiny_variant.model and fast.precision == "fp32"
    np.testing.assert_allclose(fast.logits(ids), logits_for_ids(tiny_variant, ids), atol=1e-4)
    half = FastClassifier(tiny_variant, "cpu", "bf16", "torch")  # bf16 weights: the same logits to bf16 rounding
    assert half.precision == "bf16" and next(half.model.parameters()).dtype == __import__("torch").bfloat16
    np.testing.assert_allclose(half.logits(ids), logits_for_ids(tiny_variant, ids), atol=0.05)
    assert next(tiny_variant.model.parameters()).dtype == __import__("torch").float32  # the shared model stays fp32
    assert tiny_variant.model.config._attn_implementation == "eager"  # the shared model keeps attentions
    assert fast.attention == "sdpa"  # the [CLS]-only last layer
    # a model the recomputation does not follow (a decoder config): its own forward, the same logits
    import dataclasses

    other = dataclasses.replace(tiny_variant, model=__import__("copy").deepcopy(tiny_variant.model))
    other.model.config.is_decoder = True
    own = FastClassifier(other, "cpu", "fp32")
    assert own.attention == "model"
    np.testing.assert_allclose(own.logits(ids), logits_for_ids(other, ids), atol=1e-5)


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no GPU here (CI has none)")
def test_the_gpu_gives_the_cpu_argmax_on_the_demo_genomes():  # pragma: no cover - GPU machines only
    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID
    from bertgeom.sars_cov_2.variant.predict import classify_stream

    loaded = load_model(VARIANT_MODEL_ID)
    recs = [r for r, _ in load_demo_genomes()]
    cpu = [p.predicted for p in classify_stream(loaded, recs)]
    gpu = [p.predicted for p in classify_stream(loaded, recs, device="cuda")]
    assert cpu == gpu


@pytest.mark.parametrize("damage", ["bad_json", "zero_heads", "five_heads", "bad_vocab", "garbage_weights"])
def test_a_broken_variant_model_directory_gives_one_sentence(tiny_variant_dir, tmp_path, damage):
    import json
    import shutil

    from bertgeom.models import ModelLoadError, load_model
    from bertgeom.sars_cov_2.variant import variant_spec

    broken = tmp_path / damage
    shutil.copytree(tiny_variant_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    if damage == "bad_json":
        (broken / "config.json").write_text("{oops")
    elif damage in ("zero_heads", "five_heads"):
        config["num_attention_heads"] = 0 if damage == "zero_heads" else 5
        (broken / "config.json").write_text(json.dumps(config))
    elif damage == "bad_vocab":
        (broken / "kmer_vocab.json").write_text('{"tokens": 3}')
    else:
        (broken / "model.safetensors").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ModelLoadError) as err:
        load_model(variant_spec(broken))
    assert str(broken) in str(err.value) and "\n" not in str(err.value)


def test_evaluate_on_the_shipped_held_out_genomes_reports_bert_rules_and_baseline(tiny_variant_dir, tmp_path):
    import json

    out = tmp_path / "eval.json"
    r = bertgeom_cli("evaluate", "--held-out", "--model", tiny_variant_dir, "--json", out, "--batch-size", "32")
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    # the evaluation genomes: the held-out half less its calibration third (split_calibration)
    assert 180 <= result["model"]["n"] <= 191 and result["rules"]["n"] == result["model"]["n"]
    assert result["rules"]["accuracy"] >= 0.98  # the marker call on real held-out genomes
    assert "baseline" in result and result["baseline"]["n"] == result["model"]["n"]
    bad = bertgeom_cli("evaluate", "--model", tiny_variant_dir)
    assert bad.returncode == 2 and "--held-out" in bad.stderr and "Traceback" not in bad.stderr


def test_nextclade_tsv_and_ndjson_carry_nextclades_columns_and_the_dataset(tiny_variant_dir, tmp_path):
    """``--output-tsv`` / ``--output-ndjson`` write Nextclade's column names, so a pipeline can swap one
    tool for the other: a genome of Nextclade 1.4.1's snapshot gets its substitutions exactly, a
    designated recombinant its lineage and the recombinant column, every row the dataset in use."""
    import json
    import lzma

    from bertgeom.sars_cov_2.genome.fasta import iter_fasta_file
    from bertgeom.sars_cov_2.genome.nextclade_output import TSV_COLUMNS

    data = Path(__file__).parent / "data"
    picks = [r for r in iter_fasta_file(data / "nextclade_1.4.1" / "sequences.fasta.xz") if r.name == "OU186099"]
    picks += [r for r in iter_fasta_file(data / "ncov_recombinant_controls" / "sequences.fasta.xz")
              if r.name == "England/MILK-3729AD6/2022"]  # XE
    fasta = tmp_path / "in.fasta.xz"
    fasta.write_bytes(lzma.compress("".join(f">{r.name}\n{r.sequence}\n" for r in picks).encode()))
    tsv, nd = tmp_path / "out.tsv", tmp_path / "out.ndjson"
    r = _run(fasta, "--model", tiny_variant_dir, "--out", tmp_path / "out.csv", "--output-tsv", tsv,
             "--output-ndjson", nd)
    assert r.returncode == 0, r.stderr
    assert "placed on Nextclade dataset" in r.stderr and "2024-02-16" in r.stderr
    rows = list(csv.DictReader(tsv.open(), delimiter="\t"))
    assert list(rows[0]) == list(TSV_COLUMNS) and [x["seqName"] for x in rows] == ["OU186099", picks[1].name]
    truth = next(t for t in csv.DictReader(open(data / "nextclade_1.4.1" / "nextclade.tsv"), delimiter="\t")
                 if t["seqName"] == "OU186099")
    assert rows[0]["substitutions"] == truth["substitutions"] and rows[0]["clade"] == "20I"
    assert rows[0]["Nextclade_pango"] == "B.1.1.7" and rows[0]["recombinant"] == ""
    assert rows[1]["Nextclade_pango"] == "XE" and rows[1]["recombinant"].startswith("yes")
    assert all("2024-02-16" in x["dataset"] for x in rows)
    # the CSV's reading notes and model beside each row: what the screen says of the input and which weights called it
    table = {x["name"]: x for x in csv.DictReader((tmp_path / "out.csv").open())}
    assert all(x["variant_notes"] == table[x["seqName"]]["notes"] != "" for x in rows)
    assert all(len(x["variant_model"]) >= 8 and x["variant_model"] == table[x["seqName"]]["model_version"]
               for x in rows)
    records = [json.loads(line) for line in nd.read_text().splitlines()]
    assert records[0]["qc"]["overallStatus"] == rows[0]["qc.overallStatus"]
    assert records[0]["substitutions"] == truth["substitutions"].split(",")


def test_a_dataset_that_is_not_one_is_refused_in_one_sentence(tiny_variant_dir, tmp_path, demo_blocks):
    fasta = tmp_path / "in.fasta.gz"
    fasta.write_bytes(demo_blocks[0][1])
    (tmp_path / "ds").mkdir()
    r = _run(fasta, "--model", tiny_variant_dir, "--out", tmp_path / "o.csv", "--dataset", tmp_path / "ds")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("error: --dataset:") and "no tree.json" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and not (tmp_path / "o.csv").exists()
