"""Weight-space geometry, data-space D1-D3, correct vs faithful attention."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.linalg

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bertgeom import attention as att  # noqa: E402
from bertgeom.analysis import subspace as sub  # noqa: E402
from bertgeom.weights import extract_layer_weights  # noqa: E402


def _random_bert(num_heads=3, hidden=24, seed=0, biases=True):
    cfg = transformers.BertConfig(
        vocab_size=50,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=num_heads,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.BertModel(cfg).eval()
    # HF init gives zero biases and near-uniform attention: make weights sharper and biases
    # non-zero so that every term of the computation is exercised.
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.encoder.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_((0.3 if biases else 0.0) * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.4 * torch.randn(p.shape, generator=g))
    return model


def _run(model, T=10, pad_from=7, seed=3):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 50, (2, T), generator=g)
    mask = torch.ones_like(ids)
    mask[1, pad_from:] = 0
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    assert out.attentions is not None and len(out.attentions) == 2
    return out, mask.numpy()


@pytest.fixture(scope="module")
def rbert():
    model = _random_bert()
    out, mask = _run(model)
    return model, extract_layer_weights(model), out, mask


# ------------------------------------------------------------------ correct / faithful attention
@pytest.mark.parametrize("num_heads", [3, 4])
def test_correct_attention_matches_hf(num_heads):
    model = _random_bert(num_heads=num_heads)
    out, mask = _run(model)
    lws = extract_layer_weights(model)
    assert lws[0].head_dim == 24 // num_heads
    for b in range(2):
        for l, lw in enumerate(lws):
            A = att.correct_attention(out.hidden_states[l][b], lw, attention_mask=mask[b])
            ref = out.attentions[l][b].numpy()
            assert A.shape == ref.shape == (num_heads, 10, 10)
            np.testing.assert_allclose(A, ref, atol=1e-5)
    # padding columns get zero weight
    A = att.correct_attention(out.hidden_states[0][1], lws[0], attention_mask=mask[1])
    assert np.all(A[..., 7:] == 0)


def test_faithful_differs_from_correct_with_biases(rbert):
    _, lws, out, mask = rbert
    for l, lw in enumerate(lws):
        X = out.hidden_states[l][1]
        res = sub.compare_faithful_attention(X, lw, attention_mask=mask[1])
        assert res["faithful"].shape == res["correct"].shape == (3, 10, 10)
        np.testing.assert_allclose(res["correct"], out.attentions[l][1].numpy(), atol=1e-5)
        assert res["mean_abs"].shape == (3,)
        assert np.all(res["mean_abs"] > 1e-2)
        assert np.all(res["row_tv"] > 0.05) and np.all(res["max_abs"] >= res["mean_abs"])
        # faithful softmax runs over all positions, padding included
        Af = res["faithful"]
        np.testing.assert_allclose(Af.sum(-1), 1.0, atol=1e-12)
        assert np.all(Af[..., 7:] > 0)


def test_faithful_is_the_transposed_head_without_bias(rbert):
    _, lws, out, _ = rbert
    lw = lws[0]
    X = out.hidden_states[0][0].numpy().astype(np.float64)
    Af = att.faithful_attention(X, lw)
    for h in range(lw.num_heads):
        s = lw.head_slice(h)
        q = X @ lw.W_q[:, s]
        k = X @ lw.W_k[:, s]
        S = q @ k.T / np.sqrt(lw.head_dim)
        P = np.exp(S - S.max(1, keepdims=True))
        P /= P.sum(1, keepdims=True)
        np.testing.assert_allclose(Af[h], P, atol=1e-10)
        Qf, Kf, Vf = att.faithful_qkv(X, lw)
        np.testing.assert_allclose(Vf[h], X @ lw.W_v[:, s], atol=1e-10)


def test_faithful_equals_correct_for_symmetric_unbiased_weights(rbert):
    _, lws, out, _ = rbert
    lw = lws[0]
    sym = lambda W: ((W + W.T) / 2).astype(np.float32)  # noqa: E731
    z = np.zeros_like(lw.b_q)
    lw_s = dataclasses.replace(
        lw, W_q=sym(lw.W_q), W_k=sym(lw.W_k), W_v=sym(lw.W_v), b_q=z, b_k=z, b_v=z
    )
    X = out.hidden_states[0][0]
    res = sub.compare_faithful_attention(X, lw_s)  # no mask
    np.testing.assert_allclose(res["faithful"], res["correct"], atol=1e-12)
    assert np.all(res["mean_abs"] < 1e-12)


def test_project_qkv_matches_linear_layers(rbert):
    model, lws, out, _ = rbert
    X = out.hidden_states[1][0]
    Q, K, V = att.project_qkv(X, lws[1])
    sa = model.encoder.layer[1].attention.self
    with torch.no_grad():
        ref = sa.key(X).numpy()
    np.testing.assert_allclose(np.transpose(K, (1, 0, 2)).reshape(10, 24), ref, atol=1e-5)
    assert Q.shape == V.shape == (3, 10, 8)


# ------------------------------------------------------------------ weight geometry
def test_weight_geometry_matches_brute_force(rbert):
    _, lws, _, _ = rbert
    wg = sub.weight_geometry(lws)
    L, H, dh, d = 2, 3, 8, 24
    assert (wg.n_layers, wg.n_heads, wg.head_dim, wg.d_model) == (L, H, dh, d)
    for name, arr in wg.scalars.items():
        assert arr.shape == (L, H), name
        assert name in sub.WEIGHT_FEATURE_DOCS and len(sub.WEIGHT_FEATURE_DOCS[name]) == 3
    assert wg.spectra["qk_sym_eig"].shape == (L, H, 2 * dh)
    assert wg.spectra["q_sv"].shape == wg.spectra["qk_angles_rad"].shape == (L, H, dh)
    for l, lw in enumerate(lws):
        for h in range(H):
            M, S, N = sub.qk_bilinear(lw, h)
            s = lw.head_slice(h)
            assert np.linalg.matrix_rank(M) <= dh
            nM = np.linalg.norm(M)
            assert wg["qk_norm"][l, h] == pytest.approx(nM, rel=1e-9)
            assert wg["qk_skew_share"][l, h] == pytest.approx(np.linalg.norm(N) / nM, rel=1e-9)
            assert wg["qk_sym_share"][l, h] ** 2 + wg["qk_skew_share"][l, h] ** 2 == pytest.approx(1.0)
            lam = np.linalg.eigvalsh(S)
            tol = 1e-6 * np.abs(lam).max()
            assert wg["qk_sym_pos"][l, h] == (lam > tol).sum()
            assert wg["qk_sym_neg"][l, h] == (lam < -tol).sum()
            assert wg["qk_sym_zero"][l, h] == d - (lam > tol).sum() - (lam < -tol).sum()
            np.testing.assert_allclose(
                np.sort(wg.spectra["qk_sym_eig"][l, h]),
                np.sort(lam[np.argsort(np.abs(lam))[-2 * dh :]]),
                atol=1e-9,
            )
            np.testing.assert_allclose(
                wg.spectra["qk_sv"][l, h], np.linalg.svd(M, compute_uv=False)[:dh], rtol=1e-8
            )
            ang = np.sort(scipy.linalg.subspace_angles(lw.W_q[s].T.astype(float), lw.W_k[s].T.astype(float)))
            np.testing.assert_allclose(wg.spectra["qk_angles_rad"][l, h], ang, atol=1e-8)
            np.testing.assert_allclose(
                wg.spectra["v_sv"][l, h], np.linalg.svd(lw.W_v[s].astype(float), compute_uv=False), rtol=1e-8
            )
            OV = lw.W_o[:, s].astype(float) @ lw.W_v[s].astype(float)
            np.testing.assert_allclose(
                wg.spectra["ov_sv"][l, h], np.linalg.svd(OV, compute_uv=False)[:dh], rtol=1e-8
            )
            u = lw.W_k[s].astype(float).T @ lw.b_q[s].astype(float)
            assert wg["key_prior_norm"][l, h] == pytest.approx(np.linalg.norm(u), rel=1e-6)
            assert wg["q_rank"][l, h] == dh
    # Sylvester's law of inertia: generic heads have signature (dh, dh, d - 2dh)
    assert np.all(wg["qk_sym_pos"] == dh) and np.all(wg["qk_sym_neg"] == dh)
    recs = wg.records()
    assert len(recs) == L * H and recs[0]["layer"] == 0 and "qk_skew_share" in recs[0]


def test_weight_geometry_wq_equals_wk(rbert):
    _, lws, _, _ = rbert
    lw = dataclasses.replace(lws[0], W_k=lws[0].W_q.copy())
    wg = sub.weight_geometry([lw])
    dh, d = lw.head_dim, lw.d_model
    np.testing.assert_allclose(wg["qk_skew_share"], 0.0, atol=1e-7)
    np.testing.assert_allclose(wg.spectra["qk_angles_rad"], 0.0, atol=1e-6)
    np.testing.assert_allclose(wg["qk_overlap"], 1.0, atol=1e-12)
    assert np.all(wg["qk_sym_pos"] == dh) and np.all(wg["qk_sym_neg"] == 0)
    assert np.all(wg["qk_sym_zero"] == d - dh)
    np.testing.assert_allclose(wg["qk_sym_balance"], 1.0, atol=1e-9)
    # W_k = -W_q: symmetric negative semi-definite
    lw2 = dataclasses.replace(lws[0], W_k=-lws[0].W_q)
    wg2 = sub.weight_geometry([lw2])
    assert np.all(wg2["qk_sym_neg"] == dh) and np.all(wg2["qk_sym_pos"] == 0)
    np.testing.assert_allclose(wg2["qk_skew_share"], 0.0, atol=1e-7)


def test_rank_helpers():
    assert sub.effective_rank(np.ones(5)) == pytest.approx(5.0)
    assert sub.effective_rank([3.0, 0.0, 0.0]) == pytest.approx(1.0)
    assert sub.effective_rank(np.zeros(3)) == 0.0
    np.testing.assert_allclose(sub.effective_rank(np.array([[1.0, 1.0], [1.0, 0.0]])), [2.0, 1.0])
    assert sub.numerical_rank([1.0, 1e-2, 1e-9], rtol=1e-3) == 2
    assert sub.numerical_rank([1.0, 1e-2, 1e-9], atol=0.1) == 1
    A = np.random.default_rng(0).standard_normal((6, 4))
    np.testing.assert_allclose(
        sub.principal_angles(A, A @ np.random.default_rng(1).standard_normal((4, 4))), 0.0, atol=1e-7
    )
    e = np.eye(4)
    np.testing.assert_allclose(sub.principal_angles(e[:, :2], e[:, 2:]), [np.pi / 2] * 2, atol=1e-12)


# ------------------------------------------------------------------ data geometry (D1-D3)
def test_rank_one_attention_is_directional():
    n, dh = 12, 4
    rng = np.random.default_rng(0)
    p = rng.random(n)
    p /= p.sum()
    A1 = np.tile(p, (n, 1))  # every query uses the same distribution
    I = np.eye(n)
    A = np.stack([A1, I])[None]  # [1, 2, n, n]
    V = rng.standard_normal((1, 2, n, dh))
    Z = A @ V
    dg = sub.head_data_geometry(A, Z)
    assert dg["attn_rank"][0, 0] == 1 and dg["attn_rank"][0, 1] == n
    assert dg["delta_A"][0, 0] == pytest.approx(1.0, abs=1e-6)
    assert dg["delta_A"][0, 1] == pytest.approx(1 / np.sqrt(n), abs=1e-6)
    assert dg["attn_rank_norm"][0, 0] == pytest.approx(1 / n)
    assert dg["out_energy_top1"][0, 0] == pytest.approx(1.0, abs=1e-6)
    assert dg["delta_out"][0, 0] == pytest.approx(1.0, abs=1e-6)
    assert dg["delta_out"][0, 1] < 1.0
    assert dg.spectra["attn_sv"].shape == (1, 2, n) and dg.spectra["out_sv"].shape == (1, 2, dh)
    for k in dg.scalars:
        assert k in sub.DATA_FEATURE_DOCS


def test_data_geometry_restricts_to_token_set(rbert):
    _, lws, out, mask = rbert
    hs = torch.stack(out.hidden_states)[:, 1]
    att = torch.stack(out.attentions)[:, 1]
    Z = sub.compute_head_outputs(hs, lws, attentions=att)
    Z2 = sub.compute_head_outputs(hs, lws, attention_mask=mask[1])
    np.testing.assert_allclose(Z, Z2, atol=1e-5)
    rows = mask[1].astype(bool)
    dg = sub.head_data_geometry(att, Z, rows=rows)
    assert dg.n_tokens == 7 and dg.spectra["attn_sv"].shape == (2, 3, 7)
    assert np.all(dg["attn_rank"] <= 7)
    assert np.all((dg["delta_A"] > 0) & (dg["delta_A"] <= 1 + 1e-6))
    # without the restriction, padded rows/cols count
    dg_all = sub.head_data_geometry(att, Z)
    assert dg_all.n_tokens == 10
    assert dg_all["attn_rank"].max() <= 7  # padding columns are zero: rank <= #valid keys


# ------------------------------------------------------------------ joint Q/K PCA
def test_joint_qk_pca(rbert):
    _, lws, out, _ = rbert
    Q, K, _ = att.project_qkv(out.hidden_states[0][0], lws[0])
    p1 = sub.joint_qk_pca(Q[0], K[0])
    p2 = sub.joint_qk_pca(Q[0], K[0])
    assert p1.q_coords.shape == (10, 2) and p1.k_coords.shape == (10, 2)
    np.testing.assert_array_equal(p1.q_coords, p2.q_coords)
    assert 0 < p1.explained_variance_ratio.sum() <= 1 + 1e-12
    pn = sub.joint_qk_pca(Q[0], K[0], normalize=True, n_components=3)
    assert pn.normalized and pn.scale > 0 and pn.q_coords.shape == (10, 3)
    # translated keys share the queries' centroid
    np.testing.assert_allclose(pn.q_coords.mean(0), pn.k_coords.mean(0), atol=1e-9)
