"""Partitioners: symmetrising, METIS multi-constraint balance, random, LDG, bad requests."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from partition import PartitionConfig, PartitionError, assign_parts
from partition.balance import allowed_loads, symmetrize, vertex_weights
from partition.graph import Graph
from partition.metis import load_metis, part_graph_kway
from tests.conftest import make_graph
from tests.partition.conftest import graph_from_edges, planted_blocks

METHODS = ("metis", "random", "ldg")


def _cut_fraction(g: Graph, parts: np.ndarray) -> float:
    dst = np.repeat(np.arange(g.num_nodes), g.in_degrees())
    return float(np.mean(parts[g.indices] != parts[dst]))


def _imbalance(values: np.ndarray, k: int, parts: np.ndarray) -> float:
    load = np.bincount(parts, weights=values, minlength=k)
    return float(load.max() / load.mean())


def test_symmetrize_equals_scipy_union_without_diagonal(messy_graph: Graph) -> None:
    g = messy_graph
    n = g.num_nodes
    a = sp.csr_matrix((np.ones(g.num_edges), g.indices, g.indptr), shape=(n, n))
    ref = ((a + a.T) > 0).astype(np.int8).tolil()
    ref.setdiag(0)
    ref = ref.tocsr()
    ref.eliminate_zeros()
    ref.sort_indices()
    sym = symmetrize(g)
    assert sym.adjncy.dtype == np.int32
    assert np.array_equal(sym.xadj, ref.indptr)
    assert np.array_equal(sym.adjncy, ref.indices)


def test_symmetrize_returns_an_already_symmetric_graph_as_it_is(tiny_graph: Graph) -> None:
    sym = symmetrize(tiny_graph, np.int64)  # make_graph: undirected, sorted, no self-loops
    assert np.array_equal(sym.xadj, tiny_graph.indptr) and np.array_equal(sym.adjncy, tiny_graph.indices)
    one_way = graph_from_edges(np.array([0, 1]), np.array([1, 2]), 4)  # directed: not symmetric
    assert symmetrize(one_way).adjncy.tolist() == [1, 0, 2, 1]


@pytest.mark.parametrize("graph", ["tiny_graph", "messy_graph"])
def test_symmetrize_refuses_more_entries_than_the_index_type_holds(
        graph: str, request: pytest.FixtureRequest) -> None:
    with pytest.raises(PartitionError, match="adjacency entries.*ldg"):
        symmetrize(request.getfixturevalue(graph), max_entries=10)


def test_metis_library_is_found_and_its_index_width_probed() -> None:
    lib = load_metis()
    assert lib.idx_dtype in (np.dtype(np.int32), np.dtype(np.int64))
    assert "metis" in lib.path


@pytest.mark.parametrize("method", METHODS)
def test_every_node_gets_a_part_and_same_seed_same_parts(method: str, messy_graph: Graph) -> None:
    cfg = PartitionConfig(method=method, parts=3, seed=5)
    a = assign_parts(messy_graph, cfg)
    b = assign_parts(messy_graph, cfg)
    assert a.dtype == np.int64 and a.shape == (messy_graph.num_nodes,)
    assert set(np.unique(a)) == {0, 1, 2}
    assert np.array_equal(a, b)


@pytest.mark.parametrize("method", METHODS)
def test_one_part_is_trivial(method: str, tiny_graph: Graph) -> None:
    parts = assign_parts(tiny_graph, PartitionConfig(method=method, parts=1))
    assert np.array_equal(parts, np.zeros(tiny_graph.num_nodes, dtype=np.int64))


def test_metis_seed_changes_the_parts() -> None:
    g = make_graph(600, 6)
    a = assign_parts(g, PartitionConfig(parts=4, seed=0))
    b = assign_parts(g, PartitionConfig(parts=4, seed=1))
    assert not np.array_equal(a, b)


def _within_allowed(g: Graph, cfg: PartitionConfig, parts: np.ndarray) -> bool:
    w, _ = vertex_weights(g, cfg)
    allowed = allowed_loads(w, cfg.parts, cfg.imbalance)
    loads = np.stack([np.bincount(parts, weights=w[:, c], minlength=cfg.parts)
                      for c in range(w.shape[1])], axis=1)
    return bool(np.all(loads <= allowed))


def test_metis_balances_nodes_training_nodes_and_edges_at_once() -> None:
    g = make_graph(3000, 8, seed=3)
    cfg = PartitionConfig(parts=4, imbalance=1.05)
    parts = assign_parts(g, cfg)
    assert _within_allowed(g, cfg, parts)
    assert _imbalance(g.mask("train").astype(float), 4, parts) <= 1.05
    assert _imbalance(g.in_degrees().astype(float), 4, parts) <= 1.05


def test_allowed_load_is_the_tolerance_or_whole_nodes() -> None:
    w = np.ones((10, 1), dtype=np.int64)
    assert allowed_loads(w, 4, 1.05).tolist() == [3.0]  # 2.5 nodes per part: 3 is the best
    w = np.ones((1000, 1), dtype=np.int64)
    assert allowed_loads(w, 4, 1.05).tolist() == [262.5]


@pytest.mark.parametrize("k", [2, 4, 8])
def test_metis_stays_within_the_tolerance_on_ca_hepph(k: int, data_root: Path) -> None:
    """METIS alone overshoots 1.05 on CA-HepPh at k=2 (1.066); the retry keeps it within."""
    from gnntrain.config import CsvDataset
    from gnntrain.data import load_dataset

    g = load_dataset(CsvDataset(name="hep", path=str(data_root / "snap/ca-HepPh/CA-HepPh.txt")))
    cfg = PartitionConfig(parts=k)
    parts = assign_parts(g, cfg)
    assert _within_allowed(g, cfg, parts)
    assert _imbalance(g.mask("train").astype(float), k, parts) <= 1.05


def test_multi_constraint_really_reaches_metis() -> None:
    """Training nodes all in two of four planted blocks: with one constraint METIS keeps
    the blocks whole (two parts get no training node); the train constraint spreads them."""
    g0 = planted_blocks(blocks=4, size=150)
    train = np.arange(0, 300, dtype=np.int64)  # blocks 0 and 1
    rest = np.arange(300, 600, dtype=np.int64)
    g = Graph(indptr=g0.indptr, indices=g0.indices, x=g0.x, y=g0.y, train_idx=train,
              val_idx=rest[::2].copy(), test_idx=rest[1::2].copy(), num_classes=g0.num_classes,
              name="blocks").validate()
    one = assign_parts(g, PartitionConfig(parts=4, balance_train=False, balance_edges=False,
                                          allow_empty_train=True))
    multi = assign_parts(g, PartitionConfig(parts=4, balance_train=True))
    mask = g.mask("train").astype(float)
    assert _imbalance(mask, 4, one) > 1.5
    assert _imbalance(mask, 4, multi) <= 1.05 + 4 / 300


def test_ctypes_binding_passes_each_constraint_column() -> None:
    """Direct check of the vwgt layout ([n, ncon] row-major): a constraint that weights only
    the first 40 nodes must still be spread evenly over 2 parts."""
    g = planted_blocks(blocks=2, size=100)
    sym = symmetrize(g, load_metis().idx_dtype)
    w = np.ones((g.num_nodes, 2), dtype=np.int64)
    w[:, 1] = 0
    w[:40, 1] = 1  # all in block 0
    parts, _ = part_graph_kway(sym.xadj, sym.adjncy, 2, vwgt=w, ubvec=1.05)
    counts = np.bincount(parts[:40], minlength=2)
    assert counts.min() >= 19


def test_metis_finds_planted_blocks_and_beats_random(blocks_graph: Graph) -> None:
    metis = _cut_fraction(blocks_graph, assign_parts(blocks_graph, PartitionConfig(parts=4)))
    rnd = _cut_fraction(blocks_graph, assign_parts(blocks_graph, PartitionConfig(parts=4, method="random")))
    planted = _cut_fraction(blocks_graph, np.arange(blocks_graph.num_nodes) // 150)
    assert metis <= planted * 1.1
    assert metis < 0.3 * rnd


def test_volume_objective_gives_a_valid_balanced_partition(blocks_graph: Graph) -> None:
    parts = assign_parts(blocks_graph, PartitionConfig(parts=4, objective="vol"))
    assert _imbalance(np.ones(blocks_graph.num_nodes), 4, parts) <= 1.1
    assert _cut_fraction(blocks_graph, parts) < 0.3


def test_random_is_balanced_to_one_node_and_cuts_one_minus_one_over_k() -> None:
    g = make_graph(4000, 10, seed=2)
    for k in (2, 5):
        parts = assign_parts(g, PartitionConfig(parts=k, method="random", seed=3))
        for stratum in (g.train_idx, np.flatnonzero(~g.mask("train"))):
            c = np.bincount(parts[stratum], minlength=k)
            assert c.max() - c.min() <= 1
        assert abs(_cut_fraction(g, parts) - (1 - 1 / k)) < 0.02


def test_ldg_respects_capacities_and_beats_random(blocks_graph: Graph) -> None:
    cfg = PartitionConfig(parts=4, method="ldg", imbalance=1.05)
    parts = assign_parts(blocks_graph, cfg)
    w, names = vertex_weights(blocks_graph, cfg)
    assert names == ["nodes", "train", "edges"]
    for c in range(w.shape[1]):
        load = np.bincount(parts, weights=w[:, c], minlength=4)
        assert load.max() <= w[:, c].sum() / 4 * 1.05 + w[:, c].max()  # capacity + one node
    rnd = assign_parts(blocks_graph, PartitionConfig(parts=4, method="random"))
    assert _cut_fraction(blocks_graph, parts) < _cut_fraction(blocks_graph, rnd) - 0.1


@pytest.mark.parametrize("method", METHODS)
def test_isolated_nodes_and_self_loops_are_partitioned(method: str) -> None:
    n = 60
    src = np.array([0, 1, 2, 3, 3, 5, 10, 11], dtype=np.int64)
    dst = np.array([1, 2, 0, 3, 4, 5, 11, 12], dtype=np.int64)  # self-loops 3->3, 5->5
    g = graph_from_edges(src, dst, n, undirected=True, train_frac=0.5)
    parts = assign_parts(g, PartitionConfig(method=method, parts=3))
    assert parts.min() == 0 and parts.max() == 2
    assert np.bincount(parts, minlength=3).min() > 0


def test_edge_constraint_is_dropped_for_a_graph_without_edges() -> None:
    g = graph_from_edges(np.zeros(0, np.int64), np.zeros(0, np.int64), 20)
    w, names = vertex_weights(g, PartitionConfig(parts=2))
    assert names == ["nodes", "train"] and w.shape == (20, 2)
    parts = assign_parts(g, PartitionConfig(parts=2))
    assert np.bincount(parts).tolist() == [10, 10]


def test_bad_requests_name_the_field_and_the_limit(tiny_graph: Graph) -> None:
    n, n_train = tiny_graph.num_nodes, tiny_graph.train_idx.size
    with pytest.raises(PartitionError, match=rf"partition.parts={n + 1} .*{n} nodes"):
        assign_parts(tiny_graph, PartitionConfig(parts=n + 1, allow_empty_train=True))
    with pytest.raises(PartitionError, match=rf"parts={n_train + 1} .*{n_train} training.*allow_empty_train"):
        assign_parts(tiny_graph, PartitionConfig(parts=n_train + 1, method="random"))
    with pytest.raises(PartitionError, match="partition.seed=-1"):
        assign_parts(tiny_graph, PartitionConfig(parts=2, seed=-1))
    with pytest.raises(ValueError, match="parts"):
        PartitionConfig(parts=0)
    with pytest.raises(PartitionError, match="partition.parts=0: must be >= 1"):
        assign_parts(tiny_graph, PartitionConfig.model_construct(parts=0))


def test_more_parts_than_training_nodes_allowed_when_asked() -> None:
    g = graph_from_edges(np.arange(19), np.arange(1, 20), 20, undirected=True, train_frac=0.1)
    assert g.train_idx.size == 2
    parts = assign_parts(g, PartitionConfig(parts=4, method="random", allow_empty_train=True))
    assert np.count_nonzero(np.bincount(parts[g.train_idx], minlength=4)) == 2


def test_a_part_left_without_training_nodes_is_reported() -> None:
    g0 = planted_blocks(blocks=2, size=60)
    g = Graph(indptr=g0.indptr, indices=g0.indices, x=g0.x, y=g0.y,
              train_idx=np.arange(0, 10, dtype=np.int64), val_idx=np.arange(10, 60, dtype=np.int64),
              test_idx=np.arange(60, 120, dtype=np.int64), num_classes=g0.num_classes).validate()
    with pytest.raises(PartitionError, match="without training nodes.*balance_train"):
        assign_parts(g, PartitionConfig(parts=2, balance_train=False))


def test_metis_spill_setting_changes_neither_parts_nor_key_nor_cwd(blocks_graph: Graph) -> None:
    from partition.store import settings_of

    cwd = os.getcwd()
    spill = assign_parts(blocks_graph, PartitionConfig(parts=4, metis_spill=True))
    assert os.getcwd() == cwd
    memory = assign_parts(blocks_graph, PartitionConfig(parts=4, metis_spill=False))
    assert np.array_equal(spill, memory)
    assert settings_of(PartitionConfig(metis_spill=True)) == settings_of(PartitionConfig(metis_spill=False))
    assert settings_of(PartitionConfig(seed=1)) != settings_of(PartitionConfig(seed=2))


def _skewed_link_graph() -> Graph:
    """Four planted blocks of 150 nodes, blocks 0 and 1 ten times denser than 2 and 3, every
    node a training node (a link task's message-passing graph): balancing nodes alone keeps
    the blocks whole and gives two parts most of the edges."""
    rng = np.random.default_rng(5)
    n, size = 600, 150
    block = np.arange(n) // size
    u, v = np.triu_indices(n, 1)
    p_in = np.array([0.2, 0.2, 0.02, 0.02])
    p = np.where(block[u] == block[v], p_in[block[u]], 0.002)
    keep = rng.random(u.shape[0]) < p
    g = graph_from_edges(u[keep], v[keep], n, undirected=True, name="skewed")
    return Graph(indptr=g.indptr, indices=g.indices, x=g.x, y=g.y,
                 train_idx=np.arange(n, dtype=np.int64), val_idx=np.empty(0, np.int64),
                 test_idx=np.empty(0, np.int64), num_classes=g.num_classes, name="skewed").validate()


def test_metis_balances_training_edges_when_the_task_weighs_nodes_by_them() -> None:
    """A link task's training weight (training in-degree: the edges a part's owner trains on)
    is what the ``train`` constraint balances, with the edge constraint off; the node-task
    default (one per training node) leaves the same graph far out of balance."""
    g0 = _skewed_link_graph()
    g = g0.with_train_weight(g0.in_degrees())
    cfg = PartitionConfig(parts=4, imbalance=1.05, balance_edges=False)
    edges = g.in_degrees().astype(float)
    bound = float(allowed_loads(edges[:, None].astype(np.int64), 4, cfg.imbalance)[0]) / (edges.sum() / 4)
    assert bound < 1.1  # whole nodes allow nearly the configured 1.05 here
    weighted = assign_parts(g, cfg)
    assert _within_allowed(g, cfg, weighted)
    assert _imbalance(edges, 4, weighted) <= bound
    unweighted = assign_parts(g0, cfg)  # one per training node: nodes balanced, edges not
    assert _imbalance(edges, 4, unweighted) > 1.3


def test_train_weight_is_hashed_validated_and_named_in_errors() -> None:
    g = _skewed_link_graph()
    w = g.in_degrees()
    assert g.with_train_weight(w).content_hash() != g.content_hash()
    assert np.array_equal(g.with_train_weight(w).train_weights(), w)
    assert np.array_equal(g.train_weights(), np.ones(g.num_nodes, np.int64))
    with pytest.raises(ValueError, match="train_weight has 3 entries, expected num_nodes=600"):
        g.with_train_weight(np.ones(3, np.int64))
    with pytest.raises(ValueError, match="train_weight: node 0 has weight -1"):
        g.with_train_weight(np.r_[-1, w[1:]])


def _typed_graph() -> Graph:
    from gnntrain.config import SyntheticHeteroConfig
    from gnntrain.data.hetero import to_training_graph
    from gnntrain.data.hetero_synthetic import generate_hetero

    return to_training_graph(generate_hetero(SyntheticHeteroConfig(
        papers=2000, authors=3000, institutions=60, fields=200, features=4, classes=4, seed=1),
        add_reverse=True))


@pytest.mark.parametrize("method", ["metis", "multilevel", "ldg", "random"])
def test_each_node_type_big_enough_is_balanced_on_its_own(method: str) -> None:
    """A typed graph trained as one graph gets a ``nodes:<type>`` constraint per type with
    at least 1/(imbalance-1) nodes per part (DistDGL's per-type balance); the report gives
    every type's imbalance."""
    from partition.report import quality_report

    g = _typed_graph()
    cfg = PartitionConfig(parts=4, method=method)  # type: ignore[arg-type]
    w, names = vertex_weights(g, cfg)
    # 60 institutions (15 a part, under the 20 that 1.05 needs) stay in "nodes" only
    assert names == ["nodes", "nodes:paper", "nodes:author", "nodes:field_of_study", "train", "edges"]
    types = g.node_types()
    assert types is not None
    for c, name in enumerate(names[1:4], start=1):
        np.testing.assert_array_equal(w[:, c], types == g.node_type_names.index(name[6:]))
    parts = assign_parts(g, cfg)
    allowed = allowed_loads(w, 4, cfg.imbalance)
    loads = np.stack([np.bincount(parts, weights=w[:, c], minlength=4) for c in range(w.shape[1])], axis=1)
    if method != "ldg":  # LDG treats the loads as capacities it can overshoot at the end
        assert (loads.max(axis=0) <= allowed + 1e-9).all(), (names, loads.max(axis=0), allowed)
    report = quality_report(g, parts, num_parts=4)
    for t, name in enumerate(g.node_type_names):
        counts = np.bincount(parts[types == t], minlength=4)
        assert report.imbalance[f"nodes:{name}"] == pytest.approx(counts.max() / counts.mean())
    if method == "random":  # every type dealt on its own: +-1 per part
        for t in range(len(g.node_type_names)):
            counts = np.bincount(parts[types == t], minlength=4)
            assert counts.max() - counts.min() <= 1


def test_per_type_balance_can_be_turned_off_and_untyped_graphs_never_get_it() -> None:
    g = _typed_graph()
    off = PartitionConfig(parts=4, balance_node_types=False)
    assert vertex_weights(g, off)[1] == ["nodes", "train", "edges"]
    assert vertex_weights(make_graph(500), PartitionConfig(parts=4))[1] == ["nodes", "train", "edges"]
    assert assign_parts(g, off).shape == (g.num_nodes,)


def test_rebalance_moves_boundary_nodes_until_every_load_is_allowed() -> None:
    """Four planted blocks, one part holding a block and a half: the rebalancer moves
    nodes out of it (those with most edges elsewhere first) until every constraint is within
    its allowed load, never fills another part past one, and leaves a balanced split alone."""
    from partition.balance import rebalanced

    g = planted_blocks(blocks=4, size=150)
    w = np.ones((g.num_nodes, 1), dtype=np.int64)
    sym = symmetrize(g)
    allowed = allowed_loads(w, 4, 1.05)
    blocks = np.arange(g.num_nodes) // 150
    skewed = blocks.copy()
    skewed[(blocks == 1) & (np.arange(g.num_nodes) % 150 < 75)] = 0  # part 0: 225 nodes, part 1: 75
    fixed = rebalanced(sym, w, skewed, 4, allowed)
    loads = np.stack([np.bincount(fixed, weights=w[:, c], minlength=4) for c in range(w.shape[1])], axis=1)
    assert (loads <= allowed + 1e-9).all(), (loads, allowed)
    moved = fixed != skewed
    assert moved.any() and np.all(skewed[moved] == 0)  # only the overloaded part gave nodes
    assert np.array_equal(rebalanced(sym, w, blocks, 4, allowed), blocks)  # balanced: untouched
    # boundary nodes first: the nodes of block 1 that sat in part 0 go back to block 1's part,
    # so the moves cut fewer edges than they restore
    src = np.repeat(np.arange(g.num_nodes), np.diff(sym.xadj))
    assert np.sum(fixed[src] != fixed[sym.adjncy]) < np.sum(skewed[src] != skewed[sym.adjncy])


def test_metis_keeps_every_node_type_within_the_tolerance_on_hgcma_imdb(data_root: Path) -> None:
    """HGCMA IMDB's three node types at k=4: every METIS try ends 1.09-1.10 over on a type;
    the rebalancer brings every constraint within 1.05."""
    from gnntrain.config import load_config
    from gnntrain.data import load_dataset
    from tests.conftest import REPO, real_path

    real_path(data_root, "hetero")
    cfg = load_config(REPO / "datasets" / "hgcma-imdb.yaml", overrides=["partition.parts=4", "cluster.workers=4"])
    g = load_dataset(cfg.dataset)
    pcfg = cfg.partition
    parts = assign_parts(g, pcfg)
    w, names = vertex_weights(g, pcfg)
    loads = np.stack([np.bincount(parts, weights=w[:, c], minlength=4) for c in range(w.shape[1])], axis=1)
    assert (loads.max(axis=0) <= allowed_loads(w, 4, pcfg.imbalance) + 1e-9).all(), \
        dict(zip(names, (loads.max(axis=0) / loads.mean(axis=0)).round(3).tolist(), strict=True))
