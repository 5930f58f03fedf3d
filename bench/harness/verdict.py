"""Correctness checks of a benchmark run, and the exit status they give.

A benchmark measures two kinds of thing. Targets on time, memory or bytes saved are
printed with "met" / "missed" and never change the exit status: they depend on the
machine and on what else runs on it. Correctness checks are properties the software
promises whatever the machine (a cache does not change the parameters, every sampled
edge exists, METIS cuts fewer edges than random, training lowers the loss); a module
collects them as :class:`Check` values and ends with :func:`conclude`, which prints
them and returns 1 when any failed, so ``python -m bench.smoke`` catches the failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.paths import write_json
from partition.graph import Graph


@dataclass(frozen=True)
class Check:
    """One correctness check: ``name`` says what must hold, ``detail`` what was measured."""

    name: str
    ok: bool
    detail: str


def check(name: str, ok: bool, detail: str = "") -> Check:
    return Check(name=name, ok=bool(ok), detail=detail)


def failed(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]


def conclude(module: str, checks: Sequence[Check], out: dict[str, Any] | None = None) -> int:
    """Print the checks (every failure in full, the passes counted), store them in ``out``
    under ``"checks"`` when given, and return the exit status: 0 when all held, else 1."""
    bad = failed(checks)
    if out is not None:
        out["checks"] = [asdict(c) for c in checks]
    for c in bad:
        print(f"FAILED check: {c.name}" + (f" ({c.detail})" if c.detail else ""))
    if not checks:
        print(f"bench.{module}: no correctness check ran")
    elif bad:
        print(f"bench.{module}: {len(bad)} of {len(checks)} correctness checks FAILED")
    else:
        print(f"bench.{module}: all {len(checks)} correctness checks held")
    return 1 if bad else 0


def finish(module: str, checks: Sequence[Check], out: dict[str, Any], path: Path) -> int:
    """:func:`conclude`, then write ``out`` (with its checks) as JSON to ``path``."""
    status = conclude(module, checks, out)
    write_json(out, path)
    return status


def majority_share(graph: Graph) -> float:
    """Test accuracy of always predicting the most common test label: the floor a
    training benchmark's accuracy must beat."""
    y = graph.y[graph.test_idx]
    return float(np.bincount(y).max() / y.size) if y.size else 0.0
