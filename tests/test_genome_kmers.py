"""k-mer tokenisation, vocabulary and token coordinates (bertgeom.sars_cov_2.genome.kmers)."""

import numpy as np

from bertgeom.sars_cov_2.genome.kmers import (
    CLS_ID,
    PAD_ID,
    SEP_ID,
    UNK_ID,
    KmerVocab,
    domain_token_ranges,
    kmer_codes,
    n_kmers,
    seq2kmer,
    token_aa_label,
    token_axis,
    token_nt_span,
)
from bertgeom.sars_cov_2.genome.reference import reference_spike

# The case study's token table (Bonino 2025, arXiv:2502.12033; the authors' released code), which the
# paper's code produced with its one-codon-short ends
PAPER_TOKENS = {
    "SP": (1, 4), "S1": (5, 228), "S2": (229, 424), "NTD": (5, 102), "no domain 1": (102, 106),
    "RBD": (106, 180), "no domain 2": (181, 262), "FP": (263, 269), "no domain 3": (269, 304),
    "HR1": (304, 328), "no domain 4": (328, 387), "HR2": (388, 404), "TM": (404, 412), "CT": (412, 424),
}  # fmt: skip


def test_seq2kmer_matches_paper():
    spike = reference_spike()
    km = seq2kmer(spike)
    assert len(km) == 425 == n_kmers(3822)
    assert km[0] == spike[:12] and km[1] == spike[9:21]
    assert km[-1] == spike[3816:] + "NNNNNN"
    assert seq2kmer("acgt") == ["ACGTNNNNNNNN"]
    assert seq2kmer("") == [] and n_kmers(0) == 0
    assert len(seq2kmer("A" * 24)) == 2  # starts 0, 9 (18 + 12 > 24)


def test_token_coordinates():
    assert token_aa_label(1) == "1-4" and token_aa_label(71) == "211-214" and token_aa_label(425) == "1273-1276"
    assert token_nt_span(1) == (0, 12) and token_nt_span(425) == (3816, 3828)
    ax = token_axis(total_length=512)
    assert len(ax) == 512 and ax.label[0] == "[CLS]" and ax.label[426] == "[SEP]" and ax.label[511] == "[PAD]"
    assert ax.label[1] == "1-4" and ax.label[71] == "211-214" and ax.label[425] == "1273-1276"
    assert ax.domain[1] == "SP" and ax.coarse_domain[200] == "S1" and ax.domain[150] == "RBD"
    assert ax.is_special.sum() == 512 - 425
    paper = token_axis(paper_labels=True)
    assert paper.label[426] == "1276-1279"  # the paper labelled [SEP] like a k-mer


def test_domain_token_ranges_paper_and_fixed():
    assert domain_token_ranges(fixed=False) == PAPER_TOKENS
    fixed = domain_token_ranges()
    assert fixed["SP"] == (1, 5) and fixed["S2"] == (229, 425) and fixed["TM"] == (405, 413)


def test_vocab_build_encode_save_load(tmp_path):
    spike = reference_spike()
    other = spike[:100] + "T" + spike[101:]
    vocab = KmerVocab.build([spike, spike])
    assert vocab.tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ids, unk = vocab.encode(spike)
    assert ids.shape == (512,) and ids[0] == CLS_ID and ids[426] == SEP_ID and (ids[427:] == PAD_ID).all()
    assert unk == 0.0 and UNK_ID not in ids[1:426]
    ids2, unk2 = vocab.encode(other)
    assert (ids2 == UNK_ID).sum() == 2 and np.isclose(unk2, 2 / 425)  # base 100 lies in k-mers 11 and 12
    vocab.save(tmp_path / "v.json")
    again = KmerVocab.load(tmp_path / "v.json")
    assert again.tokens == vocab.tokens
    assert (again.encode(other)[0] == ids2).all()
    assert vocab.decode(ids[:2]) == ["[CLS]", spike[:12]]


def test_vectorised_equals_loop():
    rng = np.random.default_rng(1)
    spike = np.frombuffer(reference_spike().encode(), dtype=np.uint8)
    seqs = []
    for _ in range(20):
        s = spike.copy()
        idx = rng.integers(0, 3822, 10)
        s[idx] = rng.choice(np.frombuffer(b"ACGTN-R", dtype=np.uint8), 10)
        seqs.append(s.tobytes().decode())
    vocab = KmerVocab.build(seqs[:10])
    fast, u_fast = vocab.encode_batch(seqs)
    slow = np.stack([vocab.encode(s)[0] for s in seqs])
    assert (fast == slow).all()
    mixed, _ = vocab.encode_batch(seqs[:3] + [seqs[0][:500]])  # unequal lengths: loop path
    assert (mixed[:3] == fast[:3]).all() and mixed[3, 1 + n_kmers(500)] == SEP_ID
    assert kmer_codes(seqs).shape == (20, 425)
    assert len(KmerVocab.build(seqs[:10], min_count=10)) < len(vocab)
