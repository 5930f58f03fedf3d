"""Partition quality: edge cut against the random baseline, per-part balance, halo, cut matrix,
the estimated share of remote sampled neighbours, and time/memory of each build step.

:func:`quality_report` computes a :class:`PartitionReport` from a graph and a part
assignment (original ids) alone, so any partitioner's output can be judged, with
vectorised numpy/scipy (no loop over nodes or edges). :func:`write_report` writes
``partition.json`` and ``partition.png`` into a run directory.

Definitions (all on the stored directed in-neighbour CSR):

* cut edge: a stored edge ``u -> v`` whose ends have different owners. For an undirected
  graph (both directions stored) the fraction equals the undirected cut fraction.
* ``cut_matrix[p][q]``: edges into part ``p`` from part ``q`` (diagonal: internal edges).
* halo of ``p``: distinct nodes of other parts that are in-neighbours of ``p``'s nodes;
  replication factor = halo / owned nodes.
* imbalance of a per-part count: max / mean over parts (1.0 = perfect; 1.0 if all zero);
  a typed graph also gets ``nodes:<type>`` for each node type.
* remote share (an analytic estimate, not a measurement): each part samples from its
  training nodes with the fanouts (``fanouts[0]`` next to the seeds); a node of in-degree
  ``d`` reached with weight ``w`` contributes ``w * min(f, d) / d`` to each in-neighbour
  (``f / d`` with replacement). Summed per hop this is the expected number of sampled
  edges, and the remote share is the part of it whose source another part owns. It
  ignores de-duplication of frontier nodes, which lowers absolute counts but barely moves
  the share.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict

from partition.book import cut_counts
from partition.errors import PartitionError
from partition.graph import Graph
from partition.methods import BASELINE_SEED, random_parts
from partition.steps import StepStat
from partition.store import PartitionSet

__all__ = ["PartStats", "PartitionReport", "cut_stats", "quality_report", "remote_share",
           "set_report", "write_report"]

METRICS = ("nodes", "edges", "train", "val", "test", "halo")


class PartStats(BaseModel):
    """Sizes of one part."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: int
    edges: int
    train: int
    val: int
    test: int
    halo: int
    cut_edges: int
    replication: float


