"""The guided tour reads a plug-in's steps from a registry (issue 35): bertgeom/ui/tour.py names no
case study, the SARS-CoV-2 plug-in registers its genome step (bertgeom.extensions.TourStep), and a step
a plug-in registers is appended after the generic ones with its numbers computed by the model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bertgeom.sars_cov_2.variant.spec import TOUR_GENOME_STEP, demo_genomes
from bertgeom.sars_cov_2.variant.whatif import genome_facts, genome_sentence, parse_what_if
from bertgeom.trace import run_trace

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import sys
import bertgeom.ui.tour as tour
print("after import:", sorted(m for m in sys.modules if m.startswith("bertgeom.sars_cov_2")))
from bertgeom.extensions import TourStep, register_tour_step
from bertgeom.models import REGISTRY
from bertgeom.sars_cov_2.variant.spec import TOUR_GENOME_STEP, demo_genomes

before = tour.steps()
genome = before[-1]
print("genome step:", genome.title == TOUR_GENOME_STEP.title, genome.page, genome.model, genome.work_label)
print("genome text:", genome.text() == demo_genomes()[7]["text"])
register_tour_step(TourStep("Count the tokens", "heads", "minilm-l6", 1,
                            facts=lambda loaded, trace: {"n": int(trace.encoded.n_tokens)},
                            sentence=lambda f: f"It reads {f['n']} tokens.",
                            widget_values=lambda f: {"w_toy": f["n"], "w_gone": None}))
after = tour.steps()
toy = after[-1]
print("count:", len(before), len(after), after[-2].title == genome.title)
print("toy:", toy.page, toy.model, toy.text() == tour._example_text("minilm-l6", 1))
facts = toy.facts()
from bertgeom.models import load_model
from bertgeom.trace import run_trace
n = run_trace(load_model("minilm-l6"), toy.text()).encoded.n_tokens
print("toy facts:", facts.head, facts.sentence == f"It reads {n} tokens.",
      facts.widgets == {"w_toy": n, "w_gone": None})
"""


def test_the_tour_appends_the_steps_plug_ins_register(tmp_path):
    env = {**__import__("os").environ, "BERTGEOM_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, env=env,
                          check=True)
    lines = dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())
    assert lines["after import"] == "[]"  # the tour module itself loads no case study
    assert lines["genome step"] == ("True classifier sars-cov-2-variant "
                                    "Scoring the genome's marker changes with the model…")
    assert lines["genome text"] == "True"
    n = int(lines["count"].split()[0])
    assert lines["count"] == f"{n} {n + 1} True"
    assert lines["toy"] == "heads minilm-l6 True"
    assert lines["toy facts"] == "None True True"


def test_the_genome_step_fills_the_what_if_box_with_the_change_it_names(tiny_variant):
    """The registered step computes the numbers the sentence says and fills the classifier's
    *What if?* box with entries the box reads (its revert box cleared)."""
    text = demo_genomes()[TOUR_GENOME_STEP.example]["text"]
    facts = TOUR_GENOME_STEP.facts(tiny_variant, run_trace(tiny_variant, text))
    assert facts == genome_facts(tiny_variant, run_trace(tiny_variant, text))
    assert TOUR_GENOME_STEP.sentence(facts) == genome_sentence(facts)
    fills = TOUR_GENOME_STEP.widget_values(facts)
    pick = facts["pick"]
    assert pick and pick["nucleotides"]
    assert fills == {"w_add": pick["nucleotides"], "w_revert": None}
    changes, n, problems = parse_what_if(fills["w_add"])
    assert problems == [] and n == pick.get("n_entries", pick["n_markers"])
    assert TOUR_GENOME_STEP.widget_values({**facts, "pick": None}) == {}  # nothing to fill: the box is left alone
