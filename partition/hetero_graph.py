"""The canonical typed (heterogeneous) graph: node types, relations, per-relation CSRs.

Contract (checked by :meth:`HeteroGraph.validate`, which every loader calls):

* ``num_nodes``: node type -> count (>= 1). Ids are **type-local**: node ``i`` of type
  ``t`` is ``(t, i)`` with ``0 <= i < num_nodes[t]``.
* ``relations``: canonical edge type ``(src_type, relation, dst_type)`` ->
  :class:`RelationCSR`, the CSR of **in-neighbours** of the destination type:
  ``indices[indptr[v]:indptr[v + 1]]`` are the ``src_type`` ids ``u`` of the edges
  ``(src_type, u) -> (dst_type, v)``. ``indptr`` is int64 ``[num_nodes[dst] + 1]``.
* ``x``: node type -> float32 ``[num_nodes[t], F_t]`` (finite); types without an entry are
  featureless (a model gives them learnable embeddings or a structural fallback).
* ``target``: the labelled type; ``y`` int64 ``[num_nodes[target]]`` in
  ``[0, num_classes)``; ``train_idx`` / ``val_idx`` / ``test_idx`` are sorted, disjoint
  ids of the target type.

A homogeneous :class:`~partition.graph.Graph` is the one-type, one-relation case
(:meth:`HeteroGraph.from_graph`); it keeps its own type and partition format.

How the sampler will consume this (design for the typed sampler, not built here):
a seed batch is a set of target-type ids. Each hop keeps a frontier per node type; for
every relation ``(s, r, d)`` whose destination type ``d`` has frontier nodes, it samples
``fanout[(s, r, d)]`` in-neighbours from that relation's own ``indptr``/``indices`` (the
same uniform kernel as the homogeneous sampler: the per-relation CSR *is* a homogeneous
CSR whose rows are ``d`` nodes and whose values are ``s`` ids), and the sampled sources
join the frontier of type ``s``. A block per layer then holds one bipartite edge list per
relation, re-indexed per type. In a partition set each relation's CSR is stored per part
over the owned ``d`` rows with ``s`` ids in the new type-local numbering, so the owner of
a sampled source is ``books[s].owner(ids)`` (:class:`~partition.hetero_book.HeteroPartitionBook`)
and one request per owner per hop can carry every relation's frontier.

Imports numpy only (bottom layer: ``partition`` <- ``samplers`` <- ``gnntrain``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from partition.graph import Graph, GraphError, _check_dtype, csr_from_edges
from partition.labels import dense_class_ids

__all__ = ["EdgeType", "HeteroGraph", "Homogenised", "RelationCSR", "from_training_graph",
           "relation_csr", "relation_name", "reverse_name"]

EdgeType = tuple[str, str, str]
"""``(src_type, relation, dst_type)``, PyG's canonical edge type."""

REVERSE_PREFIX = "rev_"


def relation_name(et: EdgeType) -> str:
    """The name a relation goes by in configs, reports and a training graph's
    ``edge_type_names``: ``"src:relation:dst"``."""
    return ":".join(et)


def reverse_name(rel: str) -> str:
    """The name :meth:`HeteroGraph.add_reverse` gives the reverse of ``rel`` (PyG's
    ``ToUndirected`` convention: ``rev_`` prefix)."""
    return REVERSE_PREFIX + rel


