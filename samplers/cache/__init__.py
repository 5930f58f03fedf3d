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

The package by job: :mod:`~samplers.cache.structures` (the caches),
:mod:`~samplers.cache.policies` (which rows a static cache holds, the oracle) and
:mod:`~samplers.cache.factory` (a cache from the config).
"""

from samplers.cache.factory import build_cache, resolve_capacity
from samplers.cache.policies import (
    AccessCounts,
    count_accesses,
    degree_cache_ids,
    oracle_hit_rate,
    out_degrees,
    presample_ids,
)
from samplers.cache.structures import (
    CacheStats,
    FeatureCache,
    FIFOCache,
    LRUCache,
    StaticCache,
    TypedFeatureCache,
)

__all__ = ["AccessCounts", "CacheStats", "FIFOCache", "FeatureCache", "LRUCache", "StaticCache",
           "TypedFeatureCache", "build_cache", "count_accesses", "degree_cache_ids", "oracle_hit_rate",
           "out_degrees", "presample_ids", "resolve_capacity"]
