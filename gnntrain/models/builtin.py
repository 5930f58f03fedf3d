"""The built-in models (``model.arch: sage | gcn | gat``) on sampled blocks with PyG layers.

They follow the model protocol (:mod:`gnntrain.models.protocol`) like any user model and
are built through the same factory path (:data:`gnntrain.models.registry.BUILTIN`; the
names are registered in :mod:`gnntrain.config.plugins`).

Layer ``l`` reads the ``num_src`` rows of block ``l`` and writes only its ``num_dst``
rows, so no layer computes rows the next one does not need (DGL's blocks; PyG's
``NeighborLoader`` without trimming computes a hop too many). The same layers run
layer by layer over the full graph for evaluation (:meth:`BlockGNN.layer`).

Message passing. When a block carries ``indptr`` (the sampler's blocks do: edges come
grouped by destination), GraphSAGE and GCN aggregate with one sparse CSR x dense product
(``torch.sparse.mm``, PyG's ``adj_t`` path) over the same PyG parameters; a block without
it (an ``edge_index`` only, e.g. :mod:`gnntrain.fullbatch`) goes through PyG's per-edge
gather/scatter. Both compute the same function (tests check forward and gradients); the
CSR path was ~1.3x faster per training step on synthetic-small (``python -m bench.epoch``).
GAT always runs PyG's ``GATConv`` on ``edge_index`` (attention is per edge).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch_geometric.nn import GATConv, SAGEConv

from gnntrain.config import ModelConfig
from gnntrain.models.protocol import LayerwiseModel
from gnntrain.models.sparse import mean_weights, spmm
from gnntrain.ops import gather_rows, relu_dropout
from samplers.batch import Block


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
        # normalisation in float32, applied in h's dtype (bfloat16 under autocast), so the
        # float32 degrees do not promote the layer's rows back to float32
        w = ((deg_src[src] + 1.0).rsqrt() * (deg_dst[dst] + 1.0).rsqrt() * scale[dst]).to(h.dtype)
        out = h[:num_dst] / (deg_dst + 1.0).unsqueeze(1).to(h.dtype)
        if indptr is not None:
            out = out + spmm(indptr, edge_index, w, h, num_dst)
        else:
            out = out.index_add(0, dst, gather_rows(h, src) * w.unsqueeze(1))
        return out + self.bias.to(h.dtype)


class BlockGNN(LayerwiseModel):
    """GraphSAGE (mean), GCN or GAT over a list of blocks, ``blocks[0]`` the input layer."""

    def __init__(self, cfg: ModelConfig, in_dim: int, out_dim: int, arch: str) -> None:
        super().__init__()
        if cfg.options:
            raise ValueError(f"model.options={dict(cfg.options)!r}: the built-in model {arch!r} "
                             "takes no options (they are for user factories)")
        self.num_layers = cfg.layers
        self.dropout = cfg.dropout
        self.needs_degrees = arch == "gcn"
        dims = [in_dim] + [cfg.hidden] * (cfg.layers - 1) + [out_dim]
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(cfg.layers):
            last = i == cfg.layers - 1
            d_in, d_out = dims[i], dims[i + 1]
            if arch == "sage":
                self.convs.append(SAGEConv((d_in, d_in), d_out, aggr="mean"))
            elif arch == "gcn":
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

    def layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        """Layer ``i`` on ``block`` (conv, then norm/activation/dropout unless last). A block
        with ``indptr`` aggregates over its CSR (see the module docstring)."""
        conv = self.convs[i]
        x_dst = h[:block.num_dst]
        edge_index, indptr = block.edge_index, block.indptr
        if isinstance(conv, GCNBlockConv):
            if block.src_deg is None:
                raise ValueError("arch 'gcn' needs graph degrees of the block's nodes (Block.src_deg)")
            out = conv(h, block.num_dst, edge_index, block.src_deg, block.src_deg[:block.num_dst], indptr)
        elif isinstance(conv, GATConv):
            loops = torch.arange(block.num_dst, device=edge_index.device)
            ei = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
            out = conv((h, x_dst), ei, size=(h.shape[0], block.num_dst))
        elif indptr is not None and isinstance(conv, SAGEConv):  # mean + root weight, over the CSR
            agg = spmm(indptr, edge_index, mean_weights(indptr, edge_index.shape[1]), h, block.num_dst)
            # lin_l(agg) + lin_r(x_dst) (lin_r has no bias) with the sum inside the second GEMM
            out = torch.addmm(conv.lin_l(agg), x_dst, conv.lin_r.weight.t())
        else:
            out = conv((h, x_dst), edge_index, size=(h.shape[0], block.num_dst))
        if i < self.num_layers - 1:
            out = self.norms[i](out)
            out = relu_dropout(out, self.dropout, self.training)
        return out


def _builtin(arch: str) -> Callable[[int, int, ModelConfig], BlockGNN]:
    def factory(in_dim: int, out_dim: int, cfg: ModelConfig) -> BlockGNN:
        return BlockGNN(cfg, in_dim, out_dim, arch)

    factory.__name__ = arch
    return factory


sage = _builtin("sage")
gcn = _builtin("gcn")
gat = _builtin("gat")
