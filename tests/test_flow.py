"""Attention rollout and max-flow (Abnar & Zuidema) against a two-layer graph worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.flow import attention_flow, flow_graph, residual_attention, rollout


def _two_layers() -> np.ndarray:
    """[L=2, H=1, T=2, T=2]: layer 1 = [[.5, .5], [0, 1]], layer 2 = [[.2, .8], [.5, .5]]."""
    return np.array([[[[0.5, 0.5], [0.0, 1.0]]], [[[0.2, 0.8], [0.5, 0.5]]]])


def test_flow_on_a_two_layer_graph_worked_by_hand():
    # residual = 1: the graph is the attention alone.  Into (2, 0): (1,0) -> 0.2, (1,1) -> 0.8.
    # From (0,0): only (0,0)->(1,0)->(2,0), narrowest pipe 0.2.  From (0,1): 0.2 via (1,0) + 0.8 via (1,1).
    F = attention_flow(_two_layers(), target=0, residual=1.0, normalize=False)
    np.testing.assert_allclose(F[1], [0.2, 1.0], atol=1e-9)
    np.testing.assert_allclose(F[0], [0.5, 0.5], atol=1e-9)  # after layer 1: the row of layer 1 itself
    # rollout multiplies instead: A2 @ A1 row 0 = [0.1, 0.9]
    np.testing.assert_allclose(rollout(_two_layers(), residual=1.0)[1, 0], [0.1, 0.9], atol=1e-12)


def test_residual_graph_and_edges():
    m = residual_attention(_two_layers(), residual=0.5)
    np.testing.assert_allclose(m[0], [[0.75, 0.25], [0.0, 1.0]])
    np.testing.assert_allclose(m.sum(-1), 1.0)
    g = flow_graph(_two_layers(), residual=0.5)
    assert g[(0, 1)][(1, 0)]["capacity"] == pytest.approx(0.25)
    assert not g.has_edge((0, 0), (1, 1))  # zero weight: no pipe
    # with the residual, flow into (2, 0) from (0, 0): (0,0)->(1,0) .75, (1,0)->(2,0) .6 -> 0.6
    F = attention_flow(_two_layers(), target=0, residual=0.5, normalize=False)
    assert F[1, 0] == pytest.approx(0.6)


def test_flow_bounded_by_rollout_mass_and_layers_subset(minilm):
    from bertgeom.trace import run_trace

    A = run_trace(minilm, "The cat sat on the mat.").attentions
    F = attention_flow(A, target=0, layers=[0, 5], normalize=False)
    assert np.isnan(F[2]).all() and np.isfinite(F[[0, 5]]).all()
    # a flow never exceeds the sink's total in-capacity (each row sums to 1) nor goes negative
    assert (F[[0, 5]] >= -1e-12).all() and (F[[0, 5]] <= 1 + 1e-9).all()
    # after one layer the graph has one edge per pair, so flow = the edge = the rollout entry
    np.testing.assert_allclose(F[0], rollout(A)[0, 0], atol=1e-9)
    with pytest.raises(IndexError):
        attention_flow(A, target=99)


def _networkx_flow(attentions, target, residual=0.5, min_weight=0.0):
    """The earlier implementation: networkx's Edmonds-Karp on :func:`flow_graph`, layer by layer."""
    import networkx as nx
    from networkx.algorithms.flow import edmonds_karp

    L, T = attentions.shape[0], attentions.shape[-1]
    g = flow_graph(attentions, residual, min_weight=min_weight)
    out = np.empty((L, T))
    for l in range(L):
        sub = g.subgraph([(x, y) for x in range(l + 2) for y in range(T)])
        out[l] = [nx.maximum_flow_value(sub, (0, j), (l + 1, target), capacity="capacity", flow_func=edmonds_karp)
                  for j in range(T)]
    return out


@pytest.mark.parametrize("target,residual,min_weight", [(0, 0.5, 0.0), (3, 0.8, 0.0), (5, 0.5, 0.02)])
def test_dense_flow_equals_networkx_max_flow(minilm, target, residual, min_weight):
    from bertgeom.trace import run_trace

    A = run_trace(minilm, "The quick brown fox jumps over the lazy dog near the river bank.").attentions
    np.testing.assert_allclose(attention_flow(A, target=target, residual=residual, min_weight=min_weight,
                                              normalize=False),
                               _networkx_flow(A, target, residual, min_weight), atol=1e-12, rtol=0)


def test_dense_flow_equals_networkx_on_sparse_random_maps():
    rng = np.random.default_rng(3)
    A = rng.random((4, 3, 9, 9)) ** 6  # many near-zero pipes: bottlenecks and reverse edges matter
    A[rng.random(A.shape) < 0.4] = 0.0
    A[..., 0] += 1e-3  # every row keeps some mass
    A /= A.sum(-1, keepdims=True)
    for target in (0, 4):
        np.testing.assert_allclose(attention_flow(A, target=target, residual=1.0, normalize=False),
                                   _networkx_flow(A, target, 1.0), atol=1e-12, rtol=0)


def test_normalised_flow_is_each_layers_raw_flow_over_its_sum_as_the_released_code(minilm):
    """Abnar & Zuidema's released code divides each output node's flow values by their sum."""
    from bertgeom.trace import run_trace

    A = run_trace(minilm, "The cat sat on the mat.").attentions
    raw = attention_flow(A, target=0, normalize=False)
    norm = attention_flow(A, target=0)
    assert raw.sum(axis=1)[-1] > 2.0  # unnormalised, a deep layer's flows add up to several
    np.testing.assert_allclose(norm.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(norm, raw / raw.sum(axis=1, keepdims=True), atol=1e-12)
    independent = _networkx_flow(A, 0, 0.5)
    np.testing.assert_allclose(norm, independent / independent.sum(axis=1, keepdims=True), atol=1e-9)


def test_rollout_row_is_the_row_of_the_full_rollout():
    from bertgeom.analysis.flow import rollout_row

    rng = np.random.default_rng(3)
    A = rng.random((4, 3, 7, 7))
    A /= A.sum(-1, keepdims=True)
    full = rollout(A, residual=0.7)
    for row in (0, 4):
        np.testing.assert_allclose(rollout_row(A, row, residual=0.7), full[:, row, :], rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError):
        rollout_row(A, 7)
