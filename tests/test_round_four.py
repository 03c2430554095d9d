"""Issue 46 ("nothing wrong, nothing lost", round four): each finding of the probe as a regression test
that failed on the main it was filed against (20c1dc8). The page-level and browser checks of the same
findings are in ``tests/test_e2e_round_four.py``; docs/reliability.md lists both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.cli_run import bertgeom_cli

ROOT = Path(__file__).resolve().parent.parent


def _custom_folder(tiny_bert_dir: Path, dest: Path, **config_changes) -> Path:
    """A copy of the tiny BERT's folder whose config.json says ``config_changes``."""
    shutil.copytree(tiny_bert_dir, dest)
    config = json.loads((dest / "config.json").read_text())
    config.update(config_changes)
    (dest / "config.json").write_text(json.dumps(config))
    return dest


# ---- 1. bounded custom models ------------------------------------------------------------------
def _load_then_next(setup: str, next_model: str, between: str = "") -> str:
    """A child script: ``setup`` (imports, a memory cap), then a load of the folder ``argv[1]`` recorded as
    how it ended (loaded, a one-sentence ``ModelLoadError``, or a crash by exception type), ``between``,
    then a load of ``next_model`` in the same process (its layer count, or the crash); prints both as JSON."""
    return textwrap.dedent(setup) + textwrap.dedent("""
        out = {}
        try:
            load_model(sys.argv[1])
            out["first"] = "loaded"
        except ModelLoadError as exc:
            out["first"] = "sentence: " + str(exc)
        except BaseException as exc:
            out["first"] = "crash: " + type(exc).__name__
    """) + textwrap.dedent(between) + textwrap.dedent(f"""
        try:
            out["second"] = load_model({json.dumps(next_model)}).num_layers
        except BaseException as exc:
            out["second"] = "crash: " + type(exc).__name__
        print(json.dumps(out))
    """)


