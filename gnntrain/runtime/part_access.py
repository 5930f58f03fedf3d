"""What a worker reads: its part, the other parts through its peers, and its cache.

:class:`PartAccess` holds one worker's view of the graph — the local CSR, the
distributed sampler over it (frontier nodes it owns sampled locally, one request per
remote owner for the rest), the feature reader (own table, cache, one request per
owner) and the byte counter — and builds batch pipelines over it. The trainer, the
evaluator and the peer server of a worker share one :class:`PartAccess`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnntrain.config import RunConfig
from gnntrain.embedding import EmbeddingShard
from gnntrain.engine import BatchPipeline, EpochStats, mix_seed
from gnntrain.models import BlockNeeds
from gnntrain.runtime.codec import type_dtypes
from gnntrain.runtime.comm import CommCounter
from gnntrain.runtime.dist_embedding import DistEmbedding
from gnntrain.runtime.dist_source import DistFeatureReader, DistGraphSource
from gnntrain.runtime.routing import PartitionPolicy, Peers
from gnntrain.tasks import SeedBatch, Task
from samplers import CSRSource, NeighborSampler, build_cache, count_accesses
from samplers.cache import TypedFeatureCache
from samplers.config import resolve_fanouts
from samplers.device import TorchCSRSource

if TYPE_CHECKING:
    from partition import Part, PartitionBook


class Progress:
    """Where a worker is (phase, epoch, step), read by the coordinator to name a stuck
    worker; written by whichever role is working."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {"epoch": -1, "step": 0, "phase": "setup"}

    def set(self, phase: str, **where: int) -> None:
        self.state = {"phase": phase, **where}


