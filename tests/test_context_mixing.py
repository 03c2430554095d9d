"""Context mixing (bertgeom.analysis.context_mixing) against an independent implementation written
here: plain forward hooks on the Hugging Face model collect the value vectors, the attention, the
pre- and post-LayerNorm states, and numpy builds every per-(query, key) vector explicitly in float64
(the ``[H, T, T, d]`` tensor the library never builds). On the tiny random BERT and on MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

import bertgeom
from bertgeom.analysis import context_mixing as cm

TEXT = "The cat sat on the mat because it was warm, and the dog watched it."


def _hooked(loaded, input_ids):
    """Per layer, from forward hooks on the model's own modules: the value output ``[T, d]``, the
    attention ``[H, T, T]``, the layer input, the LN1 input and output, and the weights (float64)."""
    import torch

    model = loaded.model
    layers = model.base_model.encoder.layer
    seen: dict = {}
    handles = []
    for l, layer in enumerate(layers):
        handles.append(layer.attention.self.value.register_forward_hook(
            lambda m, i, o, l=l: seen.__setitem__(("v", l), o[0].double().numpy().copy())))
        def keep_ln(module, inputs, output, l=l):  # returns None: the output is left as it is
            seen[("pre", l)] = inputs[0][0].double().numpy().copy()
            seen[("post", l)] = output[0].double().numpy().copy()

        handles.append(layer.attention.output.LayerNorm.register_forward_hook(keep_ln))
    try:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([list(input_ids)]), output_attentions=True, output_hidden_states=True)
    finally:
        for h in handles:
            h.remove()
    per_layer = []
    for l, layer in enumerate(layers):
        so = layer.attention.output
        per_layer.append(dict(
            v=seen[("v", l)], pre=seen[("pre", l)], post=seen[("post", l)],
            attn=out.attentions[l][0].double().numpy(), x=out.hidden_states[l][0].double().numpy(),
            W_o=so.dense.weight.detach().double().numpy(), b_o=so.dense.bias.detach().double().numpy(),
            gamma=so.LayerNorm.weight.detach().double().numpy(), eps=float(so.LayerNorm.eps),
            n_heads=int(layer.attention.self.num_attention_heads)))
    return per_layer


def _reference(layer):
    """Every quantity of one layer, the explicit way: ``f_h(x_j)`` per head from the hooked values and
    the head's columns of W_O, the ``[H, T, T, d]`` weighted vectors, their sums, LN's linear part."""
    v, A, x, W_o = layer["v"], layer["attn"], layer["x"], layer["W_o"]
    H = layer["n_heads"]
    T, d = x.shape
    dh = d // H
    F = np.stack([v[:, h * dh:(h + 1) * dh] @ W_o[:, h * dh:(h + 1) * dh].T for h in range(H)])  # [H, T, d]
    weighted = A[..., None] * F[:, None, :, :]  # [H, i, j, d]
    summed = weighted.sum(axis=0)  # [i, j, d]
    with_res = summed.copy()
    for i in range(T):
        with_res[i, i] += x[i]
    pre = layer["pre"]
    s = np.sqrt(pre.var(axis=-1) + layer["eps"])
    centred = with_res - with_res.mean(axis=-1, keepdims=True)
    T_ij = layer["gamma"] * centred / s[:, None, None]
    return dict(F=F, weighted=weighted, summed=summed, with_res=with_res, T=T_ij, y=layer["post"])


def _close(ours, ref, tol=1e-6):
    """Agreement to ``tol`` relative to the largest value compared (fp32 inputs on both sides)."""
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert ours.shape == ref.shape
    scale = max(1.0, float(np.abs(ref).max()))
    assert float(np.abs(ours - ref).max()) <= tol * scale, float(np.abs(ours - ref).max())


@pytest.fixture(scope="module", params=["tiny", "minilm"])
def case(request, tiny_bert, minilm):
    loaded = tiny_bert if request.param == "tiny" else minilm
    trace = bertgeom.trace(loaded, TEXT)
    hooked = _hooked(loaded, trace.encoded.input_ids)
    return trace, hooked, [_reference(layer) for layer in hooked]


def _mixing(others, own):
    a, b = np.linalg.norm(others, axis=-1), np.linalg.norm(own, axis=-1)
    return a / (a + b)


def test_norm_attention_matches_hooks(case):
    trace, _, refs = case
    _close(cm.norm_attention(trace), np.stack([np.linalg.norm(r["weighted"], axis=-1) for r in refs]))
    _close(cm.norm_attention(trace, layer=1), np.linalg.norm(refs[1]["weighted"], axis=-1))


@pytest.mark.parametrize("scope", cm.SCOPES)
def test_block_norms_match_explicit_vectors(case, scope):
    trace, _, refs = case
    key = {"attn": "summed", "attn+res": "with_res", "attn+res+ln": "T"}[scope]
    _close(cm.block_norms(trace, scope), np.stack([np.linalg.norm(r[key], axis=-1) for r in refs]))


def test_decomposition_rebuilds_the_models_layernorm_output(case):
    """sum_j T_i(x_j) + g_i(b_O) + beta is the LN1 output the model computed (hooked)."""
    _, hooked, refs = case
    for layer, ref in zip(hooked, refs):
        s = np.sqrt(layer["pre"].var(axis=-1) + layer["eps"])
        bias = layer["gamma"] * (layer["b_o"] - layer["b_o"].mean()) / s[:, None]
        beta = layer["post"] - (layer["gamma"] * (layer["pre"] - layer["pre"].mean(-1, keepdims=True)) / s[:, None])
        _close(ref["T"].sum(axis=1) + bias + beta, layer["post"], 1e-5)


def test_mixing_ratios_match_hooks(case):
    trace, hooked, refs = case
    ours = cm.mixing_ratios(trace)
    T = trace.attentions.shape[-1]
    eye = np.eye(T, dtype=bool)
    want = {v: [] for v in cm.MIXING_VARIANTS}
    for layer, r in zip(hooked, refs):
        self_w = np.stack([np.diag(a) for a in layer["attn"]]).mean(axis=0)
        want["Attn-W"].append(1 - self_w)
        want["AttnRes-W"].append((1 - self_w) / 2)
        others = np.where(eye[..., None], 0.0, r["summed"]).sum(axis=1)
        want["Attn-N"].append(_mixing(others, r["summed"][eye]))
        want["AttnRes-N"].append(_mixing(others, r["with_res"][eye]))
        t_others = np.where(eye[..., None], 0.0, r["T"]).sum(axis=1)
        want["AttnResLn-N"].append(_mixing(t_others, r["T"][eye]))
    for variant in cm.MIXING_VARIANTS:
        _close(ours[variant], np.stack(want[variant]))
    # the residual keeps much of each token: adding it lowers mixing, as in the paper's Table 1
    assert ours["AttnRes-N"].mean() < ours["Attn-N"].mean()


def test_head_mixing_ratios_match_hooks(case):
    trace, _, refs = case
    want = []
    for r in refs:
        w = r["weighted"]  # [H, i, j, d]
        T = w.shape[1]
        own = w[:, np.arange(T), np.arange(T)]  # [H, T, d]
        want.append(_mixing(w.sum(axis=2) - own, own))
    _close(cm.head_mixing_ratios(trace), np.stack(want))


def test_alti_matches_hooks_and_rows_sum_to_one(case):
    trace, _, refs = case
    c = cm.alti(trace)
    want = []
    for r in refs:
        y = r["y"]
        dist = np.abs(y[:, None, :] - r["T"]).sum(axis=-1)
        raw = np.maximum(0.0, np.abs(y).sum(axis=-1)[:, None] - dist)
        want.append(raw / raw.sum(axis=-1, keepdims=True))
    _close(c, np.stack(want))
    np.testing.assert_allclose(c.sum(axis=-1), 1.0, atol=1e-12)
    assert (c >= 0).all()
    roll = cm.alti_rollout(c)
    np.testing.assert_allclose(roll.sum(axis=-1), 1.0, atol=1e-12)
    manual = c[0]
    for l in range(1, c.shape[0]):
        manual = c[l] @ manual
    np.testing.assert_allclose(roll[-1], manual, atol=1e-12)


def test_alti_chunking_does_not_change_the_answer(case, monkeypatch):
    trace, _, _ = case
    whole = cm.alti(trace)
    monkeypatch.setattr(cm, "ALTI_CHUNK_BYTES", 1)  # one query row per chunk
    np.testing.assert_allclose(cm.alti(trace), whole, atol=1e-13)


def test_view_bundles_every_measure(case):
    trace, _, _ = case
    steps = []
    view = cm.context_mixing_view(trace, progress=lambda done, total: steps.append((done, total)))
    L, H, T, _ = trace.attentions.shape
    assert view["value_norms"].shape == (L, H, T)
    assert view["mixing"].shape == (len(cm.MIXING_VARIANTS), L, T)
    assert view["alti_rollout"].shape == (L, T, T)
    assert view["block_norms"].shape == (len(cm.SCOPES), L, T, T)
    assert steps[-1][0] == steps[-1][1] and len(steps) >= L
    np.testing.assert_allclose(view["alti"], cm.alti(trace), atol=1e-6)


def test_a_trace_without_weights_takes_the_model(case, tiny_bert, minilm):
    """The pages' traces carry no weights: the model is passed as weights= (same numbers), and a trace
    with neither says so in one sentence."""
    import dataclasses

    trace, _, _ = case
    loaded = minilm if trace.attentions.shape[0] == minilm.num_layers else tiny_bert
    bare = dataclasses.replace(trace, layer_weights=None)
    np.testing.assert_array_equal(cm.mixing_ratios(bare, weights=loaded)["AttnResLn-N"],
                                  cm.mixing_ratios(trace)["AttnResLn-N"])
    with pytest.raises(ValueError, match="no layer weights"):
        cm.alti(bare)


def test_block_weights_reads_a_model_or_a_trace(case, tiny_bert):
    trace, _, _ = case
    a = cm.block_weights(trace, 0)
    if trace.attentions.shape[1] == tiny_bert.num_heads and a.Wv.shape[-1] == tiny_bert.config.hidden_size:
        b = cm.block_weights(tiny_bert, 0)
        np.testing.assert_array_equal(a.Wo_t, b.Wo_t)
    assert a.Wv.flags.c_contiguous and a.Wo_t.flags.c_contiguous


# --- ALTI over a set (bertgeom.sets.context_mixing.alti_over_set) ------------------------------------
SET_TEXTS = (TEXT, "A dog.", "Colourless green ideas sleep furiously, said the linguist to the empty room.")


def _numpy_set_reductions(c: np.ndarray, attentions: np.ndarray) -> dict[str, np.ndarray]:
    """The set view's per-layer numbers of one input, recomputed the plain way from ``alti``'s output:
    the rollouts as explicit products, Spearman's ρ from scipy one row at a time."""
    from scipy.stats import spearmanr

    L, T, _ = c.shape
    a = np.asarray(attentions, dtype=np.float64)
    out = {k: np.empty(L) for k in ("alti_self", "rollout_self", "attention_rollout_self", "rank_agreement",
                                     "rank_agreement_first")}
    alti_acc, attn_acc = np.eye(T), np.eye(T)
    for l in range(L):
        alti_acc = c[l] @ alti_acc
        step = 0.5 * a[l].mean(axis=0) + 0.5 * np.eye(T)
        attn_acc = (step / step.sum(axis=1, keepdims=True)) @ attn_acc
        rhos = []
        for i in range(T):
            rho = spearmanr(alti_acc[i], attn_acc[i]).statistic if np.ptp(alti_acc[i]) and np.ptp(attn_acc[i]) \
                else np.nan
            rhos.append(rho)
        out["alti_self"][l] = np.trace(c[l]) / T
        out["rollout_self"][l] = np.trace(alti_acc) / T
        out["attention_rollout_self"][l] = np.trace(attn_acc) / T
        out["rank_agreement"][l] = np.nanmean(rhos)
        out["rank_agreement_first"][l] = rhos[0]
    return out


