"""Partitioners that work on row blocks, so the rows can live in other processes.

Both methods touch the graph only through :class:`BlockMap.map` (run a function on every
block of in-neighbour rows, in parallel where the map allows) and keep ``O(N)`` state
between those calls: parts, labels, vertex weights. :class:`GraphBlocks` maps over the
blocks of an in-memory graph in this process; :mod:`partition.parallel` maps over blocks
stored on disk with Ray tasks. The same blocks give the same parts either way.

* ``stream``: LDG (:func:`partition._kernels.ldg_pass`) restreamed ``LDG_PASSES`` times;
  in each pass every block streams its own rows at the same time as the others, with a
  share of each part's capacity proportional to the block's weight, and sees the other
  blocks' nodes at their part of the previous pass; then :func:`refine`.
* ``multilevel``: unless the graph already fits (``COARSE_NODES``), size-constrained label
  propagation (:func:`partition._kernels.lp_cluster`, every block in parallel, up to
  ``LP_ROUNDS`` rounds; a cluster weighs at most ``1 / (k * CLUSTERS_PER_PART)`` of each
  constraint's total; where blocks together overfill a cluster, the moves past its limit
  are undone) coarsens the graph; each block contributes its coarse edges, one task reads
  them a block at a time, builds the weighted coarse graph and runs multi-constraint METIS on it
  (:func:`partition.balance.metis_balanced`, in a process of its own: see
  :func:`partition.balance.metis_in_child`), the coarse parts are projected back and
  :func:`refine` polishes them.
* :func:`refine`: label-propagation refinement under the balance constraints: every block
  proposes moves of its nodes to the part holding most of their in-neighbours, the
  coordinator applies them best gain first while every constraint stays within its allowed
  load; nodes of an overloaded part propose their best other part even at a loss, so the
  same step also repairs balance. Any constraint still above its allowed load at the end
  raises :class:`~partition.errors.PartitionError` naming it.

For a directed graph both methods see in-neighbours only (the coarse graph is symmetrised).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from partition import _kernels
from partition.balance import LDG_PASSES, SymmetricCSR, allowed_loads, loads, metis_in_child
from partition.config import PartitionConfig
from partition.errors import PartitionError
from partition.graph import Graph
from partition.steps import StepRecorder

__all__ = ["BLOCK_ROWS", "Block", "BlockMap", "GraphBlocks", "block_bounds", "blocked_parts",
           "check_balance", "multilevel_parts", "refine", "stream_parts"]

T = TypeVar("T")
# rows per block (and per Ray task) unless a caller picks another size: a task's memory is
# about one block's rows, edges and features (1M/20M/100 features: 2^18 rows peaked at 600 MiB)
BLOCK_ROWS = 1 << 17
LP_ROUNDS = 8
# a cluster weighs at most 1/(k * this) of every constraint: 4 lets clusters grow to whole
# communities (1M-node synthetic graph, k=8: 13k clusters, cut 0.405; 16: 116k clusters, 0.423)
CLUSTERS_PER_PART = 4
# a graph of at most this many nodes already fits: METIS takes it whole (no label propagation)
COARSE_NODES = 20_000
# the coarse step merges the blocks' coarse-edge pieces once this many unmerged entries are held
MERGE_ENTRIES = 1 << 24
REFINE_ROUNDS = 6


@dataclass(frozen=True)
class Block:
    """In-neighbour rows of nodes ``[lo, hi)``: ``indptr`` local (``[hi - lo + 1]``, from 0),
    ``indices`` global node ids."""

    index: int
    lo: int
    hi: int
    indptr: np.ndarray
    indices: np.ndarray


class BlockMap(Protocol):
    """Runs functions over the row blocks of one graph."""

    bounds: np.ndarray  # [B + 1] row offsets of the blocks

    def map(self, fn: Callable[..., T], shared: tuple[Any, ...], *, desc: str,
            keep: bool = False) -> list[Any]:
        """``fn(block, *shared)`` for every block, results in block order. With ``keep`` the
        results stay where they were computed and come back as handles for :meth:`call`."""
        ...

    def call(self, fn: Callable[..., T], pieces: list[Any], *args: Any) -> T:
        """``fn(resolved_pieces, *args)`` once (in its own process where the map has them);
        ``resolved_pieces`` is an iterable over the pieces in block order, read once, that
        may fetch each piece only when it is reached."""
        ...


def block_bounds(num_nodes: int, block_rows: int = BLOCK_ROWS) -> np.ndarray:
    """``[0, b, 2b, ..., N]``: the row blocks both maps use."""
    if block_rows < 1:
        raise PartitionError(f"block_rows={block_rows}: must be >= 1")
    return np.append(np.arange(0, num_nodes, block_rows, dtype=np.int64), np.int64(num_nodes))


class GraphBlocks:
    """The row blocks of an in-memory graph, mapped over in this process."""

    def __init__(self, graph: Graph, block_rows: int = BLOCK_ROWS) -> None:
        self.graph = graph
        self.bounds = block_bounds(graph.num_nodes, block_rows)

    def block(self, b: int) -> Block:
        lo, hi = int(self.bounds[b]), int(self.bounds[b + 1])
        ptr = self.graph.indptr
        return Block(index=b, lo=lo, hi=hi, indptr=ptr[lo:hi + 1] - ptr[lo],
                     indices=self.graph.indices[ptr[lo]:ptr[hi]])

    def map(self, fn: Callable[..., T], shared: tuple[Any, ...], *, desc: str,
            keep: bool = False) -> list[Any]:
        return [fn(self.block(b), *shared) for b in range(self.bounds.shape[0] - 1)]

    def call(self, fn: Callable[..., T], pieces: list[Any], *args: Any) -> T:
        return fn(pieces, *args)


# ---- stream: parallel restreamed LDG ------------------------------------------------------

def _ldg_block(block: Block, prev: np.ndarray, w: np.ndarray, k: int, imbalance: float,
               seed: int) -> np.ndarray:
    parts = np.full(block.hi - block.lo, -1, dtype=np.int64)
    _kernels.seed_random(seed + block.index)
    _kernels.ldg_pass(block.indptr, block.indices, block.lo, k,
                      np.ascontiguousarray(w[block.lo:block.hi], dtype=np.float64), imbalance,
                      prev, parts, np.zeros((k, w.shape[1])), np.zeros(k))
    return parts


def stream_parts(blocks: BlockMap, w: np.ndarray, cfg: PartitionConfig) -> np.ndarray:
    """LDG restreamed over the blocks in parallel (see the module docstring), unrefined."""
    prev = np.full(w.shape[0], -1, dtype=np.int64)
    for p in range(LDG_PASSES):
        got = blocks.map(_ldg_block, (prev, w, cfg.parts, cfg.imbalance, cfg.seed),
                         desc=f"ldg pass {p + 1}/{LDG_PASSES}")
        prev = np.concatenate(got)
    return prev


# ---- multilevel: coarsen, METIS, project --------------------------------------------------

def _lp_block(block: Block, labels: np.ndarray, cw: np.ndarray, w: np.ndarray,
              limit: np.ndarray) -> np.ndarray:
    own = labels[block.lo:block.hi].copy()
    # zeroed [N] scratch arrays: the pages a block never touches are never allocated
    delta = np.zeros(cw.shape, dtype=np.float64)
    acc = np.zeros(labels.shape[0], dtype=np.float64)
    _kernels.lp_cluster(block.indptr, block.indices, block.lo, labels, own, cw, delta,
                        np.ascontiguousarray(w[block.lo:block.hi], dtype=np.float64), limit, acc)
    return own


def _cluster_weights(labels: np.ndarray, w: np.ndarray, size: int) -> np.ndarray:
    return np.stack([np.bincount(labels, weights=w[:, c], minlength=size)
                     for c in range(w.shape[1])], axis=1)


def _overfilling_moves(new: np.ndarray, moved: np.ndarray, w: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Mask of the moves to undo so that no cluster of ``new`` is above ``limit``: of the
    nodes that moved into an overfull cluster, the ones past the limit in a fixed scrambled
    order of node ids. Blocks move at the same time and each sees only its own moves, so on
    a dense graph every block fills the same popular clusters; undoing every move into them
    (rather than the excess) left most nodes where they were, round after round."""
    cwn = _cluster_weights(new, w, w.shape[0])
    over = np.asarray((cwn > limit).any(axis=1))
    cand = np.flatnonzero(moved & over[new])
    undo = np.zeros(new.shape[0], dtype=bool)
    if cand.size == 0:
        return undo
    target = new[cand]
    # scrambled so that no block's nodes are always kept first (Fibonacci hashing of the id)
    order = np.lexsort(((cand.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)), target))
    cand, target = cand[order], target[order]
    wc = w[cand].astype(np.float64)
    start = np.flatnonzero(np.concatenate([[True], target[1:] != target[:-1]]))  # one group per cluster
    group = np.repeat(np.arange(start.size), np.diff(np.append(start, cand.size)))
    cum = np.cumsum(wc, axis=0)
    before = np.concatenate([np.zeros((1, wc.shape[1])), cum])[start]  # running total at each group's start
    base = cwn[target[start]] - np.add.reduceat(wc, start, axis=0)  # the cluster without the moves into it
    undo[cand[(base[group] + cum - before[group] > limit).any(axis=1)]] = True
    return undo


