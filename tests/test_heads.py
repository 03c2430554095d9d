"""Per-head attention features: vectorised code vs the loop reference, and hand-computed values."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.reference_heads import reference_names, reference_per_head
from bertgeom.analysis.heads import (
    DEFAULT_DIST_BINS,
    FEATURE_DOCS,
    HeadFeatureTable,
    class_mean_maps,
    feature_doc,
    head_features,
    hist_labels,
)
from bertgeom.tokens import TokenKinds
from bertgeom.attention import softmax


def softmax_maps(rng, L, H, T, scale=2.0, dtype=np.float32):
    return softmax(rng.normal(size=(L, H, T, T)) * scale).astype(dtype)


def assert_matches_reference(attn, kinds, **kw):
    got = head_features(attn, kinds, **kw)
    ref = reference_per_head(attn, kinds, **kw)
    assert got.names == list(ref["features"])
    for name in got.names:
        np.testing.assert_allclose(got[name], ref["features"][name], rtol=1e-9, atol=1e-11, err_msg=name)
    np.testing.assert_allclose(got.hist, ref["hist"], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(got.k90_rows, ref["k90_rows"])
    return got


# ---------------------------------------------------------------------------------------
# agreement with the per-head loop reference
# ---------------------------------------------------------------------------------------


def test_matches_reference_single_segment():
    rng = np.random.default_rng(0)
    kinds = TokenKinds.simple(21, punct_positions=[5, 12])
    assert_matches_reference(softmax_maps(rng, 2, 3, 21), kinds)


def test_matches_reference_pair_input_all_rows_and_wider_window():
    rng = np.random.default_rng(1)
    kinds = TokenKinds.simple(26, sep_positions=[11, 25], punct_positions=[3, 17, 18])
    attn = softmax_maps(rng, 2, 2, 26, scale=3.0, dtype=np.float64)
    t = assert_matches_reference(attn, kinds, rows="all", local_window=2, max_offset=4, local_windows=(1, 3))
    assert t.params["n_segments"] == 2 and t.params["n_query_rows"] == 26
    assert "off_m4" in t.names and "local_3" in t.names
    assert np.all(t["segment_mass"] > 0)


def test_matches_reference_with_padding_and_sparse_maps():
    rng = np.random.default_rng(2)
    toks = ["[CLS]", "a", "b", ".", "c", "d", "e", "[SEP]", "[PAD]", "[PAD]"]
    kinds = TokenKinds.from_tokens(toks)
    attn = softmax_maps(rng, 1, 4, 10, scale=4.0)
    attn[..., 8:] = 0.0  # padded keys get no attention
    attn /= attn.sum(-1, keepdims=True)
    attn[0, 1] = 0.0
    attn[0, 1, :, 7] = 1.0  # an all-to-[SEP] head (no content mass: G7 rows skipped)
    attn[0, 2] = np.eye(10)
    assert_matches_reference(attn, kinds, block_tau=1.5)


def test_chunking_and_threads_do_not_change_results():
    rng = np.random.default_rng(3)
    kinds = TokenKinds.simple(40, sep_positions=[19, 39])
    attn = softmax_maps(rng, 3, 4, 40)
    a = head_features(attn, kinds, n_jobs=1, chunk_mb=1e9)
    b = head_features(attn, kinds, n_jobs=2, chunk_mb=0.01)  # one head per chunk
    for n in a.names:
        np.testing.assert_allclose(a[n], b[n], rtol=1e-12, atol=1e-14, err_msg=n)
    np.testing.assert_array_equal(a.k90_rows, b.k90_rows)
    np.testing.assert_array_equal(a.top_col, b.top_col)
    # float32 vs float64 input of the same values: identical (the float32 sort is exact)
    c = head_features(attn.astype(np.float64), kinds)
    for n in a.names:
        np.testing.assert_allclose(a[n], c[n], rtol=1e-12, atol=1e-14, err_msg=n)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    T=st.integers(4, 14),
    seed=st.integers(0, 10_000),
    scale=st.sampled_from([0.5, 2.0, 6.0, 20.0]),
    rows=st.sampled_from(["content", "all"]),
    w=st.integers(1, 3),
    data=st.data(),
)
def test_matches_reference_property(T, seed, scale, rows, w, data):
    rng = np.random.default_rng(seed)
    seps = sorted(data.draw(st.sets(st.integers(1, T - 1), min_size=0, max_size=2)))
    punct = sorted(data.draw(st.sets(st.integers(1, T - 1), max_size=3)))
    kinds = TokenKinds.simple(T, sep_positions=seps, punct_positions=[p for p in punct if p not in seps])
    if kinds.content.sum() == 0:
        return
    attn = softmax_maps(rng, 1, 2, T, scale=scale)
    assert_matches_reference(attn, kinds, rows=rows, local_window=w)


# ---------------------------------------------------------------------------------------
# hand-computed values
# ---------------------------------------------------------------------------------------


def test_identity_shift_and_uniform_values():
    T = 12
    kinds = TokenKinds.simple(T)
    prev = np.eye(T, k=-1)
    prev[0, 0] = 1.0
    uni = np.full((T, T), 1.0 / T)
    attn = np.stack([np.eye(T), prev, uni])[None]
    t = head_features(attn, kinds)
    nq = T - 2
    # identity
    assert t["self"][0, 0] == pytest.approx(1.0)
    assert t["prev"][0, 0] == 0 and t["next"][0, 0] == 0
    assert t["mean_dist"][0, 0] == 0 and t["k90_median"][0, 0] == 1
    assert t["delta_row"][0, 0] == pytest.approx(1 / math.sqrt(nq))  # orthogonal rows
    eps = 1e-4
    a_hi, a_lo = (1 - eps) + eps / T, eps / T
    h = -(a_hi * math.log(a_hi) + (T - 1) * a_lo * math.log(a_lo))
    assert t["entropy"][0, 0] == pytest.approx(h, rel=1e-12)
    assert t["max_weight"][0, 0] == 1.0 and t["verticality"][0, 0] == pytest.approx(1 / nq)
    # previous-token head
    assert t["prev"][0, 1] == 1.0 and t["bwd"][0, 1] == 1.0 and t["bwd_all"][0, 1] == 1.0
    assert t["signed_offset"][0, 1] == pytest.approx(-1.0) and t["mean_dist"][0, 1] == pytest.approx(1.0)
    assert t["signed_offset_content"][0, 1] == pytest.approx(-1.0)
    assert t["cls"][0, 1] == pytest.approx(1 / nq)  # row 1 reads [CLS]
    assert t["local_1"][0, 1] == 1.0 and t["off_m2"][0, 1] == 0.0
    # uniform head
    assert t["entropy"][0, 2] == pytest.approx(math.log(T), rel=1e-12)
    assert t["entropy_norm"][0, 2] == pytest.approx(1.0)
    assert t["k90_median"][0, 2] == math.ceil(0.9 * T)
    assert t["mean_dist_norm"][0, 2] == pytest.approx(1.0)
    assert t["delta_row"][0, 2] == pytest.approx(1.0)
    assert t["sep"][0, 2] == pytest.approx(1 / T) and t["special"][0, 2] == pytest.approx(2 / T)
    assert t["n_blocks"][0, 2] == 0 and t["block_mass"][0, 2] == 0
    # histogram rows sum to 1 and the self bin is d0
    np.testing.assert_allclose(t.hist.sum(-1), 1.0)
    assert t.hist[0, 0, t.hist_labels.index("d0")] == 1.0
    assert t.hist[0, 1, t.hist_labels.index("d-1")] == 1.0


def test_uniform_distance_matches_closed_form_all_rows():
    """Under uniform attention over all rows mean |j-i| = (n^2 - 1) / (3n) (Guan-style G2)."""
    T = 17
    kinds = TokenKinds.simple(T)
    t = head_features(np.full((1, 1, T, T), 1 / T), kinds, rows="all")
    assert t["mean_dist"][0, 0] == pytest.approx((T * T - 1) / (3 * T))
    assert t["signed_offset"][0, 0] == pytest.approx(0.0, abs=1e-12)


def test_clark_sep_statistics_and_kovaleva_sep_max():
    T = 10
    kinds = TokenKinds.simple(T, sep_positions=[4, 9])
    A = np.zeros((T, T))
    A[:, 4] = 0.25
    A[:, 9] = 0.5
    A[:, 0] = 0.25
    A[4] = 0.0
    A[4, 9] = 1.0  # [SEP] -> [SEP]
    A[9] = 0.0
    A[9, 2] = 1.0  # [SEP] -> content
    t = head_features(A[None, None], kinds)
    assert t["sep_from_sep"][0, 0] == pytest.approx(0.5)  # (1 + 0) / 2
    assert t["sep_from_other"][0, 0] == pytest.approx(0.75)
    assert t["sep"][0, 0] == pytest.approx(0.75) and t["cls"][0, 0] == pytest.approx(0.25)
    assert t["sep_max"][0, 0] == pytest.approx(0.5)
    assert t["content_mass"][0, 0] == 0.0
    assert t["verticality"][0, 0] == pytest.approx(0.5)
    assert t.top_col[0, 0] == 9


def test_block_graph_features():
    """Three uniform blocks of 8 content tokens: 3 components, in-block mass 1."""
    T = 26
    kinds = TokenKinds.simple(T)
    A = np.zeros((T, T))
    for a, b in [(1, 9), (9, 17), (17, 25)]:
        A[a:b, a:b] = 1.0 / 8
    A[0, :] = A[25, :] = 1.0 / T
    t = head_features(A[None, None], kinds)
    assert t["n_blocks"][0, 0] == 3
    assert t["block_inner"][0, 0] == pytest.approx(1.0)
    # per block: 2 end rows see 6 far tokens, 6 inner rows see 5 (|i-j| > 1, j != i)
    assert t["block_mass"][0, 0] == pytest.approx((2 * 6 + 6 * 5) / 64)
    assert t["delta_row"][0, 0] == pytest.approx(1 / math.sqrt(3))
    # threshold above the in-block weight: no edges at all
    t2 = head_features(A[None, None], kinds, block_tau=4.0)
    assert t2["n_blocks"][0, 0] == 0 and t2["block_mass"][0, 0] == 0


def test_k90_counts_largest_entries():
    T = 8
    kinds = TokenKinds.simple(T)
    row = np.array([0.0, 0.5, 0.3, 0.15, 0.05, 0.0, 0.0, 0.0])
    A = np.tile(row, (T, 1))
    t = head_features(A[None, None], kinds)
    assert np.all(t.k90_rows == 3)  # 0.5 + 0.3 + 0.15 = 0.95 >= 0.9
    assert t["k90_frac"][0, 0] == pytest.approx(3 / 8)  # of the 8 real keys k90 counts among ([CLS], [SEP] too)
    t2 = head_features(A[None, None], kinds, k_mass=0.8)
    assert np.all(t2.k90_rows == 2)  # 0.5 + 0.3 reaches 0.8 exactly


def test_promotes_2d_and_3d_and_validates():
    T = 6
    kinds = TokenKinds.simple(T)
    A = np.full((T, T), 1 / T)
    assert head_features(A, kinds).shape == (1, 1)
    assert head_features(np.stack([A, A, A]), kinds).shape == (1, 3)
    with pytest.raises(ValueError):
        head_features(A, TokenKinds.simple(T + 1))
    with pytest.raises(ValueError):
        head_features(np.zeros((2, 2, 3, 4)), kinds)
    with pytest.raises(ValueError):
        head_features(A, kinds, dist_bins=(2, 3))


# ---------------------------------------------------------------------------------------
# token kinds, table API, docs
# ---------------------------------------------------------------------------------------


def test_token_kinds_from_tokens_and_ids():
    toks = ["[CLS]", "hello", ",", "world", "!", "[SEP]", "next", "one", ".", "[SEP]", "[PAD]"]
    k = TokenKinds.from_tokens(toks)
    assert k.is_cls.tolist() == [t == "[CLS]" for t in toks]
    assert k.is_punct.tolist() == [t in (".", ",") for t in toks]
    assert k.content.sum() == 7 and k.is_pad[-1]
    assert k.segment_ids.tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert k.n_segments == 2
    assert TokenKinds.from_tokens(toks, punct="all").is_punct.sum() == 3
    ids = [101, 7592, 1010, 2088, 999, 102, 2279, 2028, 1012, 102, 0]
    k2 = TokenKinds.from_ids(ids, cls_id=101, sep_id=102, pad_id=0, punct_ids=[1010, 1012])
    for name in ("is_cls", "is_sep", "is_punct", "is_pad"):
        np.testing.assert_array_equal(getattr(k, name), getattr(k2, name))
    with pytest.raises(ValueError):
        TokenKinds(np.zeros(3, bool), np.zeros(4, bool), np.zeros(3, bool))


def test_table_rows_matrix_and_mean():
    rng = np.random.default_rng(4)
    kinds = TokenKinds.simple(15)
    t1 = head_features(softmax_maps(rng, 2, 3, 15), kinds)
    t2 = head_features(softmax_maps(rng, 2, 3, 15), kinds)
    rows = t1.to_rows()
    assert len(rows) == 6 and rows[4]["layer"] == 2 and rows[4]["head"] == 2 and rows[4]["name"] == "L2 H2"
    assert rows[4]["prev"] == t1["prev"][1, 1]
    assert isinstance(rows[0]["n_blocks"], int) and "top_col" in rows[0]
    M = t1.matrix(["self", "hist", "entropy"])
    assert M.shape == (6, 2 + len(t1.hist_labels))
    assert t1.columns(["self", "hist"])[1] == t1.hist_labels[0]
    np.testing.assert_array_equal(M[:, 0], t1["self"].ravel())
    m = HeadFeatureTable.mean([t1, t2])
    np.testing.assert_allclose(m["entropy"], (t1["entropy"] + t2["entropy"]) / 2)
    np.testing.assert_allclose(m.std["entropy"], np.abs(t1["entropy"] - t2["entropy"]) / 2)
    assert m.n_examples == 2 and m.k90_rows.shape == (2, 3, 26)
    assert "d0" in m and m["d0"].shape == (2, 3)


def test_every_feature_is_documented():
    t = head_features(np.full((1, 1, 9, 9), 1 / 9), TokenKinds.simple(9))
    for name in t.names + t.hist_labels:
        label, formula, source = feature_doc(name)
        assert label and formula and source
    assert set(FEATURE_DOCS) <= set(t.names)
    assert hist_labels(DEFAULT_DIST_BINS)[0] == "d-33+" and len(hist_labels()) == 15


#: The table's columns with the default parameters, in order (written out in the loop reference).
DEFAULT_COLUMNS = reference_names(max_offset=3, local_windows=(1, 2, 4))


def test_the_registry_keeps_the_column_order_and_refuses_a_second_feature_of_one_name():
    from bertgeom.analysis.heads import HEAD_FEATURES, head_feature

    t = head_features(softmax_maps(np.random.default_rng(5), 1, 2, 12), TokenKinds.simple(12))
    assert t.names == DEFAULT_COLUMNS
    assert all(HEAD_FEATURES[n].doc == FEATURE_DOCS[n] for n in FEATURE_DOCS)
    with pytest.raises(ValueError, match="registered already"):
        head_feature("entropy", ("again", "x", "y"))(lambda chunk: chunk.zeros())


def test_a_new_feature_is_one_registered_function_read_by_the_table_the_docs_and_precompute():
    """One edit adds a metric: the chunk loop computes it, the table, FEATURE_DOCS, feature_doc and the
    precompute configuration (its stored columns) know it; it matches a loop over heads and rows."""
    from bertgeom.analysis.heads import HEAD_FEATURES, head_feature
    from bertgeom.precompute import PrecomputeConfig, PrecomputeError

    with pytest.raises(PrecomputeError, match="diag_max"):
        PrecomputeConfig(features=("diag_max",))

    @head_feature("diag_max", ("strongest self weight", "max_{i in Q} A[i,i]", "a test's own feature"))
    def _diag_max(chunk):
        return np.diagonal(chunk.X, axis1=1, axis2=2)[:, chunk.p.q].max(axis=1)

    try:
        kinds = TokenKinds.simple(17, punct_positions=[4])
        attn = softmax_maps(np.random.default_rng(6), 2, 3, 17)
        t = head_features(attn, kinds, chunk_mb=0.001, n_jobs=2)  # one head per chunk, on threads
        assert t.names[-1] == "diag_max" and t.names[:-1] == DEFAULT_COLUMNS
        q = np.flatnonzero(kinds.content)
        want = [[max(float(attn[l, h, i, i]) for i in q) for h in range(3)] for l in range(2)]
        np.testing.assert_allclose(t["diag_max"], want, rtol=1e-7)
        assert feature_doc("diag_max").formula == "max_{i in Q} A[i,i]"
        assert PrecomputeConfig(features=("diag_max",)).features == ("diag_max",)
    finally:
        del HEAD_FEATURES["diag_max"], FEATURE_DOCS["diag_max"]
    assert "diag_max" not in head_features(attn, kinds).names


def test_class_mean_maps_zeroing_and_threshold_sum():
    T = 6
    kinds = TokenKinds.simple(T, sep_positions=[4])  # [CLS] a b c [SEP] [PAD-like tail]
    a1 = np.full((1, 1, T, T), 1 / T)
    a2 = np.zeros((1, 1, T, T))
    a2[..., 1] = 1.0
    mean, tsum, n = class_mean_maps([a1, a2], [kinds, kinds], theta=0.3)
    assert n == 2
    assert np.all(mean[..., 4:, :] == 0) and np.all(mean[..., :, 4:] == 0)
    assert mean[0, 0, 0, 1] == pytest.approx((1 / T + 1) / 2)
    assert mean[0, 0, 2, 3] == pytest.approx(1 / T / 2)
    assert tsum[0, 0, 0, 1] == 1.0 and tsum[0, 0, 2, 3] == 0.0  # 1/6 < 0.3 is dropped
    mean_s, _, _ = class_mean_maps([a1], kinds, mode="special")
    assert mean_s[0, 0, 5, 5] == pytest.approx(1 / T)  # only [SEP] zeroed
    assert mean_s[0, 0, 4].sum() == 0
    with pytest.raises(ValueError):
        class_mean_maps([a1, np.zeros((1, 1, 5, 5))], kinds)


def test_library_does_not_import_streamlit():
    code = ("import sys, bertgeom.analysis.heads, bertgeom.analysis.patterns, bertgeom.analysis.headsim; "
            "assert 'streamlit' not in sys.modules")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