@pytest.fixture(scope="module")
def alti_set(tiny_bert):
    from bertgeom.inputs import InputItem
    from bertgeom.sets.context_mixing import alti_over_set

    items = [InputItem(f"s{k}", t) for k, t in enumerate(SET_TEXTS)]
    steps = []
    return items, alti_over_set(tiny_bert, items, progress=lambda d, n: steps.append((d, n))), steps


def test_alti_over_set_agrees_with_a_numpy_recomputation(alti_set, tiny_bert):
    from bertgeom.sets.context_mixing import ALTI_SET_ARRAYS

    items, res, steps = alti_set
    L = tiny_bert.num_layers
    assert [str(x) for x in res["names"]] == [it.name for it in items] and int(res["errors"][0]) == 0
    assert steps[-1] == (len(items), len(items)) and len(steps) >= len(items)  # one input per update
    for n, it in enumerate(items):
        trace = bertgeom.trace(tiny_bert, it.text)
        c = cm.alti(trace)
        np.testing.assert_allclose(c.sum(axis=-1), 1.0, atol=1e-12)  # ALTI's rows sum to 1
        assert res["tokens"][n] == trace.attentions.shape[-1]
        want = _numpy_set_reductions(c, trace.attentions)
        for name in ALTI_SET_ARRAYS:
            assert res[name].shape == (len(items), L) and res[name].dtype == np.float32
            np.testing.assert_allclose(res[name][n], want[name], atol=1e-6, err_msg=f"{it.name} {name}")
    # on a random model ALTI and raw attention neither agree exactly nor are unrelated everywhere
    assert not np.allclose(res["rank_agreement"], 1.0)
    assert (res["alti_self"] > 0).all() and (res["alti_self"] < 1).all()


