"""Graphs stored as Parquet tables (``source: parquet``), local or on object storage.

Two tables, each one ``.parquet`` file or a directory of them (files read in name order,
names starting with ``_`` or ``.`` skipped, as Spark and pyarrow write them); the column
names come from the config (:class:`~gnntrain.config.ParquetDataset`):

=====================================  ===================================================
edge table (``dataset.edges``)         one row per directed edge ``src -> dst``
  ``src``, ``dst``                     integer node ids in ``[0, num_nodes)``
  ``edge_type`` (optional)             integers or strings; checked, not carried
  ``weight`` (optional)                numbers; checked, not carried
node table (``dataset.nodes``,         one row per node
optional)
  ``id`` (optional)                    integer ids, each of ``0..N-1`` once (rows in any
                                       order); without it row ``i`` is node ``i``
  ``features`` (optional)              one list column (``list<float>`` or
                                       ``fixed_size_list``, F values a row), or F numeric
                                       columns
  ``label`` (optional)                 integer class ids; null or ``-1``: unlabeled
  ``masks`` (optional)                 three boolean columns: train, val, test
=====================================  ===================================================

Splits are three boolean mask columns because that is how PyG's ``Data`` holds them
(``train_mask`` / ``val_mask`` / ``test_mask``): a PyG graph becomes a node table with one
line per column, and OGB's index splits become masks with ``mask[idx] = True``. Without
masks the labeled nodes are split at random (``train_frac``, ``val_frac``).

A path is a local path (relative ones resolve as every ``dataset.path`` does) or a URI the
storage layer opens (:func:`partition.storage.open_store`: ``s3://``, ``gs://``, every
fsspec protocol, with ``dataset.storage_options``); pyarrow reads remote files through the
store's fsspec file system. Before any column is read, every file's footer is opened and
each configured column checked for presence and type, so a missing path, a missing
column or a wrong dtype fails naming the file, the column and the fix. Node ids are
checked file by file while the edges are read. The arrays then go through
:func:`~gnntrain.data.build.build_graph`, as every loader's do, so the same graph stored
as Parquet and as ``.npz`` has the same content hash and the same partition sets.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gnntrain.data.build import RawGraph, masks_to_splits
from gnntrain.data.errors import DataError
from gnntrain.data.paths import resolve_path
from partition.storage import FsspecStore, StorageError, is_remote, local_path, open_store

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    from pyarrow.fs import FSSpecHandler, PyFileSystem
except ImportError:  # the module is imported only when a config asks for source: parquet
    raise DataError("dataset.source='parquet' reads with pyarrow, which is not installed; "
                    "pip install 'gnntrain[parquet]'") from None

if TYPE_CHECKING:
    from gnntrain.config import ParquetDataset, ParquetEdges, ParquetNodes

__all__ = ["load_parquet"]


# ---- column kinds: what each configured column may hold -----------------------------------

def _is_number(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _is_type(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_dictionary(t))


def _is_number_list(t: pa.DataType) -> bool:
    lists = pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
    return bool(lists and _is_number(t.value_type))


@dataclass(frozen=True)
class _Kind:
    """What a column must hold: a type test and the words an error uses for it."""

    test: Callable[[Any], bool]
    what: str
    fix: str


_IDS = _Kind(pa.types.is_integer, "integer node ids", "write the ids as int32/int64")
_NUMBERS = _Kind(_is_number, "numbers", "write it as a float or integer column")
_LABELS = _Kind(_is_number, "integer class ids", "write the labels as int64 (null for unlabeled)")
_MASK = _Kind(lambda t: pa.types.is_boolean(t) or pa.types.is_integer(t), "a boolean mask",
              "write it as a bool column")
_TYPES = _Kind(_is_type, "edge types (integers or strings)", "write it as an integer or string column")
_FEATURE_LIST = _Kind(_is_number_list, "a list of numbers per row",
                      "write the features as list<float32> (or give a list of scalar columns)")


# ---- one table: its files, checked before any column is read ------------------------------

@dataclass(frozen=True)
class ParquetTable:
    """An opened Parquet table: ``where`` (the path or URI, for messages), the config
    ``field`` it came from, and its files (pyarrow fragments, in name order)."""

    where: str
    field: str
    fragments: tuple[Any, ...]

    def check(self, columns: Mapping[str, tuple[str, _Kind]]) -> None:
        """Every file has every column of ``columns`` (config key -> (column, kind)) with a
        type of its kind; else one error naming the file, the column and the fix."""
        for frag in self.fragments:
            schema = self._schema(frag)
            for key, (col, kind) in columns.items():
                if col not in schema.names:
                    raise DataError(f"{self.field}: {frag.path} has no column {col!r} (its columns: "
                                    f"{', '.join(schema.names)}); set {self.field}.{key} to the "
                                    f"column holding {kind.what}")
                t = schema.field(col).type
                if not kind.test(t):
                    raise DataError(f"{self.field}: {frag.path} column {col!r} ({self.field}.{key}) "
                                    f"is {t}, expected {kind.what}; {kind.fix}")

    def _schema(self, frag: Any) -> pa.Schema:
        try:
            return frag.physical_schema
        except Exception as e:  # ArrowInvalid for a file that is not Parquet, back-end errors
            raise DataError(f"{self.field}: {frag.path} is not a readable Parquet file "
                            f"({type(e).__name__}: {e})") from None

    def read(self, frag: Any, columns: list[str]) -> pa.Table:
        try:
            return frag.to_table(columns=columns)
        except Exception as e:
            raise DataError(f"{self.field}: reading {frag.path} failed ({type(e).__name__}: "
                            f"{e})") from None


def open_table(location: str, field: str, storage_options: Mapping[str, Any]) -> ParquetTable:
    """The Parquet table at ``location`` (a file or a directory of files, local or a URI)."""
    if is_remote(location):
        try:
            store = open_store(location, storage_options)
        except StorageError as e:
            raise DataError(f"{field}.path: {e}") from None
        assert isinstance(store, FsspecStore)  # a remote location opens an fsspec store
        source, fs = store.path, PyFileSystem(FSSpecHandler(store.fs))
    else:
        path = resolve_path(local_path(location), field=f"{field}.path")  # a path or file:// URI
        if not path.exists():
            raise DataError(f"{field}.path={location!r}: {path} does not exist; expected a Parquet "
                            "file or a directory of Parquet files")
        source, fs = str(path), None
    try:
        dataset = pads.dataset(source, format="parquet", filesystem=fs)
    except FileNotFoundError:
        raise DataError(f"{field}.path={location!r} does not exist; expected a Parquet file or a "
                        "directory of Parquet files (check the URI, the bucket and the prefix)") from None
    except Exception as e:  # not Parquet (ArrowInvalid), or the store refused (botocore, ...)
        raise DataError(f"{field}.path={location!r}: cannot open it as Parquet ({type(e).__name__}: "
                        f"{e}); check the path, and for a URI the endpoint "
                        "(dataset.storage_options) and the credentials") from None
    fragments = tuple(dataset.get_fragments())
    if not fragments:
        raise DataError(f"{field}.path={location!r} holds no Parquet files")
    return ParquetTable(where=location, field=field, fragments=fragments)


# ---- columns to numpy ----------------------------------------------------------------------

def column_array(col: pa.ChunkedArray | pa.Array, *, fill: Any = None) -> np.ndarray:
    if fill is not None and col.null_count:
        col = pc.fill_null(col, fill)
    return np.asarray(col.to_numpy(zero_copy_only=False))


def _feature_list(col: pa.ChunkedArray, where: str) -> np.ndarray:
    """A list column as a [rows, F] matrix; every row must hold F values."""
    arr = col.combine_chunks()
    if arr.null_count:
        raise DataError(f"features in {where}: row {int(np.flatnonzero(column_array(arr.is_null()))[0])} "
                        "is null; every node needs a feature list")
    if pa.types.is_fixed_size_list(arr.type):
        width = arr.type.list_size
    else:
        lengths = column_array(arr.value_lengths())
        width = int(lengths[0]) if lengths.size else 0
        if lengths.size and (lengths != width).any():
            row = int(np.flatnonzero(lengths != width)[0])
            raise DataError(f"features in {where}: row {row} has {int(lengths[row])} values, row 0 "
                            f"has {width}; every row must hold the same number of features")
    return column_array(arr.flatten(), fill=np.nan).reshape(len(arr), width)


# ---- the two tables ------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeRows:
    """The node table's arrays, in node id order."""

    num_nodes: int
    x: np.ndarray | None
    y: np.ndarray | None
    masks: dict[str, np.ndarray]


