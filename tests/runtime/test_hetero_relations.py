"""Relations kept distinct end to end, fanouts per relation, heterogeneous GraphSAGE.

The synthetic MAG-shaped graph with generated reverses has two relations on the same pair
of types (``paper:cites:paper`` and ``paper:rev_cites:paper``): a relation read from the
type pair would merge them, a relation id keeps them apart.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnntrain.models import build_model
from gnntrain.models.hetero_sage import HeteroSAGELayer, relation_dst
from gnntrain.models.typed import RGCNLayer
from gnntrain.runtime.coordinator import run_training
from partition import build_partition_set, open_partition_set
from partition.graph import Graph
from samplers import Block, CSRSource, NeighborSampler
from samplers.base import SamplerError
from samplers.config import resolve_fanouts
from tests.runtime.helpers import (
    ONE_STEP,
    assert_moved,
    assert_params_close,
    assert_replicas_agree,
    assert_same_state,
    final_state,
)
from tests.runtime.test_typed_training import GRAPH, HG, rgcn_and_pyg, typed_cfg

CITES, REV_CITES = (GRAPH.edge_type_names.index(r) for r in ("paper:cites:paper", "paper:rev_cites:paper"))
RELS = len(GRAPH.edge_type_names)
HSAGE = ("model.arch=hsage",
         f"model.options={{node_types: 4, relation_dst: "
         f"{relation_dst(GRAPH.node_type_names, GRAPH.edge_type_names)}}}")


def graph_triples() -> set[tuple[int, int, int]]:
    """Every edge of the typed graph as (global src, global dst, relation id)."""
    base = dict(zip(GRAPH.node_type_names, GRAPH.node_type_offsets, strict=False))
    out = set()
    for r, name in enumerate(GRAPH.edge_type_names):
        s, rel, d = name.split(":")
        src, dst = HG.relations[(s, rel, d)].edges()
        out |= {(int(u) + base[s], int(v) + base[d], r) for u, v in zip(src, dst, strict=True)}
    return out


def block_triples(batch_nodes: np.ndarray, block: Block) -> list[tuple[int, int, int]]:
    assert block.edge_rel is not None
    src, dst = block.edge_index.numpy()
    return list(zip(batch_nodes[src].tolist(), batch_nodes[dst].tolist(), block.edge_rel.tolist(),
                    strict=True))


# ---- 1. relations kept distinct -------------------------------------------------------------
def test_training_graph_and_partition_keep_each_edges_relation(tmp_path: Path) -> None:
    want = graph_triples()
    assert len(want) == GRAPH.num_edges  # no edge lost or merged, parallel relations included
    dst = np.repeat(np.arange(GRAPH.num_nodes), np.diff(GRAPH.indptr))
    assert GRAPH.edge_rel is not None
    assert set(zip(GRAPH.indices.tolist(), dst.tolist(), GRAPH.edge_rel.tolist(), strict=True)) == want
    pset = open_partition_set(build_partition_set(GRAPH, typed_cfg(tmp_path, workers=2).partition).path)
    assert pset.meta.edge_types == list(GRAPH.edge_type_names)
    got: set[tuple[int, int, int]] = set()
    for p in range(2):
        part = pset.load_part(p)
        assert part.edge_rel is not None and part.edge_types == GRAPH.edge_type_names
        rows = np.repeat(np.arange(part.start, part.stop), np.diff(part.indptr))
        got |= set(zip(pset.orig_ids(np.asarray(part.indices)).tolist(), pset.orig_ids(rows).tolist(),
                       np.asarray(part.edge_rel).tolist(), strict=True))
    assert got == want
    untyped = Graph(indptr=GRAPH.indptr, indices=GRAPH.indices, x=GRAPH.x, y=GRAPH.y,
                    train_idx=GRAPH.train_idx, val_idx=GRAPH.val_idx, test_idx=GRAPH.test_idx,
                    num_classes=GRAPH.num_classes)
    plain = build_partition_set(untyped, typed_cfg(tmp_path, workers=2).partition)
    assert "edge_types" not in (plain.path / "meta.json").read_text()  # untyped sets: as before
    assert plain.load_part(0).edge_rel is None


def test_sampled_blocks_carry_relations_and_draw_what_the_untyped_source_draws() -> None:
    typed = CSRSource.from_graph(GRAPH)
    plain = CSRSource(GRAPH.indptr, GRAPH.indices)
    seeds = GRAPH.train_idx[:40]
    a = NeighborSampler(typed, [4, 3]).sample(seeds, key=7)
    b = NeighborSampler(plain, [4, 3]).sample(seeds, key=7)
    np.testing.assert_array_equal(a.input_nodes, b.input_nodes)  # the same draw
    want = graph_triples()
    seen = set()
    for blk_a, blk_b in zip(a.blocks, b.blocks, strict=True):
        assert torch.equal(blk_a.edge_index, blk_b.edge_index) and blk_b.edge_rel is None
        trip = block_triples(a.input_nodes, blk_a)
        assert set(trip) <= want
        seen |= {r for _, _, r in trip}
    assert {CITES, REV_CITES} <= seen  # both relations on (paper, paper), told apart


def test_rgcn_with_relation_ids_equals_pyg_rgcnconv_and_tells_parallel_relations_apart() -> None:
    n = GRAPH.num_nodes
    torch.manual_seed(0)
    ours, ref = rgcn_and_pyg(RGCNLayer(GRAPH.num_features, 5, 4, 2, RELS), RELS)
    types = torch.from_numpy(GRAPH.node_types())  # type: ignore[arg-type]
    ei = torch.from_numpy(GRAPH.edge_index())
    rel = torch.from_numpy(GRAPH.edge_rel)  # type: ignore[arg-type]
    x = torch.from_numpy(GRAPH.x)
    block = Block(ei, n, n, torch.from_numpy(GRAPH.indptr), None, types, rel)
    with torch.no_grad():
        got = ours(block, x)
        torch.testing.assert_close(got, ref(x, ei, rel), rtol=1e-4, atol=1e-5)
        swapped = rel.clone()
        swapped[rel == CITES], swapped[rel == REV_CITES] = REV_CITES, CITES
        assert not torch.allclose(ours(Block(ei, n, n, block.indptr, None, types, swapped), x), got)


def test_rgcn_layer_starts_at_pyg_rgcnconvs_scale() -> None:
    """Every basis and root matrix draws from Glorot's bound for its own [in, out] shape,
    as PyG's RGCNConv does; on the 3-d tensors whole, torch's fans would give a bound ~8x
    smaller at ACM's 1,902 inputs."""
    from torch_geometric.nn import RGCNConv

    torch.manual_seed(0)
    ours = RGCNLayer(1902, 64, 3, 2)
    ref = RGCNConv(1902, 64, num_relations=9, num_bases=2)
    bound = (6 / (1902 + 64)) ** 0.5
    for w in (ours.bases, ours.root, ref.weight, ref.root):
        assert 0.97 * bound < float(w.abs().max()) <= bound
        assert float(w.std()) == pytest.approx(bound / 3 ** 0.5, rel=0.02)  # uniform(-a, a)


