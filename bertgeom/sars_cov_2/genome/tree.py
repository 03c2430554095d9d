"""Placement on Nextclade's reference tree: the nearest node, its Nextstrain clade and Pango lineage,
the private mutations relative to it, and a two-part search that flags recombinants.

A Nextclade dataset (``tree.json`` in Auspice v2 form, ``pathogen.json``, ``genome_annotation.gff3``)
is read once per process into a :class:`ReferenceTree`: every node's nucleotide state relative to
Wuhan-Hu-1 (its branch mutations accumulated from the root, a later mutation at a site replacing an
earlier one, a change back to the reference base removing it), as one sparse node x substitution
matrix, so that the distance of a query to all 3,897 nodes is two sparse products.

The distance is the one Nextclade's documentation states (section "Phylogenetic placement"):

    D = M_ref + M_query - 2 M_agree - M_disagree - M_unknown

(node substitutions, query substitutions, shared ones, same site with another base, node sites the
query does not read). A site the query does not read (N, an ambiguity code, a deletion, outside the
sequenced part, or in the dataset's ``placement_mask_ranges``) counts neither way, so a spike or a
partial genome is placed with what it has. Ties go to the node with the largest ``placement_prior``
(the dataset's prevalence prior), as Nextclade 3 does; how many nodes tie, and across how many
clades and lineages, is kept (:attr:`Placement.ties`) so a reduced resolution can be said.

Private mutations (Nextclade's ``privateNucMutations``) are the query's differences from the nearest
node: *reversions* (a node substitution where the query reads the reference base), *labelled*
substitutions (the query's base is in the dataset's ``mutLabels`` map, which names the clades that
carry it), *unlabelled* ones, and private deletion ranges (query deletions the node lacks). They feed
the QC rule (:func:`~bertgeom.sars_cov_2.genome.qc.qc_score`).

Recombinants: a query whose 5' and 3' parts sit nearest to different lineages is flagged
(:func:`find_recombination`): with every node of recombinant origin set aside (a designated
recombinant ``X*`` and its descendants), the best split into a 5' part placed on one node and a 3'
part placed on another (one or two breakpoints) is compared with the best single placement; a
split that removes at least :data:`RECOMBINANT_MIN_GAIN` private mutations, with each part
supported by at least :data:`RECOMBINANT_MIN_SITES` sites, is a recombinant, and the breakpoint is
the interval between the informative sites on either side of it. This is the approach of
sc2rf/RIVET in one line (parental lineages from the tree, breakpoint between informative sites);
the thresholds are this tool's and adjustable.

References
----------
* Nextclade documentation, "Algorithm": 3. Phylogenetic placement (the distance metric, placement
  prior), 4. Clade assignment, 5. Mutation calling (private mutations: reversions, labelled,
  unlabelled), 6. Quality Control; Nextclade 3.21.2 release notes (deleted sites are uninformative).
* Aksamentov et al. (2021), "Nextclade: clade assignment, mutation calling and quality control for
  viral genomes", JOSS 6(67):3773.
* Smith et al. (2023), RIVET (recombinant detection on a phylogeny); Lamb et al., sc2rf
  (recombinant breakpoints from parental lineages).
"""

from __future__ import annotations

import functools
import io
import json
import lzma
import gzip
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: The dataset shipped with bertgeom (folder under ``bertgeom/data/nextclade``).
SHIPPED_DATASET = ("nextclade", "sars-cov-2_wuhan-hu-1_orfs_2024-02-16")
#: A split must remove at least this many private mutations to call a recombinant.
RECOMBINANT_MIN_GAIN = 4
#: Each part of a split needs at least this many sites that favour its parent over the other.
RECOMBINANT_MIN_SITES = 3
#: The split search runs only when the best non-recombinant placement leaves this many private mutations.
RECOMBINANT_SCAN_FROM = 6
#: Candidate breakpoints lie after every query substitution and every this many bases.
CUT_GRID = 250
#: Largest dataset file read (a dataset's tree is ~5 MB of JSON; a bomb is refused).
MAX_DATASET_FILE_BYTES = 200 * 1024 * 1024
#: WHO names of the tree's ``clade_who`` mapped to the paper's 8 classes (everything else: pre-VOC).
WHO_TO_CLASS = {"Alpha": "alpha", "Beta": "beta", "Gamma": "gamma", "Delta": "delta", "Lambda": "lambda",
                "Mu": "mu", "Omicron": "omicron"}

_ACGT = np.zeros(256, dtype=bool)
_ACGT[np.frombuffer(b"ACGT", dtype=np.uint8)] = True


class DatasetError(ValueError):
    """A Nextclade dataset that cannot be used; the message is one sentence for the user."""


# ----------------------------------------------------------------------------------------------
# Reading a dataset (the shipped folder, a user's folder or Nextclade's dataset zip)
# ----------------------------------------------------------------------------------------------


