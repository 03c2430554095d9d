"""One adapter per encoder family (bertgeom.architectures): for a tiny random model of every family,
built from its transformers config, the engine's recomputed forward equals the model's own eager forward
(attentions, hidden states, logits), its interventions reach every family, the weights read through the
adapter rebuild each layer's output, and the tokenizer specials are the family's own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertgeom.architectures import ArchitectureError, adapter_of, build_random_encoder, specials_of
from bertgeom.forward import ForwardError, run_forward
from family_models import FAMILIES, save_family_model

TOL = 1e-5


def _batch(vocab: int, pad: int, T: int = 14):
    """Two rows, the second padded after 9 tokens with the model's own PAD id."""
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab - 2, size=(2, T))
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    ids[1, 9:] = pad
    return ids, mask


def _own(model, ids, mask):
    with torch.inference_mode():
        return model(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(mask), output_attentions=True,
                     output_hidden_states=True, return_dict=True)


def _model(family, num_labels=0, **kw):
    # ModernBERT: a window of 4 keys either side, shorter than the inputs, so local layers differ from global ones
    extra = dict(local_attention=8, global_attn_every_n_layers=2) if family == "ModernBERT" else {}
    extra.update(kw)
    return build_random_encoder(family, layers=3, heads=4, hidden=32, vocab_size=60, num_labels=num_labels,
                                pad_token_id=1, **extra)


@pytest.mark.parametrize("num_labels", [0, 3])
@pytest.mark.parametrize("family", FAMILIES)
def test_the_engine_reproduces_each_familys_own_eager_forward(family, num_labels):
    model = _model(family, num_labels)
    ids, mask = _batch(60, 1)
    ref = _own(model, ids, mask)
    hs_ref = torch.stack(ref.hidden_states, 1).numpy()
    for attention in ("eager", "sdpa"):
        out = run_forward(model, ids, mask, attentions=attention == "eager", hidden_states=True,
                          attention=attention).arrays()
        assert out["hidden_states"].shape == hs_ref.shape
        for b, n in enumerate(mask.sum(1)):  # real rows: padding rows are read by nothing
            np.testing.assert_allclose(out["hidden_states"][b, :, :n], hs_ref[b, :, :n], atol=TOL)
        if attention == "eager":
            np.testing.assert_allclose(out["attentions"], torch.stack(ref.attentions, 1).numpy(), atol=TOL)
        if num_labels:
            np.testing.assert_allclose(out["logits"], ref.logits.numpy(), atol=TOL)
            short = run_forward(model, ids, mask, attention=attention, logits_only=True).arrays()
            np.testing.assert_allclose(short["logits"], ref.logits.numpy(), atol=TOL)
        else:
            assert "logits" not in out


