"""Chunked graphs on disk: round trip, the streamed synthetic writer, and bad chunks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gnntrain.config import SyntheticConfig
from gnntrain.data.synthetic import generate
from gnntrain.data.synthetic_chunks import write_synthetic_chunks
from partition.chunked import (
    ChunkError,
    ChunkWriter,
    content_hash,
    id_dtype,
    open_chunks,
    write_chunks,
)
from partition.format import write_npy
from partition.graph import Graph


def _same_graph(a: Graph, b: Graph) -> None:
    for name in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.num_classes == b.num_classes and a.content_hash() == b.content_hash()


def test_round_trip_keeps_every_array_and_the_hash(messy_graph: Graph, tmp_path: Path) -> None:
    cg = write_chunks(messy_graph, tmp_path / "c", edges_per_chunk=97, nodes_per_chunk=25)
    assert len(cg.manifest.edge_chunks) == -(-messy_graph.num_edges // 97)
    assert len(cg.manifest.node_chunks) == -(-messy_graph.num_nodes // 25)
    again = open_chunks(tmp_path / "c")
    assert again.manifest == cg.manifest
    assert again.manifest.graph_hash == messy_graph.content_hash() == content_hash(again)
    _same_graph(again.to_graph(), messy_graph)  # self-loops, repeats and unsorted rows kept


def test_streamed_synthetic_chunks_are_the_generated_graph(tmp_path: Path) -> None:
    cfg = SyntheticConfig(nodes=40_000, avg_degree=8, features=6, classes=5, seed=3)
    cg = write_synthetic_chunks(cfg, tmp_path / "s", name="syn", rows_per_chunk=16_384,
                                edges_per_chunk=50_000)
    g = generate(cfg, name="syn")
    assert len(cg.manifest.node_chunks) == 3 and len(cg.manifest.edge_chunks) > 3
    assert cg.manifest.graph_hash == g.content_hash()
    _same_graph(cg.to_graph(), g)
    assert [p.name for p in tmp_path.iterdir()] == ["s"]  # spill files and temp dir gone


def _edit_manifest(path: Path, edit: object) -> None:
    m = json.loads((path / "manifest.json").read_text())
    edit(m)  # type: ignore[operator]
    (path / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize(("edit", "message"), [
    (lambda m: m["node_chunks"][2].update(lo=m["node_chunks"][2]["lo"] - 3),
     r"node chunk 'nodes-2' range \[47, 75\) overlaps the chunk before it"),
    (lambda m: m["node_chunks"][2].update(lo=m["node_chunks"][2]["lo"] + 3),
     r"node ids \[50, 53\) are in no chunk \(gap before node chunk 'nodes-2'\)"),
    (lambda m: m["edge_chunks"].pop(1), r"edge ids \[97, 194\) are in no chunk .*'edges-2'"),
    (lambda m: m["edge_chunks"].pop(), r"edge chunks end at \d+, the manifest says \d+ edges"),
    (lambda m: m.update(format_version=7), r"format_version=7, this code reads versions 1, 2"),
    (lambda m: m.update(num_nodes="many"), r"num_nodes: Input should be a valid integer"),
])
def test_bad_manifest_is_refused_naming_the_chunk(messy_graph: Graph, tmp_path: Path,
                                                  edit: object, message: str) -> None:
    write_chunks(messy_graph, tmp_path / "c", edges_per_chunk=97, nodes_per_chunk=25)
    _edit_manifest(tmp_path / "c", edit)
    with pytest.raises(ChunkError, match=message):
        open_chunks(tmp_path / "c")


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_damaged_chunk_file_is_reported_by_name(messy_graph: Graph, tmp_path: Path, damage: str) -> None:
    cg = write_chunks(messy_graph, tmp_path / "c", edges_per_chunk=97, nodes_per_chunk=25)
    f = tmp_path / "c" / "edges-3" / "src.npy"
    raw = bytearray(f.read_bytes())
    if damage == "flip":
        raw[-3] ^= 0x40
        f.write_bytes(bytes(raw))
        match = r"edges chunk 'edges-3' .*: src.npy fails its checksum"
    elif damage == "truncate":
        f.write_bytes(bytes(raw[:-8]))
        match = r"edges chunk 'edges-3' .*: src.npy is missing or has the wrong size"
    else:
        f.unlink()
        match = r"edges chunk 'edges-3' .*: src.npy is missing or has the wrong size"
    cg.edges(2)  # the other chunks still read
    with pytest.raises(ChunkError, match=match):
        cg.edges(3)


def _rewrite_edge_file(path: Path, chunk: int, name: str, arr: np.ndarray) -> None:
    """Replace one edge file and record it in the manifest (a valid checksum for new content)."""
    entry = write_npy(path / f"edges-{chunk}" / f"{name}.npy", arr)
    _edit_manifest(path, lambda m: m["edge_chunks"][chunk]["files"].update(
        {f"{name}.npy": entry.model_dump(mode="json")}))


def test_out_of_range_edge_is_refused(tmp_path: Path) -> None:
    w = ChunkWriter(tmp_path / "c", name="bad", num_nodes=4, num_features=1, num_classes=2)
    w.add_edges(np.array([0, 1]), np.array([1, 2]))
    with pytest.raises(ChunkError, match=r"add_edges: dst must hold integer ids in \[0, num_nodes=4\); "
                                         r"got int64 in \[3, 4\]"):
        w.add_edges(np.array([3, 2]), np.array([3, 4]))
    with pytest.raises(ChunkError, match=r"add_edges: src must hold integer ids .* got float64"):
        w.add_edges(np.array([0.5]), np.array([1]))
    w.add_edges(np.array([3]), np.array([3]))
    w.add_nodes(0, np.zeros((4, 1), np.float32), np.zeros(4, np.int64), np.array([1, 0, 0, 0], np.int8))
    w.finish(graph_hash="x")
    _rewrite_edge_file(tmp_path / "c", 1, "dst", np.array([4], np.int32))  # written by another tool
    cg = open_chunks(tmp_path / "c")
    with pytest.raises(ChunkError, match=r"edge chunk 'edges-1' .*: dst id 4 is outside \[0, num_nodes=4\)"):
        cg.edges(1)


def test_ids_are_stored_in_the_narrowest_width_that_holds_them(messy_graph: Graph, tmp_path: Path) -> None:
    assert id_dtype(2**31 - 1) is np.int32 and id_dtype(2**31) is np.int64
    cg = write_chunks(messy_graph, tmp_path / "c", edges_per_chunk=97, nodes_per_chunk=25)
    assert cg.manifest.format_version == 2
    for c in cg.manifest.edge_chunks:
        assert {c.files[f].dtype for f in ("src.npy", "dst.npy")} == {np.dtype(np.int32).str}
    # version 1 stored int64 ids: such a directory reads as the same graph with the same hash
    for j in range(len(cg.manifest.edge_chunks)):
        for name in ("src", "dst"):
            _rewrite_edge_file(tmp_path / "c", j, name, cg.read("edges", j, name).astype(np.int64))
    _edit_manifest(tmp_path / "c", lambda m: m.update(format_version=1))
    old = open_chunks(tmp_path / "c")
    assert old.read("edges", 0, "src").dtype == np.int64
    assert content_hash(old) == messy_graph.content_hash() == cg.manifest.graph_hash
    _same_graph(old.to_graph(), messy_graph)


def test_writer_refuses_missing_rows_and_leaves_nothing(tmp_path: Path) -> None:
    w = ChunkWriter(tmp_path / "c", name="g", num_nodes=10, num_features=1, num_classes=2)
    w.add_nodes(0, np.zeros((4, 1), np.float32), np.zeros(4, np.int64), np.zeros(4, np.int8))
    with pytest.raises(ChunkError, match=r"node chunks end at 4, the manifest says 10 nodes"):
        w.finish(graph_hash="x")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "c").mkdir()
    with pytest.raises(ChunkError, match="already exists"):
        ChunkWriter(tmp_path / "c", name="g", num_nodes=1, num_features=1, num_classes=1)
