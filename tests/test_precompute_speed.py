"""What precompute skips or spreads to be fast: the block graph when no block feature is stored, and
one local worker per --threads cores by default."""

from __future__ import annotations

import argparse

import numpy as np

from bertgeom.analysis.heads import BLOCK_FEATURES, head_features
from bertgeom.attention import softmax
from bertgeom.tokens import TokenKinds


def test_skipping_the_block_graph_changes_no_other_feature():
    rng = np.random.default_rng(5)
    kinds = TokenKinds.simple(40, sep_positions=[39], punct_positions=[7])
    attn = softmax(rng.normal(size=(2, 3, 40, 40)) * 3.0).astype(np.float32)
    full = head_features(attn, kinds, n_jobs=1)
    slim = head_features(attn, kinds, n_jobs=1, blocks=False)
    assert full.names == slim.names
    for name in full.names:
        if name in BLOCK_FEATURES:
            assert np.isnan(slim[name]).all() and np.isfinite(full[name]).all(), name
        else:
            np.testing.assert_array_equal(slim[name], full[name], err_msg=name)


def test_precompute_computes_the_block_graph_only_when_a_block_feature_is_stored(tiny_variant):
    from bertgeom.precompute.core import DEFAULT_FEATURES, PrecomputeConfig, ShardComputer

    assert not set(DEFAULT_FEATURES) & set(BLOCK_FEATURES)
    assert not ShardComputer(tiny_variant, PrecomputeConfig()).needs_blocks
    assert ShardComputer(tiny_variant, PrecomputeConfig(features=("prev", "n_blocks"))).needs_blocks


def test_local_precompute_uses_every_core_by_default(monkeypatch):
    from bertgeom.precompute import cli

    monkeypatch.setattr("bertgeom.runtime.usable_cores", lambda: 4)

    def args(**kw):
        base = dict(workers=None, engine="local", threads=1, device="cpu")
        return argparse.Namespace(**(base | kw))

    assert cli._workers(args()) == 4
    assert cli._workers(args(threads=2)) == 2
    assert cli._workers(args(threads=8)) == 1
    assert cli._workers(args(workers=3)) == 3  # asked for: kept
    assert cli._workers(args(device="cuda")) is None  # a GPU run: one process (the engine's default)
    assert cli._workers(args(engine="ray")) is None  # Ray sizes its own actor pool


def test_local_workers_never_outnumber_the_shards_left(tmp_path, tiny_variant):
    """One shard to do runs in this process: a spawned worker would only add its start-up."""
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.precompute import PrecomputeConfig, load_results, precompute

    recs = [r for r, _ in load_demo_genomes()][:2]
    fasta, labels = tmp_path / "g.fasta", tmp_path / "l.tsv"
    fasta.write_text("".join(f">{r.name}\n{r.sequence}\n" for r in recs))
    labels.write_text("name\tclass\n" + "".join(f"{r.name}\talpha\n" for r in recs))
    precompute(fasta, labels, tmp_path / "out", config=PrecomputeConfig(shard_size=8, maps="none", features=()),
               workers=2, loaded=tiny_variant)
    res = load_results(tmp_path / "out")
    assert len(res.records) == 2
    run = res.manifest["runs"][-1]
    assert (run["workers"], run["workers_used"]) == (2, 1)  # what was asked, and what ran