class PartAccess:
    """One worker's sampler, feature reader, cache and byte counter over its part."""

    def __init__(self, cfg: RunConfig, part: Part, *, rank: int, world: int,
                 degrees: np.ndarray, peers: Peers, device: torch.device,
                 node_types: np.ndarray | None = None) -> None:
        self.cfg = cfg
        self.part = part
        self.rank = rank
        self.world = world
        self.device = device
        self.n_owned = int(part.indptr.shape[0] - 1)
        self.degrees = degrees
        self.node_types = node_types  # type index of every node (new numbering); None: untyped
        comm = CommCounter(rank, world, node_types, part.node_type_names if node_types is not None else ())
        self.policy = PartitionPolicy(part.book, rank, peers, comm)
        self.progress = Progress()
        # sampler.backend torch: the same draws in torch ops on the training device
        source: Callable[..., CSRSource] = (partial(TorchCSRSource, device=device)
                                            if cfg.sampler.backend == "torch" else CSRSource)
        self.local = source(part.indptr, part.indices, row_offset=self.start, num_nodes=self.num_nodes,
                            edge_rel=part.edge_rel, num_relations=len(part.edge_types))
        self.source = DistGraphSource(self.local, self.policy)
        dtypes = type_dtypes(cfg.train.feature_dtype, part.node_type_names)
        self.reader = DistFeatureReader(part.x, self.policy, degrees,
                                        dtype=dtypes if part.node_type_names else dtypes[0],
                                        node_types=node_types, type_widths=part.node_type_features,
                                        device=device if cfg.sampler.backend == "torch" else None)
        sc = cfg.sampler
        self.sampler = NeighborSampler(self.source, resolve_fanouts(sc.fanouts, part.edge_types),
                                       replace=sc.replace,
                                       weighted=sc.weighted)
        self.cache_info: dict[str, Any] = {"policy": "none", "capacity": 0}
        self.embedding: DistEmbedding | None = None
        emb = cfg.model.node_embedding
        if emb is not None:
            shard = EmbeddingShard(emb, np.asarray(part.orig_ids[:self.n_owned], dtype=np.int64),
                                   seed=cfg.train.seed, wait_timeout_s=cfg.cluster.call_timeout_s)
            self.embedding = DistEmbedding(shard, self.policy, emb.combine)

    # the routing bundle, held once by the policy
    @property
    def book(self) -> PartitionBook:
        return self.policy.book

    @property
    def start(self) -> int:
        return self.policy.start

    @property
    def num_nodes(self) -> int:
        return self.policy.num_nodes

    @property
    def peers(self) -> Peers:
        return self.policy.peers

    @property
    def comm(self) -> CommCounter:
        return self.policy.comm

    def owned(self, ids: np.ndarray) -> np.ndarray:
        return self.policy.owned(ids)

    def setup_cache(self, task: Task) -> dict[str, Any]:
        """Build the remote-feature cache ``sampler.cache`` asks for (``samplers.build_cache``);
        returns what it did. Pre-sampling runs the task's training seeds with keys the
        training run never uses."""
        cc = self.cfg.sampler.cache
        remote_rows = self.num_nodes - self.n_owned
        if cc.policy == "none" or self.world == 1 or remote_rows == 0:
            return self.cache_info
        t0 = time.perf_counter()
        remote = np.concatenate([np.arange(0, self.start),
                                 np.arange(self.start + self.n_owned, self.num_nodes)]).astype(np.int64)
        counts = None
        if cc.policy == "presample":
            counts = count_accesses(
                self.sampler, task.eval_seeds(self.part, "train"), self.cfg.sampler.batch_size,
                cc.presample_epochs, mix_seed(self.cfg.train.seed, "presample", self.rank),
                only=lambda v: ~self.owned(v))
        dim = int(self.part.x.shape[1])
        names = self.part.node_type_names
        typed = self.node_types is not None and bool(names)
        cache = build_cache(cc, dim=dim, num_remote_rows=remote_rows,
                            read_rows=lambda ids: self.reader.fetch(ids), candidates=remote,
                            degrees=self.degrees[remote], access_counts=counts,
                            node_types=self.node_types if typed else None,
                            type_widths=(self.part.node_type_features or (dim,) * len(names)) if typed else (),
                            type_names=names if typed else ())
        self.reader.cache = cache
        # (an empty dynamic cache has len 0: test it against None, never for truth)
        self.cache_info = {"policy": cc.policy, "capacity": int(cache.capacity) if cache is not None else 0,
                           "remote_rows": int(remote_rows), "setup_s": time.perf_counter() - t0,
                           "bytes": cache.capacity * cache.row_bytes if cache is not None else 0}
        if isinstance(cache, TypedFeatureCache):  # every type at its own width
            self.cache_info["capacity_by_type"] = {
                n: (c.capacity if c is not None else 0) for n, c in zip(names, cache.caches, strict=True)}
            self.cache_info["bytes"] = cache.nbytes
        return self.cache_info

    def pipeline(self, task: Task, batches: list[SeedBatch], keys: list[int], *, needs: BlockNeeds,
                 prefetch: int | None = None) -> BatchPipeline:
        """Sample, fetch and attach the task's targets, ``prefetch`` batches ahead."""
        def targets(b: SeedBatch) -> np.ndarray:
            return task.targets(self.part, b)

        return BatchPipeline(self.sampler, self.reader, targets, batches, keys,
                             prefetch=self.cfg.sampler.prefetch if prefetch is None else prefetch,
                             needs=needs, pin=self.device.type == "cuda", device=self.device)

    def io_counters(self) -> Callable[[EpochStats], None]:
        """Snapshot the sampler's and reader's counters; the returned function adds what
        they counted since then to an epoch's statistics."""
        src0, rd0 = dict(vars(self.source.stats)), dict(vars(self.reader.stats))
        emb0 = dict(vars(self.embedding.stats)) if self.embedding is not None else {}

        def add(stats: EpochStats) -> None:
            stats.extra.update({f"sample_{k}": v - src0[k] for k, v in vars(self.source.stats).items()})
            stats.extra.update({f"feat_{k}": v - rd0[k] for k, v in vars(self.reader.stats).items()})
            if self.embedding is not None:
                stats.extra.update({f"embedding_{k}": v - emb0[k]
                                    for k, v in vars(self.embedding.stats).items()})

        return add

    def comm_snapshot(self) -> dict[str, Any]:
        return self.comm.take()
