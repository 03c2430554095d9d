"""Analyses over a set of inputs, UI-free: the sets and the batched runner (:mod:`.inputs`), and
each page's per-set reductions (:mod:`.heads`, :mod:`.subspace`, :mod:`.cone`)."""
