"""Every cache key of the set views, built in one place.

The pages read and the background preparation (:mod:`bertgeom.sets.prepared`) writes the same
entries of :mod:`bertgeom.cache`, so each key is made by exactly one function here: its kind and
code version, the model's weights hash, a digest of the input (a set's fingerprint, a text's digest)
and every parameter. A changed model, set, parameter or format simply misses.

References: :mod:`bertgeom.cache` (the key and its tiers); issue 35 ("cache keys built in one place").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from bertgeom.cache import CacheKey, text_digest
from bertgeom.sets.inputs import InputItem, set_fingerprint

#: Version of the class-mean maps stored on disk.
CLASS_MEAN_VERSION = "class-mean-v1"
#: Version of the Cone Index page's set profiles and class entropies on disk.
CONE_DISK_VERSION = "cone-v1"
#: Version of the Subspace page's across-inputs arrays (v2: D1 is delta_A; v3: faithful reads the
#: next layer; v4: and is padded to 512).
ACROSS_VERSION = "subspace-across/v4"
#: Versions of the examples' attention flow (page defaults) and checkpoint comparison on disk.
FLOW_VERSION = "flow-v1"
COMPARE_VERSION = "compare-checkpoints-v1"
#: Version of one input's context-mixing arrays (:func:`bertgeom.analysis.context_mixing.context_mixing_view`)
#: and of the set's mixing ratios (:func:`bertgeom.sets.context_mixing.mixing_over_set`) on disk.
CONTEXT_MIXING_VERSION = "context-mixing-v1"
#: Version of the set's ALTI reductions (:func:`bertgeom.sets.context_mixing.alti_over_set`) on disk.
ALTI_SET_VERSION = "alti-set-v1"


def normalised_digest(text: str) -> str:
    """The digest of one input as the pages key it (after :func:`bertgeom.inputs.normalise_text`)."""
    from bertgeom.inputs import normalise_text

    return text_digest(normalise_text(text))


def heads_set_key(loaded, items: Sequence[InputItem]) -> CacheKey:
    """The Attention Heads page's statistics over a set (:func:`bertgeom.sets.heads.compute_set_arrays`)."""
    from bertgeom.sets.heads import JS_MAX_ROWS, SET_THETA, SET_VERSION

    return CacheKey.of("heads-set", SET_VERSION, weights=loaded.weights_hash, inputs=set_fingerprint(items),
                       theta=float(SET_THETA), js_rows=int(JS_MAX_ROWS))


def class_mean_key(loaded, fingerprint: str, names: Sequence[str], theta: float) -> CacheKey:
    """The class-mean maps of the named inputs of a set."""
    digest = hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]
    return CacheKey.of("class-mean", CLASS_MEAN_VERSION, weights=loaded.weights_hash, inputs=fingerprint,
                       names=digest, theta=float(theta))


def cone_set_key(model_id: str, loaded, fingerprint: str, token_set: str, pad_to: int | None) -> CacheKey:
    """The Cone Index page's per-input profiles over a set (:func:`bertgeom.sets.cone.cone_profiles_over_set`)."""
    return CacheKey.of("cone-set", CONE_DISK_VERSION, weights=loaded.weights_hash, inputs=fingerprint,
                       model=model_id, token_set=token_set, pad_to=int(pad_to or 0))


def class_entropy_key(model_id: str, loaded, fingerprint: str, label: str, pad_to: int | None,
                      correct_only: bool) -> CacheKey:
    """The entropies of one class's mean attention over a set (the Cone Index page)."""
    return CacheKey.of("class-entropy", CONE_DISK_VERSION, weights=loaded.weights_hash, inputs=fingerprint,
                       model=model_id, label=label, pad_to=int(pad_to or 0), correct_only=bool(correct_only))


def across_key(model_id: str, weights_hash: str, fingerprint: str, layer: int, head: int, eps: float,
               token_set: str) -> CacheKey:
    """The Subspace page's D1-D3 of one head across the inputs of a set."""
    return CacheKey.of("subspace-across", ACROSS_VERSION, weights=weights_hash, inputs=fingerprint,
                       model=model_id, layer=int(layer), head=int(head), eps=float(eps), token_set=token_set)


def faithful_geometry_key(model_id: str, weights_hash: str, text: str, eps: float, token_set: str) -> CacheKey:
    """The Subspace page's faithful D1-D3 of every head on one input (kept in memory only)."""
    return CacheKey.of("subspace-faithful", 1, weights=weights_hash, inputs=normalised_digest(text),
                       model=model_id, eps=float(eps), token_set=token_set)


def layer_records_key(model_id: str, weights_hash: str, fingerprint: str, layer: int, with_groups: bool) -> CacheKey:
    """One layer's queries and keys over a set (Attention Heads, *Queries & keys over a set*; memory only)."""
    return CacheKey.of("qk-layer-records", 1, weights=weights_hash, inputs=fingerprint, model=model_id,
                       layer=int(layer), with_groups=bool(with_groups))