def test_rgcn_root_is_shared_unless_asked_per_type() -> None:
    """The root term (a block without edges leaves only it) is one ``W0 h + b`` for every
    node, as PyG's RGCNConv; ``root_per_type`` gives each node type its own."""
    torch.manual_seed(0)
    h = torch.randn(6, 5)
    types = torch.tensor([0, 1, 2, 0, 1, 2])
    block = Block(torch.empty(2, 0, dtype=torch.int64), 6, 6, torch.zeros(7, dtype=torch.int64), None, types,
                  None)
    shared, per = RGCNLayer(5, 3, 3, 2), RGCNLayer(5, 3, 3, 2, root_per_type=True)
    with torch.no_grad():
        for layer in (shared, per):
            layer.bias.uniform_()
        assert shared.root.shape == (1, 5, 3) and per.root.shape == (3, 5, 3)
        torch.testing.assert_close(shared(block, h), h @ shared.root[0] + shared.bias[0])
        torch.testing.assert_close(per(block, h), torch.einsum("ni,nio->no", h, per.root[types]) + per.bias[types])


# ---- 2. fanouts per relation ------------------------------------------------------------------
def test_per_relation_fanouts_bound_each_relations_count_and_ignore_grouping() -> None:
    src = CSRSource.from_graph(GRAPH)
    fan = {name: 2 for name in GRAPH.edge_type_names}
    fan["paper:cites:paper"], fan["paper:rev_cites:paper"], fan["paper:rev_writes:author"] = -1, 0, 1
    per = resolve_fanouts([fan], GRAPH.edge_type_names)[0]
    assert isinstance(per, tuple)
    seeds = np.arange(GRAPH.num_nodes)
    nb = src.sample_neighbors(seeds, per, replace=False, key=11)
    assert nb.rels is not None
    row = np.repeat(seeds, nb.counts)
    dst = np.repeat(np.arange(GRAPH.num_nodes), np.diff(GRAPH.indptr))
    assert GRAPH.edge_rel is not None
    deg = np.zeros((GRAPH.num_nodes, RELS), dtype=np.int64)
    np.add.at(deg, (dst, GRAPH.edge_rel), 1)
    got = np.zeros_like(deg)
    np.add.at(got, (row, nb.rels), 1)
    cap = np.array([GRAPH.num_nodes if f == -1 else f for f in per])
    np.testing.assert_array_equal(got, np.minimum(deg, cap))  # exactly min(fanout_r, deg_r)
    assert got[:, REV_CITES].sum() == 0 and got[:, CITES].sum() == deg[:, CITES].sum()
    assert set(zip(nb.nbrs.tolist(), row.tolist(), nb.rels.tolist(), strict=True)) <= graph_triples()
    # a node's draw depends on (key, node, relation) only: any grouping of the seeds agrees
    perm = np.random.default_rng(0).permutation(seeds)
    halves = [src.sample_neighbors(np.sort(h), per, replace=False, key=11) for h in np.array_split(perm, 2)]
    for h, part in zip(np.array_split(perm, 2), halves, strict=True):
        order = np.sort(h)
        starts = np.concatenate([[0], np.cumsum(nb.counts)])
        mine = np.concatenate([np.arange(starts[v], starts[v + 1]) for v in order])
        np.testing.assert_array_equal(part.nbrs, nb.nbrs[mine])
        np.testing.assert_array_equal(part.rels, nb.rels[mine])


