"""The marker-change search scores every candidate with the model: the probabilities it reports are
those of a forward pass on the changed spike, and the tour's pick really changes the call when one does."""

from __future__ import annotations

import numpy as np
import pytest

from bertgeom.genome.markers import load_marker_table, marker_state
from bertgeom.inputs import encode_input
from bertgeom.variant.spec import demo_genomes
from bertgeom.variant.explain import apply_changes, parse_change, probabilities_for_spike
from bertgeom.variant.whatif import candidate_changes, rank_changes, tour_change


@pytest.fixture(scope="module")
def omicron(tiny_variant):
    enc = encode_input(tiny_variant, demo_genomes()[7]["text"])
    return enc.extra["analysis"].spike.aligned


def test_candidates_cover_every_carried_marker(omicron):
    table = load_marker_table()
    carried = [m for m in table.of("omicron", role=None) if m.kind in ("sub", "del")
               and marker_state(m, omicron) == "present"]
    cands = candidate_changes(omicron, "omicron", table)
    singles = [c for c in cands if c.revert and len(c.markers) == 1]
    assert len(singles) == len(carried) > 5
    assert any(not c.revert for c in cands) and any(c.label.startswith("revert all") for c in cands)
    assert any(" in RBD " in c.label for c in cands)


def test_reported_probabilities_are_the_models(tiny_variant, omicron):
    rows = rank_changes(tiny_variant, omicron, "omicron")
    assert all(round(a["drop"], 4) >= round(b["drop"], 4) for a, b in zip(rows, rows[1:]))
    labels = list(tiny_variant.labels)
    base = probabilities_for_spike(tiny_variant, omicron)
    top = rows[0]
    assert top["p_before"] == pytest.approx(base[labels.index("omicron")], abs=1e-5)
    changed = apply_changes(omicron, [parse_change(t) for t in top["nucleotides"].split()])
    after = probabilities_for_spike(tiny_variant, changed)
    assert top["p_after"] == pytest.approx(after[labels.index("omicron")], abs=1e-5)
    assert top["new_call"] == labels[int(np.argmax(after))]
    pick = tour_change(rows, "omicron")
    flips = [r for r in rows if r["new_call"] != "omicron"]
    assert pick is (min(flips, key=lambda r: (r["n_markers"], -r["drop"])) if flips else rows[0])
