"""A figure measured over several seeds: its mean and spread, and the gap between two runs'
means with its standard error, for benchmarks whose single-seed differences are noise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Spread:
    """``values`` over seeds: mean, sample standard deviation (0 for one value), min, max."""

    n: int
    mean: float
    std: float
    min: float
    max: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def spread(values: Sequence[float]) -> Spread:
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("spread of no values")
    return Spread(n=int(v.size), mean=float(v.mean()), std=float(v.std(ddof=1)) if v.size > 1 else 0.0,
                  min=float(v.min()), max=float(v.max()))


def gap(ours: Spread, reference: Spread) -> tuple[float, float]:
    """``ours.mean - reference.mean`` and its standard error (independent seeds on each side)."""
    return ours.mean - reference.mean, float(np.sqrt(ours.std**2 / ours.n + reference.std**2 / reference.n))
