"""Kill the coordinator, resume the run; corrupt a partition file; interrupt partitioning."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
import yaml

from gnntrain.config import load_config
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from partition import PartitionChecksumError
from tests.conftest import REPO
from tests.runtime.helpers import final_params
from tests.runtime.test_failures import wait_dead, wait_no_workers, worker_processes


def write_cfg(tmp_path: Path, epochs: int = 4) -> Path:
    raw = {
        "dataset": {"name": "resume", "source": "synthetic",
                    "synthetic": {"nodes": 1500, "avg_degree": 8, "features": 16, "classes": 5, "seed": 3}},
        "partition": {"parts": 2, "root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32},
        "model": {"hidden": 16, "layers": 2, "dropout": 0.2},
        "train": {"epochs": epochs, "checkpoint_every": 1, "keep_checkpoints": 10,
                  "run_root": str(tmp_path / "runs")},
        "cluster": {"workers": 2, "call_timeout_s": 60, "collective_timeout_s": 30},
    }
    p = tmp_path / "resume.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_kill_coordinator_then_resume_gives_the_uninterrupted_result(ray_local: None, tmp_path: Path) -> None:
    """SIGKILL the driver after 2 of 4 epochs; `--resume` finishes with identical parameters
    to a run that was never interrupted, and the killed run left no worker behind."""
    cfg_path = write_cfg(tmp_path)
    reference = final_params(run_training(load_config(cfg_path), progress=False))

    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
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
            pids |= {p.pid for p in worker_processes(psutil.Process(proc.pid))}
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
    assert len(list((run_dir / "checkpoints").iterdir())) < 40
    # resume with the original epoch count (the killed run was told 40, resume says 4)
    resumed = run_training(load_config(raw=RunDir(run_dir).read_config_raw(), overrides=["train.epochs=4"]),
                           resume=RunDir(run_dir), progress=False)
    assert resumed["epochs"] == 4
    epochs_logged = [int(ln.split('"epoch": ')[1].split(",")[0])
                     for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert epochs_logged == [0, 1, 2, 3], "each epoch appears once in metrics.jsonl after resume"
    got = final_params(resumed)
    for k in reference:
        assert torch.equal(reference[k], got[k]), k


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
    assert wait_no_workers() == []


def test_interrupted_partitioning_leaves_no_half_set(tmp_path: Path) -> None:
    """SIGKILL `python -m partition` mid-way: no set a later run would pick up; rerun works."""
    raw = yaml.safe_load(write_cfg(tmp_path).read_text())
    raw["dataset"]["synthetic"].update({"nodes": 300_000, "avg_degree": 10})
    cfg_path = tmp_path / "big.yaml"
    cfg_path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "parts"
    cmd = [sys.executable, "-m", "partition", "--config", str(cfg_path), "--parts", "2", "--root", str(out), "--out", str(tmp_path / "report")]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and any(out.iterdir()):
            break
        time.sleep(0.02)
    time.sleep(0.3)
    proc.kill()
    proc.wait()
    complete = [p for p in out.iterdir() if (p / "meta.json").is_file()] if out.exists() else []
    half = [p for p in out.iterdir() if not p.name.startswith(".")] if out.exists() else []
    assert complete == half, f"a half-written set is visible: {half}"
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    sets = [p for p in out.iterdir() if (p / "meta.json").is_file()]
    assert len(sets) == 1
    assert np.load(next((sets[0] / "part-0").glob("*.npy")), mmap_mode="r").size >= 0
