"""Shared fixtures: where the real datasets are, and small graphs built in memory."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from bench.harness.s3 import new_bucket, s3_server
from gnntrain.runtime.worker_pool import POOL, IdleGroup, reuse_workers
from partition.graph import Graph, csr_from_edges
from partition.storage import Store

REPO = Path(__file__).resolve().parent.parent


def real_data_root() -> Path:
    """``$GNNTRAIN_DATA``, else the shared dataset store beside the checkout. The fallback
    is the test suite's alone: the library defaults to ``~/.cache/gnntrain/datasets``."""
    env = os.environ.get("GNNTRAIN_DATA")
    return Path(env) if env else REPO.parent / "shared" / "datasets"


# Relative dataset paths in the shipped configs resolve here, in this process and in the
# Ray workers and CLI subprocesses the tests start (they inherit the environment).
os.environ.setdefault("GNNTRAIN_DATA", str(real_data_root()))


def real_path(data_root: Path, *parts: str) -> Path:
    """A file or folder of the real datasets; the test skips, naming the path, when it is
    absent (the one place real-data skips are decided)."""
    path = data_root.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data absent: {path} not found under GNNTRAIN_DATA / ../shared/datasets")
    return path


@pytest.fixture(scope="session")
def data_root() -> Path:
    """Root of the real datasets; tests that need it skip with the reason when absent."""
    root = real_data_root()
    if not root.is_dir():
        pytest.skip(f"real datasets not found at {root} (set GNNTRAIN_DATA or place ../shared/datasets)")
    return root


def quiet() -> Console:
    """A console that prints nowhere: ``gnntrain.fit(..., console=quiet())``."""
    return Console(file=io.StringIO(), width=200)


def make_graph(num_nodes: int = 200, avg_degree: int = 6, num_features: int = 8,
               num_classes: int = 4, seed: int = 0, name: str = "tiny") -> Graph:
    """A small random undirected graph with labels that correlate with features."""
    rng = np.random.default_rng(seed)
    m = num_nodes * avg_degree // 2
    src = rng.integers(0, num_nodes, m)
    dst = rng.integers(0, num_nodes, m)
    indptr, indices = csr_from_edges(src, dst, num_nodes, undirected=True, self_loops="remove")
    y = rng.integers(0, num_classes, num_nodes).astype(np.int64)
    x = (rng.normal(size=(num_nodes, num_features)) + y[:, None]).astype(np.float32)
    perm = rng.permutation(num_nodes)
    n_tr, n_va = num_nodes // 2, num_nodes // 4
    return Graph(indptr=indptr, indices=indices, x=x, y=y,
                 train_idx=np.sort(perm[:n_tr]).astype(np.int64),
                 val_idx=np.sort(perm[n_tr:n_tr + n_va]).astype(np.int64),
                 test_idx=np.sort(perm[n_tr + n_va:]).astype(np.int64),
                 num_classes=num_classes, name=name).validate()


@pytest.fixture
def tiny_graph() -> Graph:
    return make_graph()


# The repository root is on the test processes' sys.path (pytest puts it there for the
# `tests` package) and goes into $PYTHONPATH too, as it does for the CLI subprocesses: a
# test that changes directory then does not make it one of the driver's extra code
# directories (`gnntrain.runtime.cluster.driver_code_paths`), which would give the worker
# groups started after it another runtime environment, and the kept groups no reuse.
if str(REPO) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))

# A new Ray prestarts plain worker processes for its first driver's tasks (2-3 here, about
# 1.3 s of CPU); worker actors never use them (their runtime environment sets allocator
# variables), and every Ray the suite starts, its own or a subprocess's, would start them
# for nothing.
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")

SESSION_CPUS = 16
"""Logical CPUs of the session's Ray (:func:`ray_local`)."""


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """One local Ray for the test session: no dashboard, files under a temp dir; always
    shut down, and never a bare `ray stop`. Runs keep their worker actors for the next run
    of the same shape (:func:`gnntrain.reuse_workers`): most of a new group's start-up is
    each actor importing torch and PyG (about 5 s of CPU each on these cores). The instance
    counts :data:`SESSION_CPUS` logical CPUs on the 2 cores so that idle groups of 1, 2 and
    4 workers (1 CPU each by default, one torch thread each as on 2 CPUs) stay side by side
    with room to spare for a subprocess's run (:func:`joined_env`), a sweep's trials or the
    partitioning pipeline's tasks (:func:`ray_tasks`), instead of evicting each other as
    the modules alternate between them."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")  # short: Ray's socket paths are limited
    ray.init(address="local", num_cpus=SESSION_CPUS, include_dashboard=False, object_store_memory=int(3e8), _temp_dir=tmp,
             logging_level="warning", log_to_driver=False)
    try:
        with reuse_workers():  # a run's workers serve the next run of the same shape
            yield
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


SET_ASIDE: list[IdleGroup] = []
"""The session's idle groups held out of :data:`POOL` during an :func:`own_pool` test."""


