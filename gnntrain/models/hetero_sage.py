"""Heterogeneous GraphSAGE (``model.arch: hsage``) on typed blocks.

PyG's ``HeteroConv({rel: SAGEConv(in, out)}, aggr="sum")`` as one layer over the sampled
(and per-layer trimmed) blocks every model trains on: each relation ``r = (s, name, d)`` has
its own SAGE weights, and a destination node of type ``d`` sums the outputs of every
relation into ``d``::

    h'_v = sum_{r: dst(r) = type(v)} ( W_r mean_{u in N_r(v)} h_u + b_r + R_r h_v )

``N_r(v)`` are ``v``'s (sampled) in-neighbours under relation ``r``, read from the edges'
relation ids (``Block.edge_rel``); the empty mean is zero, as in PyG. Types no relation
points into get zeros (PyG drops them).

Options (``model.options``): ``node_types`` (the graph's number of node types) and
``relation_dst`` (required: for every relation id, the index of its destination type, so
the root term ``R_r h_v + b_r`` is added even where a batch holds no ``r`` edge), and
``input_projection`` (default true: each type's input rows are first mapped to
``model.hidden``, :class:`~gnntrain.models.typed.TypeProjection`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from gnntrain.config import ModelConfig
from gnntrain.models.typed import TypedStack, projection_option
from gnntrain.ops import gather_rows
from samplers.batch import Block

_OPTIONS = {"node_types", "relation_dst", "input_projection"}


class HeteroSAGELayer(nn.Module):
    """One layer: per relation a mean-aggregating SAGE convolution, summed per destination type."""

    def __init__(self, in_dim: int, out_dim: int, num_types: int, relation_dst: list[int]) -> None:
        super().__init__()
        r = len(relation_dst)
        self.num_types = num_types
        self.relation_dst: Tensor
        self.register_buffer("relation_dst", torch.tensor(relation_dst, dtype=torch.int64), persistent=False)
        self.neigh = nn.Parameter(torch.empty(r, in_dim, out_dim))  # SAGEConv.lin_l, transposed
        self.bias = nn.Parameter(torch.zeros(r, out_dim))           # SAGEConv.lin_l.bias
        self.root = nn.Parameter(torch.empty(r, in_dim, out_dim))   # SAGEConv.lin_r, transposed
        for w in (self.neigh, self.root):
            for i in range(r):
                nn.init.kaiming_uniform_(w[i].T, a=5 ** 0.5)  # nn.Linear's default

    def forward(self, block: Block, h: Tensor) -> Tensor:
        if block.edge_rel is None or block.src_type is None:
            raise ValueError("arch 'hsage' needs each edge's relation (Block.edge_rel) and each node's "
                             "type (Block.src_type); train it on a typed dataset")
        n_dst = block.num_dst
        src, dst = block.edge_index[0], block.edge_index[1]
        rel = block.edge_rel
        out = h.new_zeros((n_dst, self.neigh.shape[2]))
        for r in torch.unique(rel).tolist():
            m = rel == r
            d = dst[m]
            cnt = torch.bincount(d, minlength=n_dst).clamp_(min=1).to(h.dtype)
            mean = h.new_zeros((n_dst, h.shape[1])).index_add_(0, d, gather_rows(h, src[m])) / cnt[:, None]
            out = out + mean @ self.neigh[r]
        # root terms: every relation into a node's type adds R_r h_v + b_r
        t_dst = block.src_type[:n_dst]
        h_dst = h[:n_dst]
        for t in range(self.num_types):
            into = self.relation_dst == t
            mine = t_dst == t
            if bool(into.any()) and bool(mine.any()):
                out[mine] = out[mine] + h_dst[mine] @ self.root[into].sum(0) + self.bias[into].sum(0)
        return out


class HeteroSAGE(TypedStack):
    """``model.layers`` heterogeneous SAGE layers with ReLU and dropout between them."""

    def __init__(self, cfg: ModelConfig, in_dim: int, out_dim: int) -> None:
        super().__init__()
        opts: dict[str, Any] = dict(cfg.options)
        unknown = sorted(set(opts) - _OPTIONS)
        types, rdst = opts.get("node_types"), opts.get("relation_dst")
        if (unknown or isinstance(types, bool) or not isinstance(types, int) or types < 1
                or not isinstance(rdst, list) or not rdst
                or not all(isinstance(t, int) and 0 <= t < types for t in rdst)):
            raise ValueError(f"model.options={opts!r}: arch 'hsage' takes node_types (the graph's number "
                             "of node types, an integer >= 1) and relation_dst (for every relation id "
                             "the index of its destination type, each in [0, node_types)), and "
                             "input_projection (default true)"
                             + (f"; unknown {unknown}" if unknown else ""))
        self.num_node_types = types
        self.num_relations = len(rdst)
        self.stack(cfg, in_dim, out_dim, projection_option(opts, "hsage"),
                   lambda i, o: HeteroSAGELayer(i, o, types, rdst))


def hsage(in_dim: int, out_dim: int, cfg: ModelConfig) -> HeteroSAGE:
    return HeteroSAGE(cfg, in_dim, out_dim)


def relation_dst(node_types: list[str] | tuple[str, ...], relations: list[str] | tuple[str, ...]) -> list[int]:
    """``model.options.relation_dst`` for a graph: the destination type index of every
    relation named ``"src:relation:dst"``."""
    return [list(node_types).index(r.split(":")[2]) for r in relations]
