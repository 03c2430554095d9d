"""Rank collapse (Dong 2021), the projection kernel between heads (Yamagiwa 2026), head confidence
(Voita 2019) and head importance (Michel 2019), each checked against an independent implementation
written here (the transformers model's own forward with plain hooks, and numpy/scipy loops), on the
tiny random BERT and on MiniLM, to 1e-6 in fp32; and the properties the papers state."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.analysis.collapse import PATH_VARIANTS, rank_collapse_curves, relative_residual
from bertgeom.analysis.gradients import head_importance, masked_positions, normalise_per_layer
from bertgeom.analysis.head_affinity import (PAIR_TYPES, head_bases, projection_kernel, projection_kernel_map,
                                             random_baseline)

SENTENCES = ["The quick brown fox jumps over the lazy dog near the river bank.",
             "Attention heads in BERT often look at the separator token."]


def _encode(loaded, text):
    from bertgeom.inputs import encode_input

    return encode_input(loaded, text)


# --- independent references --------------------------------------------------------------------

def _ratio_loops(X: np.ndarray) -> float:
    """Dong's ratio of one token matrix, written out: row mean, then the two matrix norms."""
    X = X.astype(np.float64)
    mean = X.mean(axis=0)
    R = X - mean

    def composite(M):
        col = max(abs(M[:, j]).sum() for j in range(M.shape[1]))
        row = max(abs(M[i, :]).sum() for i in range(M.shape[0]))
        return np.sqrt(col * row)

    return composite(R) / composite(X)


def _hidden_with_hooks(loaded, ids, no_skips: bool, no_mlps: bool) -> np.ndarray:
    """``[L+1, T, D]`` hidden states of transformers' own forward, its modules rewired as in the
    authors' surgery: forward hooks give the attention output and the MLP output without their
    residual input, and the MLP's two modules are swapped for the identity (an instance ``forward``,
    removed afterwards)."""
    import torch

    model = loaded.model
    handles, swapped = [], []
    for layer in model.base_model.encoder.layer:
        if no_skips:
            so = layer.attention.output
            handles.append(so.register_forward_hook(lambda m, args, out: m.LayerNorm(m.dense(args[0]))))
        if no_mlps:
            for mod in (layer.intermediate, layer.output):
                mod.forward = lambda h, *rest, **kw: h
                swapped.append(mod)
        elif no_skips:
            handles.append(layer.output.register_forward_hook(lambda m, args, out: m.LayerNorm(m.dense(args[0]))))
    try:
        with torch.inference_mode():
            out = model(input_ids=torch.as_tensor(ids[None]), output_hidden_states=True, return_dict=True)
    finally:
        for h in handles:
            h.remove()
        for mod in swapped:
            del mod.forward
    return torch.stack(out.hidden_states, 1)[0].numpy()


def _importance_with_hooks(loaded, ids, *, target=None, masked=None):
    """``|dL/dξ|`` with gates multiplied into each head's slice of the context by a pre-hook on
    ``attention.output.dense`` of transformers' own forward; the loss written here."""
    import torch
    import torch.nn.functional as F

    model = loaded.model
    layers = model.base_model.encoder.layer
    H = int(layers[0].attention.self.num_attention_heads)
    dh = int(layers[0].attention.self.attention_head_size)
    gates = torch.ones((len(layers), H), requires_grad=True)
    handles = []
    for l, layer in enumerate(layers):
        def pre(m, args, l=l):
            ctx = args[0]
            g = gates[l].repeat_interleave(dh)
            return (ctx * g,) + tuple(args[1:])
        handles.append(layer.attention.output.dense.register_forward_pre_hook(pre))
    try:
        with torch.enable_grad():
            fed = ids if masked is None else np.where(masked, loaded.tokenizer.mask_token_id, ids)
            x = torch.as_tensor(fed[None])
            out = model(input_ids=x, return_dict=True, output_hidden_states=True)
            if masked is None:
                logits = out.logits[0]
                y = int(logits.argmax()) if target is None else int(target)
                loss = F.cross_entropy(logits[None], torch.tensor([y]))
            else:
                h = out.hidden_states[-1][0]
                E = model.base_model.embeddings.word_embeddings.weight
                lp = torch.log_softmax(h @ E.T, dim=-1)
                pos = np.flatnonzero(masked)
                loss = -torch.stack([lp[i, int(ids[i])] for i in pos]).mean()
            (g,) = torch.autograd.grad(loss, gates)
    finally:
        for hd in handles:
            hd.remove()
    return g.abs().numpy()


