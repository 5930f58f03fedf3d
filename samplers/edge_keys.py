"""Edge membership by sorted int64 keys ``a * n + b``: the sampler's excluded target edges
and a link task's rejected negatives test pairs against a set of edges the same way."""

from __future__ import annotations

import numpy as np


def pair_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """The key ``a * n + b`` of each pair (int64; ``n`` nodes, below 3,037,000,500)."""
    return np.asarray(a, dtype=np.int64) * np.int64(n) + np.asarray(b, dtype=np.int64)


def undirected_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """The key of each pair with its ends ordered (``min * n + max``): the same for both
    directions of an undirected edge."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    return pair_keys(np.minimum(a, b), np.maximum(a, b), n)


def contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` is in ``sorted_keys`` (sorted ascending). The queries are
    searched in sorted order, so each search starts from the last one's place."""
    hit = np.zeros(keys.shape, bool)
    if sorted_keys.size and keys.size:
        order = np.argsort(keys)
        q = keys[order]
        hit[order] = sorted_keys[np.minimum(np.searchsorted(sorted_keys, q), sorted_keys.size - 1)] == q
    return hit
