"""The device twin of :class:`~samplers.NeighborSampler`'s hop loop: every hop on the
source's device.

When a sampler's source draws on a device (``GraphSource.device``: a
:class:`~samplers.TorchCSRSource`, or a worker's distributed source over one),
:meth:`NeighborSampler.sample <samplers.NeighborSampler.sample>` runs
:func:`sample_on_device`: per hop the draw (:meth:`GraphSource.draw_on_device`), the
excluded target edges dropped and the relabelling into the batch's local ids all run in
torch ops there, and the blocks are built there; only ``input_nodes`` comes back to the
host at the end (the feature reader takes numpy ids). Over a source that holds every row
nothing travels between host and device inside the hop loop, which the host loop needs
twice per hop (seeds out, neighbours back); a worker of several sends only the ids its
peers own through the host.

The relabelling gives new neighbours local ids in first-seen order, as the numba kernels
do (:func:`relabel`, without a sort), so the batch is the host loop's block for block:
same ``edge_index``, ``indptr``, ``edge_rel`` and ``input_nodes``. Each sampling thread
keeps two dense ``[num_nodes]`` int32 maps on the device (8 bytes a node: 20 MB for 2.4M
nodes), reset in O(nodes touched) after each batch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from samplers.base import Fanout, GraphSource, SamplerError
from samplers.batch import Block, SampledBatch

_UNSEEN = torch.iinfo(torch.int32).max
"""What a :class:`DeviceMaps` ``first`` entry holds outside a relabelling."""


def relabel(nbrs: torch.Tensor, maps: DeviceMaps, nodes: list[torch.Tensor], n_nodes: int) -> tuple[torch.Tensor, int]:
    """The local id of each global id in ``nbrs``: its id when already in the batch
    (``maps.local``), else ``n_nodes`` onwards in order of first appearance in ``nbrs``.
    Records the new ids in ``maps.local`` and appends the new nodes (in local-id order) to
    ``nodes``; returns the ids and the new node count. No sort: each new node's first
    position is a scatter-min into ``maps.first``, and the positions that hold it are the
    new nodes in first-seen order."""
    lid = maps.local[nbrs].to(torch.int64)
    absent = lid < 0
    new = nbrs[absent]
    if new.numel() == 0:
        return lid, n_nodes
    at = torch.arange(new.shape[0], dtype=torch.int32, device=new.device)
    maps.first.scatter_reduce_(0, new, at, reduce="amin")
    fresh = new[maps.first[new] == at]  # each new node once, in first-seen order
    maps.first[fresh] = _UNSEEN
    maps.local[fresh] = torch.arange(n_nodes, n_nodes + fresh.shape[0], dtype=torch.int32, device=new.device)
    lid[absent] = maps.local[new].to(torch.int64)
    nodes.append(fresh)
    return lid, n_nodes + int(fresh.shape[0])


@dataclass
class DeviceMaps:
    """One thread's dense maps over every node on one device: ``local`` (the node's local
    id in the current batch, -1 outside it) and ``first`` (scratch of :func:`relabel`)."""

    local: torch.Tensor
    first: torch.Tensor


class DeviceScratch:
    """Per-thread :class:`DeviceMaps` over ``num_nodes`` nodes on ``device``, kept across batches."""

    def __init__(self, num_nodes: int, device: torch.device) -> None:
        self.num_nodes = num_nodes
        self.device = device
        self._tls = threading.local()

    def maps(self) -> DeviceMaps:
        maps: DeviceMaps | None = getattr(self._tls, "maps", None)
        if maps is None:
            maps = self._tls.maps = DeviceMaps(
                torch.full((self.num_nodes,), -1, dtype=torch.int32, device=self.device),
                torch.full((self.num_nodes,), _UNSEEN, dtype=torch.int32, device=self.device))
        return maps


def sample_on_device(source: GraphSource, fanouts: list[Fanout], replace: bool, scratch: DeviceScratch,
                     seeds: np.ndarray, banned: np.ndarray | None, hop_keys: list[int]) -> SampledBatch:
    """The batch :meth:`NeighborSampler.sample` makes around ``seeds`` (int64 ids in range;
    repeats refused here) with hop ``h`` keyed ``hop_keys[h]``, drawn on ``scratch.device``
    (the source's); ``banned``: the sorted keys ``dst * N + src`` of the excluded edges.
    Blocks are on the device."""
    if np.unique(seeds).size != seeds.size:
        raise SamplerError(f"seeds: node {int(seeds[_first_repeat(seeds)])} appears more than once; "
                           "seeds must be unique")
    device = scratch.device
    n = source.num_nodes
    maps = scratch.maps()
    local = maps.local
    seeds_t = torch.from_numpy(seeds).to(device)
    local[seeds_t] = torch.arange(seeds_t.shape[0], dtype=torch.int32, device=device)
    nodes = [seeds_t]
    n_nodes = int(seeds_t.shape[0])
    try:
        banned_t = None if banned is None else torch.from_numpy(banned).to(device)
        frontier = seeds_t
        blocks: list[Block] = []
        total = 0
        for fanout, hop_key in zip(fanouts, hop_keys, strict=True):
            n_dst = n_nodes
            got = source.draw_on_device(frontier, fanout, replace=replace, key=hop_key)
            counts, nbrs, rels = got.counts, got.nbrs, got.rels
            if banned_t is not None and nbrs.numel():
                counts, nbrs, rels = _drop(banned_t, frontier, counts, nbrs, rels, n)
            src, n_nodes = relabel(nbrs, maps, nodes, n_nodes)
            dst = torch.repeat_interleave(torch.arange(n_dst, device=device), counts)
            indptr = torch.zeros(n_dst + 1, dtype=torch.int64, device=device)
            torch.cumsum(counts, 0, out=indptr[1:])
            blocks.append(Block(torch.stack([src, dst]), num_src=n_nodes, num_dst=n_dst, indptr=indptr,
                                edge_rel=rels))
            total += int(nbrs.shape[0])
            frontier = torch.cat(nodes)
        input_nodes = torch.cat(nodes)
    finally:
        local[torch.cat(nodes)] = -1
    blocks.reverse()
    return SampledBatch(seeds=seeds, input_nodes=input_nodes.cpu().numpy(), blocks=blocks,
                        num_sampled_edges=total)


def _first_repeat(seeds: np.ndarray) -> int:
    """The index of the first id in ``seeds`` seen before."""
    _, first = np.unique(seeds, return_index=True)
    repeated = np.setdiff1d(np.arange(seeds.size), first)
    return int(repeated.min())


def _drop(banned: torch.Tensor, dst_nodes: torch.Tensor, counts: torch.Tensor, nbrs: torch.Tensor,
          rels: torch.Tensor | None, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The sampled neighbours without the edges whose key ``dst * n + src`` is in ``banned``."""
    row = torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts)
    keys = dst_nodes[row] * n + nbrs
    at = torch.clamp(torch.searchsorted(banned, keys), max=banned.shape[0] - 1)
    keep = banned[at] != keys
    return (torch.bincount(row[keep], minlength=int(counts.shape[0])), nbrs[keep],
            None if rels is None else rels[keep])
