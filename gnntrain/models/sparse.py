"""Sparse neighbour products shared by the built-in and typed models.

:func:`spmm` aggregates a block's in-edges as one CSR x dense product; :func:`mean_weights`
gives the per-edge weights that make it the neighbour mean. A leaf of ``gnntrain.models``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from samplers.batch import csr_adjacency

__all__ = ["mean_weights", "spmm"]


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
