"""The model protocol: what any model trained by gnntrain implements, and how one is built.

A model is an ``nn.Module`` with

``forward(blocks, x) -> Tensor``
    ``blocks`` is a batch's list of :class:`samplers.Block` (``blocks[0]`` the input layer,
    DGL's message-flow-graph convention: the dst nodes of a block are the first
    ``num_dst`` of its src nodes), ``x`` the input rows of ``blocks[0]``'s src nodes. It
    returns one output row per destination node of the **last** block (the seeds).

Optional, each detected with ``getattr``:

``num_layers: int`` and ``layer(i, block, h) -> Tensor``
    Layer ``i`` on one block: ``h`` holds rows of the block's src nodes, the result rows
    of its dst nodes. ``forward`` must equal applying ``layer(0..num_layers-1)`` in turn.
    A model that has it gets **exact layer-wise full-graph inference** (every node's
    output computed once per layer over all its in-neighbours, DGL's way) for evaluation,
    prediction and embedding export; any other model is evaluated with sampled
    neighbourhoods (the training fanouts) and the run says so.
``encode(h, types) -> Tensor``
    A row-wise input encoder (a projection of each node type's input rows to the hidden
    width): ``forward`` applies it to ``x`` before layer 0, and layer-wise inference applies
    it once to every node's input rows, so layer 0 and the rows it reads from other workers
    are encoded rows. ``h`` may be narrower than the model's input width (the missing
    columns are zeros: a node type's own columns only), ``types`` holds each row's node-type
    index (None on an untyped graph). With ``accepts_sparse_input`` true, layer-wise
    inference hands a sparse type's rows (at most :data:`SPARSE_INPUT_DENSITY` nonzero) as
    one sparse CSR tensor of that type's rows.
``needs_degrees: bool``
    When true, every block carries ``src_deg`` (graph in-degrees of its src nodes; GCN's
    normalisation needs them).
``needs_node_types: bool``
    When true, every block carries ``src_type`` (the node-type index of each src node of a
    typed graph; R-GCN reads an edge's relation from it). A typed model may also expose
    ``num_node_types: int``; a graph with more types is refused before training.

A model is chosen by ``model.arch``: a built-in name (``sage``, ``gcn``, ``gat``, ...; the
registry is :mod:`gnntrain.config.plugins`) or an import path ``package.module:factory``.
A factory is called as ``factory(in_dim, out_dim, model_config)`` (``model_config`` the run's
:class:`gnntrain.config.ModelConfig`; its free-form ``options`` mapping holds the
factory's own settings, which the factory type-checks) and returns the ``nn.Module``.
From Python, :func:`gnntrain.fit` also takes the factory or a module instance itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from gnntrain.config import ModelConfig
from samplers.batch import Block

ModelFactory = Callable[[int, int, ModelConfig], nn.Module]
ModelSpec = str | ModelFactory | nn.Module
"""What names a model: ``model.arch`` (a built-in name or ``module:factory``), a factory,
or a module instance (copied, so every worker starts from the same parameters)."""

@runtime_checkable
class BlockModel(Protocol):
    """``forward(blocks, x)``: outputs for the last block's destination nodes."""

    def __call__(self, blocks: Sequence[Block], x: Tensor) -> Tensor: ...


SPARSE_INPUT_DENSITY = 0.05
"""Layer-wise inference encodes a node type's rows sparse when at most this fraction of
them is nonzero and the model ``accepts_sparse_input``."""

Encoder = Callable[[Tensor, Tensor | None], Tensor]
"""A model's row-wise input encoder, ``encode(h, types)`` (module doc)."""


def input_encoder(model: nn.Module) -> Encoder | None:
    """The model's ``encode(h, types)``, or None when it has none."""
    fn = getattr(model, "encode", None)
    return fn if callable(fn) else None


def accepts_sparse_input(model: nn.Module) -> bool:
    """True when the model's ``encode`` takes one type's rows as a sparse CSR tensor."""
    return bool(getattr(model, "accepts_sparse_input", False))


class LayerwiseModel(nn.Module):
    """Base for a model made of ``num_layers`` layers: subclasses implement
    ``layer(i, block, h)`` (and may implement ``encode(h, types)``); ``forward`` encodes
    ``x`` and applies layer ``i`` to block ``i`` in turn (so the two agree by
    construction). Optional: a model may implement the protocol directly."""

    num_layers: int

    def layer(self, i: int, block: Block, h: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement layer(i, block, h)")

    def forward(self, blocks: Sequence[Block], x: Tensor) -> Tensor:
        """Outputs for the seeds: ``blocks[-1].num_dst`` rows."""
        if len(blocks) != self.num_layers:
            raise ValueError(f"got {len(blocks)} blocks for a {self.num_layers}-layer model")
        encode = input_encoder(self)
        h = x if encode is None else encode(x, blocks[0].src_type)
        for i, block in enumerate(blocks):
            h = self.layer(i, block, h)
        return h


def has_layerwise(model: nn.Module) -> bool:
    """True when ``model`` implements ``layer(i, block, h)`` and ``num_layers``."""
    return callable(getattr(model, "layer", None)) and isinstance(getattr(model, "num_layers", None), int)


def needs_degrees(model: nn.Module) -> bool:
    return bool(getattr(model, "needs_degrees", False))


@dataclass(frozen=True)
class BlockNeeds:
    """The per-node values a model reads from its blocks besides the input rows."""

    degrees: bool = False
    node_types: bool = False


def block_needs(model: nn.Module) -> BlockNeeds:
    return BlockNeeds(degrees=needs_degrees(model),
                      node_types=bool(getattr(model, "needs_node_types", False)))


def flat_grads(model: nn.Module) -> Tensor:
    """All gradients in one contiguous float32 buffer (one all-reduce, not one per tensor)."""
    parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), device=p.device)
             for p in model.parameters()]
    return torch.cat(parts) if parts else torch.zeros(0)


def set_flat_grads(model: nn.Module, flat: Tensor) -> None:
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n
