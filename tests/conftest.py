"""Shared fixtures: a tiny random BERT saved as safetensors, and the bundled MiniLM."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

#: The suite's one disk cache (:func:`bertgeom.runtime.cache_dir`): a fresh folder per test session, never
#: the user's ``~/.cache/bertgeom`` (what the app left there changed what two pages drew, and the tests
#: wrote into it; issue 47). Set here, before any test imports bertgeom, in ``os.environ``: the xdist
#: workers, the app servers and every subprocess the tests start inherit it (a test that wants an empty
#: or a broken cache still sets its own). ``BERTGEOM_TEST_CACHE_DIR`` names the folder to use instead
#: (``tests/test_filled_cache.py`` runs modules on a filled one); the process that made the folder
#: removes it when it exits.
if not os.environ.get("BERTGEOM_TEST_CACHE_DIR"):
    os.environ["BERTGEOM_TEST_CACHE_DIR"] = tempfile.mkdtemp(prefix="bertgeom-test-cache-")
    atexit.register(shutil.rmtree, os.environ["BERTGEOM_TEST_CACHE_DIR"], ignore_errors=True)
os.environ["BERTGEOM_CACHE_DIR"] = os.environ["BERTGEOM_TEST_CACHE_DIR"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("BERTGEOM_PREPARE_SETS", "0")  # no background preparation in app tests (its CPU is the suite's)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A random 2-layer, 4-head BERT with MiniLM's vocabulary, saved like a hub model."""
    from transformers import AutoTokenizer

    from bertgeom.models import build_tiny_random_bert, minilm_dir

    path = tmp_path_factory.mktemp("tiny_bert")
    tok = AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)
    model = build_tiny_random_bert(seed=1, vocab_size=tok.vocab_size, layers=2, heads=4, hidden=32)
    model.save_pretrained(str(path), safe_serialization=True)
    tok.save_pretrained(str(path))
    return path


@pytest.fixture(scope="session")
def tiny_bert(tiny_bert_dir):
    from bertgeom.models import load_model

    return load_model(str(tiny_bert_dir))


@pytest.fixture(scope="session")
def minilm():
    from bertgeom.models import load_model

    return load_model("minilm-l6")


@pytest.fixture(scope="session")
def tiny_variant_dir(tmp_path_factory):
    """A random 2-layer variant-shaped model (k-mer vocabulary, 8 classes) saved like the shipped one."""
    from bertgeom.sars_cov_2.variant import build_tiny_variant_model

    return build_tiny_variant_model(tmp_path_factory.mktemp("tiny_variant"))


@pytest.fixture(scope="session")
def tiny_variant(tiny_variant_dir):
    from bertgeom.models import load_model
    from bertgeom.sars_cov_2.variant import variant_spec

    return load_model(variant_spec(tiny_variant_dir))


