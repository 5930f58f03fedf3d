"""The caches themselves: one read interface (:class:`FeatureCache`), a static, an LRU
and a FIFO policy over one slot table, and one cache per node type on a typed graph."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from partition.book import value_groups
from samplers import _cache_kernels as CK
from samplers.base import SamplerError
from samplers.local import check_ids

if TYPE_CHECKING:
    import torch


@dataclass
class CacheStats:
    """Counters of one cache. ``lookups`` = ids looked up (hits + misses)."""

    hits: int = 0
    misses: int = 0
    bytes_served: int = 0
    bytes_missed: int = 0

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    def reset(self) -> None:
        self.hits = self.misses = self.bytes_served = self.bytes_missed = 0


def check_capacity(capacity: int) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer) or capacity < 0:
        raise SamplerError(f"capacity={capacity!r}: must be an int >= 0 (rows)")
    return int(capacity)


class FeatureCache(ABC):
    """A cache of float32 feature rows keyed by global node id; capacity in rows."""

    capacity: int
    dim: int
    stats: CacheStats

    @property
    def row_bytes(self) -> int:
        return 4 * self.dim

    @abstractmethod
    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(hit_mask bool [n], rows float32 [hit_mask.sum(), F])``; updates ``stats``."""

    def lookup_on(self, ids: np.ndarray, device: torch.device) -> tuple[np.ndarray, torch.Tensor]:
        """:meth:`lookup` with the rows as a float32 tensor on ``device``: copied there from
        the host here; a cache that holds its rows on the device gathers them there."""
        import torch

        hit, rows = self.lookup(ids)
        return hit, torch.from_numpy(rows).to(device)

    @abstractmethod
    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Offer fetched rows to the cache: dynamic policies store them, static ones ignore."""

    @abstractmethod
    def __len__(self) -> int:
        """Rows held now."""

    def _count(self, hit: np.ndarray) -> None:
        h = int(np.count_nonzero(hit))
        self.stats.hits += h
        self.stats.misses += int(hit.size) - h
        self.stats.bytes_served += h * self.row_bytes
        self.stats.bytes_missed += (int(hit.size) - h) * self.row_bytes

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Arrays and counters that rebuild this cache exactly (for checkpoints)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class SlotCache(FeatureCache):
    """Shared machinery: numba hash table id -> slot, rows ``[capacity, dim]``.
    :meth:`lookup_on` keeps a copy of the rows on each device it is asked for (the
    GPU-resident cache of ``sampler.backend: torch``) and gathers hits there; inserts
    update the copies."""

    _lru = False
    _policy = "static"

    def __init__(self, capacity: int, dim: int) -> None:
        self._alloc(capacity, dim)

    def _alloc(self, capacity: int, dim: int) -> None:
        self.capacity = check_capacity(capacity)
        if dim < 1:
            raise SamplerError(f"dim={dim}: feature rows need at least one column")
        self.dim = int(dim)
        self.stats = CacheStats()
        t = 1
        while t < 2 * self.capacity:
            t *= 2
        self._keys = np.full(t if self.capacity else 0, -1, dtype=np.int64)
        self._tslot = np.zeros(self._keys.size, dtype=np.int64)
        self._slot_id = np.full(self.capacity, -1, dtype=np.int64)
        self._rows = np.zeros((self.capacity, self.dim), dtype=np.float32)
        self._prev = np.full(self.capacity, -1, dtype=np.int64)
        self._nxt = np.full(self.capacity, -1, dtype=np.int64)
        self._meta = np.array([-1, -1, 0, 0], dtype=np.int64)
        self._on_device: dict[torch.device, torch.Tensor] = {}

    def __len__(self) -> int:
        return int(self._meta[CK.SIZE])

    @property
    def nbytes(self) -> int:
        """Bytes of the row table (``capacity x dim`` float32)."""
        return int(self._rows.nbytes)

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hit, slots = self._slots(ids)
        return hit, self._rows[slots]

    def lookup_on(self, ids: np.ndarray, device: torch.device) -> tuple[np.ndarray, torch.Tensor]:
        """Hits gathered from a copy of the row table kept on ``device`` (made on the first
        lookup there; the rows an insert writes are copied to it)."""
        import torch

        hit, slots = self._slots(ids)
        rows = self._on_device.get(device)
        if rows is None:
            rows = self._on_device[device] = torch.from_numpy(self._rows).to(device, copy=True)
        return hit, rows[torch.from_numpy(slots).to(device)]

    def _slots(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hit mask of ``ids`` and the slots of the hits (counted in ``stats``)."""
        ids = check_ids(ids, 0, np.iinfo(np.int64).max, "ids")
        slots = CK.lookup(ids, self._keys, self._tslot, self._lru, self._prev, self._nxt, self._meta)
        hit = slots >= 0
        self._count(hit)
        return hit, slots[hit]

    def _store(self, ids: np.ndarray, rows: np.ndarray) -> None:
        ids = check_ids(ids, 0, np.iinfo(np.int64).max, "ids")
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.shape != (ids.size, self.dim):
            raise SamplerError(f"rows: expected shape ({ids.size}, {self.dim}), got {rows.shape}")
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        written = np.empty(ids.size, dtype=np.int64)
        CK.insert(ids, rows, self._keys, self._tslot, self._slot_id, self._rows, self._lru,
                  self._prev, self._nxt, self._meta, written)
        if self._on_device:
            import torch

            slots = np.unique(written[written >= 0])
            for device, table in self._on_device.items():
                table[torch.from_numpy(slots).to(device)] = torch.from_numpy(self._rows[slots]).to(device)

    def ids(self) -> np.ndarray:
        """Ids held, in eviction order (the next victim first)."""
        order = CK.order_oldest_first(self._slot_id, self._lru, self._prev, self._meta)
        return self._slot_id[order]

    def state_dict(self) -> dict[str, Any]:
        order = CK.order_oldest_first(self._slot_id, self._lru, self._prev, self._meta)
        return {"policy": self._policy, "capacity": self.capacity, "dim": self.dim,
                "ids": self._slot_id[order].copy(), "rows": self._rows[order].copy(),
                "stats": asdict(self.stats)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("policy") != self._policy or int(state.get("dim", -1)) != self.dim:
            raise SamplerError(
                f"state_dict: policy={state.get('policy')!r}, dim={state.get('dim')!r} does not "
                f"match this cache (policy={self._policy!r}, dim={self.dim})")
        self._alloc(int(state["capacity"]), self.dim)
        self._store(np.asarray(state["ids"]), np.asarray(state["rows"]))
        self.stats = CacheStats(**state["stats"])


class StaticCache(SlotCache):
    """A fixed set of rows (``ids`` unique, ``rows`` float32 ``[len(ids), F]``); never admits."""

    def __init__(self, ids: np.ndarray, rows: np.ndarray) -> None:
        ids = check_ids(ids, 0, np.iinfo(np.int64).max, "ids")
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.shape[0] != ids.size:
            raise SamplerError(f"rows: expected shape ({ids.size}, F), got {rows.shape}")
        if np.unique(ids).size != ids.size:
            raise SamplerError("ids: a static cache needs unique ids; got repeats")
        self._alloc(ids.size, int(rows.shape[1]))
        self._store(ids, rows)

    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Static: the content is fixed at construction, so offered rows are ignored."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("policy") != "static":
            raise SamplerError(f"state_dict: policy={state.get('policy')!r}, expected 'static'")
        ids = np.asarray(state["ids"])
        rows = np.asarray(state["rows"])
        self._alloc(ids.size, int(rows.shape[1]))
        self._store(ids, rows)
        self.stats = CacheStats(**state["stats"])


class LRUCache(SlotCache):
    """Admits every inserted row; when full evicts the least recently looked-up/inserted."""

    _lru = True
    _policy = "lru"

    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        self._store(ids, rows)


class FIFOCache(SlotCache):
    """Admits every inserted row; when full evicts the oldest admitted (hits do not renew)."""

    _policy = "fifo"

    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        self._store(ids, rows)


class TypedFeatureCache(FeatureCache):
    """One cache per node type, each holding its type's rows at the type's own width.

    ``node_types[id]`` is a node's type; ``caches[t]`` caches type ``t`` (``None``: type
    ``t`` is not cached, every lookup misses). Lookups return padded rows ``[n, dim]``
    (zeros beyond a type's width), so readers see the rows a padded cache would give;
    inserted rows are cut to each type's width (the columns beyond it hold zeros)."""

    def __init__(self, caches: list[SlotCache | None], node_types: np.ndarray, dim: int) -> None:
        if any(c is not None and c.dim > dim for c in caches):
            raise SamplerError(f"TypedFeatureCache: a type's width {[c.dim for c in caches if c]} "
                               f"exceeds the row width {dim}")
        self.caches = caches
        self.node_types = node_types
        self.dim = int(dim)
        self.capacity = sum(c.capacity for c in caches if c is not None)
        self.stats = CacheStats()
        self._misses_uncached = 0  # lookups of types without a cache

    @property
    def nbytes(self) -> int:
        """Bytes of the cached-row tables (every type at its width)."""
        return sum(c.nbytes for c in self.caches if c is not None)

    def __len__(self) -> int:
        return sum(len(c) for c in self.caches if c is not None)

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._lookup(ids, None)

    def lookup_on(self, ids: np.ndarray, device: torch.device) -> tuple[np.ndarray, torch.Tensor]:
        """:meth:`lookup` with each type's hits from its cache's :meth:`~FeatureCache.lookup_on`
        (a static cache's rows on the device), padded there."""
        return self._lookup(ids, device)

    def _lookup(self, ids: np.ndarray, device: torch.device | None) -> tuple[np.ndarray, Any]:
        """Hits and their padded rows: numpy arrays, or a tensor on ``device``."""
        import torch

        ids = check_ids(ids, 0, int(self.node_types.shape[0]), "ids")
        hit = np.zeros(ids.size, dtype=bool)

        def at(a: np.ndarray) -> Any:  # positions as the rows' index
            return a if device is None else torch.from_numpy(a).to(device)

        rows: Any = (np.zeros((ids.size, self.dim), dtype=np.float32) if device is None
                     else torch.zeros((ids.size, self.dim), dtype=torch.float32, device=device))
        for t, pos in value_groups(self.node_types[ids]):
            c = self.caches[t]
            if c is None:
                self._misses_uncached += int(pos.size)
                continue
            h, r = c.lookup(ids[pos]) if device is None else c.lookup_on(ids[pos], device)
            hit[pos[h]] = True
            rows[at(pos[h]), :c.dim] = r
        self._sum_stats()
        return hit, rows[at(hit)]

    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        ids = check_ids(ids, 0, int(self.node_types.shape[0]), "ids")
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.shape != (ids.size, self.dim):
            raise SamplerError(f"rows: expected shape ({ids.size}, {self.dim}), got {rows.shape}")
        for t, pos in value_groups(self.node_types[ids]):
            c = self.caches[t]
            if c is not None:
                c.insert(ids[pos], rows[pos, :c.dim])

    def _sum_stats(self) -> None:
        parts = [c.stats for c in self.caches if c is not None]
        self.stats = CacheStats(hits=sum(p.hits for p in parts),
                                misses=sum(p.misses for p in parts) + self._misses_uncached,
                                bytes_served=sum(p.bytes_served for p in parts),
                                bytes_missed=sum(p.bytes_missed for p in parts))

    def state_dict(self) -> dict[str, Any]:
        return {"policy": "typed", "dim": self.dim, "misses_uncached": self._misses_uncached,
                "types": [c.state_dict() if c is not None else None for c in self.caches]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        types = state.get("types")
        if state.get("policy") != "typed" or not isinstance(types, list) or len(types) != len(self.caches) \
                or any((c is None) != (st is None) for c, st in zip(self.caches, types, strict=True)):
            raise SamplerError(f"state_dict: policy={state.get('policy')!r} with "
                               f"{len(types) if isinstance(types, list) else None} types does not match "
                               f"this typed cache ({len(self.caches)} types)")
        for c, st in zip(self.caches, types, strict=True):
            if c is not None:
                c.load_state_dict(st)
        self._misses_uncached = int(state.get("misses_uncached", 0))
        self._sum_stats()


# --------------------------------------------------------------------------- choosing rows
