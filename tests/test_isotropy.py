"""IsoScore and IsoScore* against known answers and against the authors' package."""

import numpy as np
import pytest

from bertgeom.analysis.cone import cone_index
from bertgeom.analysis.isotropy import (
    hidden_state_isoscore_curve,
    isoscore,
    isoscore_from_covariance,
    isoscore_star,
)


def test_isotropic_gaussian_scores_near_one():
    rng = np.random.default_rng(0)
    assert isoscore(rng.standard_normal((20000, 8))) > 0.99


def test_points_on_a_line_score_zero():
    rng = np.random.default_rng(1)
    t = rng.standard_normal(500)
    direction = rng.standard_normal(16)
    assert isoscore(t[:, None] * direction[None, :]) == pytest.approx(0.0, abs=1e-9)


def test_covariance_with_k_equal_variances_uses_k_of_d_dimensions():
    # Variance spread evenly over k of d axes: phi = k/d, so IsoScore = (k - 1) / (d - 1).
    d, k = 10, 4
    cov = np.diag([1.0] * k + [0.0] * (d - k))
    assert isoscore_from_covariance(cov) == pytest.approx((k - 1) / (d - 1))


def test_isoscore_ignores_a_shared_offset_the_cone_index_sees():
    # A shifted isotropic cloud: every vector in one narrow cone, variance still even in every direction.
    rng = np.random.default_rng(2)
    cloud = rng.standard_normal((4000, 6))
    shifted = cloud + 20.0
    assert cone_index(shifted, normalized=True) > 0.95
    assert cone_index(cloud, normalized=True) < 0.05
    assert isoscore(shifted) == pytest.approx(isoscore(cloud), abs=1e-9)


def test_stack_is_scored_layer_by_layer():
    rng = np.random.default_rng(3)
    hs = rng.standard_normal((3, 50, 5))
    hs[1] = hs[1, :, :1] * np.ones(5)  # layer 1 collapses onto one direction
    curve = hidden_state_isoscore_curve(hs)
    assert curve.shape == (3,)
    assert curve[1] == pytest.approx(0.0, abs=1e-9)
    assert curve[0] == pytest.approx(isoscore(hs[0]))
    mask = np.zeros(50, dtype=bool)
    mask[:20] = True
    assert hidden_state_isoscore_curve(hs, mask)[2] == pytest.approx(isoscore(hs[2, :20]))


def test_shrinkage_lifts_an_undersampled_isotropic_cloud():
    rng = np.random.default_rng(4)
    few = rng.standard_normal((10, 40))  # rank 9 < 40 dimensions
    assert isoscore(few) < 0.3
    assert isoscore_star(few, zeta=0.5) > isoscore(few)
    assert isoscore_star(few, zeta=0.0) == pytest.approx(isoscore(few))
    with pytest.raises(ValueError):
        isoscore_star(few, zeta=1.5)


def test_matches_the_authors_package():
    torch = pytest.importorskip("torch")
    package = pytest.importorskip("IsoScore.IsoScore")
    rng = np.random.default_rng(5)
    for scales in ([1, 1, 1, 1, 1], [5, 1, 0.5, 0.1, 0.01], [3, 3, 0.2, 0.2, 0.2]):
        points = rng.standard_normal((800, 5)) * np.array(scales)
        expected = float(package.IsoScore(points))
        assert isoscore(points) == pytest.approx(expected, abs=1e-6)
        C0 = np.eye(5)
        expected_star = float(package.IsoScore_star(points, torch.tensor(C0), 0.3))
        assert isoscore_star(points, zeta=0.3, reference_covariance=C0) == pytest.approx(expected_star, abs=1e-6)