def coarsen(blocks: BlockMap, w: np.ndarray, k: int) -> np.ndarray:
    """Cluster label of every node by size-constrained label propagation over the blocks;
    every node its own cluster when the graph has at most ``COARSE_NODES`` nodes."""
    n = w.shape[0]
    if n <= COARSE_NODES:
        return np.arange(n, dtype=np.int64)
    limit = np.maximum(w.sum(axis=0) / (k * CLUSTERS_PER_PART), w.max(axis=0)).astype(np.float64)
    labels = np.arange(n, dtype=np.int64)
    for r in range(LP_ROUNDS):
        cw = _cluster_weights(labels, w, n)
        new = np.concatenate(blocks.map(_lp_block, (labels, cw, w, limit),
                                        desc=f"coarsen round {r + 1}/{LP_ROUNDS}"))
        moved = new != labels
        for _ in range(8):  # blocks moved nodes at once: undo the moves that overfill clusters
            undo = _overfilling_moves(new, moved, w, limit)
            if not undo.any():
                break
            new[undo] = labels[undo]
            moved &= ~undo
        changed = int(moved.sum())
        labels = new
        if changed < n // 100:
            break
    return labels


def _coarse_edges(block: Block, cid: np.ndarray, nc: int) -> tuple[np.ndarray, np.ndarray]:
    """The block's edges between different clusters as sorted keys ``cu * nc + cv`` and counts."""
    dst = np.repeat(np.arange(block.lo, block.hi, dtype=np.int64), np.diff(block.indptr))
    cu, cv = cid[block.indices], cid[dst]
    keep = cu != cv
    return _count_keys(cu[keep] * nc + cv[keep])