#: Run in a child whose address space is capped at 8 GiB, so a loader that allocates what the config
#: asks for (about 140 GB for 20,000 layers) meets a MemoryError there instead of this machine's limit.
_CAPPED_LOAD = _load_then_next("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    from bertgeom.models import ModelLoadError, load_model
""", "tiny-random")


def test_a_config_with_20000_layers_is_refused_in_one_sentence_and_the_next_model_loads(tiny_bert_dir, tmp_path):
    folder = _custom_folder(tiny_bert_dir, tmp_path / "huge", num_hidden_layers=20000, hidden_size=384,
                            num_attention_heads=12, intermediate_size=1536)
    proc = subprocess.run([sys.executable, "-c", _CAPPED_LOAD, str(folder)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["first"].startswith("sentence: "), out
    assert "num_hidden_layers = 20,000" in out["first"] and "\n" not in out["first"], out
    assert out["second"] == 2, out  # the same process loads the next model


#: A child that loads one model to have every import done, caps its address space ``argv[2]`` MiB above
#: what it uses (the soft limit only, so it can be lifted again), loads the folder (76 MB of fp32 weights:
#: safetensors' mmap or torch's fails with ENOMEM, each in its own words), lifts the cap and loads MiniLM:
#: what a server does after a model did not fit.
_OUT_OF_MEMORY_LOAD = _load_then_next("""
    import json, os, resource, sys
    from bertgeom.models import ModelLoadError, load_model
    load_model("tiny-random")
    with open("/proc/self/status") as fh:
        used = next(int(ln.split()[1]) * 1024 for ln in fh if ln.startswith("VmSize:"))
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (used + (int(sys.argv[2]) << 20), hard))
""", "minilm-l6", between="""
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
""")


@pytest.mark.parametrize("headroom_mib", [48, 96])  # safetensors' own mmap fails; torch's mmap of the file fails
def test_a_model_that_runs_out_of_memory_while_loading_is_said_so_and_the_next_model_loads(tmp_path, headroom_mib):
    """Within every bound (and the memory the kernel reports), the load itself runs out of memory.
    Before, with 96 MiB the sentence blamed the folder ("has no safetensors weights; bertgeom does not
    unpickle .bin files", from torch's "unable to mmap ... model.safetensors: Cannot allocate memory"),
    with 48 MiB it said "could not be loaded: Cannot allocate memory (os error 12)"."""
    from bertgeom.models import build_tiny_random_bert, minilm_dir
    from transformers import AutoTokenizer

    folder = tmp_path / "wide"
    tok = AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)
    build_tiny_random_bert(seed=2, vocab_size=tok.vocab_size, layers=4, heads=12, hidden=384).save_pretrained(
        str(folder), safe_serialization=True)
    tok.save_pretrained(str(folder))
    proc = subprocess.run([sys.executable, "-c", _OUT_OF_MEMORY_LOAD, str(folder), str(headroom_mib)],
                          capture_output=True, text=True,
                          cwd=ROOT, timeout=600, env={**os.environ, "BERTGEOM_MODEL_MEMORY_BYTES": str(1 << 40)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["first"].startswith("sentence: ") and "does not fit in this machine's memory" in out["first"], out
    assert out["second"] == 6, out


def test_the_cli_refuses_a_config_beyond_the_bounds_in_one_sentence(tiny_bert_dir, tmp_path):
    folder = _custom_folder(tiny_bert_dir, tmp_path / "deep", num_hidden_layers=200)  # 30 MB: loads before
    res = bertgeom_cli("trace", "The cat sat.", "--model", str(folder))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "num_hidden_layers = 200" in res.stderr and "at most 128" in res.stderr, res.stderr


def test_a_model_larger_than_the_memory_it_may_take_is_refused_before_loading(tiny_bert_dir, tmp_path, monkeypatch):
    from bertgeom.models import ModelLoadError, load_model

    memory_env = "BERTGEOM_MODEL_MEMORY_BYTES"  # by name: before issue 46 the load went ahead (no bound)
    folder = _custom_folder(tiny_bert_dir, tmp_path / "wide", num_hidden_layers=2)
    monkeypatch.setenv(memory_env, str(1 << 20))  # 1 MiB: the tiny BERT's 4 MB of weights do not fit
    with pytest.raises(ModelLoadError, match=r"needs about .* of memory to load .* and this machine has 0\.0 GiB"):
        load_model(str(folder))
    monkeypatch.setenv(memory_env, str(1 << 30))
    assert load_model(str(folder)).num_layers == 2
    from bertgeom.models import MODEL_MEMORY_ENV

    assert MODEL_MEMORY_ENV == memory_env


def test_a_safetensors_header_that_declares_more_than_the_file_holds_is_one_sentence(tiny_bert_dir, tmp_path):
    from bertgeom.models import ModelLoadError, load_model

    folder = _custom_folder(tiny_bert_dir, tmp_path / "cut")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="cut short"):
        load_model(str(folder))


def test_an_exception_without_text_is_read_safely():
    from bertgeom.safety import error_text

    assert error_text(MemoryError()) == "MemoryError"
    assert error_text(KeyError()) == "KeyError"
    assert error_text(ValueError("first line\nsecond")) == "first line"
    assert len(error_text(ValueError("x" * 500))) == 200


# ---- 4. model ids the OS cannot stat ---------------------------------------------------------------
@pytest.mark.parametrize("model_id", ["a" * 300, "~nouser/x", "org/" + "b" * 260, "a\x00b"])
def test_a_model_id_the_os_cannot_stat_is_one_sentence(model_id):
    from bertgeom.models import ModelLoadError, load_model, resolve_spec

    with pytest.raises(ModelLoadError) as caught:
        resolve_spec(model_id)
    assert "\n" not in str(caught.value)
    with pytest.raises(ModelLoadError):
        load_model(model_id)


def test_the_cli_answers_a_300_character_model_id_in_one_sentence():
    res = bertgeom_cli("trace", "The cat sat.", "--model", "a" * 300)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "300 characters long" in res.stderr


# ---- 3. prepare-sets on a full disk; AtomicFile always removes its temporary file ----------------------
def test_the_atomic_writer_removes_its_temporary_file_when_flushing_fails_again(tmp_path):
    """The temporary file's descriptor is pointed at /dev/full, so every flush fails with ENOSPC at the
    OS, as on a full disk: the write fails, and closing (which flushes again) still removes the file."""
    import errno

    from bertgeom.safety import AtomicFile, write_atomically

    target = tmp_path / "out.bin"
    target.write_bytes(b"previous")
    seen = []

    def write(fh):
        seen.append(fh.partial)
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, fh.fileno())
        os.close(full)
        fh.write(b"x" * 10)  # buffered: the failure comes at the flush of commit, and again at discard's close

    with pytest.raises(OSError) as caught:
        write_atomically(target, write)
    assert caught.value.errno == errno.ENOSPC
    assert seen and not seen[0].exists() and target.read_bytes() == b"previous"
    assert not list(tmp_path.glob("*.partial"))
    out = AtomicFile(target, "wb")
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, out.fileno())
    os.close(full)
    out.write(b"y")
    out.discard()  # flushing raises ENOSPC inside: the file goes all the same
    assert not out.partial.exists()


_FULL_DISK_PREPARE = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))  # every file stops at 1,000 bytes: a full disk
    from bertgeom.__main__ import run
    sys.exit(run(["prepare-sets", "--model", "tiny-random", "--no-subspace", "--no-sweeps"]))
""")