def test_modernbert_local_layers_mask_far_keys_and_mean_pooling_reads_every_row():
    model = _model("ModernBERT", 2, classifier_pooling="mean")
    ad = adapter_of(model)
    assert [lp.window for lp in ad.layers] == [None, 4, None] and ad.head_reads == "all"
    ids, mask = _batch(60, 1)
    out = run_forward(model, ids, mask, attentions=True, attention="eager").arrays()
    local = out["attentions"][0, 1]  # [H, T, T] of the local layer, first row (unpadded)
    far = np.abs(np.arange(14)[:, None] - np.arange(14)[None, :]) > 4
    assert (local[:, far] == 0).all() and (out["attentions"][0, 0][:, far] > 0).any()
    ref = _own(model, ids, mask)
    short = run_forward(model, ids, mask, attention="sdpa", logits_only=True).arrays()
    np.testing.assert_allclose(short["logits"], ref.logits.numpy(), atol=TOL)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_disabled_head_is_uniform_over_real_keys_and_the_others_untouched_on_every_family(family):
    model = _model(family, 2)
    ids, mask = _batch(60, 1)
    dis = np.zeros((3, 4), bool)
    dis[1, 2] = True
    base = run_forward(model, ids, mask, attentions=True, attention="eager").arrays()
    out = run_forward(model, ids, mask, attentions=True, attention="eager", disabled=dis).arrays()
    a = out["attentions"]
    np.testing.assert_allclose(a[1, 1, 2, :9, :9], 1 / 9, atol=1e-7)  # row 2: 9 real keys
    assert (a[1, 1, 2, :, 9:] == 0).all()
    np.testing.assert_allclose(a[:, :1], base["attentions"][:, :1], atol=1e-7)  # the layer below: the same
    np.testing.assert_allclose(a[:, 1, [0, 1, 3]], base["attentions"][:, 1, [0, 1, 3]], atol=1e-7)
    # the intervention reached the output (random weights attend almost uniformly already: a small change)
    assert np.abs(out["cls"][:, -1] - base["cls"][:, -1]).max() > 1e-6
    # the fused path writes a uniform head directly (no map): the same output
    fused = run_forward(model, ids, mask, attention="sdpa", disabled=dis).arrays()
    np.testing.assert_allclose(fused["cls"], out["cls"], atol=TOL)
    # resuming at layer 1 from the baseline's layer input gives the same as the full ablated run
    layer_input = run_forward(model, ids, mask, hidden_states=True, attention="sdpa").arrays()["hidden_states"][:, 1]
    resumed = run_forward(model, ids, mask, attention="sdpa", disabled=dis, start_layer=1,
                          start_hidden=torch.as_tensor(layer_input)).arrays()
    np.testing.assert_allclose(resumed["logits"], out["logits"], atol=TOL)


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_gradients_run_on_every_family_through_the_engine(family):
    from bertgeom.analysis.gradients import attention_gradients

    model = _model(family, 2)
    ids, _ = _batch(60, 1)
    res = attention_gradients(model, ids[0])
    assert res.grad.shape == (3, 4, 14, 14) and np.isfinite(res.grad).all() and res.grad.max() > 0
    # the word vectors the gradient is taken at give the model's own logits
    ref = _own(model, ids[:1], np.ones((1, 14), int))
    assert res.target == int(ref.logits.argmax(-1)[0])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_weights_read_through_the_adapter_rebuild_every_layers_output(family):
    """weights.py reads every family through the adapter: the numpy layer (LayerNorm placement, gated MLP)
    fed with the model's own attention maps gives the model's next hidden state."""
    from bertgeom.analysis.cone import layer_streams
    from bertgeom.weights import extract_layer_weights

    model = _model(family)
    ids, mask = _batch(60, 1)
    ref = _own(model, ids[:1], mask[:1])
    lws = extract_layer_weights(model)
    ad = adapter_of(model)
    assert len(lws) == 3 and all(lw.placement == ("pre" if ad.pre_ln else "post") for lw in lws)
    for l, lw in enumerate(lws):
        x = ref.hidden_states[l][0].numpy()
        s = layer_streams(x, lw, attention=ref.attentions[l][0].numpy(), faithful=False)
        y = s["layer_output"]
        if l == 2 and ad.final_norm is not None:  # the last hidden state of a pre-LN model is normalised
            y = torch.as_tensor(y, dtype=torch.float32)
            y = ad.final_norm(y).detach().numpy()
        np.testing.assert_allclose(y, ref.hidden_states[l + 1][0].numpy(), atol=1e-4)
    rotary = family in ("ESM-2", "ModernBERT")
    assert all(lw.rotary == rotary for lw in lws)


def test_albert_layers_share_one_set_of_weights_and_say_so():
    from bertgeom.weights import extract_layer_weights

    model = _model("ALBERT")
    ad = adapter_of(model)
    assert ad.shared_layers and [lp.shared_with for lp in ad.layers] == [0, 0, 0]
    lws = extract_layer_weights(model)
    assert lws[2].W_q is lws[0].W_q and lws[2].shared and not lws[0].shared and lws[2].index == 2


def test_electra_projects_its_smaller_embeddings_to_the_hidden_size():
    model = _model("ELECTRA", embedding_size=16)
    assert model.config.embedding_size == 16 and model.config.hidden_size == 32
    ids, mask = _batch(60, 1)
    out = run_forward(model, ids, mask, hidden_states=True, attention="eager").arrays()
    np.testing.assert_allclose(out["hidden_states"][0, 0], _own(model, ids, mask).hidden_states[0][0].numpy(),
                               atol=TOL)


def test_a_decoder_or_an_unknown_model_gets_one_sentence_naming_the_families(tmp_path):
    from transformers import GPT2Config, GPT2Model

    from bertgeom.models import ModelLoadError, load_model

    gpt = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50))
    with pytest.raises(ArchitectureError, match="DistilBERT, ALBERT, ESM-2") as exc:
        adapter_of(gpt)
    assert "\n" not in str(exc.value)
    with pytest.raises(ForwardError, match="ModernBERT"):
        run_forward(gpt, np.array([1, 2, 3]), attention="eager", hidden_states=True)
    gpt.save_pretrained(str(tmp_path), safe_serialization=True)
    with pytest.raises(ModelLoadError, match="gpt2.*ModernBERT"):
        load_model(str(tmp_path))
    # a BERT configured as a decoder (causal attention) and an encoder of a family not read here
    from transformers import BertConfig, BertModel, DebertaV2Config, DebertaV2Model

    decoder = BertModel(BertConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=16, intermediate_size=32,
                                   vocab_size=50, is_decoder=True))
    with pytest.raises(ArchitectureError, match="^This is a decoder; bertgeom reads BERT .*ModernBERT encoders.$"):
        adapter_of(decoder)
    deberta = DebertaV2Model(DebertaV2Config(num_hidden_layers=1, num_attention_heads=2, hidden_size=16,
                                             intermediate_size=32, vocab_size=50))
    with pytest.raises(ArchitectureError, match="^This is a 'deberta-v2' model; bertgeom"
                       " reads .*ModernBERT encoders.$"):
        adapter_of(deberta)


