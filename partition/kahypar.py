"""``method: kahypar``: Mt-KaHyPar graph partitioning, then the balance repair of ``multilevel``.

Mt-KaHyPar (the ``mtkahypar`` wheel, optional: ``pip install 'gnntrain[kahypar]'``) partitions
the symmetrised graph (:func:`partition.balance.symmetrize`, the same graph METIS sees) with its
``Graph`` API, edge-cut objective and ``DETERMINISTIC`` preset, on as many threads as this
process may use (``os.sched_getaffinity``).

Balance. Mt-KaHyPar balances one weight per node; the project balances up to three (nodes,
training nodes, in-edges: :func:`partition.balance.vertex_weights`). It is given their sum,
each constraint scaled to the same total (:func:`combined_weight`), under ``imbalance``; then
:func:`partition.multilevel.refine` moves nodes toward every constraint's allowed load (the
same repair the ``multilevel`` method uses). A constraint the repair leaves over its load
weighs 4x more in the next Mt-KaHyPar run (``KAHYPAR_TRIES`` runs at most; none when every
constraint was missed, which reweighting cannot change);
:func:`partition.multilevel.check_balance` then refuses a result that still misses one,
saying how to get out (fewer constraints, or ``metis``). The repair only moves nodes into parts
under every load, so it fixes small excesses, not large ones: on a graph whose training nodes
sit together (Cora) the three constraints can be out of reach. With one constraint
(``balance_train`` and ``balance_edges`` off) the sum is that constraint, Mt-KaHyPar's own
balance meets it and nothing is repaired.

Determinism. The ``DETERMINISTIC`` preset with a fixed seed (``partition.seed``) gives the same
parts for the same graph, run after run (tested); the refinement is deterministic. The result
does not depend on the thread count in the runs measured (tests compare 1 and 2 threads), but
the partition set's key does not include the thread count, so a different machine is trusted
to give the same parts, as with METIS.

Limits. The wheel's ids are 32-bit; the graph, its symmetrised CSR, an edge list and
Mt-KaHyPar's own copy are in this process at once (1M nodes / 20M edges: 2.6 GiB, 2.7x METIS's
largest process; docs/benchmarks/kahypar.md).
``partition.objective: vol`` (METIS's communication volume) has no graph counterpart here and
is refused.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import numpy as np

from partition.balance import SymmetricCSR, allowed_loads, loads, symmetrize, vertex_weights
from partition.config import PartitionConfig
from partition.errors import PartitionError
from partition.graph import Graph
from partition.steps import StepRecorder

__all__ = ["EXTRA", "KAHYPAR_TRIES", "combined_weight", "kahypar_parts", "load_mtkahypar"]

EXTRA = "kahypar"  # pip install 'gnntrain[kahypar]'
# node weights are int32 in the wheel: keep their total below this
_WEIGHT_TOTAL = 2**30
_UNIT = 1000  # weight of an average node in each constraint, where the total allows it
# Mt-KaHyPar runs at most this often: a constraint still over its allowed load after the
# repair weighs 4x more in the next run's combined weight
KAHYPAR_TRIES = 3


def load_mtkahypar() -> Any:
    """The ``mtkahypar`` module, or :class:`PartitionError` naming the extra that installs it."""
    try:
        import mtkahypar
    except ImportError as e:
        raise PartitionError(
            f"partition.method='kahypar' needs the mtkahypar package, which is not installed ({e}); "
            f"install it with pip install 'gnntrain[{EXTRA}]' (or pip install mtkahypar), or use "
            "partition.method='metis'") from None
    return mtkahypar


@lru_cache(maxsize=1)
def _initializer(threads: int) -> Any:
    """Mt-KaHyPar's thread pool is process-wide: set it up once per process."""
    return load_mtkahypar().initialize(threads, False)


