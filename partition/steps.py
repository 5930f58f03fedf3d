"""Wall time and peak resident memory of each step of a partitioning run.

Peak memory is the process's peak resident set size (``VmHWM``) during the step. On
Linux the peak is reset at the start of every step (``/proc/self/clear_refs``), so each
step reports its own peak; where that is not possible the figure is the process peak
so far and ``peak_is_step_local`` says so. The reset also clears ``ru_maxrss``: read the
process's peak over its whole life with :func:`process_peak_rss`, which keeps what every
reset cleared.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


class StepStat(BaseModel):
    """One timed step: ``seconds`` of wall time, ``cpu_seconds`` of process CPU time (all
    threads; unlike wall time it does not grow when other processes share the cores),
    resident memory at its start and its peak."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    seconds: float
    cpu_seconds: float = 0.0
    start_rss_bytes: int
    peak_rss_bytes: int
    peak_is_step_local: bool = True


def _read_status(field: str) -> int:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import resource
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except (ImportError, OSError):  # pragma: no cover - non-POSIX
        return 0


def current_rss() -> int:
    """Resident set size of this process in bytes (0 where unknown)."""
    return _read_status("VmRSS")


_cleared_peak = 0  # the largest peak a reset has cleared (VmHWM and ru_maxrss both lose it)


def _reset_peak() -> bool:
    global _cleared_peak
    _cleared_peak = max(_cleared_peak, _read_status("VmHWM"))
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def process_peak_rss() -> int:
    """Peak resident set size of this process over its whole life, in bytes, across the
    resets that give each step its own peak."""
    return max(_cleared_peak, _read_status("VmHWM"))


class StepRecorder:
    """Collects :class:`StepStat` for consecutive steps.

    Steps must not nest (not even across recorders): each step resets the process's peak,
    so an enclosing step would only see the peak since the last inner step began.
    """

    def __init__(self) -> None:
        self.steps: list[StepStat] = []

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        local = _reset_peak()
        start_rss = current_rss()
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            peak = max(_read_status("VmHWM"), start_rss)
            self.steps.append(StepStat(name=name, seconds=seconds, cpu_seconds=cpu,
                                       start_rss_bytes=start_rss, peak_rss_bytes=peak,
                                       peak_is_step_local=local))

    def total_seconds(self) -> float:
        return sum(s.seconds for s in self.steps)