# --- browser tests: one Chromium per test module, one app server for the session -------------------
#: Upper bound of a browser wait (an action, an element, an expectation): every wait ends on its
#: event, this only turns a hang into a failure, so it is sized for a busy 2-core machine, not a quiet one.
BROWSER_BOUND_MS = 600_000


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright (never a downloaded browser), one per test module."""
    import shutil
    import sys
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from screenshots import CHROMIUM_ARGS

    from playwright.sync_api import expect

    expect.set_options(timeout=BROWSER_BOUND_MS)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        yield _WatchedBrowser(b)
        b.close()


class _WatchedBrowser:
    """The browser, whose every new page counts its script runs (``tools/screenshots.watch_runs``),
    so ``wait_idle`` waits for the run an action started, never for time."""

    def __init__(self, browser):
        self._browser = browser

    def new_context(self, **kw):
        from screenshots import watch_runs

        context = self._browser.new_context(**kw)
        context.set_default_timeout(BROWSER_BOUND_MS)
        watch_runs(context)
        return context

    def new_page(self, **kw):
        from screenshots import watch_runs

        page = self._browser.new_page(**kw)
        page.set_default_timeout(BROWSER_BOUND_MS)
        watch_runs(page)
        return page

    def __getattr__(self, name):
        return getattr(self._browser, name)


def _app_server(tmp_path_factory, cache_name: str, env: dict | None = None):
    """``streamlit run app.py`` on a free local port with a fresh disk cache folder (and ``env``):
    yields its base URL, stops it afterwards."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    from screenshots import free_port, start_server

    port = free_port()
    proc = start_server(port, {"BERTGEOM_CACHE_DIR": str(tmp_path_factory.mktemp(cache_name)), **(env or {})})
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=60)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The app server shared by the browser test modules (one server start and one model load for all
    of them, instead of one per module): its base URL. Its disk cache is a fresh folder, so the suite
    sees what a new machine sees, whatever earlier runs left in ``~/.cache/bertgeom``. A module that
    needs a server that has computed nothing yet asks for :func:`own_server`."""
    yield from _app_server(tmp_path_factory, "server_cache")


@pytest.fixture(scope="module")
def own_server_env() -> dict:
    """Environment variables for :func:`own_server` (none); a module overrides this fixture to set some."""
    return {}


@pytest.fixture(scope="module")
def own_server(tmp_path_factory, own_server_env):
    """A server of the requesting module's own, with an empty disk cache (the shared one has computed
    what other modules asked for): for first-visit views such as the tour's steps."""
    yield from _app_server(tmp_path_factory, "own_server_cache", own_server_env)


#: Test modules that take longest (seconds of setup, calls and teardown, measured with two workers on
#: 2 cores, 2026-12-02). Used only to *order* the run: with ``-n auto --dist loadfile`` (pytest.ini)
#: each module goes whole to one worker, in collection order, so starting with the longest keeps one
#: worker from being left alone with a long module at the end (longest-first scheduling: 12 min 35 s
#: in alphabetical order, 10 min 30 s to 11 min 40 s in this one). A module not listed runs after
#: these, in its usual order.
SLOWEST_MODULES = {
    "test_precompute.py": 129, "test_e2e_tour_share.py": 120, "test_e2e_hostile_links.py": 113,
    "test_e2e_hostile_markup.py": 94, "test_e2e_deeplinks.py": 85, "test_train_resume.py": 65,
    "test_e2e_browser.py": 63, "test_load.py": 61, "test_shipped_model.py": 51, "test_subspace_page.py": 37,
    "test_e2e_batch.py": 32, "test_outputs_round_three.py": 30, "test_cone_page.py": 29,
    "test_genome_prep_reference.py": 26, "test_spike_only_calls.py": 70,
    "test_precompute_ray_split.py": 19, "test_e2e_tour_first_step.py": 18,
    "test_prepared_sets.py": 16, "test_attention_heads_page.py": 15, "test_projections.py": 15,
    "test_clone_parent_folder.py": 45,  # serially, 2026-12-03: three real starts of python from a copied checkout
    "test_filled_cache.py": 95,  # serially, 2026-12-03: two modules in a pytest of their own, on a filled cache
    "test_issue36_sentences.py": 34,
    "test_subject_once.py": 69,  # serially on a loaded machine, 2026-12-06: every tab of three pages, tiny-random
    "test_e2e_layout_45.py": 132,  # serially, 2026-12-06, load 17
    "test_e2e_waits.py": 360,  # serially, 2026-12-06, under a load of 8-14 on the 2 cores: the walk of waits
}


def pytest_collection_modifyitems(config, items):
    """Longest modules first (:data:`SLOWEST_MODULES`); a module's own tests keep their order."""
    items.sort(key=lambda item: -SLOWEST_MODULES.get(item.path.name, 0))  # stable: ties keep collection order


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per usable core, at most 4 (each browser test starts a server and a
    Chromium; more workers than cores only slows every one of them)."""
    from bertgeom.runtime import usable_cores

    return min(4, usable_cores())
