"""``NeighborSampler``: per-hop fanout sampling into message-flow-graph blocks.

One batch: the seeds get local ids ``0..B-1``; for each hop ``h`` (``fanouts[h]``, hop 0
next to the seeds) every node found so far is a dst node, its sampled in-neighbours are
mapped to local ids (new ones appended in first-seen order) and become the block's src
nodes. Local ids are stable across hops, so ``blocks[i].num_dst == blocks[i + 1].num_src``
and one ``input_nodes`` array names every node of the batch.

The global-to-local map is a dense int32 array per thread that is -1 everywhere outside
the batch (reset cost O(nodes touched), not O(N)); graphs above ``dense_limit`` nodes use
an open-addressing hash table instead. Both live in nogil numba kernels, so
:meth:`NeighborSampler.iter_batches` samples batches on several threads at once. Over a
source that draws on a device (``source.device``) the same loop runs there instead
(:mod:`samplers.device_neighbor`), with the same result.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Literal

import numpy as np
import torch

from samplers import _kernels as K
from samplers.base import Fanout, GraphSource, SamplerError
from samplers.batch import Block, SampledBatch
from samplers.config import SamplerConfig
from samplers.device_neighbor import DeviceScratch, sample_on_device
from samplers.edge_keys import contains, pair_keys
from samplers.local import check_fanout, check_ids

#: graphs with more nodes than this relabel through a hash table (a dense map would cost
#: 4 bytes x num_nodes per sampling thread)
DENSE_LIMIT = 1 << 25


class _Scratch:
    """Per-thread buffers of the relabel step, reused across batches."""

    def __init__(self, num_nodes: int, dense: bool) -> None:
        self.dense = dense
        self.local = np.full(num_nodes if dense else 0, -1, dtype=np.int32)
        self.keys = np.full(0 if dense else 1024, -1, dtype=np.int64)
        self.vals = np.zeros(self.keys.size, dtype=np.int64)
        self.nodes = np.empty(1024, dtype=np.int64)

    def reserve(self, n_nodes: int, extra: int) -> None:
        need = n_nodes + extra
        if need > self.nodes.size:
            buf = np.empty(max(need, 2 * self.nodes.size), dtype=np.int64)
            buf[:n_nodes] = self.nodes[:n_nodes]
            self.nodes = buf
        if not self.dense and 2 * need > self.keys.size:
            cap = self.keys.size
            while cap < 2 * need:
                cap *= 2
            self.keys = np.full(cap, -1, dtype=np.int64)
            self.vals = np.zeros(cap, dtype=np.int64)
            K.rebuild_hash(self.keys, self.vals, self.nodes, np.int64(n_nodes))

    def reset(self, n_nodes: int) -> None:
        if self.dense:
            K.reset_dense(self.local, self.nodes, np.int64(n_nodes))
        else:
            self.keys.fill(-1)


class NeighborSampler:
    """Sample ``len(fanouts)`` hops around seed nodes of a :class:`GraphSource`.

    ``fanouts[0]`` is the hop next to the seeds (PyG order); ``-1`` takes all neighbours.
    A hop's fanout may be a tuple with one entry per relation of a typed source (DGL's
    ``{etype: fanout}``, resolved to relation ids); blocks of a typed source carry each
    edge's relation (``Block.edge_rel``).
    ``replace`` draws with replacement; ``weighted`` requires a source that samples by edge
    weight (``source.weighted``). Batches are deterministic given ``key`` (see the
    determinism contract in :mod:`samplers.base`).
    """

    def __init__(self, source: GraphSource, fanouts: Sequence[Fanout], *, replace: bool = False,
                 weighted: bool = False,
                 relabel: Literal["auto", "dense", "hash"] = "auto") -> None:
        if not isinstance(source, GraphSource):
            raise SamplerError(f"source: expected a GraphSource, got {type(source).__name__}")
        fo = list(fanouts)
        if not fo:
            raise SamplerError("fanouts is empty: give one fanout per layer, e.g. [15, 10, 5]")
        self.fanouts = [check_fanout(f, f"fanouts[{i}]") for i, f in enumerate(fo)]
        if bool(weighted) != bool(source.weighted):
            have = "samples by edge weight" if source.weighted else "has no edge weights"
            raise SamplerError(
                f"weighted={weighted} but the source {have}; pass weighted={source.weighted}"
                + ("" if source.weighted else ", or build the source with edge_weight="))
        if relabel not in ("auto", "dense", "hash"):
            raise SamplerError(f"relabel={relabel!r}: expected 'auto', 'dense' or 'hash'")
        self.source = source
        self.replace = bool(replace)
        self.weighted = bool(weighted)
        self.num_nodes = int(source.num_nodes)
        self._dense = relabel == "dense" or (relabel == "auto" and self.num_nodes <= DENSE_LIMIT)
        self._tls = threading.local()
        # a source that draws on a device: every hop there, with these maps
        self._device_scratch = None if source.device is None else DeviceScratch(self.num_nodes, source.device)

    @classmethod
    def from_config(cls, source: GraphSource, cfg: SamplerConfig) -> NeighborSampler:
        """The sampler a ``sampler:`` config section describes."""
        return cls(source, list(cfg.fanouts), replace=cfg.replace,  # type: ignore[arg-type]
                   weighted=cfg.weighted)

    def _scratch(self) -> _Scratch:
        s: _Scratch | None = getattr(self._tls, "scratch", None)
        if s is None:
            s = _Scratch(self.num_nodes, self._dense)
            self._tls.scratch = s
        return s

    def sample(self, seeds: np.ndarray, key: int, exclude: np.ndarray | None = None) -> SampledBatch:
        """Sample the blocks around ``seeds`` (unique global ids); same key, same batch.

        ``exclude`` (int64 ``[M, 2]`` global ``(src, dst)`` pairs) are edges no block may
        hold: each hop drops the sampled edges ``src -> dst`` it lists, after sampling (so
        the draw, and determinism, are unchanged; a node may get fewer than ``fanout``
        neighbours, as with DGL's ``exclude``). Give both directions to exclude both.
        """
        seeds = check_ids(seeds, 0, self.num_nodes, "seeds").copy()
        banned = self._edge_keys(exclude)
        if self._device_scratch is not None:  # every hop on the source's device
            return sample_on_device(self.source, self.fanouts, self.replace, self._device_scratch, seeds,
                                    banned, [K.mix_key(key, hop) for hop in range(len(self.fanouts))])
        sc = self._scratch()
        sc.reserve(0, seeds.size)
        if sc.dense:
            dup = K.insert_seeds_dense(seeds, sc.local, sc.nodes)
        else:
            dup = K.insert_seeds_hashed(seeds, sc.keys, sc.vals, sc.nodes)
            if dup >= 0:
                sc.reset(0)
        if dup >= 0:
            raise SamplerError(f"seeds: node {int(seeds[dup])} appears more than once; seeds must be unique")
        n_nodes = int(seeds.size)
        blocks: list[Block] = []
        total = 0
        try:
            for hop, fanout in enumerate(self.fanouts):
                n_dst = n_nodes
                nb = self.source.sample_neighbors(sc.nodes[:n_dst], fanout, replace=self.replace,
                                                  key=K.mix_key(key, hop))
                counts = np.ascontiguousarray(nb.counts, dtype=np.int64)
                nbrs = np.ascontiguousarray(nb.nbrs, dtype=np.int64)
                rels = None if nb.rels is None else np.ascontiguousarray(nb.rels, dtype=np.int64)
                self._check_neighbors(counts, nbrs, n_dst)
                if banned is not None and nbrs.size:
                    counts, nbrs, rels = self._drop(banned, sc.nodes[:n_dst], counts, nbrs, rels)
                sc.reserve(n_nodes, min(nbrs.size, self.num_nodes - n_nodes))
                if sc.dense:
                    ei, nn = K.relabel_dense(nbrs, counts, sc.local, sc.nodes, np.int64(n_nodes))
                else:
                    ei, nn = K.relabel_hashed(nbrs, counts, sc.keys, sc.vals, sc.nodes,
                                              np.int64(n_nodes))
                n_nodes = int(nn)
                indptr = np.zeros(n_dst + 1, dtype=np.int64)
                np.cumsum(counts, out=indptr[1:])
                blocks.append(Block(torch.from_numpy(ei), num_src=n_nodes, num_dst=n_dst,
                                    indptr=torch.from_numpy(indptr),
                                    edge_rel=None if rels is None else torch.from_numpy(rels)))
                total += int(nbrs.size)
            input_nodes = sc.nodes[:n_nodes].copy()
        finally:
            sc.reset(n_nodes)
        blocks.reverse()
        return SampledBatch(seeds=seeds, input_nodes=input_nodes, blocks=blocks,
                            num_sampled_edges=total)

    def _edge_keys(self, exclude: np.ndarray | None) -> np.ndarray | None:
        """Sorted keys ``dst * N + src`` of the excluded edges (None when there are none)."""
        if exclude is None or np.asarray(exclude).size == 0:
            return None
        ex = np.asarray(exclude)
        if ex.ndim != 2 or ex.shape[1] != 2:
            raise SamplerError(f"exclude: expected [M, 2] (src, dst) pairs, got shape {ex.shape}")
        ex = check_ids(ex.reshape(-1), 0, self.num_nodes, "exclude").reshape(-1, 2)
        return np.sort(pair_keys(ex[:, 1], ex[:, 0], self.num_nodes))

    def _drop(self, banned: np.ndarray, dst_nodes: np.ndarray, counts: np.ndarray,
              nbrs: np.ndarray, rels: np.ndarray | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The sampled neighbours without the edges whose key is in ``banned``."""
        row = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        keep = ~contains(banned, pair_keys(dst_nodes[row], nbrs, self.num_nodes))
        if keep.all():
            return counts, nbrs, rels
        return (np.bincount(row[keep], minlength=counts.size).astype(np.int64),
                np.ascontiguousarray(nbrs[keep]), None if rels is None else rels[keep])

    def _check_neighbors(self, counts: np.ndarray, nbrs: np.ndarray, n_dst: int) -> None:
        """A source's answer must match its question (ids are then fed to unchecked kernels)."""
        if counts.shape != (n_dst,) or int(counts.sum()) != nbrs.size or nbrs.ndim != 1:
            raise SamplerError(
                f"{type(self.source).__name__}.sample_neighbors broke the protocol: "
                f"{counts.shape} counts / {nbrs.shape} nbrs for {n_dst} seeds")
        if nbrs.size and (int(nbrs.min()) < 0 or int(nbrs.max()) >= self.num_nodes):
            raise SamplerError(
                f"{type(self.source).__name__}.sample_neighbors returned a neighbour id outside "
                f"[0, num_nodes={self.num_nodes})")

    def iter_batches(self, seeds: np.ndarray, batch_size: int, key: int, *, shuffle: bool = True,
                     drop_last: bool = False, num_threads: int = 1) -> Iterator[SampledBatch]:
        """One epoch over ``seeds`` in batches, in order; ``num_threads > 1`` samples the
        next batches on a thread pool while the caller consumes earlier ones.

        The order (``shuffle``) and batch ``i``'s key both derive from ``key``, so the
        epoch is identical for any ``num_threads``.
        """
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise SamplerError(f"num_threads={num_threads!r}: must be an int >= 1")
        batches, keys = self.plan_epoch(seeds, batch_size, key, shuffle=shuffle,
                                        drop_last=drop_last)
        if num_threads == 1:
            return (self.sample(s, k) for s, k in zip(batches, keys, strict=True))
        return self._threaded(batches, keys, num_threads)

    def _threaded(self, batches: list[np.ndarray], keys: list[int],
                  num_threads: int) -> Iterator[SampledBatch]:
        with ThreadPoolExecutor(num_threads, thread_name_prefix="sampler") as pool:
            window: deque[Future[SampledBatch]] = deque()
            it = iter(zip(batches, keys, strict=True))
            for s, k in it:
                window.append(pool.submit(self.sample, s, k))
                if len(window) >= 2 * num_threads:
                    break
            while window:
                fut = window.popleft()
                nxt = next(it, None)
                if nxt is not None:
                    window.append(pool.submit(self.sample, *nxt))
                yield fut.result()

    def plan_epoch(self, seeds: np.ndarray, batch_size: int, key: int, *, shuffle: bool = True,
                   drop_last: bool = False) -> tuple[list[np.ndarray], list[int]]:
        """The seed batches and batch keys of one epoch (what :meth:`iter_batches` samples)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) \
                or batch_size <= 0:
            raise SamplerError(f"batch_size={batch_size!r}: must be an int >= 1")
        seeds = check_ids(seeds, 0, self.num_nodes, "seeds")
        if shuffle:
            seeds = np.random.default_rng(K.mix_key(key, 0x5EED)).permutation(seeds)
        n = seeds.size // batch_size if drop_last else -(-seeds.size // batch_size)
        batches = [seeds[i * batch_size:(i + 1) * batch_size] for i in range(n)]
        return batches, [K.mix_key(key, 1 << 32, i) for i in range(n)]