@pytest.mark.parametrize(("fanouts", "match"), [
    ("[{nope: 3}, 5]", r"sampler.fanouts\[0\]: key 'nope' is not a relation of this graph"),
    ("[{writes: 3}, 5]", r"sampler.fanouts\[0\]: no fanout for relations"),
    ("[{writes: -2}, 5]", r"fanouts\[0\]\['writes'\]=-2: a relation's fanout must be >= 0, or -1"),
])
def test_bad_per_relation_fanouts_are_refused_before_work(tmp_path: Path, fanouts: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):  # a config error, or a name the graph lacks
        run_training(typed_cfg(tmp_path, fanouts=fanouts), single_process=True, graph=GRAPH,
                     progress=False)
    assert not (tmp_path / "parts").exists()


def test_per_relation_fanouts_on_an_untyped_graph_are_refused() -> None:
    with pytest.raises(ValueError, match="per-relation fanouts need a typed graph"):
        resolve_fanouts([{"cites": 2}], ())
    with pytest.raises(SamplerError, match="needs a typed source"):
        CSRSource(GRAPH.indptr, GRAPH.indices).sample_neighbors(np.arange(3), (1, 2), replace=False, key=0)


def per_relation(rest: int = 3) -> str:
    return "{" + ", ".join(f"'{r}': {1 if 'rev_' in r else rest}" for r in GRAPH.edge_type_names) + "}"


