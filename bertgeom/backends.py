"""Runtimes for the classification forward: torch, or an exported graph run by OpenVINO or ONNX Runtime.

Classification reads only the logits, so its forward can leave torch: the classifier's graph
(embeddings, every layer with fused attention, the last layer for the [CLS] query alone, pooler and
classifier, exactly :func:`bertgeom.forward.run_forward` with ``logits_only``) is exported once to
ONNX and run by a runtime made for inference on that CPU. Which runtime and precision win depends on
the CPU, and not only on the units it reports: two CPUs with the same flags (AVX-512 bf16, no AMX)
measured opposite winners (docs/speed.md). So :func:`choose_backend` reads a **measured choice**
first: every candidate path timed on this machine on real inputs, the fastest that keeps every call
(:func:`pick_fastest`), stored per machine, weights and asked precision (:func:`store_choice`). Where
nothing was measured yet it falls back on a rule from what the CPU reports
(:func:`bertgeom.runtime.machine`), following the table in docs/speed.md. The analyses,
precompute's attention maps and integrated gradients (it needs gradients) stay on torch.

**Optional.** ``openvino`` and ``onnxruntime`` are the ``fast`` extra (``pip install .[fast]``),
imported only here and only when used; without them every forward runs on torch and ``auto``
says so. :func:`available_backends` lists what this installation can run.

**Cached, never rebuilt per run.** The ONNX export is written under ``$BERTGEOM_CACHE_DIR/export``
(default ``$XDG_CACHE_HOME/bertgeom/export`` or ``~/.cache/bertgeom/export``), named by a hash of
every weight of the classifier, its configuration and the export format (:func:`weights_key`): a
changed weight makes a new file, the same weights reuse it. OpenVINO keeps its compiled blob in the
same folder (its ``CACHE_DIR``).

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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertgeom.safety import write_atomically

__all__ = [
    "BACKENDS",
    "EXPORT_FORMAT",
    "BackendError",
    "BackendTrial",
    "MeasuredChoice",
    "available_backends",
    "candidate_paths",
    "choose_backend",
    "measure_paths",
    "pick_fastest",
    "store_choice",
    "stored_choice",
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
                   info: dict | None = None, available: list[str] | None = None,
                   weights: str = "") -> tuple[str, str]:
    """``(backend, precision)`` for the classification forward on ``device``.

    ``precision`` (``auto``/``fp32``/``bf16``) is resolved by the policy of
    :func:`bertgeom.forward.resolve_precision` (``auto``: bf16 where the device has bf16 units). An
    explicit ``backend`` is kept (``BackendError`` when it is not installed or not for this device).

    ``auto`` on a CPU, for a model whose ``weights`` hash is given, takes the choice measured on this
    machine for these weights and this asked precision when there is one (:func:`stored_choice`; it
    may pick fp32 where the policy says bf16, when bf16 measured no faster). Otherwise a rule from what
    the CPU reports (``info``: :func:`bertgeom.runtime.machine`; ``available``:
    :func:`available_backends`), following docs/speed.md's table:

    * a GPU, a CPU with AMX, or an Intel CPU: torch (with AMX torch bf16 ran ~3x its fp32; on an
      Intel Xeon without AMX torch ran ahead of OpenVINO in both precisions);
    * an AMD CPU: OpenVINO when installed, in the resolved precision (with AVX-512 bf16, a Zen 4, its
      bf16 ran ahead of torch bf16; with AVX2 only, a Zen 3, its f32 ran 1.3x torch fp32); torch
      without it;
    * any other CPU (never measured): torch.

    ONNX Runtime is never chosen by the rule (it measured behind OpenVINO wherever both ran); asked for
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
        avail = available_backends() if available is None else list(available)
        if weights:
            measured = stored_choice(weights, kind, precision, info)
            if measured is not None and measured.backend in avail:
                return measured.backend, measured.precision
        return rule_backend(info, avail), prec
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


def rule_backend(info: dict | None = None, available: list[str] | None = None) -> str:
    """The CPU backend :func:`choose_backend` runs where nothing was measured on this machine: OpenVINO
    on an AMD CPU without AMX when it is installed (where it measured fastest), torch everywhere else."""
    if info is None:
        from bertgeom.runtime import machine

        info = machine()
    avail = available_backends() if available is None else list(available)
    amd = "amd" in str(info.get("vendor", "")).lower()
    return "openvino" if amd and not info.get("amx") and "openvino" in avail else "torch"


