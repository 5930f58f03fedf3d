"""Injected faults (the ``faults:`` config section), for drills and tests.

A :class:`FaultInjector` is a step hook: the worker calls it after every training step,
and on worker ``rank`` at (``epoch``, ``step``) it raises, kills the process, stalls, or
is slow without stalling (``slow``: sleeps after every step; ``busy``: computes for a while).
It is installed only when the ``faults:`` section asks for a fault on this worker in this
attempt, so production training never carries it.

``faults.schedule`` injects several faults, one per attempt of the run (the attempt
after i recoveries fires entry i): :meth:`FaultConfig.on_attempt` turns the entry for an
attempt into the single fault this class serves, so both forms run the same code.
"""

from __future__ import annotations

import os
import time

from gnntrain.config import FaultConfig


class FaultInjector:
    def __init__(self, cfg: FaultConfig, rank: int, attempt: int) -> None:
        self.cfg = cfg
        self.rank = rank
        self.attempt = attempt  # which restart of the run this is: a fault hits `times` attempts

    @classmethod
    def hooks(cls, cfg: FaultConfig, rank: int, attempt: int) -> list[FaultInjector]:
        """The step hooks ``cfg`` asks for on worker ``rank`` in attempt ``attempt`` of the
        run (none when that attempt injects no fault on this worker)."""
        f = cfg.on_attempt(attempt)
        return [] if f.kind == "none" or f.rank != rank else [cls(f, rank, attempt)]

    def __call__(self, epoch: int, step: int) -> None:
        f = self.cfg
        if self.attempt >= f.times:
            return
        if f.kind == "slow":
            if (epoch, step) >= (f.epoch, f.step):
                time.sleep(f.seconds)  # slow, but every step still moves the counters
            return
        if (epoch, step) != (f.epoch, f.step):
            return
        if f.kind == "busy":  # long work without a step counted: CPU time shows it is alive
            end = time.thread_time() + f.seconds
            while time.thread_time() < end:
                sum(range(10_000))
            return
        if f.kind == "raise":
            raise RuntimeError(f"injected fault: worker {self.rank} raises at epoch {epoch} step {step}")
        if f.kind == "exit":
            os._exit(17)
        time.sleep(10**6)  # stall: never answers again
