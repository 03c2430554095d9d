"""Cone index, token sets, streams (vs HF module outputs) and attention entropies."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis import cone as cone

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bertgeom.attention import faithful_attention, faithful_qkv  # noqa: E402
from bertgeom.weights import extract_layer_weights  # noqa: E402


# ------------------------------------------------------------------ cone index
def test_identical_vectors_give_m():
    x = np.random.default_rng(0).standard_normal(7)
    X = np.tile(x, (12, 1)) * np.arange(1, 13)[:, None]  # same ray, different lengths
    assert cone.cone_index(X) == pytest.approx(12.0, rel=1e-12)
    assert cone.cone_index(X, normalized=True) == pytest.approx(1.0, rel=1e-12)


def test_orthonormal_vectors_give_sqrt_m():
    m = 16
    Q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((32, m)))
    X = Q.T * 3.0  # m orthogonal rows in R^32
    assert cone.cone_index(X) == pytest.approx(np.sqrt(m), rel=1e-12)
    assert cone.cone_index(np.eye(512)) == pytest.approx(22.627, abs=1e-3)
    assert cone.isotropic_reference(m) == pytest.approx(4.0)
    # i.i.d. isotropic cloud ~ sqrt(m)
    G = np.random.default_rng(2).standard_normal((512, 768))
    assert cone.cone_index(G) == pytest.approx(np.sqrt(512), rel=0.25)


def test_zero_rows_mask_batching_and_torch_input():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4, 5, 10, 6)).astype(np.float32)
    X[0, 0, 3] = 0.0  # a zero row is skipped
    ref = np.empty((4, 5))
    for i in range(4):
        for j in range(5):
            Y = X[i, j].astype(np.float64)
            Y = Y[np.linalg.norm(Y, axis=1) > 0]
            ref[i, j] = np.linalg.norm((Y / np.linalg.norm(Y, axis=1, keepdims=True)).sum(0))
    np.testing.assert_allclose(cone.cone_index(X), ref, rtol=1e-5)
    np.testing.assert_allclose(cone.cone_index(torch.from_numpy(X)), ref, rtol=1e-5)
    # per-sequence masks broadcast over layers
    mask = np.ones((4, 1, 10), bool)
    mask[1, 0, 6:] = False
    got = cone.cone_index(X, mask)
    np.testing.assert_allclose(got[1], cone.cone_index(X[1, :, :6]), rtol=1e-6)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-5)
    # normalised: divided by the number of counted rows
    nrm = cone.cone_index(X, mask, normalized=True)
    assert nrm[1, 0] == pytest.approx(got[1, 0] / 6, rel=1e-6)
    assert nrm[0, 0] == pytest.approx(got[0, 0] / 9, rel=1e-6)
    # all-zero input
    assert cone.cone_index(np.zeros((3, 4))) == 0.0
    assert np.isnan(cone.cone_index(np.zeros((3, 4)), normalized=True))


def test_raw_variant():
    x = np.array([1.0, 2.0, 2.0])
    X = np.stack([x, 2 * x, -0.5 * x])
    assert cone.cone_index(X, raw=True) == pytest.approx(2.5 * 3.0)
    assert cone.cone_index(X, raw=True, normalized=True) == pytest.approx(2.5 / 3.5)
    assert cone.cone_index(X) == pytest.approx(1.0)  # 1 + 1 - 1


def test_token_mask():
    am = np.array([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
    c = cone.token_mask(am)
    np.testing.assert_array_equal(c[0], [0, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(c[1], [0, 1, 1, 1, 1, 1, 0])
    cc = cone.token_mask(am, "content+cls")
    np.testing.assert_array_equal(cc[0], [1, 1, 1, 1, 0, 0, 0])
    assert cone.token_mask(am, "all").all()
    stm = np.array([1, 0, 0, 1, 0, 1, 1])  # a second [SEP] in the middle
    np.testing.assert_array_equal(
        cone.token_mask(am[0], special_tokens_mask=stm), [0, 1, 1, 0, 1, 0, 0]
    )
    with pytest.raises(ValueError):
        cone.token_mask(am, "bogus")
    X = np.arange(14.0).reshape(7, 2)
    assert cone.select_rows(X, c[0]).shape == (3, 2)


# ------------------------------------------------------------------ streams vs HF modules
def _random_bert():
    cfg = transformers.BertConfig(
        vocab_size=50,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.encoder.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.4 * torch.randn(p.shape, generator=g))
    return model


@pytest.fixture(scope="module")
def traced():
    model = _random_bert()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 50, (2, 10), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    cap = {}
    hooks = []
    for l, layer in enumerate(model.encoder.layer):
        hooks.append(
            layer.attention.output.register_forward_hook(
                lambda mod, i, o, l=l: cap.__setitem__(("U", l), o.detach().clone())
            )
        )
        hooks.append(
            layer.attention.self.register_forward_hook(
                lambda mod, i, o, l=l: cap.__setitem__(
                    ("ctx", l), (o[0] if isinstance(o, tuple) else o).detach().clone()
                )
            )
        )
    try:
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    return model, extract_layer_weights(model), out, mask.numpy(), cap


def test_streams_match_hf_modules(traced):
    _, lws, out, mask, cap = traced
    for b in range(2):
        for l, lw in enumerate(lws):
            X = out.hidden_states[l][b]
            s = cone.layer_streams(X, lw, attention_mask=mask[b])
            np.testing.assert_allclose(s["attention"], out.attentions[l][b].numpy(), atol=1e-5)
            # post-attention sublayer U = HF attention.output
            np.testing.assert_allclose(s["post_attention"], cap[("U", l)][b].numpy(), atol=1e-5)
            # head outputs from the true attention reproduce the context layer
            ctx = np.transpose(s["head_output"], (1, 0, 2)).reshape(10, -1)
            np.testing.assert_allclose(ctx, cap[("ctx", l)][b].numpy(), atol=1e-5)
            # MLP recomputation reproduces the layer output
            np.testing.assert_allclose(s["layer_output"], out.hidden_states[l + 1][b].numpy(), atol=1e-5)
            # same with the model's attention passed in
            s2 = cone.layer_streams(X, lw, attention=out.attentions[l][b], faithful=False)
            np.testing.assert_allclose(s2["post_attention"], cap[("U", l)][b].numpy(), atol=1e-5)
            assert "multihead_faithful" not in s2


def test_faithful_multihead_stream(traced):
    _, lws, out, _, _ = traced
    lw = lws[1]
    X = out.hidden_states[1][1]
    s = cone.layer_streams(X, lw)
    Af = faithful_attention(X, lw)
    _, _, Vf = faithful_qkv(X, lw)
    Zf = np.concatenate(list(Af @ Vf), axis=1)  # [T, H*dh]
    ln = torch.nn.LayerNorm(24, eps=lw.ln1_eps).double()  # fresh, with the config's eps, as the official code
    ref = ln(torch.from_numpy(X.numpy().astype(np.float64) + Zf)).detach().numpy()
    np.testing.assert_allclose(s["multihead_faithful"], ref, atol=1e-10)
    np.testing.assert_allclose(s["head_output_faithful"], Af @ Vf, atol=1e-12)
    assert not np.allclose(s["head_output_faithful"], s["head_output"], atol=1e-3)


def test_stream_cone_indices(traced):
    _, lws, out, mask, _ = traced
    hs = torch.stack(out.hidden_states)[:, 1]  # [L+1, T, d]
    att = torch.stack(out.attentions)[:, 1]
    rows = cone.token_mask(mask[1])
    sc = cone.stream_cone_indices(hs, lws, attention_mask=mask[1], rows=rows, normalized=True)
    sc2 = cone.stream_cone_indices(hs, lws, attentions=att, rows=rows, normalized=True)
    assert sc.m == 5
    assert sc.layer_input.shape == sc.post_attention.shape == sc.multihead_faithful.shape == (2,)
    assert sc.head_output.shape == sc.head_output_faithful.shape == (2, 3)
    assert sc.hidden.shape == (3,)
    for k, v in sc.as_dict().items():
        np.testing.assert_allclose(v, sc2.as_dict()[k], atol=1e-5)
        assert np.all((v > 0) & (v <= 1 + 1e-9)), k
    for l in range(2):
        assert sc.layer_input[l] == pytest.approx(cone.cone_index(hs[l][rows], normalized=True), rel=1e-6)
        assert sc.layer_output[l] == pytest.approx(sc.hidden[l + 1], rel=1e-12)
    curve = cone.hidden_state_cone_curve(torch.stack(out.hidden_states, 1), cone.token_mask(mask))
    assert curve.shape == (2, 3)
    np.testing.assert_allclose(curve[1], sc.hidden * sc.m, rtol=1e-5)
    sc_all = cone.stream_cone_indices(hs, lws, attention_mask=mask[1], faithful=False)
    assert sc_all.m == 10 and sc_all.multihead_faithful is None


# ------------------------------------------------------------------ entropies
def test_entropies_reference_values():
    n = 8
    I = np.eye(n)
    p = np.full(n, 1 / n)
    R1 = np.tile(np.random.default_rng(0).dirichlet(np.ones(n)), (n, 1))
    U = np.tile(p, (n, 1))
    # identity: |lambda| = 1 -> p = 1/sqrt(n) under the code's L2 normalisation
    assert cone.von_neumann_entropy_code(I) == pytest.approx(np.sqrt(n) * 0.5 * np.log(n))
    assert cone.von_neumann_entropy_l1(I) == pytest.approx(np.log(n))
    assert cone.singular_value_entropy(I) == pytest.approx(np.log(n))
    # rank one: a single non-zero eigenvalue
    assert cone.von_neumann_entropy_code(R1) == pytest.approx(0.0, abs=1e-6)
    assert cone.singular_value_entropy(R1) == pytest.approx(0.0, abs=1e-9)
    assert cone.mean_row_entropy(U) == pytest.approx(np.log(n))
    assert cone.mean_row_entropy(U, normalize=True) == pytest.approx(1.0)
    assert cone.mean_row_entropy(I) == pytest.approx(0.0)
    rows = np.array([1, 1, 1, 1, 0, 0, 0, 0], bool)
    assert cone.mean_row_entropy(U, rows) == pytest.approx(np.log(4))
    # Shannon over 20 value bins: identity has two values (n^2 - n zeros, n ones)
    q = 1 / n
    assert cone.shannon_value_entropy_code(I) == pytest.approx(-(q * np.log(q) + (1 - q) * np.log(1 - q)))
    assert cone.shannon_value_entropy_code(U) == pytest.approx(0.0)  # constant matrix


def test_shannon_matches_pandas_cut():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    A = rng.random((3, 16, 16)).astype(np.float32)
    A[0, 0, :4] = np.linspace(A[0].min(), A[0].max(), 21)[[0, 5, 10, 20]]  # values on bin edges
    A[1, :8] = 0.0
    for a in A:
        counts = pd.cut(a.reshape(-1), 20).value_counts().to_numpy()
        pr = counts / a.size
        ref = -(pr[pr > 0] * np.log(pr[pr > 0])).sum()
        assert cone.shannon_value_entropy_code(a) == pytest.approx(ref, rel=1e-12)


def test_attention_entropies_vectorised(traced):
    _, _, out, mask, _ = traced
    A = torch.stack(out.attentions)[:, 1].numpy()  # [L, H, T, T]
    rows = mask[1].astype(bool)
    ent = cone.attention_entropies(A, rows, dtype=np.float64)
    assert set(ent) == set(cone.ENTROPY_DOCS)
    for k, v in ent.items():
        assert v.shape == (2, 3), k
    Ar = A[..., rows, :][..., :, rows]
    for l in range(2):
        for h in range(3):
            assert ent["vn_code"][l, h] == pytest.approx(cone.von_neumann_entropy_code(Ar[l, h]), rel=1e-8)
            assert ent["vn_l1"][l, h] == pytest.approx(cone.von_neumann_entropy_l1(Ar[l, h]), rel=1e-8)
            assert ent["shannon_code"][l, h] == pytest.approx(cone.shannon_value_entropy_code(Ar[l, h]))
            assert ent["row_entropy"][l, h] == pytest.approx(cone.mean_row_entropy(A[l, h], rows))
    assert np.all(ent["row_entropy"] <= np.log(7) + 1e-9)
