"""R-GCN (``model.arch: rgcn``) for typed graphs, on the same sampled blocks as every model.

A typed graph trains as one graph whose node types are id ranges
(:func:`gnntrain.data.hetero.to_training_graph`); its blocks carry each src node's type
(``Block.src_type``, the model says ``needs_node_types``) and each edge's relation id
(``Block.edge_rel``), so two relations between the same types (``cites`` and its
generated reverse ``rev_cites`` on ``paper -> paper``) get their own weights. Without
``relations`` (see below) an edge's relation is its ``(source type, destination type)``
pair, the ``T x T`` pairs of a graph with ``T`` node types.

Layer (Schlichtkrull et al. 2018, basis decomposition)::

    h'_v = W0 h_v + b + sum_r sum_{u in N_r(v)} (1 / |N_r(v)|) W_r h_u,
    W_r = sum_b a[r, b] V_b

with one root weight ``W0`` and bias ``b``, as in the paper and PyG's ``RGCNConv``, or one
per node type of ``v`` (``root_per_type``).

``N_r(v)`` are the block's (sampled) in-neighbours of ``v`` under relation ``r``. Each
relation present in the block is one CSR product (the neighbour mean over its edges),
mixed into one sum per basis with ``a[r, b]`` and projected by ``V_b``, so no
``[edges, width]`` tensor is built.

Options (``model.options``): ``node_types`` (required: the graph's number of node types;
a graph with more is refused before training), ``relations`` (the graph's number of
relations: use the edges' relation ids; 0, the default, uses type pairs), ``bases``
(default 2), ``root_per_type`` (default false: one root weight and bias for all types) and
``input_projection`` (default true: :class:`TypeProjection` maps each type's input rows to
``model.hidden`` before the first layer, as PyG's and DGL's typed models do; false applies
the first layer's relation weights to the raw rows, ``in_dim`` wide each).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from gnntrain.config import ModelConfig
from gnntrain.models.protocol import LayerwiseModel
from gnntrain.models.sparse import spmm
from gnntrain.ops import gather_rows, relu_dropout
from samplers.batch import Block

_OPTIONS = {"node_types", "relations", "bases", "root_per_type", "input_projection"}


def edge_relations(block: Block, num_types: int, num_relations: int) -> Tensor:
    """Each edge's relation index: ``Block.edge_rel`` when the model has ``num_relations``,
    else the ``(source type, destination type)`` pair as ``t_src * num_types + t_dst``."""
    if num_relations:
        if block.edge_rel is None:
            raise ValueError("model.options.relations is set but the block carries no relation ids "
                             "(Block.edge_rel); train on a typed dataset")
        return block.edge_rel
    assert block.src_type is not None
    t_src = block.src_type
    return t_src[block.edge_index[0]] * num_types + t_src[:block.num_dst][block.edge_index[1]]


class RGCNLayer(nn.Module):
    """One R-GCN layer over a typed block (see the module docstring)."""

    def __init__(self, in_dim: int, out_dim: int, num_types: int, bases: int,
                 num_relations: int = 0, *, root_per_type: bool = False) -> None:
        super().__init__()
        self.num_types = num_types
        self.num_relations = num_relations
        self.bases = nn.Parameter(torch.empty(bases, in_dim, out_dim))
        self.coeff = nn.Parameter(torch.empty(num_relations or num_types * num_types, bases))
        roots = num_types if root_per_type else 1  # root[t] (per type) or root[0] (shared)
        self.root = nn.Parameter(torch.empty(roots, in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(roots, out_dim))
        # Glorot per [in, out] matrix, as PyG's RGCNConv: on the 3-d tensor itself torch's
        # fans would be (in * out, bases * out), a bound ~8x too small at ACM's 1,902 inputs
        for w in (*self.bases, *self.root):
            nn.init.xavier_uniform_(w)
        nn.init.xavier_uniform_(self.coeff)

    def forward(self, block: Block, h: Tensor) -> Tensor:
        if block.src_type is None:
            raise ValueError("arch 'rgcn' needs the node type of the block's nodes (Block.src_type); "
                             "train it on a typed dataset")
        t_src = block.src_type
        t_dst = t_src[:block.num_dst]
        src, dst = block.edge_index[0], block.edge_index[1]
        n_rel = int(self.coeff.shape[0])
        rel = edge_relations(block, self.num_types, self.num_relations)
        key = dst * n_rel + rel
        mean = 1.0 / torch.bincount(key, minlength=block.num_dst * n_rel)[key].to(h.dtype)
        # per relation present: the neighbour mean, mixed into one sum per basis
        mixed = [h.new_zeros((block.num_dst, h.shape[1])) for _ in range(self.bases.shape[0])]
        for r in torch.unique(rel).tolist():
            m = rel == r
            if block.indptr is not None:  # the relation's edges keep their grouping by destination
                indptr = torch.zeros(block.num_dst + 1, dtype=torch.int64, device=h.device)
                indptr[1:] = torch.cumsum(torch.bincount(dst[m], minlength=block.num_dst), 0)
                agg = spmm(indptr, block.edge_index[:, m], mean[m], h, block.num_dst)
            else:
                agg = h.new_zeros((block.num_dst, h.shape[1])).index_add(0, dst[m], gather_rows(h, src[m]) * mean[m, None])
            for b, acc in enumerate(mixed):
                mixed[b] = acc + self.coeff[r, b] * agg
        out = sum((s @ self.bases[b] for b, s in enumerate(mixed)),
                  h.new_zeros((block.num_dst, self.bias.shape[1])))
        h_dst = h[:block.num_dst]
        if self.root.shape[0] == 1:
            return out + h_dst @ self.root[0] + self.bias[0]
        for t in range(self.num_types):
            mine = t_dst == t
            if bool(mine.any()):
                out[mine] = out[mine] + h_dst[mine] @ self.root[t] + self.bias[t]
        return out


class TypeProjection(nn.Module):
    """One linear map per node type from the input rows to ``out_dim``, then ReLU (PyG's
    ``HeteroDictLinear``, DGL's per-type input linear): a node's row goes through its own
    type's weights. Rows are zero-padded to the widest type, so a type's padding columns
    add nothing and get no gradient; rows narrower than ``in_dim`` (a type's own columns,
    as layer-wise inference reads them) meet only the weights of the columns they have, and
    one type's rows may come as a sparse CSR tensor (a wide bag-of-words type: one sparse
    product instead of a dense one over its zeros)."""

    def __init__(self, in_dim: int, out_dim: int, num_types: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_types, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(num_types, out_dim))
        bound = 1.0 / max(1, in_dim) ** 0.5
        for t in range(num_types):  # nn.Linear's default, per type
            nn.init.kaiming_uniform_(self.weight[t].T, a=5 ** 0.5)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, h: Tensor, types: Tensor) -> Tensor:
        width = h.shape[1]
        if width > self.weight.shape[1]:
            raise ValueError(f"TypeProjection: rows of width {width}, wider than its input width "
                             f"{self.weight.shape[1]}")
        if h.layout == torch.sparse_csr:  # one type's rows, kept sparse (layer-wise inference)
            t = int(types[0]) if types.numel() else 0
            if types.numel() and bool((types != t).any()):
                raise ValueError("TypeProjection: sparse input rows must all be of one node type")
            with torch.autocast(h.device.type, enabled=False):  # sparse products run in float32
                dense = torch.sparse.mm(h, self.weight[t, :width].float())
            return torch.relu(dense + self.bias[t])
        out = h.new_empty((h.shape[0], self.weight.shape[2]))
        for t in torch.unique(types).tolist():
            mine = types == t
            out[mine] = h[mine] @ self.weight[t, :width] + self.bias[t]
        return torch.relu(out)


def projection_option(opts: dict[str, Any], arch: str) -> bool:
    """``model.options.input_projection`` (default true), checked."""
    value = opts.get("input_projection", True)
    if not isinstance(value, bool):
        raise ValueError(f"model.options.input_projection={value!r}: arch {arch!r} takes true (project "
                         "each node type's input rows to model.hidden first, the default) or false")
    return value


class TypedStack(LayerwiseModel):
    """``model.layers`` typed layers with ReLU and dropout between them, after a
    :class:`TypeProjection` of the input rows to ``model.hidden`` (the model's ``encode``)
    unless ``model.options.input_projection`` is false; reads node types."""

    needs_node_types = True

    num_node_types: int

    @property
    def accepts_sparse_input(self) -> bool:
        """``encode`` takes one type's rows as a sparse CSR tensor (with the projection)."""
        return self.project is not None

    def stack(self, cfg: ModelConfig, in_dim: int, out_dim: int, project: bool,
              make: Callable[[int, int], nn.Module]) -> None:
        """Build the layers: ``make(in, out)`` for each width pair of ``cfg``, after a
        projection per node type (``self.num_node_types``, set first) when ``project``."""
        self.num_layers = cfg.layers
        self.dropout = cfg.dropout
        self.in_dim = in_dim
        self.project = TypeProjection(in_dim, cfg.hidden, self.num_node_types) if project else None
        first = cfg.hidden if project else in_dim
        dims = [first] + [cfg.hidden] * (cfg.layers - 1) + [out_dim]
        self.convs = nn.ModuleList(make(dims[i], dims[i + 1]) for i in range(cfg.layers))

    def encode(self, h: Tensor, types: Tensor | None) -> Tensor:
        """Layer 0's input rows: the projection of each row by its node type's weights, or
        (without projection) the rows zero-padded to the model's input width."""
        if self.project is None:
            return h if h.shape[1] == self.in_dim else nn.functional.pad(h, (0, self.in_dim - h.shape[1]))
        if types is None:
            raise ValueError(f"{type(self).__name__} needs the node type of the block's nodes "
                             "(Block.src_type); train it on a typed dataset")
        return self.project(h, types)

    def layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        out = self.convs[i](block, h)
        if i < self.num_layers - 1:
            out = relu_dropout(out, self.dropout, self.training)
        return out


class RGCN(TypedStack):
    """``model.layers`` R-GCN layers with ReLU and dropout between them."""

    def __init__(self, cfg: ModelConfig, in_dim: int, out_dim: int) -> None:
        super().__init__()
        opts: dict[str, Any] = dict(cfg.options)
        unknown = sorted(set(opts) - _OPTIONS)
        if unknown or not isinstance(opts.get("node_types"), int) or int(opts["node_types"]) < 1:
            raise ValueError(f"model.options={opts!r}: arch 'rgcn' takes node_types (the graph's number "
                             "of node types, an integer >= 1; required), relations, bases (default 2), "
                             "root_per_type (default false) and input_projection (default true)"
                             + (f"; unknown {unknown}" if unknown else ""))
        bases = opts.get("bases", 2)
        if not isinstance(bases, int) or bases < 1:
            raise ValueError(f"model.options.bases={bases!r}: must be an integer >= 1")
        rels = opts.get("relations", 0)
        if isinstance(rels, bool) or not isinstance(rels, int) or rels < 0:
            raise ValueError(f"model.options.relations={rels!r}: must be an integer >= 0 (the "
                             "graph's number of relations; 0 uses node-type pairs)")
        per_type = opts.get("root_per_type", False)
        if not isinstance(per_type, bool):
            raise ValueError(f"model.options.root_per_type={per_type!r}: must be true or false")
        self.num_relations = rels
        self.num_node_types = int(opts["node_types"])
        self.stack(cfg, in_dim, out_dim, projection_option(opts, "rgcn"),
                   lambda i, o: RGCNLayer(i, o, self.num_node_types, bases, rels, root_per_type=per_type))


def rgcn(in_dim: int, out_dim: int, cfg: ModelConfig) -> RGCN:
    return RGCN(cfg, in_dim, out_dim)