EXPECTED_SPECIALS = {  # (pad id, subword marker) of each family's tiny tokenizer
    "BERT": (0, "##"), "ELECTRA": (0, "##"), "DistilBERT": (0, "##"), "RoBERTa": (1, "Ġ"),
    "ModernBERT": (3, "Ġ"), "ALBERT": (0, "▁"), "ESM-2": (1, ""),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_loads_from_a_saved_checkpoint_with_its_own_specials(family, tmp_path):
    from bertgeom.inputs import encode_input
    from bertgeom.models import load_model

    loaded = load_model(str(save_family_model(family, tmp_path / family)))
    sp = specials_of(loaded.tokenizer, loaded.config)
    assert (sp.pad_id, sp.marker) == EXPECTED_SPECIALS[family]
    text = "MKTAYIAKQR" if family == "ESM-2" else "The cat sat on the mat."
    enc = encode_input(loaded, text)
    assert enc.input_ids[0] == sp.cls_id and enc.input_ids[-1] == sp.sep_id
    # the ends are marked as [CLS] and [SEP] (ESM-2's tokenizer names them BOS/EOS only), so the features'
    # "attention to [SEP]" and the content tokens are the family's own
    assert enc.is_cls.tolist() == [True] + [False] * (len(enc.input_ids) - 1)
    assert enc.is_sep.tolist() == [False] * (len(enc.input_ids) - 1) + [True]
    assert loaded.max_tokens <= 512


def test_word_starts_follow_the_marker():
    from bertgeom.architectures import Specials

    wordpiece, bpe, none = Specials(0, 1, 0, 2, "##"), Specials(0, 2, 1, 4, "Ġ"), Specials(0, 2, 1, 32, "")
    assert wordpiece.continues_word("##ing") and not wordpiece.continues_word("walk")
    assert bpe.continues_word("ing") and not bpe.continues_word("Ġwalk")
    assert not bpe.continues_word("The", previous_special=True)
    assert not none.continues_word("K")


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_rebuilt_from_the_weights_is_each_familys_own(family):
    """bertgeom.attention.correct_attention (the analyses' numpy attention: pre-LN input, rotary positions,
    local windows read from LayerWeights) equals the model's own maps, padding masked."""
    from bertgeom.attention import correct_attention
    from bertgeom.weights import extract_layer_weights

    model = _model(family)
    ids, mask = _batch(60, 1)
    ref = _own(model, ids, mask)
    for l, lw in enumerate(extract_layer_weights(model)):
        for b, n in enumerate(mask.sum(1)):
            got = correct_attention(ref.hidden_states[l][b].numpy(), lw, attention_mask=mask[b])
            np.testing.assert_allclose(got[:, :n], ref.attentions[l][b, :, :n].numpy(), atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_head_importance_is_the_derivative_of_the_loss_through_each_familys_own_gates(family):
    """Michel et al.'s |dL/dξ_h| on every family (the engine's gates, never head_mask) equals the central
    finite difference of the classifier's loss when one head's output is scaled by 1 ± ε (ε = 0.2)."""
    import torch.nn.functional as F

    from bertgeom.analysis.gradients import head_importance

    model = _model(family, 2)
    ids, _ = _batch(60, 1)
    res = head_importance(model, ids[0], targets=1)
    assert res.objective == "cross-entropy" and res.importance.shape == (3, 4)

    def loss(gates):
        out = run_forward(model, ids[:1], np.ones((1, 14), int), head_gates=gates, attention="eager")
        return float(F.cross_entropy(out.logits, torch.tensor([1])))

    eps = 0.2  # fp32 losses: a smaller step drowns the difference in rounding
    for l, h in ((0, 0), (1, 2), (2, 3)):
        up, down = np.ones((3, 4), np.float32), np.ones((3, 4), np.float32)
        up[l, h], down[l, h] = 1 + eps, 1 - eps
        fd = (loss(up) - loss(down)) / (2 * eps)
        np.testing.assert_allclose(res.importance[l, h], abs(fd), rtol=2e-2, atol=1e-6)
    assert res.importance.max() > 1e-6  # the gates reached the loss
