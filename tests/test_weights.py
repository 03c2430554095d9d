"""extract_layer_weights: layout, shapes, no mutation, task-head models."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bertgeom.weights import LayerWeights, extract_layer_weights, find_encoder_layers  # noqa: E402


def _config(**kw):
    base = dict(
        vocab_size=50,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    base.update(kw)
    cfg = transformers.BertConfig(**base)
    cfg._attn_implementation = "eager"
    return cfg


@pytest.fixture(scope="module")
def geom_bert():
    torch.manual_seed(0)
    model = transformers.BertModel(_config()).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.encoder.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return model


def test_shapes_layout_and_metadata(geom_bert):
    lws = extract_layer_weights(geom_bert)
    assert len(lws) == 2
    for i, lw in enumerate(lws):
        assert isinstance(lw, LayerWeights)
        assert lw.index == i
        assert (lw.num_heads, lw.head_dim, lw.d_model) == (3, 8, 24)
        assert lw.ln1_eps == pytest.approx(1e-12) and lw.ln2_eps == pytest.approx(1e-12)
        assert lw.scaling == pytest.approx(8**-0.5)
        assert lw.hidden_act == "gelu"
        assert lw.W_1.shape == (48, 24) and lw.W_2.shape == (24, 48)
        for a in (lw.W_q, lw.W_k, lw.W_v, lw.W_o, lw.b_q, lw.ln1_gamma, lw.W_1):
            assert a.dtype == np.float32
        layer = geom_bert.encoder.layer[i]
        # (out, in) layout kept
        np.testing.assert_array_equal(lw.W_q, layer.attention.self.query.weight.detach().numpy())
        np.testing.assert_array_equal(lw.b_k, layer.attention.self.key.bias.detach().numpy())
        np.testing.assert_array_equal(lw.W_o, layer.attention.output.dense.weight.detach().numpy())
        np.testing.assert_array_equal(lw.W_1, layer.intermediate.dense.weight.detach().numpy())
        # head blocks: rows of W_q/W_k/W_v, columns of W_o
        for h in range(3):
            s = lw.head_slice(h)
            np.testing.assert_array_equal(lw.Wq_heads[h], lw.W_q[s, :])
            np.testing.assert_array_equal(lw.Wv_heads[h], lw.W_v[s, :])
            np.testing.assert_array_equal(lw.Wo_heads[h], lw.W_o[:, s])
            np.testing.assert_array_equal(lw.bq_heads[h], lw.b_q[s])
        with pytest.raises(IndexError):
            lw.head_slice(3)


def test_no_mutation_and_copies(geom_bert):
    before = {k: v.clone() for k, v in geom_bert.state_dict().items()}
    lws = extract_layer_weights(geom_bert)
    lws[0].W_q[:] = 0.0  # arrays are copies, not views of the parameters
    after = geom_bert.state_dict()
    assert before.keys() == after.keys()
    for k in before:
        assert torch.equal(before[k], after[k]), k
    assert not geom_bert.training


def test_sequence_classification_model_and_pickle():
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(_config(num_labels=3)).eval()
    lws = extract_layer_weights(model)
    assert len(lws) == 2
    np.testing.assert_array_equal(
        lws[1].W_v, model.bert.encoder.layer[1].attention.self.value.weight.detach().numpy()
    )
    parts = find_encoder_layers(model)  # the adapter's layer parts: views of the model's own parameters
    assert len(parts) == 2 and parts[1].W_v is model.bert.encoder.layer[1].attention.self.value.weight
    lw2 = pickle.loads(pickle.dumps(lws[0]))
    np.testing.assert_array_equal(lw2.W_q, lws[0].W_q)
    assert lw2.num_heads == 3


def test_other_head_dims():
    torch.manual_seed(0)
    model = transformers.BertModel(_config(num_attention_heads=4, hidden_size=24)).eval()
    lw = extract_layer_weights(model)[0]
    assert (lw.num_heads, lw.head_dim) == (4, 6)
    assert lw.Wq_heads.shape == (4, 6, 24) and lw.Wo_heads.shape == (4, 24, 6)


def test_rejects_non_bert():
    with pytest.raises(ValueError, match="bertgeom reads BERT"):
        extract_layer_weights(torch.nn.Linear(3, 3))
