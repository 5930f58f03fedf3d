"""Kill the coordinator, resume the run from the CLI; corrupt a partition file; interrupt
the write step of partitioning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from gnntrain.checkpoint import list_checkpoints
from gnntrain.config import load_config
from gnntrain.run import main as run_cli
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.worker_pool import POOL
from partition import PartitionChecksumError, build_partition_set
from partition.build import set_path
from partition.config import PartitionConfig
from tests.conftest import REPO, SUBPROCESS_CPUS, make_graph
from tests.runtime.helpers import assert_same_state, final_state
from tests.runtime.test_failures import assert_nothing_left, unkept_workers, wait_dead


def write_cfg(tmp_path: Path, epochs: int = 4) -> Path:
    raw = {
        "dataset": {"name": "resume", "source": "synthetic",
                    "synthetic": {"nodes": 1500, "avg_degree": 8, "features": 16, "classes": 5, "seed": 3}},
        "partition": {"parts": 2, "root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32},
        "model": {"hidden": 16, "layers": 2, "dropout": 0.2},
        "train": {"epochs": epochs, "checkpoint_every": 1, "keep_checkpoints": 10,
                  "run_root": str(tmp_path / "runs"), "plots": False},
        "cluster": {"workers": 2, "call_timeout_s": 60, "collective_timeout_s": 30},
    }
    p = tmp_path / "resume.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_kill_coordinator_then_resume_gives_the_uninterrupted_result(
        tmp_path: Path, joined_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """SIGKILL the driver after 2 of 4 epochs and corrupt its newest checkpoint;
    `python -m gnntrain.run --resume` says it falls back to the previous checkpoint and
    finishes with the model and optimizer state, on both workers, of a run that was never
    interrupted (dropout 0.2 and sampling on). The killed run left no worker behind: Ray
    ends the actors of a driver that died (both runs join the session's Ray)."""
    cfg_path = write_cfg(tmp_path)
    reference = final_state(run_training(load_config(cfg_path), progress=False))
    POOL.make_room(SUBPROCESS_CPUS, 0.0)  # the subprocess's run needs CPUs the reference's kept workers may hold

    env = {**joined_env, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "gnntrain.run", "--config", str(cfg_path), "--no-progress",
                             "--set", "train.epochs=40", "--set", f"train.run_root={tmp_path / 'killed'}"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    pids: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        ckpt: list[Path] = []
        while time.monotonic() < deadline:
            ckpt = list((tmp_path / "killed").glob("resume-*/checkpoints/ckpt-00002.pt"))
            if ckpt or proc.poll() is not None:
                break
            pids |= {p.pid for p in unkept_workers()}  # the session raylet's: this run's alone
            time.sleep(0.1)
        assert ckpt, "the run never reached its second checkpoint"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert pids, "never saw the run's worker processes"
    assert wait_dead(pids, 60) == set(), "killing the coordinator left worker processes behind"
    run_dir = ckpt[0].parent.parent
    assert not (run_dir / "summary.json").exists(), "the killed run must not have finished"
    kept = list_checkpoints(RunDir(run_dir))
    assert 2 <= len(kept) < 40
    newest, previous = kept[-1], kept[-2]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # a torn file
    # resume with the original epoch count (the killed run was told 40, resume says 4): the
    # CLI's main in this process, on the session's Ray (its workers may serve the run)
    capsys.readouterr()
    assert run_cli(["--resume", str(run_dir), "--no-progress", "--set", "train.epochs=4"]) == 0
    stderr = capsys.readouterr().err
    assert f"checkpoint {newest} is unreadable" in stderr, stderr[-3000:]
    assert f"falling back to {previous.name}" in stderr
    said = "".join(stderr.split())  # the terminal output wraps long paths
    assert f"resuming{run_dir}afterepoch{int(previous.stem.split('-')[1])}" in said
    assert json.loads((run_dir / "summary.json").read_text())["epochs"] == 4
    epochs_logged = [json.loads(ln)["epoch"] for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert epochs_logged == [0, 1, 2, 3], "each epoch appears once in metrics.jsonl after resume"
    assert_same_state(final_state({"run_dir": str(run_dir)}), reference, world=2)


def test_corrupted_partition_file_is_reported_by_name(ray_local: None, tmp_path: Path) -> None:
    cfg = load_config(write_cfg(tmp_path, epochs=1))
    run_training(cfg, progress=False)
    [pset] = [p for p in (tmp_path / "parts").iterdir() if (p / "meta.json").is_file()]
    victim = sorted((pset / "part-1").glob("*.npy"))[0]
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(PartitionChecksumError) as err:  # named by the coordinator, before Ray starts
        run_training(cfg, progress=False)
    assert f"part-1/{victim.name}" in str(err.value) and "checksum" in str(err.value).lower()
    assert_nothing_left()


_KILL_AT = """
import os, signal, sys
from partition import build_partition_set
from partition.config import PartitionConfig
from tests.conftest import make_graph

def hook(rel):
    if rel == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)

build_partition_set(make_graph(3000, seed=5, name="cut"), PartitionConfig(parts=2), sys.argv[1], on_write=hook)
"""


@pytest.mark.parametrize("kill_after", ["new_ids.npy", "part-1/indices.npy", "meta.json"])
def test_interrupted_partitioning_leaves_no_half_set(tmp_path: Path, kill_after: str) -> None:
    """SIGKILL inside the write step (after a given file, last after meta.json, just before
    the rename): the set's directory is absent, only a dot-named temp directory is left,
    and the next build writes a complete set that round-trips the graph."""
    root = tmp_path / "parts"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _KILL_AT, str(root), kill_after], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"the hook never fired: {proc.stderr[-2000:]}"
    graph = make_graph(3000, seed=5, name="cut")
    cfg = PartitionConfig(parts=2)
    visible = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert visible == [], f"a set is visible after the interrupted write: {visible}"
    leftovers = [p.name for p in root.iterdir()]
    assert len(leftovers) == 1 and leftovers[0].startswith(".tmp-"), leftovers
    assert not set_path(root, graph, cfg).exists()

    pset = build_partition_set(graph, cfg, root)
    assert not pset.reused and pset.path == set_path(root, graph, cfg)
    pset.check_files(verify=True)  # every checksum in meta.json matches the file
    for p in range(2):
        part = pset.load_part(p)
        assert np.array_equal(np.asarray(part.x), graph.x[np.asarray(part.orig_ids)])
