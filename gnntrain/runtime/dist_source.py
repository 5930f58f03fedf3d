"""A partition plus its remote owners, seen through the samplers' graph protocol.

:class:`DistGraphSource` is the distributed twin of ``samplers.CSRSource``: per hop it
samples the frontier nodes this worker owns locally and sends one request per remote
owner for the rest. Because a node's sampled neighbours depend only on (key, node),
the result is exactly what a single process would draw on the whole graph.
:class:`DistFeatureReader` splits input nodes into owned, cached and missing rows and
fetches the missing ones with one request per owner; it is the one way features are read
(:class:`gnntrain.engine.FeatureReader`), in a single process as in a group. Both route
ids through the worker's :class:`~gnntrain.runtime.routing.PartitionPolicy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from gnntrain.runtime.codec import Encoded, TypedReply, decode, decode_typed
from gnntrain.runtime.comm import wire_bytes
from gnntrain.runtime.device_rows import DeviceRows
from gnntrain.runtime.routing import PartitionPolicy, Route
from partition.feature_rows import TypedRows
from samplers import CSRSource, FeatureCache, GraphSource, Neighbors
from samplers.base import DeviceNeighbors, Fanout


@dataclass
class SampleStats:
    local_frontier: int = 0
    remote_frontier: int = 0
    requests: int = 0


class DistGraphSource(GraphSource):
    """Owned rows sampled locally, the rest asked of their owners (one request per owner).

    When the local source draws on a device, so does this one (``device``), and the
    sampler runs its hops there: :meth:`draw_on_device` draws the owned seeds on the
    device and sends only the others' ids to the host, to be asked of their owners as
    :meth:`sample_neighbors` asks them (the same requests, counted the same), and their
    answers back; a worker that owns every node (one process) never leaves the device."""

    def __init__(self, local: CSRSource, policy: PartitionPolicy) -> None:
        self.local = local
        self.policy = policy
        self.num_nodes = policy.num_nodes
        self.stats = SampleStats()
        self.device = local.device

    def draw_on_device(self, seeds: torch.Tensor, fanout: Fanout, *, replace: bool,
                       key: int) -> DeviceNeighbors:
        own = (seeds >= self.policy.start) & (seeds < self.policy.stop)
        n_own = int(own.sum())
        self.stats.local_frontier += n_own
        if n_own == seeds.shape[0]:
            return self.local.draw_on_device(seeds, fanout, replace=replace, key=key)
        at_own, at_peers = torch.nonzero(own).squeeze(1), torch.nonzero(~own).squeeze(1)
        mine = self.local.draw_on_device(seeds[at_own], fanout, replace=replace, key=key)
        theirs = _to_device(self.sample_neighbors(seeds[at_peers].cpu().numpy(), fanout, replace=replace, key=key),
                            seeds.device)
        return _assemble(int(seeds.shape[0]), [(at_own, mine), (at_peers, theirs)], DeviceNeighbors,
                         _torch_ops(seeds.device))

    def sample_neighbors(self, seeds: np.ndarray, fanout: Fanout, *, replace: bool, key: int) -> Neighbors:
        route = self.policy.route(seeds)
        self.stats.local_frontier += int(route.local.size)
        self.stats.remote_frontier += int(route.ids.size - route.local.size)
        self.stats.requests += len(route.remote)

        def sample_own(ids: np.ndarray) -> Neighbors:
            return self.local.sample_neighbors(ids, fanout, replace=replace, key=key)

        return _assemble(route.ids.size, self.policy.gather(route, sample_own, "sample", fanout, replace, key),
                         Neighbors)


def _int64_tensor(a: np.ndarray, device: torch.device) -> torch.Tensor:
    """``a`` as an int64 tensor on ``device`` (a read-only array, as Ray's replies are, copied
    first: torch keeps only writable memory)."""
    a = np.asarray(a, dtype=np.int64)
    return torch.from_numpy(a if a.flags.writeable else a.copy()).to(device)


def _to_device(nb: Neighbors, device: torch.device) -> DeviceNeighbors:
    return DeviceNeighbors(_int64_tensor(nb.counts, device), _int64_tensor(nb.nbrs, device),
                           None if nb.rels is None else _int64_tensor(nb.rels, device))


@dataclass(frozen=True)
class _Ops:
    """The int64 array operations :func:`_assemble` needs: numpy's, or torch's on a device."""

    zeros: Callable[[int], Any]
    cat: Callable[[list[Any]], Any]
    cumsum: Callable[[Any], Any]
    repeat: Callable[[Any, Any], Any]
    arange: Callable[[int], Any]


_NUMPY = _Ops(lambda n: np.zeros(n, dtype=np.int64), np.concatenate, np.cumsum, np.repeat,
              lambda n: np.arange(n, dtype=np.int64))


def _torch_ops(device: torch.device) -> _Ops:
    return _Ops(lambda n: torch.zeros(n, dtype=torch.int64, device=device), torch.cat,
                lambda a: torch.cumsum(a, 0), torch.repeat_interleave,
                lambda n: torch.arange(n, device=device))


Answer = TypeVar("Answer", Neighbors, DeviceNeighbors)


def _assemble(n: int, groups: list[tuple[Any, Answer]], answer: type[Answer], ops: _Ops = _NUMPY) -> Answer:
    """Put per-group answers (the seed positions of a group, its answer) back in seed order,
    as one ``answer`` of all ``n`` seeds."""
    counts = ops.zeros(n)
    if not groups:
        return answer(counts, ops.zeros(0))
    pos_all = ops.cat([p for p, _ in groups])
    cnt_all = ops.cat([g.counts for _, g in groups])
    nbr_all = ops.cat([g.nbrs for _, g in groups])
    typed = [g.rels for _, g in groups if g.rels is not None]
    rel_all = ops.cat(typed) if len(typed) == len(groups) else None
    counts[pos_all] = cnt_all
    grouped_start = ops.zeros(n)
    grouped_start[pos_all] = ops.cumsum(cnt_all) - cnt_all
    out_start = ops.cumsum(counts) - counts
    gather = ops.repeat(grouped_start - out_start, counts) + ops.arange(int(nbr_all.shape[0]))
    return answer(counts, nbr_all[gather], None if rel_all is None else rel_all[gather])


@dataclass
class FeatureStats:
    rows: int = 0
    owned: int = 0
    remote: int = 0
    cache_hits: int = 0
    cached: int = 0  # remote rows looked up in a cache (0 when there is none)
    featureless: int = 0  # remote rows of a type without features: zeros, never fetched
    fetched: int = 0
    bytes_fetched: int = 0
    bytes_saved: int = 0


class DistFeatureReader:
    """Owned rows from the local table, remote rows from the cache, the rest fetched: the
    :class:`gnntrain.engine.FeatureReader` of every run (one process is one worker owning
    every row).

    ``dtype`` is the transfer dtype, or on a typed graph one per node type
    (:func:`gnntrain.runtime.codec.type_dtypes`); a typed owner replies with one group per
    node type, each at its type's width and dtype. ``type_widths`` (each node type's own
    width) marks the featureless types: their remote rows are zeros, read without asking.

    ``device`` (``sampler.backend: torch``): the reader holds its own rows on that device
    (:class:`~gnntrain.runtime.device_rows.DeviceRows`, :attr:`table`: on a GPU when they
    take at most half its free memory, else in page-locked host memory the GPU reads; the
    CPU: the arrays themselves, no copy; a typed part one table per node type at its
    width) and :meth:`read` answers a tensor
    there: owned rows gathered on the device, the others (cached or fetched on the host)
    copied in; a reader that owns every row (one process) never touches the host."""

    def __init__(self, x_local: np.ndarray | TypedRows, policy: PartitionPolicy, degrees: np.ndarray, *,
                 cache: FeatureCache | None = None, dtype: str | tuple[str, ...] = "float32",
                 node_types: np.ndarray | None = None, type_widths: tuple[int, ...] = (),
                 device: torch.device | None = None) -> None:
        self.x_local = x_local
        self.policy = policy
        self.deg = degrees
        self.types = node_types
        widths = np.asarray(type_widths, dtype=np.int64)
        self._featureless = widths == 0 if node_types is not None and (widths == 0).any() else None
        self.cache = cache
        self.dtype = dtype
        self.stats = FeatureStats()
        self._row_wire_bytes: float = 0.0
        self._owns_all = policy.start == 0 and policy.stop == policy.num_nodes
        self.table = None if device is None else DeviceRows.place(x_local, device)

    def degrees(self, ids: np.ndarray) -> np.ndarray:
        return self.deg[ids]

    def node_types(self, ids: np.ndarray) -> np.ndarray:
        if self.types is None:
            raise ValueError("the model reads node types (needs_node_types) but the graph is "
                             "untyped: train it on a typed dataset (dataset.source: hetero_dir, "
                             "ogb_mag or synthetic_hetero)")
        return np.asarray(self.types[ids], dtype=np.int64)

    def read(self, ids: np.ndarray) -> np.ndarray | torch.Tensor:
        """Feature rows of global ``ids``: float32 ``[len(ids), F]`` in the order given (a
        tensor on the table's device when :attr:`table` is set)."""
        if self.table is not None and self._owns_all:
            self.stats.rows += int(ids.size)
            self.stats.owned += int(ids.size)
            return self.table.gather(ids)
        route = self.policy.route(ids)
        table = self.table
        out, hits = self._read_rows(route, None if table is None else table.device)
        if table is None:
            return out
        dev = table.device
        # own rows from the table on the device, cache hits from the cache there, the others
        # (fetched) copied in
        rows = torch.empty(out.shape, dtype=torch.float32, device=dev)
        rows[torch.from_numpy(route.local).to(dev)] = table.gather(self.policy.to_local(route.ids[route.local]))
        on_host = np.ones(out.shape[0], dtype=bool)
        on_host[route.local] = False
        if hits is not None:
            rows[torch.from_numpy(hits[0]).to(dev)] = hits[1]
            on_host[hits[0]] = False
        copied = np.flatnonzero(on_host)
        if copied.size:
            rows[torch.from_numpy(copied).to(dev)] = torch.from_numpy(out[copied]).to(dev)
        return rows

    def _read_rows(self, route: Route, device: torch.device | None = None
                   ) -> tuple[np.ndarray, tuple[np.ndarray, torch.Tensor] | None]:
        """:meth:`read`'s rows on the host: owned ones from the local table, the others
        from the cache or their owners. With ``device`` (the table's) owned rows and cache
        hits are left unset: the hits come back as ``(positions, rows on the device)``."""
        ids = route.ids
        out = np.empty((ids.size, self.x_local.shape[1]), dtype=np.float32)
        if self.table is None:
            out[route.local] = self.x_local[self.policy.to_local(ids[route.local])]
        remote_pos = route.remote_positions()
        self.stats.rows += int(ids.size)
        self.stats.owned += int(route.local.size)
        self.stats.remote += int(remote_pos.size)
        if self._featureless is not None and remote_pos.size:
            assert self.types is not None
            none = self._featureless[self.types[ids[remote_pos]]]
            out[remote_pos[none]] = 0.0
            remote_pos = remote_pos[~none]
            self.stats.featureless += int(none.sum())
        hits = None
        if remote_pos.size == 0:
            return out, hits
        missing = remote_pos
        if self.cache is not None:
            if device is None:
                hit, rows = self.cache.lookup(ids[remote_pos])
                out[remote_pos[hit]] = rows
            else:
                hit, on_device = self.cache.lookup_on(ids[remote_pos], device)
                hits = (remote_pos[hit], on_device)
            missing = remote_pos[~hit]
            self.stats.cache_hits += int(hit.sum())
            self.stats.cached += int(remote_pos.size)
        if missing.size:
            self._fetch_into(ids[missing], out, missing, insert=True)
        if self.cache is not None and self._row_wire_bytes:
            self.stats.bytes_saved = int(self.stats.cache_hits * self._row_wire_bytes)
        return out, hits

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        """Rows of remote ``ids`` straight from their owners (cache bypassed)."""
        out = np.empty((ids.size, self.x_local.shape[1]), dtype=np.float32)
        return self._fetch_into(ids, out, None, insert=False)

    def _fetch_into(self, ids: np.ndarray, out: np.ndarray, at: np.ndarray | None, *,
                    insert: bool) -> np.ndarray:
        """Rows of remote ``ids`` from their owners into ``out`` (at ``at``), one request
        per owner; inserted into the cache with ``insert``."""
        def receive(owner_ids: np.ndarray, reply: Encoded | TypedReply) -> np.ndarray:
            rows = self._decode(reply, owner_ids)
            self.stats.fetched += int(owner_ids.size)
            reply_bytes = wire_bytes(reply)  # as the owner counted it
            self.stats.bytes_fetched += reply_bytes
            if owner_ids.size:
                self._row_wire_bytes = reply_bytes / owner_ids.size
            if insert and self.cache is not None:
                self.cache.insert(owner_ids, rows)
            return rows

        return self.policy.fetch(self.policy.route(ids), out, None, "features", self.dtype,
                                 receive=receive, at=at)

    def _decode(self, reply: Encoded | TypedReply, ids: np.ndarray) -> np.ndarray:
        if isinstance(reply, Encoded):
            if not isinstance(self.dtype, str):
                raise ValueError("an untyped feature reply to a request with a dtype per node type")
            return decode(reply, self.dtype)
        if self.types is None or isinstance(self.dtype, str):
            raise ValueError("a typed feature reply on a reader without node types and a dtype per type")
        return decode_typed(reply, self.types[ids], self.dtype, int(self.x_local.shape[1]))
