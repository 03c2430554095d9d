"""Old import path of :mod:`bertgeom.sets.inputs` (sets of inputs and the batched runner), kept for
code written before the move."""

from bertgeom.sets.inputs import (  # noqa: F401
    InputItem,
    SetResult,
    cache_dir,
    disk_cached_arrays,
    genome_set,
    labelled_fasta_set,
    map_over_set,
    sentence_set,
    set_fingerprint,
    shipped_set,
)
