"""The on-disk partition set: round trip, layout, reuse, atomic writes, corruption, bad input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import partition.build as build_mod
import partition.format as fmt
from partition import (
    PartitionChecksumError,
    PartitionConfig,
    PartitionError,
    PartitionFormatError,
    PartitionSet,
    build_partition_set,
    open_partition_set,
)
from partition.graph import Graph
from tests.conftest import make_graph
from tests.partition.conftest import graph_from_edges


def _check_round_trip(g: Graph, pset: PartitionSet) -> None:
    """Every node's features, label, split and in-neighbours, read through the partition
    book from the part that owns it, equal the original graph's."""
    n = g.num_nodes
    seen = np.zeros(n, dtype=int)
    orig_of_new = pset.orig_ids(np.arange(n))
    assert np.array_equal(pset.new_ids(orig_of_new), np.arange(n))
    assert np.array_equal(np.sort(orig_of_new), np.arange(n))
    splits = {s: set(g.split_idx(s).tolist()) for s in ("train", "val", "test")}
    for p in range(pset.num_parts):
        part = pset.load_part(p)
        assert part.num_owned == part.stop - part.start == part.orig_ids.shape[0]
        assert np.array_equal(part.orig_ids, orig_of_new[part.start:part.stop])
        assert np.all(pset.book.owner(np.arange(part.start, part.stop)) == p)
        halo: set[int] = set()
        for r in range(part.num_owned):
            new, orig = part.start + r, int(part.orig_ids[r])
            seen[orig] += 1
            assert np.array_equal(part.x[r], g.x[orig])
            assert part.y[r] == g.y[orig]
            got = pset.orig_ids(part.indices[part.indptr[r]:part.indptr[r + 1]])
            want = g.indices[g.indptr[orig]:g.indptr[orig + 1]]
            assert np.array_equal(np.sort(got), np.sort(want))  # multiset, incl. self-loops/repeats
            nbrs = part.indices[part.indptr[r]:part.indptr[r + 1]]
            halo.update(int(u) for u in nbrs if not part.start <= u < part.stop)
            for s in splits:
                assert (new in set(getattr(part, f"{s}_idx").tolist())) == (orig in splits[s])
        assert part.halo_ids.tolist() == sorted(halo)
        for q in range(pset.num_parts):
            assert np.all(pset.book.owner(part.halo_of(q)) == q)
        for s in ("train", "val", "test"):
            idx = getattr(part, f"{s}_idx")
            assert np.all(np.diff(idx) > 0) and np.all((idx >= part.start) & (idx < part.stop))
    assert np.all(seen == 1)
    assert np.array_equal(pset.global_degrees(), g.in_degrees()[orig_of_new])


@pytest.mark.parametrize("method", ["metis", "random", "ldg"])
def test_round_trip_through_the_partition_book(method: str, messy_graph: Graph, tmp_path: Path) -> None:
    pset = build_partition_set(messy_graph, PartitionConfig(method=method, parts=3), tmp_path)
    _check_round_trip(messy_graph, pset)
    assert np.array_equal(pset.assignment(), pset.book.owner(pset.new_ids(np.arange(messy_graph.num_nodes))))


def test_round_trip_with_one_part(messy_graph: Graph, tmp_path: Path) -> None:
    pset = build_partition_set(messy_graph, PartitionConfig(parts=1), tmp_path)
    assert pset.book.offsets.tolist() == [0, messy_graph.num_nodes]
    _check_round_trip(messy_graph, pset)
    assert pset.load_part(0).halo_ids.size == 0


def test_meta_counts_match_the_parts(four_parts: PartitionSet, messy_graph: Graph) -> None:
    m = four_parts.meta
    assert m.num_nodes == messy_graph.num_nodes and m.num_edges == messy_graph.num_edges
    assert m.offsets[-1] == m.num_nodes and np.all(np.diff(m.offsets) >= 0)
    cut = 0
    for p, c in enumerate(m.parts):
        part = four_parts.load_part(p)
        assert c.nodes == part.num_owned and c.edges == part.indices.shape[0]
        assert c.halo == part.halo_ids.shape[0] and c.train == part.train_idx.shape[0]
        outside = (part.indices < part.start) | (part.indices >= part.stop)
        assert c.cut_edges == int(outside.sum())
        cut += c.cut_edges
    assert m.edge_cut == cut
    assert m.graph_hash == messy_graph.content_hash()
    assert [s.name for s in m.steps] == ["symmetrize", "metis", "hash", "renumber", "write"]


