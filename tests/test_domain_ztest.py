"""Top-head domain z-test: known p-values, statsmodels agreement, Bonferroni, counts on a real trace."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.domain_ztest import domain_ztest


def test_z_and_p_worked_by_hand():
    # 30/50 vs 20/100: pooled p = 1/3, se = sqrt(1/3 * 2/3 * (1/50 + 1/100)) = 0.0816497, z = 0.4 / se = 4.89898
    t = domain_ztest(np.array([[30.0]]), np.array([[50.0]]), 20, 100)
    assert t.z[0, 0] == pytest.approx(4.898979, rel=1e-6)
    assert t.p[0, 0] == pytest.approx(4.8213e-7, rel=1e-3)
    assert t.significant[0, 0] and t.alpha_heads == pytest.approx(0.05)
    # equal proportions: z = 0, p = 0.5
    t = domain_ztest(np.array([10.0]), np.array([50.0]), 20, 100)
    assert t.z[0] == pytest.approx(0.0) and t.p[0] == pytest.approx(0.5)


def test_matches_statsmodels_on_every_head():
    from statsmodels.stats.proportion import proportions_ztest

    rng = np.random.default_rng(0)
    n1 = rng.integers(5, 400, size=(3, 4)).astype(float)
    x1 = np.floor(n1 * rng.uniform(0, 1, size=n1.shape))
    t = domain_ztest(x1, n1, 37, 420)
    for idx in np.ndindex(x1.shape):
        z, p = proportions_ztest([x1[idx], 37], [n1[idx], 420], alternative="larger")
        assert t.z[idx] == pytest.approx(z, rel=1e-9) and t.p[idx] == pytest.approx(p, rel=1e-9, abs=1e-300)


def test_bonferroni_and_empty_heads():
    # p ≈ 0.0126 passes 0.05 alone but not 0.05 / 72
    x1 = np.zeros((6, 12))
    n1 = np.full((6, 12), 100.0)
    x1[0, 0] = 30  # vs 20% background
    n1[5, 11] = 0  # a head without strong attention
    t = domain_ztest(x1, n1, 200, 1000)
    assert 0.001 < t.p[0, 0] < 0.05 and t.alpha_heads == pytest.approx(0.05 / 72)
    assert not t.significant.any()
    assert np.isnan(t.z[5, 11]) and t.p[5, 11] == 1.0
    assert set(t.rows()) >= {"z", "p_value", "p_bonferroni", "significant"}
    with pytest.raises(ValueError):
        domain_ztest(np.array([5.0]), np.array([3.0]), 1, 10)


def test_domain_counts_on_a_genome(tiny_variant):
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes
    from bertgeom.sets.heads import domain_counts, domain_names
    from bertgeom.trace import run_trace

    rec, _ = load_demo_genomes()[0]
    tr = run_trace(tiny_variant, f">{rec.name}\n{rec.sequence}")
    cnt, tok = domain_counts(tr.attentions, tr.encoded, theta=0.0)
    n_kept = int(np.flatnonzero(tr.encoded.is_sep)[0])  # tokens before the first [SEP]
    assert tok.sum() == n_kept and tok[domain_names(tr.encoded).index("[CLS]")] == 1
    # theta = 0: every kept entry is strong (softmax > 0), so each head counts n_kept rows per kept key
    np.testing.assert_array_equal(cnt, n_kept * tok[None, None, :].repeat(cnt.shape[0], 0).repeat(cnt.shape[1], 1))
    strong, _ = domain_counts(tr.attentions, tr.encoded, theta=0.3)
    assert (strong <= cnt).all()