def test_alti_rollout_keeps_more_of_each_token_than_attention_rollout_on_minilm(minilm):
    """MiniLM's residual keeps most of each token (mixing ratios about 25 %): ALTI's rollout says so,
    where attention rollout at r = 0.5 halves the own share at every layer."""
    from bertgeom.inputs import InputItem
    from bertgeom.sets.context_mixing import alti_over_set

    res = alti_over_set(minilm, [InputItem("t", TEXT)])
    assert (res["rollout_self"][0, 1:] > res["attention_rollout_self"][0, 1:]).all()
    assert 0.5 < res["alti_self"][0].mean() < 1.0


def test_row_spearman_matches_scipy_with_ties_and_constant_rows():
    from scipy.stats import spearmanr

    from bertgeom.sets.context_mixing import row_spearman

    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, size=(3, 5, 9)).astype(float)  # many ties
    b = rng.normal(size=(3, 5, 9))
    a[1, 2] = 7.0  # a constant row: no correlation
    got = row_spearman(a, b)
    for idx in np.ndindex(3, 5):
        if idx == (1, 2):
            assert np.isnan(got[idx])
        else:
            assert abs(got[idx] - spearmanr(a[idx], b[idx]).statistic) < 1e-12
    np.testing.assert_allclose(row_spearman(b, b), 1.0)
    np.testing.assert_allclose(row_spearman(b, -b), -1.0)