# ---------------------------------------------------------------------------------------------
# Measured choice
# ---------------------------------------------------------------------------------------------
#: Version of a stored measured choice (part of its key: a change of what is measured misses).
CHOICE_FORMAT = 1
#: A path keeps the calls when every call equals torch fp32's and its logits differ by at most this.
LOGIT_TOLERANCE = 0.05
#: Paths within this share of the fastest count as tied; the tie goes to fp32, then to torch.
TIE_SHARE = 0.05


@dataclass(frozen=True)
class BackendTrial:
    """One candidate path timed on this machine: its rate, and how far its logits are from torch fp32's
    on the same inputs."""

    backend: str
    precision: str
    inputs_per_s: float
    max_abs_logit_diff: float
    calls_kept: int
    n: int
    error: str = ""

    @property
    def keeps_calls(self) -> bool:
        return not self.error and self.calls_kept == self.n and self.max_abs_logit_diff <= LOGIT_TOLERANCE


@dataclass(frozen=True)
class MeasuredChoice:
    """The path ``auto`` runs on this machine for one model, and the trials it was picked from."""

    backend: str
    precision: str
    trials: tuple[BackendTrial, ...]
    machine: str
    measured_at: str
    seconds: float = 0.0

    def to_json(self) -> dict:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping) -> MeasuredChoice:
        trials = tuple(BackendTrial(**t) for t in data["trials"])
        return cls(str(data["backend"]), str(data["precision"]), trials, str(data["machine"]),
                   str(data["measured_at"]), float(data.get("seconds", 0.0)))

    def table_markdown(self) -> str:
        """The trials as a Markdown table, the chosen path marked."""
        lines = ["| backend | precision | inputs/s | max \\|Δlogit\\| | calls kept | |",
                 "|---|---|---|---|---|---|"]
        for t in sorted(self.trials, key=lambda t: -t.inputs_per_s):
            mark = "**chosen**" if (t.backend, t.precision) == (self.backend, self.precision) else (
                t.error or ("" if t.keeps_calls else "changes calls or logits"))
            lines.append(f"| {t.backend} | {t.precision} | {t.inputs_per_s:.1f} | {t.max_abs_logit_diff:.1e} | "
                         f"{t.calls_kept}/{t.n} | {mark} |")
        return "\n".join(lines)


def candidate_paths(device: str = "cpu", precision: str = "auto", info: dict | None = None,
                    available: list[str] | None = None) -> list[tuple[str, str]]:
    """The ``(backend, precision)`` paths worth timing on ``device``: torch, OpenVINO and ONNX Runtime
    (when installed) in fp32, and torch and OpenVINO in bf16 where the CPU has bf16 units, unless
    ``precision`` asks for one. On a GPU: torch alone (no timing needed). torch fp32 comes first: it is
    the reference the others' logits are compared with."""
    kind = str(device).split(":")[0]
    want = (precision or "auto").strip().lower()
    if kind != "cpu":
        from bertgeom.forward import resolve_precision

        return [("torch", resolve_precision(precision, kind, "classify"))]
    if info is None:
        from bertgeom.runtime import machine

        info = machine()
    avail = available_backends() if available is None else list(available)
    precs = [want] if want in ("fp32", "bf16") else ["fp32"] + (["bf16"] if info.get("bf16_units") else [])
    out = [("torch", "fp32")] if want != "bf16" else []
    out += [(b, p) for b in ("torch", "openvino", "onnxruntime") for p in precs
            if b in avail and (b, p) != ("torch", "fp32") and not (b == "onnxruntime" and p == "bf16")]
    return out


def pick_fastest(trials: list[BackendTrial] | tuple[BackendTrial, ...]) -> tuple[str, str]:
    """The fastest trial that keeps every call (:attr:`BackendTrial.keeps_calls`); within
    :data:`TIE_SHARE` of it, fp32 before bf16 (the exact one), then torch before a runtime (fewer
    moving parts), then the faster."""
    kept = [t for t in trials if t.keeps_calls]
    if not kept:
        raise BackendError("no backend kept every call of torch fp32 on this machine.")
    best = max(t.inputs_per_s for t in kept)
    tied = [t for t in kept if t.inputs_per_s >= (1 - TIE_SHARE) * best]
    win = min(tied, key=lambda t: (t.precision != "fp32", t.backend != "torch", -t.inputs_per_s))
    return win.backend, win.precision


