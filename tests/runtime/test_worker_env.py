"""The worker processes start with the allocator settings of
:data:`~gnntrain.runtime.cluster.WORKER_MALLOC_ENV`, or the driver's own values, and give
their heap's free pages back after every coordinator call (:func:`trim_heap`)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from gnntrain.runtime import ray_group
from gnntrain.runtime.cluster import WORKER_MALLOC_ENV, trim_heap, worker_runtime_env
from gnntrain.runtime.ray_group import RayGroup, WorkerActor
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
    for key in WORKER_MALLOC_ENV:
        monkeypatch.delenv(key, raising=False)
    cfg = tiny_cfg(tmp_path, workers=2)
    pset = build_partition_set(make_graph(300, seed=3), cfg.partition)
    group = RayGroup(cfg, str(pset.path), 2, cfg.model.arch, NodeClassification())
    try:
        for pid in group.pids:
            env = psutil.Process(pid).environ()
            assert {k: env.get(k) for k in WORKER_MALLOC_ENV} == WORKER_MALLOC_ENV, pid
    finally:
        group.shutdown()


HUGE_PAGES = """
import re
import gnntrain, torch
def huge_kib():
    return int(re.search(r"AnonHugePages:\\s+(\\d+)", open("/proc/self/smaps_rollup").read()).group(1))
before = huge_kib()
x = torch.ones(64 << 20, dtype=torch.uint8)
print((huge_kib() - before) // 1024)
"""


def _thp_mode() -> str | None:
    """The kernel's transparent-huge-page mode (``always``, ``madvise``, ``never``)."""
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    found = re.search(r"\[(\w+)\]", path.read_text()) if path.exists() else None
    return found.group(1) if found else None


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"),
                    reason="the kernel gives no transparent huge pages (or is not Linux)")
@pytest.mark.parametrize("value", [None, "0"])
def test_importing_gnntrain_backs_large_tensors_with_huge_pages(value: str | None) -> None:
    """``import gnntrain`` before torch's first allocation sets ``THP_MEM_ALLOC_ENABLE=1``:
    a 64 MiB tensor then lies in huge pages. ``0`` in the environment wins; under the
    kernel's ``madvise`` mode the tensor then gets none."""
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if value is not None:
        env["THP_MEM_ALLOC_ENABLE"] = value
    out = subprocess.run([sys.executable, "-c", HUGE_PAGES], env=env, capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    huge_mib = int(out.stdout)
    if value is None:
        assert huge_mib >= 32, huge_mib
    elif _thp_mode() == "madvise":
        assert huge_mib == 0, huge_mib


HOLES = """
import psutil
from gnntrain.runtime.cluster import trim_heap
rss = psutil.Process().memory_info
blocks = [bytearray(64 * 1024) for _ in range(3000)]   # under the mmap threshold: on the heap
keep = blocks[::4]                                      # pins the heap: free() can give none back
del blocks
before = rss().rss
print(trim_heap(), before, rss().rss)
"""


def test_trim_heap_gives_free_pages_inside_the_heap_back() -> None:
    """Three quarters of 190 MiB of heap blocks freed between live ones: RSS keeps them
    until the trim returns their pages. Where the C library has no ``malloc_trim`` (musl,
    macOS) the trim is a no-op that says so, and RSS is not asserted on."""
    out = subprocess.run([sys.executable, "-c", HOLES], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    ok, before, after = out[0] == "True", int(out[1]), int(out[2])
    assert ok == trim_heap()
    if sys.platform.startswith("linux") and "glibc" in " ".join(platform.libc_ver()):
        assert ok, "glibc has malloc_trim"
    if ok:
        assert before - after > 100 * 2**20, f"RSS {before >> 20} -> {after >> 20} MiB"


MID_SIZED = """
import psutil
rss = psutil.Process().memory_info
def touched(mib):
    b = bytearray(mib << 20)
    b[::4096] = b"x" * len(b[::4096])
    return b
big = touched(30)
del big                       # glibc's default: the mmap threshold rises to ~30 MiB
a = touched(20)               # a layer output's size, under that threshold
b = touched(1)                # allocated after a: pins the heap above it
before = rss().rss
del a
print(before - rss().rss)
"""


@pytest.mark.skipif("glibc" not in " ".join(platform.libc_ver()), reason="glibc's tunables")
@pytest.mark.parametrize("settings", ["workers", "glibc defaults"])
def test_workers_map_mid_sized_blocks_on_their_own(settings: str) -> None:
    """With :data:`WORKER_MALLOC_ENV` a 20 MiB block freed after a larger one goes back
    to the OS at once; with glibc's rising threshold it comes from the heap and stays
    resident (what held a bf16 worker's peak RSS ~0.4 GiB up)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    if settings == "workers":
        env.update(WORKER_MALLOC_ENV)
    freed = int(subprocess.run([sys.executable, "-c", MID_SIZED], env=env, capture_output=True,
                               text=True, check=True).stdout)
    if settings == "workers":
        assert freed >= 18 * 2**20, freed
    else:
        assert freed < 4 * 2**20, freed


def test_worker_actor_trims_after_every_coordinator_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Also after a call that raises (a fault, a bad request)."""
    trims: list[int] = []
    monkeypatch.setattr(ray_group.actor, "trim_heap", lambda: trims.append(1) or True)

    class Stub:
        def call(self, name: str, *args: Any) -> Any:
            if name == "bad":
                raise ValueError(name)
            return name

    actor = object.__new__(WorkerActor)
    actor.worker = Stub()  # type: ignore[assignment]
    assert actor.call("train_epoch", 0) == "train_epoch" and len(trims) == 1
    with pytest.raises(ValueError):
        actor.call("bad")
    assert len(trims) == 2


@pytest.mark.parametrize(("workers", "cpus", "threads"), [(1, ["cluster.cpus_per_worker=2"], 2), (2, [], 1)])
def test_worker_threads_follow_the_cpus_ray_reserved(ray_local: None, tmp_path: Path, workers: int,
                                                     cpus: list[str], threads: int) -> None:
    """``cluster.cpus_per_worker=2`` gives a worker two torch threads; the default share of
    the test Ray's 2 CPUs between 2 workers one each."""
    cfg = tiny_cfg(tmp_path, *cpus, workers=workers)
    pset = build_partition_set(make_graph(300, seed=3), cfg.partition)
    group = RayGroup(cfg, str(pset.path), workers, cfg.model.arch, NodeClassification())
    try:
        assert [i.threads for i in group.infos] == [threads] * workers
    finally:
        group.shutdown()