def _bounded(data: bytes, name: str) -> bytes:
    if len(data) > MAX_DATASET_FILE_BYTES:
        raise DatasetError(f"{name} is larger than {MAX_DATASET_FILE_BYTES >> 20} MB: not a Nextclade dataset file.")
    return data


def _decompress(data: bytes, name: str) -> bytes:
    """Plain, xz or gzip bytes of a dataset file, bounded in size."""
    try:
        if data[:6] == b"\xfd7zXZ\x00":
            d = lzma.LZMADecompressor()
            return _bounded(d.decompress(data, MAX_DATASET_FILE_BYTES + 1), name)
        if data[:2] == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
                return _bounded(f.read(MAX_DATASET_FILE_BYTES + 1), name)
    except (lzma.LZMAError, OSError, EOFError) as exc:
        raise DatasetError(f"{name} could not be decompressed ({exc}).") from None
    return _bounded(data, name)


def _dataset_files(source: Path) -> dict[str, bytes]:
    """The files of a dataset folder or zip that placement and QC read: ``tree.json`` (or ``.xz``/``.gz``),
    ``pathogen.json``, and, when present, ``README.md``."""
    wanted = ("tree.json", "pathogen.json", "README.md")
    found: dict[str, bytes] = {}
    if source.is_dir():
        for want in wanted:
            for suffix in ("", ".xz", ".gz"):
                p = source / (want + suffix)
                if p.is_file():
                    if p.stat().st_size > MAX_DATASET_FILE_BYTES:
                        raise DatasetError(f"{p.name} is larger than {MAX_DATASET_FILE_BYTES >> 20} MB.")
                    found[want] = _decompress(p.read_bytes(), p.name)
                    break
    elif source.is_file() and zipfile.is_zipfile(source):
        try:
            with zipfile.ZipFile(source) as z:
                members = {Path(i.filename).name: i for i in z.infolist() if not i.is_dir()}
                for want in wanted:
                    for suffix in ("", ".xz", ".gz"):
                        info = members.get(want + suffix)
                        if info is None:
                            continue
                        if info.file_size > MAX_DATASET_FILE_BYTES:
                            raise DatasetError(f"{info.filename} in the zip is larger than "
                                               f"{MAX_DATASET_FILE_BYTES >> 20} MB.")
                        with z.open(info) as f:
                            found[want] = _decompress(_bounded(f.read(MAX_DATASET_FILE_BYTES + 1), info.filename),
                                                      info.filename)
                        break
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise DatasetError(f"{source.name} is not a readable zip archive ({exc}).") from None
    elif source.is_file():
        raise DatasetError(f"{source.name} is neither a folder nor a zip: give a Nextclade dataset folder "
                           "or the dataset zip Nextclade downloads.")
    else:
        raise DatasetError(f"No Nextclade dataset at {source}: give a folder or a dataset zip.")
    missing = [w for w in ("tree.json", "pathogen.json") if w not in found]
    if missing:
        raise DatasetError(f"{source.name} has no {' and no '.join(missing)}: it is not a Nextclade dataset "
                           "with a reference tree (a SARS-CoV-2 Wuhan-Hu-1 dataset, e.g. "
                           "nextstrain/sars-cov-2/wuhan-hu-1/orfs).")
    return found


def _parse_mutation(m: str) -> tuple[int, str] | None:
    """``("C241T")`` -> ``(241, "T")``; None for anything that is not ``<base><pos><base>``."""
    if len(m) < 3 or not m[1:-1].isdigit():
        return None
    return int(m[1:-1]), m[-1]


def _attr(node: dict, key: str, default=""):
    v = node.get("node_attrs", {}).get(key)
    if isinstance(v, dict):
        v = v.get("value", default)
    return default if v is None else v