def _machine_identity(info: dict) -> dict:
    """What a measured choice depends on besides the model: the CPU, the cores and the runtimes' versions."""
    versions = info.get("versions") or {}
    return {"vendor": info.get("vendor", ""), "model": info.get("model", ""), "cores": info.get("cores", 0),
            "isa": info.get("isa", ""), "amx": bool(info.get("amx")), "bf16_units": bool(info.get("bf16_units")),
            "versions": {k: versions.get(k, "") for k in ("torch", "openvino", "onnxruntime")}}


def _choice_key(weights: str, device: str, precision: str, info: dict | None):
    from bertgeom.cache import CacheKey

    if info is None:
        from bertgeom.runtime import machine

        info = machine()
    ident = json.dumps(_machine_identity(info), sort_keys=True)
    return CacheKey.of("backend-choice", CHOICE_FORMAT, weights=weights, device=str(device).split(":")[0],
                       precision=(precision or "auto").strip().lower(),
                       machine=hashlib.sha256(ident.encode()).hexdigest()[:16])


def stored_choice(weights: str, device: str = "cpu", precision: str = "auto",
                  info: dict | None = None) -> MeasuredChoice | None:
    """The choice measured on this machine (same CPU, cores and runtime versions) for these weights and
    this asked precision, or None. Read from ``$BERTGEOM_CACHE_DIR`` (JSON)."""
    from bertgeom.cache import read_json

    data = read_json(_choice_key(weights, device, precision, info))
    if not data:
        return None
    try:
        return MeasuredChoice.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def store_choice(choice: MeasuredChoice, weights: str, device: str = "cpu", precision: str = "auto",
                 info: dict | None = None) -> Path:
    """Keep ``choice`` for :func:`choose_backend` (atomically, JSON); the file's path."""
    from bertgeom.cache import disk_path, write_json

    key = _choice_key(weights, device, precision, info)
    write_json(key, choice.to_json())
    return disk_path(key, "json")