def test_one_ray_worker_equals_single_process_with_per_relation_fanouts(ray_local: None,
                                                                       tmp_path: Path) -> None:
    cfg = typed_cfg(tmp_path, "model.options={node_types: 4, relations: 8, bases: 2}",
                    fanouts=f"[{per_relation()}, {per_relation(2)}]")
    single = run_training(cfg, single_process=True, graph=GRAPH, progress=False)
    dist = run_training(cfg, graph=GRAPH, progress=False)
    assert_same_state(final_state(dist), final_state(single), world=1)
    assert single["final"]["test_acc"] == dist["final"]["test_acc"]


# ---- 3. heterogeneous GraphSAGE ----------------------------------------------------------------
def test_hsage_layer_equals_pyg_heteroconv_of_sageconv() -> None:
    from torch_geometric.nn import HeteroConv, SAGEConv

    from gnntrain.data.hetero import to_pyg_hetero

    torch.manual_seed(0)
    data = to_pyg_hetero(HG)
    width = GRAPH.num_features
    for t in HG.node_types:  # the training graph's zero-padded features, per type
        lo, hi = GRAPH.node_type_offsets[GRAPH.node_type_names.index(t)], \
            GRAPH.node_type_offsets[GRAPH.node_type_names.index(t) + 1]
        data[t].x = torch.from_numpy(GRAPH.x[lo:hi])
    names = [tuple(r.split(":")) for r in GRAPH.edge_type_names]
    ref = HeteroConv({et: SAGEConv(width, 5, aggr="mean") for et in names}, aggr="sum")
    ours = HeteroSAGELayer(width, 5, 4, relation_dst(GRAPH.node_type_names, GRAPH.edge_type_names))
    with torch.no_grad():
        for r, et in enumerate(names):
            conv = ref.convs[et]
            ours.neigh[r].copy_(conv.lin_l.weight.T)
            ours.bias[r].copy_(conv.lin_l.bias)
            ours.root[r].copy_(conv.lin_r.weight.T)
        want = ref({t: data[t].x for t in HG.node_types},
                   {et: data[et].edge_index for et in names})
        n = GRAPH.num_nodes
        got = ours(Block(torch.from_numpy(GRAPH.edge_index()), n, n, None, None,
                         torch.from_numpy(GRAPH.node_types()),  # type: ignore[arg-type]
                         torch.from_numpy(GRAPH.edge_rel)), torch.from_numpy(GRAPH.x))  # type: ignore[arg-type]
    for i, t in enumerate(GRAPH.node_type_names):
        lo, hi = GRAPH.node_type_offsets[i], GRAPH.node_type_offsets[i + 1]
        torch.testing.assert_close(got[lo:hi], want[t], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("workers", [2, 4])
def test_hsage_k_workers_one_step_equals_single_process(ray_local: None, tmp_path: Path,
                                                        workers: int) -> None:
    single = run_training(typed_cfg(tmp_path, *ONE_STEP, *HSAGE, fanouts="[-1,-1]"), single_process=True,
                          graph=GRAPH, progress=False)
    dist = run_training(typed_cfg(tmp_path, *ONE_STEP, *HSAGE, workers=workers, fanouts="[-1,-1]"),
                        graph=GRAPH, progress=False)
    a = final_state(single)["model"]
    assert_moved(build_model("hsage", typed_cfg(tmp_path, *HSAGE).model, GRAPH.num_features,
                             GRAPH.num_classes, 0).state_dict(), a)
    assert_params_close(final_state(dist)["model"], a)
    assert_replicas_agree(final_state(dist), workers)


def test_hsage_learns_the_typed_neighbourhood(tmp_path: Path) -> None:
    s = run_training(typed_cfg(tmp_path, *HSAGE, "train.epochs=15", "model.dropout=0.0"),
                     single_process=True, graph=GRAPH, progress=False)
    assert s["final"]["test_acc"] > 0.5, s["final"]
