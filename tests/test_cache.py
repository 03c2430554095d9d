"""The one cache (bertgeom.cache): a stable typed key, a bounded thread-safe memory tier that computes
a key once however many threads ask, and a disk tier that stores only safe formats, writes atomically
and recomputes what it cannot read."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from bertgeom import cache
from bertgeom.cache import CacheKey, Memo, cached, cached_arrays


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ---- the key -------------------------------------------------------------------------------------
def test_a_key_has_one_digest_whatever_the_order_types_or_process():
    a = CacheKey.of("heads-set", 2, weights="w" * 16, inputs="f" * 16, theta=0.3, js_rows=16)
    b = CacheKey.of("heads-set", 2, weights="w" * 16, inputs="f" * 16, js_rows=np.int64(16), theta=np.float64(0.3))
    assert a == b and hash(a) == hash(b) and a.digest == b.digest and len(a.digest) == 24
    assert a.param == {"js_rows": 16, "theta": 0.3}
    # the same digest in a fresh interpreter (no hash randomisation, no object ids in it)
    code = ("from bertgeom.cache import CacheKey; print(CacheKey.of('heads-set', 2, weights='w'*16, inputs='f'*16, "
            "theta=0.3, js_rows=16).digest)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"})
    assert out.stdout.strip() == a.digest
    # every field, and the type of a value, is part of it
    others = [CacheKey.of("heads-set", 3, weights="w" * 16, inputs="f" * 16, theta=0.3, js_rows=16),
              CacheKey.of("heads-set", 2, weights="x" * 16, inputs="f" * 16, theta=0.3, js_rows=16),
              CacheKey.of("heads-set", 2, weights="w" * 16, inputs="g" * 16, theta=0.3, js_rows=16),
              CacheKey.of("heads-set", 2, weights="w" * 16, inputs="f" * 16, theta=0.31, js_rows=16),
              CacheKey.of("heads-set", 2, weights="w" * 16, inputs="f" * 16, theta=0.3, js_rows=16.0),
              CacheKey.of("cone-set", 2, weights="w" * 16, inputs="f" * 16, theta=0.3, js_rows=16)]
    assert len({k.digest for k in [a, *others]}) == len(others) + 1


def test_a_key_refuses_values_without_a_stable_digest():
    with pytest.raises(TypeError, match="no stable digest"):
        CacheKey.of("x", items=np.arange(3))
    with pytest.raises(TypeError, match="no stable digest"):
        CacheKey.of("x", fn=len)
    with pytest.raises(TypeError):
        CacheKey("")
    k = CacheKey.of("x", heads=[(0, 1), (2, 3)])  # lists become tuples: the key stays hashable
    assert k.param["heads"] == ((0, 1), (2, 3)) and hash(k)


def test_set_view_keys_follow_the_weights_the_set_and_the_parameters(tiny_bert):
    from bertgeom.sets import keys
    from bertgeom.sets.inputs import InputItem, shipped_set

    items = shipped_set("text")[:3]
    k = keys.heads_set_key(tiny_bert, items)
    assert k == keys.heads_set_key(tiny_bert, tuple(items)) and k.weights == tiny_bert.weights_hash
    assert keys.heads_set_key(tiny_bert, items[:2]) != k
    a = keys.across_key("m", tiny_bert.weights_hash, "fp", 0, 1, 1e-3, "all")
    assert a != keys.across_key("m", tiny_bert.weights_hash, "fp", 0, 2, 1e-3, "all")
    # one input's sweep is keyed by its text, whichever set it came from (the prepared run and the page agree)
    it = InputItem("a", "The cat sat.")
    assert keys.sweep_key(tiny_bert, it) == keys.sweep_key(tiny_bert, InputItem("b", "The cat sat.", "x"))


# ---- the memory tier -----------------------------------------------------------------------------
def test_the_memory_tier_keeps_only_the_most_recently_used():
    memo = Memo("t", 3)
    ks = [CacheKey.of("t", i=i) for i in range(5)]
    for k in ks[:3]:
        cached(k, lambda k=k: np.full(2, k.param["i"]), memo=memo, disk=None)
    assert memo.get(ks[0]) is not None  # used again: now the newest
    cached(ks[3], lambda: np.zeros(2), memo=memo, disk=None)
    assert len(memo) == 3 and ks[1] not in memo and ks[0] in memo and ks[3] in memo
    for k in ks:
        memo.put(k, k.param["i"])
    assert len(memo) == 3 and [memo.get(k) for k in ks[2:]] == [2, 3, 4]


@pytest.mark.parametrize("disk", [None, "npz"])
def test_two_threads_asking_one_key_compute_it_once(cache_dir, disk):
    """The second asker waits behind the first one's computation (seen queued on the key's lock, no
    sleeping) and gets its result; the computation runs once."""
    key = CacheKey.of("two-askers", disk=str(disk))
    memo = Memo("t", 4) if disk is None else None
    started, release = threading.Event(), threading.Event()
    runs, results = [], {}
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 16))

    def compute():
        runs.append(threading.get_ident())
        started.set()
        assert release.wait(30)
        return {"gram": X @ X.T, "eig": np.linalg.eigvalsh(X.T @ X)}

    def ask(name):
        results[name] = cached(key, compute, memo=memo, disk=disk) if disk is None else cached_arrays(key, compute)

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert started.wait(30)
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    assert cache.wait_for_askers(key, 2, timeout=30)  # the second one is queued behind the first
    release.set()
    first.join(30)
    second.join(30)
    assert len(runs) == 1
    np.testing.assert_array_equal(results["first"]["gram"], results["second"]["gram"])
    if disk is None:
        assert results["first"] is results["second"]
    assert cache.askers(key) == 0 and key.digest not in cache._LOCKS  # the lock table does not grow


def test_many_threads_at_once_build_one_value():
    barrier = threading.Barrier(6)
    memo, key, runs = Memo("t", 2), CacheKey.of("barrier"), []

    def compute():
        runs.append(1)
        return object()

    def ask():
        barrier.wait(30)
        return cached(key, compute, memo=memo, disk=None)

    out = []
    threads = [threading.Thread(target=lambda: out.append(ask())) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(runs) == 1 and len({id(o) for o in out}) == 1 and len(out) == 6


# ---- the disk tier -------------------------------------------------------------------------------
def test_arrays_and_json_round_trip_through_the_cache_directory(cache_dir):
    key = CacheKey.of("round-trip", 1, weights="w", inputs="i")
    X = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    got = cached_arrays(key, lambda: {"svd": np.linalg.svd(X, compute_uv=False), "names": np.array(["a", "bb"]),
                                      "n": 5})
    path = cache.disk_path(key)
    assert path.parent == cache_dir and path.name == f"{key.digest}.npz" and path.is_file()
    again = cached_arrays(key, lambda: pytest.fail("recomputed what is on disk"))
    assert set(again) == {"svd", "names", "n"} and int(again["n"]) == 5 and list(again["names"]) == ["a", "bb"]
    np.testing.assert_array_equal(again["svd"], got["svd"])
    assert isinstance(got["n"], np.ndarray)  # a fresh result looks like one read back
    jkey = CacheKey.of("round-trip-json")
    facts = {"pred": "Alpha", "p": 0.93, "pick": {"change": "N501Y", "n": 1}}
    assert cached(jkey, lambda: facts, disk="json") == facts
    assert json.loads(cache.disk_path(jkey, "json").read_text()) == {"key": jkey.canonical(), "value": facts}
    assert cached(jkey, lambda: pytest.fail("recomputed"), disk="json") == facts
    assert not list(cache_dir.glob("*.tmp*"))  # every write went through a temporary file, moved into place


@pytest.mark.parametrize("damage", ["cut in half", "garbage", "empty", "a pickle"])
def test_a_damaged_file_is_recomputed_not_an_error(cache_dir, damage):
    key = CacheKey.of("damaged", damage=damage)
    good = {"x": np.arange(1000, dtype=np.float64)}
    cached_arrays(key, lambda: good)
    path = cache.disk_path(key)
    data = path.read_bytes()
    path.write_bytes({"cut in half": data[: len(data) // 2], "garbage": b"PK\x03\x04 not a zip at all",
                      "empty": b"", "a pickle": pickle.dumps(good)}[damage])
    assert cache.read_arrays(key) is None and not path.exists()  # removed, so nobody trips on it again
    calls = []
    got = cached_arrays(key, lambda: calls.append(1) or good)
    assert calls == [1] and np.array_equal(got["x"], good["x"])
    np.testing.assert_array_equal(cache.read_arrays(key)["x"], good["x"])  # written anew, whole
    jkey = CacheKey.of("damaged-json")
    cache.disk_path(jkey, "json").write_text('{"cut": ')
    assert cached(jkey, lambda: {"ok": 1}, disk="json") == {"ok": 1}


def test_no_pickle_is_ever_written_or_read(cache_dir):
    key = CacheKey.of("objects")
    with pytest.raises(TypeError, match="Python objects"):
        cached_arrays(key, lambda: {"rows": np.array([{"a": 1}, None], dtype=object)})
    assert not cache.on_disk(key) and not list(cache_dir.glob("*")) or not list(cache_dir.glob("*.npz"))
    # an object array planted in the file (numpy pickles it) is refused on reading and recomputed
    path = cache.disk_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, rows=np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    assert cache.read_arrays(key) is None
    assert list(cached_arrays(key, lambda: {"rows": np.arange(2)})["rows"]) == [0, 1]


def test_concurrent_writers_in_two_processes_never_leave_a_partial_file(cache_dir):
    """Two processes rewrite one entry again and again while this one reads it: every read is one
    writer's whole array, never a mix or a cut-off file."""
    key = CacheKey.of("race")
    writer = ("import sys, numpy as np; from bertgeom.cache import CacheKey, write_arrays\n"
              "v = int(sys.argv[1]); key = CacheKey.of('race')\n"
              "for _ in range(40): write_arrays(key, {'x': np.full(200_000, v, dtype=np.int32)})\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(v)], env=env) for v in (1, 2)]
    seen = set()
    path = cache.disk_path(key)
    while any(p.poll() is None for p in procs):
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as data:
                    x = data["x"]
            except FileNotFoundError:
                continue
            assert x.shape == (200_000,) and x.min() == x.max() and int(x[0]) in (1, 2)
            seen.add(int(x[0]))
    assert [p.returncode for p in procs] == [0, 0]
    assert int(cache.read_arrays(key)["x"][0]) in (1, 2) and not list(cache_dir.glob("*.tmp*"))


def test_an_unwritable_cache_directory_still_answers_from_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(blocker / "cache"))  # no directory can be made here, even as root
    memo, key, calls = Memo("t", 2), CacheKey.of("ro"), []
    for _ in range(2):
        got = cached_arrays(key, lambda: calls.append(1) or {"x": np.ones(2)}, memo=memo)
    assert calls == [1] and list(got["x"]) == [1.0, 1.0] and not cache.on_disk(key)
    assert cached(CacheKey.of("ro-json"), lambda: [1, 2], disk="json") == [1, 2]