def test_prepare_sets_on_a_full_disk_exits_non_zero_and_names_what_it_could_not_write(tmp_path):
    cache_dir = tmp_path / "cache"
    proc = subprocess.run([sys.executable, "-c", _FULL_DISK_PREPARE], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "BERTGEOM_CACHE_DIR": str(cache_dir)}, timeout=600)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    assert proc.returncode == 3, out[-3000:]
    failed_line = next(ln for ln in out.splitlines() if ln.startswith("error:") and "could not be prepared" in ln)
    assert "tiny-random:" in failed_line and "File too large" in failed_line
    summary = next(ln for ln in out.splitlines() if ln.startswith("computed "))
    n_failed = int(summary.rsplit("failed ", 1)[1])
    assert n_failed > 0 and f"error: {n_failed} summaries" in failed_line
    assert not list(cache_dir.rglob("*.partial")), sorted(cache_dir.rglob("*.partial"))[:3]


# ---- 5. the disk cache trusts nothing it cannot verify ---------------------------------------------
@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(path))
    return path


def _entry(name: str, value: float = 1.0):
    import numpy as np

    from bertgeom.cache import CacheKey

    return CacheKey.of("round-four", 1, which=name), {"x": np.full((4, 3), value), "n": np.arange(4)}


def test_a_link_to_another_keys_entry_is_never_followed_and_is_replaced(cache_dir):
    import numpy as np

    from bertgeom import cache

    key_a, arrays_a = _entry("a", 1.0)
    key_b, arrays_b = _entry("b", 2.0)
    cache.cached_arrays(key_a, lambda: arrays_a)
    path_b = cache.disk_path(key_b)
    path_b.symlink_to(cache.disk_path(key_a))
    assert not cache.on_disk(key_b)
    got = cache.cached_arrays(key_b, lambda: arrays_b)
    assert np.array_equal(got["x"], arrays_b["x"])
    assert not path_b.is_symlink() and np.array_equal(cache.read_arrays(key_b)["x"], arrays_b["x"])
    assert np.array_equal(cache.read_arrays(key_a)["x"], arrays_a["x"])  # the link's target is untouched


def test_a_copy_of_another_keys_entry_is_recomputed_and_replaced(cache_dir):
    import numpy as np

    from bertgeom import cache

    key_a, arrays_a = _entry("a", 1.0)
    key_b, arrays_b = _entry("b", 2.0)
    cache.cached_arrays(key_a, lambda: arrays_a)
    cache.disk_path(key_b).write_bytes(cache.disk_path(key_a).read_bytes())
    calls = []
    got = cache.cached_arrays(key_b, lambda: calls.append(1) or arrays_b)
    assert calls == [1] and np.array_equal(got["x"], arrays_b["x"])
    assert np.array_equal(cache.read_arrays(key_b)["x"], arrays_b["x"])


def _rewrite_npz(path, **arrays):
    """The entry at ``path`` with its arrays replaced by ``arrays`` (None: left out), its own
    description kept: what a disk error or a hand edit leaves."""
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        kept = {k: data[k] for k in data.files}
    for k, v in arrays.items():
        if v is None:
            kept.pop(k)
        else:
            kept[k] = v
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **kept)


@pytest.mark.parametrize("damage", ["wrong shape", "missing array", "nan", "wrong dtype"])
def test_an_entry_that_does_not_match_its_description_is_recomputed_and_replaced(cache_dir, damage):
    import numpy as np

    from bertgeom import cache

    key, arrays = _entry("damaged-" + damage)
    cache.cached_arrays(key, lambda: arrays)
    bad = {"wrong shape": {"x": np.ones((2, 3))}, "missing array": {"n": None},
           "nan": {"x": np.full((4, 3), np.nan)}, "wrong dtype": {"x": np.ones((4, 3), np.float32)}}[damage]
    _rewrite_npz(cache.disk_path(key), **bad)
    calls = []
    got = cache.cached_arrays(key, lambda: calls.append(1) or arrays)
    assert calls == [1] and np.array_equal(got["x"], arrays["x"]) and set(got) == {"x", "n"}
    assert np.array_equal(cache.read_arrays(key)["x"], arrays["x"])  # replaced on disk


