"""Mini-batch types: structure (:class:`SampledBatch`) and structure + data (:class:`PreparedBatch`).

Sampling returns structure only; :func:`prepare` attaches features and labels in a separate
step, so the feature fetch (local table, cache, remote owners) can be scheduled on its own.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from samplers.base import SamplerError

# torch announces once per process that sparse CSR support is "beta"; the two ops used on
# blocks (CSR construction and torch.sparse.mm) are the ones PyG itself relies on.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


@dataclass
class Block:
    """One message-flow graph (MFG) layer: messages flow from src nodes to dst nodes.

    Contract:

    * ``edge_index`` int64 ``[2, E]``: row 0 holds **local** src ids in ``[0, num_src)``,
      row 1 **local** dst ids in ``[0, num_dst)`` (PyG's layout: ``edge_index[0]`` is the
      message source). Every edge is a sampled in-edge ``src -> dst`` of the graph.
    * Local ids are re-indexed to ``0..n-1``: local id ``i`` is global node
      ``batch.input_nodes[i]``, the same numbering in every block of a batch.
    * The dst nodes are the **first** ``num_dst`` src nodes (DGL's MFG convention), so a
      layer reads ``x_dst = x_src[:num_dst]``.
    * ``indptr`` (optional) int64 ``[num_dst + 1]``: when set, the edges are grouped by
      dst in order, the in-edges of dst ``d`` being columns ``indptr[d]:indptr[d + 1]``
      of ``edge_index`` — a CSR of the block, so :meth:`adj_t` is free and a layer can run
      one sparse-dense product instead of per-edge gather/scatter. The sampler sets it.
    * ``src_deg`` (optional) float32 ``[num_src]``: graph in-degrees of the src nodes, set
      by :func:`prepare` when a model needs them (GCN's normalisation); dst degrees are
      its first ``num_dst`` entries.
    * ``src_type`` (optional) int64 ``[num_src]``: node-type index of the src nodes of a
      typed graph, set by :func:`prepare` when a model needs them (R-GCN: an edge's
      relation is its (source type, destination type)); dst types are the first ``num_dst``.
    * ``edge_rel`` (optional) int64 ``[E]``: relation id of each edge (aligned with
      ``edge_index``), set by the sampler over a typed graph, so two relations between the
      same node types stay distinct.
    """

    edge_index: torch.Tensor
    num_src: int
    num_dst: int
    indptr: torch.Tensor | None = None
    src_deg: torch.Tensor | None = None
    src_type: torch.Tensor | None = None
    edge_rel: torch.Tensor | None = None

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    @property
    def size(self) -> tuple[int, int]:
        """``(num_src, num_dst)``: the ``size`` argument of a PyG bipartite layer call."""
        return (self.num_src, self.num_dst)

    def adj_t(self, values: torch.Tensor) -> torch.Tensor:
        """The block as a sparse CSR ``[num_dst, num_src]`` matrix (PyG's ``adj_t``) holding
        ``values[e]`` for edge ``e``; needs :attr:`indptr`."""
        if self.indptr is None:
            raise SamplerError("Block.adj_t needs indptr (edges grouped by destination)")
        return csr_adjacency(self.indptr, self.edge_index, values, self.num_dst, self.num_src)


    def to(self, device: torch.device | str, non_blocking: bool = False) -> Block:
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, non_blocking=non_blocking)

        return Block(self.edge_index.to(device, non_blocking=non_blocking), self.num_src,
                     self.num_dst, move(self.indptr), move(self.src_deg), move(self.src_type),
                     move(self.edge_rel))

    def pin_memory(self) -> Block:
        """Page-locked copies of the tensors on the host (those already on a device stay)."""
        def pin(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else _pinned(t)

        return Block(_pinned(self.edge_index), self.num_src, self.num_dst, pin(self.indptr),
                     pin(self.src_deg), pin(self.src_type), pin(self.edge_rel))

    def tensors(self) -> list[torch.Tensor]:
        """The block's tensors, those set."""
        return [t for t in (self.edge_index, self.indptr, self.src_deg, self.src_type, self.edge_rel)
                if t is not None]


@dataclass
class SampledBatch:
    """Structure of one mini-batch (no features).

    * ``seeds`` global ids ``[B]`` (unique): the nodes whose outputs are trained on.
    * ``input_nodes`` global ids of ``blocks[0]``'s src nodes; local id ``i`` in every block
      is ``input_nodes[i]``, and ``input_nodes[:B] == seeds``.
    * ``blocks[0]`` is the **input** layer (farthest hop, built with ``fanouts[-1]``);
      ``blocks[-1].num_dst == B`` (built with ``fanouts[0]``). For consecutive blocks
      ``blocks[i].num_dst == blocks[i + 1].num_src``.
    * ``num_sampled_edges`` is the total number of edges over all blocks.
    """

    seeds: np.ndarray
    input_nodes: np.ndarray
    blocks: list[Block]
    num_sampled_edges: int

    @property
    def batch_size(self) -> int:
        return int(self.seeds.shape[0])


@dataclass
class PreparedBatch:
    """A :class:`SampledBatch` with ``x`` (rows of ``input_nodes``) and ``y`` (the task's
    targets: labels of the seeds for node classification)."""

    x: torch.Tensor
    y: torch.Tensor
    blocks: list[Block]
    seeds: np.ndarray

    @property
    def batch_size(self) -> int:
        return int(self.seeds.shape[0])

    def pin_memory(self) -> PreparedBatch:
        """Page-locked copies, so ``.to('cuda', non_blocking=True)`` overlaps compute (tensors
        already on a device stay as they are)."""
        return PreparedBatch(_pinned(self.x), _pinned(self.y), [b.pin_memory() for b in self.blocks], self.seeds)

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the batch: ``x``, ``y`` and the blocks'."""
        return [self.x, self.y, *(t for b in self.blocks for t in b.tensors())]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> PreparedBatch:
        return PreparedBatch(self.x.to(device, non_blocking=non_blocking),
                             self.y.to(device, non_blocking=non_blocking),
                             [b.to(device, non_blocking) for b in self.blocks], self.seeds)


def _pinned(t: torch.Tensor) -> torch.Tensor:
    """A page-locked copy of a host tensor; a tensor on a device as it is."""
    return t.pin_memory() if t.device.type == "cpu" else t


def _as_tensor(a: np.ndarray | torch.Tensor) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a
    return torch.from_numpy(np.ascontiguousarray(a))


def prepare(batch: SampledBatch, x: np.ndarray | torch.Tensor, y: torch.Tensor | np.ndarray,
            deg: np.ndarray | torch.Tensor | None = None,
            node_type: np.ndarray | torch.Tensor | None = None) -> PreparedBatch:
    """Attach features and targets: ``x`` holds the rows of ``batch.input_nodes`` (in that
    order), ``y`` the targets of the batch (one row per seed for node tasks). ``deg``
    (graph in-degrees of ``input_nodes``) and ``node_type`` (their type indices) are
    attached to every block as ``src_deg`` / ``src_type``. No copy when the arrays are
    contiguous."""
    n_in = int(batch.input_nodes.shape[0])
    if x.ndim != 2 or int(x.shape[0]) != n_in:
        raise SamplerError(
            f"x: expected [len(input_nodes)={n_in}, F] feature rows, got shape {tuple(x.shape)}")
    per_node: dict[str, torch.Tensor | None] = {"deg": None, "node_type": None}
    for name, arr in (("deg", deg), ("node_type", node_type)):
        if arr is not None:
            if int(arr.shape[0]) != n_in:
                raise SamplerError(f"{name}: expected {n_in} values (one per input node), "
                                   f"got {tuple(arr.shape)}")
            per_node[name] = _as_tensor(arr)
    d, t = per_node["deg"], per_node["node_type"]
    blocks = batch.blocks
    if d is not None or t is not None:
        blocks = [Block(b.edge_index, b.num_src, b.num_dst, b.indptr,
                        None if d is None else d[:b.num_src], None if t is None else t[:b.num_src],
                        b.edge_rel)
                  for b in blocks]
    return PreparedBatch(_as_tensor(x), _as_tensor(y), blocks, batch.seeds)


@dataclass(frozen=True)
class PygAdj:
    """One layer in PyG's bipartite form: ``conv((x, x[:size[1]]), edge_index, size=size)``."""

    edge_index: torch.Tensor
    size: tuple[int, int]


def to_pyg(batch: SampledBatch | PreparedBatch) -> list[PygAdj]:
    """Per-layer PyG inputs, input layer first (the layout of PyG's classic
    ``NeighborSampler`` adjs): ``for adj, conv in zip(to_pyg(b), convs):
    x = conv((x, x[:adj.size[1]]), adj.edge_index, size=adj.size)``."""
    return [PygAdj(b.edge_index, b.size) for b in batch.blocks]


def csr_adjacency(indptr: torch.Tensor, edge_index: torch.Tensor, values: torch.Tensor,
                  num_dst: int, num_src: int) -> torch.Tensor:
    """Sparse CSR ``[num_dst, num_src]`` of edges grouped by destination (``indptr`` their
    offsets, ``edge_index[0]`` the sources), ``values[e]`` on edge ``e``."""
    return torch.sparse_csr_tensor(indptr, edge_index[0], values, size=(num_dst, num_src),
                                   check_invariants=False)