def _count_keys(keys: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    weights = np.ones(keys.shape[0], dtype=np.int64) if counts is None else counts[order]
    if keys.size == 0:
        return keys, weights
    start = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[start], np.add.reduceat(weights, start)


def _merged_pieces(pieces: Iterable[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The blocks' (keys, counts) pieces summed into one sorted (keys, counts), read one piece
    at a time; pieces are merged whenever the unmerged ones hold as many entries as the
    merged result (at least ``MERGE_ENTRIES``), so memory follows the distinct keys, not
    the sum of the pieces."""
    merged = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    held: list[tuple[np.ndarray, np.ndarray]] = []
    size = 0
    for piece in pieces:
        held.append(piece)
        size += piece[0].size
        if size >= max(merged[0].size, MERGE_ENTRIES):
            merged = _count_keys(*map(np.concatenate, zip(merged, *held, strict=True)))
            held, size = [], 0
    return _count_keys(*map(np.concatenate, zip(merged, *held, strict=True))) if held else merged


def _partition_coarse(pieces: Iterable[tuple[np.ndarray, np.ndarray]], cw: np.ndarray,
                      cfg: PartitionConfig, allowed: np.ndarray) -> np.ndarray:
    """Build the weighted symmetric coarse graph from the blocks' pieces; METIS it."""
    import scipy.sparse as sp

    from partition.metis import load_metis

    lib = load_metis()
    nc = cw.shape[0]
    keys, counts = _merged_pieces(pieces)
    r, c = keys // nc, keys % nc
    a = sp.coo_matrix((np.concatenate([counts, counts]), (np.concatenate([r, c]), np.concatenate([c, r]))),
                      shape=(nc, nc)).tocsr()
    a.sum_duplicates()
    a.sort_indices()
    if a.nnz > lib.max_idx:
        raise PartitionError(f"the coarse graph has {a.nnz} adjacency entries, more than METIS's "
                             f"idx_t holds ({lib.max_idx}); use method='stream'")
    sym = SymmetricCSR(xadj=a.indptr.astype(lib.idx_dtype), adjncy=a.indices.astype(lib.idx_dtype))
    adjwgt = np.minimum(a.data, lib.max_idx).astype(lib.idx_dtype)
    # vertex-weight totals must fit idx_t: scale a column down where they would not
    scale = np.maximum(1.0, np.ceil(cw.sum(axis=0) / (lib.max_idx // 4)))
    vw = np.ceil(cw / scale).astype(np.int64)
    return metis_in_child(sym, vw, cfg, allowed / scale, adjwgt)


def multilevel_parts(blocks: BlockMap, w: np.ndarray, cfg: PartitionConfig,
                     rec: StepRecorder) -> np.ndarray:
    """Coarsen, METIS the coarse graph, project back (unrefined)."""
    with rec("coarsen"):
        labels = coarsen(blocks, w, cfg.parts)
        _, cid = np.unique(labels, return_inverse=True)
        cid = cid.astype(np.int64)
        nc = int(cid.max()) + 1
        cw = _cluster_weights(cid, w, nc)
        del labels
    if nc < cfg.parts:
        raise PartitionError(f"coarsening left {nc} clusters for partition.parts={cfg.parts}")
    with rec("coarse-metis"):
        pieces = blocks.map(_coarse_edges, (cid, nc), desc="coarse edges", keep=True)
        cparts = blocks.call(_partition_coarse, pieces, cw, cfg,
                             allowed_loads(w, cfg.parts, cfg.imbalance))
    return np.asarray(cparts)[cid]


# ---- refinement ---------------------------------------------------------------------------

def _proposals(block: Block, parts: np.ndarray, k: int, direction: int,
               over: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = block.hi - block.lo
    node, target, gain = (np.empty(n, dtype=np.int64) for _ in range(3))
    m = _kernels.refine_proposals(block.indptr, block.indices, block.lo, parts, k, direction, over,
                                  node, target, gain)
    return node[:m], target[:m], gain[:m]


def refine(blocks: BlockMap, parts: np.ndarray, w: np.ndarray, cfg: PartitionConfig,
           rounds: int = REFINE_ROUNDS) -> np.ndarray:
    """Label-propagation refinement and balance repair (see the module docstring)."""
    k = cfg.parts
    parts = parts.copy()
    allowed = allowed_loads(w, k, cfg.imbalance)
    load = loads(parts, w, k)
    wf = np.ascontiguousarray(w, dtype=np.float64)
    for r in range(rounds):
        over = (load > allowed).any(axis=1)
        got = blocks.map(_proposals, (parts, k, 1 if r % 2 == 0 else -1, over),
                         desc=f"refine round {r + 1}/{rounds}")
        node, target, gain = (np.concatenate([g[i] for g in got]) for i in range(3))
        order = np.argsort(-gain, kind="stable")
        moved = _kernels.accept_moves(node[order], target[order], gain[order], parts, wf, load, allowed)
        if moved < max(1, parts.shape[0] // 10000) and r % 2 == 1 and not over.any():
            break
    return parts


def check_balance(parts: np.ndarray, w: np.ndarray, names: list[str], cfg: PartitionConfig) -> None:
    """Raise :class:`PartitionError` naming the first constraint above its allowed load."""
    allowed = allowed_loads(w, cfg.parts, cfg.imbalance)
    load = loads(parts, w, cfg.parts)
    for c, name in enumerate(names):
        worst = int(np.argmax(load[:, c]))
        if load[worst, c] > allowed[c]:
            mean = w[:, c].sum() / cfg.parts
            field = "balance_node_types" if name.startswith("nodes:") else f"balance_{name}"
            fix = "" if name == "nodes" else f", or turn the constraint off (partition.{field}=false)"
            raise PartitionError(
                f"method={cfg.method!r} could not meet the {name!r} balance constraint: part {worst} "
                f"holds {load[worst, c]:.0f}, {load[worst, c] / mean:.3f}x the mean, above the allowed "
                f"{allowed[c]:.0f} (partition.imbalance={cfg.imbalance}); raise partition.imbalance "
                f"or use fewer parts{fix}")


def blocked_parts(blocks: BlockMap, w: np.ndarray, names: list[str], cfg: PartitionConfig,
                  rec: StepRecorder) -> np.ndarray:
    """Parts by ``cfg.method`` (``stream`` or ``multilevel``), refined and balance-checked."""
    if cfg.method == "stream":
        with rec("stream"):
            parts = stream_parts(blocks, w, cfg)
    elif cfg.method == "multilevel":
        parts = multilevel_parts(blocks, w, cfg, rec)
    else:
        raise PartitionError(f"partition.method={cfg.method!r}: blocked_parts runs 'stream' or 'multilevel'")
    with rec("refine"):
        parts = refine(blocks, parts, w, cfg)
    check_balance(parts, w, names, cfg)
    return parts
