"""The canonical in-memory graph every loader produces and every package consumes.

Contract (checked by :meth:`Graph.validate`, which every loader calls):

* ``indptr`` int64 ``[N + 1]`` and ``indices`` int64 ``[E]`` are the CSR of
  **in-neighbours**: ``indices[indptr[v]:indptr[v + 1]]`` are the sources ``u`` of
  the edges ``u -> v``. Message passing aggregates over exactly these rows, and a
  sampler asks for them.
* ``x`` float32 ``[N, F]`` (finite), ``y`` int64 ``[N]`` in ``[0, num_classes)``.
* ``train_idx`` / ``val_idx`` / ``test_idx`` are sorted, disjoint int64 node ids.
* ``train_weight`` (optional) int64 ``[N]``, non-negative: the training examples each
  node brings to the part that owns it, which partitioners balance (the ``train``
  constraint). None means one per training node (node classification); a link task
  sets each node's training in-degree (the training edges its owner trains on).

It sits at the bottom of the layers (``partition`` <- ``samplers`` <- ``gnntrain``) and
imports numpy only, so every package may use it without pulling in anything heavy.
``csr_from_edges`` builds the CSR every loader and test graph starts from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np


class GraphError(ValueError):
    """A graph or one of its arrays breaks the canonical-graph contract."""


@dataclass(frozen=True, eq=False, kw_only=True)
class Graph:
    """A node-classification graph in CSR-of-in-neighbours form.

    A typed graph made homogeneous (:func:`gnntrain.data.hetero.to_training_graph`) keeps
    its node types as contiguous id ranges: type ``node_type_names[t]`` is nodes
    ``node_type_offsets[t]:node_type_offsets[t + 1]`` (empty for an untyped graph), and
    its relations as a per-edge id: ``edge_rel`` (int64 ``[E]``, aligned with ``indices``)
    is each edge's index into ``edge_type_names`` (``"src:relation:dst"``), so two
    relations between the same pair of types stay apart (None for an untyped graph).
    ``node_type_features[t]`` is type ``t``'s own feature width (its columns of the
    zero-padded ``x``; 0 for a featureless type; empty when not known), so the typed graph
    is recovered exactly (:func:`~partition.hetero_graph.from_training_graph`)."""

    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    num_classes: int
    name: str = "graph"
    node_type_names: tuple[str, ...] = ()
    node_type_offsets: tuple[int, ...] = ()
    train_weight: np.ndarray | None = None
    edge_rel: np.ndarray | None = None
    edge_type_names: tuple[str, ...] = ()
    node_type_features: tuple[int, ...] = ()
    _hash: list[str] = field(default_factory=list, repr=False)

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def node_types(self) -> np.ndarray | None:
        """Type index of every node (int64 ``[N]``), None for an untyped graph."""
        return node_types_of(np.arange(self.num_nodes), self.node_type_offsets)

    def in_degrees(self) -> np.ndarray:
        """In-degree of every node, int64 ``[N]``."""
        return np.diff(self.indptr)

    def edge_index(self) -> np.ndarray:
        """``[2, E]`` int64 array of (source, destination) pairs, PyG's layout."""
        dst = np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.in_degrees())
        return np.stack([self.indices, dst])

    def mask(self, split: str) -> np.ndarray:
        """Boolean ``[N]`` mask of ``split`` (``train``, ``val`` or ``test``)."""
        out = np.zeros(self.num_nodes, dtype=bool)
        out[self.split_idx(split)] = True
        return out

    def train_weights(self) -> np.ndarray:
        """Training examples per node, int64 ``[N]``: ``train_weight`` when set, else 1
        per training node."""
        if self.train_weight is not None:
            return self.train_weight
        return self.mask("train").astype(np.int64)

    def with_train_weight(self, weight: np.ndarray) -> Graph:
        """This graph with ``train_weight`` set (a new graph, validated, hashed afresh)."""
        return replace(self, train_weight=np.ascontiguousarray(weight, dtype=np.int64),
                       _hash=[]).validate()

    def split_idx(self, split: str) -> np.ndarray:
        if split not in ("train", "val", "test"):
            raise GraphError(f"split={split!r}: expected one of 'train', 'val', 'test'")
        return {"train": self.train_idx, "val": self.val_idx, "test": self.test_idx}[split]

    def content_hash(self) -> str:
        """SHA-256 (hex, 16 chars) of the structure, features, labels and splits.

        Partition sets are keyed by it: a changed graph never reuses a stored set.
        """
        if not self._hash:
            h = hashlib.sha256()
            for arr in (self.indptr, self.indices, self.x, self.y,
                        self.train_idx, self.val_idx, self.test_idx):
                a = np.ascontiguousarray(arr)
                h.update(str((a.dtype.str, a.shape)).encode())
                h.update(memoryview(a.reshape(-1)).cast("B") if a.size else b"")  # type: ignore[arg-type]  # no copy
            h.update(str(self.num_classes).encode())
            if self.node_type_offsets:  # typed: the ranges are part of the graph
                h.update(repr((self.node_type_names, self.node_type_offsets)).encode())
            if self.train_weight is not None:  # what partitioners balance
                w = np.ascontiguousarray(self.train_weight)
                h.update(b"train_weight")
                h.update(memoryview(w.reshape(-1)).cast("B") if w.size else b"")  # type: ignore[arg-type]
            if self.edge_rel is not None:  # typed relations: part of the graph too
                h.update(repr(self.edge_type_names).encode())
                h.update(np.ascontiguousarray(self.edge_rel).tobytes())
            if self.node_type_features:
                h.update(repr(("node_type_features", self.node_type_features)).encode())
            self._hash.append(h.hexdigest()[:16])
        return self._hash[0]

    def validate(self) -> Graph:
        """Check the contract; raise :class:`GraphError` naming the field and value."""
        n = self.num_nodes
        _check_dtype("indptr", self.indptr, np.int64, 1)
        _check_dtype("indices", self.indices, np.int64, 1)
        _check_dtype("x", self.x, np.float32, 2)
        _check_dtype("y", self.y, np.int64, 1)
        if n < 1:
            raise GraphError(f"num_nodes={n}: a graph needs at least one node")
        if self.indptr[0] != 0 or self.indptr[-1] != self.indices.shape[0]:
            raise GraphError(
                f"indptr: must start at 0 and end at len(indices)={self.indices.shape[0]}, "
                f"got {self.indptr[0]}..{self.indptr[-1]}")
        if self.indices.size:
            lo, hi = int(self.indices.min()), int(self.indices.max())
            if lo < 0 or hi >= n:
                bad = lo if lo < 0 else hi
                raise GraphError(f"edge endpoint {bad} is outside [0, num_nodes={n})")
        if self.x.shape[0] != n:
            raise GraphError(f"x has {self.x.shape[0]} feature rows, expected num_nodes={n}")
        if not np.isfinite(self.x).all():
            bad = int(np.argwhere(~np.isfinite(self.x))[0, 0])
            raise GraphError(f"x: node {bad} has a NaN or Inf feature; features must be finite")
        if self.y.shape[0] != n:
            raise GraphError(f"y has {self.y.shape[0]} labels, expected num_nodes={n}")
        if self.num_classes < 1:
            raise GraphError(f"num_classes={self.num_classes}: must be >= 1")
        if self.y.size and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            bad = int(self.y.min()) if self.y.min() < 0 else int(self.y.max())
            raise GraphError(
                f"y: label {bad} is outside [0, num_classes={self.num_classes})")
        seen = np.zeros(n, dtype=np.int8)
        for split in ("train", "val", "test"):
            idx = self.split_idx(split)
            _check_dtype(f"{split}_idx", idx, np.int64, 1)
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise GraphError(f"{split}_idx: node id outside [0, num_nodes={n})")
            if idx.size and np.any(np.diff(idx) <= 0):
                raise GraphError(f"{split}_idx: must be sorted without repeats")
            if np.any(seen[idx]):
                raise GraphError(
                    f"{split}_idx overlaps an earlier split at node {int(idx[seen[idx] > 0][0])};"
                    " train/val/test must be disjoint")
            seen[idx] = 1
        if self.train_idx.size == 0:
            raise GraphError("train_idx is empty: at least one training node is needed")
        w = self.train_weight
        if w is not None:
            _check_dtype("train_weight", w, np.int64, 1)
            if w.shape[0] != n:
                raise GraphError(f"train_weight has {w.shape[0]} entries, expected num_nodes={n}")
            if w.size and int(w.min()) < 0:
                raise GraphError(f"train_weight: node {int(np.argmin(w))} has weight {int(w.min())}; "
                                 "weights must be >= 0")
        off = self.node_type_offsets
        if off and (len(off) != len(self.node_type_names) + 1 or off[0] != 0 or off[-1] != n
                    or any(b < a for a, b in zip(off, off[1:], strict=False))):
            raise GraphError(f"node_type_offsets={list(off)}: expected {len(self.node_type_names) + 1} "
                             f"non-decreasing offsets from 0 to num_nodes={n}, one range per type "
                             f"{list(self.node_type_names)}")
        widths = self.node_type_features
        if widths and (len(widths) != len(self.node_type_names)
                       or any(not 0 <= w <= self.num_features for w in widths)):
            raise GraphError(f"node_type_features={list(widths)}: expected one width in [0, "
                             f"num_features={self.num_features}] per type {list(self.node_type_names)}")
        if self.edge_rel is not None:
            _check_dtype("edge_rel", self.edge_rel, np.int64, 1)
            r = len(self.edge_type_names)
            if self.edge_rel.shape[0] != self.num_edges:
                raise GraphError(f"edge_rel has {self.edge_rel.shape[0]} entries, expected one per "
                                 f"edge ({self.num_edges})")
            if self.edge_rel.size and (self.edge_rel.min() < 0 or self.edge_rel.max() >= r):
                raise GraphError(f"edge_rel: relation id outside [0, len(edge_type_names)={r}); "
                                 f"edge_type_names={list(self.edge_type_names)}")
        return self


