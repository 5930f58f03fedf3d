"""Typed partitioning: the book, METIS/random balance per type, the typed set's round trip,
the quality report per type and relation, and refusal of other format versions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gnntrain.config import SyntheticHeteroConfig
from gnntrain.data.hetero import to_training_graph
from gnntrain.data.hetero_synthetic import generate_hetero
from partition.balance import allowed_loads, balanced_types
from partition.config import PartitionConfig
from partition.errors import PartitionError, PartitionFormatError
from partition.format import meta_digest
from partition.hetero_book import HeteroPartitionBook
from partition.hetero_graph import HeteroGraph
from partition.hetero_methods import assign_hetero_parts, hetero_quality_report, relation_key
from partition.hetero_store import (
    HeteroPartitionMeta,
    build_hetero_partition_set,
    open_hetero_partition_set,
)
from partition.methods import assign_parts
from partition.store import open_partition_set


@pytest.fixture(scope="module")
def mag_graph() -> HeteroGraph:
    cfg = SyntheticHeteroConfig(papers=3000, authors=4000, institutions=40, fields=150, seed=2)
    return generate_hetero(cfg, name="mag", add_reverse=True)


# ---- the book ---------------------------------------------------------------------------------
def test_book_maps_type_ids_to_part_rows_and_back() -> None:
    counts = np.array([[2, 0, 3], [1, 4, 1], [3, 2, 0]])
    book = HeteroPartitionBook(["a", "b", "c"], counts)
    for t, n in (("a", 6), ("b", 6), ("c", 4)):
        ids = np.arange(n)
        own = book.owner(t, ids)
        assert np.array_equal(np.bincount(own, minlength=3), counts[:, book.node_types.index(t)])
        for p in range(3):
            mine = ids[own == p]
            local = book.to_local(t, mine, p)
            lo, hi = book.part_type_range(p, t)
            assert np.array_equal(local, np.arange(lo, hi))  # one contiguous range per type
            ti, back = book.to_global(p, local)
            assert np.all(ti == book.node_types.index(t)) and np.array_equal(back, mine)
    hom = np.concatenate([book.to_homogeneous(t, np.arange(book.num_nodes(t))) for t in book.node_types])
    assert np.array_equal(np.sort(hom), np.arange(16))  # a bijection onto 0..N-1
    assert np.array_equal(book.homogeneous_book.owner(book.to_homogeneous("b", np.arange(6))),
                          book.owner("b", np.arange(6)))
    with pytest.raises(PartitionError, match=r"node id 4 is not owned by part 0"):
        book.to_local("c", np.array([4]), 0)
    with pytest.raises(PartitionError, match=r"node_type='d': not in the book"):
        book.owner("d", np.array([0]))


# ---- assignment ----------------------------------------------------------------------------
def _type_loads(graph: HeteroGraph, parts: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    return {t: np.bincount(parts[t], minlength=k) for t in graph.node_types}


def test_metis_balances_every_type_and_the_training_nodes(mag_graph: HeteroGraph) -> None:
    k = 4
    cfg = PartitionConfig(method="metis", parts=k, imbalance=1.05)
    parts = assign_hetero_parts(mag_graph, cfg)
    counts = np.array([mag_graph.num_nodes[t] for t in mag_graph.node_types])
    own = {mag_graph.node_types[i] for i in balanced_types(counts, cfg)}
    assert own == {"paper", "author", "field_of_study"}  # 40 institutions: 10 a part, too few to balance alone
    for t, loads in _type_loads(mag_graph, parts, k).items():
        if t not in own:
            continue
        allowed = allowed_loads(np.ones((mag_graph.num_nodes[t], 1)), k, 1.05)[0]
        assert loads.max() <= allowed, f"type {t}: {loads.tolist()} over {allowed}"
    train = np.bincount(parts["paper"][mag_graph.train_idx], minlength=k)
    assert train.max() <= allowed_loads(np.ones((train.sum(), 1)), k, 1.05)[0]
    rnd = assign_hetero_parts(mag_graph, cfg.model_copy(update={"method": "random"}))
    metis_rep = hetero_quality_report(mag_graph, parts, num_parts=k)
    random_rep = hetero_quality_report(mag_graph, rnd, num_parts=k)
    assert metis_rep.edge_cut_fraction < 0.7 * random_rep.edge_cut_fraction


def test_random_balances_each_type_and_training_to_one_node(mag_graph: HeteroGraph) -> None:
    k = 3
    parts = assign_hetero_parts(mag_graph, PartitionConfig(method="random", parts=k, seed=5))
    for loads in _type_loads(mag_graph, parts, k).values():
        assert loads.max() - loads.min() <= 1
    train = np.bincount(parts["paper"][mag_graph.train_idx], minlength=k)
    assert train.max() - train.min() <= 1
    again = assign_hetero_parts(mag_graph, PartitionConfig(method="random", parts=k, seed=5))
    assert all(np.array_equal(parts[t], again[t]) for t in parts)


@pytest.mark.parametrize("method", ["metis", "ldg", "random"])
def test_a_typed_graph_and_its_training_graph_get_the_same_parts(mag_graph: HeteroGraph, method: str) -> None:
    cfg = PartitionConfig(method=method, parts=3)  # type: ignore[arg-type]
    typed = assign_hetero_parts(mag_graph, cfg)
    whole = assign_parts(to_training_graph(mag_graph), cfg)
    np.testing.assert_array_equal(np.concatenate([typed[t] for t in mag_graph.node_types]), whole)


# ---- the typed set -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def three_parts(mag_graph: HeteroGraph, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    root = tmp_path_factory.mktemp("typed-sets")
    return build_hetero_partition_set(mag_graph, PartitionConfig(method="metis", parts=3), root)


def test_round_trip_returns_every_row_edge_label_and_split(mag_graph: HeteroGraph, three_parts) -> None:  # noqa: ANN001
    pset, g = three_parts, mag_graph
    book = pset.book
    seen_edges = {et: set() for et in g.edge_types}
    splits: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
    for p in range(3):
        part = pset.load_part(p)
        for t in g.node_types:
            lo, hi = book.book(t).part_range(p)
            orig = part.orig_ids[t]
            assert np.array_equal(orig, pset.orig_ids(t, np.arange(lo, hi)))  # contiguous per type
            assert np.array_equal(pset.new_ids(t, orig), np.arange(lo, hi))
            if t in g.x:
                assert np.array_equal(part.x[t], g.x[t][orig])
        assert np.array_equal(part.y, g.y[part.orig_ids["paper"]])
        for et, csr in part.relations.items():
            s, _, d = et
            src, row = csr.edges()
            src_orig = pset.orig_ids(s, src)
            dst_orig = part.orig_ids[d][row]
            seen_edges[et] |= set(zip(src_orig.tolist(), dst_orig.tolist(), strict=True))
            remote = np.unique(src[book.owner(s, src) != p])
            assert set(remote.tolist()) <= set(part.halo_ids[s].tolist())
        for split in splits:
            splits[split].append(pset.orig_ids("paper", getattr(part, f"{split}_idx")))
    for et, csr in g.relations.items():
        src, dst = csr.edges()
        assert seen_edges[et] == set(zip(src.tolist(), dst.tolist(), strict=True)), et
    for split, got in splits.items():
        assert np.array_equal(np.sort(np.concatenate(got)), g.split_idx(split))


def test_meta_and_report_agree_per_type_and_relation(mag_graph: HeteroGraph, three_parts) -> None:  # noqa: ANN001
    pset = three_parts
    rep = hetero_quality_report(mag_graph, pset.assignment(), num_parts=3, method="metis")
    for r in pset.meta.relations:
        key = relation_key((r.src, r.rel, r.dst))
        assert rep.relations[key].cut_edges == r.cut_edges
        assert rep.relations[key].edges == r.num_edges
    for t in mag_graph.node_types:
        assert rep.types[t].halo == [c.halo[t] for c in pset.meta.parts]
        assert rep.types[t].nodes == [c.nodes[t] for c in pset.meta.parts]
    # the typed halo is exactly the remote in-neighbours of each type, counted independently
    part = pset.load_part(0)
    for t in mag_graph.node_types:
        remote = [csr.indices[pset.book.owner(s, csr.indices) != 0]
                  for (s, _, _), csr in part.relations.items() if s == t]
        expect = np.unique(np.concatenate(remote)) if remote else np.empty(0, np.int64)
        assert np.array_equal(part.halo_ids[t], expect)


def test_same_graph_and_settings_reuse_the_set(mag_graph: HeteroGraph, three_parts) -> None:  # noqa: ANN001
    again = build_hetero_partition_set(mag_graph, PartitionConfig(method="metis", parts=3),
                                       three_parts.path.parent)
    assert again.reused and again.path == three_parts.path


def _rewrite_meta(path: Path, **update: object) -> None:
    raw = json.loads((path / "meta.json").read_text())
    raw.update(update)
    meta = HeteroPartitionMeta.model_validate(raw) if raw["format_version"] == 2 else None
    raw["meta_sha256"] = meta_digest(meta) if meta is not None else raw["meta_sha256"]
    (path / "meta.json").write_text(json.dumps(raw))


def test_old_format_is_refused_with_the_rebuild_command(mag_graph: HeteroGraph, tmp_path: Path) -> None:
    pset = build_hetero_partition_set(mag_graph, PartitionConfig(method="random", parts=2), tmp_path)
    with pytest.raises(PartitionFormatError, match=r"typed set \(format_version=2\).*open_hetero_partition_set"):
        open_partition_set(pset.path)  # the homogeneous reader names the typed one
    _rewrite_meta(pset.path, format_version=1)
    with pytest.raises(PartitionFormatError,
                       match=r"format_version=1, a homogeneous set.*python -m partition --config .* --force"):
        open_hetero_partition_set(pset.path)


def test_edited_meta_and_other_graph_are_refused(mag_graph: HeteroGraph, tmp_path: Path) -> None:
    pset = build_hetero_partition_set(mag_graph, PartitionConfig(method="random", parts=2), tmp_path)
    with pytest.raises(PartitionFormatError, match=r"not from this graph"):
        open_hetero_partition_set(pset.path, expect_graph_hash="0" * 16)
    raw = json.loads((pset.path / "meta.json").read_text())
    raw["counts"][0][0] += 1
    (pset.path / "meta.json").write_text(json.dumps(raw))
    with pytest.raises(PartitionFormatError, match=r"fails its checksum"):
        open_hetero_partition_set(pset.path)


def test_cli_partitions_a_typed_config_and_reports_per_type(tmp_path: Path) -> None:
    import yaml

    from partition.cli import main

    cfg = {"dataset": {"name": "mag-tiny", "source": "synthetic_hetero", "add_reverse": True,
                       "synthetic_hetero": {"papers": 400, "authors": 500, "institutions": 8, "fields": 30}},
           "partition": {"method": "metis", "parts": 2}, "cluster": {"workers": 2}}
    path = tmp_path / "mag-tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    assert main(["--config", str(path), "--root", str(tmp_path / "sets"), "--out", str(out),
                 "--parts", "3"]) == 0
    rep = json.loads((out / "partition.json").read_text())
    assert rep["num_parts"] == 3
    assert set(rep["types"]) == {"paper", "author", "institution", "field_of_study"}
    assert sum(rep["types"]["author"]["nodes"]) == 500
    assert "author___writes___paper" in rep["relations"]
    ldg = tmp_path / "ldg"
    assert main(["--config", str(path), "--root", str(tmp_path / "sets"), "--out", str(ldg), "--method", "ldg"]) == 0
    assert json.loads((ldg / "partition.json").read_text())["method"] == "ldg"  # every method partitions a typed graph


def _drawn_files() -> set[str]:
    """Paths of the ``.npy`` files drawn in partition.hetero_store's docstring tree, with the
    placeholders ``<t>``, ``<R>`` and ``<p>`` kept."""
    import re

    import partition.hetero_store as hs

    doc = hs.__doc__ or ""
    stack: list[tuple[int, str]] = []
    files = set()
    for line in doc.splitlines():
        m = re.match(r"^(\s*)(?:[│ ]*)[├└]── (\S+)", line)
        if not m:
            continue
        depth = line.index(m.group(2))
        stack = [(d, n) for d, n in stack if d < depth]
        name = m.group(2)
        if name.endswith("/"):
            stack.append((depth, name.rstrip("/")))
        elif name.endswith(".npy"):
            files.add("/".join([n for _, n in stack] + [name]))
    return files


def test_docstring_tree_matches_what_the_writer_makes(mag_graph: HeteroGraph, three_parts) -> None:  # noqa: ANN001
    import re

    written = set()
    for rel in three_parts.meta.files:
        rel = re.sub(r"^part-\d+/", "part-<p>/", rel)
        rel = re.sub(r"^(types|part-<p>/nodes)/[^/]+/", r"\1/<t>/", rel)
        rel = re.sub(r"^part-<p>/rel/[^/]+/", "part-<p>/rel/<R>/", rel)
        written.add(rel)
    assert _drawn_files() == written
