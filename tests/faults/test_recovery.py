"""Fault injection: each case says what is expected and asserts it.

Every recovered run must end with exactly the parameters and optimizer state of an
undisturbed run, on every worker: all random streams (shuffling, sampling, dropout) are
re-derived from (seed, epoch, step, rank) and checkpoints are taken at epoch boundaries,
so redoing the lost epochs reproduces them bit for bit. Dropout and sampling are on.

Timeouts are generous (60 s) so a slow collective on a loaded machine is not a failure;
the stall case alone relies on stall detection, with a limit of 8 s. A recovered run keeps
its last group for the next test (:func:`gnntrain.reuse_workers`); the run that fails for
good, and so kills its group, comes last.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from gnntrain.config import RunConfig
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.ray_group import WorkerFailure
from tests.conftest import make_graph
from tests.runtime.helpers import assert_same_state, final_state, tiny_cfg, worker_actors_started
from tests.runtime.test_failures import assert_nothing_left, unkept_workers

GRAPH = make_graph(400, seed=7)
BASE = ("train.epochs=4", "train.checkpoint_every=1", "train.keep_checkpoints=5",
        "sampler.batch_size=16", "model.dropout=0.3", "cluster.collective_timeout_s=60",
        "cluster.stall_timeout_s=60")


def cfg_with(tmp_path: Path, *extra: str) -> RunConfig:
    return tiny_cfg(tmp_path, *BASE, *extra, workers=2)


@pytest.fixture(scope="module")
def undisturbed(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("undisturbed")
    state = final_state(run_training(cfg_with(tmp), graph=GRAPH, progress=False))
    assert len(set(state["rank_digests"])) == 1, "the two replicas of the undisturbed run differ"
    return state


def assert_same(s: dict[str, Any], undisturbed: dict[str, Any]) -> None:
    """Model and optimizer state of both workers equal the undisturbed run's."""
    assert_same_state(final_state(s), undisturbed, world=2)


SCHEDULE = (("exit", 1, 0, 1), ("exit", 1, 1, 0), ("raise", 0, 2, 2), ("exit", 1, 3, 5))
"""(kind, rank, epoch, step) of each fault, one per attempt of the run: worker 1's process
exits at the first step, at an epoch's start and mid-epoch, and between those worker 0
raises (two kinds of fault in one schedule)."""


def test_scheduled_faults_each_recover_to_the_undisturbed_state(undisturbed: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    """The faults of :data:`SCHEDULE` in turn (``faults.schedule``): expected one recovery
    from the last checkpoint per fault, the configured epochs completed, parameters equal
    to the undisturbed run."""
    schedule = ", ".join(f"{{kind: {k}, rank: {r}, epoch: {e}, step: {st}}}" for k, r, e, st in SCHEDULE)
    started = worker_actors_started()
    s = run_training(cfg_with(tmp_path, f"train.max_failures={len(SCHEDULE)}", f"faults.schedule=[{schedule}]"),
                     graph=GRAPH, progress=False)
    assert s["epochs"] == 4
    assert [(f["worker"], f["restart_from_epoch"]) for f in s["failures"]] == [(r, e) for _, r, e, _ in SCHEDULE]
    # each recovery kept the other worker (cluster.keep_survivors) and started the failed rank
    # anew: one actor per fault, beside the first group's (a kept one, or two new ones)
    assert [f["restarted_ranks"] for f in s["failures"]] == [[r] for _, r, _, _ in SCHEDULE]
    assert worker_actors_started() - started in (len(SCHEDULE), len(SCHEDULE) + 2)
    assert all(f["recovery_s"] > 0 for f in s["failures"])
    raised = s["failures"][2]
    assert "injected fault" in raised["cause"] + raised["detail"], raised
    assert_same(s, undisturbed)
    assert [f["worker"] for f in json.loads((Path(s["run_dir"]) / "failures.json").read_text())] == [1, 1, 0, 1]
    assert_nothing_left()


def test_worker_killed_from_outside_and_run_recovers(undisturbed: dict[str, Any], own_pool: float,
                                                      tmp_path: Path) -> None:
    """SIGKILL to a worker's PID mid-run: the coordinator notices, restarts, finishes.

    The kill lands at a known point: worker 1 holds still at epoch 2 step 0 (a stall on the
    first attempt only), so once the epoch-2 checkpoint exists the run cannot move on
    before the kill, and the recovery restarts from epoch 2. The session's kept groups are
    held aside (``own_pool``): the run starts a group of its own, so the worker processes
    not kept are this run's (in a larger kept group the killer could pick a waiting rank)."""
    cfg = cfg_with(tmp_path, "train.max_failures=1", "faults.kind=stall", "faults.rank=1",
                   "faults.epoch=2", "faults.step=0", "cluster.keep_survivors=false")
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if list((tmp_path / "runs").glob("*/checkpoints/ckpt-00002.pt")):
                procs = [p for p in unkept_workers() if p.status() != psutil.STATUS_ZOMBIE]
                if procs:
                    procs[0].kill()
                    killed.append(procs[0].pid)
                    return
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    s = run_training(cfg, graph=GRAPH, progress=False)
    t.join(timeout=5)
    assert killed, "the killer thread never found a worker to kill"
    assert not psutil.pid_exists(killed[0]) or psutil.Process(killed[0]).status() == psutil.STATUS_ZOMBIE
    assert s["epochs"] == 4
    [f] = s["failures"]
    assert f["restart_from_epoch"] == 2 and "died" in (f["cause"] + f["detail"]).lower(), f
    assert f["restarted_ranks"] == [0, 1], f  # cluster.keep_survivors=false: every rank anew
    assert_same(s, undisturbed)


def test_stalled_worker_is_detected_within_the_limit_and_replaced(undisturbed: dict[str, Any],
                                                                  tmp_path: Path) -> None:
    """A worker stops making progress: stall detection (8 s) fires, the coordinator names
    the stalled worker (the one behind, not its waiting peer) and restarts the group."""
    s = run_training(cfg_with(tmp_path, "train.max_failures=1", "faults.kind=stall", "faults.rank=1",
                              "faults.epoch=2", "faults.step=1", "cluster.stall_timeout_s=8"),
                     graph=GRAPH, progress=False)
    [f] = s["failures"]
    assert f["worker"] == 1 and f["restart_from_epoch"] == 2 and f["restarted_ranks"] == [1], f
    assert f["after_s"] >= 8 and "no progress" in f["cause"] + f["detail"], f  # stall detection fired
    assert_same(s, undisturbed)


def test_clean_shutdown_leaves_no_actors_or_placement_groups(ray_local: None, tmp_path: Path) -> None:
    run_training(cfg_with(tmp_path, "train.epochs=1"), graph=GRAPH, progress=False)
    assert_nothing_left()


def test_failures_beyond_the_budget_end_the_run(tmp_path: Path, ray_local: None) -> None:
    cfg = cfg_with(tmp_path, "train.max_failures=1", "faults.kind=raise", "faults.times=2",
                   "faults.epoch=0", "faults.step=0")
    with pytest.raises(WorkerFailure, match="injected fault"):
        run_training(cfg, graph=GRAPH, progress=False)
    assert_nothing_left()