def node_columns(cfg: ParquetNodes) -> dict[str, tuple[str, _Kind]]:
    cols: dict[str, tuple[str, _Kind]] = {}
    if cfg.id is not None:
        cols["id"] = (cfg.id, _IDS)
    if isinstance(cfg.features, str):
        cols["features"] = (cfg.features, _FEATURE_LIST)
    elif cfg.features is not None:
        cols |= {f"features[{i}]": (c, _NUMBERS) for i, c in enumerate(cfg.features)}
    if cfg.label is not None:
        cols["label"] = (cfg.label, _LABELS)
    for i, c in enumerate(cfg.masks or ()):
        cols[f"masks[{i}]"] = (c, _MASK)
    return cols


def read_nodes(table: ParquetTable, cfg: ParquetNodes) -> NodeRows:
    """Read the node table's columns (already checked) and put the rows in id order."""
    names = list(dict.fromkeys(c for c, _ in node_columns(cfg).values()))
    data = pa.concat_tables([table.read(f, names) for f in table.fragments])
    where = table.where
    # a table read for no column (a count alone) has no rows to concatenate: count them
    n = data.num_rows if names else sum(f.count_rows() for f in table.fragments)
    order = _id_order(data.column(cfg.id), f"{where} column {cfg.id!r}") if cfg.id else None

    def rows(a: np.ndarray) -> np.ndarray:
        return a if order is None else a[order]

    x = None if cfg.features is None else rows(feature_matrix(data, cfg, where))
    y = None if cfg.label is None else rows(label_column(data.column(cfg.label)))
    masks = {s: rows(mask_column(data.column(c))) for s, c in zip(("train", "val", "test"), cfg.masks or (), strict=False)}
    return NodeRows(num_nodes=n, x=x, y=y, masks=masks)