def time_in_streams(fn: Callable[[np.ndarray], np.ndarray], padded: np.ndarray, batch_size: int,
                    streams: int) -> tuple[float, np.ndarray]:
    """Seconds to run ``fn`` over the rows of ``padded`` the way classification runs them (``streams``
    Python threads, each with its share of the torch threads and ``batch_size // streams`` rows a
    call), and the logits in row order."""
    import torch

    from bertgeom.runtime import torch_threads

    streams = max(1, int(streams))
    rows = max(1, int(batch_size) // streams)
    each = max(1, torch.get_num_threads() // streams)
    starts = list(range(0, len(padded), rows))
    out: dict[int, np.ndarray] = {}

    def run(k: int) -> None:
        with torch_threads(each):
            for s in starts[k::streams]:
                out[s] = fn(padded[s : s + rows])

    t0 = time.perf_counter()
    if streams == 1:
        run(0)
    else:
        workers = [threading.Thread(target=run, args=(k,), name=f"bertgeom-measure-{k}") for k in range(streams)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    seconds = time.perf_counter() - t0
    return seconds, np.concatenate([out[s] for s in starts])


def measure_paths(forwards: Mapping[tuple[str, str], Callable[[np.ndarray], np.ndarray]], padded: np.ndarray,
                  batch_size: int, streams: int, rounds: int = 2,
                  errors: Mapping[tuple[str, str], str] | None = None) -> list[BackendTrial]:
    """Time every forward of ``forwards`` (``(backend, precision) -> ids -> logits``; torch fp32 among
    them, the reference) on the same token ids, interleaved over ``rounds`` (the order rotated each
    round, so a change of the machine's load hits every path alike), after one untimed warm-up call each;
    a path's rate is its best round. ``errors``: paths that could not be built, kept as failed trials."""
    keys = list(forwards)
    if ("torch", "fp32") not in forwards:
        raise ValueError("measure_paths needs the torch fp32 forward: the reference of the logits.")
    for k in keys:
        forwards[k](padded[: max(1, batch_size // max(1, streams))])
    best: dict = {k: float("inf") for k in keys}
    logits: dict = {}
    for r in range(max(1, rounds)):
        for k in keys[r % len(keys):] + keys[: r % len(keys)]:
            seconds, lg = time_in_streams(forwards[k], padded, batch_size, streams)
            best[k] = min(best[k], seconds)
            logits[k] = lg
    ref = logits["torch", "fp32"]
    n = len(padded)
    trials = [BackendTrial(b, p, n / best[b, p], float(np.abs(logits[b, p] - ref).max()),
                           int((logits[b, p].argmax(1) == ref.argmax(1)).sum()), n) for b, p in keys]
    trials += [BackendTrial(b, p, 0.0, float("inf"), 0, n, error=msg) for (b, p), msg in (errors or {}).items()]
    return trials


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
    """``export`` in :func:`bertgeom.runtime.cache_dir` (default ``~/.cache/bertgeom/export``)."""
    from bertgeom.runtime import cache_dir

    return cache_dir() / "export"


def _graph_module(model):
    """An ``nn.Module`` ``(input_ids, attention_mask) -> logits`` built from ``model``'s own weights: the
    classification forward of :func:`bertgeom.forward.run_forward` (``attention="sdpa"``,
    ``logits_only``), the same layer function (:func:`bertgeom.forward._layer`) for every family, with
    shapes kept symbolic for the export (padding always masked)."""
    import torch

    from bertgeom.forward import _layer, adapter, layer_context

    ad = adapter(model)
    if ad.head is None:
        raise BackendError("only a classifier (a model with logits) can be exported.")

    class ClassifierGraph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            x = ad.embed(input_ids, None, attention_mask)
            real = attention_mask > 0
            w = attention_mask.to(x.dtype)
            ctx = layer_context(ad, x, real, w / w.sum(-1, keepdim=True))
            last = ad.num_layers - 1
            for i, lp in enumerate(ad.layers):
                x, _ = _layer(ad, lp, x, ctx, None, need_attn=False, fused=True, zero=False,
                              cls_only=i == last and ad.head_reads == "cls")
            if ad.final_norm is not None:
                x = ad.final_norm(x)
            return ad.classify(x, attention_mask)

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

        def export(fh) -> None:
            with torch.inference_mode():
                torch.onnx.export(graph, (ids, mask), fh, dynamo=False, opset_version=17,
                                  input_names=["input_ids", "attention_mask"], output_names=["logits"],
                                  dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                                "attention_mask": {0: "batch", 1: "tokens"}, "logits": {0: "batch"}})

        write_atomically(path, export, sync=False)  # a file unique to this writer, renamed whole onto path
        return path


def export_ahead(loaded, log=None) -> Path | None:
    """Export ``loaded``'s classifier now when ``auto`` would run it on another runtime on this CPU
    (``prepare-sets`` calls it, so a server's first batch does not wait for the export); None when
    torch runs it or the model is not an exportable classifier. A failure is logged, never raised:
    the backend reports it, in its own words, where it is used."""
    try:
        from bertgeom.forward import ForwardError, model_parts

        if choose_backend("auto", "cpu", weights=getattr(loaded, "weights_hash", ""))[0] == "torch":
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
    """A callable ``ids [B, T] int64 -> logits [B, C] float32`` (the model's PAD id masked) running ``model``'s
    exported classification forward on ``backend`` (``openvino`` or ``onnxruntime``) in ``precision``;
    ``threads``: the runtime's threads per call (None: its own default, every core); ``streams``: calls
    it may run at once from as many Python threads (each with ``threads``)."""
    if backend not in ("openvino", "onnxruntime"):
        raise BackendError(f"runtime_classifier runs openvino or onnxruntime, not {backend!r}.")
    if backend not in available_backends():
        raise BackendError(f"the {backend} backend is not installed: pip install 'bertgeom[fast]'.")
    path = exported_onnx(model)
    pad_id = int(getattr(model.config, "pad_token_id", 0) or 0)
    run = _OpenVINO(path, precision, threads, streams) if backend == "openvino" else _OnnxRuntime(path, threads)

    def logits(ids: np.ndarray) -> np.ndarray:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        return run(ids, (ids != pad_id).astype(np.int64))

    return logits
