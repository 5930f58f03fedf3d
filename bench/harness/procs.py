"""The processes a benchmark started: waiting for them to go and killing them.

psutil only (no torch, no Ray), so a runner imports it at no cost; the lists of processes
come from the caller."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import psutil

from bench.harness.memory import rss


def wait_gone(procs: Sequence[psutil.Process], timeout_s: float = 30.0) -> tuple[int, float]:
    """(live processes of ``procs`` left, seconds waited) once none is left or
    ``timeout_s`` passed."""
    t0 = time.monotonic()
    while rss(procs) and time.monotonic() - t0 < timeout_s:
        time.sleep(0.5)
    return len(rss(procs)), time.monotonic() - t0


def kill(procs: Iterable[psutil.Process]) -> None:
    """SIGKILL every live process of ``procs``."""
    for p in procs:
        try:
            if p.is_running():  # never a later process that reuses a dead one's pid
                p.kill()
        except psutil.Error:
            continue
