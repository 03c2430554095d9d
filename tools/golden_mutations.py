"""Derive the golden per-gene mutation lists of the demo genomes by a method independent of bertgeom's.

Usage (needs Biopython, which the project itself does not use; e.g. in a throw-away venv):
    python tools/golden_mutations.py tests/data/golden_demo_mutations.json

bertgeom aligns the whole genome with minimap2 and reads each gene codon by codon in reference
coordinates. This script shares none of that code (only the shipped reference, the GenBank gene
coordinates and the demo FASTA are read as files):

1. the gene with 300 nt of flank on each side is cut from the reference, and the matching stretch
   of the query is found by exact 24-mer anchors in the flanks;
2. the two are aligned globally with Biopython's ``PairwiseAligner`` (Gotoh affine gaps:
   match 2, mismatch -3, gap open -9, extend -1);
3. the query's gene (gaps removed, insertions kept) is translated, and the query protein is aligned to
   the reference protein with BLOSUM62 (open -11, extend -1), as Nextclade does (peptide alignment);
4. the protein alignment is read as Nextclade writes it: ``N501Y``, deleted residues grouped
   ``del69-70``, insertions ``ins214EPE``, premature stops ``Q27*``; residues read as X (a codon with
   N) are skipped. A gene whose query length is not a multiple of 3 is marked frameshifted and only
   its changes before the first gap-length-not-multiple-of-3 are kept (plus ``"fs"`` at that residue);
   when that gap is a deletion, the residues whose codons it touches before the first codon read in
   the shifted frame are listed as deleted, as Nextclade lists them (Mu's ORF3a 26158-26161: V256-).

The test compares bertgeom's tables with this file (tests/test_golden_mutations.py).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bertgeom" / "data"
FLANK = 300
GENES = ("ORF1a", "ORF1b", "S", "ORF3a", "E", "M", "ORF6", "ORF7a", "ORF7b", "ORF8", "N", "ORF10")

CODE = {}
_b = "TCAG"
_aa = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
for i, x in enumerate(_b):
    for j, y in enumerate(_b):
        for k, z in enumerate(_b):
            CODE[x + y + z] = _aa[16 * i + 4 * j + k]


def tr(seq: str) -> str:
    return "".join(CODE.get(seq[i : i + 3], "X") for i in range(0, len(seq) - 2, 3))


def read_fasta(path: Path) -> dict[str, str]:
    out, name = {}, None
    for line in path.read_text().splitlines():
        if line.startswith(">"):
            name = line[1:].strip()
            out[name] = []
        elif name:
            out[name].append(line.strip().upper())
    return {k: "".join(v) for k, v in out.items()}


def genes() -> dict[str, tuple[int, int]]:
    text = (DATA / "reference" / "MN908947.3.gb").read_text()
    out = {}
    for m in re.finditer(r"CDS\s+(\d+)\.\.(\d+)\s+/gene=\"(\w+)\"", text):
        out[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    out.setdefault("ORF10", (29558, 29674))  # RefSeq NC_045512.2
    return out


def anchor(query: str, ref_piece: str, from_left: bool) -> int | None:
    """Query index of the first (or last) exact 24-mer of ``ref_piece`` found in the query."""
    k = 24
    starts = range(0, len(ref_piece) - k, 4) if from_left else range(len(ref_piece) - k, -1, -4)
    for s in starts:
        hit = query.find(ref_piece[s : s + k])
        if hit >= 0:
            return hit - s if from_left else hit + (len(ref_piece) - s)
    return None


def gene_changes(ref: str, query: str, start: int, end: int) -> list[str]:
    from Bio import Align
    from Bio.Align import substitution_matrices

    r0, r1 = max(0, start - 1 - FLANK), min(len(ref), end + FLANK)
    left = anchor(query, ref[r0 : start - 1], True)
    right = anchor(query, ref[end:r1], False)
    if left is None and r0 == 0:
        left = 0
    open_end = False
    if right is None:  # the query ends inside the gene or its flank (ORF10's flank is the genome's end)
        right, open_end = len(query), True
    if left is None or right is None or right - left < (end - start) // 2:
        return ["not read"]
    qreg = query[max(0, left) : right]
    nuc = Align.PairwiseAligner(mode="global", match_score=2, mismatch_score=-3, open_gap_score=-9,
                                extend_gap_score=-1)
    nuc.wildcard = "N"  # an N matches anything at no cost
    aln = next(iter(nuc.align(ref[r0:r1], qreg)))
    rs, qs = aln[0], aln[1]
    # query bases that fall inside the gene (reference columns start-1 .. end-1)
    rpos, q_gene, gaps = r0, [], []
    run = 0
    for a, b in zip(rs, qs):
        if a != "-":
            inside = start - 1 <= rpos < end
            if inside and b != "-":
                q_gene.append(b)
            if inside and b == "-":
                run += 1
            elif run:
                gaps.append((rpos - run, run))
                run = 0
            rpos += 1
        elif start - 1 < rpos < end:  # insertion inside the gene
            q_gene.append(b)
            gaps.append((rpos, -1))
    ref_prot = tr(ref[start - 1 : end])
    ref_prot = ref_prot[:-1] if ref_prot.endswith("*") else ref_prot
    q_seq = "".join(q_gene)
    # insertion runs: count inserted bases per position
    ins_runs: dict[int, int] = {}
    for p, n in gaps:
        if n == -1:
            ins_runs[p] = ins_runs.get(p, 0) + 1
    shifts = [p for p, n in gaps if n > 0 and n % 3] + [p for p, n in ins_runs.items() if n % 3]
    first_shifted = None  # 1-based codon after the first frameshifting deletion, if it comes first
    shifting_dels = [(p, n) for p, n in gaps if n > 0 and n % 3]
    if shifting_dels and min(shifting_dels)[0] == min(shifts):
        p, n = min(shifting_dels)
        first_shifted = (p + n - (start - 1)) // 3 + 1
    q_prot = tr(q_seq)
    q_prot = q_prot[:-1] if q_prot.endswith("*") else q_prot  # the gene's own stop codon
    if len(q_prot) < 2:
        return []  # the query does not reach into this gene: nothing read, nothing to report
    pep = Align.PairwiseAligner(mode="global", open_gap_score=-11, extend_gap_score=-1)
    pep.substitution_matrix = substitution_matrices.load("BLOSUM62")
    pep.wildcard = "X"
    fs_residue = None
    if shifts:
        fs_residue = (min(shifts) - (start - 1)) // 3 + 1
    pa = next(iter(pep.align(ref_prot, q_prot)))
    out: list[str] = []
    pos = 0
    dels: list[int] = []

    def flush():
        if dels:
            out.append(f"del{dels[0]}" if len(dels) == 1 else f"del{dels[0]}-{dels[-1]}")
            dels.clear()

    ins_buf, ins_after = "", 0
    for a, b in zip(pa[0], pa[1]):
        if a == "-":
            if not ins_buf:
                ins_after = pos
            ins_buf += b
            continue
        if ins_buf:
            flush()
            out.append(f"ins{ins_after}{ins_buf}")
            ins_buf = ""
        pos += 1
        if fs_residue is not None and pos >= fs_residue:
            break
        if b == "-":
            dels.append(pos)
            continue
        flush()
        if b != a and b != "X":
            out.append(f"{a}{pos}{b}")
    if open_end and dels and dels[-1] == len(ref_prot):
        dels.clear()  # trailing residues the query does not reach are not read, not deleted
    flush()
    out = gaps_last(out, ref_prot)
    if fs_residue is not None:
        if first_shifted is not None and first_shifted > fs_residue:
            last = min(first_shifted - 1, len(ref_prot))
            out.append(f"del{fs_residue}" if last == fs_residue else f"del{fs_residue}-{last}")
        out.append(f"fs{fs_residue}")
    return out


def gaps_last(changes: list[str], ref_prot: str) -> list[str]:
    """Where a deletion run and the substitution after it score the same by BLOSUM62 with the gaps
    placed after the substitution, write them that way (Nextclade's tie-break: Delta E156G del157-158)."""
    from Bio.Align import substitution_matrices

    b = substitution_matrices.load("BLOSUM62")
    out = list(changes)
    for i in range(len(out) - 1):
        d = re.match(r"^del(\d+)(?:-(\d+))?$", out[i])
        s = re.match(r"^([A-Z])(\d+)([A-Z])$", out[i + 1])
        if not (d and s):
            continue
        a, e = int(d.group(1)), int(d.group(2) or d.group(1))
        if int(s.group(2)) != e + 1:
            continue
        alt = s.group(3)
        if b[ref_prot[a - 1], alt] == b[ref_prot[e], alt]:
            first = f"{ref_prot[a - 1]}{a}{alt}" if ref_prot[a - 1] != alt else None
            run = f"del{a + 1}" if a + 1 == e + 1 else f"del{a + 1}-{e + 1}"
            out[i], out[i + 1] = (first or ""), run
    return [c for c in out if c]


def main(path: str) -> None:
    ref = "".join(read_fasta(DATA / "reference" / "MN908947.3.fasta").values())
    demo = read_fasta(DATA / "genomes" / "demo_genomes.fasta")
    coords = genes()
    result = {}
    for name, seq in demo.items():
        result[name] = {g: gene_changes(ref, seq, *coords[g]) for g in GENES}
        print(name, {g: len(v) for g, v in result[name].items()})
    Path(path).write_text(json.dumps({"method": __doc__.split("\n\n")[2].strip().splitlines()[0], "genomes": result},
                                     indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/golden_demo_mutations.json")
