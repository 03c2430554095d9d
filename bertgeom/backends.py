"""Runtimes for the classification forward: torch, or an exported graph run by OpenVINO or ONNX Runtime.

Classification reads only the logits, so its forward can leave torch: the classifier's graph
(embeddings, every layer with fused attention, the last layer for the [CLS] query alone, pooler and
classifier, exactly :func:`bertgeom.forward.run_forward` with ``logits_only``) is exported once to
ONNX and run by a runtime made for inference on that CPU. Which runtime and precision win depends on
the CPU's units (AMX, AVX-512 bf16, AVX2 only): :func:`choose_backend` decides from what the CPU
reports (:func:`bertgeom.runtime.machine`), following the measured table in docs/speed.md. The
analyses, precompute's attention maps and integrated gradients (it needs gradients) stay on torch.

**Optional.** ``openvino`` and ``onnxruntime`` are the ``fast`` extra (``pip install .[fast]``),
imported only here and only when used; without them every forward runs on torch and ``auto``
says so. :func:`available_backends` lists what this installation can run.

**Cached, never rebuilt per run.** The ONNX export is written under ``$BERTGEOM_CACHE_DIR/export``
(default ``~/.cache/bertgeom/export``), named by a hash of every weight of the classifier, its
configuration and the export format (:func:`weights_key`): a changed weight makes a new file, the
same weights reuse it. OpenVINO keeps its compiled blob in the same folder (its ``CACHE_DIR``).

References: OpenVINO Runtime, "Inference precision hint" and "Model caching" (docs.openvino.ai);
ONNX Runtime, "Graph optimizations" (onnxruntime.ai/docs/performance); PyTorch ``torch.onnx.export``
(TorchScript-based exporter, ``dynamo=False``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from pathlib import Path

import numpy as np

__all__ = [
    "BACKENDS",
    "EXPORT_FORMAT",
    "BackendError",
    "available_backends",
    "choose_backend",
    "exported_onnx",
    "runtime_classifier",
    "weights_key",
]

#: The choices of ``--backend``.
BACKENDS = ("auto", "torch", "openvino", "onnxruntime")
#: Version of the exported graph (part of the cache key: a change of the export code misses).
EXPORT_FORMAT = 1
_PACKAGES = {"openvino": "openvino", "onnxruntime": "onnxruntime"}


class BackendError(ValueError):
    """A backend cannot run here (one sentence)."""


def available_backends() -> list[str]:
    """The backends this installation can run: torch always, OpenVINO and ONNX Runtime when installed
    (the ``fast`` extra). ONNX export needs the ``onnx`` package too."""
    out = ["torch"]
    has_onnx = importlib.util.find_spec("onnx") is not None
    for name, pkg in _PACKAGES.items():
        if has_onnx and importlib.util.find_spec(pkg) is not None:
            out.append(name)
    return out


def choose_backend(backend: str = "auto", device: str = "cpu", precision: str = "auto",
                   info: dict | None = None, available: list[str] | None = None) -> tuple[str, str]:
    """``(backend, precision)`` for the classification forward on ``device``.

    ``precision`` (``auto``/``fp32``/``bf16``) is resolved by the policy of
    :func:`bertgeom.forward.resolve_precision` (``auto``: bf16 where the device has bf16 units). An
    explicit ``backend`` is kept (``BackendError`` when it is not installed or not for this device);
    ``auto`` follows docs/speed.md's measured table, from what the CPU reports (``info``:
    :func:`bertgeom.runtime.machine`; ``available``: :func:`available_backends`):

    * a GPU, or a CPU with AMX: torch (with AMX torch bf16 ran ~3x its fp32; OpenVINO unmeasured there);
    * any other CPU: OpenVINO when installed, in the resolved precision (with AVX-512 bf16 and no AMX,
      a Zen 4, its bf16 ran ahead of torch bf16; with AVX2 only, a Zen 3, its f32 ran 1.3x torch fp32);
      torch without it.

    ONNX Runtime is never chosen by ``auto`` (it measured behind OpenVINO wherever both ran); asked for
    with ``auto`` precision it runs fp32, with bf16 it raises (its CPU kernels have no bf16 matmuls)."""
    from bertgeom.forward import resolve_precision

    backend = (backend or "auto").strip().lower()
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}: use {', '.join(BACKENDS)}.")
    kind = str(device).split(":")[0]
    prec = resolve_precision(precision, kind, "classify")
    if backend == "auto":
        if kind != "cpu":
            return "torch", prec
        if info is None:
            from bertgeom.runtime import machine

            info = machine()
        avail = available_backends() if available is None else list(available)
        return ("torch" if info.get("amx") or "openvino" not in avail else "openvino"), prec
    if backend != "torch":
        avail = available_backends() if available is None else list(available)
        if kind != "cpu":
            raise BackendError(f"the {backend} backend runs on the CPU here; use --backend torch on {kind}.")
        if backend not in avail:
            raise BackendError(f"the {backend} backend is not installed: pip install 'bertgeom[fast]' "
                               "(or use --backend torch).")
        if backend == "onnxruntime" and prec == "bf16" and (precision or "auto").strip().lower() == "auto":
            prec = "fp32"
        elif backend == "onnxruntime" and prec == "bf16":
            raise BackendError("ONNX Runtime's CPU kernels have no bf16 matmuls: use --precision fp32 with it.")
    return backend, prec


# ---------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------
def weights_key(model) -> str:
    """Hash of every parameter and buffer of ``model`` (names, dtypes, shapes, bytes), its
    configuration and :data:`EXPORT_FORMAT`: the name of its cached export."""
    import torch

    h = hashlib.sha256(f"bertgeom-export-{EXPORT_FORMAT}".encode())
    h.update(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update((t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes())
    return h.hexdigest()[:24]


def export_dir() -> Path:
    """``$BERTGEOM_CACHE_DIR/export`` (default ``~/.cache/bertgeom/export``)."""
    from bertgeom.runtime import cache_dir

    return cache_dir() / "export"


def _graph_module(model):
    """An ``nn.Module`` ``(input_ids, attention_mask) -> logits`` built from ``model``'s own sub-modules:
    the classification forward of :func:`bertgeom.forward.run_forward` (``attention="sdpa"``,
    ``logits_only``) with shapes kept symbolic for the export (padding always masked)."""
    import torch

    from bertgeom.forward import model_parts

    _, _, emb, layers, head = model_parts(model)
    if head is None:
        raise BackendError("only a classifier (a model with logits) can be exported.")

    class ClassifierGraph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            x = emb(input_ids=input_ids, token_type_ids=torch.zeros_like(input_ids))
            mask = attention_mask[:, None, None, :] > 0
            last = len(layers) - 1
            for i, layer in enumerate(layers):
                sa = layer.attention.self
                h, d = int(sa.num_attention_heads), int(sa.attention_head_size)
                xq = x[:, :1] if i == last else x

                def split(lin, inp):
                    return lin(inp).unflatten(-1, (h, d)).transpose(1, 2)

                ctx = torch.nn.functional.scaled_dot_product_attention(
                    split(sa.query, xq), split(sa.key, x), split(sa.value, x), attn_mask=mask, scale=d**-0.5)
                ctx = ctx.transpose(1, 2).flatten(2)
                att = layer.attention.output(ctx, xq)
                x = layer.output(layer.intermediate(att), att)
            return head(x)

    return ClassifierGraph().eval()


_EXPORT_LOCK = threading.Lock()


def exported_onnx(model) -> Path:
    """The ONNX file of ``model``'s classification forward (fp32 weights), exported on first use and
    read from the cache afterwards (:func:`weights_key`). Written to a temporary name and renamed, so a
    concurrent or interrupted export never leaves a half file under the final name."""
    import copy

    import torch

    key = weights_key(model)
    path = export_dir() / f"classifier-{key}.onnx"
    with _EXPORT_LOCK:
        if path.exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        fp32 = copy.deepcopy(model).to(device="cpu", dtype=torch.float32).eval()
        graph = _graph_module(fp32)
        ids = torch.ones((2, 16), dtype=torch.long)
        mask = torch.ones((2, 16), dtype=torch.long)
        mask[1, 12:] = 0
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with torch.inference_mode():
                torch.onnx.export(graph, (ids, mask), str(tmp), dynamo=False, opset_version=17,
                                  input_names=["input_ids", "attention_mask"], output_names=["logits"],
                                  dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                                "attention_mask": {0: "batch", 1: "tokens"}, "logits": {0: "batch"}})
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path


def export_ahead(loaded, log=None) -> Path | None:
    """Export ``loaded``'s classifier now when ``auto`` would run it on another runtime on this CPU
    (``prepare-sets`` calls it, so a server's first batch does not wait for the export); None when
    torch runs it or the model is not an exportable classifier. A failure is logged, never raised:
    the backend reports it, in its own words, where it is used."""
    try:
        from bertgeom.forward import ForwardError, model_parts

        if choose_backend("auto", "cpu")[0] == "torch":
            return None
        try:
            if model_parts(loaded.model)[4] is None:
                return None
        except ForwardError:
            return None
        return exported_onnx(loaded.model)
    except Exception as exc:  # noqa: BLE001 - ahead-of-time work only
        if log:
            log(f"export for the fast backend failed: {exc}")
        return None


# ---------------------------------------------------------------------------------------------
# Runtimes
# ---------------------------------------------------------------------------------------------
_OPENVINO_IMPORT_LOCK = threading.Lock()


def import_openvino():
    """``openvino``, imported with its usage telemetry declined.

    ``import openvino`` sends an "import" event to Google Analytics unless a consent file in the
    user's home says no or the environment looks like CI (``openvino_telemetry``: no consent file
    counts as consent). The send runs from a background thread that forks a process: offline it
    waits for its timeout, and forked from a server whose other threads were inside OpenVINO it hung
    both classify threads for good (issue 33, a suite run under load). bertgeom sends nothing
    anywhere, so the import runs with the telemetry package's CI opt-out set, and the variable is
    restored afterwards. An ``openvino`` already imported by the caller is returned as it is."""
    import sys

    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    with _OPENVINO_IMPORT_LOCK:
        saved = os.environ.get("CI")
        os.environ["CI"] = "true"  # openvino_telemetry's OptInChecker declines in CI: nothing is sent
        try:
            import openvino
        finally:
            if saved is None:
                os.environ.pop("CI", None)
            else:
                os.environ["CI"] = saved
    return openvino


class _OpenVINO:
    """The exported graph compiled by OpenVINO for the CPU (``f32`` or the ``bf16`` inference-precision
    hint), one infer request per calling thread (requests of one compiled model run concurrently)."""

    def __init__(self, onnx_path: Path, precision: str, threads: int | None, streams: int = 1):
        ov = import_openvino()

        core = ov.Core()
        core.set_property({"CACHE_DIR": str(export_dir() / "openvino")})
        cfg = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32"}
        if streams > 1:  # one executor per stream, so as many requests run at once
            cfg.update(PERFORMANCE_HINT="THROUGHPUT", NUM_STREAMS=int(streams))
        else:
            cfg["PERFORMANCE_HINT"] = "LATENCY"
        if threads:
            cfg["INFERENCE_NUM_THREADS"] = int(threads) * max(1, int(streams))
        self.compiled = core.compile_model(str(onnx_path), "CPU", cfg)
        self._local = threading.local()

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        req = getattr(self._local, "req", None)
        if req is None:
            req = self._local.req = self.compiled.create_infer_request()
        # shared inputs: the request reads the caller's arrays in place. Copying them into the request's
        # own tensors (the default) resizes and fills those tensors from Python, and two streams doing so
        # at once deadlocked inside OpenVINO's bindings (one thread holding the interpreter lock, the
        # other a lock of the runtime's): two `classify` threads hung for good, 1 run in about 4 here
        res = req.infer({"input_ids": ids, "attention_mask": mask}, share_inputs=True)
        return np.array(next(iter(res.values())), dtype=np.float32, copy=True)


class _OnnxRuntime:
    """The exported graph in an ONNX Runtime CPU session (all graph optimisations on)."""

    def __init__(self, onnx_path: Path, threads: int | None):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.asarray(self.session.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0],
                          dtype=np.float32)


def runtime_classifier(model, backend: str, precision: str = "fp32", threads: int | None = None,
                       streams: int = 1):
    """A callable ``ids [B, T] int64 -> logits [B, C] float32`` (PAD = 0 masked) running ``model``'s
    exported classification forward on ``backend`` (``openvino`` or ``onnxruntime``) in ``precision``;
    ``threads``: the runtime's threads per call (None: its own default, every core); ``streams``: calls
    it may run at once from as many Python threads (each with ``threads``)."""
    if backend not in ("openvino", "onnxruntime"):
        raise BackendError(f"runtime_classifier runs openvino or onnxruntime, not {backend!r}.")
    if backend not in available_backends():
        raise BackendError(f"the {backend} backend is not installed: pip install 'bertgeom[fast]'.")
    path = exported_onnx(model)
    run = _OpenVINO(path, precision, threads, streams) if backend == "openvino" else _OnnxRuntime(path, threads)

    def logits(ids: np.ndarray) -> np.ndarray:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        return run(ids, (ids != 0).astype(np.int64))

    return logits
