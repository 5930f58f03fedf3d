"""A seeded uniform draw per element from a hash of integers: what a link task's training
negatives and sampled evaluation's kept nodes are drawn from, so a draw depends on the
integers alone (seed, epoch, the element's graph ids), never on the worker, the step or
the partitioning that asks for it."""

from __future__ import annotations

import numpy as np

__all__ = ["hash_uniform"]


def hash_uniform(*parts: np.ndarray | int) -> np.ndarray:
    """A float64 in [0, 1) per element: splitmix64 of the broadcast integer ``parts``."""
    arrays = np.broadcast_arrays(*[np.asarray(p, dtype=np.int64) for p in parts])
    z = np.zeros(arrays[0].shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for a in arrays:
            z ^= a.astype(np.uint64)
            z += np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
