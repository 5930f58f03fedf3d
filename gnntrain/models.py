"""GNN models that run on sampled blocks (message-flow graphs) with PyG layers.

Layer ``l`` reads the ``num_src`` rows of block ``l`` and writes only its ``num_dst``
rows, so no layer computes rows the next one does not need (DGL's blocks; PyG's
``NeighborLoader`` without trimming computes a hop too many). The same layers run
layer by layer over the full graph for evaluation (:meth:`BlockGNN.layer`).

Message passing. When a block carries ``indptr`` (the sampler's blocks do: edges come
grouped by destination), GraphSAGE and GCN aggregate with one sparse CSR x dense product
(``torch.sparse.mm``, PyG's ``adj_t`` path) over the same PyG parameters; a block without
it (an ``edge_index`` only, e.g. :mod:`gnntrain.fullbatch`) goes through PyG's per-edge
gather/scatter. Both compute the same function (tests check forward and gradients); the
CSR path was ~1.3x faster per training step on synthetic-small (``bench/RESULTS.md``).
GAT always runs PyG's ``GATConv`` on ``edge_index`` (attention is per edge).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor, nn
from torch_geometric.nn import GATConv, SAGEConv

from gnntrain.config import ModelConfig
from gnntrain.ops import relu_dropout
from samplers.batch import csr_adjacency


class BlockLike(Protocol):
    """What a model needs of a block: local edges, the two node counts, and optionally the
    CSR row pointer of edges grouped by destination (see :class:`samplers.Block`)."""

    edge_index: Tensor
    num_src: int
    num_dst: int
    indptr: Tensor | None


def spmm(indptr: Tensor, edge_index: Tensor, values: Tensor, x_src: Tensor, num_dst: int) -> Tensor:
    """``out[d] = sum_e values[e] * x_src[src_e]`` over the in-edges ``e`` of ``d``, as one
    CSR product; edges grouped by destination, ``indptr`` their ``[num_dst + 1]`` offsets."""
    adj = csr_adjacency(indptr, edge_index, values.to(x_src.dtype), num_dst, x_src.shape[0])
    if x_src.is_cuda:
        return torch.sparse.mm(adj, x_src)  # cuSPARSE
    return torch.sparse.mm(adj, x_src, "sum")  # CPU kernel with its own backward


def mean_weights(indptr: Tensor, num_edges: int) -> Tensor:
    """Per-edge ``1 / in-degree in the block``: with :func:`spmm`, the neighbour mean."""
    counts = indptr[1:] - indptr[:-1]
    return (1.0 / counts.clamp(min=1).to(torch.float32)).repeat_interleave(counts, output_size=num_edges)


class GCNBlockConv(nn.Module):
    """GCN layer (Kipf & Welling) on a bipartite block, with true graph degrees.

    ``h_i = W (x_i / (d_i + 1) + (d_i / s_i) * sum_j x_j / sqrt((d_i + 1)(d_j + 1)))`` where
    ``d`` are in-degrees in the whole graph and ``s_i`` is the number of neighbours sampled
    for ``i``. With every neighbour taken (``s_i = d_i``) this is exactly GCN's symmetric
    normalisation with self-loops; with sampling the neighbour sum is rescaled so its
    expectation is the full sum.
    """

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))

    def forward(self, x_src: Tensor, num_dst: int, edge_index: Tensor,
                deg_src: Tensor, deg_dst: Tensor, indptr: Tensor | None = None) -> Tensor:
        h = self.lin(x_src)
        src, dst = edge_index[0], edge_index[1]
        sampled = torch.bincount(dst, minlength=num_dst).to(h.dtype).clamp_(min=1.0)
        scale = deg_dst / sampled
        w = (deg_src[src] + 1.0).rsqrt() * (deg_dst[dst] + 1.0).rsqrt() * scale[dst]
        out = h[:num_dst] / (deg_dst + 1.0).unsqueeze(1)
        if indptr is not None:
            out = out + spmm(indptr, edge_index, w, h, num_dst)
        else:
            out = out.index_add(0, dst, h[src] * w.unsqueeze(1))
        return out + self.bias


class BlockGNN(nn.Module):
    """GraphSAGE (mean), GCN or GAT over a list of blocks, ``blocks[0]`` the input layer."""

    def __init__(self, cfg: ModelConfig, in_dim: int, num_classes: int) -> None:
        super().__init__()
        self.arch = cfg.arch
        self.num_layers = cfg.layers
        self.dropout = cfg.dropout
        dims = [in_dim] + [cfg.hidden] * (cfg.layers - 1) + [num_classes]
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(cfg.layers):
            last = i == cfg.layers - 1
            d_in, d_out = dims[i], dims[i + 1]
            if cfg.arch == "sage":
                self.convs.append(SAGEConv((d_in, d_in), d_out, aggr="mean"))
            elif cfg.arch == "gcn":
                self.convs.append(GCNBlockConv(d_in, d_out))
            else:
                heads = 1 if last else cfg.heads
                if not last and d_out % heads:
                    raise ValueError(f"model.hidden={cfg.hidden} must be divisible by model.heads={heads}")
                self.convs.append(GATConv((d_in, d_in), d_out // heads, heads=heads,
                                          add_self_loops=False, concat=True))
            if not last:
                if cfg.norm == "batch":
                    self.norms.append(nn.BatchNorm1d(d_out))
                elif cfg.norm == "layer":
                    self.norms.append(nn.LayerNorm(d_out))
                else:
                    self.norms.append(nn.Identity())

    def layer(self, i: int, x_src: Tensor, num_dst: int, edge_index: Tensor,
              deg_src: Tensor | None = None, deg_dst: Tensor | None = None,
              indptr: Tensor | None = None) -> Tensor:
        """Apply layer ``i`` (conv, then norm/activation/dropout unless last). ``indptr``:
        the edges are grouped by destination with these offsets (CSR path, see the module)."""
        conv = self.convs[i]
        x_dst = x_src[:num_dst]
        if isinstance(conv, GCNBlockConv):
            if deg_src is None or deg_dst is None:
                raise ValueError("arch 'gcn' needs graph degrees of the block's nodes")
            h = conv(x_src, num_dst, edge_index, deg_src, deg_dst, indptr)
        elif isinstance(conv, GATConv):
            loops = torch.arange(num_dst, device=edge_index.device)
            ei = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
            h = conv((x_src, x_dst), ei, size=(x_src.shape[0], num_dst))
        elif indptr is not None and isinstance(conv, SAGEConv):  # mean + root weight, over the CSR
            agg = spmm(indptr, edge_index, mean_weights(indptr, edge_index.shape[1]), x_src, num_dst)
            h = conv.lin_l(agg) + conv.lin_r(x_dst)
        else:
            h = conv((x_src, x_dst), edge_index, size=(x_src.shape[0], num_dst))
        if i < self.num_layers - 1:
            h = self.norms[i](h)
            h = relu_dropout(h, self.dropout, self.training)
        return h

    def forward(self, x: Tensor, blocks: Sequence[BlockLike], deg: Tensor | None = None) -> Tensor:
        """Logits for the seeds: ``blocks[-1].num_dst`` rows.

        ``deg`` holds the graph in-degree of each input node (needed by GCN only); since
        each block's source nodes are a prefix of the previous block's, slicing it works.
        """
        if len(blocks) != self.num_layers:
            raise ValueError(f"got {len(blocks)} blocks for a {self.num_layers}-layer model")
        h = x
        for i, block in enumerate(blocks):
            d_src = deg[:block.num_src] if deg is not None else None
            d_dst = deg[:block.num_dst] if deg is not None else None
            h = self.layer(i, h, block.num_dst, block.edge_index, d_src, d_dst,
                           getattr(block, "indptr", None))
        return h


def build_model(cfg: ModelConfig, in_dim: int, num_classes: int, seed: int) -> BlockGNN:
    """The same seed gives the same initial parameters in every process."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BlockGNN(cfg, in_dim, num_classes)


def flat_grads(model: nn.Module) -> Tensor:
    """All gradients in one contiguous float32 buffer (one all-reduce, not one per tensor)."""
    parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), device=p.device)
             for p in model.parameters()]
    return torch.cat(parts)


def set_flat_grads(model: nn.Module, flat: Tensor) -> None:
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n
