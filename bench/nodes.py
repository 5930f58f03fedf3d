"""Simulated Ray nodes on one machine, and a node that leaves mid-run: the node-loss drills.

``simulated_nodes(n)`` starts a Ray cluster of ``n`` one-CPU nodes (``ray.cluster_utils``:
one raylet each, custom resources ``node_a``, ``node_b``, ...) behind a head without CPUs,
connects this process to it and always shuts it down. With ``temp_root`` every node gets a
temp directory of its own under it (its processes' ``TMPDIR``), as separate machines have:
a worker's node-local scratch (the default ``cluster.scratch_dir``) is then its node's. ``remove_when`` takes a node away
for good once a run has written a given checkpoint, optionally adding a new node after it.

Both ``bench.faults`` (scenario ``node loss``) and ``tests/faults/test_elastic.py`` run
their drills through these, each in a subprocess of its own, so the cluster never meets a
local Ray the parent process already runs.

    python -m bench.nodes OUT   # the bench's drill: reads OUT/drill-config.json, writes OUT/drill.json
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

STORE_BYTES = int(1e8)  # each simulated node's object store


@contextmanager
def simulated_nodes(count: int, temp_root: Path | None = None) -> Iterator[tuple[Any, list[Any]]]:
    """Yield (cluster, nodes) with this process connected; shut everything down afterwards.
    ``temp_root``: each node's own temp directory goes under it (:func:`add_node`)."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = tempfile.mkdtemp(prefix="el-", dir="/tmp")  # short: Ray's socket paths are limited
    # Cluster records the head's address in $RAY_TMPDIR/ray/ray_current_cluster, under Ray's
    # default temp dir unless told otherwise, which need not exist: keep it in our temp dir
    (Path(tmp) / "ray").mkdir()
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp
    cluster: Any = None
    try:
        # shutdown_at_exit=False: a node can then join from a remover thread (Ray's exit hooks
        # install a signal handler, which only the main thread may); the finally below shuts
        # the cluster down, and a SIGTERM handler in the caller turns a kill into that finally
        cluster = Cluster(initialize_head=False, shutdown_at_exit=False)
        # the head is the first node added: a failure past its start still shuts it down below
        cluster.add_node(num_cpus=0, include_dashboard=False, temp_dir=tmp, object_store_memory=STORE_BYTES)
        nodes = [add_node(cluster, f"node_{chr(ord('a') + i)}", temp_root) for i in range(count)]
        ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
        yield cluster, nodes
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before
        shutil.rmtree(tmp, ignore_errors=True)


def add_node(cluster: Any, resource: str | None = None, temp_root: Path | None = None) -> Any:
    """One more one-CPU node, with custom resource ``resource`` when given. With
    ``temp_root`` the node's processes get ``TMPDIR`` = a new directory under it
    (recorded in :data:`NODE_TEMP`)."""
    temp = None
    if temp_root is not None:
        temp_root.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f"{resource or 'node'}-", dir=temp_root))
    node = cluster.add_node(num_cpus=1, resources={resource: 1} if resource else {},
                            object_store_memory=STORE_BYTES, env_vars={"TMPDIR": str(temp)} if temp else None)
    if temp is not None:
        NODE_TEMP[node.node_id] = temp
    return node


NODE_TEMP: dict[str, Path] = {}
"""The temp directory :func:`add_node` gave each node, by node id."""


def remove_when(cluster: Any, node: Any, runs: Path, removed: dict[str, Any], epoch: int = 2,
                replace: bool = False, temp_root: Path | None = None) -> threading.Thread:
    """Remove ``node`` from ``cluster`` as soon as a run under ``runs`` has written its
    checkpoint after ``epoch`` epochs (a stalled worker holds the run in the next epoch until
    then); with ``replace``, a new node joins two seconds later (its own temp directory
    under ``temp_root`` when given). ``removed`` gets the time of the removal (``at``,
    monotonic) and the new node (``new``)."""

    def remove() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if list(runs.glob(f"*/checkpoints/ckpt-{epoch:05d}.pt")):
                time.sleep(0.5)  # the checkpoint's writer finishes; workers are in the next epoch
                removed["at"] = time.monotonic()
                cluster.remove_node(node)
                if replace:
                    time.sleep(2)
                    removed["new"] = add_node(cluster, temp_root=temp_root)
                return
            time.sleep(0.05)

    t = threading.Thread(target=remove, daemon=True)
    t.start()
    return t


def drill(out_dir: Path) -> dict[str, Any]:
    """``bench.faults``' node loss: the run of ``drill-config.json`` on one simulated node per
    worker, the node named by ``remove`` taken away after checkpoint ``after_epoch``."""
    from gnntrain.config import load_config
    from gnntrain.runtime.coordinator import run_training

    spec = json.loads((out_dir / "drill-config.json").read_text())
    cfg = load_config(raw=spec["raw"], overrides=spec["overrides"])
    got: dict[str, Any] = {}
    with simulated_nodes(cfg.cluster.workers) as (cluster, nodes):
        node = nodes[spec["remove"]]
        got.update(nodes=[n.node_id for n in nodes], removed_node=node.node_id)
        removed: dict[str, Any] = {}
        remover = remove_when(cluster, node, Path(cfg.train.run_root), removed, epoch=spec["after_epoch"])
        try:
            got["summary"] = run_training(cfg, progress=False)
        except Exception as e:  # noqa: BLE001 - a drill that fails is a result
            got.update(error=f"{type(e).__name__}: {str(e)[:300]}", traceback=traceback.format_exc())
        remover.join(timeout=60)
        got["removed"] = "at" in removed
        import ray

        got["alive_nodes"] = sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU"))
    return got


def spawn_drill(module: str, out_dir: Path, limit_s: float, cwd: Path) -> tuple[dict[str, Any] | None, str]:
    """Run ``python -m module out_dir`` (a :func:`drill_main`) in a session of its own, its
    output to ``out_dir/drill.log``; stop it (SIGTERM, which shuts its cluster down, then
    SIGKILL to the group) past ``limit_s``. Returns its ``drill.json`` record, or None with
    a line saying why, and the log."""
    env = {**os.environ, "PYTHONPATH": str(cwd), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    log = out_dir / "drill.log"
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", module, str(out_dir)], cwd=cwd, env=env,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            return None, f"the drill hung past {limit_s:.0f}s:\n{log.read_text()[-3000:]}"
        finally:  # past the limit, or the caller interrupted (a test's timeout): stop it all
            if proc.poll() is None:
                _stop_drill(proc)
    record = out_dir / "drill.json"
    if proc.returncode != 0 or not record.exists():
        return None, f"the drill failed (exit status {proc.returncode}):\n{log.read_text()[-5000:]}"
    return dict(json.loads(record.read_text())), ""


def _stop_drill(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the drill shuts its cluster down), then SIGKILL to its whole session."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the raylets it started are in its session
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def drill_main(run: Callable[[Path], dict[str, Any]]) -> None:
    """A drill subprocess's entry point: ``run(OUT)`` (OUT = argv[1]), its record to OUT/drill.json."""
    out_dir = Path(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timed-out drill still shuts its cluster down
    result = run(out_dir)
    (out_dir / "drill.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    drill_main(drill)
