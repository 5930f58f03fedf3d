"""Conversion of sampled batches to DGL blocks (DGL is optional and imported lazily)."""

from __future__ import annotations

from typing import Any

import torch

from samplers.batch import PreparedBatch, SampledBatch


def to_dgl_blocks(batch: SampledBatch | PreparedBatch) -> list[Any]:
    """``dgl.create_block`` per layer, input layer first (DGL's MFG order).

    DGL's convention matches ours: a block's dst nodes are its first ``num_dst`` src
    nodes. The global ids of the src nodes are stored as ``srcdata[dgl.NID]`` when the
    batch carries them (``SampledBatch``). Raises ``ImportError`` when DGL is absent.
    """
    import dgl  # noqa: PLC0415 - optional dependency

    input_nodes = getattr(batch, "input_nodes", None)
    out = []
    for b in batch.blocks:
        src, dst = b.edge_index[0], b.edge_index[1]
        blk = dgl.create_block((src, dst), num_src_nodes=b.num_src, num_dst_nodes=b.num_dst,
                               device=b.edge_index.device)
        if input_nodes is not None:
            nid = torch.from_numpy(input_nodes)
            blk.srcdata[dgl.NID] = nid[:b.num_src].to(b.edge_index.device)
            blk.dstdata[dgl.NID] = nid[:b.num_dst].to(b.edge_index.device)
        out.append(blk)
    return out
