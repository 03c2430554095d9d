"""Analyses of one input's attention, UI-free: per-head features (:mod:`.heads`) and pattern
labels (:mod:`.patterns`), head similarity (:mod:`.headsim`), interventions (:mod:`.ablation`),
subspace geometry (:mod:`.subspace`), the cone index (:mod:`.cone`) and projections."""
