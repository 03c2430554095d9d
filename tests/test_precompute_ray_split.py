"""Precompute split in two (#15 item 3): ``prepare_shard`` (parse, align, tokenise; CPU, no model)
and ``ShardComputer.forward_shard`` (model). The Ray engine's split mode runs the first as Ray CPU
tasks feeding model actors (GPU actors on a GPU cluster); on the CPU it must write the same bytes
as the local engine, with a bounded number of shards in flight.

Same tiny model, 20 shipped genomes + 1 protein record and shards of 8 as tests/test_precompute.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_precompute import SHARD, _assert_same_results, _run, inputs, local1  # noqa: F401 (fixtures)

from bertgeom.precompute import PrecomputeError, load_results
from bertgeom.precompute.core import PREPARED_COLUMNS, prepare_shard


def test_prepare_gives_todays_error_rows_and_plain_arrays(tiny_variant, local1, tmp_path):  # noqa: F811
    from bertgeom.sars_cov_2.genome.fasta import RecordError, iter_fasta_file
    from bertgeom.sars_cov_2.genome.pipeline import analyse_sequence
    from bertgeom.precompute.core import shard_input
    from bertgeom.sars_cov_2.variant.spec import genome_set

    good = genome_set()[0]
    fasta = tmp_path / "three.fasta"
    fasta.write_text(good.text + "\n>not_a_genome\nMKFLVLLPLVSSQCVNLTTRTQLPPAYTNSFTRGVYYPDKVF\n>short\nACGTACGTAC\n")
    records = list(iter_fasta_file(fasta))  # as the driver reads them: the protein is a RecordError
    assert isinstance(records[1], RecordError)
    shard = shard_input(5, 40, records, {good.name: good.label, "short": "alpha"}, tiny_variant.spec.input_kind)
    prep = prepare_shard(shard, tiny_variant.tokenizer, tiny_variant.max_tokens)

    cols = prep.columns  # the generic columns and the genome kind's own (its PrecomputeSpec.columns)
    genome_columns = {"qc", "qc_reasons", "n_mutations", "unk_rate"}
    assert set(cols) == set(PREPARED_COLUMNS) | genome_columns
    assert prep.n_records == 3 and (prep.shard, prep.start) == (5, 40)
    assert cols["name"] == [good.name, "not_a_genome", "short"] and cols["label"] == [good.label, "", "alpha"]
    # the error column as the library gives it, and as the local engine stored it for the same record
    vocab, limit = tiny_variant.tokenizer, tiny_variant.max_tokens
    want = [analyse_sequence(r, vocab=vocab, max_length=limit).error for r in records]
    assert want[0] is None and all(want[1:]) and cols["error"] == ["", *want[1:]]
    stored = load_results(local1).records.set_index("name")
    assert stored.loc["not_a_genome", "error"] == cols["error"][1]
    for c in ("qc", "qc_reasons", "n_mutations", "unk_rate", "n_tokens"):
        assert cols[c][1] is None and cols[c][2] is None, c  # no analysis -> empty cells, as before
    # only the good record is tokenised: plain int64 ids and uint8 kind bits, cheap to ship
    assert prep.rows.tolist() == [0] and prep.ids.dtype == np.int64 and prep.kinds.dtype == np.uint8
    assert prep.bounds.tolist() == [0, cols["n_tokens"][0]] == [0, len(prep.ids)]
    (i, tok), = prep.tokens()
    a = analyse_sequence(records[0], vocab=tiny_variant.tokenizer, max_length=tiny_variant.max_tokens)
    assert i == 0 and np.array_equal(tok.input_ids, a.token_ids[: tok.n_tokens])
    assert tok.is_cls[0] and tok.is_sep[-1] and tok.content_mask.sum() == tok.n_tokens - 2
    assert stored.loc[good.name, "n_tokens"] == tok.n_tokens and stored.loc[good.name, "qc"] == cols["qc"][0]


def test_ray_split_prepare_on_cpu_writes_the_local_engine_bytes(inputs, tiny_variant, local1, tmp_path,  # noqa: F811
                                                              monkeypatch):
    pytest.importorskip("ray", reason="Ray is optional: pip install -r requirements-cluster.txt")
    import bertgeom.precompute.run as run_mod

    # count the shard payloads the engine has pulled: a window of 2 must keep at most 2 in flight
    pulled, done, worst = [0], [0], [0]
    payloads = run_mod._shard_payloads

    def counted(*a, **kw):
        for item in payloads(*a, **kw):
            pulled[0] += 1
            yield item

    def on_shard(_shard):
        worst[0] = max(worst[0], pulled[0] - done[0])
        done[0] += 1

    monkeypatch.setattr(run_mod, "_shard_payloads", counted)
    out = tmp_path / "ray_split"
    # one model actor + one alignment CPU (the local instance gets 1 x 1 + 1 CPUs); 3 shards > window 2
    summary = _run(inputs, out, tiny_variant, engine="ray", workers=1, on_shard=on_shard,
                   engine_kwargs={"split_prepare": True, "window": 2})
    assert summary.status == "complete" and summary.shards_computed == 3 == done[0] == pulled[0]
    assert 1 <= worst[0] <= 2
    run = load_results(out).manifest["runs"][-1]
    assert run["engine"] == "ray" and run["split_prepare"] is True and run["device"] == "cpu"
    _assert_same_results(local1, out)  # parquet and cls.npy byte for byte, class maps bit for bit


def test_split_mode_is_chosen_with_gpus_and_leaves_cpus_for_alignment(tiny_variant):
    pytest.importorskip("ray", reason="Ray is optional: pip install -r requirements-cluster.txt")
    from bertgeom.precompute import PrecomputeConfig, ShardComputer
    from bertgeom.precompute.engines import RayEngine

    assert RayEngine()._split("cuda") and not RayEngine()._split("cpu")
    assert RayEngine(split_prepare=True)._split("cpu") and not RayEngine(split_prepare=False)._split("cuda")
    # every CPU held by a model actor would leave the alignment tasks waiting forever: refused up front
    eng = RayEngine(workers=2, split_prepare=True)
    comp = ShardComputer(tiny_variant, PrecomputeConfig(shard_size=SHARD))
    with pytest.raises(PrecomputeError, match="fewer --workers"):
        eng._run_split(comp, "unused", iter(()), lambda *a: None, cpus=2.0, gpus=0.0)


def test_cli_split_flag_needs_the_ray_engine(inputs, tiny_variant_dir, tmp_path, capsys):  # noqa: F811
    from bertgeom.__main__ import main

    rc = main(["precompute", str(inputs[0]), str(inputs[1]), "--out", str(tmp_path / "o"), "--quiet",
               "--model", str(tiny_variant_dir), "--ray-split-prepare"])
    assert rc == 2 and "--engine ray" in capsys.readouterr().err
