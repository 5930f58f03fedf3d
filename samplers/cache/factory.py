"""A cache from the config: its capacity in rows (:func:`resolve_capacity`) and the
policy and rows it starts with (:func:`build_cache`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Literal

import numpy as np

from samplers.base import SamplerError
from samplers.cache.policies import AccessCounts, degree_cache_ids, presample_ids
from samplers.cache.structures import (
    FeatureCache,
    FIFOCache,
    LRUCache,
    SlotCache,
    StaticCache,
    TypedFeatureCache,
)
from samplers.config import CacheConfig, resolve_type_sizes


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


def _dynamic_cache(cfg: CacheConfig, cap: int, dim: int) -> SlotCache:
    return LRUCache(cap, dim) if cfg.policy == "lru" else FIFOCache(cap, dim)
