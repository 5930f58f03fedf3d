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

import numpy as np

from partition import _kernels
from partition.balance import (
    LDG_PASSES,
    allowed_loads,
    symmetrize,
    vertex_weights,
    weights_from,
)
from partition.config import METHODS, PartitionConfig
from partition.errors import PartitionError
from partition.graph import Graph
from partition.steps import StepRecorder

__all__ = ["BASELINE_SEED", "METHODS", "assign_parts", "check_assignment", "check_counts", "check_request", "random_parts",
           "stratified_parts", "typed_random_parts"]

_MAX_SEED = 2**31 - 2  # METIS gets seed + 1 (see _metis_parts)




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










def _metis_parts(graph: Graph, cfg: PartitionConfig, steps: StepRecorder) -> np.ndarray:
    from partition.metis import load_metis

    lib = load_metis()
    with steps("symmetrize"):
        sym = symmetrize(graph, lib.idx_dtype)
        w, _ = vertex_weights(graph, cfg)
    with steps("metis"):
        # in a process of its own: METIS draws from the C library's rand(), which any other
        # thread of this process (Ray's, after ray.init) may draw from at the same time
        from partition.balance import metis_in_child

        return metis_in_child(sym, w, cfg, allowed_loads(w, cfg.parts, cfg.imbalance), None)




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


BASELINE_SEED = 0
"""The seed of the random baseline that quality reports and a set's ``random_edge_cut`` compare with."""


def random_parts(graph: Graph | np.ndarray, k: int, seed: int = BASELINE_SEED) -> np.ndarray:
    """The random baseline on its own (used by the quality report on the same graph), from
    the graph or from its training mask (bool ``[N]``, original ids) alone."""
    return _random_parts(graph.mask("train") if isinstance(graph, Graph) else graph, k, seed)