def qk_map_key(model_id: str, weights_hash: str, fingerprint: str, layer: int, head: int, with_groups: bool,
               method: str, normalise: bool) -> CacheKey:
    """One head's 2-D map of queries and keys over a set (PCA, UMAP or t-SNE; memory only): UMAP and
    t-SNE take seconds to a minute, so a rerun of the tab (a search, a colour) must not fit them again."""
    return CacheKey.of("qk-map", 1, weights=weights_hash, inputs=fingerprint, model=model_id, layer=int(layer),
                       head=int(head), with_groups=bool(with_groups), method=str(method), normalise=bool(normalise))


def flow_key(loaded, text: str, n: int, residual: float, target: int, normalize: bool) -> CacheKey:
    """One input's attention flow and rollout (:func:`bertgeom.analysis.flow.flow_view`)."""
    return CacheKey.of("flow", FLOW_VERSION, weights=loaded.weights_hash, inputs=normalised_digest(text),
                       n=int(n), residual=float(residual), target=int(target), normalize=bool(normalize))


def compare_key(loaded, partner, text: str) -> CacheKey:
    """Two checkpoints compared head by head on one input (weight and map cosines)."""
    return CacheKey.of("compare-checkpoints", COMPARE_VERSION, weights=loaded.weights_hash,
                       inputs=normalised_digest(text), partner=partner.weights_hash)


def example_views_key(loaded, text: str) -> CacheKey:
    """The preparation's own mark that one example's flow, comparisons and context mixing are on disk."""
    return CacheKey.of("example-views", f"{FLOW_VERSION}+{COMPARE_VERSION}+{CONTEXT_MIXING_VERSION}",
                       weights=loaded.weights_hash,
                       inputs=normalised_digest(text))


#: Bump when the per-input sweep arrays change (2: calibrated probabilities, 1: the raw softmax).
SWEEP_VERSION = 2


def sweep_key(loaded, item: InputItem) -> CacheKey:
    """One input's single-head disabling sweep (:func:`bertgeom.sets.ablation.sweep_of_input`)."""
    return CacheKey.of("head-sweep", SWEEP_VERSION, weights=loaded.weights_hash, inputs=text_digest(item.text))


#: Versions of the rank-collapse curves and the head importance over a set on disk.
RANK_COLLAPSE_VERSION = "rank-collapse-v1"
HEAD_IMPORTANCE_VERSION = "head-importance-v1"


def rank_collapse_set_key(loaded, fingerprint: str, token_set: str, norm: str) -> CacheKey:
    """Dong et al.'s curves of every input of a set (:func:`bertgeom.sets.collapse.rank_collapse_over_set`)."""
    return CacheKey.of("rank-collapse-set", RANK_COLLAPSE_VERSION, weights=loaded.weights_hash, inputs=fingerprint,
                       token_set=token_set, norm=norm)


def head_importance_set_key(loaded, fingerprint: str) -> CacheKey:
    """Michel et al.'s head importance over a set (:func:`bertgeom.sets.collapse.head_importance_over_set`)."""
    from bertgeom.analysis.gradients import MASK_SHARE

    return CacheKey.of("head-importance-set", HEAD_IMPORTANCE_VERSION, weights=loaded.weights_hash,
                       inputs=fingerprint, mask_share=float(MASK_SHARE))


def rank_collapse_input_key(loaded, text: str, token_set: str, norm: str) -> CacheKey:
    """Dong et al.'s curves of one input (the Cone Index page's *Rank collapse* section)."""
    return CacheKey.of("rank-collapse-input", RANK_COLLAPSE_VERSION, weights=loaded.weights_hash,
                       inputs=normalised_digest(text), token_set=token_set, norm=norm)


def context_mixing_key(loaded, text: str) -> CacheKey:
    """One input's norm-based attention, mixing ratios and ALTI (the Attention Heads page's *Context
    mixing* tab)."""
    return CacheKey.of("context-mixing", CONTEXT_MIXING_VERSION, weights=loaded.weights_hash,
                       inputs=normalised_digest(text))


def context_mixing_set_key(loaded, items: Sequence[InputItem]) -> CacheKey:
    """The set's mixing ratios per input, layer and head (:func:`bertgeom.sets.context_mixing.mixing_over_set`)."""
    return CacheKey.of("context-mixing-set", CONTEXT_MIXING_VERSION, weights=loaded.weights_hash,
                       inputs=set_fingerprint(items))


def alti_set_key(loaded, items: Sequence[InputItem]) -> CacheKey:
    """The set's ALTI reductions per input and layer (:func:`bertgeom.sets.context_mixing.alti_over_set`:
    self-contributions, rollout self-shares, rank agreement with attention rollout at r = 0.5)."""
    from bertgeom.analysis.flow import FLOW_RESIDUAL

    return CacheKey.of("alti-set", ALTI_SET_VERSION, weights=loaded.weights_hash, inputs=set_fingerprint(items),
                       residual=float(FLOW_RESIDUAL))
