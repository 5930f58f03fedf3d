"""Reading a partition set: :func:`open_partition_set`, :class:`PartitionSet`, :class:`Part`.

The layout is documented in :mod:`partition.format`. Opening a set reads ``meta.json``
only; each part's arrays are memory-mapped on :meth:`PartitionSet.load_part` after their
checksums are verified, so a worker touches its own part and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic import ValidationError

from partition.book import PartitionBook
from partition.config import PartitionConfig
from partition.errors import PartitionChecksumError, PartitionError, PartitionFormatError
from partition.feature_rows import TypedRows
from partition.format import (
    EDGE_REL_FILE,
    FORMAT_VERSION,
    PART_FILES,
    SET_FILES,
    PartitionMeta,
    check_present,
    meta_digest,
    read_npy,
)
from partition.graph import Graph, node_types_of
from partition.manifest import read_manifest
from partition.staging import Staged, check_sizes_in_store, open_staged
from partition.storage import Store, is_remote, local_path

__all__ = ["Part", "PartitionSet", "check_ids", "open_partition_set", "settings_of"]


def settings_of(cfg: PartitionConfig) -> dict[str, Any]:
    """The settings that key a partition set: every config field except ``root``,
    ``storage_options`` and ``metis_spill`` (which change where and how, never which parts)."""
    return cfg.model_dump(mode="json", exclude={"root", "storage_options", "metis_spill"})


@dataclass(frozen=True, eq=False)
class Part:
    """One part, as a worker sees it. All ids are in the NEW global numbering.

    ``book`` is the set's partition book; this part owns ``book.part_range(part_id)``.
    Row ``r`` of ``indptr``/``indices`` is node ``start + r``; ``indices`` are in-neighbour
    ids (owned or remote). ``halo_ids`` are the distinct remote in-neighbours, sorted, and
    ``halo_ids[halo_offsets[q]:halo_offsets[q + 1]]`` are the ones owned by part ``q``
    (``halo_offsets`` equals ``book.split_sorted(halo_ids)``; checked on construction).
    """

    part_id: int
    book: PartitionBook
    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray | TypedRows  # a typed set's rows are held per type (partition.feature_rows)
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    orig_ids: np.ndarray
    halo_ids: np.ndarray
    halo_offsets: np.ndarray
    edge_rel: np.ndarray | None = None  # relation id per stored edge (typed graphs only)
    edge_types: tuple[str, ...] = ()  # the relation names edge_rel indexes
    node_type_names: tuple[str, ...] = ()  # type names of a typed graph (index = type id)
    node_type_features: tuple[int, ...] = ()  # each type's own feature width (typed sets)

    def __post_init__(self) -> None:
        self.book.part_range(self.part_id)  # raises for a part the book does not have
        n = self.num_owned
        if self.indptr.shape != (n + 1,):
            raise PartitionFormatError(f"part {self.part_id}: indptr has shape {self.indptr.shape}, "
                                       f"the book gives it {n} nodes (expected ({n + 1},))")
        if not np.array_equal(self.halo_offsets, self.book.split_sorted(self.halo_ids)):
            raise PartitionFormatError(
                f"part {self.part_id}: halo_offsets {np.asarray(self.halo_offsets).tolist()[:8]} do not "
                "group halo_ids by owner under the partition book; rebuild the set")

    @classmethod
    def whole_graph(cls, graph: Graph) -> Part:
        """The whole graph as the only part: owns every node, no halo (single process). A
        typed graph's features are held as a part's are, one table per node type at its own
        width (:class:`~partition.feature_rows.TypedRows`), so one process evaluates as a
        worker does (each type projected at its width, a sparse type as one sparse product)."""
        n = graph.num_nodes
        types = graph.node_types()
        x: np.ndarray | TypedRows = graph.x if types is None else TypedRows.from_padded(
            graph.x, types, len(graph.node_type_names))
        return cls(part_id=0, book=PartitionBook.single(n), indptr=graph.indptr,
                   indices=graph.indices, x=x, y=graph.y, train_idx=graph.train_idx,
                   val_idx=graph.val_idx, test_idx=graph.test_idx,
                   orig_ids=np.arange(n, dtype=np.int64), halo_ids=np.empty(0, np.int64),
                   halo_offsets=np.zeros(2, dtype=np.int64), edge_rel=graph.edge_rel,
                   edge_types=graph.edge_type_names, node_type_names=graph.node_type_names)

    @property
    def start(self) -> int:
        return int(self.book.offsets[self.part_id])

    @property
    def stop(self) -> int:
        return int(self.book.offsets[self.part_id + 1])

    @property
    def num_owned(self) -> int:
        return self.stop - self.start

    def halo_of(self, q: int) -> np.ndarray:
        """Remote in-neighbours owned by part ``q``."""
        return self.halo_ids[self.halo_offsets[q]:self.halo_offsets[q + 1]]

    def halo_by_owner(self) -> dict[int, slice]:
        """Positions in ``halo_ids`` of each other part's nodes (non-empty groups only),
        read from the stored ``halo_offsets``: one request per owner, no re-grouping."""
        b = self.halo_offsets
        return {q: slice(int(b[q]), int(b[q + 1])) for q in range(self.book.num_parts)
                if b[q + 1] > b[q]}


class PartitionSet:
    """A partition set on disk: the partition book (``book``) plus lazy access to every part."""

    def __init__(self, path: Path, meta: PartitionMeta) -> None:
        self.path = path
        self.meta = meta
        self.book = PartitionBook(meta.offsets)
        self._global: dict[str, np.ndarray] = {}
        self.reused = False  # set by build_partition_set when it returned an existing set
        self.remote: Store | None = None  # the object store the set-level files were staged from
        self.staged: Staged | None = None  # what staging the set-level files from it did

    def __repr__(self) -> str:
        return (f"PartitionSet({self.remote.uri if self.remote is not None else str(self.path)!r}, method={self.meta.method!r}, "
                f"k={self.num_parts}, nodes={self.num_nodes})")

    @property
    def location(self) -> str:
        """Where workers open the set: its object-store URI, else its absolute local path."""
        return self.remote.uri if self.remote is not None else str(self.path.resolve())

    @property
    def num_parts(self) -> int:
        return self.meta.num_parts

    @property
    def num_nodes(self) -> int:
        return self.meta.num_nodes

    @property
    def num_features(self) -> int:
        return self.meta.num_features

    @property
    def num_classes(self) -> int:
        return self.meta.num_classes

    def _set_array(self, name: str) -> np.ndarray:
        if name not in self._global:
            self._global[name] = read_npy(self.path, name, self.meta.files[name], mmap=True, verify=True)
        return self._global[name]

    def global_degrees(self) -> np.ndarray:
        """In-degree of every node in the new numbering (int64 ``[N]``, memory-mapped)."""
        return self._set_array("global_degrees.npy")

    def node_types(self) -> np.ndarray | None:
        """Type index of every node in the new numbering (int64 ``[N]``), None for a set
        of an untyped graph."""
        nt = self.meta.node_types
        return None if nt is None else node_types_of(self._set_array("orig_ids.npy"), nt.offsets)

    def new_id_map(self) -> np.ndarray:
        """The new id of every original id (int64 ``[N]``, memory-mapped, nothing copied)."""
        return self._set_array("new_ids.npy")

    def new_ids(self, orig_ids: np.ndarray) -> np.ndarray:
        """New ids of the given original ids."""
        ids = np.asarray(orig_ids, dtype=np.int64)
        check_ids("orig_ids", ids, self.num_nodes)
        return np.asarray(self.new_id_map()[ids])

    def orig_ids(self, new_ids: np.ndarray) -> np.ndarray:
        """Original ids of the given new ids (maps results back to the input graph)."""
        ids = np.asarray(new_ids, dtype=np.int64)
        check_ids("new_ids", ids, self.num_nodes)
        return np.asarray(self._set_array("orig_ids.npy")[ids])

    def assignment(self) -> np.ndarray:
        """Part of every ORIGINAL node id (int64 ``[N]``), as :func:`assign_parts` returned it."""
        return self.book.owner(np.asarray(self._set_array("new_ids.npy")))

    def load_part(self, p: int, *, mmap: bool = True, verify: bool = True, per_type: bool = True) -> Part:
        """Load part ``p`` alone; ``verify`` checks each file's SHA-256 against meta.json first.

        A typed set's features are read once into one table per node type at that type's
        own width (:class:`~partition.feature_rows.TypedRows`; ``per_type=False`` keeps the
        stored padded matrix)."""
        self.book.part_range(p)  # refuses a part the set does not have
        p = int(p)
        arrays = {name[:-4]: read_npy(self.path, f"part-{p}/{name}", self.meta.files[f"part-{p}/{name}"],
                                      mmap=mmap, verify=verify) for name in self._part_files()}
        nt = self.meta.node_types
        stored = arrays.pop("x")
        x: np.ndarray | TypedRows = stored
        row_types = node_types_of(np.asarray(arrays["orig_ids"]), nt.offsets) if nt is not None else None
        if row_types is not None and nt is not None and per_type:
            x = TypedRows.from_padded(stored, row_types, len(nt.names))
        return Part(part_id=p, book=self.book, edge_types=tuple(self.meta.edge_types or ()),
                    node_type_names=tuple(nt.names) if nt is not None else (), x=x,
                    **cast(dict[str, Any], arrays))

    def _part_files(self) -> tuple[str, ...]:
        return PART_FILES + ((EDGE_REL_FILE,) if self.meta.edge_types is not None else ())

    def check_files(self, *, verify: bool = False) -> None:
        """Check that every file of the set is present with its recorded size; with
        ``verify``, then also each file's SHA-256, dtype and shape (one read per file).

        Sizes come first for all files, so a missing or truncated file is named without
        hashing anything. Raises :class:`PartitionChecksumError` naming the file.

        A set on object storage is checked in the store, sizes only: each worker verifies
        its files' SHA-256 while it stages them (:mod:`partition.staging`), and nothing
        here downloads a part."""
        if self.remote is not None:
            check_sizes_in_store(self.remote, self.meta.files)
            return
        for rel, entry in self.meta.files.items():
            check_present(self.path, rel, entry)
        if verify:
            for rel, entry in self.meta.files.items():
                read_npy(self.path, rel, entry, mmap=True, verify=True)

    def check_matches(self, graph_hash: str, cfg: PartitionConfig | None = None) -> None:
        """Raise :class:`PartitionFormatError` if the set was built from another graph or settings."""
        how = f"delete {self.path} or build a new set with build_partition_set (force=True rebuilds)"
        if self.meta.graph_hash != graph_hash:
            raise PartitionFormatError(
                f"partition set {self.path} was built from graph {self.meta.graph_name!r} "
                f"(hash {self.meta.graph_hash}), not from this graph (hash {graph_hash}); {how}")
        if cfg is not None and self.meta.settings != settings_of(cfg):
            raise PartitionFormatError(
                f"partition set {self.path} was built with settings {self.meta.settings}, "
                f"not {settings_of(cfg)}; {how}")


def check_ids(name: str, ids: np.ndarray, num_nodes: int) -> None:
    """Raise :class:`PartitionError` naming ``name`` and the first id outside ``[0, num_nodes)``."""
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise PartitionError(f"{name}: node id {bad} is outside [0, num_nodes={num_nodes})")


def open_partition_set(path: str | Path, *, expect_graph_hash: str | None = None,
                       storage_options: dict[str, Any] | None = None,
                       scratch: str | Path | None = None) -> PartitionSet:
    """Open a set written by :func:`~partition.build.build_partition_set`.

    Validates ``meta.json`` (format version, fields, its own checksum) and that the
    set-level files are present; parts are checked when loaded. ``expect_graph_hash``
    additionally refuses a set built from another graph. A set on object storage
    (``s3://...``) has its set-level files staged to ``scratch`` first (no part's file:
    a worker stages its own, :func:`~partition.staging.stage_part`); ``remote`` is then
    its store.
    """
    if is_remote(path):
        return open_staged(str(path), open_partition_set, scratch=scratch, storage_options=storage_options,
                           expect_graph_hash=expect_graph_hash)
    root = local_path(path)
    meta_path = root / "meta.json"
    rebuild = ("rebuild it with build_partition_set(graph, cfg, force=True) or "
               "`python -m partition --config <dataset.yaml> --force`")
    if not meta_path.is_file():
        raise PartitionFormatError(f"{root} is not a partition set (no meta.json); {rebuild}")
    try:
        raw = read_manifest(meta_path)
    except (OSError, ValueError) as e:
        raise PartitionChecksumError(f"{meta_path} is unreadable ({e}); delete {root} and {rebuild}") from None
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if version == 2:  # partition.hetero_store.TYPED_FORMAT_VERSION
        raise PartitionFormatError(f"partition set {root} is a typed set (format_version=2); open it "
                                   "with partition.hetero_store.open_hetero_partition_set")
    if version != FORMAT_VERSION:
        raise PartitionFormatError(
            f"partition set {root} has format_version={version!r}, this code reads version "
            f"{FORMAT_VERSION}; delete {root} and {rebuild}")
    try:
        meta = PartitionMeta.model_validate(raw)
    except ValidationError as e:
        raise PartitionFormatError(f"{meta_path} does not match format {FORMAT_VERSION}: "
                                   f"{e.errors()[0]['loc']}: {e.errors()[0]['msg']}; delete {root} and {rebuild}") from None
    if meta.meta_sha256 != meta_digest(meta):
        raise PartitionChecksumError(
            f"{meta_path} fails its checksum (meta_sha256): it was edited after writing; "
            f"delete {root} and {rebuild}")
    if len(meta.offsets) != meta.num_parts + 1 or meta.offsets[-1] != meta.num_nodes:
        raise PartitionFormatError(f"{meta_path}: offsets do not cover {meta.num_nodes} nodes in "
                                   f"{meta.num_parts} parts; delete {root} and {rebuild}")
    part_files = PART_FILES + ((EDGE_REL_FILE,) if meta.edge_types is not None else ())
    expected = set(SET_FILES) | {f"part-{p}/{name}" for p in range(meta.num_parts) for name in part_files}
    if set(meta.files) != expected:
        odd = sorted(set(meta.files) ^ expected)[:5]
        raise PartitionFormatError(
            f"{meta_path}: 'files' must list exactly the set's files (global_degrees.npy, ..., "
            f"part-<p>/halo_offsets.npy for p < {meta.num_parts}); these differ: {odd}; "
            f"delete {root} and {rebuild}")
    pset = PartitionSet(root, meta)
    for name in SET_FILES:
        check_present(root, name, meta.files[name])
    if expect_graph_hash is not None:
        pset.check_matches(expect_graph_hash)
    return pset