def test_nan_an_entry_was_written_with_is_kept():
    import numpy as np

    from bertgeom import cache

    key = cache.CacheKey.of("round-four-nan")
    stored = {"x": np.array([1.0, np.nan])}
    cache.cached_arrays(key, lambda: stored)
    got = cache.cached_arrays(key, lambda: pytest.fail("recomputed an entry written with NaN"))
    assert np.isnan(got["x"][1])


def test_an_npz_bomb_is_refused_without_decompressing_it(cache_dir, monkeypatch):
    """A 64 MiB array of zeros compresses to ~64 kB; the entry's bound is set to 8 MiB: the file is
    refused from its headers, and reading it allocates far less than the array."""
    import tracemalloc

    import numpy as np

    from bertgeom import cache

    max_entry_env = "BERTGEOM_CACHE_MAX_ENTRY_BYTES"  # by name: before issue 46 an entry was read whole
    monkeypatch.setenv(max_entry_env, str(8 << 20))
    key = cache.CacheKey.of("round-four-bomb")
    cache.write_arrays(key, {"x": np.zeros(8 << 20)})  # 64 MiB, written before the bound (or by anyone)
    assert cache.disk_path(key).stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        assert cache.read_arrays(key) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    assert not cache.disk_path(key).exists()  # removed: recomputed (within the bound) next time
    assert cache.MAX_ENTRY_ENV == max_entry_env


def test_a_json_entry_of_another_key_is_recomputed(cache_dir):
    from bertgeom import cache

    key_a, key_b = cache.CacheKey.of("round-four-json", which="a"), cache.CacheKey.of("round-four-json", which="b")
    cache.cached(key_a, lambda: {"v": "a"}, disk="json")
    cache.disk_path(key_b, "json").write_bytes(cache.disk_path(key_a, "json").read_bytes())
    assert cache.cached(key_b, lambda: {"v": "b"}, disk="json") == {"v": "b"}
    cache.disk_path(key_b, "json").unlink()
    cache.disk_path(key_b, "json").symlink_to(cache.disk_path(key_a, "json"))
    assert cache.cached(key_b, lambda: {"v": "b"}, disk="json") == {"v": "b"}
    assert not cache.disk_path(key_b, "json").is_symlink()


# ---- 6. smaller -----------------------------------------------------------------------------------
def _genome() -> str:
    from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

    return load_demo_genomes()[0][0].sequence


def test_the_read_only_lock_message_names_a_read_only_cache_not_a_link(tmp_path, monkeypatch, capsys):
    """A cache folder where the lock cannot be created (here a file stands where the folder would be,
    which fails for root too) is not called a link."""
    from bertgeom.sets.prepared import prepare_models

    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(blocker))
    lines = []
    assert prepare_models(["tiny-random"], log=lines.append) == 2
    assert lines and "link" not in lines[0] and "not writable" in lines[0], lines


def test_the_upload_limit_is_streamlits_megabytes():
    """Streamlit's uploader refuses files over ``maxUploadSize`` MB of 1,000,000 bytes: the app's limit
    is the same number of bytes, so a file it documents as accepted is one Streamlit lets through."""
    import tomllib

    from bertgeom.safety import MAX_INPUT_BYTES
    from bertgeom.sars_cov_2.variant.spec import read_upload

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert MAX_INPUT_BYTES == cfg["server"]["maxUploadSize"] * 1000 * 1000
    over = b">x\n" + b"ACGT" * (20_500_000 // 4)  # 20.5 MB: refused by Streamlit, so refused here too
    assert "20 MB" in read_upload("over.fasta", over)[1]


def test_a_gz_cut_inside_a_300000_character_header_names_that_record(tmp_path):
    import gzip
    import random
    import zlib

    from bertgeom.sars_cov_2.genome.fasta import RecordError, iter_fasta_file

    g = _genome()
    rng = random.Random(0)
    header = "long_one " + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(300_000))
    gz = gzip.compress(f">first\n{g}\n>{header}\n{g}\n".encode())
    n = next(n for n in range(1000, len(gz), 1000)
             if len(zlib.decompressobj(31).decompress(gz[:n])) > len(g) + 10_000)  # inside the long header
    path = tmp_path / "cut.fasta.gz"
    path.write_bytes(gz[:n])
    out = list(iter_fasta_file(path))
    assert [r.name for r in out if not isinstance(r, RecordError)] == ["first"]
    assert "inside record 'long_one" in out[-1].message, out[-1].message


