"""``source: chunks`` over Parquet tables: the row groups are the chunks, read by the Ray
pipeline's tasks straight from the store; the same graph gives the same hash and the same
partition set, file for file, as its chunk directory and its in-memory build; bad tables
fail when opened, naming the file, the row and the fix. ``open_chunk_dataset`` opens the
tables in a child process (``scan_tables`` there); tests of what opening checks call
``scan_tables`` here, and two go through the child."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnntrain.config import ConfigError, parse_dataset
from gnntrain.data import DataError
from gnntrain.data.load import open_chunk_dataset
from gnntrain.data.parquet_chunks import scan_tables
from partition import PartitionConfig, build_partition_set
from partition.chunked import ChunkError, write_chunks
from partition.graph import Graph
from partition.parallel import run_chunks
from partition.storage import Store, open_store

ROWS = 40  # rows per block of the pipeline
MASKS = ["train_mask", "val_mask", "test_mask"]


def write_tables(g: Graph, store: Store, *, ids: np.ndarray | None = None) -> None:
    """``g`` as a user's tables: edges in two files of several row groups (grouped by
    destination, repeats and self-loops as stored), nodes in two files with an id column
    (``ids``, default ``0..N-1``) and a list column of features."""
    src, dst = g.edge_index()
    edges = pa.table({"u": src, "v": dst.astype(np.int32)})
    half, n = edges.num_rows // 2, g.num_nodes
    feats = pa.FixedSizeListArray.from_arrays(pa.array(g.x.ravel()), g.num_features)
    nodes = pa.table({"id": np.arange(n) if ids is None else ids, "feat": feats, "label": g.y,
                      **{m: g.mask(m.split("_")[0]) for m in MASKS}})
    for rel, table, rows in (("edges/a.parquet", edges.slice(0, half), 97), ("edges/b.parquet", edges.slice(half), 97),
                             ("nodes/a.parquet", nodes.slice(0, n // 2), 25), ("nodes/b.parquet", nodes.slice(n // 2), 25)):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=rows)
        store.write_bytes(rel, sink.getvalue().to_pybytes())


def tables_config(g: Graph, where: str, **extra: Any) -> Any:
    return parse_dataset({"name": g.name, "source": "chunks", **extra,
                          "edges": {"path": f"{where}/edges", "src": "u", "dst": "v"},
                          "nodes": {"path": f"{where}/nodes", "id": "id", "features": "feat", "label": "label",
                                    "masks": MASKS}})


def test_tables_on_s3_partition_to_the_in_memory_set_file_for_file(
        ray_tasks: None, messy_graph: Graph, tmp_path: Path, s3_bucket: tuple[str, dict[str, object]]) -> None:
    uri, options = s3_bucket
    write_tables(messy_graph, open_store(f"{uri}/tables", options))
    cg = open_chunk_dataset(tables_config(messy_graph, f"{uri}/tables", storage_options=options))
    m = cg.manifest
    assert (m.num_nodes, m.num_edges, m.num_features, m.num_classes) == (
        messy_graph.num_nodes, messy_graph.num_edges, messy_graph.num_features, messy_graph.num_classes)
    assert len(m.edge_chunks) == 6 and len(m.node_chunks) == 6  # the row groups (3 in each file)
    assert (m.num_train, m.num_val, m.num_test) == tuple(len(messy_graph.split_idx(s)) for s in ("train", "val", "test"))
    # the same graph, hashed chunk by chunk: the same key as its chunk directory and in memory
    chunks = write_chunks(messy_graph, tmp_path / "chunks", edges_per_chunk=97, nodes_per_chunk=25)
    assert m.graph_hash == chunks.manifest.graph_hash == messy_graph.content_hash()
    cfg = PartitionConfig(method="random", parts=3, root=f"{uri}/parts", storage_options=options)
    run = run_chunks(cg, cfg, block_rows=ROWS, progress=False)
    ref = build_partition_set(messy_graph, PartitionConfig(method="random", parts=3), tmp_path / "mem")
    assert run.pset.location == f"{uri}/parts/{ref.path.name}"
    assert run.pset.meta.files == ref.meta.files  # every sha256, size, dtype and shape


def _local(g: Graph, root: Path, **kw: Any) -> Any:
    write_tables(g, open_store(root), **kw)
    return tables_config(g, str(root))


def test_tables_read_as_chunks_equal_the_graph(messy_graph: Graph, tmp_path: Path) -> None:
    cg = scan_tables(_local(messy_graph, tmp_path / "t"))
    back = cg.to_graph()
    assert back.content_hash() == messy_graph.content_hash()
    assert np.array_equal(back.x, messy_graph.x) and np.array_equal(back.y, messy_graph.y)


def test_rows_out_of_id_order_are_refused_naming_the_row(messy_graph: Graph, tmp_path: Path) -> None:
    ids = np.arange(messy_graph.num_nodes)
    ids[[3, 4]] = ids[[4, 3]]
    with pytest.raises(DataError, match=r"row group 0 of .*a\.parquet: row 3 has id 4, expected 3; chunked "
                                        r"tables need the node rows in id order"):
        open_chunk_dataset(_local(messy_graph, tmp_path / "t", ids=ids))


def test_overlapping_masks_and_unlabeled_split_nodes_are_refused(messy_graph: Graph, tmp_path: Path) -> None:
    root = tmp_path / "t"
    cfg = _local(messy_graph, root)
    nodes = pq.read_table(root / "nodes" / "a.parquet")
    both = nodes.set_column(nodes.schema.get_field_index("val_mask"), "val_mask", nodes.column("train_mask"))
    pq.write_table(both, root / "nodes" / "a.parquet", row_group_size=25)
    with pytest.raises(DataError, match=r"is in two of the masks .*train/val/test must be disjoint"):
        scan_tables(cfg)
    first_train = int(np.flatnonzero(nodes.column("train_mask").to_numpy())[0])
    label = nodes.column("label").to_numpy().copy()
    label[first_train] = -1
    pq.write_table(nodes.set_column(nodes.schema.get_field_index("label"), "label", pa.array(label)),
                   root / "nodes" / "a.parquet", row_group_size=25)
    with pytest.raises(DataError, match=rf"row {first_train} is in the train mask but has no label"):
        scan_tables(cfg)


def test_a_table_changed_after_opening_is_refused_when_read(messy_graph: Graph, tmp_path: Path) -> None:
    root = tmp_path / "t"
    cg = scan_tables(_local(messy_graph, root))
    edges = pq.read_table(root / "edges" / "b.parquet")
    pq.write_table(edges.slice(1), root / "edges" / "b.parquet", row_group_size=97)
    with pytest.raises(ChunkError, match=r"b\.parquet .*it changed during the run"):
        cg.edges(len(cg.manifest.edge_chunks) - 1)


@pytest.mark.parametrize(("extra", "match"), [
    ({"path": "somewhere"}, "either 'path' .* or 'edges' and 'nodes' .*not both"),
    ({"nodes": None}, "needs both 'edges' and 'nodes'; 'nodes' is missing"),
    ({"nodes": {"path": "n", "features": "f", "label": "y"}}, "nodes.masks is not set"),
])
def test_the_config_names_what_chunked_tables_need(extra: dict[str, Any], match: str) -> None:
    raw: dict[str, Any] = {"name": "g", "source": "chunks", "edges": {"path": "e"},
                           "nodes": {"path": "n", "features": "f", "label": "y", "masks": MASKS}}
    raw.update(extra)
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(ConfigError, match=match):
        parse_dataset(raw)
