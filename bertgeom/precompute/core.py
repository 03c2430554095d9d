"""The engine-independent unit of work: one *shard* of records in, its result files out.

A shard is a run of consecutive records of the input (``shard_size`` of them, by position in the
file), so shard boundaries never depend on the engine or on the number of workers. What a record is
and how it is read is the model's input kind's business: its :class:`~bertgeom.inputs.PrecomputeSpec`
(``InputKind.precompute``, supplied by the kind's plug-in; for genomes: parse, align, QC, tokenise)
is all this package asks, so it never imports a plug-in. Every engine
runs the same two steps: :func:`prepare_shard` (read and tokenise records: CPU only, no model) and
:meth:`ShardComputer.forward_shard` (model forward and reductions). :meth:`ShardComputer.run_payload`
chains them in one process (the local pool, the Ray actors); the Ray engine's split mode runs the
first as CPU tasks and the second on (GPU) actors. Either way a shard's files are byte-identical on
the CPU, and the driver is the only writer.

Per record (one Parquet row): prediction, probabilities, the input kind's own columns (genomes: QC
verdict, number of mutations, unknown k-mers), cone index of ``hidden_states[l]`` over the content
tokens for ``l = 0..L`` (``cone_{l}`` = I/m and ``cone_raw_{l}`` = I, rows unit-normalised as in the
official code; ``cone_m`` = m), the selected per-head features ``{feature}_{layer}-{head}`` (1-based
names as in the UI), and the [CLS] vector of every layer (separate ``.npy``, optionally reduced to
``cls_dims``).

Per class (correct predictions only, docs/methods.md §5): the attention maps of the shard summed as
**64-bit fixed-point integers** (``round(A * 2**32)``, [SEP]/[PAD] rows and columns zeroed). Integer
sums are associative, so merging shards in any order, on any engine, gives the same bits; the
quantisation error of a mean is below ``2**-33`` per entry.
"""

from __future__ import annotations

import io
import json
import zlib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
from bertgeom.tables import word_for

#: Per-head features stored by default (scalar ``[L, H]`` features of :mod:`bertgeom.analysis.heads`).
DEFAULT_FEATURES: tuple[str, ...] = ("prev", "next", "self", "cls", "sep", "entropy_norm", "k90_frac", "delta_row")
#: Fixed-point scale of the class-map sums.
MAP_SCALE = float(2**32)
MAP_MODES = ("layer-mean", "heads", "none")
CLS_REDUCTIONS = ("pca", "random")


class PrecomputeError(RuntimeError):
    """A precompute run cannot start or continue; the message is one sentence for the user.

    ``code`` is the CLI's exit status: 2 bad input or parameters (this class), 3 unusable model
    (:class:`PrecomputeModelError`), 4 results directory unusable (:class:`PrecomputeOutputError`)."""

    code = 2


class PrecomputeModelError(PrecomputeError):
    """The model cannot be loaded, is not a classifier or its input kind does not support precompute (exit status 3)."""

    code = 3


class PrecomputeOutputError(PrecomputeError):
    """The results directory cannot be created, written or used now (exit status 4)."""

    code = 4


@dataclass(frozen=True)
class PrecomputeConfig:
    """Everything that changes the *results* (recorded in the manifest; a resumed run must match).

    Engine, workers and cluster address are not here: they do not change a single bit.
    """

    shard_size: int = 256
    batch_size: int = 4
    maps: str = "layer-mean"  # "layer-mean" [L,T,T] | "heads" [L,H,T,T] | "none"
    features: tuple[str, ...] = DEFAULT_FEATURES
    cls_dims: int = 0  # 0 = full width D
    cls_reduce: str = "pca"  # "pca" (fitted on a pilot sample) | "random" (Gaussian projection)
    pca_pilot: int = 256  # genomes of the PCA pilot sample (evenly spaced over the input)
    seed: int = 0
    threads: int = 1  # torch/BLAS threads per worker (fixed so results do not depend on the engine)
    precision: str = "fp32"  # the forward passes' fp32 | bf16 (bertgeom.forward: stored analyses default to fp32)

    def __post_init__(self):
        from bertgeom.analysis.heads import FEATURE_DOCS

        if self.shard_size < 1 or self.batch_size < 1 or self.threads < 1:
            raise PrecomputeError("shard size, batch size and threads must be at least 1.")
        if self.maps not in MAP_MODES:
            raise PrecomputeError(f"--maps must be one of {', '.join(MAP_MODES)}, not '{self.maps}'.")
        if self.cls_reduce not in CLS_REDUCTIONS:
            raise PrecomputeError(f"--cls-reduce must be one of {', '.join(CLS_REDUCTIONS)}.")
        if self.cls_dims < 0 or self.pca_pilot < 2:
            raise PrecomputeError("--cls-dims must be >= 0 and the PCA pilot at least 2 genomes.")
        if self.precision not in ("fp32", "bf16"):
            raise PrecomputeError(f"--precision must resolve to fp32 or bf16, not '{self.precision}'.")
        object.__setattr__(self, "features", tuple(self.features))
        bad = [f for f in self.features if f not in FEATURE_DOCS]
        if bad:
            raise PrecomputeError(f"unknown per-head {word_for(len(bad), 'feature')}: {', '.join(bad)} (see "
                                  "bertgeom.analysis.heads.FEATURE_DOCS).")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["features"] = list(self.features)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PrecomputeConfig":
        return cls(**{k: (tuple(v) if k == "features" else v) for k, v in d.items() if k in cls.__dataclass_fields__})


