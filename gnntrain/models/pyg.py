"""Adapter for plain PyG layers written for ``conv(x, edge_index)``.

:class:`PygLayers` turns a list of PyG message-passing layers into a gnntrain model
(``forward(blocks, x)`` plus exact layer-wise inference). Layer ``i`` runs on block ``i``
as ``conv(h_src, block.edge_index)`` over all of the block's src nodes and keeps the first
``num_dst`` rows: a block's dst nodes are the first ``num_dst`` src nodes and every edge
points into them, so each dst row is what the layer computes on the full graph
restricted to the sampled edges. Any layer that takes ``(x, edge_index)`` works
(``GINConv``, ``GraphConv``, ``GCNConv``, ``SAGEConv``, ``GATConv`` ...); between layers
``activation`` and dropout are applied, as in PyG's ``BasicGNN``.

Example (a factory for ``model.arch: mymodels:gin``)::

    def gin(in_dim, out_dim, cfg):
        dims = [in_dim] + [cfg.hidden] * (cfg.layers - 1) + [out_dim]
        convs = [GINConv(nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b)))
                 for a, b in zip(dims, dims[1:])]
        return PygLayers(convs, dropout=cfg.dropout)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from gnntrain.models.protocol import LayerwiseModel
from samplers.batch import Block


class PygLayers(LayerwiseModel):
    """``convs[i]`` on ``blocks[i]``; ``activation`` + dropout between layers."""

    def __init__(self, convs: Sequence[nn.Module], *, dropout: float = 0.0,
                 activation: Callable[[Tensor], Tensor] = F.relu) -> None:
        super().__init__()
        if not convs:
            raise ValueError("PygLayers: convs must hold at least one layer")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"PygLayers: dropout={dropout} must lie in [0, 1)")
        self.convs = nn.ModuleList(convs)
        self.num_layers = len(convs)
        self.dropout = dropout
        self.activation = activation

    def layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        out: Tensor = self.convs[i](h, block.edge_index)[:block.num_dst]
        if i < self.num_layers - 1:
            out = F.dropout(self.activation(out), self.dropout, self.training)
        return out