# --- rank collapse ---------------------------------------------------------------------------

def test_residual_of_a_rank_one_matrix_is_zero_and_of_a_spread_one_is_not():
    rng = np.random.default_rng(0)
    x = rng.normal(size=16)
    same_rows = np.ones((9, 1)) * x[None, :]  # 1 xᵀ: rank 1, every row equal
    assert relative_residual(same_rows) == pytest.approx(0.0, abs=1e-12)
    assert relative_residual(same_rows, norm="fro") == pytest.approx(0.0, abs=1e-12)
    spread = rng.normal(size=(9, 16))
    assert 0.3 < relative_residual(spread) <= 1.5
    assert relative_residual(spread, norm="fro") <= 1.0 + 1e-12  # the mean is the Frobenius optimum
    # a row mask reads only its rows: the equal rows plus padding that is ignored
    padded = np.concatenate([same_rows, rng.normal(size=(3, 16))])
    assert relative_residual(padded, np.r_[np.ones(9, bool), np.zeros(3, bool)]) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("which", ["tiny_bert", "minilm"])
def test_rank_collapse_matches_hooks_and_numpy(which, request):
    loaded = request.getfixturevalue(which)
    enc = _encode(loaded, SENTENCES[0])
    curves = rank_collapse_curves(loaded, enc.input_ids)
    assert set(curves) == set(PATH_VARIANTS)
    for name, (no_skips, no_mlps) in PATH_VARIANTS.items():
        hs = _hidden_with_hooks(loaded, enc.input_ids, no_skips, no_mlps)
        ref = np.array([_ratio_loops(h) for h in hs])
        np.testing.assert_allclose(curves[name], ref, atol=1e-6, err_msg=name)
    # the embeddings are the same input to every variant
    assert len({round(float(c[0]), 9) for c in curves.values()}) == 1


def test_rank_collapse_batch_with_padding_equals_one_by_one(minilm):
    encs = [_encode(minilm, s) for s in SENTENCES]
    T = max(e.n_tokens for e in encs)
    ids = np.zeros((2, T), np.int64)
    mask = np.zeros((2, T), np.int64)
    for b, e in enumerate(encs):
        ids[b, :e.n_tokens] = e.input_ids
        mask[b, :e.n_tokens] = 1
    batch = rank_collapse_curves(minilm, ids, mask, variants=("full", "attention_only"))
    for b, e in enumerate(encs):
        one = rank_collapse_curves(minilm, e.input_ids, variants=("full", "attention_only"))
        for k in one:
            np.testing.assert_allclose(batch[k][b], one[k], atol=1e-6)


# --- projection kernel -----------------------------------------------------------------------

def test_projection_kernel_properties():
    rng = np.random.default_rng(1)
    d, p = 48, 6
    U = np.linalg.qr(rng.normal(size=(d, p)))[0]
    assert projection_kernel(U, U) == pytest.approx(p)  # a subspace with itself: its dimension
    Q = np.linalg.qr(rng.normal(size=(d, 2 * p)))[0]
    assert projection_kernel(Q[:, :p], Q[:, p:]) == pytest.approx(0.0, abs=1e-12)  # orthogonal subspaces
    # invariant to the basis chosen: a rotated basis of the same subspace
    R = np.linalg.qr(rng.normal(size=(p, p)))[0]
    V = np.linalg.qr(rng.normal(size=(d, p)))[0]
    assert projection_kernel(U @ R, V) == pytest.approx(projection_kernel(U, V))
    # the random baseline p q / d: the mean over many random pairs
    draws = np.linalg.qr(rng.normal(size=(4000, d, p)))[0]
    mean = projection_kernel(draws[:2000], draws[2000:]).mean()
    assert mean == pytest.approx(random_baseline(p, p, d), rel=0.05)
    assert random_baseline(64, 64, 768) == pytest.approx(5.333, abs=1e-3)