# ---- a real view through it ----------------------------------------------------------------------
def test_a_sweep_is_computed_once_then_read_from_disk(cache_dir, tiny_bert):
    """The ``head-sweep`` view keeps each input's sweep under the key the preparation uses
    (bertgeom.sets.keys.sweep_key): the second call reads the file."""
    from bertgeom.sets import keys
    from bertgeom.sets.ablation import sweep_of_input
    from bertgeom.sets.inputs import InputItem
    from bertgeom.sets.views import HEAD_SWEEP

    item = InputItem("s", "The cat sat on the mat.")
    first = HEAD_SWEEP.get(tiny_bert, item)
    key = keys.sweep_key(tiny_bert, item)
    assert cache.on_disk(key)
    stamp = cache.disk_path(key).stat().st_mtime_ns
    second = HEAD_SWEEP.get(tiny_bert, item)
    assert cache.disk_path(key).stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(first["cos"], second["cos"])
    fresh = sweep_of_input(tiny_bert, item)
    np.testing.assert_allclose(fresh["cos"], first["cos"], atol=1e-6)


def test_the_tours_genome_facts_read_back_from_json_say_the_same(tiny_variant):
    """The tour keeps a plug-in step's numbers as JSON (never Streamlit's pickled persist="disk"):
    the sentence and the What-if entries from the stored numbers are those from the fresh ones."""
    from bertgeom.sars_cov_2.variant.spec import TOUR_GENOME_STEP, demo_genomes
    from bertgeom.trace import run_trace

    text = demo_genomes()[TOUR_GENOME_STEP.example]["text"]
    fresh = TOUR_GENOME_STEP.facts(tiny_variant, run_trace(tiny_variant, text))
    stored = cache.as_json(fresh)
    assert TOUR_GENOME_STEP.sentence(stored) == TOUR_GENOME_STEP.sentence(fresh)
    assert dict(TOUR_GENOME_STEP.widget_values(stored)) == dict(TOUR_GENOME_STEP.widget_values(fresh))


def test_the_cache_folder_follows_xdg_cache_home(monkeypatch, tmp_path):
    """``$BERTGEOM_CACHE_DIR`` first, then ``$XDG_CACHE_HOME/bertgeom`` (an absolute path only, as the XDG
    Base Directory spec asks), then ``~/.cache/bertgeom`` (issue 47)."""
    from bertgeom.runtime import cache_dir

    monkeypatch.delenv("BERTGEOM_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "bertgeom"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the spec says
    assert cache_dir() == tmp_path / "home" / ".cache" / "bertgeom"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert cache_dir() == tmp_path / "home" / ".cache" / "bertgeom"
    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"
