"""A graph as chunks on disk (``CHUNK_FORMAT_VERSION = 2``), for graphs no process holds whole.

Edges are split by edge-id ranges and node data by row ranges, as DGL's chunked graph
format and OGB's large datasets do; every chunk is a directory of plain ``.npy`` files, so
a reader opens one chunk without the others. ``E`` stored directed edges, ``N`` nodes,
``F`` features, ``m_i`` edges in edge chunk ``i``, ``r_j`` rows in node chunk ``j``::

    <chunks>/
    ├── manifest.json              the ChunkManifest below (JSON)
    ├── edges-<i>/                 edge ids [lo, hi) of edge chunk i, any order of edges
    │   ├── src.npy                ids [m_i]       source u of each edge u -> v
    │   └── dst.npy                ids [m_i]       destination v (row v of the in-neighbour CSR holds u)
    └── nodes-<j>/                 node ids [lo, hi) of node chunk j
        ├── x.npy                  float32 [r_j, F] features
        ├── y.npy                  int64 [r_j]      labels
        └── split.npy              int8 [r_j]       0 none, 1 train, 2 val, 3 test

Node ids in edge chunks are ``int32`` when ``N <= 2^31 - 1`` and ``int64`` otherwise
(:func:`id_dtype`; version 1 stored ``int64`` always and is still read): half the disk and
memory of every step that moves edges. Readers take the dtype the manifest records; the
graph hash is that of ``int64`` ids either way.

The stored edges are exactly the directed edges of the graph (an undirected graph stores
both directions, repeats and self-loops are kept as given), so the in-neighbour CSR of
:class:`~partition.graph.Graph` is the edges grouped by ``dst``, each row in edge-id order.

``manifest.json`` fields (:class:`ChunkManifest`): ``format_version`` (2; 1 is read), ``name``,
``graph_hash`` (``Graph.content_hash()`` of the graph the chunks hold, computed by
:func:`content_hash` without loading the graph, so a partition set built from the chunks
is keyed exactly like one built from the graph in memory), ``num_nodes``, ``num_edges``,
``num_features``, ``num_classes``, ``num_train`` / ``num_val`` / ``num_test``, and
``edge_chunks`` / ``node_chunks``: per chunk its ``name``, id range ``lo``, ``hi`` and
``files`` (per file ``sha256``, ``bytes``, ``dtype``, ``shape``, as in a partition set).
The ranges of each kind must cover ``[0, E)`` and ``[0, N)`` without gap or overlap;
:func:`open_chunks` refuses anything else naming the chunk, and every array read checks
its file's SHA-256 (:meth:`ChunkedGraph.read`).

Writers never hold more than one chunk: :class:`ChunkWriter` takes edges and node rows
piece by piece and renames the finished directory into place (an interrupted write
leaves only a ``.tmp-`` directory); :func:`write_chunks` converts an in-memory graph.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from partition.errors import PartitionError
from partition.format import FileEntry, write_npy
from partition.graph import Graph
from partition.manifest import FileMismatch, write_manifest
from partition.manifest import verify as verify_file
from partition.storage import LocalStore, StorageError, Store, open_store

__all__ = ["CHUNK_FORMAT_VERSION", "SPLIT_CODES", "ChunkEntry", "ChunkError", "ChunkManifest",
           "ChunkWriter", "ChunkedGraph", "content_hash", "id_dtype", "open_chunks", "write_chunks"]

CHUNK_FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
SPLIT_CODES = {"train": 1, "val": 2, "test": 3}
EDGE_FILES = ("src.npy", "dst.npy")
NODE_FILES = ("x.npy", "y.npy", "split.npy")


def id_dtype(num_nodes: int) -> type[np.signedinteger[Any]]:
    """The narrowest signed integer that holds every node id of ``num_nodes`` nodes, int32 or
    int64: edge chunks and the partition pipeline's edge intermediates use it."""
    return np.int32 if num_nodes <= np.iinfo(np.int32).max else np.int64


