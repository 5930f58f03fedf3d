"""Batches carry the right data, and PyG layers on the blocks compute the right thing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.nn import SAGEConv

from partition.graph import Graph
from samplers import CSRSource, NeighborSampler, PreparedBatch, prepare, to_pyg


def _two_layer_sage(seed: int = 0) -> torch.nn.ModuleList:
    torch.manual_seed(seed)
    return torch.nn.ModuleList([SAGEConv(8, 16), SAGEConv(16, 5)])


def test_full_fanout_blocks_equal_full_graph_sage(hub_graph: Graph, hub_source: CSRSource) -> None:
    """With fanout -1 the blocks hold every in-edge, so a 2-layer GraphSAGE on the blocks
    must give the seeds exactly the outputs of the full-graph computation."""
    convs = _two_layer_sage()
    x = torch.from_numpy(hub_graph.x)
    ei = torch.from_numpy(hub_graph.edge_index())
    with torch.no_grad():
        full = convs[1](convs[0](x, ei).relu(), ei)
    seeds = np.array([0, 3, 17, 250, 599])
    batch = NeighborSampler(hub_source, [-1, -1]).sample(seeds, key=0)
    pb = prepare(batch, hub_graph.x[batch.input_nodes], hub_graph.y[seeds])
    h = pb.x
    with torch.no_grad():
        for i, (adj, conv) in enumerate(zip(to_pyg(batch), convs, strict=True)):
            h = conv((h, h[:adj.size[1]]), adj.edge_index, size=adj.size)
            if i == 0:
                h = h.relu()
    assert h.shape == (seeds.size, 5)
    torch.testing.assert_close(h, full[seeds], rtol=1e-5, atol=1e-5)
    assert torch.equal(pb.y, torch.from_numpy(hub_graph.y[seeds]))


def test_sampled_blocks_equal_sage_on_the_sampled_subgraph(hub_graph: Graph,
                                                           hub_source: CSRSource) -> None:
    """With real fanouts, layer 0 of a seed aggregates exactly its sampled neighbours."""
    conv = _two_layer_sage()[0]
    batch = NeighborSampler(hub_source, [4]).sample(np.array([5, 9]), key=2)
    blk = batch.blocks[0]
    x = torch.from_numpy(hub_graph.x[batch.input_nodes])
    lin_l, lin_r = conv.lin_l, conv.lin_r
    assert isinstance(lin_l, torch.nn.Module) and isinstance(lin_r, torch.nn.Module)
    with torch.no_grad():
        out = conv((x, x[:blk.num_dst]), blk.edge_index, size=blk.size)
        for i in range(2):
            nbr = blk.edge_index[0][blk.edge_index[1] == i]
            assert nbr.numel() > 0
            manual = lin_l(x[nbr].mean(0)) + lin_r(x[i])
            torch.testing.assert_close(out[i], manual, rtol=1e-5, atol=1e-5)


def test_prepare_is_zero_copy_and_to_moves_everything(hub_graph: Graph, hub_source: CSRSource) -> None:
    batch = NeighborSampler(hub_source, [3, 2]).sample(np.arange(6), key=1)
    feats = hub_graph.x[batch.input_nodes]
    y = np.arange(6)
    pb = prepare(batch, feats, y)
    assert isinstance(pb, PreparedBatch) and pb.batch_size == 6
    assert pb.x.data_ptr() == feats.ctypes.data  # no copy
    moved = pb.to("cpu", non_blocking=True)
    assert torch.equal(moved.x, pb.x) and len(moved.blocks) == 2
    assert [b.size for b in moved.blocks] == [b.size for b in batch.blocks]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_to_cuda(hub_graph: Graph, hub_source: CSRSource) -> None:
    batch = NeighborSampler(hub_source, [3, 2]).sample(np.arange(6), key=1)
    pb = prepare(batch, hub_graph.x[batch.input_nodes], np.arange(6))
    on = pb.pin_memory().to("cuda", non_blocking=True)
    assert on.x.is_cuda and on.y.is_cuda and all(b.edge_index.is_cuda for b in on.blocks)
    assert torch.equal(on.x.cpu(), pb.x)


def test_dgl_blocks(hub_source: CSRSource) -> None:
    dgl = pytest.importorskip("dgl")
    from samplers.dgl import to_dgl_blocks

    batch = NeighborSampler(hub_source, [3, 2]).sample(np.arange(6), key=1)
    blocks = to_dgl_blocks(batch)
    for blk, ours in zip(blocks, batch.blocks, strict=True):
        assert blk.num_src_nodes() == ours.num_src and blk.num_dst_nodes() == ours.num_dst
        src, dst = blk.edges()
        assert torch.equal(src, ours.edge_index[0]) and torch.equal(dst, ours.edge_index[1])
        assert torch.equal(blk.srcdata[dgl.NID], torch.from_numpy(batch.input_nodes[:ours.num_src]))