def feature_matrix(data: pa.Table, cfg: ParquetNodes, where: str) -> np.ndarray:
    """The feature matrix of ``data``'s rows: one list column or F scalar columns."""
    if isinstance(cfg.features, str):
        return _feature_list(data.column(cfg.features), f"{where} column {cfg.features!r}")
    assert cfg.features is not None
    return np.column_stack([column_array(data.column(c), fill=np.nan) for c in cfg.features])


def label_column(col: pa.ChunkedArray) -> np.ndarray:
    """Class ids with null as -1 (unlabeled); a float column keeps NaN for build_graph to read."""
    return column_array(col, fill=-1 if pa.types.is_integer(col.type) else np.nan)


def mask_column(col: pa.ChunkedArray) -> np.ndarray:
    """A split mask; null: not in the split."""
    return column_array(col, fill=False if pa.types.is_boolean(col.type) else 0)


def _id_order(col: pa.ChunkedArray, where: str) -> np.ndarray:
    """The row order that sorts the node id column, which must hold each of 0..N-1 once."""
    if col.null_count:
        raise DataError(f"node ids in {where}: {col.null_count} null ids; every row needs its node id")
    ids = column_array(col).astype(np.int64, copy=False)
    n = ids.size
    bad = (ids < 0) | (ids >= n)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"node ids in {where}: id {int(ids[row])} (row {row}) is outside [0, {n}) "
                        f"for a table of {n} rows; ids must be 0-based, one row per node")
    order = np.argsort(ids, kind="stable")
    dup = ids[order][1:] == ids[order][:-1]
    if dup.any():
        raise DataError(f"node ids in {where}: id {int(ids[order][1:][dup][0])} appears twice; each "
                        "node has exactly one row")
    return order


def edge_columns(cfg: ParquetEdges) -> dict[str, tuple[str, _Kind]]:
    cols = {"src": (cfg.src, _IDS), "dst": (cfg.dst, _IDS)}
    if cfg.edge_type is not None:
        cols["edge_type"] = (cfg.edge_type, _TYPES)
    if cfg.weight is not None:
        cols["weight"] = (cfg.weight, _NUMBERS)
    return cols