def precompute_spec(what):
    """The :class:`~bertgeom.inputs.PrecomputeSpec` of a loaded model, a model spec or an input kind's
    name; :class:`PrecomputeModelError` (one sentence) when its input kind does not support precompute."""
    from bertgeom.inputs import INPUT_KINDS, InputError

    spec = None if isinstance(what, str) else getattr(what, "spec", what)
    name = what if spec is None else getattr(spec, "input_kind", None)
    try:
        kind = INPUT_KINDS.of(name)
    except InputError:
        kind = None
    if kind is None or kind.precompute is None:
        able = sorted(k.name for k in INPUT_KINDS.values() if k.precompute is not None)
        who = f"the model '{getattr(spec, 'id', '?')}' reads" if spec is not None else "the input kind is"
        raise PrecomputeModelError(
            f"{who} '{name}' input, which precompute cannot read: give a model whose input kind supports "
            f"precompute ({', '.join(able) or 'none is registered'}).")
    return kind.precompute


#: Arrow types of the input kinds' own columns (``PrecomputeSpec.columns``).
_COLUMN_TYPES = ("string", "int32", "float32")


@dataclass
class ModelDims:
    layers: int
    heads: int
    hidden: int
    labels: tuple[str, ...]
    map_tokens: int  # T of the class maps (genomes: [CLS] + spike k-mers + [SEP])
    kind: str = ""  # the model's input kind
    kind_columns: tuple[tuple[str, str], ...] = ()  # the kind's own columns (name, type)

    @classmethod
    def of(cls, loaded) -> "ModelDims":
        spec = precompute_spec(loaded)
        return cls(loaded.num_layers, loaded.num_heads, int(loaded.config.hidden_size), tuple(loaded.labels),
                   int(spec.map_tokens(loaded)), loaded.spec.input_kind, tuple(spec.columns))


# ---------------------------------------------------------------------------------------------
# Shard payloads (driver -> worker): JSON + zlib, no pickle
# ---------------------------------------------------------------------------------------------
@dataclass
class ShardInput:
    shard: int
    start: int  # 0-based position of the first record in the input
    records: list  # per record, the JSON list of its input kind's ``to_payload``
    labels: list  # true class per record ("" when unlabelled)
    kind: str = ""  # the input kind that reads the records

    def encode(self) -> bytes:
        return zlib.compress(json.dumps(asdict(self), separators=(",", ":")).encode(), 1)

    @classmethod
    def decode(cls, data: bytes) -> "ShardInput":
        return cls(**json.loads(zlib.decompress(data)))


def shard_input(shard: int, start: int, records, truth: dict[str, str], kind: str) -> ShardInput:
    """Payload of one shard from records read by input kind ``kind`` (its ``read_records``)."""
    spec = precompute_spec(kind)
    recs = [spec.to_payload(r) for r in records]
    labels = [truth.get(r.name, "") for r in records]
    return ShardInput(shard, start, recs, labels, kind)


# ---------------------------------------------------------------------------------------------
# Results of one shard (worker -> driver): file name -> bytes
# ---------------------------------------------------------------------------------------------
def shard_stem(shard: int) -> str:
    return f"shard-{shard:06d}"