@dataclass(eq=False)
class ReferenceTree:
    """One Nextclade dataset compiled for placement (see the module docstring).

    Node arrays (one entry per tree node, depth-first order): ``names``, ``lineage`` (Nextclade_pango),
    ``unaliased`` (partiallyAliased), ``clade`` (clade_membership), ``clade_display``, ``who``,
    ``prior`` (placement_prior), ``parent`` (index, -1 at the root), ``recombinant_origin`` (bool: a
    designated recombinant or its descendant). ``subs`` is the node x substitution matrix (CSR,
    columns ``feature_pos``/``feature_alt``); ``deleted[i]`` the sorted deleted positions of node i."""

    name: str  #: e.g. "nextstrain/sars-cov-2/wuhan-hu-1/orfs 2024-02-16--04-00-32Z"
    tag: str
    source: str
    names: list[str]
    lineage: list[str]
    unaliased: list[str]
    clade: list[str]
    clade_display: list[str]
    who: list[str]
    prior: np.ndarray
    parent: np.ndarray
    recombinant_origin: np.ndarray
    subs: object  # scipy.sparse.csr_matrix, int8
    feature_pos: np.ndarray
    feature_alt: np.ndarray
    deleted: list[np.ndarray]
    placement_mask: np.ndarray  #: bool per genome position (index = position - 1): not used for placement
    labels: dict[str, tuple[str, ...]]  #: "241T" -> clades carrying it (pathogen.json's nucMutLabelMap)
    qc: dict  #: pathogen.json's ``qc`` object
    feature_index: dict[tuple[int, str], int] = field(repr=False, default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    def node_substitutions(self, i: int) -> dict[int, str]:
        """``{position: base}`` of node ``i`` (substitutions relative to the reference)."""
        a, b = self.subs.indptr[i], self.subs.indptr[i + 1]
        cols = self.subs.indices[a:b]
        return {int(self.feature_pos[c]): chr(self.feature_alt[c]) for c in cols}

    @functools.cached_property
    def subs_by_feature(self):
        """The substitution matrix in column-major form (fast selection of a query's features)."""
        return self.subs.tocsc()

    @functools.cached_property
    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """``(node, position)`` of every node substitution (the matrix's nonzeros), for the split search."""
        coo = self.subs.tocoo()
        return coo.row.astype(np.int64), self.feature_pos[coo.col].astype(np.int64)

    def node_class(self, i: int) -> str:
        """The paper's 8-class label of node ``i`` from its WHO name (pre-VOC -> ``gh``)."""
        return WHO_TO_CLASS.get(self.who[i], "gh")

    def describe(self) -> str:
        return f"Nextclade dataset {self.name} ({self.tag})"


def _compile(files: dict[str, bytes], source: str) -> ReferenceTree:
    import scipy.sparse as sp

    from .reference import REFERENCE_LEN, reference_sequence

    try:
        tree = json.loads(files["tree.json"])
        pathogen = json.loads(files["pathogen.json"])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"The dataset's JSON could not be read ({exc}).") from None
    if not isinstance(tree, dict) or not isinstance(tree.get("tree"), dict):
        raise DatasetError("tree.json is not an Auspice v2 tree (no 'tree' object).")
    ref = reference_sequence()
    root_nuc = (tree.get("root_sequence") or {}).get("nuc")
    if isinstance(root_nuc, str) and root_nuc and root_nuc.upper() != ref:
        raise DatasetError("This dataset's reference is not Wuhan-Hu-1 (MN908947.3), the reference bertgeom aligns "
                           "to: use a wuhan-hu-1 dataset (nextstrain/sars-cov-2/wuhan-hu-1/orfs).")
    qc = pathogen.get("qc") if isinstance(pathogen, dict) else None
    if not isinstance(qc, dict):
        raise DatasetError("pathogen.json has no 'qc' object: not a Nextclade 3 dataset.")
    labels = {k: tuple(v) for k, v in (pathogen.get("mutLabels") or {}).get("nucMutLabelMap", {}).items()
              if isinstance(v, list)}
    mask = np.zeros(REFERENCE_LEN, dtype=bool)
    ext = ((tree.get("meta") or {}).get("extensions") or {}).get("nextclade") or {}
    for r in ext.get("placement_mask_ranges", []) or []:
        a, b = int(r.get("begin", 0)), int(r.get("end", -1))
        mask[max(a, 0): min(b + 1, REFERENCE_LEN)] = True  # 0-based, closed
    version = pathogen.get("version") or {}
    tag = str(version.get("tag") or version.get("updatedAt") or "untagged")
    attrs = pathogen.get("attributes") or {}
    name = str(attrs.get("name") or "dataset") + " / " + str(attrs.get("reference name") or "reference")

    names, lineage, unaliased, clade, display, who, prior, parent = [], [], [], [], [], [], [], []
    rec_origin: list[bool] = []
    feature_index: dict[tuple[int, str], int] = {}
    rows_ptr = [0]
    cols: list[int] = []
    deleted: list[np.ndarray] = []
    # iterative depth-first walk; each stack entry carries the parent's state (dict pos -> base)
    stack: list[tuple[dict, int, dict, bool]] = [(tree["tree"], -1, {}, False)]
    while stack:
        node, par, state, rec = stack.pop()
        if not isinstance(node, dict):
            continue
        state = dict(state)
        for m in ((node.get("branch_attrs") or {}).get("mutations") or {}).get("nuc", []) or []:
            pm = _parse_mutation(str(m))
            if pm is None or not 1 <= pm[0] <= REFERENCE_LEN:
                continue
            pos, alt = pm
            if alt == ref[pos - 1]:
                state.pop(pos, None)
            elif alt in "ACGT-":
                state[pos] = alt
        idx = len(names)
        names.append(str(node.get("name", f"node{idx}")))
        lin = str(_attr(node, "Nextclade_pango"))
        un = str(_attr(node, "partiallyAliased", lin))
        cl = str(_attr(node, "clade_membership"))
        lineage.append(lin)
        unaliased.append(un)
        clade.append(cl)
        display.append(str(_attr(node, "clade_display", cl)))
        who.append(str(_attr(node, "clade_who")))
        try:
            prior.append(float(_attr(node, "placement_prior", 0.0) or 0.0))
        except (TypeError, ValueError):
            prior.append(0.0)
        parent.append(par)
        is_rec = rec or cl == "recombinant" or un.startswith("X")
        rec_origin.append(is_rec)
        for pos, alt in state.items():
            if alt == "-":
                continue
            key = (pos, alt)
            j = feature_index.get(key)
            if j is None:
                j = feature_index[key] = len(feature_index)
            cols.append(j)
        rows_ptr.append(len(cols))
        deleted.append(np.array(sorted(p for p, a in state.items() if a == "-"), dtype=np.int32))
        for child in reversed(node.get("children") or []):
            stack.append((child, idx, state, is_rec))
    if not names:
        raise DatasetError("tree.json has no nodes.")
    feats = sorted(feature_index.items(), key=lambda kv: kv[1])
    feature_pos = np.array([k[0] for k, _ in feats], dtype=np.int32)
    feature_alt = np.frombuffer("".join(k[1] for k, _ in feats).encode("ascii"), dtype=np.uint8).copy()
    matrix = sp.csr_matrix((np.ones(len(cols), dtype=np.int8), np.array(cols, dtype=np.int32),
                            np.array(rows_ptr, dtype=np.int64)), shape=(len(names), len(feats)))
    matrix.sort_indices()
    return ReferenceTree(name, tag, source, names, lineage, unaliased, clade, display, who,
                         np.array(prior), np.array(parent, dtype=np.int32), np.array(rec_origin),
                         matrix, feature_pos, feature_alt, deleted, mask, labels, qc, feature_index)