class ChunkError(PartitionError):
    """A chunk directory is malformed: bad manifest, id ranges, or a file failing its checksum."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChunkEntry(_Model):
    """One chunk: its directory name, id range ``[lo, hi)`` and files."""

    name: str
    lo: int = Field(ge=0)
    hi: int = Field(ge=0)
    files: dict[str, FileEntry]


class ChunkManifest(_Model):
    """``manifest.json`` (see the module docstring)."""

    format_version: int
    name: str
    graph_hash: str
    num_nodes: int = Field(ge=1)
    num_edges: int = Field(ge=0)
    num_features: int = Field(ge=0)
    num_classes: int = Field(ge=1)
    num_train: int = Field(ge=0)
    num_val: int = Field(ge=0)
    num_test: int = Field(ge=0)
    edge_chunks: list[ChunkEntry]
    node_chunks: list[ChunkEntry]


def _check_cover(kind: str, chunks: list[ChunkEntry], total: int, path: Path | str) -> None:
    """Chunks in order must tile ``[0, total)``: name the first one that does not."""
    pos = 0
    for c in chunks:
        if c.hi < c.lo:
            raise ChunkError(f"{path}: {kind} chunk {c.name!r} has range [{c.lo}, {c.hi}) with hi < lo")
        if c.lo < pos:
            raise ChunkError(f"{path}: {kind} chunk {c.name!r} range [{c.lo}, {c.hi}) overlaps the "
                             f"chunk before it, which ends at {pos}; ranges must not overlap")
        if c.lo > pos:
            raise ChunkError(f"{path}: {kind} ids [{pos}, {c.lo}) are in no chunk (gap before "
                             f"{kind} chunk {c.name!r}); ranges must cover [0, {total})")
        pos = c.hi
    if pos != total:
        raise ChunkError(f"{path}: {kind} chunks end at {pos}, the manifest says {total} {kind}s; "
                         f"ranges must cover [0, {total})")


class ChunkedGraph:
    """An opened chunk directory: the manifest plus checked reads of single chunks."""

    def __init__(self, location: str | Path | Store, manifest: ChunkManifest) -> None:
        self._store = location if isinstance(location, Store) else LocalStore(location)
        self.manifest = manifest

    @property
    def store(self) -> Store:
        """Where the chunks are: a local directory or an object-store prefix."""
        return self._store

    @property
    def location(self) -> str:
        """The chunk directory: a local path or an object-store URI."""
        return self.store.uri

    @property
    def path(self) -> Path:
        """The local chunk directory (chunks on object storage have :attr:`location` only)."""
        if not isinstance(self.store, LocalStore):
            raise ChunkError(f"{self.location} is on object storage: it has no local path")
        return self.store.root

    def __repr__(self) -> str:
        m = self.manifest
        return (f"{type(self).__name__}({self.location!r}, nodes={m.num_nodes}, edges={m.num_edges}, "
                f"edge_chunks={len(m.edge_chunks)}, node_chunks={len(m.node_chunks)})")

    @property
    def num_nodes(self) -> int:
        return self.manifest.num_nodes

    @property
    def num_edges(self) -> int:
        return self.manifest.num_edges

    @property
    def num_features(self) -> int:
        return self.manifest.num_features

    @property
    def num_classes(self) -> int:
        return self.manifest.num_classes

    @property
    def name(self) -> str:
        return self.manifest.name

    def node_bounds(self) -> np.ndarray:
        """``[J + 1]`` row offsets of the node chunks."""
        return np.array([0] + [c.hi for c in self.manifest.node_chunks], dtype=np.int64)

    def read(self, kind: str, j: int, name: str, *, verify: bool = True) -> np.ndarray:
        """Array ``name`` (``src``, ``dst`` / ``x``, ``y``, ``split``) of edge or node chunk ``j``,
        after checking its size, SHA-256, dtype and shape against the manifest."""
        chunks = self.manifest.edge_chunks if kind == "edges" else self.manifest.node_chunks
        c = chunks[j]
        rel = f"{name}.npy"
        entry = c.files.get(rel)
        where = f"{kind} chunk {c.name!r} of {self.location}"
        if entry is None:
            raise ChunkError(f"{where}: the manifest lists no {rel}")
        try:
            if isinstance(self.store, LocalStore):
                f: Path | io.BytesIO = verify_file(self.store.root / c.name / rel, entry.bytes,
                                                   entry.sha256 if verify else None)
            else:  # one GET per file, checked in memory
                f = io.BytesIO(self.store.child(c.name).read_checked(rel, entry.bytes,
                                                                     entry.sha256 if verify else None))
        except FileMismatch as e:
            if e.problem == "sha256":
                raise ChunkError(f"{where}: {rel} fails its checksum (sha256 recorded in "
                                 "manifest.json): it was altered or corrupted; rewrite the chunks") from None
            raise ChunkError(f"{where}: {rel} is missing or has the wrong size (expected "
                             f"{entry.bytes} bytes); rewrite the chunks") from None
        arr = np.load(f, allow_pickle=False)
        if arr.dtype.str != entry.dtype or list(arr.shape) != entry.shape:
            raise ChunkError(f"{where}: {rel} holds {arr.dtype.str} {list(arr.shape)}, the "
                             f"manifest recorded {entry.dtype} {entry.shape}")
        return arr

    def edges(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of edge chunk ``j``, ids checked against ``[0, N)``."""
        src, dst = self._edge_arrays(j)
        n, c = self.num_nodes, self.manifest.edge_chunks[j]
        for what, a in (("src", src), ("dst", dst)):
            if a.size and (a.min() < 0 or a.max() >= n):
                bad = int(a.min()) if a.min() < 0 else int(a.max())
                raise ChunkError(f"edge chunk {c.name!r} of {self.location}: {what} id {bad} is outside "
                                 f"[0, num_nodes={n})")
        return src, dst

    def _edge_arrays(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` of edge chunk ``j`` as stored (a reader of another format overrides it)."""
        return self.read("edges", j, "src"), self.read("edges", j, "dst")

    def iter_node_chunks(self) -> Iterator[tuple[int, int, dict[str, np.ndarray]]]:
        for j, c in enumerate(self.manifest.node_chunks):
            yield c.lo, c.hi, {name: self.read("nodes", j, name) for name in ("x", "y", "split")}

    def to_graph(self) -> Graph:
        """The whole graph in memory (for tests and small graphs only)."""
        n, m = self.num_nodes, self.manifest
        src = np.concatenate([self.edges(j)[0] for j in range(len(m.edge_chunks))]
                             or [np.zeros(0, np.int64)]).astype(np.int64, copy=False)
        dst = np.concatenate([self.edges(j)[1] for j in range(len(m.edge_chunks))]
                             or [np.zeros(0, np.int64)]).astype(np.int64, copy=False)
        order = np.argsort(dst, kind="stable")
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
        xs, ys, codes = [], [], []
        for _, _, arrs in self.iter_node_chunks():
            xs.append(arrs["x"])
            ys.append(arrs["y"])
            codes.append(arrs["split"])
        split = np.concatenate(codes)
        ids = {s: np.flatnonzero(split == c).astype(np.int64) for s, c in SPLIT_CODES.items()}
        return Graph(indptr=indptr, indices=src[order], x=np.concatenate(xs), y=np.concatenate(ys),
                     train_idx=ids["train"], val_idx=ids["val"], test_idx=ids["test"],
                     num_classes=m.num_classes, name=m.name).validate()


def open_chunks(location: str | Path, storage_options: Mapping[str, Any] | None = None) -> ChunkedGraph:
    """Open and validate a chunk directory (manifest and id ranges; files when read): a local
    path, or an object-store URI (``s3://bucket/chunks``, with fsspec's ``storage_options``),
    whose files are then read one object per array, each checked against the manifest."""
    try:
        store = open_store(location, storage_options)
    except StorageError as e:
        raise ChunkError(str(e)) from None
    where = store.uri
    if not store.exists("manifest.json"):
        raise ChunkError(f"{where} is not a chunked graph (no manifest.json); write one with "
                         "partition.chunked.write_chunks or ChunkWriter")
    try:
        raw = json.loads(store.read_bytes("manifest.json"))
    except (OSError, ValueError, StorageError) as e:
        raise ChunkError(f"{where}/manifest.json is unreadable ({e})") from None
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if version not in READ_VERSIONS:
        raise ChunkError(f"{where}: chunk format_version={version!r}, this code reads versions "
                         f"{', '.join(map(str, READ_VERSIONS))}; rewrite the chunks")
    try:
        m = ChunkManifest.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise ChunkError(f"{where}/manifest.json: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    _check_cover("edge", m.edge_chunks, m.num_edges, where)
    _check_cover("node", m.node_chunks, m.num_nodes, where)
    if not m.node_chunks:
        raise ChunkError(f"{where}: no node chunks; a graph needs at least one node")
    return ChunkedGraph(store, m)


class ChunkWriter:
    """Writes a chunk directory one chunk at a time, into a temporary directory renamed into
    place by :meth:`finish` (:meth:`abort` removes it). Edge chunks get consecutive edge-id
    ranges in the order they are added; node chunks must be added in row order."""

    def __init__(self, path: str | Path, *, name: str, num_nodes: int, num_features: int,
                 num_classes: int) -> None:
        self.path = Path(path)
        if self.path.exists():
            raise ChunkError(f"{self.path} already exists; remove it or choose another directory")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{self.path.name}-", dir=self.path.parent))
        self.name, self.num_nodes = name, num_nodes
        self.num_features, self.num_classes = num_features, num_classes
        self.edge_chunks: list[ChunkEntry] = []
        self.node_chunks: list[ChunkEntry] = []
        self.num_edges = 0
        self.split_counts = dict.fromkeys(SPLIT_CODES, 0)

    def _write(self, cname: str, arrays: dict[str, np.ndarray]) -> dict[str, FileEntry]:
        (self.tmp / cname).mkdir()
        return {f"{k}.npy": write_npy(self.tmp / cname / f"{k}.npy", a) for k, a in arrays.items()}

    def add_edges(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Append one edge chunk (``src -> dst``: integer ids in ``[0, num_nodes)``, stored as
        :func:`id_dtype`)."""
        src, dst = np.asarray(src), np.asarray(dst)
        if src.shape != dst.shape or src.ndim != 1:
            raise ChunkError(f"add_edges: src {list(src.shape)} and dst {list(dst.shape)} must be "
                             "1-d and of equal length")
        for what, a in (("src", src), ("dst", dst)):
            if a.size and (a.dtype.kind not in "iu" or a.min() < 0 or a.max() >= self.num_nodes):
                raise ChunkError(f"add_edges: {what} must hold integer ids in [0, num_nodes="
                                 f"{self.num_nodes}); got {a.dtype} in [{a.min()}, {a.max()}]")
        ids = id_dtype(self.num_nodes)
        cname = f"edges-{len(self.edge_chunks)}"
        files = self._write(cname, {"src": src.astype(ids, copy=False), "dst": dst.astype(ids, copy=False)})
        lo = self.num_edges
        self.num_edges += int(src.shape[0])
        self.edge_chunks.append(ChunkEntry(name=cname, lo=lo, hi=self.num_edges, files=files))

    def add_nodes(self, lo: int, x: np.ndarray, y: np.ndarray, split: np.ndarray) -> None:
        """Append the node chunk of rows ``[lo, lo + len(y))``."""
        hi = lo + int(y.shape[0])
        if x.shape != (y.shape[0], self.num_features) or split.shape != y.shape:
            raise ChunkError(f"add_nodes: x {list(x.shape)}, y {list(y.shape)} and split "
                             f"{list(split.shape)} must have {y.shape[0]} rows and {self.num_features} features")
        for s, c in SPLIT_CODES.items():
            self.split_counts[s] += int(np.count_nonzero(split == c))
        cname = f"nodes-{len(self.node_chunks)}"
        files = self._write(cname, {"x": np.asarray(x, dtype=np.float32), "y": np.asarray(y, dtype=np.int64),
                                    "split": np.asarray(split, dtype=np.int8)})
        self.node_chunks.append(ChunkEntry(name=cname, lo=lo, hi=hi, files=files))

    def finish(self, graph_hash: str | None = None) -> ChunkedGraph:
        """Write the manifest (computing the graph hash from the chunks unless given) and
        rename the directory into place."""
        try:
            m = ChunkManifest(
                format_version=CHUNK_FORMAT_VERSION, name=self.name, graph_hash="",
                num_nodes=self.num_nodes, num_edges=self.num_edges, num_features=self.num_features,
                num_classes=self.num_classes, num_train=self.split_counts["train"],
                num_val=self.split_counts["val"], num_test=self.split_counts["test"],
                edge_chunks=self.edge_chunks, node_chunks=self.node_chunks)
            _check_cover("node", m.node_chunks, m.num_nodes, self.path)
            if graph_hash is None:
                graph_hash = content_hash(ChunkedGraph(self.tmp, m))
            m = m.model_copy(update={"graph_hash": graph_hash})
            write_manifest(self.tmp / "manifest.json", m.model_dump(mode="json"))
            self.tmp.rename(self.path)
        except BaseException:
            self.abort()
            raise
        return ChunkedGraph(self.path, m)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def write_chunks(graph: Graph, path: str | Path, *, edges_per_chunk: int = 1 << 22,
                 nodes_per_chunk: int = 1 << 17) -> ChunkedGraph:
    """Convert an in-memory graph: edges in CSR order (row by row), nodes by row ranges."""
    if edges_per_chunk < 1 or nodes_per_chunk < 1:
        raise ChunkError(f"edges_per_chunk={edges_per_chunk}, nodes_per_chunk={nodes_per_chunk}: "
                         "must be >= 1")
    w = ChunkWriter(path, name=graph.name, num_nodes=graph.num_nodes, num_features=graph.num_features,
                    num_classes=graph.num_classes)
    try:
        for a in range(0, graph.num_edges, edges_per_chunk):
            b = min(a + edges_per_chunk, graph.num_edges)
            dst = np.searchsorted(graph.indptr, np.arange(a, b), side="right").astype(np.int64) - 1
            w.add_edges(graph.indices[a:b], dst)
        split = np.zeros(graph.num_nodes, dtype=np.int8)
        for s, c in SPLIT_CODES.items():
            split[graph.split_idx(s)] = c
        for a in range(0, graph.num_nodes, nodes_per_chunk):
            b = min(a + nodes_per_chunk, graph.num_nodes)
            w.add_nodes(a, graph.x[a:b], graph.y[a:b], split[a:b])
    except BaseException:
        w.abort()
        raise
    return w.finish(graph.content_hash())


def content_hash(chunks: ChunkedGraph) -> str:
    """``Graph.content_hash()`` of the graph the chunks hold, streamed chunk by chunk.

    Needs the edges in CSR order (grouped by ``dst`` ascending, as :func:`write_chunks` and
    the synthetic chunk writer store them); other orders get a hash of their own (the
    chunk-order hash below), which still changes whenever the content does.
    """
    m = chunks.manifest
    n = m.num_nodes
    h = hashlib.sha256()
    in_order = True
    last = 0
    deg = np.zeros(n, dtype=np.int64)
    for j in range(len(m.edge_chunks)):
        dst = chunks.read("edges", j, "dst")
        if dst.size and (dst[0] < last or np.any(np.diff(dst) < 0)):
            in_order = False
        last = int(dst[-1]) if dst.size else last
        deg += np.bincount(dst, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    del deg
    h.update(str((indptr.dtype.str, indptr.shape)).encode())
    _update(h, indptr)
    del indptr
    if not in_order:
        h.update(b"chunk-order")
    h.update(str((np.dtype(np.int64).str, (m.num_edges,))).encode())
    for j in range(len(m.edge_chunks)):  # the hash of int64 ids, whatever the chunks store
        _update(h, chunks.read("edges", j, "src").astype(np.int64, copy=False))
    h.update(str((np.dtype(np.float32).str, (n, m.num_features))).encode())
    for j in range(len(m.node_chunks)):
        _update(h, chunks.read("nodes", j, "x"))
    h.update(str((np.dtype(np.int64).str, (n,))).encode())
    for j in range(len(m.node_chunks)):
        _update(h, chunks.read("nodes", j, "y"))
    for s, code in SPLIT_CODES.items():
        count = getattr(m, f"num_{s}")
        h.update(str((np.dtype(np.int64).str, (count,))).encode())
        for j, c in enumerate(m.node_chunks):
            ids = np.flatnonzero(chunks.read("nodes", j, "split") == code).astype(np.int64) + c.lo
            _update(h, ids)
    h.update(str(m.num_classes).encode())
    return h.hexdigest()[:16]


def _update(h: Any, a: np.ndarray) -> None:
    """Feed an array's bytes to a hash without copying (as ``Graph.content_hash`` does)."""
    a = np.ascontiguousarray(a)
    if a.size:
        h.update(memoryview(a.reshape(-1)).cast("B"))  # type: ignore[arg-type]
