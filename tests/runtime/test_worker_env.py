"""The worker processes start with the allocator settings of
:data:`~gnntrain.runtime.cluster.WORKER_MALLOC_ENV`, or the driver's own values."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from gnntrain.runtime.cluster import WORKER_MALLOC_ENV, worker_runtime_env
from gnntrain.runtime.ray_group import RayGroup
from gnntrain.tasks import NodeClassification
from partition import build_partition_set
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg


def test_the_driver_environment_wins(ray_local: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert worker_runtime_env()["env_vars"]["MALLOC_ARENA_MAX"] == WORKER_MALLOC_ENV["MALLOC_ARENA_MAX"] == "2"
    monkeypatch.setenv("MALLOC_ARENA_MAX", "7")
    assert worker_runtime_env()["env_vars"]["MALLOC_ARENA_MAX"] == "7"


def test_worker_processes_start_with_the_allocator_settings(ray_local: None, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Read from each worker's environment at exec (``/proc/<pid>/environ``): glibc reads
    its settings there, before any Python code runs."""
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    cfg = tiny_cfg(tmp_path, workers=2)
    pset = build_partition_set(make_graph(300, seed=3), cfg.partition)
    group = RayGroup(cfg, str(pset.path), 2, cfg.model.arch, NodeClassification())
    try:
        for pid in group.pids:
            env = psutil.Process(pid).environ()
            assert {k: env.get(k) for k in WORKER_MALLOC_ENV} == WORKER_MALLOC_ENV, pid
    finally:
        group.shutdown()
