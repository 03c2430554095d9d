"""How the shipped variant model's accuracy falls as more of the spike it reads is N: the measurement
behind the gate's unread-share floor (bertgeom.sars_cov_2.genome.gate.MAX_UNREAD_SHARE).

Each validation genome's spike gets amplicon-sized N runs (250 nt, at random places, seed 0) laid over
it until 0-90 % of it is N, twice per level; each masked spike is read by the model, and accuracy and
median confidence are printed per tenth of unread 12-mers (holding N or unknown to the vocabulary).
Run: ``python bench/bench_unread_gate.py`` (about a minute on 2 cores). Measured on an Intel Xeon
(family 6 model 106, 2 cores, AVX-512, no bf16), 2026-12-03: 1.00 below 10 % unread, 0.97 at
40-50 %, 0.91 at 50-60 %, 0.72 at 70-80 %, 0.47 above 90 %, median confidence 0.88-0.97 throughout.
"""

import random

import numpy as np

from bertgeom.sars_cov_2.variant import variant_spec, load_variant
from bertgeom.sars_cov_2.variant.predict import logits_for_ids
from bertgeom.sars_cov_2.genome.dataset import load_validation_small
from bertgeom.sars_cov_2.genome.align import align_genome, cut_spike
from bertgeom.sars_cov_2.genome.gate import unread_share
from bertgeom.sars_cov_2.genome.kmers import seq2kmer, UNK_ID
from bertgeom.sars_cov_2.genome.classes import CLASSES
loaded = load_variant(variant_spec())
vocab = loaded.tokenizer
rng = random.Random(0)
res = {}
for rec, meta in load_validation_small():
    cut = cut_spike(align_genome(rec.sequence))
    for frac in (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        for trial in range(2):
            s = list(cut.aligned)
            # N in amplicon-like runs of ~250 nt until frac reached
            n_target = int(frac * len(s))
            masked = set()
            while len(masked) < n_target:
                a = rng.randrange(0, len(s))
                masked.update(range(a, min(a + 250, len(s))))
            for i in masked:
                s[i] = 'N'
            text = ''.join(s)
            ids, unk = vocab.encode(text)
            u = unread_share(seq2kmer(text), ids, UNK_ID)
            logit = logits_for_ids(loaded, ids[None, :])[0]
            p = np.exp(logit - logit.max())
            p /= p.sum()
            pred = CLASSES[int(p.argmax())]
            b = min(int(u * 10), 9)
            res.setdefault(b, []).append((pred == meta['class'], float(p.max())))
for b in sorted(res):
    v = res[b]
    acc, conf = np.mean([x for x, _ in v]), np.median([c for _, c in v])
    print(f"unread {b / 10:.1f}-{(b + 1) / 10:.1f}: n={len(v)} accuracy={acc:.2f} median confidence={conf:.3f}")
