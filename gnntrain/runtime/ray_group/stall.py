"""Telling a stalled worker from a busy one, and naming the one to blame.

The coordinator polls each busy worker's progress (phase, epoch, step or layer, and the
CPU time of its training thread); :class:`StallWatch` says when none of them has moved for
the limit, :func:`furthest_behind` which worker to blame, :func:`position` where it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StallWatch", "furthest_behind", "position", "thread_cpu_s"]


def thread_cpu_s(ident: int | None) -> float | None:
    """CPU seconds used so far by the thread ``ident`` (``threading.get_ident()``)."""
    if ident is None or not hasattr(time, "pthread_getcpuclockid"):
        return None
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ValueError):
        return None


@dataclass
class StallWatch:
    """When each worker last made progress, from successive :meth:`WorkerActor.progress`
    answers. A worker moved when its phase/epoch/step/layer changed or its training thread
    used CPU time (at least ``min_cpu_share`` of the wall time since it last moved, so a
    thread blocked in a wait, whose clock creeps by microseconds, does not count)."""

    limit_s: float
    min_cpu_share: float = 0.01
    _where: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    _cpu: dict[int, float] = field(default_factory=dict)
    _moved_at: dict[int, float] = field(default_factory=dict)

    def start(self, ranks: list[int], now: float) -> None:
        for r in ranks:
            self._moved_at[r] = now

    def update(self, rank: int, prog: dict[str, Any], now: float) -> None:
        if str(prog.get("phase", "")).startswith(("dead", "not answering")):
            return  # silence is never progress
        where = tuple(sorted((k, str(v)) for k, v in prog.items() if k not in ("cpu_s", "rank")))
        cpu = prog.get("cpu_s")
        if rank not in self._where:  # the first answer is the baseline
            self._where[rank] = where
            if cpu is not None:
                self._cpu[rank] = cpu
            return
        since = now - self._moved_at.get(rank, now)
        moved = where != self._where.get(rank)
        if cpu is not None and rank in self._cpu:
            used = cpu - self._cpu[rank]
            moved = moved or (used > 0.02 and used >= self.min_cpu_share * since)
        if moved:
            self._where[rank] = where
            if cpu is not None:
                self._cpu[rank] = cpu
        if moved:
            self._moved_at[rank] = now

    def still_for(self, rank: int, now: float) -> float:
        """Seconds since ``rank`` last moved."""
        return now - self._moved_at.get(rank, now)

    def stalled(self, ranks: list[int], now: float) -> bool:
        """None of ``ranks`` has moved for the limit."""
        return bool(ranks) and all(self.still_for(r, now) >= self.limit_s for r in ranks)


def position(p: dict[str, Any]) -> str:
    """``phase`` and, where known, ``epoch``, ``step`` and ``layer`` of a progress answer."""
    return " ".join([str(p.get("phase"))] + [f"{k} {p[k]}" for k in ("epoch", "step", "layer") if k in p])


def furthest_behind(prog: list[dict[str, Any]], default: int) -> int:
    """The worker to blame among ``prog``: a dead or silent one, else the one furthest
    behind (lowest epoch, step), else ``default``."""
    dead = [p for p in prog if str(p.get("phase", "")).startswith(("dead", "not answering"))]
    if dead:
        return int(dead[0]["rank"])
    placed = [p for p in prog if "step" in p and "epoch" in p]
    if len(placed) > 1:
        keys = [(p["epoch"], p["step"]) for p in placed]
        if max(keys) > min(keys):
            return int(placed[keys.index(min(keys))]["rank"])
    return default
