"""Parquet tables read as a chunked graph: ``source: chunks`` with ``edges`` and ``nodes``.

Row group ``i`` of the edge table (files in name order, as :mod:`gnntrain.data.parquet`
reads them) is edge chunk ``i``, row group ``j`` of the node table node chunk ``j``; every
read takes one row group's columns, so each Ray task of the partitioning pipeline
(:mod:`partition.parallel`) reads only its own, straight from the path or the bucket.

:func:`open_parquet_chunks` checks every file's columns and types, reads the footers for the
row groups, scans the node table's small columns once (ids in order, the class ids present,
the split sizes, masks disjoint and on labeled nodes) and hashes the graph chunk by chunk
(:func:`partition.chunked.content_hash`: tables whose edges are grouped by destination hash
as the same graph does in memory). It does that work in a child process of its own, which
hands back only the row groups, the manifest and the class ids (JSON), so the process that
coordinates the pipeline never imports pyarrow nor holds what it read: its memory stays
that of a run from a local chunk directory. The edges are taken as stored (no cleaning);
the node table's features, label and masks are required.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gnntrain.data.errors import DataError
from partition.chunked import (
    CHUNK_FORMAT_VERSION,
    SPLIT_CODES,
    ChunkedGraph,
    ChunkEntry,
    ChunkError,
    ChunkManifest,
    content_hash,
    id_dtype,
)
from partition.labels import dense_class_ids
from partition.storage import FsspecStore, Store, is_remote, open_store

if TYPE_CHECKING:
    import pyarrow as pa

    from gnntrain.config import ChunksDataset, ParquetNodes
    from gnntrain.data.parquet import ParquetTable

__all__ = ["ParquetChunks", "open_parquet_chunks", "scan_tables"]


def _tables() -> Any:
    """:mod:`gnntrain.data.parquet` (its column readers), imported where a table is read:
    it imports pyarrow."""
    from gnntrain.data import parquet

    return parquet


@dataclass(frozen=True)
class _RowGroup:
    """One row group: its file (as the table's file system names it), its index in the file
    and the rows ``[lo, hi)`` of the table it holds."""

    file: str
    index: int
    lo: int
    hi: int


@dataclass(frozen=True)
class _TableGroups:
    """A table's location (path or URI) and its row groups in order, with each file's size
    when it was opened (a file changed since is refused when read)."""

    location: str
    groups: tuple[_RowGroup, ...]
    sizes: Mapping[str, int]


class ParquetChunks(ChunkedGraph):
    """Parquet tables read as a chunked graph (module doc): built by
    :func:`open_parquet_chunks`; every read takes one row group's columns."""

    def __init__(self, cfg: ChunksDataset, manifest: ChunkManifest, edges: _TableGroups,
                 nodes: _TableGroups, classes: np.ndarray | None) -> None:
        assert cfg.edges is not None and cfg.nodes is not None
        # no store opened here (super().__init__ would): reads go through the tables' files,
        # and a process that only holds this object (the coordinator) needs no client library
        self.manifest = manifest
        self.cfg, self.edge_cfg, self.node_cfg = cfg, cfg.edges, cfg.nodes
        self.tables = {"edges": edges, "nodes": nodes}
        self.classes = classes  # the class ids present, when they are remapped to 0..C-1
        self._fs: dict[str, Any] = {}
        self._small: tuple[int, dict[str, np.ndarray]] | None = None

    @property
    def store(self) -> Store:
        """The edge table's location as a store (opened when asked for)."""
        return open_store(self.tables["edges"].location, self.cfg.storage_options)

    @property
    def location(self) -> str:
        """The edge table: a local path or a URI."""
        return self.tables["edges"].location

    def __getstate__(self) -> dict[str, Any]:  # file systems are opened again where it lands
        return {**self.__dict__, "_fs": {}, "_small": None}

    def _file_system(self, location: str) -> Any:
        from pyarrow.fs import FSSpecHandler, LocalFileSystem, PyFileSystem

        if location not in self._fs:
            if is_remote(location):
                store = open_store(location, self.cfg.storage_options)
                assert isinstance(store, FsspecStore)
                self._fs[location] = PyFileSystem(FSSpecHandler(store.fs))
            else:
                self._fs[location] = LocalFileSystem()
        return self._fs[location]

    def _row_group(self, kind: str, j: int, columns: list[str]) -> pa.Table:
        import pyarrow.parquet as pq

        table = self.tables[kind]
        g = table.groups[j]
        where = f"{kind} row group {g.index} of {g.file} ({table.location})"
        try:
            with self._file_system(table.location).open_input_file(g.file) as f:
                if f.size() != table.sizes[g.file]:
                    raise ChunkError(f"{where}: the file has {f.size()} bytes, {table.sizes[g.file]} when "
                                     "the tables were opened; it changed during the run: start again")
                data = pq.ParquetFile(f).read_row_group(g.index, columns=columns)
        except ChunkError:
            raise
        except Exception as e:  # the store refused, the file is damaged
            raise ChunkError(f"{where}: reading failed ({type(e).__name__}: {e})") from None
        if data.num_rows != g.hi - g.lo:
            raise ChunkError(f"{where}: {data.num_rows} rows, {g.hi - g.lo} when the tables were opened; "
                             "the file changed during the run: start again")
        return data

    def _edge_arrays(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        c = self.edge_cfg
        data = self._row_group("edges", j, [c.src, c.dst])
        ids = id_dtype(self.num_nodes)
        out = []
        for col in (c.src, c.dst):
            a = data.column(col)
            if a.null_count:
                raise ChunkError(f"edge row group {j} of {self.tables['edges'].location}: column {col!r} has "
                                 f"{a.null_count} null ids; every edge needs both ends")
            out.append(_tables().column_array(a).astype(ids, copy=False))
        del data
        _release()
        return out[0], out[1]

    def _labels_and_split(self, j: int) -> dict[str, np.ndarray]:
        """Labels (unlabeled 0, remapped class ids) and split codes of node chunk ``j``."""
        if self._small is not None and self._small[0] == j:
            return self._small[1]
        t, c = _tables(), self.node_cfg
        assert c.label is not None and c.masks is not None
        data = self._row_group("nodes", j, [c.label, *c.masks])
        y = _class_ids(data.column(c.label), c.label, f"node row group {j} of {self.tables['nodes'].location}")
        labeled = y >= 0
        if self.classes is not None:
            y = np.where(labeled, np.searchsorted(self.classes, y), y)
        split = np.zeros(y.shape[0], dtype=np.int8)
        for s, col in zip(SPLIT_CODES, c.masks, strict=True):
            split[t.mask_column(data.column(col)).astype(bool)] = SPLIT_CODES[s]
        del data
        _release()
        self._small = (j, {"y": np.where(labeled, y, 0), "split": split})
        return self._small[1]

    def read(self, kind: str, j: int, name: str, *, verify: bool = True) -> np.ndarray:
        """Array ``name`` of chunk ``j`` (see :meth:`ChunkedGraph.read`), from its row group."""
        if kind == "edges":
            return self._edge_arrays(j)[("src", "dst").index(name)]
        if name != "x":
            return self._labels_and_split(j)[name]
        c = self.node_cfg
        cols = [c.features] if isinstance(c.features, str) else list(c.features or ())
        where = f"node row group {j} of {self.tables['nodes'].location}"
        data = self._row_group("nodes", j, cols)
        x = np.ascontiguousarray(_tables().feature_matrix(data, c, where), dtype=np.float32)
        del data
        _release()
        if x.shape[1] != self.num_features:
            raise ChunkError(f"{where}: {x.shape[1]} features a row, row group 0 has {self.num_features}; "
                             "every row must hold the same number of features")
        finite = np.isfinite(x)
        if not finite.all():
            row, col = (int(v) for v in np.argwhere(~finite)[0])
            raise ChunkError(f"{where}: row {row} feature {col} is {x[row, col]}; features must be finite "
                             "(no null, NaN or Inf)")
        return x


def _class_ids(col: pa.ChunkedArray, name: str, where: str) -> np.ndarray:
    """A label column as int64 class ids, -1 where unlabeled (null, -1, or NaN in a float
    column); fractional labels are refused."""
    y = _tables().label_column(col)
    if y.dtype.kind == "f":
        if (np.isfinite(y) & (y != np.round(y))).any():
            raise DataError(f"{where}: column {name!r} holds fractional labels; labels must be whole numbers")
        y = np.where(np.isfinite(y), y, -1)
    return np.asarray(y, dtype=np.int64)


def _release() -> None:
    """Hand the memory of freed Arrow buffers back to the system (pyarrow's pool keeps it)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _groups(table: ParquetTable) -> _TableGroups:
    """A table's row groups in file order, read from the files' footers."""
    groups: list[_RowGroup] = []
    sizes: dict[str, int] = {}
    lo = 0
    for frag in table.fragments:
        md = frag.metadata
        sizes[frag.path] = int(frag.filesystem.get_file_info(frag.path).size)
        for i in range(md.num_row_groups):
            rows = md.row_group(i).num_rows
            groups.append(_RowGroup(frag.path, i, lo, lo + rows))
            lo += rows
    return _TableGroups(table.where, tuple(groups), sizes)


def _scan_nodes(cg: ParquetChunks, cfg: ParquetNodes, where: str) -> tuple[np.ndarray, dict[str, int]]:
    """One pass over the node table's small columns: ids in order, the class ids present,
    split sizes, masks disjoint and on labeled nodes only."""
    assert cfg.label is not None and cfg.masks is not None
    t = _tables()
    present: np.ndarray = np.zeros(0, np.int64)
    counts = dict.fromkeys(SPLIT_CODES, 0)
    for j, g in enumerate(cg.tables["nodes"].groups):
        cols = [cfg.label, *cfg.masks] + ([cfg.id] if cfg.id else [])
        data = cg._row_group("nodes", j, cols)
        at = f"{where}: row group {g.index} of {g.file}"
        if cfg.id:
            got = t.column_array(data.column(cfg.id).fill_null(-1)).astype(np.int64)
            bad = np.flatnonzero(got != np.arange(g.lo, g.hi))
            if bad.size:
                raise DataError(f"{at}: row {int(bad[0])} has id {int(got[bad[0]])}, expected {g.lo + int(bad[0])}; "
                                "chunked tables need the node rows in id order (sort the table by "
                                f"{cfg.id!r}), or use source: parquet, which reads ids in any order")
        y = _class_ids(data.column(cfg.label), cfg.label, at)
        if (y < -1).any():
            raise DataError(f"{at}: column {cfg.label!r} holds label {int(y.min())}; labels must be >= 0, "
                            "or null / -1 for an unlabeled node")
        present = np.union1d(present, y[y >= 0])
        owner = np.zeros(y.shape[0], dtype=np.int8)
        for s, col in zip(SPLIT_CODES, cfg.masks, strict=True):
            m = t.mask_column(data.column(col)).astype(bool)
            if (m & (owner > 0)).any():
                raise DataError(f"{at}: row {int(np.flatnonzero(m & (owner > 0))[0])} is in two of the masks "
                                f"{cfg.masks}; train/val/test must be disjoint")
            if (m & (y < 0)).any():
                raise DataError(f"{at}: row {int(np.flatnonzero(m & (y < 0))[0])} is in the {s} mask but "
                                "has no label; every split node needs one")
            owner[m] = SPLIT_CODES[s]
            counts[s] += int(m.sum())
    if counts["train"] == 0:
        raise DataError(f"{where}: the train mask {cfg.masks[0]!r} is empty; at least one training node is needed")
    return present, counts


def scan_tables(cfg: ChunksDataset) -> ParquetChunks:
    """What :func:`open_parquet_chunks` does, in this process: every file's columns checked,
    the node table scanned, the graph hashed chunk by chunk."""
    assert cfg.edges is not None and cfg.nodes is not None
    t = _tables()
    edges = t.open_table(cfg.edges.path, "dataset.edges", cfg.storage_options)
    edges.check(t.edge_columns(cfg.edges))
    nodes = t.open_table(cfg.nodes.path, "dataset.nodes", cfg.storage_options)
    nodes.check(t.node_columns(cfg.nodes))
    eg, ng = _groups(edges), _groups(nodes)
    num_nodes = ng.groups[-1].hi if ng.groups else 0
    if num_nodes < 1:
        raise DataError(f"dataset.nodes.path={cfg.nodes.path!r}: the node table has no rows")
    feats = cfg.nodes.features
    width = len(feats) if isinstance(feats, list) else 0

    def chunks(kind: str, groups: _TableGroups) -> list[ChunkEntry]:
        return [ChunkEntry(name=f"{kind}-{j}", lo=g.lo, hi=g.hi, files={}) for j, g in enumerate(groups.groups)]

    def manifest(**fields: Any) -> ChunkManifest:
        return ChunkManifest(format_version=CHUNK_FORMAT_VERSION, name=cfg.name, graph_hash="",
                             num_nodes=num_nodes, num_edges=eg.groups[-1].hi if eg.groups else 0,
                             edge_chunks=chunks("edges", eg), node_chunks=chunks("nodes", ng), **fields)

    probe = ParquetChunks(cfg, manifest(num_features=width, num_classes=1, num_train=0, num_val=0,
                                        num_test=0), eg, ng, None)
    if isinstance(feats, str):  # a list column: its width is row group 0's
        first = probe._row_group("nodes", 0, [feats]).slice(0, 1)
        width = t.feature_matrix(first, cfg.nodes, nodes.where).shape[1]
    present, counts = _scan_nodes(probe, cfg.nodes, "dataset.nodes")
    classes = None
    if cfg.num_classes is not None:
        if present.size and present[-1] >= cfg.num_classes:
            raise DataError(f"dataset.num_classes={cfg.num_classes} but the node table holds label "
                            f"{int(present[-1])}; labels must be in [0, num_classes)")
        num_classes = cfg.num_classes
    else:
        num_classes = int(present.size) or 1
        classes = dense_class_ids(present, np.ones(present.size, bool), None,
                                  f"{nodes.where} column {cfg.nodes.label!r}").stored
    m = manifest(num_features=width, num_classes=num_classes, num_train=counts["train"],
                 num_val=counts["val"], num_test=counts["test"])
    cg = ParquetChunks(cfg, m, eg, ng, classes)
    cg.manifest = m.model_copy(update={"graph_hash": content_hash(cg)})
    return cg


def open_parquet_chunks(cfg: ChunksDataset) -> ParquetChunks:
    """The Parquet tables of ``cfg`` (``source: chunks`` with ``edges`` and ``nodes``) as a
    chunked graph, opened by :func:`scan_tables` in a child process (module doc); its
    :class:`DataError` is raised here with the same message."""
    run = subprocess.run([sys.executable, "-m", __name__], input=cfg.model_dump_json(), capture_output=True,
                         text=True)
    if run.returncode != 0:
        lines = run.stderr.strip().splitlines() or [f"exit status {run.returncode}"]
        if run.returncode == 2 and lines[-1].startswith("error: "):
            raise DataError(lines[-1].removeprefix("error: "))
        raise DataError(f"opening the Parquet tables of dataset {cfg.name!r} failed in its process: {lines[-1]}")
    state = json.loads(run.stdout)
    tables = {k: _TableGroups(v["location"], tuple(_RowGroup(*g) for g in v["groups"]), v["sizes"])
              for k, v in state["tables"].items()}
    classes = None if state["classes"] is None else np.asarray(state["classes"], dtype=np.int64)
    return ParquetChunks(cfg, ChunkManifest.model_validate(state["manifest"]), tables["edges"], tables["nodes"],
                         classes)


def _main() -> int:
    """The child of :func:`open_parquet_chunks`: the config (JSON) on stdin, the opened
    tables (JSON) on stdout, or ``error: <message>`` on stderr and exit status 2."""
    from gnntrain.config import ChunksDataset

    try:
        cg = scan_tables(ChunksDataset.model_validate_json(sys.stdin.read()))
    except (DataError, ChunkError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tables = {k: {"location": v.location, "groups": [list(asdict(g).values()) for g in v.groups],
                  "sizes": dict(v.sizes)} for k, v in cg.tables.items()}
    json.dump({"manifest": cg.manifest.model_dump(mode="json"), "tables": tables,
               "classes": None if cg.classes is None else cg.classes.tolist()}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