def row_schema(dims: ModelDims, cfg: PrecomputeConfig):
    """The Parquet schema of the per-genome rows (fixed, so every shard has the same columns)."""
    import pyarrow as pa

    f32, i32 = pa.float32(), pa.int32()
    types = {"string": pa.string(), "int32": i32, "float32": f32}
    cols = [("index", pa.int64()), ("shard", i32), ("name", pa.string()), ("label", pa.string()),
            ("predicted", pa.string()), ("correct", pa.bool_()), ("confidence", f32)]
    cols += [(f"p_{c}", f32) for c in dims.labels]
    cols += [(name, types[t]) for name, t in dims.kind_columns]  # the input kind's own columns
    cols += [("n_tokens", i32), ("error", pa.string()), ("cone_m", i32)]
    cols += [(f"cone_{l}", f32) for l in range(dims.layers + 1)]
    cols += [(f"cone_raw_{l}", f32) for l in range(dims.layers + 1)]
    cols += [(head_column(f, l, h), f32) for f in cfg.features for l in range(dims.layers) for h in range(dims.heads)]
    return pa.schema(cols)


def head_column(feature: str, layer: int, head: int) -> str:
    """Parquet column of one head's feature, ``<feature>_<layer>-<head>`` (1-based): the stored format."""
    return f"{feature}_{layer + 1}-{head + 1}"


def feature_columns(dims: ModelDims, feature: str) -> list[str]:
    return [head_column(feature, l, h) for l in range(dims.layers) for h in range(dims.heads)]


def npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def load_npz_bytes(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ---------------------------------------------------------------------------------------------
# [CLS] reduction
# ---------------------------------------------------------------------------------------------
@dataclass
class ClsBasis:
    """``reduced[l] = (cls[l] - mean[l]) @ components[l]`` for each layer ``l`` (``[L+1, D, K]``)."""

    method: str
    mean: np.ndarray  # [L+1, D]
    components: np.ndarray  # [L+1, D, K]

    def apply(self, cls: np.ndarray) -> np.ndarray:
        """``cls [..., L+1, D]`` -> ``[..., L+1, K]`` (float32)."""
        x = cls.astype(np.float64) - self.mean
        return np.einsum("...ld,ldk->...lk", x, self.components).astype(np.float32)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"method": np.asarray(self.method), "mean": self.mean, "components": self.components}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> "ClsBasis":
        return cls(str(a["method"]), np.asarray(a["mean"], np.float64), np.asarray(a["components"], np.float64))


def random_basis(dims: ModelDims, k: int, seed: int) -> ClsBasis:
    """A Gaussian random projection ``D -> k`` (Johnson-Lindenstrauss), the same for every layer."""
    rng = np.random.default_rng(seed)
    r = rng.standard_normal((dims.hidden, k)) / np.sqrt(k)
    return ClsBasis("random", np.zeros((dims.layers + 1, dims.hidden)),
                    np.broadcast_to(r, (dims.layers + 1,) + r.shape).copy())


def pca_basis(cls_vectors: np.ndarray, k: int) -> ClsBasis:
    """Per-layer PCA of pilot [CLS] vectors ``[P, L+1, D]`` (signs fixed: largest loading positive)."""
    x = np.asarray(cls_vectors, np.float64)
    n, l1, d = x.shape
    if n < 2:
        raise PrecomputeError("the PCA pilot needs at least 2 genomes that could be analysed.")
    from bertgeom.analysis.projections import pca

    mean = x.mean(0)
    comps = np.zeros((l1, d, k))
    for layer in range(l1):
        v = pca(x[:, layer], n_components=k).params["components"].T  # [D, <=k], largest loading positive
        comps[layer, :, : v.shape[1]] = v
    return ClsBasis("pca", mean, comps)


