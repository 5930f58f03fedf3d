"""``source: parquet``: the same graph from Parquet (a local directory, an S3 server on
127.0.0.1) and from ``.npz`` has the same content hash and the same partition set, file for
file; bad tables fail before any data is read, naming the file, the column and the fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnntrain.config import ParquetDataset, load_config
from gnntrain.data import DataError, Graph, load_dataset
from partition import PartitionConfig, build_partition_set
from tests.conftest import make_graph
from tests.data.conftest import dataset

S3Bucket = tuple[str, dict[str, object]]


def _edge_table(g: Graph) -> pa.Table:
    src, dst = g.edge_index()
    return pa.table({"src": src, "dst": dst.astype(np.int32)})  # id widths may differ


def _node_columns(g: Graph) -> dict[str, np.ndarray]:
    return {"label": g.y, **{f"{s}_mask": g.mask(s) for s in ("train", "val", "test")}}


def _write_local(g: Graph, root: Path) -> dict[str, object]:
    """Edges as a directory of two files; nodes (at a file:// URI) shuffled, with an id column
    and a list column of features."""
    src_dst = _edge_table(g)
    half = src_dst.num_rows // 2
    (root / "edges").mkdir(parents=True)
    pq.write_table(src_dst.slice(0, half), root / "edges" / "part-0.parquet")
    pq.write_table(src_dst.slice(half), root / "edges" / "part-1.parquet")
    perm = np.random.default_rng(1).permutation(g.num_nodes)
    cols = {k: v[perm] for k, v in _node_columns(g).items()}
    feats = pa.FixedSizeListArray.from_arrays(pa.array(g.x[perm].ravel()), g.num_features)
    pq.write_table(pa.table({"node": perm, "feat": feats, **cols}), root / "nodes.parquet")
    return {"edges": {"path": str(root / "edges")},
            "nodes": {"path": f"file://{root / 'nodes.parquet'}", "id": "node", "features": "feat",
                      "label": "label", "masks": ["train_mask", "val_mask", "test_mask"]}}


def _write_s3(g: Graph, uri: str, options: dict[str, object]) -> dict[str, object]:
    """One edge file; nodes in id order with one scalar column per feature."""
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    feats = {f"f{i}": g.x[:, i] for i in range(g.num_features)}
    for name, table in (("edges.parquet", _edge_table(g)),
                        ("nodes/part-0.parquet", pa.table({**feats, **_node_columns(g)}))):
        with fs.open(f"{uri}/{name}".removeprefix("s3://"), "wb") as f:
            pq.write_table(table, f)
    return {"edges": {"path": f"{uri}/edges.parquet"},
            "nodes": {"path": f"{uri}/nodes", "features": list(feats), "label": "label",
                      "masks": ["train_mask", "val_mask", "test_mask"]},
            "storage_options": options}


def _set_files(g: Graph, root: Path) -> dict[str, tuple[int, str]]:
    pset = build_partition_set(g, PartitionConfig(parts=2, root=str(root)))
    return {rel: (e.bytes, e.sha256) for rel, e in pset.meta.files.items()}


def test_parquet_local_and_s3_give_the_npz_graph_and_partition_set(
        s3_bucket: S3Bucket, tmp_path: Path, npz_writer: Callable[..., Path]) -> None:
    g = make_graph(num_nodes=60, avg_degree=4, num_features=3)
    npz = npz_writer(edge_index=g.edge_index(), x=g.x, y=g.y,
                     **{f"{s}_mask": g.mask(s) for s in ("train", "val", "test")})
    from_npz = load_dataset(dataset(source="npz", path=str(npz)))
    uri, options = s3_bucket
    from_local = load_dataset(dataset(source="parquet", **_write_local(g, tmp_path / "pq")))
    from_s3 = load_dataset(dataset(source="parquet", **_write_s3(g, uri, options)))
    assert from_npz.content_hash() == g.content_hash()
    assert from_local.content_hash() == from_s3.content_hash() == from_npz.content_hash()
    # the same graph gives the same set: built apart from the npz and the remote Parquet graph
    assert _set_files(from_s3, tmp_path / "sets-s3") == _set_files(from_npz, tmp_path / "sets-npz")


def test_edges_only_counts_nodes_from_ids_and_splits_at_random(tmp_path: Path) -> None:
    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"a": [0, 1, 2, 3], "b": [1, 2, 3, 4]}), path)
    g = load_dataset(dataset(source="parquet", edges={"path": str(path), "src": "a", "dst": "b"}))
    assert g.num_nodes == 5 and g.num_edges == 8 and g.num_classes == 1
    with pytest.raises(DataError, match=r"holds node id 4 \(row 3 of that file\), outside \[0, "
                       r"num_nodes=4\)"):
        load_dataset(dataset(source="parquet", num_nodes=4,
                             edges={"path": str(path), "src": "a", "dst": "b"}))
    # a node table named for its row count alone: isolated nodes past the largest edge id
    pq.write_table(pa.table({"anything": np.zeros(7)}), tmp_path / "n.parquet")
    g = load_dataset(dataset(source="parquet", edges={"path": str(path), "src": "a", "dst": "b"},
                             nodes={"path": str(tmp_path / "n.parquet")}))
    assert g.num_nodes == 7 and g.num_edges == 8


_EDGES = {"src": [0, 1, 2], "dst": [1, 2, 3]}
BAD = {  # case: (edge table written, or None for a CSV file; node config changes; the message)
    "missing column": (_EDGES, {"edges": {"src": "source"}},
                       "dataset.edges: {edges} has no column 'source' (its columns: src, dst); set "
                       "dataset.edges.src to the column holding integer node ids"),
    "float ids": ({"src": [0.0, 1.0, 2.0], "dst": [1, 2, 3]}, {},
                  "dataset.edges: {edges} column 'src' (dataset.edges.src) is double, expected "
                  "integer node ids; write the ids as int32/int64"),
    "features not a list": (_EDGES, {"nodes": {"features": "y"}},
                            "dataset.nodes: {nodes} column 'y' (dataset.nodes.features) is int64, "
                            "expected a list of numbers per row"),
    "id out of range": ({"src": [0, 1, 2], "dst": [1, 2, 4]}, {},
                        "dataset.edges: {edges} column 'dst' holds node id 4 (row 2 of that file), "
                        "outside [0, num_nodes=4)"),
    "repeated node id": (_EDGES, {"nodes": {"id": "y"}},
                         "node ids in {nodes} column 'y': id 0 appears twice; each node has exactly "
                         "one row"),
    "missing path": (_EDGES, {"nodes": {"path": "{tmp}/nodes"}},
                     "dataset.nodes.path='{tmp}/nodes': {tmp}/nodes does not exist; expected a "
                     "Parquet file or a directory of Parquet files"),
    "not parquet": (None, {}, "dataset.edges.path='{edges}': cannot open it as Parquet"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_tables_name_the_file_the_column_and_the_fix(tmp_path: Path, case: str) -> None:
    edge_columns, changes, message = BAD[case]
    paths = {"edges": str(tmp_path / "edges.parquet"), "nodes": str(tmp_path / "nodes.parquet"),
             "tmp": str(tmp_path)}
    if edge_columns is None:
        Path(paths["edges"]).write_text("src,dst\n0,1\n")
    else:
        pq.write_table(pa.table(edge_columns), paths["edges"])
    pq.write_table(pa.table({"y": [0, 1, 0, 1], "emb": [[1.0], [2.0], [3.0], [4.0]]}), paths["nodes"])
    cfg = {"edges": {"path": paths["edges"]},
           "nodes": {"path": paths["nodes"], "label": "y", "features": "emb"}}
    for table, change in changes.items():
        cfg[table] |= {k: v.format(**paths) for k, v in change.items()}
    with pytest.raises(DataError, match=re.escape(message.format(**paths))):
        load_dataset(dataset(source="parquet", **cfg))


def test_a_missing_object_names_the_uri(s3_bucket: S3Bucket) -> None:
    uri, options = s3_bucket
    with pytest.raises(DataError, match=rf"dataset.edges.path='{uri}/none.parquet' does not exist") as e:
        load_dataset(dataset(source="parquet", edges={"path": f"{uri}/none.parquet"},
                             storage_options=options))
    assert "testing-secret-value" not in str(e.value)


def test_storage_options_secrets_are_not_written(tmp_path: Path) -> None:
    cfg = load_config(raw={"dataset": {"name": "t", "source": "parquet", "edges": {"path": "s3://b/e"},
                                       "storage_options": {"endpoint_url": "http://h:9000",
                                                           "secret": "s3cr3t"}}})
    assert cfg.public_dump()["dataset"]["storage_options"] == {"endpoint_url": "http://h:9000"}
    assert isinstance(cfg.dataset, ParquetDataset)
    assert cfg.dataset.storage_options["secret"] == "s3cr3t"  # the run itself still has it