def shipped_dataset_path() -> Path:
    from .reference import data_path

    return data_path(*SHIPPED_DATASET)


@functools.lru_cache(maxsize=4)
def _load_cached(source: str) -> ReferenceTree:
    return _compile(_dataset_files(Path(source)), source)


def load_reference_tree(source: str | Path | None = None) -> ReferenceTree:
    """The compiled :class:`ReferenceTree` of a Nextclade dataset: the shipped one (default), a folder
    or Nextclade's dataset zip. Compiled once per process and source (~0.5 s); raises
    :class:`DatasetError` (one sentence) for anything that is not a usable Wuhan-Hu-1 dataset."""
    if source is None or str(source) == "":
        path = shipped_dataset_path()
    else:
        try:
            path = Path(source).expanduser().resolve()
        except (OSError, RuntimeError) as exc:
            raise DatasetError(f"The dataset path could not be read ({exc}).") from None
    return _load_cached(str(path))


# ----------------------------------------------------------------------------------------------
# The query: what it reads, relative to the reference
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryState:
    """A query in reference coordinates, reduced to what placement reads: its substitutions
    (positions, bases) and a bool per genome position saying the query reads an A/C/G/T there."""

    sub_pos: np.ndarray  # sorted 1-based positions
    sub_alt: np.ndarray  # uint8 bases
    reads: np.ndarray  # bool per position (index = position - 1), False where masked
    deletions: tuple[tuple[int, int], ...]  # (first, last) deleted ranges, 1-based closed

    @property
    def called(self) -> int:
        return int(self.reads.sum())


def query_state(aligned: str, tree: ReferenceTree, region: tuple[int, int] | None = None) -> QueryState:
    """:class:`QueryState` of a reference-coordinate text (starting at genome position 1), optionally
    restricted to ``region`` (1-based, closed: the spike, say)."""
    from .reference import reference_sequence

    q = np.frombuffer(aligned.encode("ascii", "replace"), dtype=np.uint8)
    r = np.frombuffer(reference_sequence()[: len(q)].encode("ascii"), dtype=np.uint8)
    reads = _ACGT[q] & ~tree.placement_mask[: len(q)]
    if region is not None:
        keep = np.zeros(len(q), dtype=bool)
        keep[max(region[0] - 1, 0): region[1]] = True
        reads &= keep
    sub = np.flatnonzero(reads & (q != r))
    gap = np.flatnonzero(q == ord("-"))
    dels: list[tuple[int, int]] = []
    if len(gap):
        breaks = np.flatnonzero(np.diff(gap) != 1)
        starts = np.r_[gap[0], gap[breaks + 1]]
        ends = np.r_[gap[breaks], gap[-1]]
        dels = [(int(a) + 1, int(b) + 1) for a, b in zip(starts, ends)
                if region is None or (region[0] <= a + 1 and b + 1 <= region[1])]
    return QueryState(sub + 1, q[sub].copy(), reads, tuple(dels))


