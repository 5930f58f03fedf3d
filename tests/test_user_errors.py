"""Errors a user reads: one ``error:`` line naming the cause, the traceback in the run's log.

A stored partition set is verified before Ray starts, so a damaged file is named by the
coordinator, not by a worker dying at start-up; a user error a worker raises (here: a
damaged part that slipped past the check) ends the run with the worker's own sentence.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

import gnntrain.runtime.cluster
from gnntrain.config import RunConfig, load_config
from gnntrain.data import load_dataset
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import WorkerUserError, _fit_with_recovery, run_training
from gnntrain.runtime.worker_errors import user_error
from gnntrain.runtime.worker_pool import POOL
from gnntrain.tasks import NodeClassification
from partition import PartitionChecksumError, PartitionSet, build_partition_set
from partition.format import PART_FILES, SET_FILES
from tests.conftest import REPO, make_graph
from tests.runtime.helpers import worker_actors_started


def _raw(tmp_path: Path) -> dict[str, Any]:
    return {
        "dataset": {"name": "errs", "source": "synthetic",
                    "synthetic": {"nodes": 400, "avg_degree": 6, "features": 8, "classes": 3}},
        "partition": {"parts": 2, "root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [4, 4], "batch_size": 64},
        "model": {"hidden": 8, "layers": 2},
        "train": {"epochs": 1, "run_root": str(tmp_path / "runs")},
        "cluster": {"workers": 2, "call_timeout_s": 60, "collective_timeout_s": 30},
    }


def _flip_last_byte(path: Path) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 0x01]))
    return data


@pytest.fixture
def stored_set(tmp_path: Path) -> tuple[RunConfig, Any, PartitionSet]:
    cfg = load_config(raw=_raw(tmp_path))
    graph = make_graph(num_nodes=400)
    return cfg, graph, build_partition_set(graph, cfg.partition)


@pytest.mark.parametrize("rel", [*SET_FILES, *(f"part-1/{f}" for f in PART_FILES)])
def test_a_flipped_byte_in_any_file_is_named_before_ray_starts(
        stored_set: tuple[RunConfig, Any, PartitionSet], monkeypatch: pytest.MonkeyPatch,
        rel: str) -> None:
    cfg, graph, pset = stored_set

    def no_ray(*a: Any, **k: Any) -> None:
        raise AssertionError("Ray was started for a damaged partition set")

    monkeypatch.setattr(gnntrain.runtime.cluster, "ray_session", no_ray)
    _flip_last_byte(pset.path / rel)
    with pytest.raises(PartitionChecksumError, match=rf"partition file \S*{rel} fails its checksum") as e:
        run_training(cfg, graph=graph, progress=False)
    log = next(Path(cfg.train.run_root).glob("errs-*/error.log")).read_text()
    assert "Traceback" in log and rel in log
    assert any("error.log" in n for n in e.value.__notes__)


def test_a_truncated_file_is_named_by_its_size_without_hashing(
        stored_set: tuple[RunConfig, Any, PartitionSet]) -> None:
    cfg, graph, pset = stored_set
    target = pset.path / "part-1" / "x.npy"
    target.write_bytes(target.read_bytes()[:-4])
    with pytest.raises(PartitionChecksumError, match=r"part-1/x\.npy has \d+ bytes, meta\.json recorded"):
        run_training(cfg, graph=graph, progress=False)


def test_cli_prints_one_error_line_and_logs_the_traceback(tmp_path: Path) -> None:
    """The issue's case: one flipped byte in part-1/halo_ids.npy of a stored set."""
    raw = _raw(tmp_path)
    cfg_path = tmp_path / "errs.yaml"
    cfg_path.write_text(yaml.safe_dump(raw))
    cfg = load_config(cfg_path)
    pset = build_partition_set(load_dataset(cfg.dataset), cfg.partition)
    _flip_last_byte(pset.path / "part-1" / "halo_ids.npy")
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "COLUMNS": "60"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-m", "gnntrain.run", "--config", str(cfg_path), "--no-progress"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-3000:]
    errors = [ln for ln in out.stderr.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1 and errors[0].startswith("error: partition file "), out.stderr
    assert "part-1/halo_ids.npy fails its checksum" in errors[0]
    assert "Traceback" not in out.stderr and "Ray" not in out.stderr
    logs = list((tmp_path / "runs").glob("errs-*/error.log"))
    assert len(logs) == 1 and str(logs[0]) in errors[0]
    assert "Traceback" in logs[0].read_text() and "PartitionChecksumError" in logs[0].read_text()


def test_a_user_error_inside_a_worker_is_one_line(ray_local: None, tmp_path: Path) -> None:
    """Past the coordinator's check (a part damaged after it), the worker dies at start-up;
    the run ends with the worker's own sentence, not Ray's ActorDiedError, and no retry:
    the kept group of a clean run before it fails to load the part, and no new group is
    started to fail the same way; the group, its workers sound, is kept again."""
    raw = _raw(tmp_path)
    raw["train"]["max_failures"] = 3
    cfg = load_config(raw=raw)
    pset = build_partition_set(make_graph(num_nodes=400), cfg.partition)

    def fit(name: str) -> None:
        _fit_with_recovery(cfg, RunDir.create(tmp_path / "runs", name), str(pset.path), 2, cfg.model.arch,
                           NodeClassification(), None, 0, False, Console(quiet=True))

    fit("clean")  # its group is kept (the session's reuse_workers block)
    _flip_last_byte(pset.path / "part-1" / "halo_ids.npy")
    started, kept = worker_actors_started(), {tuple(g.pids) for g in POOL.idle}
    with pytest.raises(WorkerUserError) as e:
        fit("errs")
    assert worker_actors_started() == started, "a new group was started for a run that cannot load"
    assert {tuple(g.pids) for g in POOL.idle} == kept, "the group that refused the part is not kept again"
    msg = str(e.value)
    assert msg.startswith("worker 1 (start-up): partition file "), msg
    assert "part-1/halo_ids.npy fails its checksum" in msg and "\n" not in msg
    assert "ActorDiedError" not in msg and "ray::" not in msg


def test_user_error_reads_only_value_errors_of_builtins_and_our_packages() -> None:
    tb = "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
    assert user_error(tb + "partition.errors.PartitionChecksumError: partition file p fails") \
        == "partition file p fails"
    assert user_error(tb + "ValueError: model.hidden=10 must be divisible by model.heads=4\n"
                      "workers at failure: worker 0: dead") == "model.hidden=10 must be divisible by model.heads=4"
    assert user_error("ray.exceptions.RayTaskError(ValueError): ray::GnnWorker.setup()\n" + tb
                      + "gnntrain.data.errors.DataError: bad labels") == "bad labels"
    assert user_error(tb + "RuntimeError: injected fault") is None
    assert user_error(tb + "gnntrain.runtime.cluster.ClusterError: no cluster") is None
    assert user_error(tb + "somepkg.mod.BadError: not ours") is None
    assert user_error("no reply within 120s (workers still busy: [0])") is None