# ---------------------------------------------------------------------------------------------
# The computation
# ---------------------------------------------------------------------------------------------
@contextmanager
def limited_threads(n: int):
    """torch and BLAS limited to ``n`` threads inside the block (restored afterwards)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)


def analyse_and_encode(loaded, records):
    """``(PreparedRecord, encoded or None)`` per record read by ``loaded``'s input kind (``encoded``
    is None when the record could not be analysed)."""
    spec = precompute_spec(loaded)
    out = []
    for rec in records:
        p = spec.prepare(rec, loaded.tokenizer, loaded.max_tokens)
        out.append((p, p.encoded))
    return out


#: Parquet columns known before the forward pass (filled by :func:`prepare_shard`), besides the
#: input kind's own columns (``PrecomputeSpec.columns``).
PREPARED_COLUMNS = ("name", "label", "error", "n_tokens")
_CLS, _SEP, _PUNCT = 1, 2, 4  # bits of PreparedShard.kinds


@dataclass(frozen=True)
class Tokens:
    """One tokenised record: the parts of an ``EncodedInput`` the forward step reads (no strings,
    no analysis object), rebuilt from a :class:`PreparedShard`."""

    input_ids: np.ndarray  # int64 [t]
    is_cls: np.ndarray  # bool [t]
    is_sep: np.ndarray
    is_punct: np.ndarray

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def content_mask(self) -> np.ndarray:
        return ~(self.is_cls | self.is_sep)


@dataclass
class PreparedShard:
    """The CPU half of a shard: everything the forward step needs, as plain lists and numpy arrays,
    so that a Ray CPU task can hand it to a (GPU) forward actor through the object store cheaply.

    ``columns``: the :data:`PREPARED_COLUMNS` and the input kind's own columns per record (``error``
    is "" for a tokenised record, the analysis error otherwise). ``rows``: positions in the shard of
    the tokenised records, in order; their token ids are concatenated in ``ids``
    (``bounds[j]:bounds[j+1]`` for ``rows[j]``), their [CLS]/[SEP]/punctuation masks packed as bits in
    ``kinds``."""

    shard: int
    start: int
    columns: dict[str, list]
    rows: np.ndarray  # int64 [k]
    bounds: np.ndarray  # int64 [k + 1]
    ids: np.ndarray  # int64 [sum of tokens]
    kinds: np.ndarray  # uint8 [sum of tokens]

    @property
    def n_records(self) -> int:
        return len(self.columns["name"])

    def tokens(self) -> list[tuple[int, Tokens]]:
        """``(position in the shard, Tokens)`` of every tokenised record."""
        out = []
        for j, i in enumerate(self.rows.tolist()):
            sl = slice(int(self.bounds[j]), int(self.bounds[j + 1]))
            k = self.kinds[sl]
            ids = self.ids[sl].copy()  # writable (object-store arrays are read-only; torch wants to own it)
            out.append((i, Tokens(ids, (k & _CLS) > 0, (k & _SEP) > 0, (k & _PUNCT) > 0)))
        return out


def prepare_shard(shard: ShardInput, vocab, max_tokens: int) -> PreparedShard:
    """Read and tokenise the records of a shard with its input kind's ``prepare`` (genomes: parse,
    align, QC, k-mers; CPU only: needs the tokenizer and the model's token limit, not the model),
    the first step of :meth:`ShardComputer.run`."""
    spec = precompute_spec(shard.kind)
    kind_columns = [c for c, _ in spec.columns]
    n = len(shard.records)
    cols: dict[str, list] = {c: [None] * n for c in (*PREPARED_COLUMNS, *kind_columns)}
    cols["label"] = list(shard.labels)
    rows, ids, kinds = [], [], []
    for i, r in enumerate(shard.records):
        p = spec.prepare(spec.from_payload(r), vocab, max_tokens)
        enc = p.encoded
        cols["name"][i] = p.name
        if enc is None:
            cols["error"][i] = p.error or "not tokenised"
            continue
        cols["error"][i] = ""
        for c in kind_columns:
            cols[c][i] = p.columns.get(c)
        cols["n_tokens"][i] = enc.n_tokens
        rows.append(i)
        ids.append(np.asarray(enc.input_ids, np.int64))
        kinds.append((enc.is_cls * _CLS | enc.is_sep * _SEP | enc.is_punct * _PUNCT).astype(np.uint8))
    bounds = np.cumsum([0] + [len(x) for x in ids], dtype=np.int64)
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt))
    return PreparedShard(shard.shard, shard.start, cols, np.asarray(rows, np.int64), bounds,
                         cat(ids, np.int64), cat(kinds, np.uint8))


def prepare_payload(payload: bytes, vocab, max_tokens: int, threads: int = 1) -> PreparedShard:
    """:func:`prepare_shard` of an encoded payload with at most ``threads`` BLAS threads (the Ray
    CPU task; no torch import, the forward actors hold the model)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads):
        return prepare_shard(ShardInput.decode(payload), vocab, max_tokens)


