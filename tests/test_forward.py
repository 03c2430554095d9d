"""The one forward (bertgeom.forward): its recomputation reproduces the model's own forward, its
interventions match independent constructions, the precision policy, and device handling (every
input moved to the model's device, checked on the meta device with a recorder of every op's inputs)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bertgeom.forward import bf16_pays_off, bf16_supported, resolve_precision, run_forward


def _batch(loaded):
    """Two rows of the tiny variant model's vocabulary, the second padded after 9 tokens."""
    rng = np.random.default_rng(0)
    ids = rng.integers(5, loaded.tokenizer.vocab_size if hasattr(loaded.tokenizer, "vocab_size") else 100,
                       size=(2, 14))
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    ids[1, 9:] = 0
    return ids, mask


def _hf(model, ids, mask):
    with torch.inference_mode():
        return model(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(mask), output_attentions=True,
                     output_hidden_states=True, return_dict=True)


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_the_recomputation_reproduces_the_models_own_forward(tiny_variant, attention):
    ids, mask = _batch(tiny_variant)
    ref = _hf(tiny_variant.model, ids, mask)
    out = run_forward(tiny_variant, ids, mask, attentions=attention == "eager", hidden_states=True,
                      attention=attention).arrays()
    np.testing.assert_allclose(out["logits"], ref.logits.numpy(), atol=1e-5)
    for b, n in enumerate(mask.sum(1)):  # real rows only: padding rows are not read by anything
        np.testing.assert_allclose(out["hidden_states"][b, :, :n], torch.stack(ref.hidden_states, 1)[b, :, :n].numpy(),
                                   atol=1e-5)
    if attention == "eager":
        np.testing.assert_allclose(out["attentions"], torch.stack(ref.attentions, 1).numpy(), atol=1e-6)
    # "model" is the model's own forward, unchanged
    own = run_forward(tiny_variant, ids, mask, attention="model").arrays()
    np.testing.assert_array_equal(own["logits"], ref.logits.numpy())


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_logits_only_computes_the_last_layer_for_cls_alone_with_the_same_logits(tiny_variant, attention):
    """The classification forward: last layer for the [CLS] query only, against the model's own full forward,
    with padding (row 2) and with a disabled head (the intervention still reaches the shortened layer)."""
    ids, mask = _batch(tiny_variant)
    ref = _hf(tiny_variant.model, ids, mask)
    out = run_forward(tiny_variant, ids, mask, attention=attention, logits_only=True)
    assert tuple(out.last_hidden.shape) == (2, 1, tiny_variant.model.config.hidden_size)
    np.testing.assert_allclose(out.logits.numpy(), ref.logits.numpy(), atol=1e-5)
    np.testing.assert_allclose(out.cls[:, -1].numpy(), ref.hidden_states[-1][:, 0].numpy(), atol=1e-5)
    dis = np.zeros((tiny_variant.num_layers, tiny_variant.num_heads), bool)
    dis[-1, 1] = True
    full = run_forward(tiny_variant, ids, mask, disabled=dis, disable_as="zero", attention=attention).arrays()
    short = run_forward(tiny_variant, ids, mask, disabled=dis, disable_as="zero", attention=attention,
                        logits_only=True).arrays()
    np.testing.assert_allclose(short["logits"], full["logits"], atol=1e-5)
    np.testing.assert_allclose(short["cls"], full["cls"], atol=1e-5)
    # the removed head changed the last [CLS] vector (the tiny random model's logits barely move)
    assert np.abs(full["cls"][:, -1] - ref.hidden_states[-1][:, 0].numpy()).max() > 1e-3
    with pytest.raises(ValueError, match="logits_only"):
        run_forward(tiny_variant, ids, mask, logits_only=True, hidden_states=True)
    # gradients through the shortened layer equal the full forward's (integrated gradients uses it)
    emb = tiny_variant.model.base_model.embeddings.word_embeddings
    grads = []
    for short_layer in (False, True):
        x = emb(torch.as_tensor(ids[:1])).detach().requires_grad_(True)
        out = run_forward(tiny_variant, inputs_embeds=x, grad=True, attention=attention, logits_only=short_layer)
        out.logits[0, 3].backward()
        grads.append(x.grad.numpy().copy())
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-6)
    assert np.abs(grads[0]).max() > 0


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_a_zeroed_head_equals_a_model_whose_head_writes_nothing(tiny_variant, attention):
    """disable_as='zero' against an independent construction: a copy whose head's value projection is zero."""
    ids, mask = _batch(tiny_variant)
    layer, head = 1, 2
    model = copy.deepcopy(tiny_variant.model)
    sa = model.base_model.encoder.layer[layer].attention.self
    d = int(sa.attention_head_size)
    with torch.no_grad():
        sa.value.weight[head * d:(head + 1) * d] = 0.0
        sa.value.bias[head * d:(head + 1) * d] = 0.0
    ref = _hf(model, ids, mask)
    dis = np.zeros((tiny_variant.num_layers, tiny_variant.num_heads), bool)
    dis[layer, head] = True
    out = run_forward(tiny_variant, ids, mask, disabled=dis, disable_as="zero", attention=attention).arrays()
    np.testing.assert_allclose(out["logits"], ref.logits.numpy(), atol=1e-5)
    uniform = run_forward(tiny_variant, ids, mask, disabled=dis, attention=attention).arrays()
    assert np.abs(uniform["logits"] - out["logits"]).max() > 1e-6  # the two recipes are different interventions


