"""Model families are plug-ins: ``import bertgeom`` loads no genome code, and the shipped SARS-CoV-2
family is registered the first time a registry is read (issue 35)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import sys
import bertgeom, bertgeom.analysis.cone, bertgeom.trace, bertgeom.sets.heads, bertgeom.figures.heads
case_study = sorted(m for m in sys.modules if m.startswith("bertgeom.sars_cov_2."))
print("after import:", case_study)
from bertgeom.models import REGISTRY
print("default:", REGISTRY.default_id)
print("kinds:", sorted(bertgeom.INPUT_KINDS))
"""


def test_import_bertgeom_loads_no_genome_module_and_the_registry_finds_the_family():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, check=True)
    lines = dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())
    assert lines["after import"] == "[]"
    assert lines["default"] == "sars-cov-2-variant"  # the case study's model is the picker's first once loaded
    assert "'spike'" in lines["kinds"] and "'text'" in lines["kinds"]


def test_the_shipped_family_is_named_as_an_entry_point():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    from bertgeom.models import SHIPPED_PLUGINS

    assert project["entry-points"]["bertgeom.plugins"] == SHIPPED_PLUGINS


def test_a_local_variant_directory_is_recognised_without_touching_a_registry_first():
    probe = ("from bertgeom.models import resolve_spec\n"
             "print(resolve_spec('bertgeom/data/variant_model').loader)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "variant"


def test_a_plug_in_that_fails_to_load_is_reported_and_the_others_still_work():
    probe = ("import bertgeom.models as m\n"
             "m.SHIPPED_PLUGINS['broken'] = 'bertgeom_no_such_plugin:register'\n"
             "print('default:', m.REGISTRY.default_id)\n"
             "print('errors:', [name for name, _ in m.PLUGIN_ERRORS])\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    lines = dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())
    assert lines["default"] == "sars-cov-2-variant"
    assert lines["errors"] == "['broken']"
    assert "the plug-in 'broken' (bertgeom_no_such_plugin:register) could not be loaded" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_input_kind_holds_what_it_is_and_its_words_hold_how_the_pages_word_it():
    """Issue 47: the kind's data and its UI text apart. Every wording is plain text in ``KindWords``; no
    field of ``InputKind`` is one of them; every registered kind (the genome plug-in, the toy family,
    text) words itself through ``words``, and the pages read that (the genome box's label)."""
    from dataclasses import fields

    from bertgeom.inputs import INPUT_KINDS, InputKind, KindWords, input_kind_of
    from bertgeom.models import REGISTRY

    words = {f.name: f.type for f in fields(KindWords)}
    assert set(words.values()) == {"str"}
    assert not words.keys() & {f.name for f in fields(InputKind)}
    assert all(isinstance(kind.words, KindWords) for kind in INPUT_KINDS.values())
    genome = input_kind_of(REGISTRY["sars-cov-2-variant"])
    assert genome.words.noun == "genome" and "FASTA" in genome.words.box_label
    assert INPUT_KINDS["text"].words.plural == "sentences"


def test_every_bundled_models_name_fits_the_sidebars_picker():
    """Issue 45: the Model box showed "SARS-CoV-2 variant BERT (spike 1": at 1400 px the sidebar's picker
    shows about 31 characters (MiniLM's 31-character name fits whole); what does not fit goes into the
    description."""
    from bertgeom.models import REGISTRY

    names = {spec.id: spec.display_name for spec in REGISTRY.values()}
    assert names and all(len(name) <= 31 for name in names.values()), names
