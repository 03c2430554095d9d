"""Gradient importance of attention: a head whose values are zeroed has zero gradient; the
recomputed attention is the model's own; encoders without a head are refused."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from bertgeom.analysis.gradients import attention_gradients, gradient_by_key_kind


def _ids(loaded):
    from bertgeom.inputs import encode_input
    from bertgeom.sars_cov_2.variant.spec import genome_set

    return encode_input(loaded, genome_set("demo")[0].text)


def test_zeroed_head_has_zero_gradient_and_attention_matches_the_model(tiny_variant):
    import torch

    from bertgeom.trace import run_trace

    enc = _ids(tiny_variant)
    model = copy.deepcopy(tiny_variant.model)
    sa = model.base_model.encoder.layer[1].attention.self
    d = int(sa.attention_head_size)
    with torch.no_grad():  # head 2 of layer 2 writes nothing: its value projection is zero
        sa.value.weight[2 * d:3 * d] = 0.0
        sa.value.bias[2 * d:3 * d] = 0.0
    res = attention_gradients(model, enc.input_ids)
    assert res["grad"].shape == (2, tiny_variant.num_heads, enc.n_tokens, enc.n_tokens)
    assert np.abs(res["grad"][1, 2]).max() == 0.0
    assert res["grad"][1, [0, 1, 3]].max() > 0 and res["grad"][0].max() > 0
    # the intact model: recomputed attention equals the trace's, target = the predicted class
    intact = attention_gradients(tiny_variant, enc.input_ids)
    tr = run_trace(tiny_variant, enc)
    np.testing.assert_allclose(intact["attn"], tr.attentions, atol=1e-5)
    assert intact["target"] == int(np.argmax(tr.logits))
    assert intact["loss"] == pytest.approx(-np.log(tr.probs[intact["target"]]), rel=1e-4)
    assert all(p.grad is None for p in tiny_variant.model.parameters())  # the shared model is untouched


def test_by_key_kind_and_encoders_are_refused(tiny_variant, minilm):
    from bertgeom.analysis.ablation import AblationError

    enc = _ids(tiny_variant)
    res = attention_gradients(tiny_variant, enc.input_ids, target=0)
    kinds = gradient_by_key_kind(res["grad"], res["attn"], enc.is_cls, enc.is_sep)
    assert set(kinds) == {"grad [CLS]", "attn [CLS]", "grad [SEP]", "attn [SEP]", "grad other", "attn other"}
    total = kinds["attn [CLS]"] + kinds["attn [SEP]"] + kinds["attn other"]
    np.testing.assert_allclose(total, 1.0, atol=1e-5)  # each row's attention splits over the three kinds
    with pytest.raises(AblationError, match="no classification head"):
        attention_gradients(minilm, np.array([101, 2000, 102]))