def _query_features(tree: ReferenceTree, qs: QueryState) -> tuple[np.ndarray, int]:
    """Feature columns of the query's substitutions (those the tree knows) and how many it does not know."""
    cols = [tree.feature_index.get((int(p), chr(a)), -1) for p, a in zip(qs.sub_pos, qs.sub_alt)]
    cols = np.array(cols, dtype=np.int64)
    return cols, int((cols < 0).sum())


def node_distances(tree: ReferenceTree, qs: QueryState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(distance, private_substitutions, reversions)`` of the query to every node, vectorised:
    Nextclade's D = private substitutions (query substitutions the node lacks, another base at a
    node site included) + reversions (node substitutions where the query reads the reference base)."""
    cols, _unknown = _query_features(tree, qs)
    known = cols[cols >= 0]
    m = tree.subs
    agree = (tree.subs_by_feature[:, known] @ np.ones(len(known), dtype=np.int32)) if len(known) else \
        np.zeros(tree.n_nodes, dtype=np.int64)
    # node features at sites the query reads / at the query's substituted sites
    fpos = tree.feature_pos
    read_feat = qs.reads[fpos - 1].astype(np.int8)
    at_sub = np.zeros(len(fpos), dtype=np.int8)
    if len(qs.sub_pos):
        at_sub[np.isin(fpos, qs.sub_pos)] = 1
    node_read = m @ read_feat
    node_at_sub = m @ at_sub
    private = len(qs.sub_pos) - agree
    reversions = node_read - node_at_sub
    return (private + reversions).astype(np.int64), private.astype(np.int64), reversions.astype(np.int64)


# ----------------------------------------------------------------------------------------------
# Placement
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivateMutations:
    """The query's private nucleotide mutations relative to its nearest node, as Nextclade classes them
    (names like Nextclade's: ``T241C`` for a reversion of C241T, the node's base first)."""

    reversions: tuple[str, ...]
    labeled: tuple[tuple[str, tuple[str, ...]], ...]  # (substitution, clades whose label it carries)
    unlabeled: tuple[str, ...]
    deletion_ranges: tuple[str, ...]  # "21765-21770" / "28271"

    @property
    def substitutions(self) -> tuple[str, ...]:
        """Every private substitution (reversions, labelled, unlabelled), genome order."""
        from .profiles import nuc_key

        allsub = list(self.reversions) + [s for s, _ in self.labeled] + list(self.unlabeled)
        return tuple(sorted(allsub, key=lambda s: nuc_key(s)[1]))

    @property
    def total(self) -> int:
        return len(self.reversions) + len(self.labeled) + len(self.unlabeled) + len(self.deletion_ranges)


@dataclass(frozen=True)
class RecombinantCall:
    """A split placement: the 5' part nearest ``parents[0]``, the 3' part nearest ``parents[-1]`` (a
    middle part, with two breakpoints, nearest ``parents[1]``). ``breakpoints``: one 1-based closed
    interval ``(after, before)`` per breakpoint: the last site supporting the part before it and the
    first site supporting the part after it. ``gain``: private mutations removed by the split."""

    parents: tuple[str, ...]  # Pango lineages
    parent_clades: tuple[str, ...]
    breakpoints: tuple[tuple[int, int], ...]
    gain: int
    designated: str = ""  #: the designated recombinant lineage the whole query sits on (XD ...), if any

    def summary(self) -> str:
        parts = " / ".join(f"{lin} ({cl})" for lin, cl in zip(self.parents, self.parent_clades))
        bps = ", ".join(f"{a:,}-{b:,}" for a, b in self.breakpoints)
        return f"recombinant of {parts}, breakpoint{'s' if len(self.breakpoints) > 1 else ''} between {bps}"


@dataclass(frozen=True)
class Placement:
    """Where a query sits on the reference tree (see the module docstring)."""

    dataset: str  #: the dataset in use, named on every output
    node: str
    lineage: str  #: Pango lineage (Nextclade_pango)
    clade: str  #: Nextstrain clade (clade_membership), "recombinant" on a designated recombinant
    clade_display: str
    who: str
    cls: str  #: the paper's 8-class label of the node (for a recombinant: of its spike's parent)
    distance: int  #: Nextclade's distance to the node (private substitutions + reversions)
    called: int  #: genome positions the query reads (A/C/G/T, outside the mask)
    private: PrivateMutations
    ties: int  #: nodes at the same distance (1 = unique)
    tied_lineages: tuple[str, ...] = ()  #: a few of the lineages among the tied nodes (resolution)
    tied_clades: tuple[str, ...] = ()
    region: str = "genome"  #: "genome", "spike" or "partial" (what the query covers)
    recombinant: RecombinantCall | None = None
    unaliased: str = ""  #: the lineage with its Pango aliases partly expanded (partiallyAliased: XBB.1.9.1.1.5.1)

    @property
    def divergence_per_kb(self) -> float:
        """Private mutations per 1,000 read bases: the gate's divergence (SARS-CoV-2: below ~6)."""
        return 1000.0 * (self.distance + len(self.private.deletion_ranges)) / max(self.called, 1)

    @property
    def identity_to_node(self) -> float:
        return 1.0 - self.distance / max(self.called, 1)

    def resolution_note(self) -> str:
        """One sentence when the placement is not resolved to one lineage, else ""."""
        if self.ties <= 1:
            return ""
        what = {"spike": "the spike alone", "partial": "this partial sequence"}.get(self.region, "this sequence")
        clades = f" in {len(self.tied_clades)} clades ({', '.join(self.tied_clades[:4])})" if len(
            self.tied_clades) > 1 else ""
        others = (f" (others: {', '.join(self.tied_lineages[:4])}{' ...' if len(self.tied_lineages) > 4 else ''})"
                  if self.tied_lineages else "")
        return (f"{what[0].upper() + what[1:]} sits equally near {self.ties} nodes of the tree{clades}: lineage "
                f"{self.lineage} is the most prevalent of them{others}.")


