"""The per-head reference implementation of the head features: a plain loop over heads and query
rows of the formulas that :func:`bertgeom.analysis.heads.head_features` computes for all heads at
once. The tests hold the two against each other; the benchmarks time them (the "per-head loops"
baseline)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from bertgeom.analysis.heads import (
    _K90_TOL,
    DEFAULT_DIST_BINS,
    _as_lhtt,
    _check_params,
    _query_rows,
)
from bertgeom.tokens import TokenKinds


def reference_names(max_offset: int, local_windows: Sequence[int]) -> list[str]:
    """The feature columns in table order, written out here (not read from the registry of
    :mod:`bertgeom.analysis.heads`) so that the agreement test also holds the order."""
    names = ["self", "prev", "next"]
    for k in range(2, max_offset + 1):
        names += [f"off_m{k}", f"off_p{k}"]
    names += ["bwd", "fwd", "bwd_all", "fwd_all"] + [f"local_{int(w)}" for w in local_windows]
    names += ["cls", "sep", "sep_max", "punct", "special", "sink", "content_mass", "sep_from_sep", "sep_from_other"]
    names += ["entropy", "entropy_norm", "entropy_cls", "max_weight", "verticality", "col_content", "col3_content"]
    names += ["mean_dist", "mean_dist_norm", "signed_offset", "signed_offset_norm"]
    names += ["mean_dist_content", "mean_dist_content_norm", "signed_offset_content"]
    names += ["k90_median", "k90_mean", "k90_frac", "block_mass", "block_inner", "n_blocks", "segment_mass"]
    names += ["delta_row", "template_residual"]
    return names


def reference_per_head(
    attn,
    kinds: TokenKinds,
    *,
    rows: str = "content",
    local_window: int = 1,
    max_offset: int = 3,
    local_windows: Sequence[int] = (1, 2, 4),
    k_mass: float = 0.9,
    dist_bins: Sequence[int] = DEFAULT_DIST_BINS,
    block_tau: float = 1.5,
    entropy_smoothing: float = 1e-4,
) -> dict:
    """Straightforward transcription of the same formulas: a Python loop over heads and
    over query rows (numpy on each row vector), depth-first search for the block components.

    Returns ``{"features": {name: [L, H]}, "hist": [L, H, B], "k90_rows": [L, H, nq]}``.
    Written independently of ``head_features`` so that the agreement test is meaningful.
    """
    a4 = _as_lhtt(attn)
    L, H, T, _ = a4.shape
    _check_params(kinds, T, local_window, max_offset, local_windows, dist_bins, k_mass)
    q_rows = [i for i in range(T) if _query_rows(kinds, rows)[i]]
    content = kinds.content
    V = [j for j in range(T) if content[j]]
    nv = len(V)
    n_real = int(sum(bool(x) for x in kinds.real))  # [CLS], [SEP] and content: every key of a row
    seps = [j for j in range(T) if kinds.is_sep[j]]
    clss = [j for j in range(T) if kinds.is_cls[j]]
    seg = kinds.segment_ids
    two_seg = kinds.n_segments >= 2
    edges = list(dist_bins)
    nb = 2 * len(edges) + 1
    w = int(local_window)
    eps = float(entropy_smoothing)
    names = reference_names(max_offset, local_windows)
    out = {n: np.zeros((L, H)) for n in names}
    hist = np.zeros((L, H, nb))
    k90_all = np.zeros((L, H, len(q_rows)), dtype=np.int32)

    def bins_of_row(i: int) -> np.ndarray:
        """Histogram bin of every key j for query i (0 = farthest backward)."""
        d = np.arange(T) - i
        b = np.searchsorted(np.asarray(edges), np.abs(d), side="right") - 1  # -1 for d == 0
        return np.where(d == 0, len(edges), np.where(d > 0, len(edges) + 1 + b, len(edges) - 1 - b))

    Vmask = np.asarray(content, dtype=bool)
    pad = kinds.is_pad
    ar = np.arange(T)

    for l in range(L):
        for h in range(H):
            A = np.asarray(a4[l, h], dtype=np.float64)
            acc = {n: 0.0 for n in names}
            hrow = np.zeros(nb)
            colsum = np.zeros(T)
            ks, cone = [], np.zeros(T)
            dist_c, sign_c, n_c = 0.0, 0.0, 0
            for r, i in enumerate(q_rows):
                row = A[i]
                acc["self"] += row[i]
                acc["prev"] += row[i - 1] if i >= 1 else 0.0
                acc["next"] += row[i + 1] if i + 1 < T else 0.0
                for k in range(2, max_offset + 1):
                    acc[f"off_m{k}"] += row[i - k] if i - k >= 0 else 0.0
                    acc[f"off_p{k}"] += row[i + k] if i + k < T else 0.0
                acc["bwd"] += row[max(0, i - w): i].sum()
                acc["fwd"] += row[i + 1: i + 1 + w].sum()
                acc["bwd_all"] += row[:i].sum()
                acc["fwd_all"] += row[i + 1:].sum()
                for lw in local_windows:
                    acc[f"local_{int(lw)}"] += row[max(0, i - lw): i + lw + 1].sum()
                hrow += np.bincount(bins_of_row(i), weights=row, minlength=nb)
                acc["cls"] += row[kinds.is_cls].sum()
                acc["sep"] += row[kinds.is_sep].sum()
                acc["punct"] += row[kinds.is_punct].sum()
                cm = row[Vmask].sum()
                acc["content_mass"] += cm
                colsum += row
                sm = (1 - eps) * row + eps / T
                acc["entropy"] += float(-(sm * np.log(sm)).sum())
                desc = np.sort(row)[::-1]
                acc["max_weight"] += desc[0]
                c = np.cumsum(desc)
                target = c[-1] * k_mass * (1.0 - _K90_TOL)
                k = 1
                while k < T and c[k - 1] < target:
                    k += 1
                ks.append(k)
                acc["mean_dist"] += float((row * np.abs(ar - i)).sum())
                acc["signed_offset"] += float((row * (ar - i)).sum())
                if cm > 1e-12:
                    dist_c += float((row[Vmask] * np.abs(ar[Vmask] - i)).sum()) / cm
                    sign_c += float((row[Vmask] * (ar[Vmask] - i)).sum()) / cm
                    n_c += 1
                if two_seg:
                    acc["segment_mass"] += row[Vmask & (seg == seg[i])].sum()
                nrm = math.sqrt(float((row * row).sum()))
                if nrm > 0:
                    cone += row / nrm
            nq = len(q_rows)
            res = {n: acc[n] / nq for n in names}
            hrow /= nq
            colmean = colsum / nq
            res["special"] = res["cls"] + res["sep"]
            res["sink"] = res["special"] + res["punct"]
            res["sep_from_sep"] = float(np.mean([A[i, seps].sum() for i in seps])) if seps else 0.0
            others = [i for i in range(T) if not kinds.is_sep[i] and not pad[i]]
            res["sep_from_other"] = float(np.mean([A[i, seps].sum() for i in others])) if (seps and others) else 0.0
            res["sep_max"] = max(colmean[j] for j in seps) if seps else 0.0
            res["verticality"] = colmean.max()
            cvals = sorted((colmean[j] for j in V), reverse=True)
            res["col_content"] = cvals[0]
            res["col3_content"] = sum(cvals[:3])
            res["entropy_norm"] = res["entropy"] / math.log(T)
            if clss:
                sm = (1 - eps) * A[clss[0]] + eps / T
                res["entropy_cls"] = float(-(sm * np.log(sm)).sum())
            else:
                res["entropy_cls"] = 0.0
            res["k90_median"] = float(np.median(ks))
            res["k90_mean"] = float(np.mean(ks))
            res["k90_frac"] = res["k90_median"] / n_real  # k90 counts among every real key
            eu = np.mean([np.abs(ar - i).mean() for i in q_rows])
            euc = np.mean([np.abs(ar[Vmask] - i).mean() for i in q_rows])
            res["mean_dist_norm"] = res["mean_dist"] / eu if eu > 0 else 0.0
            res["signed_offset_norm"] = res["signed_offset"] / eu if eu > 0 else 0.0
            res["mean_dist_content"] = dist_c / n_c if n_c else 0.0
            res["signed_offset_content"] = sign_c / n_c if n_c else 0.0
            res["mean_dist_content_norm"] = res["mean_dist_content"] / euc if euc > 0 else 0.0
            res["delta_row"] = float(np.linalg.norm(cone)) / nq
            # block graph by breadth-first search
            comp = {}
            Vi = np.asarray(V)
            adj = {}
            for a in range(nv):
                sym = (A[V[a], Vi] + A[Vi, V[a]]) / 2
                adj[a] = np.flatnonzero((np.abs(Vi - V[a]) > w) & (sym >= (block_tau / nv) * (1 - 1e-9))).tolist()
            cid = 0
            members: dict[int, list[int]] = {}
            for s0 in range(nv):
                if s0 in comp:
                    continue
                stack = [s0]
                comp[s0] = cid
                members[cid] = [s0]
                while stack:
                    x = stack.pop()
                    for y in adj[x]:
                        if y not in comp:
                            comp[y] = cid
                            members[cid].append(y)
                            stack.append(y)
                cid += 1
            bm = bi = 0.0
            for a in range(nv):
                mem = np.asarray(members[comp[a]])
                if mem.size >= 3:
                    vals = A[V[a], Vi[mem]]
                    bi += vals.sum()
                    bm += vals[np.abs(Vi[mem] - V[a]) > w].sum()
            res["block_mass"] = bm / nv if nv >= 3 else 0.0
            res["block_inner"] = bi / nv if nv >= 3 else 0.0
            res["n_blocks"] = float(sum(1 for m in members.values() if len(m) >= 3)) if nv >= 3 else 0.0
            res["template_residual"] = max(0.0, 1.0 - (res["sink"] + res["self"] + res["prev"] + res["next"]))
            for n in names:
                out[n][l, h] = res[n]
            hist[l, h] = hrow
            k90_all[l, h] = ks
    return {"features": out, "hist": hist, "k90_rows": k90_all}
