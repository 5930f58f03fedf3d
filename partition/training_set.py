"""The partition set a run trains on: :func:`build_training_set` and :func:`open_training_set`.

A homogeneous graph trains on its format-1 set (:mod:`partition.format`). A typed graph
(one from :func:`gnntrain.data.hetero.to_training_graph`) trains on its typed format-2 set
(:mod:`partition.hetero_store`), the same set ``python -m partition`` writes for a typed
config: :class:`TypedTrainingSet` shows it to the runtime as the one graph it trains on.

The homogeneous numbering of a typed set is the book's part-major, type-minor one
(:meth:`~partition.hetero_book.HeteroPartitionBook.to_homogeneous`): part ``p`` owns one
range of ids, and inside it each type's nodes are one range, in new type-local order.
"Original" ids are the training graph's (``type_offset[t] + i`` for node ``(t, i)``).
A loaded part is an ordinary :class:`~partition.store.Part`: each row's in-edges are its
relations' rows one after another in relation order, which is the training graph's own
edge order (:meth:`~partition.hetero_graph.HeteroGraph.homogenise`), each edge carrying
its relation id; features are one table per type (:class:`~partition.feature_rows.TypedRows`);
the halo is every type's halo in the homogeneous numbering. So a one-part typed set
loads as exactly the training graph (tested), and sampling, caches, byte accounting,
checkpoints and prediction are the homogeneous ones.

Both formats come from the same assignment (:func:`~partition.hetero_methods.assign_hetero_parts`
runs :func:`~partition.methods.assign_parts` on the homogenised graph), so a typed graph
partitions alike whichever set it is written to. A typed graph with ``train_weight`` (a
per-node training weight the typed set does not record) trains on a format-1 set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from partition.book import PartitionBook
from partition.config import PartitionConfig
from partition.feature_rows import TypedRows, used_width
from partition.graph import Graph
from partition.hetero_book import HeteroPartitionBook
from partition.hetero_graph import from_training_graph, relation_name
from partition.hetero_methods import relation_key
from partition.hetero_store import (
    TYPED_FORMAT_VERSION,
    HeteroPartitionMeta,
    HeteroPartitionSet,
    build_hetero_partition_set,
    open_hetero_partition_set,
)
from partition.staging import Staged, open_staged
from partition.storage import is_remote
from partition.store import Part, PartitionSet, check_ids, open_partition_set

__all__ = ["TrainingSet", "TypedTrainingSet", "build_training_set", "open_training_set", "trains_typed"]


class TypedTrainingSet:
    """A typed (format-2) set in the homogeneous numbering the runtime trains on.

    Offers what the runtime reads of a :class:`~partition.store.PartitionSet`: ``path``,
    ``location``, ``staged``, ``meta``, ``book``, ``num_parts``, ``num_classes``, ``num_features``, ``reused``,
    :meth:`load_part`, :meth:`global_degrees`, :meth:`node_types`, :meth:`new_id_map`,
    :meth:`new_ids`, :meth:`orig_ids`, :meth:`assignment` and :meth:`check_files`."""

    def __init__(self, typed: HeteroPartitionSet) -> None:
        self.typed = typed
        self.path = typed.path
        self.meta: HeteroPartitionMeta = typed.meta
        self.typed_book: HeteroPartitionBook = typed.book
        self.book: PartitionBook = typed.book.homogeneous_book
        self.type_names = tuple(typed.book.node_types)
        self.type_offsets = np.zeros(len(self.type_names) + 1, dtype=np.int64)
        np.cumsum([t.num_nodes for t in self.meta.node_types], out=self.type_offsets[1:])
        self.edge_types = tuple(relation_name((r.src, r.rel, r.dst)) for r in self.meta.relations)
        self._new_of_orig: np.ndarray | None = None
        self._orig_of_new: np.ndarray | None = None
        self._degrees: np.ndarray | None = None

    @property
    def location(self) -> str:
        """Where workers open the set: its URI in an object store, else its absolute path."""
        return self.typed.location

    @property
    def staged(self) -> Staged | None:
        """What staging the set-level files from an object store did (None for a local set)."""
        return self.typed.staged

    def __repr__(self) -> str:
        return f"TypedTrainingSet({self.location!r}, method={self.meta.method!r}, k={self.num_parts})"

    @property
    def reused(self) -> bool:
        return self.typed.reused

    @property
    def num_parts(self) -> int:
        return self.meta.num_parts

    @property
    def num_nodes(self) -> int:
        return int(self.type_offsets[-1])

    @property
    def num_classes(self) -> int:
        return self.meta.num_classes

    @property
    def num_features(self) -> int:
        """Width of the padded feature rows: the widest type's."""
        return max(t.num_features for t in self.meta.node_types)

    def _homogeneous(self, node_type: str, new_local: np.ndarray) -> np.ndarray:
        return self.typed_book.to_homogeneous(node_type, new_local)

    def load_part(self, p: int, *, mmap: bool = True, verify: bool = True, per_type: bool = True) -> Part:
        """Part ``p`` as a :class:`~partition.store.Part` (see the module docstring);
        ``per_type=False`` gives the padded feature matrix instead of per-type tables."""
        hp = self.typed.load_part(p, mmap=mmap, verify=verify)
        p = int(p)
        hb = self.typed_book
        n = int(hb.starts[p, -1])
        rows = {t: hb.part_type_range(p, t) for t in self.type_names}
        deg = np.zeros(n, dtype=np.int64)
        for (_, _, d), csr in hp.relations.items():
            lo, hi = rows[d]
            deg[lo:hi] += np.diff(csr.indptr)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(deg, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        edge_rel = np.empty(int(indptr[-1]), dtype=np.int64)
        filled = indptr[:-1].copy()  # next free slot of each row, relation after relation
        for r, ((s, _, d), csr) in enumerate(hp.relations.items()):
            lo, hi = rows[d]
            cnt = np.diff(csr.indptr)
            pos = np.repeat(filled[lo:hi] - csr.indptr[:-1], cnt) + np.arange(csr.num_edges, dtype=np.int64)
            indices[pos] = self._homogeneous(s, np.asarray(csr.indices))
            edge_rel[pos] = r
            filled[lo:hi] += cnt
        tables, row_type, orig, halo = [], np.empty(n, dtype=np.int64), [], []
        for i, t in enumerate(self.type_names):
            lo, hi = rows[t]
            row_type[lo:hi] = i
            table = np.asarray(hp.x[t], dtype=np.float32) if t in hp.x else np.zeros((hi - lo, 0), np.float32)
            tables.append(np.ascontiguousarray(table[:, :used_width(table)]))
            orig.append(np.asarray(hp.orig_ids[t]) + self.type_offsets[i])
            halo.append(self._homogeneous(t, np.asarray(hp.halo_ids[t])))
        x_rows = TypedRows(tables, row_type, self.num_features)
        halo_ids = np.sort(np.concatenate(halo)) if halo else np.empty(0, np.int64)
        tlo, thi = rows[self.meta.target]
        y = np.zeros(n, dtype=np.int64)
        y[tlo:thi] = hp.y
        tgt = self.meta.target
        return Part(part_id=p, book=self.book, indptr=indptr, indices=indices,
                    x=x_rows if per_type else np.asarray(x_rows), y=y,
                    train_idx=self._homogeneous(tgt, np.asarray(hp.train_idx)),
                    val_idx=self._homogeneous(tgt, np.asarray(hp.val_idx)),
                    test_idx=self._homogeneous(tgt, np.asarray(hp.test_idx)),
                    orig_ids=np.concatenate(orig) if orig else np.empty(0, np.int64),
                    halo_ids=halo_ids, halo_offsets=self.book.split_sorted(halo_ids),
                    edge_rel=edge_rel, edge_types=self.edge_types, node_type_names=self.type_names,
                    node_type_features=tuple(t.num_features for t in self.meta.node_types))

    def global_degrees(self) -> np.ndarray:
        """In-degree (all relations) of every node in the homogeneous numbering, int64
        ``[N]``: the set's ``global_degrees.npy``, or for a set written before it was added,
        summed from every part's relation row offsets (no edge is read)."""
        if self._degrees is None and "global_degrees.npy" in self.meta.files:
            self._degrees = np.asarray(self.typed._array("global_degrees.npy"), dtype=np.int64)
        if self._degrees is None:
            hb = self.typed_book
            deg = np.zeros(self.num_nodes, dtype=np.int64)
            for p in range(self.num_parts):
                start = int(self.book.offsets[p])
                for r in self.meta.relations:
                    key = relation_key((r.src, r.rel, r.dst))
                    indptr = self.typed._array(f"part-{p}/rel/{key}/indptr.npy")
                    lo, hi = hb.part_type_range(p, r.dst)
                    deg[start + lo:start + hi] += np.diff(indptr)
            self._degrees = deg
        return self._degrees

    def node_types(self) -> np.ndarray:
        """Type index of every node in the homogeneous numbering (int64 ``[N]``)."""
        k, t = self.typed_book.counts.shape
        return np.repeat(np.tile(np.arange(t, dtype=np.int64), k), self.typed_book.counts.ravel())

    def new_id_map(self) -> np.ndarray:
        """The homogeneous new id of every original (training graph) id, int64 ``[N]``."""
        if self._new_of_orig is None:
            self._new_of_orig = np.concatenate(
                [self._homogeneous(t, np.asarray(self.typed._array(f"types/{t}/new_ids.npy")))
                 for t in self.type_names])
        return self._new_of_orig

    def new_ids(self, orig_ids: np.ndarray) -> np.ndarray:
        """Homogeneous new ids of original ids."""
        ids = np.asarray(orig_ids, dtype=np.int64)
        check_ids("orig_ids", ids, self.num_nodes)
        return np.asarray(self.new_id_map()[ids])

    def orig_ids(self, new_ids: np.ndarray) -> np.ndarray:
        """Original ids of homogeneous new ids (maps results back to the training graph)."""
        ids = np.asarray(new_ids, dtype=np.int64)
        check_ids("new_ids", ids, self.num_nodes)
        if self._orig_of_new is None:
            orig = np.empty(self.num_nodes, dtype=np.int64)
            orig[self.new_id_map()] = np.arange(self.num_nodes, dtype=np.int64)
            self._orig_of_new = orig
        return self._orig_of_new[ids]

    def assignment(self) -> np.ndarray:
        """Part of every original id, int64 ``[N]``."""
        return self.book.owner(self.new_id_map())

    def check_files(self, *, verify: bool = False) -> None:
        """Every file present with its recorded size; with ``verify`` also its SHA-256."""
        self.typed.check_files()
        if verify:
            for rel in self.meta.files:
                self.typed._array(rel, mmap=True, verify=True)


TrainingSet = PartitionSet | TypedTrainingSet
"""The partition set a run trains on: a homogeneous set (format 1) or a typed one (format 2,
shown to the runtime as one graph by :class:`TypedTrainingSet`)."""


def trains_typed(graph: Graph) -> bool:
    """Whether ``graph`` trains on a typed (format-2) set under ``cfg`` (module docstring)."""
    return bool(graph.node_type_names) and graph.edge_rel is not None and graph.train_weight is None


def build_training_set(graph: Graph, cfg: PartitionConfig, root: str | Path | None = None, *,
                       force: bool = False) -> TrainingSet:
    """Build (or reuse) the set ``graph`` trains on: typed for a typed graph
    (:func:`trains_typed`), format 1 otherwise."""
    if trains_typed(graph):
        return TypedTrainingSet(build_hetero_partition_set(from_training_graph(graph), cfg, root, force=force,
                                                           training=graph))
    from partition.build import build_partition_set

    return build_partition_set(graph, cfg, root, force=force)


def _open_by_version(path: Path, **kwargs: Any) -> PartitionSet | HeteroPartitionSet:
    """The local set at ``path`` opened by the reader of its format version."""
    try:
        version = json.loads((path / "meta.json").read_bytes()).get("format_version")
    except (OSError, ValueError, AttributeError):
        version = None  # the format-1 reader names what is wrong
    opener = open_hetero_partition_set if version == TYPED_FORMAT_VERSION else open_partition_set
    return opener(path, **kwargs)


def open_training_set(path: str | Path, storage_options: dict[str, Any] | None = None) -> TrainingSet:
    """Open the set at ``path`` as the runtime reads it, by its format version; a set in an
    object store (reached with ``storage_options``) has its set-level files staged first
    (its ``meta.json`` read from the store once)."""
    pset = (open_staged(str(path), _open_by_version, storage_options=storage_options) if is_remote(path)
            else _open_by_version(Path(path)))
    return TypedTrainingSet(pset) if isinstance(pset, HeteroPartitionSet) else pset