def _ranked(distance: np.ndarray, prior: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """Node indices ordered by distance, then by descending placement prior (disallowed nodes last)."""
    d = distance.astype(np.float64)
    if allowed is not None:
        d = np.where(allowed, d, np.inf)
    return np.lexsort((-prior, d))


def _deletion_ranges(positions: np.ndarray) -> list[tuple[int, int]]:
    if not len(positions):
        return []
    breaks = np.flatnonzero(np.diff(positions) != 1)
    starts = np.r_[positions[0], positions[breaks + 1]]
    ends = np.r_[positions[breaks], positions[-1]]
    return [(int(a), int(b)) for a, b in zip(starts, ends)]


def private_mutations(tree: ReferenceTree, node: int, qs: QueryState) -> PrivateMutations:
    """The query's private mutations relative to ``node`` (see :class:`PrivateMutations`)."""
    from .reference import reference_sequence

    ref = reference_sequence()
    node_subs = tree.node_substitutions(node)
    query_subs = {int(p): chr(a) for p, a in zip(qs.sub_pos, qs.sub_alt)}
    rev, labeled, unlabeled = [], [], []
    for p, alt in query_subs.items():
        have = node_subs.get(p)
        if have == alt:
            continue
        name = f"{have or ref[p - 1]}{p}{alt}"
        lab = tree.labels.get(f"{p}{alt}")
        (labeled.append((name, lab)) if lab else unlabeled.append(name))
    for p, alt in node_subs.items():
        if qs.reads[p - 1] and p not in query_subs:
            rev.append(f"{alt}{p}{ref[p - 1]}")
    node_del = tree.deleted[node]
    dels = []
    for a, b in qs.deletions:
        span = np.arange(a, b + 1)
        if not np.isin(span, node_del).all():
            dels.append(f"{a}-{b}" if b > a else f"{a}")
    from .profiles import nuc_key

    by_pos = lambda s: nuc_key(s)[1]  # noqa: E731
    return PrivateMutations(tuple(sorted(rev, key=by_pos)), tuple(sorted(labeled, key=lambda x: by_pos(x[0]))),
                            tuple(sorted(unlabeled, key=by_pos)), tuple(dels))


def _region_of(qs: QueryState) -> str:
    from .reference import SPIKE_END, SPIKE_START

    idx = np.flatnonzero(qs.reads)
    if not len(idx):
        return "partial"
    first, last = idx[0] + 1, idx[-1] + 1
    if first >= SPIKE_START - 200 and last <= SPIKE_END + 200:
        return "spike"
    return "genome" if qs.reads.mean() >= 0.5 else "partial"


def place(aligned: str, tree: ReferenceTree | None = None, region: tuple[int, int] | None = None,
          find_recombinants: bool = True) -> Placement:
    """Place one reference-coordinate text (e.g. ``GenomeAlignment.aligned``) on the tree: the nearest
    node by Nextclade's distance (ties: largest placement prior), its clade, lineage and class, the
    private mutations, and (``find_recombinants``) a recombinant call."""
    tree = tree or load_reference_tree()
    qs = query_state(aligned, tree, region)
    dist, _priv, _rev = node_distances(tree, qs)
    order = _ranked(dist, tree.prior, None)
    best = int(order[0])
    tie_mask = dist == dist[best]
    ties = int(tie_mask.sum())
    tied = np.flatnonzero(tie_mask)
    tied = tied[np.argsort(-tree.prior[tied])]
    tied_lineages = tuple(dict.fromkeys(tree.lineage[i] for i in tied if tree.lineage[i] != tree.lineage[best]))[:8]
    tied_clades = tuple(dict.fromkeys(tree.clade[i] for i in tied))[:8]
    rec = None
    cls = tree.node_class(best)
    if find_recombinants and region is None:
        rec = find_recombination(tree, qs, dist)
        if rec is None and tree.clade[best] == "recombinant":
            rec = RecombinantCall((), (), (), 0, designated=tree.lineage[best])
        elif rec is not None and tree.recombinant_origin[best]:
            rec = RecombinantCall(rec.parents, rec.parent_clades, rec.breakpoints, rec.gain,
                                  designated=tree.lineage[best])
    if tree.clade[best] == "recombinant" or tree.who[best] in ("", "recombinant"):
        cls = spike_class(tree, qs) if tree.clade[best] == "recombinant" else cls
    return Placement(tree.describe(), tree.names[best], tree.lineage[best], tree.clade[best],
                     tree.clade_display[best], tree.who[best], cls, int(dist[best]), qs.called,
                     private_mutations(tree, best, qs), ties, tied_lineages, tied_clades, _region_of(qs), rec,
                     tree.unaliased[best])


def spike_class(tree: ReferenceTree, qs: QueryState) -> str:
    """The 8-class label of the nearest non-recombinant node to the query's spike alone: what the
    variant model, which reads the spike, should call for a recombinant."""
    from .reference import SPIKE_END, SPIKE_START

    keep = np.zeros_like(qs.reads)
    keep[SPIKE_START - 1: SPIKE_END] = True
    inside = (qs.sub_pos >= SPIKE_START) & (qs.sub_pos <= SPIKE_END)
    sq = QueryState(qs.sub_pos[inside], qs.sub_alt[inside], qs.reads & keep, ())
    dist, _, _ = node_distances(tree, sq)
    order = _ranked(dist, tree.prior, ~tree.recombinant_origin)
    return tree.node_class(int(order[0]))


# ----------------------------------------------------------------------------------------------
# Recombinants: the best split of the query into parts placed on different nodes
# ----------------------------------------------------------------------------------------------


def _discordance_events(tree: ReferenceTree, qs: QueryState) -> tuple[np.ndarray, np.ndarray]:
    """Every (node, position) where a node and the query disagree at a site the query reads: a query
    substitution the node lacks, or a node substitution where the query reads the reference base."""
    m = tree.subs
    cols, _ = _query_features(tree, qs)
    # query substitutions the node does not share (all nodes for a substitution the tree never saw)
    n = tree.n_nodes
    if len(cols):
        share = np.zeros((n, len(cols)), dtype=bool)
        known = np.flatnonzero(cols >= 0)
        if len(known):
            share[:, known] = tree.subs_by_feature[:, cols[known]].toarray().astype(bool)
        node_i, q_i = np.nonzero(~share)
        ev_node = [node_i]
        ev_pos = [qs.sub_pos[q_i]]
    else:
        ev_node, ev_pos = [], []
    # node substitutions at sites where the query reads the reference base
    rows, fpos = tree.entries
    ref_read = qs.reads[fpos - 1] & ~np.isin(fpos, qs.sub_pos)
    ev_node.append(rows[ref_read])
    ev_pos.append(fpos[ref_read])
    return np.concatenate(ev_node).astype(np.int64), np.concatenate(ev_pos).astype(np.int64)


def find_recombination(tree: ReferenceTree, qs: QueryState, whole: np.ndarray | None = None,
                       min_gain: int = RECOMBINANT_MIN_GAIN, min_sites: int = RECOMBINANT_MIN_SITES,
                       scan_from: int = RECOMBINANT_SCAN_FROM) -> RecombinantCall | None:
    """A :class:`RecombinantCall` when the query's parts sit nearest to different lineages (see the
    module docstring), else None. ``whole``: the query's distances to every node, when computed."""
    parental = ~tree.recombinant_origin
    if whole is None:
        whole = node_distances(tree, qs)[0]
    best_whole = int(whole[parental].min()) if parental.any() else 0
    if best_whole < scan_from:
        return None
    ev_node, ev_pos = _discordance_events(tree, qs)
    # candidate breakpoints: after every query substitution and on a grid (the exact interval is
    # refined between the two parents chosen, below)
    from .reference import REFERENCE_LEN

    cuts = np.unique(np.r_[qs.sub_pos, np.arange(CUT_GRID, REFERENCE_LEN, CUT_GRID), REFERENCE_LEN])
    k = len(cuts)
    n = tree.n_nodes
    bucket = np.searchsorted(cuts, ev_pos)  # events at positions in (cuts[j-1], cuts[j]] -> bucket j
    counts = np.bincount(ev_node * k + bucket, minlength=n * k).reshape(n, k)
    prefix = np.cumsum(counts, axis=1)  # prefix[i, j]: discordances at positions <= cuts[j]
    total = prefix[:, -1]
    left = prefix[:, :-1].copy()  # one breakpoint after cuts[j]: the 5' part is positions <= cuts[j]
    right = total[:, None] - left
    left[~parental] = right[~parental] = 10 ** 6  # a node of recombinant origin is never a parent
    left_best, right_best = left.min(axis=0), right.min(axis=0)
    split = left_best + right_best
    j = int(np.argmin(split))
    gain = best_whole - int(split[j])
    if gain < min_gain:
        return None
    a_cands = np.flatnonzero(left[:, j] == left_best[j])
    b_cands = np.flatnonzero(right[:, j] == right_best[j])
    a = int(a_cands[np.argmax(tree.prior[a_cands])])
    b = int(b_cands[np.argmax(tree.prior[b_cands])])
    if tree.lineage[a] == tree.lineage[b]:
        return None
    interval = _breakpoint_between(ev_node, ev_pos, a, b, int(cuts[j]))
    if interval is None:
        return None
    lo, hi, left_support, right_support = interval
    if left_support < min_sites or right_support < min_sites:
        return None
    return RecombinantCall((tree.lineage[a], tree.lineage[b]), (tree.clade[a], tree.clade[b]), ((lo, hi),), gain)


def _breakpoint_between(ev_node: np.ndarray, ev_pos: np.ndarray, a: int, b: int, near: int
                        ) -> tuple[int, int, int, int] | None:
    """The exact breakpoint between 5' parent ``a`` and 3' parent ``b``: the informative sites are
    where one parent disagrees with the query and the other does not; the best cut leaves the fewest
    sites on the wrong side, and among equally good cuts the one nearest ``near``. Returns
    ``(last site favouring a, first site favouring b, sites favouring a before, sites favouring b after)``."""
    pa = set(ev_pos[ev_node == a].tolist())
    pb = set(ev_pos[ev_node == b].tolist())
    favour_a = np.array(sorted(pb - pa), dtype=np.int64)  # b disagrees, a agrees
    favour_b = np.array(sorted(pa - pb), dtype=np.int64)
    if not len(favour_a) or not len(favour_b):
        return None
    sites = np.unique(np.r_[favour_a, favour_b])
    # cut after sites[t] (t = -1: before every site): wrong = favour_b before + favour_a after
    fb_before = np.r_[0, np.cumsum(np.isin(sites, favour_b))]
    fa_after = len(favour_a) - np.r_[0, np.cumsum(np.isin(sites, favour_a))]
    wrong = fb_before + fa_after
    best = np.flatnonzero(wrong == wrong.min())
    t = int(best[np.argmin(np.abs(np.r_[0, sites][best] - near))])
    if t == 0 or t == len(sites):
        return None
    lo, hi = int(sites[t - 1]), int(sites[t])
    return lo, hi, int((favour_a <= lo).sum()), int((favour_b >= hi).sum())


# ----------------------------------------------------------------------------------------------
# The placement in the mutation tables' terms
# ----------------------------------------------------------------------------------------------


def private_call(report, placement: Placement):
    """The :class:`~bertgeom.sars_cov_2.genome.profiles.PrivateCall` (what the QC rule and the
    tables' "private" column read) of a mutation report against its placement: the private
    substitutions (labelled and unlabelled) and private deletion ranges by the report's own names,
    the reversions by Nextclade's (the node's base first), and the table rows holding one of them
    (rows of genes outside Nextclade's annotation, ORF10, never)."""
    from .genes import NOT_IN_NEXTCLADE
    from .profiles import PrivateCall, nuc_key

    pm = placement.private
    sub_pos = {nuc_key(s)[1] for s, _ in pm.labeled} | {nuc_key(s)[1] for s in pm.unlabeled}
    labeled_pos = {nuc_key(s)[1] for s, _ in pm.labeled}
    del_names = set(pm.deletion_ranges)
    private, labeled = [], []
    for m in report.nucleotide:
        if m.kind == "sub" and m.pos in sub_pos:
            private.append(m.name)
            if m.pos in labeled_pos:
                labeled.append(m.name)
        elif m.kind == "del" and m.name in del_names:
            private.append(m.name)
    # a private substitution the report does not list (an N-adjacent call) keeps Nextclade's name
    named = {nuc_key(n)[1] for n in private if nuc_key(n) and nuc_key(n)[0] == "sub"}
    for s in [s for s, _ in pm.labeled] + list(pm.unlabeled):
        if nuc_key(s)[1] not in named:
            private.append(s)
            if s in {x for x, _ in pm.labeled}:
                labeled.append(s)
    private_set = set(private)
    rows = [e.qualified for e in report.events if e.gene not in NOT_IN_NEXTCLADE and private_set & set(e.nuc)]
    rows += [m.name for m in report.other_nucleotide if m.name in private_set]
    return PrivateCall(placement.lineage, tuple(private), tuple(labeled), pm.reversions, tuple(rows))


__all__ = ["DatasetError", "Placement", "PrivateMutations", "RecombinantCall", "ReferenceTree", "QueryState",
           "find_recombination", "load_reference_tree", "node_distances", "place", "private_call", "private_mutations",
           "query_state", "shipped_dataset_path", "spike_class"]
