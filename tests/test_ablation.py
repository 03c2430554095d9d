"""Head disabling (Kovaleva §4.6) by functional recomputation, and checkpoint comparison."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from bertgeom.attention import attention_from_weights
from bertgeom.analysis.ablation import (
    AblationError,
    bilinear_cosine,
    cls_cosine,
    disabled_mask,
    forward_with_disabled_heads,
    head_names,
    map_cosine_by_layer,
    map_cosine_on_shared_inputs,
    same_shape,
    sweep_layers,
    sweep_single_heads,
    weight_cosine,
)
from bertgeom.trace import run_trace
from bertgeom.weights import extract_layer_weights

SENTENCE = "The cat sat on the mat because it was tired."


def _hf(loaded, ids, mask=None):
    ids_t = torch.as_tensor(np.atleast_2d(ids))
    m = None if mask is None else torch.as_tensor(np.atleast_2d(mask))
    with torch.inference_mode():
        return loaded.model(input_ids=ids_t, attention_mask=m, output_attentions=True,
                            output_hidden_states=True, return_dict=True)


def _ids(loaded, text=SENTENCE):
    return run_trace(loaded, text).encoded.input_ids


def _state_fingerprint(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_masks_and_names():
    m = disabled_mask(3, 4, heads=[(0, 1), (2, 3)], layers=[1])
    assert m.shape == (3, 4) and m.sum() == 6 and m[1].all()
    assert head_names(m)[:2] == ["L1 H2", "L2 H1"]
    with pytest.raises(IndexError):
        disabled_mask(2, 2, heads=[(2, 0)])


def test_disabling_nothing_reproduces_the_model_exactly_enough(tiny_bert):
    ids = _ids(tiny_bert)
    ref = _hf(tiny_bert, ids)
    res = forward_with_disabled_heads(tiny_bert, ids, None, output_attentions=True, output_hidden_states=True)
    np.testing.assert_allclose(res.attentions[0], torch.stack(ref.attentions, 1)[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(res.hidden_states[0], torch.stack(ref.hidden_states, 1)[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(res.last_hidden[0], ref.last_hidden_state[0].numpy(), atol=1e-5)
    assert res.logits is None
    none = forward_with_disabled_heads(tiny_bert, ids, np.zeros((2, 4), bool))
    np.testing.assert_array_equal(none.cls, forward_with_disabled_heads(tiny_bert, ids, None).cls)  # all-False = None
    np.testing.assert_allclose(none.cls, res.cls, atol=1e-6)  # the fused path (no attentions kept) agrees


def test_fused_path_disables_the_same_heads_as_the_materialised_one(minilm):
    """Without attentions to return, layers run fused attention and a disabled head's output is the
    mean of V over the real keys: the same numbers as the uniform map times V, batched ablations too."""
    ids = np.broadcast_to(_ids(minilm), (3, len(_ids(minilm))))
    masks = np.zeros((3, 6, 12), bool)
    masks[0, 0, 1] = masks[1, 4, 3] = True
    masks[2] = True  # every head uniform
    fused = forward_with_disabled_heads(minilm, ids, masks)
    full = forward_with_disabled_heads(minilm, ids, masks, output_attentions=True)
    np.testing.assert_allclose(fused.cls, full.cls, atol=2e-5)
    last = fused.cls[:, -1]  # final [CLS] of each ablation: they differ from each other
    assert np.abs(last[0] - last[1]).max() > 1e-3 and np.abs(last[0] - last[2]).max() > 1e-3


def test_classifier_logits_match_and_disabling_nothing_is_identical(tiny_variant):
    trace = run_trace(tiny_variant, _variant_text())
    ids = trace.encoded.input_ids
    a = forward_with_disabled_heads(tiny_variant, ids)
    b = forward_with_disabled_heads(tiny_variant, ids, disabled_mask(2, 4))
    np.testing.assert_array_equal(a.logits, b.logits)
    np.testing.assert_allclose(a.logits[0], trace.logits, atol=1e-4)
    assert a.probs.shape == (1, 8) and np.isclose(a.probs.sum(), 1.0)


def _variant_text():
    from bertgeom.sars_cov_2.variant.spec import genome_set

    return genome_set("demo")[0].text


def test_disabled_heads_are_uniform_over_real_tokens_and_others_untouched(tiny_bert):
    ids = _ids(tiny_bert)
    T = ids.size
    # a padded batch: row 0 is the sentence plus 3 pads, row 1 the same sentence disabled differently
    pad = np.concatenate([ids, [0, 0, 0]])
    batch = np.stack([pad, pad])
    mask = np.stack([np.r_[np.ones(T), np.zeros(3)], np.r_[np.ones(T), np.zeros(3)]]).astype(int)
    dis = np.zeros((2, 2, 4), bool)
    dis[0, 0, 1] = True  # example 0: L1 H2
    dis[1, 1, :] = True  # example 1: the whole of layer 2
    res = forward_with_disabled_heads(tiny_bert, batch, dis, attention_mask=mask, output_attentions=True)
    A = res.attentions  # [B, L, H, T+3, T+3]
    np.testing.assert_allclose(A[0, 0, 1, :, :T], 1.0 / T, atol=1e-7)
    assert np.all(A[0, 0, 1, :, T:] == 0)
    np.testing.assert_allclose(A[1, 1, :, :, :T], 1.0 / T, atol=1e-7)
    # heads that were not disabled keep the model's attention (layer 1 reads the same input)
    ref = _hf(tiny_bert, ids)
    np.testing.assert_allclose(A[0, 0, [0, 2, 3], :T, :T], ref.attentions[0][0, [0, 2, 3]].numpy(), atol=1e-6)
    np.testing.assert_allclose(A[1, 0, :, :T, :T], ref.attentions[0][0].numpy(), atol=1e-6)
    # the ablation changes what follows
    base = forward_with_disabled_heads(tiny_bert, ids)
    assert np.abs(res.cls[0, -1] - base.cls[0, -1]).max() > 1e-6  # random weights: near-uniform heads, small change
    # padding does not change the real tokens' result (within float noise)
    one = forward_with_disabled_heads(tiny_bert, ids, dis[0])
    np.testing.assert_allclose(res.cls[0, -1], one.cls[0, -1], atol=1e-4)


def test_the_shared_model_is_never_mutated_and_no_hooks_are_left(tiny_bert):
    ids = _ids(tiny_bert)
    before = _state_fingerprint(tiny_bert.model)
    # transformers installs its own output-capturing hooks on a model's first forward; ours add none
    hooks = [(dict(m._forward_hooks), dict(m._forward_pre_hooks)) for m in tiny_bert.model.modules()]
    forward_with_disabled_heads(tiny_bert, ids, disabled_mask(2, 4, layers=[0, 1]))
    sweep_single_heads(tiny_bert, ids)
    after = tiny_bert.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert hooks == [(dict(m._forward_hooks), dict(m._forward_pre_hooks)) for m in tiny_bert.model.modules()]
    assert not tiny_bert.model.training


def test_concurrent_ablations_do_not_interfere(tiny_bert):
    ids = _ids(tiny_bert)
    masks = [disabled_mask(2, 4, heads=[(l, h)]) for l in range(2) for h in range(4)]
    expected = [forward_with_disabled_heads(tiny_bert, ids, m).cls for m in masks]
    got = [None] * len(masks)

    def work(i):
        for _ in range(3):
            got[i] = forward_with_disabled_heads(tiny_bert, ids, masks[i]).cls

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(masks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e, g in zip(expected, got):
        np.testing.assert_allclose(e, g, atol=1e-6)


def test_sweeps_agree_with_one_ablation_at_a_time(tiny_variant):
    ids = run_trace(tiny_variant, _variant_text()).encoded.input_ids
    sw = sweep_single_heads(tiny_variant, ids, budget=2e6)  # small batches: exercise chunking
    assert sw.cls.shape[:2] == (2, 4) and sw.logits.shape == (2, 4, 8)
    for l, h in [(0, 0), (1, 3)]:
        one = forward_with_disabled_heads(tiny_variant, ids, disabled_mask(2, 4, heads=[(l, h)]))
        np.testing.assert_allclose(sw.cls[l, h], one.cls[0, -1], atol=1e-4)
        np.testing.assert_allclose(sw.logits[l, h], one.logits[0], atol=1e-4)
    lay = sweep_layers(tiny_variant, ids)
    one = forward_with_disabled_heads(tiny_variant, ids, disabled_mask(2, 4, layers=[1]))
    np.testing.assert_allclose(lay.logits[1], one.logits[0], atol=1e-4)
    np.testing.assert_allclose(lay.base_logits, forward_with_disabled_heads(tiny_variant, ids).logits[0], atol=1e-6)


def test_unsupported_models_raise_a_clear_error():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, position_embedding_type="relative_key")
    with pytest.raises(AblationError, match="absolute"):
        forward_with_disabled_heads(BertModel(cfg).eval(), np.array([1, 2, 3]))


# ----------------------------------------------------------------------------------------
# checkpoint comparison
# ----------------------------------------------------------------------------------------


def test_bilinear_cosine_matches_the_explicit_products():
    rng = np.random.default_rng(0)
    A1, B1, A2, B2 = (rng.normal(size=(3, 2, 7, 3)) for _ in range(4))
    got = bilinear_cosine(A1, B1, A2, B2)
    M1 = np.einsum("lhki,lhmi->lhkm", A1, B1)
    M2 = np.einsum("lhki,lhmi->lhkm", A2, B2)
    ref = (M1 * M2).sum((-1, -2)) / np.sqrt((M1**2).sum((-1, -2)) * (M2**2).sum((-1, -2)))
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    # invariant to a change of basis inside the head
    R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    S = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    np.testing.assert_allclose(bilinear_cosine(A1 @ S, B1 @ np.linalg.inv(S).T, A1 @ R, B1 @ R), 1.0, atol=1e-10)


def test_weight_and_map_cosine_between_checkpoints(tiny_bert, tiny_variant):
    wa = extract_layer_weights(tiny_bert.model)
    wb = extract_layer_weights(tiny_variant.model)
    assert same_shape(wa, wb) is None  # both 2 x 4, hidden 32
    self_cos = weight_cosine(wa, wa)
    np.testing.assert_allclose(self_cos["qk"], 1.0, atol=1e-9)
    np.testing.assert_allclose(self_cos["ov"], 1.0, atol=1e-9)
    cross = weight_cosine(wa, wb)
    assert cross["qk"].shape == (2, 4) and np.all(np.abs(cross["ov"]) < 0.5)  # unrelated random weights
    trace = run_trace(tiny_bert, SENTENCE)
    X = trace.hidden_states[:-1]
    np.testing.assert_allclose(attention_from_weights(wa, X), trace.attentions, atol=1e-5)
    mc = map_cosine_on_shared_inputs(wa, wb, X)
    assert mc["cos"].shape == (2, 4) and np.all((mc["cos"] > 0) & (mc["cos"] <= 1 + 1e-9))
    np.testing.assert_allclose(map_cosine_on_shared_inputs(wa, wa, X)["cos"], 1.0, atol=1e-9)
    # the layer-by-layer form the app uses gives the same cosines without keeping the maps
    np.testing.assert_array_equal(map_cosine_by_layer(wa, wb, X), mc["cos"])


def test_checkpoints_of_different_shapes_are_refused(tiny_bert, minilm):
    wa = extract_layer_weights(tiny_bert.model)
    wb = extract_layer_weights(minilm.model)
    assert "differ in shape" in same_shape(wa, wb)
    with pytest.raises(ValueError, match="differ in shape"):
        weight_cosine(wa, wb)


def test_minilm_recomputation_matches_transformers(minilm):
    ids = _ids(minilm)
    ref = _hf(minilm, ids)
    res = forward_with_disabled_heads(minilm, ids, output_attentions=True)
    np.testing.assert_allclose(res.last_hidden[0], ref.last_hidden_state[0].numpy(), atol=1e-4)
    np.testing.assert_allclose(res.attentions[0], torch.stack(ref.attentions, 1)[0].numpy(), atol=1e-5)
    # a trained model: disabling a whole layer clearly moves the [CLS] vector
    cut = forward_with_disabled_heads(minilm, ids, disabled_mask(6, 12, layers=[0]))
    assert cls_cosine(cut.cls[0, -1], res.cls[0, -1]) < 0.999
