"""A typed graph trains on its typed (format-2) set, seen as the one graph it trains on."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gnntrain.config import SyntheticHeteroConfig
from gnntrain.data.hetero import to_training_graph
from gnntrain.data.hetero_synthetic import generate_hetero
from partition import (
    PartitionConfig,
    PartitionError,
    PartitionSet,
    build_training_set,
    open_training_set,
)
from partition.graph import GraphError
from partition.hetero_graph import from_training_graph
from partition.hetero_store import build_hetero_partition_set
from partition.storage import FsspecStore
from partition.store import Part
from partition.training_set import TypedTrainingSet, trains_typed

HG = generate_hetero(SyntheticHeteroConfig(papers=400, authors=300, institutions=12, fields=25,
                                           features=8, classes=4, seed=5), add_reverse=True)
GRAPH = to_training_graph(HG)


def pcfg(tmp_path: Path, k: int, method: str = "metis") -> PartitionConfig:
    return PartitionConfig(method=method, parts=k, root=str(tmp_path / "parts"))  # type: ignore[arg-type]


def test_training_graph_gives_the_typed_graph_back() -> None:
    x = dict(HG.x)
    x["paper"] = x["paper"].copy()
    x["paper"][:, -2:] = 0.0  # trailing zero columns are the type's own: its width is recorded
    hg = replace(HG, x=x, _hash=[])
    g = to_training_graph(hg)
    assert g.node_type_features == tuple(hg.num_features(t) for t in hg.node_types)
    back = from_training_graph(g)
    assert back.content_hash() == hg.content_hash()
    assert back.edge_types == hg.edge_types and back.target == hg.target
    # without the recorded widths, each type keeps the columns its rows use
    guessed = from_training_graph(replace(g, node_type_features=(), _hash=[]))
    assert guessed.num_features("paper") == 6 and "author" not in guessed.x


def test_a_graph_that_is_not_a_typed_training_graph_is_refused() -> None:
    with pytest.raises(GraphError, match="no node types"):
        from_training_graph(replace(GRAPH, node_type_names=(), node_type_offsets=(), node_type_features=(),
                                    _hash=[]))
    names = ("paper-cites-paper",) + GRAPH.edge_type_names[1:]
    with pytest.raises(GraphError, match="'paper-cites-paper' is not 'src:relation:dst'"):
        from_training_graph(replace(GRAPH, edge_type_names=names, _hash=[]))


def test_typed_graph_trains_on_the_set_python_m_partition_writes(tmp_path: Path) -> None:
    pset = build_training_set(GRAPH, pcfg(tmp_path, 3))
    assert isinstance(pset, TypedTrainingSet)
    assert json.loads((pset.path / "meta.json").read_text())["format_version"] == 2
    same = build_hetero_partition_set(HG, pcfg(tmp_path, 3))  # what the partition CLI builds
    assert same.path == pset.path and same.reused
    assert isinstance(open_training_set(pset.path), TypedTrainingSet)
    with pytest.raises(PartitionError, match="not a partition set"):
        open_training_set(tmp_path)
    # any method writes the typed set; a per-node training weight and untyped graphs keep format 1
    assert isinstance(build_training_set(GRAPH, pcfg(tmp_path, 3, "ldg")), TypedTrainingSet)
    weighted = GRAPH.with_train_weight(GRAPH.train_weights())
    assert not trains_typed(weighted)
    assert isinstance(build_training_set(weighted, pcfg(tmp_path, 3)), PartitionSet)
    plain = replace(GRAPH, node_type_names=(), node_type_offsets=(), node_type_features=(), edge_rel=None,
                    edge_type_names=(), _hash=[])
    assert isinstance(open_training_set(build_training_set(plain, pcfg(tmp_path, 3)).path), PartitionSet)


def test_a_set_in_an_object_store_opens_by_its_version_reading_meta_json_once(
        s3_bucket: tuple[str, dict[str, object]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri, options = s3_bucket
    plain = replace(GRAPH, node_type_names=(), node_type_offsets=(), node_type_features=(), edge_rel=None,
                    edge_type_names=(), _hash=[])
    sets = {kind: build_training_set(g, PartitionConfig(parts=2, root=f"{uri}/{kind}", storage_options=options))
            for kind, g in (("typed", GRAPH), ("plain", plain))}
    reads: list[str] = []
    real = FsspecStore.read_bytes

    def counting(self: FsspecStore, rel: str) -> bytes:
        reads.append(rel)
        return real(self, rel)

    monkeypatch.setattr(FsspecStore, "read_bytes", counting)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the default scratch for the staged copies
    for kind, want in (("typed", TypedTrainingSet), ("plain", PartitionSet)):
        reads.clear()
        opened = open_training_set(sets[kind].location, options)
        assert isinstance(opened, want) and opened.location == sets[kind].location
        assert reads.count("meta.json") == 1, reads
        assert opened.staged is not None and not any(r.startswith("part-") for r in opened.staged.fetched)


def test_one_part_typed_set_loads_as_the_training_graph(tmp_path: Path) -> None:
    part = build_training_set(GRAPH, pcfg(tmp_path, 1)).load_part(0)
    whole = Part.whole_graph(GRAPH)
    for name in ("indptr", "indices", "edge_rel", "y", "train_idx", "val_idx", "test_idx", "orig_ids"):
        np.testing.assert_array_equal(getattr(part, name), getattr(whole, name), err_msg=name)
    assert np.asarray(part.x).view(np.uint32).tobytes() == GRAPH.x.view(np.uint32).tobytes()
    assert part.edge_types == GRAPH.edge_type_names and part.node_type_names == GRAPH.node_type_names
    assert part.halo_ids.size == 0


def test_k_part_typed_set_holds_each_row_as_the_training_graph_does(tmp_path: Path) -> None:
    pset = build_training_set(GRAPH, pcfg(tmp_path, 3))
    assert isinstance(pset, TypedTrainingSet)
    new = pset.new_id_map()
    np.testing.assert_array_equal(np.sort(new), np.arange(GRAPH.num_nodes))
    np.testing.assert_array_equal(pset.orig_ids(new), np.arange(GRAPH.num_nodes))
    np.testing.assert_array_equal(pset.global_degrees()[new], GRAPH.in_degrees())
    np.testing.assert_array_equal(pset.node_types()[new], GRAPH.node_types())  # type: ignore[index]
    with pytest.raises(PartitionError, match=rf"new_ids: node id {GRAPH.num_nodes} is outside"):
        pset.orig_ids(np.array([0, GRAPH.num_nodes]))
    with pytest.raises(PartitionError, match=r"orig_ids: node id -1 is outside"):
        pset.new_ids(np.array([-1]))
    typed_parts = pset.typed.assignment()
    np.testing.assert_array_equal(pset.assignment(), np.concatenate([typed_parts[t] for t in HG.node_types]))
    splits: dict[str, list[np.ndarray]] = {"train_idx": [], "val_idx": [], "test_idx": []}
    for p in range(3):
        part = pset.load_part(p)
        orig = part.orig_ids
        np.testing.assert_array_equal(new[orig], np.arange(part.start, part.stop))
        src = pset.orig_ids(part.indices)
        for r, v in enumerate(orig):  # every row: the same in-neighbours, relations and order
            a, b = part.indptr[r], part.indptr[r + 1]
            np.testing.assert_array_equal(src[a:b], GRAPH.indices[GRAPH.indptr[v]:GRAPH.indptr[v + 1]])
            np.testing.assert_array_equal(part.edge_rel[a:b],  # type: ignore[index]
                                          GRAPH.edge_rel[GRAPH.indptr[v]:GRAPH.indptr[v + 1]])  # type: ignore[index]
        np.testing.assert_array_equal(np.asarray(part.x), GRAPH.x[orig])
        np.testing.assert_array_equal(part.y, GRAPH.y[orig])
        remote = np.unique(part.indices[(part.indices < part.start) | (part.indices >= part.stop)])
        np.testing.assert_array_equal(part.halo_ids, remote)
        for name, got in splits.items():
            got.append(pset.orig_ids(getattr(part, name)))
    for name, got in splits.items():
        np.testing.assert_array_equal(np.sort(np.concatenate(got)), getattr(GRAPH, name), err_msg=name)


@pytest.mark.parametrize("method", ["metis", "random"])
def test_typed_set_shows_the_runtime_what_the_format1_set_of_the_training_graph_does(
        tmp_path: Path, method: str) -> None:
    """Same parts, same part-major numbering, same rows in the same order: what was measured
    on format-1 sets of typed graphs holds on the typed set."""
    from partition import build_partition_set

    typed = build_training_set(GRAPH, pcfg(tmp_path, 3, method))
    flat = build_partition_set(GRAPH, pcfg(tmp_path, 3, method))
    assert isinstance(typed, TypedTrainingSet) and isinstance(flat, PartitionSet)
    np.testing.assert_array_equal(typed.book.offsets, flat.book.offsets)
    for name in ("new_id_map", "global_degrees", "node_types"):
        np.testing.assert_array_equal(getattr(typed, name)(), getattr(flat, name)(), err_msg=name)
    for p in range(3):
        a, b = typed.load_part(p), flat.load_part(p)
        for name in ("indptr", "indices", "edge_rel", "y", "train_idx", "val_idx", "test_idx", "orig_ids",
                     "halo_ids", "halo_offsets"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"part {p} {name}")
        np.testing.assert_array_equal(np.asarray(a.x), np.asarray(b.x))
        assert a.edge_types == b.edge_types and a.node_type_names == b.node_type_names