def _docstring_tree() -> tuple[list[str], list[str]]:
    """Names of the set-level and per-part entries drawn in partition.format's docstring."""
    top, part = [], []
    for line in (fmt.__doc__ or "").splitlines():
        m = re.match(r"^(\s*)(?:│\s+)?(├──|└──) (\S+)", line)
        if m:
            nested = "│" in line.split(m.group(2))[0] or len(m.group(1)) > 4
            (part if nested else top).append(m.group(3))
    return top, part


def test_docstring_tree_matches_what_the_writer_makes(four_parts: PartitionSet) -> None:
    top, part = _docstring_tree()
    assert "part-<p>/" in top and "meta.json" in top
    written_top = sorted(p.name + ("/" if p.is_dir() else "") for p in four_parts.path.iterdir())
    expected_top = sorted([t for t in top if t != "part-<p>/"] +
                          [f"part-{p}/" for p in range(four_parts.num_parts)])
    assert written_top == expected_top
    for p in range(four_parts.num_parts):
        assert sorted(f.name for f in (four_parts.path / f"part-{p}").iterdir()) == sorted(part)
    assert sorted(part) == sorted(fmt.PART_FILES)
    assert set(four_parts.meta.files) == {f for f in fmt.SET_FILES} | {
        f"part-{p}/{f}" for p in range(four_parts.num_parts) for f in fmt.PART_FILES}


def test_docstring_documents_every_meta_field() -> None:
    doc = fmt.__doc__ or ""
    for field in fmt.PartitionMeta.model_fields:
        assert f"``{field}``" in doc, field


def test_mmap_and_plain_loading(four_parts: PartitionSet) -> None:
    mapped = four_parts.load_part(1)
    plain = four_parts.load_part(1, mmap=False, verify=False)
    assert isinstance(mapped.x, np.memmap) and not isinstance(plain.x, np.memmap)
    assert np.array_equal(mapped.indices, plain.indices) and np.array_equal(mapped.x, plain.x)


def test_a_worker_loads_its_part_without_the_others(four_parts: PartitionSet) -> None:
    for p in (1, 2, 3):
        for f in (four_parts.path / f"part-{p}").iterdir():
            f.unlink()
    pset = open_partition_set(four_parts.path)
    assert pset.load_part(0).num_owned == pset.meta.parts[0].nodes
    with pytest.raises(PartitionChecksumError, match="part-1"):
        pset.load_part(1)


def test_reused_when_graph_and_settings_match(messy_graph: Graph, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = PartitionConfig(parts=3)
    first = build_partition_set(messy_graph, cfg, tmp_path)
    assert not first.reused

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("partitioned again")

    monkeypatch.setattr(build_mod, "assign_parts", boom)
    again = build_partition_set(messy_graph, cfg, tmp_path)
    assert again.reused and again.path == first.path and again.meta == first.meta


def test_changed_graph_or_setting_makes_a_new_set(messy_graph: Graph, tmp_path: Path) -> None:
    a = build_partition_set(messy_graph, PartitionConfig(parts=3), tmp_path)
    b = build_partition_set(messy_graph, PartitionConfig(parts=3, seed=7), tmp_path)
    x = messy_graph.x.copy()
    x[0, 0] += 1.0
    other = Graph(indptr=messy_graph.indptr, indices=messy_graph.indices, x=x, y=messy_graph.y,
                  train_idx=messy_graph.train_idx, val_idx=messy_graph.val_idx,
                  test_idx=messy_graph.test_idx, num_classes=messy_graph.num_classes, name="messy")
    c = build_partition_set(other, PartitionConfig(parts=3), tmp_path)
    root = PartitionConfig(parts=3, root=str(tmp_path / "elsewhere"))
    d = build_partition_set(messy_graph, root)
    assert len({a.path, b.path, c.path}) == 3
    assert b.meta.steps[0].name == "hash"  # a set of this name existed: hash first, to look it up
    assert d.path.parent == tmp_path / "elsewhere" and d.path.name == a.path.name
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "elsewhere") == sorted(
        p.path.name for p in (a, b, c))


