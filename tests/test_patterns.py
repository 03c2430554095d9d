"""Pattern labels on synthetic maps: one per pattern, for Kovaleva's classes and Bonino's gates."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bertgeom.analysis.heads import head_features
from bertgeom.tokens import TokenKinds
from bertgeom.analysis.patterns import (
    GATE_CLASSES,
    KOVALEVA_CLASSES,
    PatternThresholds,
    classify_heads,
    clark_behaviour,
    describe_thresholds,
    gate_labels,
    kovaleva_labels,
    label_distribution,
)

T = 32  # [CLS] + 30 content tokens + [SEP]
SEP = T - 1


def rownorm(a):
    return a / a.sum(-1, keepdims=True)


def identity():
    return np.eye(T)


def shifted_below():  # A[i, i-1] = 1: previous token
    a = np.eye(T, k=-1)
    a[0, 0] = 1.0
    return a


def shifted_above():  # A[i, i+1] = 1: next token
    a = np.eye(T, k=1)
    a[-1, -1] = 1.0
    return a


def vertical_content(j=7):  # 1 e_j^T on a content token
    a = np.zeros((T, T))
    a[:, j] = 1.0
    return a


def block_diagonal():  # three uniform blocks of 10 content tokens
    a = np.zeros((T, T))
    for lo, hi in [(1, 11), (11, 21), (21, 31)]:
        a[lo:hi, lo:hi] = 1.0
    a[0, :] = a[SEP, :] = 1.0
    return rownorm(a)


def uniform():
    return np.full((T, T), 1.0 / T)


def all_to_sep():
    a = np.zeros((T, T))
    a[:, SEP] = 1.0
    return a


PATTERNS = {
    # name: (map, Kovaleva class, primary gate)
    "identity": (identity, "diagonal", "instance"),
    "shift_below": (shifted_below, "diagonal", "backward"),
    "shift_above": (shifted_above, "diagonal", "forward"),
    "vertical_content": (vertical_content, "vertical", "directional"),
    "block_diagonal": (block_diagonal, "block", "cluster"),
    "uniform": (uniform, "heterogeneous", "open"),
    "all_to_sep": (all_to_sep, "vertical", "closed"),
}


@pytest.fixture(scope="module")
def synthetic():
    names = list(PATTERNS)
    attn = np.stack([PATTERNS[n][0]() for n in names]).reshape(1, len(names), T, T)
    table = head_features(attn, TokenKinds.simple(T))
    return names, table, classify_heads(table)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_synthetic_pattern_labels(synthetic, name):
    names, _, labels = synthetic
    h = names.index(name)
    _, kov, gate = PATTERNS[name]
    assert labels["kovaleva"].labels[0, h] == kov
    assert labels["gates"].primary[0, h] == gate
    assert labels["gates"].labels[0, h] == gate  # no ties for the pure patterns
    # clean patterns are classified with full confidence (block: entropy margin is smaller)
    assert labels["gates"].confidence[0, h] == pytest.approx(1.0)
    assert labels["kovaleva"].confidence[0, h] >= (0.8 if name == "block_diagonal" else 1.0)


def test_scores_are_probabilities_and_label_score_is_confidence(synthetic):
    _, _, labels = synthetic
    for pl in labels.values():
        assert set(np.unique(pl.primary)) <= set(pl.classes)
        for v in pl.scores.values():
            assert np.all((v >= 0) & (v <= 1))
        for idx in np.ndindex(pl.primary.shape):
            assert pl.confidence[idx] == pl.scores[pl.primary[idx]][idx]
            # the winning class also has the top soft score
            assert pl.confidence[idx] == pytest.approx(max(s[idx] for s in pl.scores.values()))


def test_clark_behaviour_on_synthetic(synthetic):
    names, _, labels = synthetic
    lab = dict(zip(names, labels["clark"].labels[0]))
    assert lab["shift_below"] == "prev" and lab["shift_above"] == "next" and lab["all_to_sep"] == "sep"
    assert lab["identity"] == "other"
    # ln 32 = 3.47 nats < Clark's fixed 3.8, yet a uniform head: the share of ln n calls it broad
    assert lab["uniform"] == "broad"
    for n in (12, 40, 130):
        t = head_features(np.full((1, 1, n, n), 1 / n), TokenKinds.simple(n))
        assert clark_behaviour(t).labels[0, 0] == "broad", n
    # a head spread over only 4 of 40 keys (entropy ln 4 = 0.38 ln 40) is not broad
    a = np.zeros((1, 1, 40, 40))
    for i in range(40):
        a[0, 0, i, [(i + k) % 40 for k in range(4)]] = 0.25
    assert clark_behaviour(head_features(a, TokenKinds.simple(40))).labels[0, 0] != "broad"


def test_mixtures():
    """Blends of two templates and noisy 'real-ish' heads (softmax of template + noise logits)."""
    kinds = TokenKinds.simple(T)
    rng = np.random.default_rng(0)
    below, above = shifted_below(), shifted_above()
    maps = {
        "sep+prev": 0.4 * all_to_sep() + 0.6 * below,
        "prev+next": 0.5 * below + 0.5 * above,
        "cls+sep": 0.5 * np.eye(T)[[0] * T] + 0.5 * all_to_sep(),
    }

    def noisy(template_logits, noise=1.0):
        z = template_logits + noise * rng.normal(size=(T, T))
        return rownorm(np.exp(z - z.max(-1, keepdims=True)))

    maps["noisy_prev"] = noisy(6.0 * below)
    maps["noisy_sep"] = noisy(7.0 * all_to_sep())
    maps["noisy_broad"] = noisy(np.zeros((T, T)), noise=0.3)
    maps["random_peaky"] = noisy(np.zeros((T, T)), noise=3.0)
    names = list(maps)
    table = head_features(np.stack([maps[n] for n in names])[None], kinds)
    kov = dict(zip(names, kovaleva_labels(table).labels[0]))
    gates = gate_labels(table)
    gate = dict(zip(names, gates.labels[0]))
    conf = dict(zip(names, gates.confidence[0]))

    assert kov["sep+prev"] == "vertical+diagonal" and gate["sep+prev"] == "backward"
    assert kov["prev+next"] == "diagonal" and gate["prev+next"] == "backward+forward"
    assert kov["cls+sep"] == "vertical" and gate["cls+sep"] == "closed"
    assert kov["noisy_prev"] == "diagonal" and gate["noisy_prev"] == "backward"
    assert kov["noisy_sep"] == "vertical" and gate["noisy_sep"] == "closed"
    assert kov["noisy_broad"] == "heterogeneous" and gate["noisy_broad"] == "open"
    assert kov["random_peaky"] == "heterogeneous" and gate["random_peaky"] == "mixed"
    # tie: prev = next = 0.5 sits exactly on the candidate threshold -> confidence 0.5
    assert conf["prev+next"] == pytest.approx(0.5)
    assert conf["noisy_prev"] > 0.5 and conf["noisy_sep"] > 0.5


def test_pair_input_segment_blocks_are_kovaleva_block():
    """Sentence pair, rows uniform inside their own segment (Kovaleva's Block)."""
    n = 25
    kinds = TokenKinds.simple(n, sep_positions=[12, 24])  # segments of 11 and 11 content tokens
    a = np.zeros((n, n))
    a[1:12, 1:12] = 1.0
    a[13:24, 13:24] = 1.0
    a[0, :] = a[12, :] = a[24, :] = 1.0
    table = head_features(rownorm(a)[None, None], kinds)
    assert table["segment_mass"][0, 0] == pytest.approx(1.0)
    assert kovaleva_labels(table).labels[0, 0] == "block"
    # The block graph (edges where S_ij >= 1.5 / n_v) finds both segments: in-block weight 1/11 > 1.5/22.
    assert table["n_blocks"][0, 0] == 2
    # Unequal segments (8 + 14): the larger block's weight 1/14 still passes 1.5/22 (it missed the old
    # "twice uniform" 2/22), so the head is a cluster head as well as Kovaleva's block.
    kinds2 = TokenKinds.simple(n, sep_positions=[9, 24])
    b = np.zeros((n, n))
    b[1:9, 1:9] = 1.0
    b[10:24, 10:24] = 1.0
    b[0, :] = b[9, :] = b[24, :] = 1.0
    t2 = head_features(rownorm(b)[None, None], kinds2)
    assert t2["n_blocks"][0, 0] == 2
    assert kovaleva_labels(t2).labels[0, 0] == "block"
    assert gate_labels(t2).labels[0, 0] == "cluster"
    # Very unequal segments (3 + 19): 1/19 < 1.5/22, the large block is missed; the segment score is not.
    kinds3 = TokenKinds.simple(n, sep_positions=[4, 24])
    c = np.zeros((n, n))
    c[1:4, 1:4] = 1.0
    c[5:24, 5:24] = 1.0
    c[0, :] = c[4, :] = c[24, :] = 1.0
    t3 = head_features(rownorm(c)[None, None], kinds3)
    assert t3["n_blocks"][0, 0] < 2
    assert kovaleva_labels(t3).labels[0, 0] == "block"
    assert gate_labels(t3).labels[0, 0] != "cluster"


def test_thresholds_change_labels_and_describe():
    kinds = TokenKinds.simple(T)
    table = head_features((0.55 * all_to_sep() + 0.45 * shifted_below())[None, None], kinds)
    assert gate_labels(table).labels[0, 0] == "closed"
    strict = PatternThresholds(gate_closed=0.6)
    assert gate_labels(table, strict).labels[0, 0] == "mixed"  # prev 0.45 < 0.5, not open
    looser = dataclasses.replace(strict, gate_candidate=0.4)
    assert gate_labels(table, looser).labels[0, 0] == "backward"
    desc = describe_thresholds()
    names = {d["name"] for d in desc}
    assert {"kov_v_high", "gate_closed", "gate_open_k90", "clark_broad_share", "softness"} <= names
    for d in desc:
        assert d["help"] and d["min"] <= d["default"] <= d["max"] and d["group"]


def test_label_distribution_over_inputs():
    kinds = TokenKinds.simple(T)
    t1 = head_features(np.stack([identity(), all_to_sep()])[None], kinds)
    t2 = head_features(np.stack([shifted_below(), all_to_sep()])[None], kinds)
    classes, dist = label_distribution([t1, t2], "gates")
    assert classes == GATE_CLASSES and dist.shape == (1, 2, len(GATE_CLASSES))
    np.testing.assert_allclose(dist.sum(-1), 1.0)
    assert dist[0, 0, classes.index("instance")] == 0.5 and dist[0, 0, classes.index("backward")] == 0.5
    assert dist[0, 1, classes.index("closed")] == 1.0
    classes_k, dist_k = label_distribution([t1, t2], "kovaleva")
    assert classes_k == KOVALEVA_CLASSES and dist_k[0, 0, classes_k.index("diagonal")] == 1.0


def test_rows_and_counts_api(synthetic):
    names, _, labels = synthetic
    kov = labels["kovaleva"]
    rows = kov.to_rows()
    assert len(rows) == len(names) and rows[0]["layer"] == 1 and rows[0]["head"] == 1
    assert {"label", "confidence", "score_vertical", "V", "Dg"} <= set(rows[0])
    counts = kov.counts()
    assert counts["diagonal"] == 3 and counts["vertical"] == 2 and sum(counts.values()) == len(names)
    assert kov.heads_with("block") == [(0, names.index("block_diagonal"))]