class PartitionReport(BaseModel):
    """The quality of one assignment of a graph's nodes to ``num_parts`` parts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    graph_name: str
    graph_hash: str
    method: str
    num_parts: int
    num_nodes: int
    num_edges: int
    edge_cut: int
    edge_cut_fraction: float
    random_edge_cut: int
    random_edge_cut_fraction: float
    random_expected_fraction: float
    cut_vs_random: float
    parts: list[PartStats]
    imbalance: dict[str, float]
    cut_matrix: list[list[int]]
    fanouts: list[int] | None = None
    remote_share: float | None = None
    remote_share_per_hop: list[float] = []
    sampled_per_hop: list[float] = []
    remote_per_hop: list[float] = []
    remote_share_per_part: list[float] = []
    steps: list[StepStat] = []
    partition_path: str | None = None
    notes: list[str] = []

    def to_json(self, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent)

    def print(self, console: Any = None) -> None:
        """Readable tables on the terminal (rich)."""
        from partition.render import print_report
        print_report(self, console)

    def plot(self, path: str | Path, *, compare: list[PartitionReport] | None = None) -> Path:
        """PNG: per-part balance bars and the cut-edge heatmap (plus a method comparison)."""
        from partition.render import plot_report
        return plot_report(self, Path(path), compare or [])


def _type_imbalance(types: np.ndarray | None, parts: np.ndarray, k: int,
                    names: tuple[str, ...]) -> dict[str, float]:
    """``nodes:<type>`` imbalance of every node type of a typed graph (empty if untyped);
    ``types`` and ``parts`` index the same nodes."""
    if types is None:
        return {}
    counts = np.zeros((len(names), k), dtype=np.int64)
    np.add.at(counts, (types, parts), 1)
    return {f"nodes:{name}": _imbalance(counts[t]) for t, name in enumerate(names)}


def _imbalance(values: np.ndarray) -> float:
    mean = float(values.mean()) if values.size else 0.0
    return float(values.max()) / mean if mean > 0 else 1.0


def cut_stats(graph: Graph, parts: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(cut_matrix [k, k], halo [k])``: edges into p from q, distinct remote in-neighbours of p."""
    dst_part = np.repeat(parts, graph.in_degrees())
    src_part = parts[graph.indices]
    matrix = np.bincount(dst_part * k + src_part, minlength=k * k).reshape(k, k)
    remote = dst_part != src_part
    keys = np.unique(dst_part[remote] * np.int64(graph.num_nodes) + graph.indices[remote])
    halo = np.bincount(keys // graph.num_nodes, minlength=k)
    return matrix.astype(np.int64), halo.astype(np.int64)


def remote_share(graph: Graph, parts: np.ndarray, k: int, fanouts: list[int], *,
                 replace: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Expected sampled edges and remote ones, ``[hops, k]`` each (see module docstring)."""
    n = graph.num_nodes
    deg = graph.in_degrees().astype(np.float64)
    a_t = sp.csr_matrix((np.ones(graph.num_edges), graph.indices, graph.indptr), shape=(n, n)).T.tocsr()
    w = np.zeros((n, k))
    w[graph.train_idx, parts[graph.train_idx]] = 1.0
    rows = np.arange(n)
    sampled, remote = np.zeros((len(fanouts), k)), np.zeros((len(fanouts), k))
    for h, f in enumerate(fanouts):
        take = deg if f < 0 else (np.full(n, float(f)) if replace else np.minimum(deg, f))
        scale = np.divide(take, deg, out=np.zeros(n), where=deg > 0)
        w = np.asarray(a_t @ (w * scale[:, None]))
        sampled[h] = w.sum(axis=0)
        local = w[rows, parts]
        w[rows, parts] = 0.0  # leave only the weight on nodes other parts own
        remote[h] = w.sum(axis=0)
        w[rows, parts] = local
    return sampled, remote


def quality_report(graph: Graph, assignment: np.ndarray, *, fanouts: list[int] | None = None,
                   method: str = "unknown", steps: list[StepStat] | None = None,
                   num_parts: int | None = None, replace: bool = False,
                   partition_path: str | Path | None = None, baseline_seed: int = BASELINE_SEED,
                   notes: list[str] | None = None) -> PartitionReport:
    """Judge ``assignment`` (int ``[N]``, part of each original node id) on ``graph``.

    ``num_parts`` defaults to ``assignment.max() + 1``; ``fanouts`` (sampler order) turns
    on the remote-share estimate; ``steps`` (e.g. ``pset.meta.steps``) and ``notes`` are copied in.
    The random baseline is measured on the same graph with ``baseline_seed``.
    """
    parts = np.asarray(assignment)
    if parts.shape != (graph.num_nodes,) or not np.issubdtype(parts.dtype, np.integer):
        raise PartitionError(f"assignment: expected an integer array of shape [{graph.num_nodes}], "
                             f"got {parts.dtype} {list(parts.shape)}")
    parts = parts.astype(np.int64)
    k = int(parts.max()) + 1 if num_parts is None else num_parts
    if parts.min() < 0 or parts.max() >= k:
        raise PartitionError(f"assignment: part ids must lie in [0, num_parts={k}), "
                             f"got {int(parts.min())}..{int(parts.max())}")
    matrix, halo = cut_stats(graph, parts, k)
    deg = graph.in_degrees()
    counts = {
        "nodes": np.bincount(parts, minlength=k),
        "edges": np.bincount(parts, weights=deg, minlength=k).astype(np.int64),
        **{s: np.bincount(parts[graph.split_idx(s)], minlength=k) for s in ("train", "val", "test")},
        "halo": halo,
    }
    cut_per_part = matrix.sum(axis=1) - np.diag(matrix)
    part_stats = [PartStats(**{m: int(counts[m][p]) for m in METRICS}, cut_edges=int(cut_per_part[p]),
                            replication=float(halo[p]) / max(int(counts["nodes"][p]), 1))
                  for p in range(k)]
    cut = int(cut_per_part.sum())
    e = max(graph.num_edges, 1)
    rnd = random_parts(graph, k, baseline_seed)
    rnd_cut = int(np.count_nonzero(rnd[graph.indices] != np.repeat(rnd, deg)))
    notes = list(notes or [])
    share: float | None = None
    per_hop: list[float] = []
    per_part: list[float] = []
    sampled = remote = np.zeros((0, k))
    if fanouts:
        sampled, remote = remote_share(graph, parts, k, list(fanouts), replace=replace)
        share = float(remote.sum() / sampled.sum()) if sampled.sum() > 0 else 0.0
        per_hop = [float(r / s) if s > 0 else 0.0 for r, s in zip(remote.sum(1), sampled.sum(1), strict=True)]
        per_part = [float(r / s) if s > 0 else 0.0 for r, s in zip(remote.sum(0), sampled.sum(0), strict=True)]
        notes.append("remote share is an analytic estimate (expected sampled edges, frontier "
                     "de-duplication ignored), not a measurement")
    return PartitionReport(
        graph_name=graph.name, graph_hash=graph.content_hash(), method=method, num_parts=k,
        num_nodes=graph.num_nodes, num_edges=graph.num_edges, edge_cut=cut,
        edge_cut_fraction=cut / e, random_edge_cut=rnd_cut, random_edge_cut_fraction=rnd_cut / e,
        random_expected_fraction=1.0 - 1.0 / k,
        cut_vs_random=(cut / rnd_cut) if rnd_cut else (0.0 if cut == 0 else float("inf")),
        parts=part_stats,
        imbalance={m: _imbalance(counts[m]) for m in METRICS}
        | _type_imbalance(graph.node_types(), parts, k, graph.node_type_names),
        cut_matrix=matrix.tolist(), fanouts=list(fanouts) if fanouts else None,
        remote_share=share, remote_share_per_hop=per_hop, remote_share_per_part=per_part,
        sampled_per_hop=sampled.sum(1).tolist(), remote_per_hop=remote.sum(1).tolist(),
        steps=list(steps or []), partition_path=str(partition_path) if partition_path else None,
        notes=notes)


_SLICE = 1 << 24  # in-edges read at a time by set_report


def _cuts_from_parts(pset: PartitionSet, baseline_seed: int) -> tuple[np.ndarray, int]:
    """The cut matrix and the random baseline's cut, read from the parts in slices (a set
    whose meta lacks them, or another baseline seed). Memory: ``O(N)`` plus one slice."""
    k, n = pset.num_parts, pset.num_nodes
    orig_of = np.asarray(np.load(pset.path / "orig_ids.npy", mmap_mode="r"))
    train = np.zeros(n, dtype=bool)  # by original id, as the random baseline draws
    matrix = np.zeros((k, k), dtype=np.int64)
    parts = [pset.load_part(p, verify=False, per_type=False) for p in range(k)]
    for part in parts:
        train[orig_of[np.asarray(part.train_idx)]] = True
    rnd = random_parts(train, k, baseline_seed)[orig_of]  # by new id
    rnd_cut = 0
    for part in parts:
        dst_rnd = np.repeat(rnd[part.start:part.stop], np.diff(np.asarray(part.indptr)))
        for a in range(0, part.indices.shape[0], _SLICE):
            row, cut = cut_counts(pset.book, np.asarray(part.indices[a:a + _SLICE]), dst_rnd[a:a + _SLICE], rnd)
            matrix[part.part_id] += row
            rnd_cut += cut
    return matrix, rnd_cut


def set_report(pset: PartitionSet, *, steps: list[StepStat] | None = None,
               baseline_seed: int = BASELINE_SEED, notes: list[str] | None = None,
               from_parts: bool = False) -> PartitionReport:
    """The report of :func:`quality_report` (without the remote-share estimate) computed
    from a written set alone: for a set whose graph no process holds.

    Per-part counts, the cut, the cut matrix and the random baseline's cut (the same random
    assignment as :func:`quality_report`) come from ``meta.json``, so no part's file is read
    (a set on object storage stays there). A set written before the meta carried the last
    two, another ``baseline_seed``, or ``from_parts`` (a check of the meta) has them counted
    from each part's in-neighbour ids, read in slices (memory ``O(N)`` plus one slice).
    """
    m, k, n = pset.meta, pset.num_parts, pset.num_nodes
    if (not from_parts and m.cut_matrix is not None and m.random_edge_cut is not None
            and baseline_seed == BASELINE_SEED):
        matrix, rnd_cut = np.asarray(m.cut_matrix, dtype=np.int64), m.random_edge_cut
    else:
        matrix, rnd_cut = _cuts_from_parts(pset, baseline_seed)
    counts = {f: np.array([getattr(c, f) for c in m.parts], dtype=np.int64) for f in METRICS}
    part_stats = [PartStats(**{f: int(counts[f][p]) for f in METRICS}, cut_edges=m.parts[p].cut_edges,
                            replication=m.parts[p].halo / max(m.parts[p].nodes, 1)) for p in range(k)]
    e = max(m.num_edges, 1)
    return PartitionReport(
        graph_name=m.graph_name, graph_hash=m.graph_hash, method=m.method, num_parts=k,
        num_nodes=n, num_edges=m.num_edges, edge_cut=m.edge_cut, edge_cut_fraction=m.edge_cut / e,
        random_edge_cut=rnd_cut, random_edge_cut_fraction=rnd_cut / e,
        random_expected_fraction=1.0 - 1.0 / k,
        cut_vs_random=(m.edge_cut / rnd_cut) if rnd_cut else (0.0 if m.edge_cut == 0 else float("inf")),
        parts=part_stats,
        imbalance={f: _imbalance(counts[f]) for f in METRICS}
        | _type_imbalance(pset.node_types(), pset.book.owner(np.arange(n)), k,
                          tuple(m.node_types.names) if m.node_types is not None else ()),
        cut_matrix=matrix.tolist(), steps=list(steps if steps is not None else m.steps),
        partition_path=pset.location,
        notes=[*(notes or []), "computed from the partition set; no remote-share "
               "estimate (it needs the whole graph)"])


def read_report(path: str | Path) -> tuple[PartitionReport, list[PartitionReport]]:
    """The report and the compared reports of a ``partition.json`` that :func:`write_report`
    wrote (to draw its ``partition.png`` later)."""
    body = json.loads(Path(path).read_text())
    compare = [PartitionReport.model_validate(r) for r in body.pop("compare", [])]
    return PartitionReport.model_validate(body), compare


def write_report(report: PartitionReport, out_dir: str | Path, *,
                 compare: list[PartitionReport] | None = None, plot: bool = True) -> dict[str, Path]:
    """Write ``partition.json`` (the report, plus ``compare``: other methods' reports) and
    ``partition.png`` into ``out_dir`` (created if needed). Returns the paths written."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        body = report.model_dump(mode="json")
        body["compare"] = [r.model_dump(mode="json") for r in compare or []]
        json_path = out / "partition.json"
        json_path.write_text(json.dumps(body, indent=1) + "\n")
    except OSError as e:
        raise PartitionError(f"out_dir={str(out)!r}: cannot write the partition report "
                             f"({e.strerror or e}); choose a writable directory") from None
    written = {"json": json_path}
    if plot:
        written["png"] = report.plot(out / "partition.png", compare=compare)
    return written
