"""Caches of feature rows owned by other workers, behind one read interface.

Policies (all share :class:`FeatureCache`: ``lookup`` / ``insert`` / ``stats``):

* :class:`StaticCache` holds a fixed set of rows chosen before training, by
  :func:`degree_cache_ids` (PaGraph: highest out-degree first, the nodes that appear in the
  most neighbour lists) or :func:`presample_ids` (GNNLab's PreSC: run
  :func:`count_accesses` for a few sampling epochs and keep the hottest rows).
* :class:`LRUCache` and :class:`FIFOCache` admit every missed row and evict the least
  recently used / oldest one.

Every cache counts hits, misses and the bytes it served. :func:`oracle_hit_rate` gives the
hit rate of the best static cache for a measured epoch (filled with that epoch's truly most
accessed rows), the yardstick the benchmark compares policies with.
Capacities are in rows; :func:`resolve_capacity` turns a config size (fraction of the
remote rows, a row count, or bytes) into rows.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

from samplers import _cache_kernels as CK
from samplers import _kernels as K
from samplers.base import Fanout, GraphSource, Neighbors, SamplerError
from samplers.config import CacheConfig
from samplers.local import check_ids
from samplers.neighbor import NeighborSampler


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


def _check_capacity(capacity: int) -> int:
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


class _SlotCache(FeatureCache):
    """Shared machinery: numba hash table id -> slot, rows ``[capacity, dim]``."""

    _lru = False
    _policy = "static"

    def __init__(self, capacity: int, dim: int) -> None:
        self._alloc(capacity, dim)

    def _alloc(self, capacity: int, dim: int) -> None:
        self.capacity = _check_capacity(capacity)
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

    def __len__(self) -> int:
        return int(self._meta[CK.SIZE])

    def lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = check_ids(ids, 0, np.iinfo(np.int64).max, "ids")
        slots = CK.lookup(ids, self._keys, self._tslot, self._lru, self._prev, self._nxt, self._meta)
        hit = slots >= 0
        self._count(hit)
        return hit, self._rows[slots[hit]]

    def _store(self, ids: np.ndarray, rows: np.ndarray) -> None:
        ids = check_ids(ids, 0, np.iinfo(np.int64).max, "ids")
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.shape != (ids.size, self.dim):
            raise SamplerError(f"rows: expected shape ({ids.size}, {self.dim}), got {rows.shape}")
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        CK.insert(ids, rows, self._keys, self._tslot, self._slot_id, self._rows, self._lru,
                  self._prev, self._nxt, self._meta)

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


class StaticCache(_SlotCache):
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


class LRUCache(_SlotCache):
    """Admits every inserted row; when full evicts the least recently looked-up/inserted."""

    _lru = True
    _policy = "lru"

    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        self._store(ids, rows)


class FIFOCache(_SlotCache):
    """Admits every inserted row; when full evicts the oldest admitted (hits do not renew)."""

    _policy = "fifo"

    def insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        self._store(ids, rows)


# --------------------------------------------------------------------------- choosing rows

def _top(ids: np.ndarray, score: np.ndarray, capacity: int) -> np.ndarray:
    """``capacity`` ids of highest score; ties go to the smaller id (deterministic)."""
    order = np.lexsort((ids, -score))
    return ids[order[:capacity]]


def degree_cache_ids(candidates: np.ndarray, degrees: np.ndarray, capacity: int) -> np.ndarray:
    """PaGraph: the ``capacity`` candidates of highest degree (``degrees[i]`` belongs to
    ``candidates[i]``; use out-degrees, see :func:`out_degrees`)."""
    capacity = _check_capacity(capacity)
    cand = check_ids(candidates, 0, np.iinfo(np.int64).max, "candidates")
    deg = np.asarray(degrees)
    if deg.shape != cand.shape:
        raise SamplerError(
            f"degrees: expected one degree per candidate, shape {cand.shape}, got {deg.shape}")
    return _top(cand, deg, capacity)


def out_degrees(indices: np.ndarray, num_nodes: int) -> np.ndarray:
    """How many in-neighbour lists each node appears in: how often a sampler can reach it."""
    return np.bincount(np.asarray(indices, dtype=np.int64), minlength=num_nodes)


class AccessCounts(NamedTuple):
    """Feature reads per node id: ``ids`` (sorted) and how often each was read."""

    ids: np.ndarray
    counts: np.ndarray


def _as_counts(access: np.ndarray | tuple[np.ndarray, np.ndarray]) -> AccessCounts:
    if isinstance(access, tuple):
        ids, counts = (np.asarray(a) for a in access)
        if ids.shape != counts.shape or ids.ndim != 1:
            raise SamplerError(f"(ids, counts): shapes {ids.shape} and {counts.shape} must match")
        return AccessCounts(ids.astype(np.int64), counts.astype(np.int64))
    ids, counts = np.unique(np.asarray(access, dtype=np.int64), return_counts=True)
    return AccessCounts(ids, counts.astype(np.int64))


def presample_ids(access_counts: np.ndarray | tuple[np.ndarray, np.ndarray],
                  capacity: int) -> np.ndarray:
    """GNNLab PreSC: the ``capacity`` most read ids (never-read ids are not cached).

    ``access_counts`` is an :class:`AccessCounts` / ``(ids, counts)`` pair, or an array of
    accessed ids with repeats.
    """
    capacity = _check_capacity(capacity)
    ids, counts = _as_counts(access_counts)
    keep = counts > 0
    return _top(ids[keep], counts[keep], capacity)


def count_accesses(sampler: NeighborSampler, seeds: np.ndarray, batch_size: int, epochs: int,
                   key: int, *, only: Callable[[np.ndarray], np.ndarray] | None = None,
                   exclude: tuple[int, int] | None = None,
                   num_threads: int = 1) -> AccessCounts:
    """Run ``epochs`` sampling epochs and count each input node's feature reads.

    Epoch ``e`` uses key ``mix(key, e)``; pass keys the training run does not use, so the
    counts predict rather than replay. ``only`` keeps the ids where it returns True;
    ``exclude=(lo, hi)`` drops ids in ``[lo, hi)`` (a worker's owned range).
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise SamplerError(f"epochs={epochs!r}: must be an int >= 1")
    counts = np.zeros(sampler.num_nodes, dtype=np.int64)
    for e in range(epochs):
        for b in sampler.iter_batches(seeds, batch_size, K.mix_key(key, e),
                                      num_threads=num_threads):
            ids = b.input_nodes
            if exclude is not None:
                ids = ids[(ids < exclude[0]) | (ids >= exclude[1])]
            if only is not None:
                ids = ids[np.asarray(only(ids), dtype=bool)]
            K.count_ids(ids, counts)
    nz = np.flatnonzero(counts)
    return AccessCounts(nz.astype(np.int64), counts[nz])


def oracle_hit_rate(accesses: np.ndarray | tuple[np.ndarray, np.ndarray], capacity: int) -> float:
    """Hit rate of the best static cache of ``capacity`` rows for these accesses: the one
    holding exactly the most accessed rows (``accesses``: ids with repeats, or counts)."""
    capacity = _check_capacity(capacity)
    _, counts = _as_counts(accesses)
    total = int(counts.sum())
    if total == 0:
        return 0.0
    top = np.sort(counts)[::-1][:capacity]
    return float(top.sum()) / total


def resolve_capacity(size: float, num_remote_rows: int, row_bytes: int, *,
                     unit: Literal["auto", "rows", "bytes"] = "auto") -> int:
    """Rows a cache may hold. ``unit='auto'``: ``size <= 1`` is a fraction of the remote
    rows, ``> 1`` a row count; ``'rows'`` / ``'bytes'`` force the reading. A capacity above
    ``num_remote_rows`` is clamped to it with one warning."""
    if not np.isfinite(size) or size < 0:
        raise SamplerError(f"cache size={size}: must be >= 0 (fraction <= 1, rows > 1, or bytes)")
    if num_remote_rows < 0:
        raise SamplerError(f"num_remote_rows={num_remote_rows}: must be >= 0")
    if row_bytes <= 0:
        raise SamplerError(f"row_bytes={row_bytes}: must be >= 1")
    if unit == "bytes":
        rows = int(size // row_bytes)
    elif unit == "rows" or (unit == "auto" and size > 1):
        if size != int(size):
            raise SamplerError(f"cache size={size}: a row count must be a whole number")
        rows = int(size)
    elif unit == "auto":
        rows = int(size * num_remote_rows)
    else:
        raise SamplerError(f"unit={unit!r}: expected 'auto', 'rows' or 'bytes'")
    if rows > num_remote_rows:
        warnings.warn(f"cache size={size} ({unit}) is {rows} rows but only {num_remote_rows} rows "
                      f"are remote; clamping the capacity to {num_remote_rows}", stacklevel=2)
        rows = num_remote_rows
    return rows


def build_cache(cfg: CacheConfig, *, dim: int, num_remote_rows: int,
                read_rows: Callable[[np.ndarray], np.ndarray] | None = None,
                candidates: np.ndarray | None = None, degrees: np.ndarray | None = None,
                access_counts: AccessCounts | None = None) -> FeatureCache | None:
    """The cache a ``sampler.cache`` config section describes (``None`` for policy 'none').

    ``degree`` needs ``candidates`` (the remote ids) with their ``degrees``; ``presample``
    needs ``access_counts`` from :func:`count_accesses`; both static policies need
    ``read_rows(ids) -> float32 [len(ids), dim]`` to fill the cache once.
    """
    if cfg.policy == "none":
        return None
    cap = resolve_capacity(cfg.size, num_remote_rows, 4 * dim, unit=cfg.unit)
    if cfg.policy == "lru":
        return LRUCache(cap, dim)
    if cfg.policy == "fifo":
        return FIFOCache(cap, dim)
    if read_rows is None:
        raise SamplerError(f"cache.policy={cfg.policy!r} fills the cache up front: pass read_rows=")
    if cfg.policy == "degree":
        if candidates is None or degrees is None:
            raise SamplerError("cache.policy='degree' needs candidates= (remote ids) and degrees=")
        ids = degree_cache_ids(candidates, degrees, cap)
    else:
        if access_counts is None:
            raise SamplerError("cache.policy='presample' needs access_counts= from count_accesses")
        ids = presample_ids(access_counts, cap)
    return StaticCache(ids, read_rows(ids))


class CachedSource(GraphSource):
    """A :class:`GraphSource` whose feature reads of remote ids go through a cache.

    ``is_remote(ids)`` marks the ids owned elsewhere. Reads: local ids -> ``inner``; remote
    ids -> ``cache.lookup``; misses -> ``inner.read_features`` (the slow path), then
    ``cache.insert``. Sampling is delegated to ``inner`` unchanged.
    """

    def __init__(self, inner: GraphSource, cache: FeatureCache, *,
                 is_remote: Callable[[np.ndarray], np.ndarray]) -> None:
        self.inner, self.cache, self.is_remote = inner, cache, is_remote
        self.num_nodes = inner.num_nodes
        self.weighted = inner.weighted

    def sample_neighbors(self, seeds: np.ndarray, fanout: Fanout, *, replace: bool,
                         key: int) -> Neighbors:
        return self.inner.sample_neighbors(seeds, fanout, replace=replace, key=key)

    def read_features(self, ids: np.ndarray) -> np.ndarray:
        ids = check_ids(ids, 0, self.num_nodes, "ids")
        remote = np.asarray(self.is_remote(ids), dtype=bool)
        out = np.empty((ids.size, self.cache.dim), dtype=np.float32)
        if (~remote).any():
            out[~remote] = self.inner.read_features(ids[~remote])
        rpos = np.flatnonzero(remote)
        if rpos.size:
            hit, rows = self.cache.lookup(ids[rpos])
            out[rpos[hit]] = rows
            miss = rpos[~hit]
            if miss.size:
                fetched = self.inner.read_features(ids[miss])
                out[miss] = fetched
                self.cache.insert(ids[miss], fetched)
        return out
