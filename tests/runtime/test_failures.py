"""Bad input and faults of the distributed runtime: clear errors, no hangs, no orphans."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gnntrain.runtime.cluster import ClusterError
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.ray_group import WorkerFailure, worker_processes
from gnntrain.runtime.worker_pool import POOL
from tests.conftest import REPO, SUBPROCESS_CPUS, kept_groups, make_graph
from tests.runtime.helpers import tiny_cfg


def unkept_workers() -> list[psutil.Process]:
    """This process's worker processes, but for the idle ones kept for reuse (:func:`kept_groups`)."""
    kept = {p for g in kept_groups() for p in g.pids if p is not None}
    return [p for p in worker_processes() if p.pid not in kept]


def wait_no_workers(timeout_s: float = 20.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = unkept_workers()
        if not left:
            return []
        time.sleep(0.5)
    return unkept_workers()


def wait_dead(pids: set[int], timeout_s: float = 30.0) -> set[int]:
    """The pids still alive (not zombies) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}
        time.sleep(0.5)
    return alive


def live_ray_leftovers(timeout_s: float = 20.0) -> dict[str, list[str]]:
    """Worker actors not DEAD and placement groups not REMOVED in the connected Ray (but
    for the idle groups kept for reuse), after waiting up to ``timeout_s`` for them to go. Read from the GCS tables: the public state
    API (``ray.util.state``) needs the dashboard, which the test Ray does not start."""
    import ray
    from ray._private import state

    deadline = time.monotonic() + timeout_s
    kept_actors = {a._actor_id.hex() for g in kept_groups() for a in g.actors if a is not None}
    kept_pgs = {g.pg.id.hex() for g in kept_groups() if g.pg is not None}
    while True:
        actors = [f"{a['ActorClassName']} {a['State']}" for a in state.actors().values()
                  if a["ActorClassName"] == "GnnWorker" and a["State"] != "DEAD"
                  and a["ActorID"] not in kept_actors]
        pgs = [f"{pg['placement_group_id']} {pg['state']}" for pg in ray.util.placement_group_table().values()
               if pg["state"] != "REMOVED" and pg["placement_group_id"] not in kept_pgs]
        if not (actors or pgs) or time.monotonic() > deadline:
            return {"actors": actors, "placement_groups": pgs}
        time.sleep(0.5)


def assert_nothing_left() -> None:
    """No worker process, worker actor or placement group of a finished run remains, but
    for the idle groups kept for reuse (a failed run's sound workers among them:
    tests/runtime/test_worker_pool.py)."""
    assert wait_no_workers() == [], "worker processes left behind"
    assert live_ray_leftovers() == {"actors": [], "placement_groups": []}


def test_unreachable_address_fails_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before any work: no partitioning, no attempt to join (``ray_session`` never
    runs), the address and the way out named."""
    import gnntrain.runtime.cluster as cluster

    def no_ray(*_: object, **__: object) -> None:
        raise AssertionError("tried to join an address that was already known unreachable")

    monkeypatch.setattr(cluster, "ray_session", no_ray)
    with socket.socket() as held:  # bound, never listening: connections are refused, and the
        held.bind(("127.0.0.1", 0))  # port stays ours for the test (no bind-and-release race)
        port = int(held.getsockname()[1])
        cfg = tiny_cfg(tmp_path, f"cluster.address=127.0.0.1:{port}", "cluster.connect_timeout_s=3",
                       workers=2)
        with pytest.raises(ClusterError, match=f"nothing answers at 127.0.0.1:{port}.*drop --address"):
            run_training(cfg, graph=make_graph(100), progress=False)
    assert not (tmp_path / "parts").exists(), "nothing should be partitioned before Ray is reachable"


def test_worker_that_raises_ends_run_with_rank_and_traceback(ray_local: None, tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "faults.kind=raise", "faults.rank=1", "faults.epoch=0", "faults.step=1",
                   workers=2)
    with pytest.raises(WorkerFailure) as err:
        run_training(cfg, graph=make_graph(300), progress=False)
    assert err.value.rank == 1
    assert "injected fault: worker 1 raises at epoch 0 step 1" in str(err.value)
    assert "gnntrain/runtime/faults.py" in str(err.value), "the worker's traceback is part of the error"
    assert "\x1b[" not in str(err.value)
    assert_nothing_left()


def test_dead_worker_ends_run_naming_it(ray_local: None, tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "faults.kind=exit", "faults.rank=0", "faults.step=2", workers=2)
    t0 = time.monotonic()
    with pytest.raises(WorkerFailure) as err:
        run_training(cfg, graph=make_graph(300), progress=False)
    assert err.value.rank == 0, str(err.value)  # the dead one, not the peer whose collective broke
    assert time.monotonic() - t0 < 90
    assert_nothing_left()


def test_stalled_worker_hits_the_epoch_timeout(ray_local: None, tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "faults.kind=stall", "faults.rank=1", "cluster.epoch_timeout_s=8",
                   "cluster.collective_timeout_s=6", workers=2)
    with pytest.raises(WorkerFailure) as err:
        run_training(cfg, graph=make_graph(300), progress=False)
    assert "epoch 0" in str(err.value)
    assert err.value.rank == 1, str(err.value)  # the stalled worker is named, not its waiting peer
    assert_nothing_left()


def _interrupt_run(tmp_path: Path, *extra: str) -> tuple[int, str, set[int], float]:
    """Start `python -m gnntrain.run` (2 workers, 200 epochs), SIGINT it once both workers
    run; returns its exit code, output, the worker pids seen and the seconds to exit."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "gnntrain.run", "--config", str(REPO / "datasets" / "synthetic-tiny.yaml"),
           "--workers", "2", "--no-progress", "--set", "train.epochs=200",
           "--set", f"train.run_root={tmp_path / 'runs'}", "--set", f"partition.root={tmp_path / 'parts'}",
           *extra]
    log = tmp_path / "run.log"  # a file, not a pipe: a full pipe would block the run itself

    def default_sigint() -> None:
        # a shell without job control starts background jobs (`bash .ci/run &`) with SIGINT
        # ignored, and children inherit that: the run would never see the Ctrl-C
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                preexec_fn=default_sigint)
    pids: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(pids) < 2:
            assert proc.poll() is None, log.read_text()
            # embedded: the run's own workers; joined: the workers the cluster started for it
            pids |= {p.pid for p in worker_processes(psutil.Process(proc.pid))} | {
                p.pid for p in unkept_workers()}
            time.sleep(0.2)
        assert len(pids) >= 2, f"never saw the run's workers:\n{log.read_text()[-3000:]}"
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit 120 s after SIGINT; its output:\n{log.read_text()[-3000:]}")
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    return rc, log.read_text(), pids, took


EXIT_AFTER_SIGINT_S = 60.0  # ~3 s measured on 2 cores; generous for a loaded machine


def test_ctrl_c_releases_every_actor(tmp_path: Path) -> None:
    """SIGINT to a real `python -m gnntrain.run` on embedded Ray: exit 130 within the
    bound, no worker process left."""
    rc, out, pids, took = _interrupt_run(tmp_path)
    assert rc == 130, out
    assert took < EXIT_AFTER_SIGINT_S, f"took {took:.0f}s to exit after SIGINT"
    assert "interrupted" in out
    assert wait_dead(pids) == set(), "worker processes outlived the interrupted run"


def test_ctrl_c_on_a_cluster_releases_actors_and_placement_group(ray_local: None, tmp_path: Path) -> None:
    """The same run joined to a running cluster (which outlives it): after Ctrl-C the
    cluster holds none of its actors or placement groups, and its workers are gone."""
    import ray

    POOL.make_room(SUBPROCESS_CPUS, 0.0)  # the subprocess's run needs CPUs idle workers may hold
    assert live_ray_leftovers(timeout_s=0) == {"actors": [], "placement_groups": []}
    rc, out, pids, took = _interrupt_run(tmp_path, "--address", ray.get_runtime_context().gcs_address)
    assert rc == 130, out
    assert took < EXIT_AFTER_SIGINT_S, f"took {took:.0f}s to exit after SIGINT"
    assert live_ray_leftovers() == {"actors": [], "placement_groups": []}, out[-2000:]
    assert wait_dead(pids) == set(), "worker processes outlived the interrupted run"
