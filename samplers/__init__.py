"""Fast neighbour sampling, mini-batch blocks and remote-feature caches.

Data path: a :class:`GraphSource` (``CSRSource`` over a whole graph or one partition)
-> :class:`NeighborSampler` -> :class:`SampledBatch` (structure) -> :func:`prepare`
-> :class:`PreparedBatch` (features + labels). Imports numpy, numba and torch only.
"""

from samplers.base import GraphSource, Neighbors, SamplerError
from samplers.batch import Block, PreparedBatch, PygAdj, SampledBatch, prepare, to_pyg
from samplers.cache import (
    AccessCounts,
    CachedSource,
    CacheStats,
    FeatureCache,
    FIFOCache,
    LRUCache,
    StaticCache,
    build_cache,
    count_accesses,
    degree_cache_ids,
    oracle_hit_rate,
    out_degrees,
    presample_ids,
    resolve_capacity,
)
from samplers.config import CacheConfig, SamplerConfig
from samplers.local import CSRSource
from samplers.neighbor import NeighborSampler

__all__ = [
    "AccessCounts", "Block", "CSRSource", "CacheConfig", "CacheStats", "CachedSource",
    "FIFOCache", "FeatureCache", "GraphSource", "LRUCache", "NeighborSampler", "Neighbors",
    "PreparedBatch", "PygAdj", "SampledBatch", "SamplerConfig", "SamplerError", "StaticCache",
    "build_cache", "count_accesses", "degree_cache_ids", "oracle_hit_rate", "out_degrees", "presample_ids",
    "prepare", "resolve_capacity", "to_pyg",
]