def test_bz2_is_accepted_by_every_uploader_as_by_the_cli():
    import bz2

    from bertgeom.inputs import input_kind_of
    from bertgeom.sars_cov_2.variant import INPUT_KIND
    from bertgeom.sars_cov_2.variant.spec import labelled_fasta_set, read_upload

    kind = input_kind_of(INPUT_KIND)
    assert "bz2" in kind.upload_types and "bz2" in kind.set_upload_types and ".bz2" in kind.words.upload_label
    data = bz2.compress(f">a|omicron\n{_genome()}\n".encode())
    assert read_upload("a.fasta.bz2", data)[0].startswith(">a|omicron")
    assert [it.label for it in labelled_fasta_set(data)] == ["omicron"]


def test_one_nul_in_one_header_does_not_make_a_web_upload_binary(tmp_path):
    from bertgeom.sars_cov_2.genome.fasta import iter_fasta_file
    from bertgeom.sars_cov_2.variant.spec import read_upload

    g = _genome()
    data = f">ok1\n{g}\n>bad\x00name\n{g}\n>ok2\n{g}\n".encode()
    text, problem = read_upload("x.fasta", data)
    web = [ln[1:] for ln in text.splitlines() if ln.startswith(">")]
    (tmp_path / "x.fasta").write_bytes(data)
    cli = [r.name for r in iter_fasta_file(tmp_path / "x.fasta")]
    assert web == cli == ["ok1", "bad?name", "ok2"], (web, cli, problem)
    assert "binary" in read_upload("b.fasta", b">a\x00\n" + g.encode())[1]  # a NUL in the first line still is


def test_transformers_above_report_text_is_never_shown(tiny_bert_dir, tmp_path):
    """Weights whose shapes differ from config.json: transformers says "look at the above report",
    which the app does not show; the sentence says what is wrong instead."""
    from bertgeom.models import ModelLoadError, load_model

    folder = _custom_folder(tiny_bert_dir, tmp_path / "mismatch", intermediate_size=64)
    with pytest.raises(ModelLoadError) as caught:
        load_model(str(folder))
    assert "above report" not in str(caught.value) and "shapes differ" in str(caught.value), str(caught.value)


# ---- 8. what the methods page states ------------------------------------------------------------
def test_classify_takes_and_records_the_precision():
    import bertgeom as bg
    from bertgeom.models import REGISTRY
    from bertgeom.sars_cov_2.variant import VARIANT_MODEL_ID

    if VARIANT_MODEL_ID not in REGISTRY:
        pytest.skip("the shipped variant model is not installed")
    fasta = f">a\n{_genome()}\n"
    (pred,) = bg.classify(fasta, precision="fp32")
    assert pred.precision == "fp32" and pred.predicted
    (auto,) = bg.classify(fasta)
    assert auto.precision in ("fp32", "bf16")


def test_text_inputs_mark_clarks_punctuation_as_the_docs_and_labels_say(minilm):
    """docs/methods.md §2: ``P`` = "." and ","; a sentence with ? ; ' ! marks only its . and ,."""
    from bertgeom.inputs import encode_input

    enc = encode_input(minilm, "Why? Well; it's late, isn't it! Go.")
    marked = [t for t, p in zip(enc.tokens, enc.is_punct) if p]
    assert marked == [",", "."], marked


def test_the_apps_own_ignored_link_values_leave_the_address_bar():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    payload = "x" * 30_000
    for key in ("colour", "theta", "input", "source", "records", "example", "section"):
        at.query_params[key] = payload
    at.run()
    assert not at.exception
    left = {k: len(str(v)) for k, v in at.query_params.items() if len(str(v)) > 300}
    assert not left, left


# ---- 8. the figures the methods page states, as the code computes them ---------------------------------
# Each figure of docs/methods.md named in issue 46 is regenerated by ``tools/methods_numbers.py`` (the
# precision and the machine on every line); these tests recompute the machine-independent ones (fp32)
# with the tool's own functions and read them back from the page.
sys.path.insert(0, str(ROOT / "tools"))


def _methods_text() -> str:
    return " ".join((ROOT / "docs" / "methods.md").read_text().split())  # one line: figures wrap anywhere