@dataclass
class ShardComputer:
    """Holds the model and the parameters; :meth:`run` turns a :class:`ShardInput` into result files."""

    loaded: object
    cfg: PrecomputeConfig
    basis: ClsBasis | None = None
    device: str = "cpu"  # where the forward passes run (cpu, cuda or auto)
    dims: ModelDims = field(init=False)

    def __post_init__(self):
        self.dims = ModelDims.of(self.loaded)
        self.schema = row_schema(self.dims, self.cfg)
        self.keep = np.ones(self.dims.map_tokens, bool)
        self.keep[-1] = False  # the [SEP] of a full-length input (rows/cols from the first [SEP] on are zeroed)
        self._runner = None

    @property
    def needs_attentions(self) -> bool:
        """Whether any stored result reads attention weights (class maps or per-head features).
        Without them (``--no-attentions``: ``maps="none"``, no features) the forward passes run with
        SDPA and never copy the ``[L, H, T, T]`` weights out of the batch."""
        return self.cfg.maps != "none" or bool(self.cfg.features)

    @property
    def needs_blocks(self) -> bool:
        """Whether a stored feature is one of the block graph's (``BLOCK_FEATURES``): the defaults are
        not, and skipping its connected-components pass saves about a third of the features' time."""
        from bertgeom.analysis.heads import BLOCK_FEATURES

        return any(f in BLOCK_FEATURES for f in self.cfg.features)

    @property
    def runner(self):
        """The model the forward passes use: the loaded one on the CPU with eager attention, else a
        private copy on ``device`` (:func:`bertgeom.models.inference_copy`); made on first use."""
        if self._runner is None:
            from bertgeom.models import inference_copy

            self._runner = inference_copy(self.loaded, self.device, attentions=self.needs_attentions)
        return self._runner

    def forward(self, encoded: list) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """One padded batch: ``(hidden [L+1, t, D], logits [C], attentions [L, H, t, t] or None)`` per
        input, float32 numpy cropped to its ``t`` tokens."""
        import torch

        from bertgeom.trace import forward, pad_batch

        ids, mask = pad_batch(self.runner, encoded)
        out = forward(self.runner, ids, mask, attentions=self.needs_attentions, precision=self.cfg.precision)
        hidden = torch.stack(out.hidden_states, dim=1).float().cpu().numpy()  # [B, L+1, n, D]
        logits = out.logits.float().cpu().numpy()
        attn = torch.stack(out.attentions, dim=1).float().cpu().numpy() if self.needs_attentions else None
        res = []
        for b, e in enumerate(encoded):
            t = e.n_tokens
            res.append((hidden[b, :, :t], logits[b], None if attn is None else attn[b, :, :, :t, :t]))
        return res

    @property
    def cls_width(self) -> int:
        return self.dims.hidden if self.basis is None else int(self.basis.components.shape[-1])

    def run_payload(self, payload: bytes) -> dict[str, bytes]:
        return self.run(ShardInput.decode(payload))

    def run(self, shard: ShardInput) -> dict[str, bytes]:
        """Both steps in this process: ``forward_shard(prepare(shard))``."""
        with limited_threads(self.cfg.threads):
            return self._forward(self.prepare(shard))

    def prepare(self, shard: ShardInput) -> PreparedShard:
        """:func:`prepare_shard` with this model's vocabulary and token limit."""
        return prepare_shard(shard, self.loaded.tokenizer, self.loaded.max_tokens)

    def forward_shard(self, prepared: PreparedShard) -> dict[str, bytes]:
        """The model half of a shard: forward passes, reductions and the shard's files."""
        with limited_threads(self.cfg.threads):
            return self._forward(prepared)

    def _forward(self, prep: PreparedShard) -> dict[str, bytes]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        d, cfg = self.dims, self.cfg
        n = prep.n_records
        cols: dict[str, list] = {name: [None] * n for name in self.schema.names}
        cols.update({c: list(v) for c, v in prep.columns.items()})
        cols["index"] = [prep.start + i for i in range(n)]
        cols["shard"] = [prep.shard] * n
        cls_out = np.full((n, d.layers + 1, self.cls_width), np.nan, np.float32)
        sums: dict[str, np.ndarray] = {}
        counts: dict[str, int] = {}
        todo = prep.tokens()
        for b in range(0, len(todo), cfg.batch_size):
            chunk = todo[b : b + cfg.batch_size]
            for (i, enc), out in zip(chunk, self.forward([e for _, e in chunk])):
                self._one(i, enc, *out, cols["label"][i], cols, cls_out, sums, counts)
        cols["correct"] = [bool(p) and p == lab for p, lab in zip(cols["predicted"], cols["label"])]
        table = pa.Table.from_pydict(cols, schema=self.schema)
        buf = pa.BufferOutputStream()
        pq.write_table(table, buf, compression="zstd",  # no per-column statistics on the ~600 numeric columns
                       write_statistics=["index", "shard", "name", "label", "predicted", "correct", "qc"])
        files = {"parquet": buf.getvalue().to_pybytes(), "cls.npy": npy_bytes(cls_out)}
        maps = {}
        for c in sorted(sums):
            maps[f"sum__{c}"] = sums[c]
            maps[f"count__{c}"] = np.asarray(counts[c], np.int64)
        files["maps.npz"] = npz_bytes(maps)
        return files

    def _one(self, i, enc, hs, logits, attn, label, cols, cls_out, sums, counts) -> None:
        from bertgeom.analysis.cone import hidden_state_cone_curve
        from bertgeom.analysis.heads import head_features
        from bertgeom.probabilities import class_probabilities

        d, cfg = self.dims, self.cfg
        probs = class_probabilities(self.loaded, logits)  # calibrated, as on the page and in the CLI
        pred = d.labels[int(np.argmax(logits))]
        cols["predicted"][i] = pred
        cols["confidence"][i] = float(probs.max())
        for c, p in zip(d.labels, probs):
            cols[f"p_{c}"][i] = float(p)
        content = enc.content_mask
        curve = np.asarray(hidden_state_cone_curve(hs, content), np.float64)  # I, unit rows
        m = int(content.sum())
        cols["cone_m"][i] = m
        for layer, v in enumerate(curve):
            cols[f"cone_raw_{layer}"][i] = float(v)
            cols[f"cone_{layer}"][i] = float(v / m) if m else float("nan")
        if cfg.features:
            table = head_features(attn, enc, n_jobs=1, blocks=self.needs_blocks)
            for f in cfg.features:
                vals = np.asarray(table[f], np.float64).reshape(-1)
                for name, v in zip(feature_columns(d, f), vals):
                    cols[name][i] = float(v)
        cls_vec = hs[:, 0, :]
        cls_out[i] = cls_vec if self.basis is None else self.basis.apply(cls_vec)
        if cfg.maps != "none" and pred and pred == label and enc.n_tokens == d.map_tokens:
            if label not in sums:
                sums[label] = np.zeros(self.map_shape(), np.int64)
            self._accumulate(attn, sums[label])
            counts[label] = counts.get(label, 0) + 1

    def _accumulate(self, attn: np.ndarray, total: np.ndarray) -> None:
        """Add the fixed-point map of one genome to ``total`` (int64), [SEP]/[PAD] rows/cols zeroed.

        ``rint(A * 2**32)`` is exact in float32 (a power-of-two scale; rounding to an integer is
        representable), so no float64 copy of the maps is needed; integer sums are exact."""
        keep = ((self.keep[:, None] & self.keep[None, :]) * MAP_SCALE).astype(np.float32)
        for layer, a in enumerate(attn):  # one layer at a time keeps the temporaries small
            q = np.rint(np.asarray(a, np.float32) * keep).astype(np.int64)  # [H, T, T]
            if self.cfg.maps == "layer-mean":
                total[layer] += q.sum(axis=0)
            else:
                total[layer] += q

    def map_shape(self) -> tuple[int, ...]:
        d = self.dims
        t = (d.map_tokens, d.map_tokens)
        return (d.layers,) + t if self.cfg.maps == "layer-mean" else (d.layers, d.heads) + t


def cls_of_records(loaded, records, batch_size: int = 4) -> np.ndarray:
    """Full [CLS] vectors ``[P, L+1, D]`` of the records that could be analysed (PCA pilot)."""
    from bertgeom.trace import run_batch

    encs = [enc for _, enc in analyse_and_encode(loaded, records) if enc is not None]
    out = []
    for b in range(0, len(encs), batch_size):
        out += [t.hidden_states[:, 0, :] for t in run_batch(loaded, encs[b : b + batch_size])]
    if not out:
        return np.zeros((0, loaded.num_layers + 1, int(loaded.config.hidden_size)), np.float32)
    return np.stack(out).astype(np.float32)
