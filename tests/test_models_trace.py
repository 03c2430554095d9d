"""Model registry, loader and the one-forward-pass trace, on real models."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bertgeom.models import REGISTRY, ModelLoadError, load_model, resolve_spec
from bertgeom.attention import correct_attention, project_qkv
from bertgeom.inputs import InputError, encode_text
from bertgeom.trace import run_batch, run_trace
from bertgeom.weights import extract_layer_weights

SENTENCE = "The cat sat on the mat because it was tired."


def test_minilm_is_bundled_and_shaped_as_documented(minilm):
    assert minilm.num_layers == 6 and minilm.num_heads == 12 and minilm.head_dim == 32
    assert minilm.config._attn_implementation == "eager"
    assert not any(p.requires_grad for p in minilm.model.parameters())


def test_attentions_come_back_for_every_layer_and_rows_sum_to_one(minilm):
    trace = run_trace(minilm, SENTENCE)
    t = len(trace.tokens)
    assert trace.tokens[0] == "[CLS]" and trace.tokens[-1] == "[SEP]"
    assert trace.attentions.shape == (6, 12, t, t)
    assert trace.hidden_states.shape == (7, t, 384)
    np.testing.assert_allclose(trace.attentions.sum(-1), 1.0, atol=1e-5)
    # not uniform: a real pretrained model has structure
    assert trace.attentions.max() > 0.5


def test_token_spans_point_back_into_the_text(minilm):
    enc = encode_text(minilm, SENTENCE)
    for tok, (a, b) in zip(enc.tokens, enc.spans):
        if a >= 0:
            assert SENTENCE[a:b].lower() == tok.lstrip("#")
    assert enc.is_cls[0] and enc.is_sep[-1]
    assert enc.is_punct[enc.tokens.index(".")]
    assert enc.content_mask.sum() == len(enc.tokens) - 2


@pytest.mark.parametrize("layer", [0, 3, 5])
def test_queries_and_keys_rebuild_the_models_attention(minilm, layer):
    trace = run_trace(minilm, SENTENCE)
    lw = extract_layer_weights(minilm.model)[layer]
    q, k, _ = project_qkv(trace.hidden_states[layer], lw)
    assert q.shape == (12, len(trace.tokens), 32)
    np.testing.assert_allclose(correct_attention(trace.hidden_states[layer], lw), trace.attentions[layer], atol=1e-5)


def test_tiny_random_bert_loads_from_a_safetensors_directory(tiny_bert, tiny_bert_dir):
    assert (tiny_bert_dir / "model.safetensors").exists()
    trace = run_trace(tiny_bert, "hello world")
    assert trace.attentions.shape[:2] == (2, 4)
    np.testing.assert_allclose(trace.attentions.sum(-1), 1.0, atol=1e-5)
    lw = extract_layer_weights(tiny_bert.model)[1]
    np.testing.assert_allclose(correct_attention(trace.hidden_states[1], lw), trace.attentions[1], atol=1e-5)


def test_batched_pass_matches_single_passes(minilm):
    a, b = encode_text(minilm, "Short one."), encode_text(minilm, SENTENCE)
    batch = run_batch(minilm, [a, b])
    single = run_trace(minilm, a)
    assert batch[0].attentions.shape == single.attentions.shape
    np.testing.assert_allclose(batch[0].attentions, single.attentions, atol=1e-5)
    np.testing.assert_allclose(batch[0].hidden_states, single.hidden_states, atol=1e-4)


def test_the_shared_model_is_not_mutated_by_a_trace(minilm):
    before = {k: v.clone() for k, v in minilm.model.state_dict().items()}
    run_trace(minilm, SENTENCE)
    after = minilm.model.state_dict()
    assert all(torch_equal(before[k], after[k]) for k in before)


def test_a_shared_trace_is_read_only_and_still_analysable(minilm):
    """The server shares one trace between sessions: writes fail loudly, reads and re-runs work."""
    import warnings

    from bertgeom.analysis.heads import head_features
    from bertgeom.tokens import TokenKinds

    tr = run_trace(minilm, SENTENCE).read_only()
    for arr in (tr.attentions, tr.hidden_states, tr.encoded.input_ids, tr.encoded.is_cls):
        with pytest.raises(ValueError):
            arr.flat[0] = arr.flat[0]
    enc = tr.encoded
    feats = head_features(tr.attentions, TokenKinds(is_cls=enc.is_cls, is_sep=enc.is_sep, is_punct=enc.is_punct))
    assert all(v.shape == tr.attentions.shape[:2] for v in feats.features.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it is handed a read-only array to share
        again = run_batch(minilm, [enc])[0]
    np.testing.assert_allclose(again.attentions, tr.attentions, atol=1e-6)


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_unknown_model_ids_get_one_clear_sentence(tmp_path):
    with pytest.raises(ModelLoadError, match="not on this machine"):
        load_model("no-such-org/no-such-model-xyz")
    with pytest.raises(ModelLoadError, match="No model directory"):
        load_model(str(tmp_path / "missing"))
    with pytest.raises(ModelLoadError, match="pick one of"):
        resolve_spec("   ")


def test_pickled_weights_are_refused(tmp_path, tiny_bert_dir):
    """A directory with only a PyTorch .bin checkpoint is not unpickled."""
    import shutil

    import torch

    target = tmp_path / "bin_only"
    shutil.copytree(tiny_bert_dir, target)
    from safetensors.torch import load_file

    torch.save(load_file(str(target / "model.safetensors")), target / "pytorch_model.bin")
    (target / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="safetensors"):
        load_model(str(target))


def test_empty_and_oversized_text_are_refused(minilm):
    with pytest.raises(InputError, match="empty"):
        encode_text(minilm, "   ")
    with pytest.raises(InputError, match="at most"):
        encode_text(minilm, "a " * 20_000)


def test_long_text_is_truncated_with_a_note(minilm):
    enc = encode_text(minilm, "word " * 600)
    assert enc.n_tokens == 512 and enc.tokens[-1] == "[SEP]"
    assert any("first 510" in n for n in enc.notes)


def test_registry_has_the_bundled_default():
    assert "minilm-l6" in REGISTRY


def test_importing_bertgeom_does_not_import_streamlit():
    code = ("import sys, bertgeom, bertgeom.models, bertgeom.trace, bertgeom.figures.base, bertgeom.figures.heads; "
            "print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