@dataclass(frozen=True, eq=False)
class RelationCSR:
    """In-neighbour CSR of one relation: rows are destination ids, values source ids."""

    indptr: np.ndarray
    indices: np.ndarray

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    def in_degrees(self) -> np.ndarray:
        return np.diff(self.indptr)

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` int64 arrays, one entry per stored edge, in CSR order."""
        dst = np.repeat(np.arange(self.indptr.shape[0] - 1, dtype=np.int64), self.in_degrees())
        return self.indices, dst


def relation_csr(src: np.ndarray, dst: np.ndarray, n_src: int, n_dst: int, *,
                 edge_type: EdgeType, dedup: bool = True) -> RelationCSR:
    """The :class:`RelationCSR` of the edges ``src -> dst`` of ``edge_type``.

    Ids are checked against their own type's count (the message names the relation, the
    end, the id and the range allowed); the CSR is built by
    :func:`~partition.graph.csr_from_edges` over ``max(n_src, n_dst)`` ids and cut to
    ``n_dst`` rows (rows past ``n_dst`` are empty since every ``dst < n_dst``).
    """
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    if src.shape != dst.shape:
        raise GraphError(f"relation {edge_type}: {src.size} sources but {dst.size} destinations")
    for end, ids, n, t in (("source", src, n_src, edge_type[0]), ("destination", dst, n_dst, edge_type[2])):
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            raise GraphError(f"relation {edge_type}: {end} id {bad} is outside "
                             f"[0, num_nodes[{t!r}]={n}); ids are 0-based within their node type")
    indptr, indices = csr_from_edges(src, dst, max(n_src, n_dst, 1), dedup=dedup)
    return RelationCSR(indptr=np.ascontiguousarray(indptr[:n_dst + 1]), indices=indices)


@dataclass(frozen=True, eq=False)
class Homogenised:
    """The typed graph as one homogeneous CSR: node ``(t, i)`` is ``type_offsets[t] + i``
    (types in ``node_types`` order), every relation's edges in one in-neighbour CSR.

    ``node_type`` (int64 ``[N]``) is each node's type index and ``edge_rel`` (int64 ``[E]``,
    aligned with ``indices``) each edge's relation index into ``edge_types``."""

    node_types: list[str]
    edge_types: list[EdgeType]
    type_offsets: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    node_type: np.ndarray
    edge_rel: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.type_offsets[-1])


@dataclass(frozen=True, eq=False, kw_only=True)
class HeteroGraph:
    """A typed node-classification graph (see the module docstring for the contract)."""

    num_nodes: dict[str, int]
    relations: dict[EdgeType, RelationCSR]
    x: dict[str, np.ndarray]
    target: str
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    num_classes: int
    name: str = "hetero"
    _hash: list[str] = field(default_factory=list, repr=False)

    # ---- construction ----------------------------------------------------------------
    @classmethod
    def from_edges(cls, *, num_nodes: Mapping[str, int],
                   edges: Mapping[EdgeType, tuple[np.ndarray, np.ndarray]],
                   x: Mapping[str, np.ndarray] | None = None, target: str, y: np.ndarray,
                   splits: Mapping[str, np.ndarray], num_classes: int | None = None,
                   name: str = "hetero", dedup: bool = True, add_reverse: bool = False) -> HeteroGraph:
        """Build and validate from ``(src, dst)`` arrays of type-local ids per relation.

        ``splits`` holds ``train``/``val``/``test`` target ids (any order; sorted here).
        ``num_classes`` defaults to the number of distinct labels, which are then made
        ``0..C-1`` (:func:`partition.labels.dense_class_ids`: 1-based or gapped ids are
        remapped in sorted order, with a warning).
        """
        counts = {t: int(n) for t, n in num_nodes.items()}
        _check_types(counts, list(edges), list((x or {}).keys()), target)
        rels = {et: relation_csr(s, d, counts[et[0]], counts[et[2]], edge_type=et, dedup=dedup)
                for et, (s, d) in edges.items()}
        yy = np.asarray(y)
        if yy.dtype.kind == "f":
            if not np.isfinite(yy).all():
                raise GraphError(f"y: target {target!r} has a NaN label; every {target!r} node "
                                 "needs a label in [0, num_classes)")
            if np.any(yy != np.round(yy)):
                raise GraphError("y: labels must be whole numbers")
        yy = yy.astype(np.int64).ravel()
        # ids stored 1-based or with gaps become 0..C-1 (with a warning) unless num_classes is given
        ids = dense_class_ids(yy, yy >= 0, num_classes, f"target {target!r}")
        yy, nc = ids.y, ids.num_classes
        missing = {"train", "val", "test"} - set(splits)
        extra = set(splits) - {"train", "val", "test"}
        if missing or extra:
            raise GraphError(f"splits: expected keys train, val, test; missing {sorted(missing)}, "
                             f"unknown {sorted(extra)}")
        sp = {k: np.sort(np.asarray(v, dtype=np.int64).ravel()) for k, v in splits.items()}
        g = cls(num_nodes=counts, relations=rels,
                x={t: np.ascontiguousarray(a, dtype=np.float32) for t, a in (x or {}).items()},
                target=target, y=yy, train_idx=sp["train"], val_idx=sp["val"], test_idx=sp["test"],
                num_classes=nc, name=name)
        return (g.add_reverse() if add_reverse else g).validate()

    @classmethod
    def from_graph(cls, graph: Graph, node_type: str = "node", relation: str = "to") -> HeteroGraph:
        """A homogeneous graph as the one-type, one-relation typed graph (arrays shared)."""
        et = (node_type, relation, node_type)
        return cls(num_nodes={node_type: graph.num_nodes},
                   relations={et: RelationCSR(graph.indptr, graph.indices)}, x={node_type: graph.x},
                   target=node_type, y=graph.y, train_idx=graph.train_idx, val_idx=graph.val_idx,
                   test_idx=graph.test_idx, num_classes=graph.num_classes, name=graph.name)

    def add_reverse(self) -> HeteroGraph:
        """A new graph with, for every relation ``(s, r, d)``, its reverse ``(d, rev_r, s)``
        (skipped where that edge type already exists, e.g. a symmetric ``(t, r, t)``
        relation stored both ways is not doubled when its reverse is already present)."""
        rels = dict(self.relations)
        for (s, r, d), csr in self.relations.items():
            rev = (d, reverse_name(r), s)
            if rev in rels or r.startswith(REVERSE_PREFIX) and (d, r[len(REVERSE_PREFIX):], s) in rels:
                continue
            src, dst = csr.edges()
            rels[rev] = relation_csr(dst, src, self.num_nodes[d], self.num_nodes[s], edge_type=rev,
                                     dedup=False)
        return replace(self, relations=rels, _hash=[])

    # ---- figures -----------------------------------------------------------------------
    @property
    def node_types(self) -> list[str]:
        return list(self.num_nodes)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.relations)

    @property
    def total_nodes(self) -> int:
        return int(sum(self.num_nodes.values()))

    @property
    def total_edges(self) -> int:
        return int(sum(c.num_edges for c in self.relations.values()))

    def num_features(self, node_type: str) -> int:
        """Feature width of ``node_type`` (0 for a featureless type)."""
        self._check_type("node_type", node_type)
        a = self.x.get(node_type)
        return 0 if a is None else int(a.shape[1])

    def split_idx(self, split: str) -> np.ndarray:
        if split not in ("train", "val", "test"):
            raise GraphError(f"split={split!r}: expected one of 'train', 'val', 'test'")
        return {"train": self.train_idx, "val": self.val_idx, "test": self.test_idx}[split]

    def mask(self, split: str) -> np.ndarray:
        """Boolean ``[num_nodes[target]]`` mask of ``split``."""
        out = np.zeros(self.num_nodes[self.target], dtype=bool)
        out[self.split_idx(split)] = True
        return out

    def homogenise(self) -> Homogenised:
        """All types in one id space and all relations in one CSR (for partitioners and
        quality reports). Parallel edges of different relations are all kept."""
        types = self.node_types
        offsets = np.zeros(len(types) + 1, dtype=np.int64)
        np.cumsum([self.num_nodes[t] for t in types], out=offsets[1:])
        base = {t: int(offsets[i]) for i, t in enumerate(types)}
        ets = self.edge_types
        n = int(offsets[-1])
        src_parts, dst_parts, rel_parts = [], [], []
        for r, (s, _, d) in enumerate(ets):
            src, dst = self.relations[(s, _, d)].edges()
            src_parts.append(src + base[s])
            dst_parts.append(dst + base[d])
            rel_parts.append(np.full(src.shape[0], r, dtype=np.int64))
        src_all = np.concatenate(src_parts) if src_parts else np.empty(0, np.int64)
        dst_all = np.concatenate(dst_parts) if dst_parts else np.empty(0, np.int64)
        rel_all = np.concatenate(rel_parts) if rel_parts else np.empty(0, np.int64)
        order = np.argsort(dst_all, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst_all, minlength=n), out=indptr[1:])
        node_type = np.repeat(np.arange(len(types), dtype=np.int64), np.diff(offsets))
        return Homogenised(node_types=types, edge_types=ets, type_offsets=offsets, indptr=indptr,
                           indices=src_all[order], node_type=node_type, edge_rel=rel_all[order])

    def content_hash(self) -> str:
        """SHA-256 (hex, 16 chars) of types, counts, every relation, features, labels, splits."""
        if not self._hash:
            h = hashlib.sha256()
            h.update(repr((sorted(self.num_nodes.items()), self.target, self.num_classes)).encode())
            arrays: list[tuple[str, np.ndarray]] = []
            for et in sorted(self.relations):
                arrays += [(f"{et}.indptr", self.relations[et].indptr),
                           (f"{et}.indices", self.relations[et].indices)]
            arrays += [(f"x.{t}", self.x[t]) for t in sorted(self.x)]
            arrays += [("y", self.y), ("train", self.train_idx), ("val", self.val_idx),
                       ("test", self.test_idx)]
            for label, arr in arrays:
                a = np.ascontiguousarray(arr)
                h.update(str((label, a.dtype.str, a.shape)).encode())
                h.update(memoryview(a.reshape(-1)).cast("B") if a.size else b"")  # type: ignore[arg-type]
            self._hash.append(h.hexdigest()[:16])
        return self._hash[0]

    # ---- validation ----------------------------------------------------------------------
    def _check_type(self, what: str, t: str) -> None:
        if t not in self.num_nodes:
            raise GraphError(f"{what}={t!r}: not a node type of this graph; node types: "
                             f"{sorted(self.num_nodes)}")

    def validate(self) -> HeteroGraph:
        """Check the contract per type and per relation; raise :class:`GraphError` naming the
        field, the value and what is allowed."""
        _check_types(self.num_nodes, list(self.relations), list(self.x), self.target)
        for t, n in self.num_nodes.items():
            if not isinstance(n, int | np.integer) or n < 1:
                raise GraphError(f"num_nodes[{t!r}]={n!r}: every node type needs at least one node")
        if not self.relations:
            raise GraphError("relations: a typed graph needs at least one relation")
        for et, csr in self.relations.items():
            s, _, d = et
            _check_dtype(f"relations[{et}].indptr", csr.indptr, np.int64, 1)
            _check_dtype(f"relations[{et}].indices", csr.indices, np.int64, 1)
            if csr.indptr.shape[0] != self.num_nodes[d] + 1:
                raise GraphError(f"relations[{et}].indptr has {csr.indptr.shape[0]} entries, expected "
                                 f"num_nodes[{d!r}] + 1 = {self.num_nodes[d] + 1} (one row per "
                                 "destination node)")
            if csr.indptr[0] != 0 or csr.indptr[-1] != csr.indices.shape[0] or np.any(np.diff(csr.indptr) < 0):
                raise GraphError(f"relations[{et}].indptr: must start at 0, never decrease and end at "
                                 f"len(indices)={csr.indices.shape[0]}")
            if csr.indices.size and (csr.indices.min() < 0 or csr.indices.max() >= self.num_nodes[s]):
                bad = int(csr.indices.min()) if csr.indices.min() < 0 else int(csr.indices.max())
                raise GraphError(f"relation {et}: source id {bad} is outside [0, num_nodes[{s!r}]="
                                 f"{self.num_nodes[s]})")
        for t, a in self.x.items():
            _check_dtype(f"x[{t!r}]", a, np.float32, 2)
            if a.shape[0] != self.num_nodes[t]:
                raise GraphError(f"x[{t!r}] has {a.shape[0]} rows, expected num_nodes[{t!r}]="
                                 f"{self.num_nodes[t]}")
            if not np.isfinite(a).all():
                bad = int(np.argwhere(~np.isfinite(a))[0, 0])
                raise GraphError(f"x[{t!r}]: node {bad} has a NaN or Inf feature; features must be finite")
        self._validate_labels()
        return self

    def _validate_labels(self) -> None:
        n = self.num_nodes[self.target]
        _check_dtype("y", self.y, np.int64, 1)
        if self.y.shape[0] != n:
            raise GraphError(f"y has {self.y.shape[0]} labels, expected num_nodes[{self.target!r}]={n} "
                             f"(labels are on the target type {self.target!r})")
        if self.num_classes < 1:
            raise GraphError(f"num_classes={self.num_classes}: must be >= 1")
        if self.y.size and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            bad = int(self.y.min()) if self.y.min() < 0 else int(self.y.max())
            raise GraphError(f"y: label {bad} of type {self.target!r} is outside "
                             f"[0, num_classes={self.num_classes})")
        seen = np.zeros(n, dtype=np.int8)
        for split in ("train", "val", "test"):
            idx = self.split_idx(split)
            _check_dtype(f"{split}_idx", idx, np.int64, 1)
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
                raise GraphError(f"{split}_idx: id {bad} is outside [0, num_nodes[{self.target!r}]={n}) "
                                 f"(splits hold ids of the target type {self.target!r})")
            if idx.size and np.any(np.diff(idx) <= 0):
                raise GraphError(f"{split}_idx: must be sorted without repeats")
            if np.any(seen[idx]):
                raise GraphError(f"{split}_idx overlaps an earlier split at {self.target!r} node "
                                 f"{int(idx[seen[idx] > 0][0])}; train/val/test must be disjoint")
            seen[idx] = 1
        if self.train_idx.size == 0:
            raise GraphError("train_idx is empty: at least one training node is needed")


def _check_types(num_nodes: Mapping[str, int], edge_types: list[EdgeType], featured: list[str],
                 target: str) -> None:
    """Every type named by a relation, a feature table or the target is a declared type."""
    known = sorted(num_nodes)
    for t in num_nodes:
        if not isinstance(t, str) or not t:
            raise GraphError(f"num_nodes: node type {t!r} must be a non-empty string")
    if target not in num_nodes:
        raise GraphError(f"target={target!r}: not a node type; node types: {known}")
    for et in edge_types:
        if not (isinstance(et, tuple) and len(et) == 3):
            raise GraphError(f"relation {et!r}: expected (src_type, relation, dst_type)")
        for end, t in (("source", et[0]), ("destination", et[2])):
            if t not in num_nodes:
                raise GraphError(f"relation {et}: {end} type {t!r} is not a node type; node types: {known}")
    for t in featured:
        if t not in num_nodes:
            raise GraphError(f"x[{t!r}]: not a node type; node types: {known}")


def from_training_graph(graph: Graph) -> HeteroGraph:
    """The typed graph a training graph (:func:`gnntrain.data.hetero.to_training_graph`)
    was made from: each type's id range, each relation (named by :func:`relation_name`)
    with its edges (``edge_rel``) as its own
    CSR in stored order, each type's features cut to ``node_type_features`` (to the
    columns its rows use when the widths are not recorded), the target type's labels and
    splits. A graph from ``to_training_graph`` comes back with the same content hash.
    Raises :class:`GraphError` for a graph without types, relations or one labelled type."""
    from partition.feature_rows import used_width

    names, off = graph.node_type_names, graph.node_type_offsets
    if not off or graph.edge_rel is None:
        raise GraphError(f"graph {graph.name!r} has no node types or no edge_rel: not a typed training graph")
    parsed = [tuple(n.split(":")) for n in graph.edge_type_names]
    bad = [n for n, et in zip(graph.edge_type_names, parsed, strict=True) if len(et) != 3]
    if bad:
        raise GraphError(f"edge_type_names: {bad[0]!r} is not 'src:relation:dst'")
    node_type = graph.node_types()
    assert node_type is not None
    base = {t: int(off[i]) for i, t in enumerate(names)}
    counts = {t: int(off[i + 1] - off[i]) for i, t in enumerate(names)}
    labelled = np.unique(node_type[np.concatenate([graph.train_idx, graph.val_idx, graph.test_idx])])
    if labelled.shape[0] != 1:
        raise GraphError(f"graph {graph.name!r}: the split nodes are of types "
                         f"{[names[int(i)] for i in labelled]}; a typed graph has one target type")
    target = names[int(labelled[0])]
    dst_all = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), graph.in_degrees())
    relations: dict[EdgeType, RelationCSR] = {}
    for r, (s, rel, d) in enumerate(parsed):
        if s not in counts or d not in counts:
            raise GraphError(f"edge_type_names[{r}]={graph.edge_type_names[r]!r}: type not in {list(names)}")
        keep = graph.edge_rel == r
        dst = dst_all[keep] - base[d]
        indptr = np.zeros(counts[d] + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=counts[d]), out=indptr[1:])
        relations[(s, rel, d)] = RelationCSR(indptr, graph.indices[keep] - base[s])
    x = {}
    for i, t in enumerate(names):
        rows = graph.x[off[i]:off[i + 1]]
        width = graph.node_type_features[i] if graph.node_type_features else used_width(np.asarray(rows))
        if width:
            x[t] = np.ascontiguousarray(rows[:, :width], dtype=np.float32)
    lo, hi = base[target], base[target] + counts[target]
    return HeteroGraph(num_nodes=counts, relations=relations, x=x, target=target, y=graph.y[lo:hi],
                       train_idx=graph.train_idx - lo, val_idx=graph.val_idx - lo,
                       test_idx=graph.test_idx - lo, num_classes=graph.num_classes,
                       name=graph.name).validate()
