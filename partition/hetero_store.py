"""On-disk format of a typed partition set (``TYPED_FORMAT_VERSION = 2``), its writer and reader.

Versions: format 1 (:mod:`partition.format`) is the homogeneous set and stays as it is,
so homogeneous sets keep working; format 2 is the typed set, written by
:func:`build_hetero_partition_set` and read by :func:`open_hetero_partition_set` (a run
trains on it through :class:`~partition.training_set.TypedTrainingSet`). Each
reader refuses the other's sets (and any other version) with the command that rebuilds
them. A homogeneous graph is partitioned as a homogeneous set; as a typed set it is the
one-type case (:meth:`~partition.hetero_graph.HeteroGraph.from_graph`).

Per type ``t``: ``N_t`` nodes, ``n_pt`` of them in part ``p``, ``F_t`` features (featured
types only). Per relation ``R = <src>___<rel>___<dst>``: ``e_pR`` edges into part ``p``'s
``dst`` nodes. Ids in files are **new type-local ids** (each type renumbered so part ``p``
owns ``[offsets_t[p], offsets_t[p + 1])``; :class:`~partition.hetero_book.HeteroPartitionBook`)::

    <graph>-<method>-k<k>-<key>/
    ├── meta.json                   the HeteroPartitionMeta below (JSON)
    ├── types/<t>/new_ids.npy       int64 [N_t]        new id of each original id of type t
    ├── types/<t>/orig_ids.npy      int64 [N_t]        original id of each new id
    ├── global_degrees.npy          int64 [N]          in-degree (all relations) of every node,
    │                                                  homogeneous numbering (parts in order, each
    │                                                  part's types in node_types order); sets
    │                                                  written before it was added lack it and
    │                                                  sum it from the parts' indptr files
    └── part-<p>/                   one per part p = 0 .. k-1
        ├── nodes/<t>/orig_ids.npy      int64 [n_pt]        original ids of the owned t nodes
        ├── nodes/<t>/x.npy             float32 [n_pt, F_t] features (featured types only)
        ├── nodes/<t>/halo_ids.npy      int64 [h_pt]        remote in-neighbours of type t, sorted
        ├── nodes/<t>/halo_offsets.npy  int64 [k + 1]       halo_ids[o[q]:o[q + 1]] are owned by q
        ├── rel/<R>/indptr.npy          int64 [n_p,dst + 1] in-neighbour CSR of the owned dst rows
        ├── rel/<R>/indices.npy         int64 [e_pR]        src ids (new type-local numbering)
        ├── y.npy                       int64 [n_p,target]  labels of the owned target nodes
        ├── train_idx.npy               int64               new ids of owned target training nodes
        ├── val_idx.npy                 int64
        └── test_idx.npy                int64

Inside a part, the owned nodes are laid out type by type in ``node_types`` order (the
book's ``part_type_range``); row ``r`` of ``rel/<R>/indptr`` is the ``dst`` node
``offsets_dst[p] + r``.

``meta.json`` fields (:class:`HeteroPartitionMeta`): ``format_version`` (2), ``kind``
("typed"), ``key``, ``graph_name``, ``graph_hash`` (``HeteroGraph.content_hash()``),
``method``, ``settings`` (the ``PartitionConfig`` fields except ``root`` and
``metis_spill``), ``num_parts``, ``node_types`` (per type: ``name``, ``num_nodes``,
``num_features``), ``relations`` (per relation: ``src``, ``rel``, ``dst``, ``num_edges``,
``cut_edges``), ``target``, ``num_classes``, ``counts`` (the ``k x T`` book),
``parts`` (per part: ``nodes``, ``halo`` per type; ``edges``, ``cut_edges`` per relation;
``train``, ``val``, ``test``), ``files`` (per file: sha256, bytes, dtype, shape),
``steps``, ``created_utc``, ``library`` and ``meta_sha256`` (as in format 1).

A set may live in an object store (``partition.root: s3://bucket/prefix``): the writer
uploads each file as it is written and ``meta.json`` last (a set is complete exactly when
its manifest is there), and a reader stages the set-level files
(:func:`~partition.staging.stage_set`; a worker stages its own part,
:func:`~partition.staging.stage_part`), as for format 1.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from partition import _kernels
from partition.build import Renumbering, cleaned_on_failure, make_tmp, move_into_place, put_npy
from partition.config import PartitionConfig
from partition.errors import PartitionChecksumError, PartitionError, PartitionFormatError
from partition.format import FileEntry, check_present, meta_digest, read_npy
from partition.graph import Graph
from partition.hetero_book import HeteroPartitionBook
from partition.hetero_graph import EdgeType, HeteroGraph, RelationCSR
from partition.hetero_methods import assign_hetero_parts, relation_key
from partition.manifest import manifest_bytes, read_manifest
from partition.paths import check_component, join_under
from partition.staging import Staged, check_sizes_in_store, open_staged
from partition.steps import StepRecorder, StepStat
from partition.storage import LocalStore, Store, is_remote, open_store
from partition.store import settings_of

__all__ = ["TYPED_FORMAT_VERSION", "HeteroPart", "HeteroPartitionMeta", "HeteroPartitionSet",
           "build_hetero_partition_set", "open_hetero_partition_set"]

TYPED_FORMAT_VERSION = 2
REBUILD = ("rebuild it with build_hetero_partition_set(graph, cfg, force=True) or "
           "`python -m partition --config <dataset.yaml> --force`")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeTypeMeta(_Model):
    name: str
    num_nodes: int = Field(ge=1)
    num_features: int = Field(ge=0)


class RelationMeta(_Model):
    src: str
    rel: str
    dst: str
    num_edges: int = Field(ge=0)
    cut_edges: int = Field(ge=0)


class HeteroPartCounts(_Model):
    nodes: dict[str, int]
    halo: dict[str, int]
    edges: dict[str, int]
    cut_edges: dict[str, int]
    train: int
    val: int
    test: int


class HeteroPartitionMeta(_Model):
    """``meta.json`` of a typed set (see module docstring)."""

    format_version: int
    kind: str
    key: str
    graph_name: str
    graph_hash: str
    method: str
    settings: dict[str, Any]
    num_parts: int = Field(ge=1)
    node_types: list[NodeTypeMeta]
    relations: list[RelationMeta]
    target: str
    num_classes: int = Field(ge=1)
    counts: list[list[int]]
    parts: list[HeteroPartCounts]
    files: dict[str, FileEntry]
    steps: list[StepStat]
    created_utc: str
    library: dict[str, str]
    meta_sha256: str = ""


def _key(graph_hash: str, cfg: PartitionConfig) -> str:
    body = json.dumps({"graph": graph_hash, "settings": settings_of(cfg), "format": TYPED_FORMAT_VERSION,
                       "kind": "typed"}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _set_name(graph: HeteroGraph, cfg: PartitionConfig) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", graph.name) or "graph"
    return f"{name}-{cfg.method}-k{cfg.parts}-{_key(graph.content_hash(), cfg)}"


def _part_arrays(graph: HeteroGraph, ren: dict[str, Renumbering], book: HeteroPartitionBook, p: int,
                 new_splits: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], HeteroPartCounts]:
    arrays: dict[str, np.ndarray] = {}
    remote: dict[str, list[np.ndarray]] = {t: [] for t in graph.node_types}
    edges, cut = {}, {}
    for t in graph.node_types:
        s, e = book.book(t).part_range(p)
        arrays[f"nodes/{t}/orig_ids"] = ren[t].perm[s:e]
        if t in graph.x:
            arrays[f"nodes/{t}/x"] = graph.x[t][ren[t].perm[s:e]]
    for et, csr in graph.relations.items():
        src_t, _, dst_t = et
        s, e = book.book(dst_t).part_range(p)
        owned = ren[dst_t].perm[s:e]
        indptr = np.zeros(e - s + 1, dtype=np.int64)
        np.cumsum(csr.indptr[owned + 1] - csr.indptr[owned], out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        _kernels.permute_rows(csr.indptr, csr.indices, owned, ren[src_t].new_of, indptr, indices)
        lo, hi = book.book(src_t).part_range(p)
        rem = indices[(indices < lo) | (indices >= hi)]
        remote[src_t].append(rem)
        key = relation_key(et)
        arrays[f"rel/{key}/indptr"], arrays[f"rel/{key}/indices"] = indptr, indices
        edges[key], cut[key] = int(indices.shape[0]), int(rem.shape[0])
    halo = {}
    for t in graph.node_types:
        ids = np.unique(np.concatenate(remote[t])) if remote[t] else np.empty(0, np.int64)
        arrays[f"nodes/{t}/halo_ids"] = ids.astype(np.int64)
        arrays[f"nodes/{t}/halo_offsets"] = book.book(t).split_sorted(ids)
        halo[t] = int(ids.shape[0])
    s, e = book.book(graph.target).part_range(p)
    arrays["y"] = graph.y[ren[graph.target].perm[s:e]]
    sizes = {}
    for split, ids in new_splits.items():
        a, b = np.searchsorted(ids, [s, e])
        arrays[f"{split}_idx"] = ids[a:b]
        sizes[split] = int(b - a)
    nodes = {t: int(book.counts[p, i]) for i, t in enumerate(graph.node_types)}
    return arrays, HeteroPartCounts(nodes=nodes, halo=halo, edges=edges, cut_edges=cut, **sizes)


def _write_set(dest: Store, graph: HeteroGraph, cfg: PartitionConfig, parts: dict[str, np.ndarray],
               rec: StepRecorder, key: str) -> None:
    k = cfg.parts
    with rec("renumber"):
        ren = {t: Renumbering(parts[t], k) for t in graph.node_types}
        book = HeteroPartitionBook(graph.node_types, np.stack(
            [np.diff(ren[t].book.offsets) for t in graph.node_types], axis=1))
        tgt = ren[graph.target]
        new_splits = {s: np.sort(tgt.new_of[graph.split_idx(s)]) for s in ("train", "val", "test")}
    files: dict[str, FileEntry] = {}

    def put(rel: str, arr: np.ndarray) -> None:
        files[rel + ".npy"] = put_npy(dest, rel + ".npy", arr)

    counts = []
    homogeneous = book.homogeneous_book
    degrees = np.zeros(int(homogeneous.offsets[-1]), dtype=np.int64)
    with rec("write"):
        for t in graph.node_types:
            put(f"types/{t}/new_ids", ren[t].new_of)
            put(f"types/{t}/orig_ids", ren[t].perm)
        for p in range(k):
            arrays, c = _part_arrays(graph, ren, book, p, new_splits)
            counts.append(c)
            start = int(homogeneous.offsets[p])
            for et in graph.edge_types:
                lo, hi = book.part_type_range(p, et[2])
                degrees[start + lo:start + hi] += np.diff(arrays[f"rel/{relation_key(et)}/indptr"])
            for name, arr in arrays.items():
                put(f"part-{p}/{name}", arr)
        put("global_degrees", degrees)
    relations = [RelationMeta(src=s, rel=r, dst=d, num_edges=graph.relations[(s, r, d)].num_edges,
                              cut_edges=sum(c.cut_edges[relation_key((s, r, d))] for c in counts))
                 for (s, r, d) in graph.edge_types]
    meta = HeteroPartitionMeta(
        format_version=TYPED_FORMAT_VERSION, kind="typed", key=key, graph_name=graph.name,
        graph_hash=graph.content_hash(), method=cfg.method, settings=settings_of(cfg), num_parts=k,
        node_types=[NodeTypeMeta(name=t, num_nodes=graph.num_nodes[t], num_features=graph.num_features(t))
                    for t in graph.node_types],
        relations=relations, target=graph.target, num_classes=graph.num_classes,
        counts=book.counts.tolist(), parts=counts, files=dict(sorted(files.items())), steps=rec.steps,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        library={"numpy": np.__version__, "format": str(TYPED_FORMAT_VERSION)})
    meta = meta.model_copy(update={"meta_sha256": meta_digest(meta)})
    dest.write_bytes("meta.json", manifest_bytes(meta.model_dump(mode="json")))  # last


def build_hetero_partition_set(graph: HeteroGraph, cfg: PartitionConfig, root: str | Path | None = None,
                               *, force: bool = False, training: Graph | None = None) -> HeteroPartitionSet:
    """Partition ``graph`` (:func:`~partition.hetero_methods.assign_hetero_parts`) and write
    the typed set under ``root`` (default ``cfg.root``); an existing set with the same graph
    hash and settings is reused unless ``force``. ``training``: the graph's training graph
    when the caller holds it, partitioned as it stands instead of homogenising again."""
    for t in graph.node_types:
        check_component(f"node type {t!r}", t)
    for et in graph.edge_types:
        check_component(f"relation {et}", relation_key(et))
    where = cfg.root if root is None else root
    rec = StepRecorder()
    with rec("hash"):
        name = _set_name(graph, cfg)
    if is_remote(where):
        return _build_in_store(graph, cfg, open_store(where, cfg.storage_options).child(name), rec,
                               force=force, training=training)
    root = Path(where)
    path = join_under(root, name, "partition set name (dataset.name)")
    if path.exists() and not force:
        pset = open_hetero_partition_set(path, expect_graph_hash=graph.content_hash())
        pset.check_files()
        pset.reused = True
        return pset
    tmp = make_tmp(root, name.rsplit("-", 1)[0])
    with cleaned_on_failure(tmp, root):
        parts = assign_hetero_parts(graph, cfg, steps=rec, training=training)
        _write_set(LocalStore(tmp), graph, cfg, parts, rec, name.rsplit("-", 1)[-1])
        move_into_place(tmp, path)
    return open_hetero_partition_set(path, expect_graph_hash=graph.content_hash())


def _build_in_store(graph: HeteroGraph, cfg: PartitionConfig, dest: Store, rec: StepRecorder, *, force: bool,
                    training: Graph | None) -> HeteroPartitionSet:
    """Build the set straight into an object store (no local copy; ``meta.json`` last), or
    reuse the complete one there; a forced rebuild deletes the old manifest first."""
    options = cfg.storage_options
    if not force and dest.exists("meta.json"):
        pset = open_hetero_partition_set(dest.uri, expect_graph_hash=graph.content_hash(), storage_options=options)
        pset.check_files()
        pset.reused = True
        return pset
    dest.remove("meta.json")
    parts = assign_hetero_parts(graph, cfg, steps=rec, training=training)
    with cleaned_on_failure(dest, dest.uri.rsplit("/", 1)[0]):
        _write_set(dest, graph, cfg, parts, rec, dest.uri.rsplit("-", 1)[-1])
    return open_hetero_partition_set(dest.uri, expect_graph_hash=graph.content_hash(), storage_options=options)


@dataclass(frozen=True, eq=False)
class HeteroPart:
    """One part of a typed set as a worker sees it (ids in the new type-local numbering).

    ``relations[(s, r, d)]`` has one row per owned ``d`` node (row ``i`` is ``d`` node
    ``book.book(d).offsets[part_id] + i``) and ``s`` ids as values; ``halo_ids[t]`` are the
    distinct remote in-neighbours of type ``t``, grouped by owner by ``halo_offsets[t]``."""

    part_id: int
    book: HeteroPartitionBook
    target: str
    relations: dict[EdgeType, RelationCSR]
    x: dict[str, np.ndarray]
    orig_ids: dict[str, np.ndarray]
    halo_ids: dict[str, np.ndarray]
    halo_offsets: dict[str, np.ndarray]
    y: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray


class HeteroPartitionSet:
    """A typed partition set on disk: the book plus lazy access to every part."""

    def __init__(self, path: Path, meta: HeteroPartitionMeta) -> None:
        self.path = path
        self.meta = meta
        self.book = HeteroPartitionBook([t.name for t in meta.node_types], meta.counts)
        self.reused = False
        self.remote: Store | None = None  # the object store the set-level files were staged from
        self.staged: Staged | None = None  # what staging the set-level files from it did

    @property
    def location(self) -> str:
        """Where workers open the set: its URI in an object store, else its absolute path."""
        return self.remote.uri if self.remote is not None else str(self.path.resolve())

    def __repr__(self) -> str:
        return f"HeteroPartitionSet({self.location!r}, method={self.meta.method!r}, k={self.num_parts})"

    @property
    def num_parts(self) -> int:
        return self.meta.num_parts

    def _array(self, rel: str, *, mmap: bool = True, verify: bool = True) -> np.ndarray:
        return read_npy(self.path, rel, self.meta.files[rel], mmap=mmap, verify=verify)

    def new_ids(self, node_type: str, orig_ids: np.ndarray) -> np.ndarray:
        """New type-local ids of original ids of ``node_type``."""
        return self._lookup(node_type, "new_ids", orig_ids)

    def orig_ids(self, node_type: str, new_ids: np.ndarray) -> np.ndarray:
        """Original type-local ids of new ids of ``node_type``."""
        return self._lookup(node_type, "orig_ids", new_ids)

    def _lookup(self, node_type: str, table: str, ids: np.ndarray) -> np.ndarray:
        n = self.book.num_nodes(node_type)  # refuses an unknown type
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            raise PartitionError(f"{node_type!r} id {bad} is outside [0, num_nodes={n})")
        return np.asarray(self._array(f"types/{node_type}/{table}.npy")[ids])

    def assignment(self) -> dict[str, np.ndarray]:
        """Part of every original node id of every type, as the partitioner returned it."""
        return {t: self.book.owner(t, np.asarray(self._array(f"types/{t}/new_ids.npy")))
                for t in self.book.node_types}

    def load_part(self, p: int, *, mmap: bool = True, verify: bool = True) -> HeteroPart:
        """Load part ``p`` alone; ``verify`` checks each file's SHA-256 against meta.json first."""
        self.book.homogeneous_book.part_range(p)
        p = int(p)

        def arr(rel: str) -> np.ndarray:
            return self._array(f"part-{p}/{rel}.npy", mmap=mmap, verify=verify)

        types = self.book.node_types
        rels = {}
        for r in self.meta.relations:
            key = relation_key((r.src, r.rel, r.dst))
            rels[(r.src, r.rel, r.dst)] = RelationCSR(arr(f"rel/{key}/indptr"), arr(f"rel/{key}/indices"))
        featured = [t.name for t in self.meta.node_types if t.num_features > 0]
        part = HeteroPart(
            part_id=p, book=self.book, target=self.meta.target, relations=rels,
            x={t: arr(f"nodes/{t}/x") for t in featured},
            orig_ids={t: arr(f"nodes/{t}/orig_ids") for t in types},
            halo_ids={t: arr(f"nodes/{t}/halo_ids") for t in types},
            halo_offsets={t: arr(f"nodes/{t}/halo_offsets") for t in types},
            y=arr("y"), train_idx=arr("train_idx"), val_idx=arr("val_idx"), test_idx=arr("test_idx"))
        for t in types:
            if not np.array_equal(part.halo_offsets[t], self.book.book(t).split_sorted(part.halo_ids[t])):
                raise PartitionFormatError(f"part {p}: halo_offsets of type {t!r} do not group its halo "
                                           f"by owner; delete {self.path} and {REBUILD}")
        return part

    def check_files(self) -> None:
        """Every file present with its recorded size (checksums are checked on load); for a
        set in an object store, the sizes of the objects there."""
        if self.remote is not None:
            check_sizes_in_store(self.remote, self.meta.files)
            return
        for rel, entry in self.meta.files.items():
            check_present(self.path, rel, entry)