def combined_weight(w: np.ndarray, emphasis: np.ndarray | None = None) -> np.ndarray:
    """One int64 weight per node: every column of ``w`` scaled so that an average node weighs
    the same in each (``_UNIT``, less if the total would overflow the wheel's int32), times
    its ``emphasis`` (default 1), summed. A part within ``imbalance`` of this sum is near the
    mean in every constraint, not within it: the refinement after Mt-KaHyPar makes up the
    rest, and :func:`kahypar_parts` raises the emphasis of a constraint it could not meet."""
    n, c = w.shape
    e = np.ones(c) if emphasis is None else emphasis
    unit = _UNIT * e / e.sum() * c
    unit = np.maximum(1, np.minimum(unit, unit * _WEIGHT_TOTAL / max(1.0, float(unit.sum()) * n)))
    totals = w.sum(axis=0).astype(np.float64)
    scaled = w * (unit * n / np.where(totals > 0, totals, 1.0))
    return np.maximum(1, np.rint(scaled.sum(axis=1))).astype(np.int64)


def _edge_list(sym: SymmetricCSR) -> np.ndarray:
    """``[m, 2]`` int64: every undirected edge once, as ``(u, v)`` with ``u < v``."""
    n = sym.xadj.shape[0] - 1
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(sym.xadj))
    upper = sym.adjncy > rows
    return np.stack([rows[upper], sym.adjncy[upper].astype(np.int64)], axis=1)


def threads_available() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def mtkahypar_partition(sym: SymmetricCSR, node_weight: np.ndarray, cfg: PartitionConfig,
                        threads: int) -> np.ndarray:
    """Mt-KaHyPar (``DETERMINISTIC`` preset, edge cut, ``cfg.seed``) on the symmetric graph
    with one weight per node, balanced to ``cfg.imbalance``: the part of every node."""
    mtk = load_mtkahypar()
    ini = _initializer(threads)
    ctx = ini.context_from_preset(mtk.PresetType.DETERMINISTIC)
    ctx.set_partitioning_parameters(cfg.parts, cfg.imbalance - 1.0, mtk.Objective.CUT)
    ctx.logging = False
    mtk.set_seed(cfg.seed)
    edges = _edge_list(sym)
    g = ini.create_graph(ctx, int(node_weight.shape[0]), int(edges.shape[0]), edges,
                         node_weight, np.ones(edges.shape[0], dtype=np.int64))
    del edges
    return np.asarray(g.partition(ctx).get_partition(), dtype=np.int64)


def kahypar_parts(graph: Graph, cfg: PartitionConfig, rec: StepRecorder) -> np.ndarray:
    """Part of every node (original ids): Mt-KaHyPar on the combined weight, then the
    multi-constraint repair (module docstring)."""
    from partition.multilevel import GraphBlocks, check_balance, refine

    if cfg.objective != "cut":
        raise PartitionError(f"partition.objective={cfg.objective!r}: method='kahypar' minimises the "
                             "edge cut only; set partition.objective=cut or use method='metis'")
    if graph.num_nodes >= 2**31:
        raise PartitionError(f"the graph has {graph.num_nodes} nodes; the mtkahypar wheel's ids are "
                             "32-bit; use partition.method='multilevel'")
    load_mtkahypar()  # fail before any work when the extra is absent
    with rec("symmetrize"):
        sym = symmetrize(graph, np.int64)
        w, names = vertex_weights(graph, cfg)
    allowed = allowed_loads(w, cfg.parts, cfg.imbalance)
    emphasis = np.ones(w.shape[1])
    for attempt in range(KAHYPAR_TRIES):
        with rec("kahypar" if attempt == 0 else f"kahypar-{attempt + 1}"):
            parts = mtkahypar_partition(sym, combined_weight(w, emphasis), cfg, threads_available())
        with rec("refine" if attempt == 0 else f"refine-{attempt + 1}"):
            if w.shape[1] > 1:
                parts = refine(GraphBlocks(graph), parts, w, cfg)
        excess = loads(parts, w, cfg.parts).max(axis=0) / allowed
        if (excess <= 1.0).all():
            break
        raised = np.where(excess > 1.0, emphasis * 4, emphasis)
        if np.allclose(raised / raised.sum(), emphasis / emphasis.sum()):
            break  # every constraint missed: the same combined weight again would not help
        emphasis = raised
    del sym
    try:
        check_balance(parts, w, names, cfg)
    except PartitionError as e:
        raise PartitionError(
            f"{e}. Mt-KaHyPar balances one weight per node (here {' + '.join(names)} combined, "
            f"up to {KAHYPAR_TRIES} runs); with partition.balance_train=false and "
            "partition.balance_edges=false it balances the nodes itself, or use "
            "partition.method='metis' (multi-constraint)") from None
    return parts
