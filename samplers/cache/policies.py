"""Which rows a static cache holds: by out-degree or by pre-sampled access counts, and
the oracle hit rate the benchmark compares policies with."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from samplers import _kernels as K
from samplers.base import SamplerError
from samplers.cache.structures import check_capacity
from samplers.local import check_ids
from samplers.neighbor import NeighborSampler


def _top(ids: np.ndarray, score: np.ndarray, capacity: int) -> np.ndarray:
    """``capacity`` ids of highest score; ties go to the smaller id (deterministic)."""
    order = np.lexsort((ids, -score))
    return ids[order[:capacity]]


def degree_cache_ids(candidates: np.ndarray, degrees: np.ndarray, capacity: int) -> np.ndarray:
    """PaGraph: the ``capacity`` candidates of highest degree (``degrees[i]`` belongs to
    ``candidates[i]``; use out-degrees, see :func:`out_degrees`)."""
    capacity = check_capacity(capacity)
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
    capacity = check_capacity(capacity)
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
    capacity = check_capacity(capacity)
    _, counts = _as_counts(accesses)
    total = int(counts.sum())
    if total == 0:
        return 0.0
    top = np.sort(counts)[::-1][:capacity]
    return float(top.sum()) / total
