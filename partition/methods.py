"""Partitioners: graph -> part of every node (original ids).

* ``metis``: METIS k-way on the symmetrised CSR (:func:`symmetrize`) with one balance
  constraint per column of :func:`vertex_weights` (nodes, each node type of a typed
  graph, training examples, in-edges),
  called through :mod:`partition.metis` because pymetis passes one constraint only;
  rerun with a tighter tolerance if METIS overshoots it (:func:`_metis_parts`).
* ``random``: a seeded random permutation dealt round-robin, separately over training
  and other nodes (and over each node type of a typed graph), so node and training-node
  counts are balanced to +-1; its expected
  edge cut is ``1 - 1/k`` (the baseline every report quotes).
* ``ldg``: streaming passes (Linear Deterministic Greedy, restreamed ``LDG_PASSES``
  times) over the in-neighbour rows with the same constraints as capacities; it never
  builds the symmetrised graph, so it runs where METIS cannot hold the graph in memory
  (the CSR may be memory-mapped). For a directed graph it sees in-neighbours only.
* ``stream`` and ``multilevel``: the block-parallel methods of :mod:`partition.multilevel`
  (restreamed LDG over row blocks; label-propagation coarsening, METIS on the coarse graph,
  refinement), run here over the in-memory graph's blocks and by :mod:`partition.parallel`
  over a chunked graph with Ray tasks.
* ``kahypar``: Mt-KaHyPar (optional extra) on the symmetrised graph with one combined node
  weight, then the refinement of ``multilevel`` for every constraint (:mod:`partition.kahypar`).

``k = 1`` puts every node in part 0 without calling a partitioner.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from partition import _kernels
from partition.config import METHODS, PartitionConfig
from partition.errors import PartitionError
from partition.graph import Graph
from partition.steps import StepRecorder

__all__ = ["METHODS", "SymmetricCSR", "allowed_loads", "assign_parts", "balanced_types", "check_assignment",
           "check_counts", "check_request", "metis_balanced",
           "random_parts", "stratified_parts", "symmetrize", "typed_random_parts", "vertex_weights", "weights_from"]

_MAX_SEED = 2**31 - 2  # METIS gets seed + 1 (see _metis_parts)
_INT32_MAX = 2**31 - 1
METIS_TRIES = 3
LDG_PASSES = 3  # ReLDG passes; 3 cut 10-30% fewer edges than 1 on Cora, CA-HepPh, GitHub


@dataclass(frozen=True)
class SymmetricCSR:
    """Undirected adjacency without self-loops or repeats, in the integer type METIS wants."""

    xadj: np.ndarray
    adjncy: np.ndarray

    @property
    def num_entries(self) -> int:
        return int(self.adjncy.shape[0])


def check_request(graph: Graph, cfg: PartitionConfig) -> None:
    """Refuse impossible requests before any work: ``k`` against nodes and training nodes,
    and balance no assignment can meet (:func:`check_feasible`)."""
    check_counts(graph.num_nodes, int(graph.train_idx.shape[0]), cfg)
    check_feasible(graph.train_weights(), graph.in_degrees(), cfg)  # per-type columns: 1 a node, never infeasible


_WEIGHT_FIX = {"nodes": "use fewer parts",
               "train": "use fewer parts or set partition.balance_train=false",
               "edges": "use fewer parts or set partition.balance_edges=false"}


def check_feasible(train: np.ndarray, in_degrees: np.ndarray, cfg: PartitionConfig) -> None:
    """Refuse balance constraints that no assignment into ``cfg.parts`` parts can meet: a
    single node heavier than the load a part may hold (``imbalance`` x total / parts) for
    some constraint of :func:`weights_from`, e.g. a hub whose in-degree exceeds a part's
    share of the edges. ``random`` (which balances nothing but counts) is not checked."""
    if cfg.parts == 1 or cfg.method == "random":
        return
    w, names = weights_from(train, in_degrees, cfg)
    for j, name in enumerate(names):
        limit = cfg.imbalance * float(w[:, j].sum()) / cfg.parts
        v = int(np.argmax(w[:, j]))
        if w[v, j] > limit:
            raise PartitionError(
                f"balance constraint {name!r} cannot be met with partition.parts={cfg.parts} and "
                f"partition.imbalance={cfg.imbalance}: node {v} alone weighs {int(w[v, j])}, above "
                f"the {limit:.1f} a part may hold (imbalance x total {int(w[:, j].sum())} / parts); "
                f"{_WEIGHT_FIX[name]}, or raise partition.imbalance")


def check_counts(n: int, n_train: int, cfg: PartitionConfig) -> None:
    """:func:`check_request` from the node and training-node counts alone."""
    k = cfg.parts
    if k < 1:
        raise PartitionError(f"partition.parts={k}: must be >= 1")
    if k > n:
        raise PartitionError(
            f"partition.parts={k} is larger than the graph's {n} nodes; use at most {n} parts")
    if k > n_train and not cfg.allow_empty_train:
        raise PartitionError(
            f"partition.parts={k} is larger than the {n_train} training nodes, so some part "
            f"(one worker each) would have nothing to train on; use at most {n_train} parts "
            "or set partition.allow_empty_train=true")
    if not 0 <= cfg.seed <= _MAX_SEED:
        raise PartitionError(f"partition.seed={cfg.seed}: must be in [0, {_MAX_SEED}]")


def _check_entries(total: int, limit: int, idx_dtype: np.dtype | type) -> None:
    if total > limit:
        raise PartitionError(
            f"the symmetrised graph has {total} adjacency entries, more than the {limit} a "
            f"{np.dtype(idx_dtype).itemsize * 8}-bit METIS build can index; use "
            "partition.method='multilevel' (METIS on a coarsened graph), 'stream' or 'ldg' "
            "(streaming), or a 64-bit METIS build")


def symmetrize(graph: Graph, idx_dtype: np.dtype | type = np.int32,
               max_entries: int | None = None) -> SymmetricCSR:
    """``A + A^T`` of the in-neighbour CSR, self-loops and repeated pairs dropped, rows sorted.

    One compiled transpose; if ``A`` is already simple (sorted rows, no repeats, no
    self-loops) and equal to its transpose -- what an undirected loader produces -- it is
    the answer (cast only). Otherwise two compiled passes (count, fill) merge the rows of
    ``A`` and ``A^T``, after sorting the rows of ``A`` by a second transpose if needed.
    Raises :class:`PartitionError` when the result has more than ``max_entries`` entries.
    """
    n = graph.num_nodes
    indptr, indices = graph.indptr, graph.indices
    t_ptr = np.zeros(n + 1, dtype=np.int64)
    t_idx = np.empty(indices.shape[0], dtype=np.int64 if n > _INT32_MAX else np.int32)
    _kernels.transpose_csr(indptr, indices, t_ptr, t_idx)
    limit = int(np.iinfo(np.dtype(idx_dtype)).max) if max_entries is None else max_entries
    if (np.array_equal(indptr, t_ptr) and _kernels.rows_simple(indptr, indices)
            and np.array_equal(indices, t_idx)):
        _check_entries(indices.shape[0], limit, idx_dtype)
        return SymmetricCSR(xadj=indptr.astype(idx_dtype), adjncy=indices.astype(idx_dtype))
    if _kernels.rows_sorted(indptr, indices):
        a_ptr, a_idx = indptr, indices
    else:
        a_ptr = np.zeros(n + 1, dtype=np.int64)
        a_idx = np.empty_like(t_idx)
        _kernels.transpose_csr(t_ptr, t_idx, a_ptr, a_idx)
    counts = np.empty(n, dtype=np.int64)
    _kernels.merge_count(a_ptr, a_idx, t_ptr, t_idx, counts)
    total = int(counts.sum())
    _check_entries(total, limit, idx_dtype)
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=xadj[1:])
    adjncy = np.empty(total, dtype=idx_dtype)
    _kernels.merge_fill(a_ptr, a_idx, t_ptr, t_idx, xadj, adjncy)
    return SymmetricCSR(xadj=xadj.astype(idx_dtype, copy=False), adjncy=adjncy)


def vertex_weights(graph: Graph, cfg: PartitionConfig) -> tuple[np.ndarray, list[str]]:
    """``[N, c]`` int64 balance constraints and their names.

    Always ``nodes`` (1 each); ``nodes:<type>`` (1 per node of that type) for each node
    type of a typed graph big enough to balance (:func:`balanced_types`) if
    ``balance_node_types``; ``train`` (:meth:`Graph.train_weights`: 1 per training
    node, or the task's per-node training weight, e.g. a link task's training in-degree)
    if ``balance_train``; ``edges`` (in-degree: the rows a part stores and samples from)
    if ``balance_edges``. A constraint whose total is 0 (a graph without edges) is dropped.
    """
    return weights_from(graph.train_weights(), graph.in_degrees(), cfg,
                        node_types=graph.node_types(), type_names=graph.node_type_names)


def balanced_types(counts: np.ndarray, cfg: PartitionConfig) -> list[int]:
    """The node types that get a balance constraint of their own: those with at least
    ``1 / (imbalance - 1)`` nodes per part, so one node fits in a part's slack (at 1.05,
    20 per part). Smaller types (HeCo DBLP's 20 conferences, ACM's 60 subjects at k=4)
    would need an exact split that METIS rarely lands on; they stay in ``nodes``."""
    if not cfg.balance_node_types or counts.shape[0] < 2:
        return []
    return [t for t, c in enumerate(counts.tolist()) if c * (cfg.imbalance - 1.0) >= cfg.parts]


def weights_from(train: np.ndarray, in_degrees: np.ndarray, cfg: PartitionConfig, *,
                 node_types: np.ndarray | None = None,
                 type_names: tuple[str, ...] = ()) -> tuple[np.ndarray, list[str]]:
    """:func:`vertex_weights` from the training mask (or per-node training weights), the
    in-degrees and the node types (None: untyped) alone (all a partitioner that never
    holds the graph has)."""
    cols = [np.ones(train.shape[0], dtype=np.int64)]
    names = ["nodes"]
    if node_types is not None:
        for t in balanced_types(np.bincount(node_types, minlength=len(type_names)), cfg):
            cols.append((node_types == t).astype(np.int64))
            names.append(f"nodes:{type_names[t]}")
    if cfg.balance_train:
        cols.append(train.astype(np.int64))
        names.append("train")
    if cfg.balance_edges and in_degrees.sum() > 0:
        cols.append(in_degrees.astype(np.int64))
        names.append("edges")
    return np.stack(cols, axis=1), names


def typed_random_parts(train: np.ndarray, types: np.ndarray | None, num_types: int, k: int,
                       seed: int) -> np.ndarray:
    """``random`` with each node type (``types``: type index per node; None: untyped) dealt
    on its own, training nodes first: every (type, training or not) stratum balanced to +-1."""
    strata = np.where(train, 0, 1) if types is None else types * 2 + np.where(train, 0, 1)
    return stratified_parts(strata, 2 * (1 if types is None else num_types), k, seed)


def _random_parts(train: np.ndarray, k: int, seed: int) -> np.ndarray:
    return typed_random_parts(train, None, 1, k, seed)


def stratified_parts(strata: np.ndarray, num_strata: int, k: int, seed: int) -> np.ndarray:
    """Seeded random permutation of each stratum ``0 .. num_strata - 1`` in turn, dealt
    round-robin over ``k`` parts: every stratum is balanced to +-1 node per part."""
    rng = np.random.default_rng(seed)
    parts = np.empty(strata.shape[0], dtype=np.int64)
    for s in range(num_strata):
        stratum = np.flatnonzero(strata == s)
        parts[stratum[rng.permutation(stratum.shape[0])]] = np.arange(stratum.shape[0]) % k
    return parts


def _ldg_parts(graph: Graph, cfg: PartitionConfig) -> np.ndarray:
    w, _ = vertex_weights(graph, cfg)
    return np.asarray(_kernels.ldg_stream(graph.indptr, graph.indices, cfg.parts, w.astype(np.float64),
                                          cfg.imbalance, cfg.seed, LDG_PASSES))


@contextmanager
def _spill_dir(enabled: bool) -> Iterator[str | None]:
    if not enabled:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="gnntrain-metis-") as d:
        yield d


def allowed_loads(weights: np.ndarray, k: int, imbalance: float) -> np.ndarray:
    """Largest per-part load of each constraint that counts as balanced: ``imbalance`` times
    the mean, but never below what whole nodes allow (``ceil(mean) + max weight - 1``)."""
    mean = weights.sum(axis=0) / k
    return np.maximum(imbalance * mean, np.ceil(mean) + weights.max(axis=0, initial=1) - 1)


def _excess(parts: np.ndarray, weights: np.ndarray, k: int, allowed: np.ndarray) -> float:
    loads = np.stack([np.bincount(parts, weights=weights[:, c], minlength=k)
                      for c in range(weights.shape[1])], axis=1)
    return float((loads.max(axis=0) / allowed).max())


def metis_target(imbalance: float) -> float:
    """The ``ubvec`` of the first METIS call for an allowed ``imbalance``: 80% of the slack.
    METIS treats ``ubvec`` as a target and lands on it or just past it (1M-node synthetic
    graph, k=8: exactly at 1.05 for 1.05, 1.04 for 1.04, same cut and time), and a result
    over the allowed load costs a second call."""
    return 1.0 + 0.8 * (imbalance - 1.0)


def _metis_parts(graph: Graph, cfg: PartitionConfig, steps: StepRecorder) -> np.ndarray:
    from partition.metis import load_metis

    lib = load_metis()
    with steps("symmetrize"):
        sym = symmetrize(graph, lib.idx_dtype)
        w, _ = vertex_weights(graph, cfg)
    with steps("metis"):
        # in a process of its own: METIS draws from the C library's rand(), which any other
        # thread of this process (Ray's, after ray.init) may draw from at the same time
        from partition.multilevel import _metis_in_child

        return _metis_in_child(sym, w, cfg, allowed_loads(w, cfg.parts, cfg.imbalance), None)


def metis_balanced(sym: SymmetricCSR, w: np.ndarray, cfg: PartitionConfig, allowed: np.ndarray,
                   adjwgt: np.ndarray | None = None) -> np.ndarray:
    """METIS k-way aimed at :func:`metis_target`; if a constraint still ends above its
    ``allowed`` load (METIS overshoots now and then, mostly at k=2: measured 1.066 for 1.05 on
    CA-HepPh), rerun with half the tolerance, at most ``METIS_TRIES`` calls in all, and keep
    the best-balanced result. ``adjwgt`` weighs the edges (a coarsened graph)."""
    from partition.metis import part_graph_kway

    best: tuple[float, np.ndarray] | None = None
    ub = metis_target(cfg.imbalance)
    with _spill_dir(cfg.metis_spill) as spill:
        for _ in range(METIS_TRIES):
            # METIS seeds the C library's srand(), where seeds 0 and 1 are the same stream
            parts, _ = part_graph_kway(sym.xadj, sym.adjncy, cfg.parts, vwgt=w, adjwgt=adjwgt, ubvec=ub,
                                       objective=cfg.objective, seed=cfg.seed + 1, spill_dir=spill)
            excess = _excess(parts, w, cfg.parts, allowed)
            if best is None or excess < best[0]:
                best = (excess, parts)
            if excess <= 1.0:
                break
            ub = 1.0 + (ub - 1.0) / 2
    assert best is not None
    return best[1]


def _check_result(graph: Graph, cfg: PartitionConfig, parts: np.ndarray) -> None:
    check_assignment(parts, graph.train_idx, cfg)


def check_assignment(parts: np.ndarray, train_idx: np.ndarray, cfg: PartitionConfig) -> None:
    """Every node in a part in ``[0, k)``; no part without training nodes unless allowed."""
    assert parts.ndim == 1 and parts.dtype == np.int64
    assert parts.min() >= 0 and parts.max() < cfg.parts
    if cfg.allow_empty_train:
        return
    per_part = np.bincount(parts[train_idx], minlength=cfg.parts)
    empty = np.flatnonzero(per_part == 0)
    if empty.size:
        raise PartitionError(
            f"method={cfg.method!r} left part {int(empty[0])} without training nodes "
            f"({empty.size} of {cfg.parts} parts); set partition.balance_train=true, use fewer "
            "parts, or set partition.allow_empty_train=true")


def assign_parts(graph: Graph, cfg: PartitionConfig, *,
                 steps: StepRecorder | None = None) -> np.ndarray:
    """Part of every node (int64 ``[N]``, original ids); the same seed gives the same parts.

    ``steps`` (optional) records time and peak memory of each stage.
    """
    check_request(graph, cfg)
    rec = steps if steps is not None else StepRecorder()
    if cfg.parts == 1:
        parts = np.zeros(graph.num_nodes, dtype=np.int64)
    elif cfg.method == "metis":
        parts = _metis_parts(graph, cfg, rec)
    elif cfg.method == "random":
        with rec("random"):
            types = graph.node_types() if cfg.balance_node_types else None
            parts = typed_random_parts(graph.mask("train"), types, len(graph.node_type_names),
                                       cfg.parts, cfg.seed)
    elif cfg.method == "ldg":
        with rec("ldg"):
            parts = _ldg_parts(graph, cfg)
    elif cfg.method in ("stream", "multilevel"):
        from partition.multilevel import GraphBlocks, blocked_parts

        w, names = vertex_weights(graph, cfg)
        parts = blocked_parts(GraphBlocks(graph), w, names, cfg, rec)
    elif cfg.method == "kahypar":
        from partition.kahypar import kahypar_parts

        parts = kahypar_parts(graph, cfg, rec)
    else:  # pragma: no cover - PartitionConfig's Literal refuses other names
        raise PartitionError(f"partition.method={cfg.method!r}: expected one of {', '.join(METHODS)}")
    _check_result(graph, cfg, parts)
    return parts


def random_parts(graph: Graph | np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """The random baseline on its own (used by the quality report on the same graph), from
    the graph or from its training mask (bool ``[N]``, original ids) alone."""
    return _random_parts(graph.mask("train") if isinstance(graph, Graph) else graph, k, seed)