def node_types_of(orig_ids: np.ndarray, offsets: tuple[int, ...] | list[int]) -> np.ndarray | None:
    """Type index of each original node id under contiguous type ranges ``offsets``
    (None when there are none: an untyped graph)."""
    if not offsets:
        return None
    return (np.searchsorted(np.asarray(offsets, dtype=np.int64), np.asarray(orig_ids, dtype=np.int64),
                            side="right") - 1).astype(np.int64)


def _check_dtype(name: str, arr: np.ndarray, dtype: type, ndim: int) -> None:
    if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != ndim:
        got = f"{getattr(arr, 'dtype', type(arr).__name__)} with {getattr(arr, 'ndim', '?')} dims"
        raise GraphError(f"{name}: expected a {ndim}-d {np.dtype(dtype).name} array, got {got}")


def unique_sorted(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` for a 1-d array, by sort and neighbour compare.

    numpy 2.4's ``np.unique`` goes through a hash table first and is ~15x slower on
    tens of millions of distinct int64 keys (25 s vs 1.4 s for 20M here).
    """
    s = np.sort(np.asarray(a).ravel())
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def csr_from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int, *,
                   undirected: bool = False, dedup: bool = True,
                   self_loops: str = "keep") -> tuple[np.ndarray, np.ndarray]:
    """Build the in-neighbour CSR (``indptr``, ``indices``) from edge arrays ``src -> dst``.

    ``undirected`` adds every reverse edge; ``dedup`` drops repeated (src, dst) pairs;
    ``self_loops`` is ``keep``, ``remove`` or ``add`` (exactly one per node). Vectorised:
    one stable sort of E keys, no Python loop over edges.
    """
    if self_loops not in ("keep", "remove", "add"):
        raise GraphError(f"self_loops={self_loops!r}: expected 'keep', 'remove' or 'add'")
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    if src.shape != dst.shape:
        raise GraphError(f"src has {src.size} entries but dst has {dst.size}")
    for name, a in (("source", src), ("destination", dst)):
        if a.size and (a.min() < 0 or a.max() >= num_nodes):
            bad = int(a.min()) if a.min() < 0 else int(a.max())
            raise GraphError(
                f"edge {name} id {bad} is outside [0, num_nodes={num_nodes}); "
                "node ids must be 0-based and below the number of nodes")
    if undirected:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    if self_loops in ("remove", "add"):
        keep = src != dst
        src, dst = src[keep], dst[keep]
    if self_loops == "add":
        loop = np.arange(num_nodes, dtype=np.int64)
        src, dst = np.concatenate([src, loop]), np.concatenate([dst, loop])
    key = dst * np.int64(num_nodes) + src
    key = unique_sorted(key) if dedup else np.sort(key, kind="stable")
    dst_sorted = key // num_nodes
    indices = (key - dst_sorted * num_nodes).astype(np.int64)
    counts = np.bincount(dst_sorted, minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, indices