def test_the_precision_policy():
    assert resolve_precision("fp32", "cpu", "classify") == "fp32"
    assert resolve_precision("bf16", "cpu", "analysis") == "bf16"
    assert resolve_precision("auto", "cpu", "analysis") == "fp32"  # numbers read one by one stay fp32
    want = "bf16" if bf16_pays_off("cpu") else "fp32"  # bf16 units that run faster than fp32 here
    assert resolve_precision("auto", "cpu", "classify") == want
    assert resolve_precision("auto", "cpu", "attribution") == want
    cap = str(torch.backends.cpu.get_cpu_capability()).upper()
    assert bf16_supported("cpu") == (cap.startswith(("AVX512", "AMX")) and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert bf16_supported("mps") is False
    assert bf16_pays_off("mps") is False
    if not bf16_supported("cpu"):  # no units: never worth it, nothing measured
        assert bf16_pays_off("cpu") is False
    with pytest.raises(ValueError, match="auto, fp32 or bf16"):
        resolve_precision("fp16")


def test_bf16_autocast_keeps_the_call_and_leaves_the_shared_model_fp32(tiny_variant):
    ids, mask = _batch(tiny_variant)
    a = run_forward(tiny_variant, ids, mask, attention="sdpa").arrays()["logits"]
    out = run_forward(tiny_variant, ids, mask, attention="sdpa", precision="bf16")
    assert out.precision == "bf16" and out.logits.dtype == torch.bfloat16
    np.testing.assert_allclose(out.arrays()["logits"], a, atol=0.05)
    assert next(tiny_variant.model.parameters()).dtype == torch.float32
    frame = out.to_frame(tiny_variant.labels)
    assert list(frame.columns) == list(tiny_variant.labels) and len(frame) == 2


class DeviceRecorder(TorchDispatchMode):
    """Records every op whose (non-scalar) tensor inputs sit on more than one device: on the meta device
    torch would run such a mix silently, so this is what catches an input left on the CPU."""

    def __init__(self):
        super().__init__()
        self.mixed: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        devices = set()

        def visit(x):
            if isinstance(x, torch.Tensor) and x.dim() > 0:
                devices.add(x.device.type)
            elif isinstance(x, (list, tuple)):
                for y in x:
                    visit(y)

        visit(args)
        visit(list((kwargs or {}).values()))
        if len(devices) > 1:
            self.mixed.append(f"{func}: {sorted(devices)}")
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def meta_model(tiny_variant):
    """A copy of the tiny classifier whose weights live on the meta device (a device that is not the CPU)."""
    import dataclasses

    return dataclasses.replace(tiny_variant, model=copy.deepcopy(tiny_variant.model).to("meta"))


def test_every_forward_path_moves_its_inputs_to_the_models_device(meta_model):
    from bertgeom.analysis.ablation import forward_with_disabled_heads
    from bertgeom.analysis.gradients import attention_gradients
    from bertgeom.analysis.attributions import _first_edges, integrated_gradients

    ids, mask = _batch(meta_model)  # numpy, on the CPU
    dis = np.zeros((meta_model.num_layers, meta_model.num_heads), bool)
    dis[0, 1] = True
    start = np.zeros((1, ids.shape[1], meta_model.config.hidden_size), np.float32)
    runs = {
        "eager, attentions, disabled": dict(attentions=True, hidden_states=True, disabled=dis, attention="eager"),
        "sdpa, disabled": dict(disabled=dis, attention="sdpa"),
        "resume from numpy hidden states": dict(start_layer=1, start_hidden=start, attention="sdpa"),
        "cpu word embeddings with gradients": dict(inputs_embeds=torch.zeros(2, ids.shape[1],
                                                                             meta_model.config.hidden_size),
                                                   grad=True, attention="sdpa"),
    }
    for name, kw in runs.items():
        rec = DeviceRecorder()
        with rec:
            out = run_forward(meta_model, None if "inputs_embeds" in kw else ids, mask, **kw)
        assert not rec.mixed, (name, rec.mixed[:3])
        assert out.logits.device.type == "meta" and out.logits.shape == (2, len(meta_model.labels)), name
    # the callers: each runs its forward on the device and fails only when copying results out of meta
    callers = {
        "head disabling": lambda: forward_with_disabled_heads(meta_model, ids, dis, attention_mask=mask),
        "attention gradients": lambda: attention_gradients(meta_model, ids[0]),
        "integrated gradients": lambda: integrated_gradients(meta_model, ids[0], 0, steps=2, batch_size=2),
        "integrated gradients' probe of the path": lambda: _first_edges(meta_model, ids[0], 0, "fp32", 0.0, 1.0,
                                                                        segments=4, probe=8),
    }
    for name, call in callers.items():
        rec = DeviceRecorder()
        with pytest.raises((NotImplementedError, RuntimeError), match="meta"), rec:
            call()
        assert not rec.mixed, (name, rec.mixed[:3])


def test_the_attention_path_resolves_auto_and_refuses_what_cannot_be_honoured():
    """run_forward's choice of path, one named step: the model's own forward when nothing is
    intervened on, eager when attention weights are wanted, fused SDPA otherwise."""
    from bertgeom.forward import _attention_path

    kw = dict(attentions=False, hidden_states=False, logits_only=False, disabled=None, start_layer=0,
              start_hidden=None, grad=False)
    assert _attention_path("auto", **kw) == "model"
    assert _attention_path("auto", **{**kw, "grad": True}) == "sdpa"
    assert _attention_path("auto", **{**kw, "grad": True, "attentions": True}) == "eager"
    assert _attention_path("model", **{**kw, "logits_only": True}) == "sdpa"
    assert _attention_path("eager", **{**kw, "disabled": np.zeros((1, 1), bool)}) == "eager"
    with pytest.raises(ValueError, match="recomputed forward"):
        _attention_path("model", **{**kw, "disabled": np.zeros((1, 1), bool)})
    with pytest.raises(ValueError, match="no attention weights"):
        _attention_path("sdpa", **{**kw, "attentions": True})
    with pytest.raises(ValueError, match="logits_only"):
        _attention_path("auto", **{**kw, "logits_only": True, "hidden_states": True})
