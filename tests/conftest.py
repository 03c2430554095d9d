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


def _hand_on_the_apps_settings() -> None:
    """The checkout's ``.streamlit/config.toml`` handed to AppTest in this process (Streamlit's config)
    and to the app servers the tests start (Streamlit's environment variables, which ``streamlit run``
    reads). Streamlit reads the file only from the current folder, so from the folder above a clone
    (``python -m pytest -q bertgeom``) every page would run without the app's settings and say so
    (``bertgeom.launch``); ``python -m bertgeom app`` hands them on as flags the same way. A variable
    the user set to another value is left to the servers, and AppTest keeps what Streamlit read."""
    from pathlib import Path

    from streamlit import config

    from bertgeom.launch import read_settings, setting_text

    options = config.get_config_options()
    for name, value in read_settings(Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").items():
        text = setting_text(value)
        if os.environ.setdefault(options[name].env_var, text) == text:  # the user's own variable is left to win
            # in every process: xdist's workers inherit the variables, not the config
            config.set_option(name, value, where_defined="tests/conftest.py")


_hand_on_the_apps_settings()


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


#: The slow tier: tests whose subject is a long process or a long walk (a load test, the walk of waits
#: over every page and tab, training or precompute interrupted and resumed, a local Ray cluster, the
#: hostile-input walks in Chromium, every family through every tab, the shipped model over its
#: genomes). They add ~25 minutes of test time on 2 cores, so the README's command leaves them out
#: (pytest.ini: ``-m "not slow"``) and stays under 10 minutes; ``.ci/run`` runs them after it
#: (``python -m pytest -q -m slow``), so every push still runs every test. An entry is a module
#: (``test_x.py``), a test (``test_x.py::test_y``, all its parameters) or one parameter
#: (``test_x.py::test_y[p]``); the seconds are the test time measured with two workers on 2 cores
#: (AMD EPYC Zen 4, 2026-12-06, under load), which also order the slow run.
SLOW_TIER: dict[str, float] = {
    "test_load.py": 263, "test_e2e_waits.py": 198, "test_e2e_hostile_links.py": 183,
    "test_e2e_hostile_markup.py": 172, "test_train_resume.py": 122, "test_e2e_round_four.py": 104,
    "test_filled_cache.py": 70, "test_precompute_ray_split.py": 34,
    "test_projections.py::test_umap_seeded_and_stable": 105,  # numba compiles UMAP in every new process
    "test_shipped_model.py::test_one_foreign_marker_or_one_reversion_does_not_flip_the_shipped_model": 57,
    "test_shipped_model.py::test_cone_page_shows_all_8_classes_with_the_shipped_model": 44,
    "test_e2e_tour_share.py::test_the_tour_runs_to_its_last_step_and_every_sentence_matches_the_page": 63,
    "test_e2e_batch.py::test_a_twenty_record_batch_stays_open_through_a_session_and_in_a_second_browser": 56,
    "test_subspace_page.py::test_minilm_page_shows_every_tab_for_the_example_sentence": 52,
    "test_genome_prep_reference.py::test_every_shipped_genome_prepares_exactly_as_the_reference": 50,
    "test_e2e_live_state.py::test_examples_show_the_text_the_page_reads": 39,
    "test_precompute.py::test_ray_engine_on_local_ray_matches_local_engine": 29,
    "test_precompute.py::test_ctrl_c_stops_with_130_and_the_rerun_resumes": 27,
    "test_spike_only_calls.py::test_a_spike_alone_gets_the_class_of_its_genome": 29,
    "test_whatif.py::test_readme_tour_sentence_is_the_shipped_models": 28,
    "test_context_mixing_page.py::test_the_alti_set_section_on_the_shipped_genome_model": 90,  # serially, quiet
    **{f"test_e2e_deeplinks.py::test_a_pages_address_opens_without_a_dialog_for_the_first_visitor[{page}]": s
       for page, s in (("classifier", 45), ("heads", 34), ("subspace", 28), ("cone", 25))},
    # every family but BERT (the fast tier keeps BERT through every page and tab)
    **{f"test_family_pages.py::test_every_page_and_tab_opens_on_each_family[{family}]": s
       for family, s in (("ModernBERT", 42), ("ALBERT", 31), ("ESM-2", 29), ("DistilBERT", 28), ("ELECTRA", 24),
                         ("RoBERTa", 22))},
}

#: Seconds of each module's fast-tier tests (setup, calls and teardown, two workers on 2 cores, the same
#: run as SLOW_TIER). Used only to *order* the run: with ``-n auto --dist loadfile`` (pytest.ini) each
#: module goes whole to one worker, in collection order, so starting with the longest keeps one worker
#: from being left alone with a long module at the end (longest-first scheduling: 12 min 35 s in
#: alphabetical order, 10 min 30 s to 11 min 40 s in this one, 2026-12-02). A module not listed runs
#: after these, in its usual order.
SLOWEST_MODULES = {
    "test_family_pages.py": 40, "test_e2e_tour_share.py": 84, "test_e2e_browser.py": 107,
    "test_e2e_deeplinks.py": 14, "test_precompute.py": 63, "test_e2e_live_state.py": 37,
    "test_clone_parent_folder.py": 140,  # serially, 2026-12-06: four real starts of python, one app server
    "test_round_four.py": 43, "test_genome_prep_reference.py": 12, "test_whatif.py": 10,
    "test_collapse_affinity_importance_pages.py": 28, "test_outputs_round_three.py": 26,
    "test_server_config.py": 25, "test_heads_more_page.py": 24, "test_shipped_model.py": 25,
    "test_layers.py": 23, "test_cone_page.py": 22, "test_flow.py": 21, "test_classify_cli.py": 19,
    "test_e2e_tour_first_step.py": 19, "test_nextclade_conventions.py": 17, "test_probe.py": 16,
    "test_tour_steps.py": 16, "test_prepared_sets.py": 16, "test_subspace_page.py": 15,
    "test_context_mixing_page.py": 15, "test_e2e_batch.py": 10,
    "test_e2e_layout_45.py": 30,  # serially, 2026-12-06, load ~5 (360-820 s beside two or three CPU hogs)
}


def _tier_key(item) -> str:
    return f"{item.path.name}::{item.name}"


def _slow_seconds(item) -> float | None:
    """The item's SLOW_TIER seconds (its module's, its test's or its parameter's), None when fast."""
    key = _tier_key(item)
    for entry in (key, key.split("[")[0], item.path.name):
        if entry in SLOW_TIER:
            return SLOW_TIER[entry]
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection reads the marks
def pytest_collection_modifyitems(config, items):
    """Mark the SLOW_TIER tests ``slow``, then the longest modules first (:data:`SLOWEST_MODULES`, or
    SLOW_TIER's seconds for a run of the slow tier); a module's own tests keep their order."""
    slow_run = "slow" in (config.option.markexpr or "") and "not slow" not in config.option.markexpr
    by_module: dict[str, float] = {}
    for item in items:
        seconds = _slow_seconds(item)
        if seconds is not None:
            item.add_marker(pytest.mark.slow)
            by_module[item.path.name] = by_module.get(item.path.name, 0) + seconds
    order = by_module if slow_run else SLOWEST_MODULES
    items.sort(key=lambda item: -order.get(item.path.name, 0))  # stable: ties keep collection order


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per usable core, at most 4 (each browser test starts a server and a
    Chromium; more workers than cores only slows every one of them)."""
    from bertgeom.runtime import usable_cores

    return min(4, usable_cores())