def kept_groups() -> list[IdleGroup]:
    """Every idle group kept for reuse: the pool's and those :func:`own_pool` holds aside
    (the leftover checks count neither as left behind)."""
    return POOL.idle + SET_ASIDE


@pytest.fixture
def own_pool(ray_local: None) -> Iterator[float]:
    """For a test of the pool itself, or one whose run releases it (the partitioning
    pipeline on Ray): the session's idle groups are held aside, alive and keeping their
    CPUs, so that the test sees only the groups it makes and its evictions and releases do
    not end the groups other modules kept; they go back to the pool after the test, which
    ends those it kept itself. Gives the CPUs the held groups take."""
    SET_ASIDE[:] = POOL.idle
    POOL.idle = []
    try:
        yield sum(g.cpus for g in SET_ASIDE)
    finally:
        POOL.release()
        POOL.idle = list(SET_ASIDE)
        SET_ASIDE.clear()


TASK_CPUS = 2
"""CPUs the Ray tasks of a test of the partitioning pipeline run on (:func:`ray_tasks`): the
machine's two cores, not the session's logical CPUs."""


@pytest.fixture
def ray_tasks(ray_local: None) -> Iterator[None]:
    """The session's Ray with :data:`TASK_CPUS` CPUs free for the Ray tasks a test starts (the
    partitioning pipeline), and every other free CPU held by a placement group until the
    test ends. Ray starts a worker process for each task it can run at once, each importing
    numpy, numba and the partition modules (about 2 s of CPU): with every free logical CPU
    of the session, the first pipeline test started 16-19 of them on the 2 cores; with
    :data:`TASK_CPUS` free it starts 2 and runs the tasks through them."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    POOL.make_room(TASK_CPUS, 0.0)  # idle workers may hold the CPUs the tasks need
    # from the static total, not Ray's available figure, which lags behind releases (the
    # previous test's hold, task leases Ray keeps a moment for reuse); the hold then waits
    # for what is still being released
    held = sum(g.cpus for g in kept_groups())
    spare = int(float(ray.cluster_resources().get("CPU", 0.0)) - held) - TASK_CPUS
    hold = placement_group([{"CPU": 1.0}] * spare) if spare > 0 else None
    if hold is not None:
        assert hold.wait(timeout_seconds=60), f"could not hold the session's {spare} spare CPUs"
    try:
        yield
    finally:
        if hold is not None:
            remove_placement_group(hold)


SUBPROCESS_CPUS = 4.0
"""CPUs a run in a subprocess joined to the session's Ray may need (up to 4 workers)."""


@pytest.fixture
def joined_env(ray_local: None) -> dict[str, str]:
    """The environment for a ``python -m gnntrain.run`` or example subprocess that joins the
    session's Ray (``RAY_ADDRESS``, the conventional variable the runtime reads) instead of
    starting one of its own: for tests of the CLI and the examples, not of Ray's start-up
    (tests/runtime/test_cluster_submit.py and test_failures.py's Ctrl-C case start their own).
    The run's worker processes are then descendants of this process (the session's raylet)."""
    import ray

    POOL.make_room(SUBPROCESS_CPUS, 0.0)  # idle workers may hold the CPUs the subprocess's run needs
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
            "RAY_ADDRESS": ray.get_runtime_context().gcs_address}


# The longest modules, longest first (from half a minute to two minutes each on two
# cores), then the rest in collection order: with `pytest -n 2 --dist loadfile
# --no-loadscope-reorder` (make test) each module runs whole on one worker, the next module
# going to the worker that is nearly done, so longest-first leaves the two workers ending
# within seconds of each other (the five longest alone left one idle for about 20 s).
LONG_MODULES = ("tests/test_accuracy_cora.py", "tests/faults/test_elastic.py", "tests/runtime/test_failures.py",
                "tests/test_tune.py", "tests/faults/test_recovery.py", "tests/runtime/test_cluster_submit.py",
                "tests/partition/test_parallel.py", "tests/test_user_model.py", "tests/test_predict.py",
                "tests/runtime/test_worker_pool.py", "tests/runtime/test_embedding.py", "tests/faults/test_resume.py",
                "tests/faults/test_stall.py", "tests/runtime/test_comm.py", "tests/test_user_errors.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {m: i for i, m in enumerate(LONG_MODULES)}
    items.sort(key=lambda it: rank.get(it.nodeid.split("::")[0], len(LONG_MODULES)))  # stable


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The test session's S3 server (:func:`bench.harness.s3.s3_server`): its endpoint URL."""
    with s3_server() as endpoint:
        yield endpoint


def upload_tree(local: Path, store: Store) -> None:
    """Copy every file under the local directory ``local`` to ``store``, as a user uploads a
    dataset directory to a bucket."""
    for f in sorted(local.rglob("*")):
        if f.is_file():
            store.put(f.relative_to(local).as_posix(), f)


@pytest.fixture
def s3_bucket(s3_endpoint: str, request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    """A new empty bucket on the session's S3 server, given to this test only
    (:func:`bench.harness.s3.new_bucket`)."""
    bucket = "b-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    return new_bucket(s3_endpoint, bucket)
