"""Starting runs and reading them back: a command run with a time limit in its own process
group (:func:`run_limited`), a training run's per-epoch metrics (:func:`read_metrics`), its
steady-state epochs (:func:`timed`) and their mean times (:func:`steady_means`), and a console that keeps ``run_training``'s summary
table off the terminal (:func:`quiet`)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from bench.harness.memory import PeakMeter, tree
from bench.harness.paths import REPO
from bench.harness.procs import kill, wait_gone


def quiet() -> Console:
    """A console that swallows run_training's summary table."""
    return Console(file=io.StringIO(), width=120)


def read_metrics(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-epoch records (``metrics.jsonl``) of the run ``run_training`` summarised."""
    p = Path(summary["run_dir"]) / "metrics.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]


def timed(epochs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steady-state epochs: every epoch after the first (all when there is one)."""
    return epochs[1:] if len(epochs) > 1 else epochs


def steady_means(epochs: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """The mean epoch time and the mean of each part of the time split (``time``) over the
    steady-state epochs (:func:`timed`)."""
    tm = timed(epochs)
    return (sum(e["epoch_s"] for e in tm) / len(tm),
            {k: sum(e["time"][k] for e in tm) / len(tm) for k in tm[0]["time"]})


def drop_run(summary: dict[str, Any], keep: bool) -> None:
    """Remove the run's directory unless ``keep``."""
    if not keep:
        shutil.rmtree(summary["run_dir"], ignore_errors=True)


@dataclass(frozen=True)
class Finished:
    """How one command run by :func:`run_limited` ended."""

    rc: int | None  # exit status; None when it was killed at its time limit
    seconds: float
    peak_rss: int  # bytes: the largest summed RSS of its process tree seen (0 when not sampled)
    left: int  # Ray worker processes of its tree still alive after the run (and the clean-up)
    workers: int = 0  # Ray worker processes seen in its tree


def run_limited(cmd: list[str], limit_s: float, *, sample_s: float | None = None) -> Finished:
    """Run ``cmd`` in the repository root, in its own process group, with its output
    going straight through. Past ``limit_s`` the whole group is killed, and with it every
    process ever seen in its tree (an embedded Ray's raylet and workers may leave the
    group). With ``sample_s``, the tree (the process and its descendants) is sampled that
    often for its summed RSS and its Ray workers. Afterwards the Ray workers seen are given
    30 s to go, then killed; ``left`` counts those that were still there. (Ray starts
    each worker in a process group of its own, so killing the group alone would leave them.)"""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True)
    root = psutil.Process(proc.pid)
    seen: dict[int, psutil.Process] = {proc.pid: root}
    workers: dict[int, psutil.Process] = {}
    meter = PeakMeter(lambda: tree(root))

    def sample() -> None:
        from gnntrain.runtime.ray_group import worker_processes  # imports Ray: only when sampling

        for p in meter.sample():  # the first object of a pid: is_running() then tells a reused pid apart
            seen.setdefault(p.pid, p)
        workers.update((p.pid, p) for p in worker_processes(root))

    rc: int | None = None
    while True:
        try:
            rc = proc.wait(timeout=sample_s or 1.0)
            break
        except subprocess.TimeoutExpired:
            if time.perf_counter() - t0 > limit_s:
                sample()  # the tree as it is when killed
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                kill(seen.values())
                proc.wait()
                break
            if sample_s:
                sample()
    seconds = time.perf_counter() - t0
    left = 0
    if workers:
        left, _ = wait_gone(list(workers.values()))
        if left:
            kill(workers.values())
    return Finished(rc=rc, seconds=seconds, peak_rss=meter.total, left=left, workers=len(workers))