def test_the_distance_normalisation_is_the_one_the_methods_page_states(minilm):
    """§3.3: ``E_U = mean_{i∈Q} mean_j |j − i|`` over the content query rows, which is below
    ``(n² − 1)/(3n)`` (the page stated the latter as the code's); the page's range is the tool's."""
    from methods_numbers import eu_ratios, shipped_sentences

    from bertgeom.analysis.heads import head_features
    from bertgeom.trace import run_trace

    tr = run_trace(minilm, "Why? Well; it's late, isn't it! Go.")
    n = tr.encoded.n_tokens
    content = [i for i, t in enumerate(tr.tokens) if t not in ("[CLS]", "[SEP]")]
    stated = np.mean([np.mean(np.abs(np.arange(n) - i)) for i in content])  # the page's definition
    f = head_features(tr.attentions, tr)
    code = f["mean_dist"] / f["mean_dist_norm"]
    np.testing.assert_allclose(code[f["mean_dist"] > 0], stated, rtol=1e-9)
    assert stated < (n * n - 1) / (3 * n)
    text = _methods_text()
    assert "`E_U = mean_{i∈Q} mean_j |j − i|`" in text and "`E_U = (n² − 1)/(3n)` is the mean" not in text
    low = [1 - eu / full for _n, eu, full in eu_ratios(minilm, shipped_sentences())]
    assert f"{min(low):.1%}-{max(low):.1%} on the shipped sentences" in text, (min(low), max(low))


def test_the_raw_flow_sums_the_methods_page_states_are_what_the_code_computes(minilm):
    from methods_numbers import raw_flow_sums, shipped_sentences

    rows = raw_flow_sums(minilm, shipped_sentences())
    first, last = [r[1] for r in rows], [r[2] for r in rows]
    text = _methods_text()
    assert f"{min(first):.1f} after layer 1 and {min(last):.1f}-{max(last):.1f} after layer 6" in text, (first, last)
    doc = " ".join((ROOT / "bertgeom" / "analysis" / "flow.py").read_text().split())
    assert f"{min(last):.1f}-{max(last):.1f} after layer 6 of MiniLM" in doc


def test_queries_and_keys_claims_only_what_the_correlation_shows(minilm):
    """Issue 46: "a key near a query is one it attends to" does not hold under the default
    normalisation; neither the page nor the methods page says it, and the page's figures are the tool's."""
    from methods_numbers import qk_correlations, shipped_sentences

    rows = qk_correlations(minilm, shipped_sentences())
    worse = [r for r in rows if r[3] > r[2]]
    assert worse  # the normalisation weakens AttentionViz's own criterion on some head: the claim is false
    l, h, raw, norm = max(rows, key=lambda r: r[3] - r[2])
    text = _methods_text()
    assert f"on {len(worse)} of {len(rows)} heads" in text, len(worse)
    assert f"layer {l + 1} head {h + 1}: {raw:+.2f} raw, {norm:+.2f} normalised" in text, (l, h, raw, norm)
    caption = " ".join((ROOT / "bertgeom" / "ui" / "heads" / "queries_keys.py").read_text().split())
    for claim in ("a key close to a query is a key that query attends to",
                  "so a key near a query is one it attends to"):
        assert claim not in caption and claim not in text


def test_the_cli_trace_summary_says_which_rows_it_averages():
    from bertgeom.models import load_model
    from bertgeom.trace import run_trace

    res = bertgeom_cli("trace", "The cat sat.", "--model", "tiny-random")
    assert res.returncode == 0, res.stderr
    tr = run_trace(load_model("tiny-random"), "The cat sat.")
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("L1:"))
    assert f"over all {tr.encoded.n_tokens} query rows" in line and "[CLS] and [SEP] included" in line, line
    printed = [float(x) for x in line.rsplit(")", 1)[1].split()]
    np.testing.assert_allclose(printed, tr.attentions[0].max(-1).mean(-1), atol=0.005)


def test_each_measured_figure_names_its_precision_machine_and_command():
    """The bf16 table and the integrated-gradients gaps depend on the precision and the CPU: the page
    gives each with both and the command that regenerates it."""
    text = _methods_text()
    ig = text[text.index("**Quadrature.**"):text.index("### Other encoder families")]
    assert "`python tools/methods_numbers.py --only ig`" in ig and "fp32" in ig and "bf16" in ig
    precision = text[text.index("### Numerical precision"):]
    assert "`python tools/methods_numbers.py --only bf16`" in precision and "family 25 model 17" in precision
    assert "0.084" not in text and "5.6 after" not in text and "0.5% gap, where" not in text