def test_alti_set_view_round_trips_through_the_disk_tier(alti_set, tiny_bert, tmp_path, monkeypatch):
    from bertgeom.cache import cached_arrays, on_disk
    from bertgeom.sets.views import ALTI_SET, VIEWS

    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    ALTI_SET.memo.clear()
    items, res, _ = alti_set
    assert VIEWS["alti-set"] is ALTI_SET
    assert ALTI_SET.prepare(tiny_bert, items) and on_disk(ALTI_SET.key_of(tiny_bert, items))
    ALTI_SET.memo.clear()
    stored = ALTI_SET.get(tiny_bert, items, around=lambda: pytest.fail("recomputed what is on disk"))
    assert isinstance(stored, ALTI_SET.result)
    for k, v in res.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)
    # another set, or another model, is another entry
    assert ALTI_SET.key_of(tiny_bert, items[:2]) != ALTI_SET.key_of(tiny_bert, items)
    raw = cached_arrays(ALTI_SET.key_of(tiny_bert, items), lambda: pytest.fail("recomputed"))
    assert raw["names"].dtype.kind == "U"  # names stored as text, read without pickle


def test_set_figures_draw_mean_and_sd_and_skip_undefined_rows():
    from bertgeom.figures import context_mixing as fcm

    per_input = np.array([[0.2, 0.4], [0.4, np.nan], [0.6, 0.8]])  # one input without a ρ at layer 2
    mean, sd = fcm.set_mean_sd(per_input)
    np.testing.assert_allclose(mean, [0.4, 0.6])
    np.testing.assert_allclose(sd, [np.std([0.2, 0.4, 0.6]), 0.2])
    fig = fcm.rank_agreement_lines(per_input, per_input, first_token="<s>")
    lines = {t.name: np.asarray(t.y, float) for t in fig.data if t.name}
    assert set(lines) == {"mean over output tokens", "row of <s>"}
    band = next(t for t in fig.data if t.fill == "toself")
    np.testing.assert_allclose(np.asarray(band.y, float), [0.4 + sd[0], 0.6 + sd[1], 0.6 - sd[1], 0.4 - sd[0]])
    share = fcm.alti_mixing_share_lines(per_input[:, :1] * 0 + 0.75, np.full((2, 4, 1), 0.5), ("Attn-W", "Attn-N"))
    got = {t.name: np.asarray(t.y, float) for t in share.data if t.name}
    np.testing.assert_allclose(got["ALTI (1 − self)"], [25.0])
    np.testing.assert_allclose(got["Attn-W"], [50.0])
    with pytest.raises(ValueError):
        fcm.set_mean_sd(np.zeros((0, 3)))
