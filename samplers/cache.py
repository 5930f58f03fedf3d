"""Caches of feature rows owned by other workers, behind one read interface.

The runtime's feature reader (``gnntrain.runtime.dist_source.DistFeatureReader``) looks a
batch's remote rows up in the cache before asking their owners, and inserts what it fetched.

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

On a typed graph :class:`TypedFeatureCache` holds one cache of the policy per node type,
each at its type's own width (a 50-column term row takes 200 bytes, not the 4,231-column
padded row's 16,924), and :func:`build_cache` gives every type with features the same
share of its remote rows: a fraction caches that fraction of each type's, a row count or a
byte budget (counted at the types' widths) is shared out in proportion to each type's
remote rows; featureless types get no cache. A mapping ``{node type: size}`` sizes each
type on its own instead (the types it does not name are not cached). Static policies
choose each type's rows among that type's.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Literal, NamedTuple

import numpy as np

from partition.book import value_groups
from samplers import _cache_kernels as CK
from samplers import _kernels as K
from samplers.base import SamplerError
from samplers.config import CacheConfig, resolve_type_sizes
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

    @property
    def nbytes(self) -> int:
        """Bytes of the row table (``capacity x dim`` float32)."""
        return int(self._rows.nbytes)

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


class TypedFeatureCache(FeatureCache):
    """One cache per node type, each holding its type's rows at the type's own width.

    ``node_types[id]`` is a node's type; ``caches[t]`` caches type ``t`` (``None``: type
    ``t`` is not cached, every lookup misses). Lookups return padded rows ``[n, dim]``
    (zeros beyond a type's width), so readers see the rows a padded cache would give;
    inserted rows are cut to each type's width (the columns beyond it hold zeros)."""

    def __init__(self, caches: list[_SlotCache | None], node_types: np.ndarray, dim: int) -> None:
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
        ids = check_ids(ids, 0, int(self.node_types.shape[0]), "ids")
        hit = np.zeros(ids.size, dtype=bool)
        rows = np.zeros((ids.size, self.dim), dtype=np.float32)
        for t, pos in value_groups(self.node_types[ids]):
            c = self.caches[t]
            if c is None:
                self._misses_uncached += int(pos.size)
                continue
            h, r = c.lookup(ids[pos])
            hit[pos[h]] = True
            rows[pos[h], :c.dim] = r
        self._sum_stats()
        return hit, rows[hit]

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


def resolve_capacity(size: float, num_remote_rows: int, row_bytes: int | Fraction, *,
                     unit: Literal["auto", "rows", "bytes"] = "auto") -> int:
    """Rows a cache may hold. ``unit='auto'``: ``size <= 1`` is a fraction of the remote
    rows, ``> 1`` a row count; ``'rows'`` / ``'bytes'`` force the reading. A capacity above
    ``num_remote_rows`` is clamped to it with one warning."""
    if not np.isfinite(size) or size < 0:
        raise SamplerError(f"cache size={size}: must be >= 0 (fraction <= 1, rows > 1, or bytes)")
    if num_remote_rows < 0:
        raise SamplerError(f"num_remote_rows={num_remote_rows}: must be >= 0")
    if row_bytes <= 0:
        raise SamplerError(f"row_bytes={row_bytes}: must be > 0")
    if unit == "bytes":
        rows = int(Fraction(size) // Fraction(row_bytes))  # exact (a typed cache's mean row is a ratio)
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
                access_counts: AccessCounts | None = None, node_types: np.ndarray | None = None,
                type_widths: tuple[int, ...] = (), type_names: tuple[str, ...] = ()) -> FeatureCache | None:
    """The cache a ``sampler.cache`` config section describes (``None`` for policy 'none').

    ``degree`` needs ``candidates`` (the remote ids) with their ``degrees``; ``presample``
    needs ``access_counts`` from :func:`count_accesses`; both static policies need
    ``read_rows(ids) -> float32 [len(ids), dim]`` to fill the cache once.

    On a typed graph pass ``node_types`` (every node's type), ``type_widths`` (each type's
    own width), ``type_names`` (for a size per type) and ``candidates`` (the remote ids, to
    count each type's remote rows): the result is a :class:`TypedFeatureCache` (see the
    module docstring for the capacities).
    """
    if cfg.policy == "none":
        return None
    if cfg.policy in ("degree", "presample") and read_rows is None:
        raise SamplerError(f"cache.policy={cfg.policy!r} fills the cache up front: pass read_rows=")
    per_type = resolve_type_sizes(cfg.size, type_names if node_types is not None else ())
    if node_types is None:
        assert not isinstance(cfg.size, dict)  # refused above for an untyped graph
        cap = resolve_capacity(cfg.size, num_remote_rows, 4 * dim, unit=cfg.unit)
        ids = _static_ids(cfg, cap, candidates, degrees, access_counts)
        if ids is None:
            return _dynamic_cache(cfg, cap, dim)
        assert read_rows is not None
        return StaticCache(ids, read_rows(ids))
    if candidates is None:
        raise SamplerError("a typed cache needs candidates= (the remote ids) to count each type's rows")
    cand_types = np.asarray(node_types[candidates], dtype=np.int64)
    remote = np.bincount(cand_types, minlength=len(type_widths))
    if remote.shape[0] != len(type_widths):
        raise SamplerError(f"type_widths={list(type_widths)}: expected one width per node type "
                           f"({remote.shape[0]})")
    widths = np.asarray(type_widths, dtype=np.int64)
    remote[widths == 0] = 0  # a featureless type has nothing to cache
    if per_type is not None:  # each type's own size against its own remote rows
        caps = [resolve_capacity(sz, int(n), 4 * int(w), unit=cfg.unit) if n else 0
                for sz, n, w in zip(per_type, remote, widths, strict=True)]
    else:
        assert not isinstance(cfg.size, dict)
        total_rows, total_bytes = int(remote.sum()), int((4 * widths * remote).sum())
        rows_all = resolve_capacity(cfg.size, total_rows, Fraction(total_bytes, total_rows),
                                    unit=cfg.unit) if total_rows else 0
        caps = [int(rows_all * int(n) // total_rows) if total_rows else 0 for n in remote]
    if cfg.policy in ("lru", "fifo"):  # a featureless type has cap 0: no cache
        return TypedFeatureCache([_dynamic_cache(cfg, cap, int(w)) if cap else None
                                  for cap, w in zip(caps, widths, strict=True)], node_types, dim)
    chosen: list[np.ndarray] = []
    for t, cap in enumerate(caps):
        sel = cand_types == t
        counts = None
        if access_counts is not None:
            keep = np.asarray(node_types[access_counts.ids], dtype=np.int64) == t
            counts = AccessCounts(access_counts.ids[keep], access_counts.counts[keep])
        ids = _static_ids(cfg, cap, candidates[sel], None if degrees is None else np.asarray(degrees)[sel],
                          counts)
        assert ids is not None  # a static policy
        chosen.append(ids)
    sizes = [ids.size for ids in chosen]
    assert read_rows is not None
    rows = read_rows(np.concatenate(chosen)) if sum(sizes) else np.empty((0, dim), np.float32)  # one fetch
    blocks = np.split(rows, np.cumsum(sizes)[:-1])
    return TypedFeatureCache([StaticCache(ids, b[:, :int(w)]) if ids.size else None
                              for ids, b, w in zip(chosen, blocks, widths, strict=True)], node_types, dim)


def _static_ids(cfg: CacheConfig, cap: int, candidates: np.ndarray | None,
                degrees: np.ndarray | None, access_counts: AccessCounts | None) -> np.ndarray | None:
    """The rows a static policy caches (``None`` for a dynamic policy)."""
    if cfg.policy == "degree":
        if candidates is None or degrees is None:
            raise SamplerError("cache.policy='degree' needs candidates= (remote ids) and degrees=")
        return degree_cache_ids(candidates, degrees, cap)
    if cfg.policy == "presample":
        if access_counts is None:
            raise SamplerError("cache.policy='presample' needs access_counts= from count_accesses")
        return presample_ids(access_counts, cap)
    return None


def _dynamic_cache(cfg: CacheConfig, cap: int, dim: int) -> _SlotCache:
    return LRUCache(cap, dim) if cfg.policy == "lru" else FIFOCache(cap, dim)
