"""Partitioning a typed graph, and the quality of the result per type and per relation.

:func:`assign_hetero_parts` works on the homogenised graph
(:meth:`~partition.hetero_graph.HeteroGraph.homogenise`: all types in one id space, all
relations in one CSR), the approach DistDGL takes, and runs the homogeneous partitioner
on it (:func:`~partition.methods.assign_parts`, every method) with the types as id
ranges, so a typed graph and its training graph
(:func:`gnntrain.data.hetero.to_training_graph`) get the same parts. Each node type with
enough nodes to balance (:func:`~partition.balance.balanced_types`, with
``balance_node_types``) is a constraint of its own beside all nodes, the target type's
training nodes (``balance_train``) and in-edges over all relations (``balance_edges``);
``random`` deals each (type, training or not) stratum round-robin.

:func:`hetero_quality_report` judges any assignment: per relation the stored edges and
the cut ones (source and destination owned by different parts); per type the nodes and
the halo (distinct remote in-neighbours of that type, over all relations) of each part
and their imbalance (max / mean); the training nodes per part.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from partition.config import PartitionConfig
from partition.errors import PartitionError
from partition.graph import Graph
from partition.hetero_graph import EdgeType, HeteroGraph
from partition.methods import assign_parts
from partition.steps import StepRecorder

__all__ = ["HeteroPartitionReport", "RelationQuality", "TypeQuality", "assign_hetero_parts",
           "hetero_quality_report", "relation_key"]


def relation_key(et: EdgeType) -> str:
    """``src___rel___dst``: the name of a relation in files and reports (OGB-MAG's form)."""
    return "___".join(et)


def assign_hetero_parts(graph: HeteroGraph, cfg: PartitionConfig, *, steps: StepRecorder | None = None,
                        training: Graph | None = None) -> dict[str, np.ndarray]:
    """Part of every node of every type (int64 ``[num_nodes[t]]``, original type-local ids).

    ``training``: ``graph``'s training graph (:func:`gnntrain.data.hetero.to_training_graph`)
    when the caller holds it; its CSR is the homogenised one, so it is partitioned as it
    stands."""
    rec = steps if steps is not None else StepRecorder()
    if training is None:
        with rec("homogenise"):
            hom = graph.homogenise()
            n = hom.num_nodes
            base = int(hom.type_offsets[hom.node_types.index(graph.target)])
            training = Graph(indptr=hom.indptr, indices=hom.indices, x=np.empty((n, 0), np.float32),
                             y=np.zeros(n, np.int64), train_idx=graph.train_idx + base,
                             val_idx=np.empty(0, np.int64), test_idx=np.empty(0, np.int64), num_classes=1,
                             name=graph.name, node_type_names=tuple(hom.node_types),
                             node_type_offsets=tuple(int(o) for o in hom.type_offsets))
    parts = assign_parts(training, cfg, steps=rec)
    off = training.node_type_offsets
    return {t: parts[off[i]:off[i + 1]] for i, t in enumerate(training.node_type_names)}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TypeQuality(_Model):
    """One node type: nodes and halo per part, and their imbalance (max / mean)."""

    nodes: list[int]
    halo: list[int]
    imbalance: float
    halo_imbalance: float
    replication: float


class RelationQuality(_Model):
    """One relation: stored edges, cut edges (ends in different parts) and the cut share."""

    edges: int
    cut_edges: int
    cut_fraction: float


class HeteroPartitionReport(_Model):
    """The quality of one assignment of a typed graph (see module docstring)."""

    graph_name: str
    method: str
    num_parts: int
    target: str
    train: list[int]
    train_imbalance: float
    edge_cut: int
    edge_cut_fraction: float
    types: dict[str, TypeQuality]
    relations: dict[str, RelationQuality]

    def to_json(self, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent)

    def print(self, console: Any = None) -> None:
        """Readable tables on the terminal (rich): per type, per relation."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        k = self.num_parts
        console.print(f"[bold]{self.graph_name}[/bold] ({self.method}, k={k}): edge cut "
                      f"{self.edge_cut} ({self.edge_cut_fraction:.1%}); training nodes of "
                      f"{self.target!r} per part {self.train} (imbalance {self.train_imbalance:.3f})")
        types = Table(title="per node type")
        for col in ("type", "nodes per part", "imbalance", "halo per part", "replication"):
            types.add_column(col)
        for t, q in self.types.items():
            types.add_row(t, str(q.nodes), f"{q.imbalance:.3f}", str(q.halo), f"{q.replication:.3f}")
        rels = Table(title="per relation")
        for col in ("relation", "edges", "cut edges", "cut fraction"):
            rels.add_column(col)
        for r, rq in self.relations.items():
            rels.add_row(r, str(rq.edges), str(rq.cut_edges), f"{rq.cut_fraction:.1%}")
        console.print(types)
        console.print(rels)


def _imbalance(values: np.ndarray) -> float:
    mean = float(values.mean()) if values.size else 0.0
    return float(values.max()) / mean if mean > 0 else 1.0


def hetero_quality_report(graph: HeteroGraph, parts: dict[str, np.ndarray], *, num_parts: int,
                          method: str = "?") -> HeteroPartitionReport:
    """Per-type and per-relation quality of ``parts`` (original type-local ids)."""
    k = num_parts
    for t in graph.node_types:
        p = parts.get(t)
        if p is None or p.shape != (graph.num_nodes[t],) or (p.size and (p.min() < 0 or p.max() >= k)):
            raise PartitionError(f"parts[{t!r}]: expected {graph.num_nodes[t]} part ids in [0, {k})")
    rels: dict[str, RelationQuality] = {}
    remote_keys: dict[str, list[np.ndarray]] = {t: [] for t in graph.node_types}
    for et, csr in graph.relations.items():
        s, _, d = et
        src, dst = csr.edges()
        ps, pd = parts[s][src], parts[d][dst]
        remote = ps != pd
        cut = int(remote.sum())
        rels[relation_key(et)] = RelationQuality(edges=csr.num_edges, cut_edges=cut,
                                                 cut_fraction=cut / max(csr.num_edges, 1))
        remote_keys[s].append(pd[remote] * np.int64(graph.num_nodes[s]) + src[remote])
    types = {}
    for t in graph.node_types:
        nodes = np.bincount(parts[t], minlength=k)
        keys = np.unique(np.concatenate(remote_keys[t])) if remote_keys[t] else np.empty(0, np.int64)
        halo = np.bincount(keys // graph.num_nodes[t], minlength=k)
        types[t] = TypeQuality(nodes=nodes.tolist(), halo=halo.tolist(), imbalance=_imbalance(nodes),
                               halo_imbalance=_imbalance(halo),
                               replication=float(halo.sum()) / graph.num_nodes[t])
    train = np.bincount(parts[graph.target][graph.train_idx], minlength=k)
    total_cut = sum(r.cut_edges for r in rels.values())
    return HeteroPartitionReport(
        graph_name=graph.name, method=method, num_parts=k, target=graph.target, train=train.tolist(),
        train_imbalance=_imbalance(train), edge_cut=total_cut,
        edge_cut_fraction=total_cut / max(graph.total_edges, 1), types=types, relations=rels)