def read_edges(table: ParquetTable, cfg: ParquetEdges, num_nodes: int | None, *,
               typed: tuple[tuple[str, int | None], tuple[str, int | None]] | None = None,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Source and destination ids of every file, in file order. With the node count known
    (``num_nodes``; for a relation between node types ``typed`` gives each end's type and
    count instead), each file's ids are checked against it, so an error names the file and
    the row."""
    if typed is None:
        bounds = {key: (f"[0, num_nodes={num_nodes})", num_nodes) for key in ("src", "dst")}
    else:
        bounds = {key: (f"[0, {n}) of node type {t!r}", n) for key, (t, n) in zip(("src", "dst"), typed, strict=True)}
    ids_of: dict[str, list[np.ndarray]] = {"src": [], "dst": []}
    for frag in table.fragments:
        data = table.read(frag, [cfg.src, cfg.dst])
        for key, col in (("src", cfg.src), ("dst", cfg.dst)):
            a = data.column(col)
            if a.null_count:
                raise DataError(f"{table.field}: {frag.path} column {col!r} has {a.null_count} null "
                                f"ids; every edge needs both ends ({table.field}.{key})")
            ids = column_array(a)
            ids_of[key].append(ids)
            label, bound = bounds[key]
            if bound is not None and ids.size and (ids.min() < 0 or ids.max() >= bound):
                row = int(np.flatnonzero((ids < 0) | (ids >= bound))[0])
                raise DataError(f"{table.field}: {frag.path} column {col!r} holds node id "
                                f"{int(ids[row])} (row {row} of that file), outside {label}; "
                                "ids must be 0-based, below the node table's row count (or the "
                                "configured node count)")
    return _concat(ids_of["src"]), _concat(ids_of["dst"])


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.empty(0, np.int64)


# ---- the source ----------------------------------------------------------------------------

def load_parquet(cfg: ParquetDataset) -> RawGraph:
    """Read the tables ``cfg`` names (see the module doc) into a :class:`RawGraph`: every
    file and column is checked before any data is read."""
    edges = open_table(cfg.edges.path, "dataset.edges", cfg.storage_options)
    edges.check(edge_columns(cfg.edges))
    node_cfg = cfg.nodes
    node_table = None
    if node_cfg is not None:
        node_table = open_table(node_cfg.path, "dataset.nodes", cfg.storage_options)
        node_table.check(node_columns(node_cfg))
    for key in ("edge_type", "weight"):
        if getattr(cfg.edges, key) is not None:
            warnings.warn(f"dataset.edges.{key}={getattr(cfg.edges, key)!r}: the column is checked "
                          "but not used; the untyped training graph carries no edge types or "
                          "weights", stacklevel=2)
    where = {"source": edges.where,
             "edges": f"{edges.where} columns {cfg.edges.src!r} -> {cfg.edges.dst!r}"}
    if node_table is None or node_cfg is None:
        src, dst = read_edges(edges, cfg.edges, cfg.num_nodes)
        return RawGraph(name=cfg.name, num_nodes=_count_from_edges(cfg, src, dst), src=src,
                        dst=dst, where=where)
    nodes = read_nodes(node_table, node_cfg)
    if cfg.num_nodes is not None and cfg.num_nodes != nodes.num_nodes:
        raise DataError(f"dataset.num_nodes={cfg.num_nodes} but the node table {node_table.where} has "
                        f"{nodes.num_nodes} rows; drop num_nodes or give one row per node")
    n = nodes.num_nodes
    src, dst = read_edges(edges, cfg.edges, n)
    where |= {"x": f"{node_table.where} column(s) {node_cfg.features!r}",
              "y": f"{node_table.where} column {node_cfg.label!r}",
              "splits": f"{node_table.where} columns {node_cfg.masks!r}"}
    return RawGraph(name=cfg.name, num_nodes=n, src=src, dst=dst, x=nodes.x, y=nodes.y,
                    splits=masks_to_splits(nodes.masks, cfg.split, n, where["splits"]), where=where)


def _count_from_edges(cfg: ParquetDataset, src: np.ndarray, dst: np.ndarray) -> int:
    """The node count of a graph without a node table: ``num_nodes``, else max id + 1."""
    if cfg.num_nodes is not None:
        return cfg.num_nodes
    if not src.size:
        raise DataError(f"dataset.edges.path={cfg.edges.path!r}: no edges and no node table to "
                        "tell the node count; set dataset.num_nodes")
    return int(max(src.max(), dst.max())) + 1