def test_interrupted_build_leaves_no_set(messy_graph: Graph, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    real = build_mod._part_arrays
    calls = []

    def fail_on_second_part(*args: object, **kw: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(build_mod, "_part_arrays", fail_on_second_part)
    with pytest.raises(KeyboardInterrupt):
        build_partition_set(messy_graph, PartitionConfig(parts=3), tmp_path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(build_mod, "_part_arrays", real)
    pset = build_partition_set(messy_graph, PartitionConfig(parts=3), tmp_path)
    assert not pset.reused
    _check_round_trip(messy_graph, pset)


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_damaged_part_file_is_reported_by_name(damage: str, four_parts: PartitionSet) -> None:
    target = four_parts.path / "part-2" / "indices.npy"
    if damage == "flip":
        raw = bytearray(target.read_bytes())
        raw[-1] ^= 0xFF
        target.write_bytes(bytes(raw))
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:-8])
    else:
        target.unlink()
    pset = open_partition_set(four_parts.path)
    pset.load_part(0)
    with pytest.raises(PartitionChecksumError, match=r"part-2/indices\.npy.*(rebuild|delete)"):
        pset.load_part(2)


def test_damaged_set_is_not_silently_reused(messy_graph: Graph, tmp_path: Path) -> None:
    cfg = PartitionConfig(parts=4)
    pset = build_partition_set(messy_graph, cfg, tmp_path)
    (pset.path / "part-3" / "x.npy").write_bytes(b"")
    with pytest.raises(PartitionChecksumError, match=r"part-3/x\.npy"):
        build_partition_set(messy_graph, cfg, tmp_path)
    rebuilt = build_partition_set(messy_graph, cfg, tmp_path, force=True)
    assert not rebuilt.reused and rebuilt.path == pset.path
    rebuilt.check_files(verify=True)


def test_edited_meta_is_detected(four_parts: PartitionSet) -> None:
    meta_path = four_parts.path / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["offsets"][1] += 1
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(PartitionChecksumError, match="meta.json.*edited"):
        open_partition_set(four_parts.path)


def test_other_format_version_says_how_to_rebuild(four_parts: PartitionSet) -> None:
    meta_path = four_parts.path / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = 0
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(PartitionFormatError, match=r"format_version=0.*version 1.*force=True"):
        open_partition_set(four_parts.path)


def test_not_a_partition_set(tmp_path: Path) -> None:
    with pytest.raises(PartitionFormatError, match="not a partition set.*python -m partition"):
        open_partition_set(tmp_path)


def test_set_of_another_graph_is_refused(messy_graph: Graph, tmp_path: Path) -> None:
    other = make_graph(150, 4, seed=9)
    cfg = PartitionConfig(parts=2)
    pset = build_partition_set(messy_graph, cfg, tmp_path)
    with pytest.raises(PartitionFormatError, match=r"built from graph 'messy'.*delete"):
        open_partition_set(pset.path, expect_graph_hash=other.content_hash())
    # a set copied to the directory the other graph's set would use
    target = build_mod.set_path(tmp_path, other, cfg)
    os.rename(pset.path, target)
    with pytest.raises(PartitionFormatError, match="not from this graph"):
        build_partition_set(other, cfg, tmp_path)


def test_unwritable_root_fails_before_partitioning(messy_graph: Graph, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        root: Path = locked / "parts"
    else:  # root ignores permission bits; sysfs refuses new entries even to root
        root = Path("/sys/gnntrain-partition-test")
    monkeypatch.setattr(build_mod, "assign_parts", lambda *a, **k: pytest.fail("partitioned"))
    with pytest.raises(PartitionError, match=rf"partition.root='{root}': cannot create"):
        build_partition_set(messy_graph, PartitionConfig(parts=2), root)


def test_empty_parts_are_stored_when_allowed(tmp_path: Path) -> None:
    g = graph_from_edges(np.arange(9), np.arange(1, 10), 10, undirected=True, train_frac=0.2)
    pset = build_partition_set(g, PartitionConfig(parts=5, method="random", allow_empty_train=True), tmp_path)
    trains = [pset.load_part(p).train_idx.size for p in range(5)]
    assert sorted(trains) == [0, 0, 0, 1, 1]
    _check_round_trip(g, pset)


def test_bad_ids_and_part_numbers(four_parts: PartitionSet) -> None:
    with pytest.raises(PartitionError, match=r"part p=4: expected an int in \[0, 4\)"):
        four_parts.load_part(4)
    with pytest.raises(PartitionError, match="node id -1 is outside"):
        four_parts.book.owner(np.array([0, -1]))
    with pytest.raises(PartitionError, match=f"node id {four_parts.num_nodes} is outside"):
        four_parts.orig_ids(np.array([four_parts.num_nodes]))