def open_hetero_partition_set(path: str | Path, *, expect_graph_hash: str | None = None,
                              storage_options: dict[str, Any] | None = None,
                              scratch: str | Path | None = None) -> HeteroPartitionSet:
    """Open a typed set; refuse another format version (a homogeneous set, an older typed
    set), an edited ``meta.json`` or a set of another graph, naming the rebuild command. A
    set in an object store has its set-level files staged to ``scratch`` first (no part's
    file); ``remote`` is then its store."""
    if is_remote(path):
        return open_staged(str(path), open_hetero_partition_set, scratch=scratch,
                           storage_options=storage_options, expect_graph_hash=expect_graph_hash)
    root = Path(path)
    meta_path = root / "meta.json"
    if not meta_path.is_file():
        raise PartitionFormatError(f"{root} is not a partition set (no meta.json); {REBUILD}")
    try:
        raw = read_manifest(meta_path)
    except (OSError, ValueError) as e:
        raise PartitionChecksumError(f"{meta_path} is unreadable ({e}); delete {root} and {REBUILD}") from None
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if version != TYPED_FORMAT_VERSION:
        what = "a homogeneous set (open it with open_partition_set)" if version == 1 else "another format"
        raise PartitionFormatError(
            f"partition set {root} has format_version={version!r}, {what}; typed sets are version "
            f"{TYPED_FORMAT_VERSION}: delete {root} and {REBUILD}")
    try:
        meta = HeteroPartitionMeta.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise PartitionFormatError(f"{meta_path} does not match typed format {TYPED_FORMAT_VERSION}: "
                                   f"{err['loc']}: {err['msg']}; delete {root} and {REBUILD}") from None
    if meta.meta_sha256 != meta_digest(meta):
        raise PartitionChecksumError(f"{meta_path} fails its checksum (meta_sha256): it was edited after "
                                     f"writing; delete {root} and {REBUILD}")
    if expect_graph_hash is not None and meta.graph_hash != expect_graph_hash:
        raise PartitionFormatError(f"partition set {root} was built from graph {meta.graph_name!r} (hash "
                                   f"{meta.graph_hash}), not from this graph (hash {expect_graph_hash}); "
                                   f"delete {root} or {REBUILD}")
    return HeteroPartitionSet(root, meta)
