"""Fast neighbour sampling, mini-batch blocks and remote-feature caches.

Data path: a :class:`GraphSource` (``CSRSource`` over a whole graph or one partition;
``TorchCSRSource``: the same draws in torch ops on a device, where the sampler then runs
every hop)
-> :class:`NeighborSampler` -> :class:`SampledBatch` (structure) -> :func:`prepare`
-> :class:`PreparedBatch` (features + labels); a link task's negatives come from a
:class:`NegativeSampler` configured by :class:`NegativeSampling`. Imports ``partition`` (the canonical
graph), numpy, numba and torch only, never ``gnntrain``. Importing the package loads
numpy and pydantic only (the configs and the interfaces); the kernels (numba), the
batch types (torch) and the caches load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samplers.base import DeviceNeighbors, GraphSource, Neighbors, SamplerError
from samplers.config import CacheConfig, SamplerConfig

if TYPE_CHECKING:
    from samplers.batch import Block, PreparedBatch, PygAdj, SampledBatch, prepare, to_pyg
    from samplers.cache import (
        AccessCounts,
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
    from samplers.device import TorchCSRSource
    from samplers.local import CSRSource
    from samplers.negative import NegativeSampler, NegativeSampling
    from samplers.neighbor import NeighborSampler

__all__ = [
    "AccessCounts", "Block", "CSRSource", "CacheConfig", "CacheStats", "DeviceNeighbors",
    "FIFOCache", "FeatureCache", "GraphSource", "LRUCache", "NegativeSampler", "NegativeSampling",
    "NeighborSampler", "Neighbors",
    "PreparedBatch", "PygAdj", "SampledBatch", "SamplerConfig", "SamplerError", "StaticCache",
    "TorchCSRSource", "build_cache", "count_accesses", "degree_cache_ids", "oracle_hit_rate", "out_degrees",
    "presample_ids", "prepare", "resolve_capacity", "to_pyg",
]

_LAZY = {
    **dict.fromkeys(("Block", "PreparedBatch", "PygAdj", "SampledBatch", "prepare", "to_pyg"),
                    "samplers.batch"),
    **dict.fromkeys(("AccessCounts", "CacheStats", "FeatureCache", "FIFOCache",
                     "LRUCache", "StaticCache", "build_cache", "count_accesses", "degree_cache_ids",
                     "oracle_hit_rate", "out_degrees", "presample_ids", "resolve_capacity"),
                    "samplers.cache"),
    "CSRSource": "samplers.local",
    "TorchCSRSource": "samplers.device",
    "NeighborSampler": "samplers.neighbor",
    "NegativeSampler": "samplers.negative",
    "NegativeSampling": "samplers.negative",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'samplers' has no attribute {name!r}")
