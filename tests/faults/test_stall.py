"""Stalls are detected by progress, never by how long a phase takes.

The coordinator fails a worker only when none of the workers busy with a call has moved
(step, batch or layer counted, or CPU time used by its training thread) for
``cluster.stall_timeout_s``; a slow worker whose steps keep coming, or one computing for
longer than the limit without counting a step, runs to the end.

The run whose stall ends it (and kills its group) comes last: the runs before it share one
group of workers (:func:`gnntrain.reuse_workers`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gnntrain.config import RunConfig
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.ray_group import StallWatch, WorkerFailure
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg

GRAPH = make_graph(300, seed=3)
STALL = 8.0  # 4 s named a worker starved of CPU (both cores busy with other runs) as stalled


def cfg_with(tmp_path: Path, *extra: str) -> RunConfig:
    # collectives and the epoch cap far above the stall limit: only stall detection can fire
    return tiny_cfg(tmp_path, f"cluster.stall_timeout_s={STALL}", "cluster.collective_timeout_s=120",
                    "cluster.epoch_timeout_s=600", "sampler.batch_size=16", *extra, workers=2)


def test_slow_worker_that_keeps_stepping_is_not_failed(ray_local: None, tmp_path: Path) -> None:
    """Each step of worker 0 takes 3 s from epoch 0 step 2 on: the epoch outlasts the
    stall limit, yet every step moves the counters."""
    cfg = cfg_with(tmp_path, "train.epochs=1", "faults.kind=slow", "faults.rank=0", "faults.epoch=0",
                   "faults.step=2", "faults.seconds=3")
    s = run_training(cfg, graph=GRAPH, progress=False)
    assert s["epochs"] == 1 and not s.get("failures")
    [epoch] = RunDir(Path(s["run_dir"])).metrics()
    assert epoch["epoch_s"] > STALL, epoch["epoch_s"]  # the epoch itself did outlast the limit


def test_worker_computing_longer_than_the_limit_is_not_failed(ray_local: None, tmp_path: Path) -> None:
    """Worker 1 computes for 1.5x the stall limit (CPU time) inside one step: no counter
    moves, its peer waits in the all-reduce, but the CPU time shows it is working."""
    cfg = cfg_with(tmp_path, "train.epochs=1", "faults.kind=busy", "faults.rank=1", "faults.epoch=0",
                   "faults.step=1", f"faults.seconds={1.5 * STALL}")
    s = run_training(cfg, graph=GRAPH, progress=False)
    assert s["epochs"] == 1 and not s.get("failures")


def test_stalled_worker_is_named_within_the_stall_limit(ray_local: None, tmp_path: Path) -> None:
    cfg = cfg_with(tmp_path, "faults.kind=stall", "faults.rank=1", "faults.epoch=1", "faults.step=1")
    with pytest.raises(WorkerFailure) as err:
        run_training(cfg, graph=GRAPH, progress=False)
    msg = str(err.value)
    assert err.value.rank == 1, msg  # the stalled worker, not its peer waiting in the all-reduce
    m = re.search(rf"worker 1 made no progress for (\d+)s \(limit {STALL:.0f}s, cluster.stall_timeout_s\) "
                  r"at train epoch 1 step 1", msg)
    assert m, msg
    assert int(m.group(1)) >= STALL, msg  # never before the limit; the 120 s collective limit did not fire


def test_stall_watch_counts_counters_and_cpu_time_never_silence() -> None:
    w = StallWatch(limit_s=10)
    w.start([0, 1], now=0.0)
    w.update(0, {"phase": "train", "epoch": 0, "step": 1, "cpu_s": 1.0}, now=1.0)
    w.update(1, {"phase": "train", "epoch": 0, "step": 1, "cpu_s": 1.0}, now=1.0)
    w.update(0, {"phase": "train", "epoch": 0, "step": 2, "cpu_s": 1.0}, now=9.0)  # a step
    w.update(1, {"phase": "train", "epoch": 0, "step": 1, "cpu_s": 1.0001}, now=9.0)  # a waiter
    assert w.still_for(0, 12.0) == 3.0 and w.still_for(1, 12.0) == 12.0
    assert not w.stalled([0, 1], 12.0)  # one busy worker moved: no stall
    assert w.stalled([1], 12.0)
    w.update(1, {"phase": "train", "epoch": 0, "step": 1, "cpu_s": 3.0}, now=13.0)  # computing
    assert not w.stalled([1], 14.0)
    w.update(1, {"phase": "not answering"}, now=30.0)  # silence is not progress
    assert w.stalled([1], 30.0)