def _pk_reference(lws, a_kind, b_kind, pairs):
    """PK by principal angles, pair by pair, from the raw weight slices: an orthonormal basis of each
    block by QR, the cosines of the principal angles as the singular values of Uᵀ V."""

    def block(lw, h, kind):
        s = lw.head_slice(h)
        return {"Q": lw.W_q[s, :].T, "K": lw.W_k[s, :].T, "V": lw.W_v[s, :].T, "O": lw.W_o[:, s]}[kind]

    H = lws[0].num_heads
    out = []
    for i, j in pairs:
        A = block(lws[i // H], i % H, a_kind).astype(np.float64)
        B = block(lws[j // H], j % H, b_kind).astype(np.float64)
        cosines = np.linalg.svd(np.linalg.qr(A)[0].T @ np.linalg.qr(B)[0], compute_uv=False)
        out.append(float((cosines ** 2).sum()))
    return np.array(out)


@pytest.mark.parametrize("which", ["tiny_bert", "minilm"])
def test_projection_kernel_map_matches_principal_angles(which, request):
    from bertgeom.weights import extract_layer_weights

    loaded = request.getfixturevalue(which)
    lws = extract_layer_weights(loaded.model)
    N = len(lws) * lws[0].num_heads
    rng = np.random.default_rng(2)
    pairs = [(i, j) for i in range(N) for j in range(N)] if N <= 16 else \
        [tuple(p) for p in rng.integers(0, N, size=(40, 2))] + [(i, i) for i in range(0, N, 9)]
    types = PAIR_TYPES if N <= 16 else {k: PAIR_TYPES[k] for k in ("OQ", "OV", "KK")}  # MiniLM: a sample
    for pair, (a, b) in types.items():
        M = projection_kernel_map(lws, pair)
        assert M.shape == (N, N)
        ref = _pk_reference(lws, a, b, pairs)
        np.testing.assert_allclose([M[i, j] for i, j in pairs], ref, atol=1e-6, err_msg=pair)
        if a == b:  # each head with itself: its head dimension (full-rank heads)
            np.testing.assert_allclose(np.diag(M), lws[0].head_dim, atol=1e-6)
            np.testing.assert_allclose(M, M.T, atol=1e-9)
    bases = head_bases(lws, "Q")
    assert bases.shape == (len(lws), lws[0].num_heads, lws[0].d_model, lws[0].head_dim)


# --- head confidence -------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["tiny_bert", "minilm"])
def test_head_confidence_is_voitas_mean_max_weight(which, request):
    import torch

    from bertgeom.analysis.heads import FEATURE_DOCS, head_features

    loaded = request.getfixturevalue(which)
    enc = _encode(loaded, SENTENCES[1])
    with torch.inference_mode():
        out = loaded.model(input_ids=torch.as_tensor(enc.input_ids[None]), output_attentions=True)
    attn = torch.stack(out.attentions, 1)[0].numpy()  # [L, H, T, T]
    table = head_features(attn, enc.kinds)
    content = enc.content_mask
    L, H = attn.shape[:2]
    ref = np.array([[np.mean([attn[l, h, i].max() for i in np.flatnonzero(content)]) for h in range(H)]
                    for l in range(L)])
    np.testing.assert_allclose(table["max_weight"], ref, atol=1e-6)
    # and through the library's own path: its forward engine's trace, its per-head table
    import bertgeom

    tr = bertgeom.trace(loaded, SENTENCES[1])
    assert list(tr.encoded.input_ids) == list(enc.input_ids)
    np.testing.assert_allclose(tr.head_features()["max_weight"], ref, atol=1e-6)
    assert "Voita" in FEATURE_DOCS["max_weight"].source and "confidence" in FEATURE_DOCS["max_weight"].label


# --- head importance -------------------------------------------------------------------------

def test_head_importance_matches_hooks_on_a_classifier(tiny_variant):
    from bertgeom.sars_cov_2.variant.spec import genome_set

    enc = _encode(tiny_variant, genome_set("demo")[0].text)
    for target in (None, 3):
        res = head_importance(tiny_variant, enc.input_ids, targets=target)
        assert res.objective == "cross-entropy"
        ref = _importance_with_hooks(tiny_variant, enc.input_ids, target=target)
        np.testing.assert_allclose(res.importance, ref, atol=1e-6, rtol=0)
        assert res.importance.max() > 0
    assert all(p.grad is None for p in tiny_variant.model.parameters())


@pytest.mark.parametrize("which", ["tiny_bert", "minilm"])
def test_head_importance_masked_word_loss_matches_hooks(which, request):
    loaded = request.getfixturevalue(which)
    enc = _encode(loaded, SENTENCES[0])
    res = head_importance(loaded, enc.input_ids, content_mask=enc.content_mask)
    assert res.objective == "masked-word (tied embeddings)"
    picked = masked_positions(enc.content_mask[None])[0]
    assert picked.sum() == max(1, round(0.15 * enc.content_mask.sum())) and not (picked & ~enc.content_mask).any()
    ref = _importance_with_hooks(loaded, enc.input_ids, masked=picked)
    np.testing.assert_allclose(res.importance, ref, atol=1e-6, rtol=0)
    norm = normalise_per_layer(res.importance)
    np.testing.assert_allclose(np.linalg.norm(norm, axis=-1), 1.0, atol=1e-9)


def test_head_gate_of_zero_removes_the_head_like_zero_disabling(minilm):
    from bertgeom.forward import run_forward

    enc = _encode(minilm, SENTENCES[1])
    L, H = minilm.num_layers, minilm.num_heads
    gates = np.ones((L, H), np.float32)
    gates[2, 5] = 0.0
    dis = np.zeros((L, H), bool)
    dis[2, 5] = True
    a = run_forward(minilm, enc.input_ids, head_gates=gates, attention="eager",
                    hidden_states=True).arrays()["hidden_states"]
    b = run_forward(minilm, enc.input_ids, disabled=dis, disable_as="zero", attention="eager",
                    hidden_states=True).arrays()["hidden_states"]
    np.testing.assert_allclose(a, b, atol=1e-6)
    full = run_forward(minilm, enc.input_ids, head_gates=np.ones((L, H)), hidden_states=True).arrays()
    own = run_forward(minilm, enc.input_ids, hidden_states=True).arrays()
    np.testing.assert_allclose(full["hidden_states"], own["hidden_states"], atol=1e-5)


# --- the reproduction script -------------------------------------------------------------------

def test_reproduction_says_what_it_needs_offline_and_runs_on_a_local_copy(tiny_bert_dir, tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "reproduce_rank_collapse.py"
    spec = importlib.util.spec_from_file_location("reproduce_rank_collapse", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # offline (the suite sets HF_HUB_OFFLINE): one sentence naming what a local run needs, exit status 2
    assert mod.main(["--model", "bert-base-cased"]) == 2
    said = capsys.readouterr().out.strip()
    assert said == mod.OFFLINE and said.count(". ") == 0 and "--model DIR" in said and "--texts FILE" in said
    # a local model and texts: the curves, beside the published table
    words = "the river bank was quiet and the dog slept near the old stone bridge".split()
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(" ".join(words[(i + k) % len(words)] for k in range(150)) for i in range(33)))
    ours = mod.reproduce_rank_collapse(str(tiny_bert_dir), texts)
    assert set(ours) == set(PATH_VARIANTS) and all(len(v) == 3 for v in ours.values())
    assert mod.main(["--model", str(tiny_bert_dir), "--texts", str(texts)]) == 0
    table = capsys.readouterr().out
    assert "0.687" in table and "attention_only" in table


# --- the figures ---------------------------------------------------------------------------------

def test_figures_draw_the_baselines_and_leave_left_out_pairs_blank():
    from bertgeom.figures.cone import rank_collapse_figure
    from bertgeom.figures.subspace import affinity_histogram, head_affinity_map

    x = np.arange(4)
    fig = rank_collapse_figure(x, {"full": np.array([0.9, 0.7, 0.6, 0.5]), "attention_only": np.zeros(4)},
                               spread={"full": np.full(4, 0.1)}, cone=np.linspace(0.2, 0.9, 4))
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["full model", "attention only (SAN)", "cone index I/m"]
    assert any(s.y0 == 0 for s in fig.layout.shapes)  # the rank-1 line
    rng = np.random.default_rng(3)
    M = rng.uniform(1.0, 5.0, size=(8, 8))
    M[4:, :] = np.nan
    hm = head_affinity_map(M, 4, baseline=2.0, top=8.0, pair_label="OQ", row_kind="output", col_kind="query")
    scale = hm.data[0].colorscale
    white = [pos for pos, colour in scale if colour.lower() == "#f7f7f7"][0]
    assert white * hm.data[0].zmax == pytest.approx(2.0)  # white sits at the random baseline
    assert np.isnan(np.asarray(hm.data[0].z, dtype=float)[4:]).all()
    hist = affinity_histogram(M.ravel(), baseline=2.0, top=8.0)
    assert any(s.x0 == 2.0 for s in hist.layout.shapes)
