"""Worker actors kept between runs in one driver: :func:`reuse_workers`.

Starting a worker actor costs seconds of CPU (a new Python process imports torch and PyG)
before it loads its part, and a seed sweep, a series of Tune trials, a scaling study over
worker counts or a test suite starts groups of the same shape again and again. Inside
``with reuse_workers():`` a Ray group that ends cleanly is not killed: its actors leave
their process group, drop their part and model, and wait, with their placement group, for
the next run on the same Ray connection with the same shape (CPUs and GPUs of each worker,
runtime environment), which loads its own config and part into them. A run of fewer
workers than a kept group has takes that group and runs in its first ranks (rank r in
bundle r, as in a group of its own); the others wait in it, and the whole group goes back
to the pool when the run ends, or on to the group of a recovery. A run of more workers
than any kept group starts a group of its own. Ray Tune's ``reuse_actors`` does the same
for trainables, and a sweep's trial actor, reused by Tune for the next trial of the same
resources, keeps its group in the trial's placement group for that trial
(:meth:`WorkerPool.hold`).

- A run that fails for good (a worker died, raised or stalled, beyond ``train.max_failures``)
  keeps its sound workers: the lost worker is killed, the others leave the failed run
  (within :data:`~gnntrain.runtime.ray_group.SALVAGE_S`, as in a recovery) and go back to
  the pool with the waiting ranks, as a group with a hole where the lost worker was (its
  bundle still reserved); the next run that takes the group starts a new worker there. A
  worker that does not let go in time is killed too (another hole). An interrupted group
  (Ctrl-C) is killed, never kept. A kept group that cannot load a run's part or config
  (bad data: the same error on every worker) goes back to the pool, its workers sound. A group placed on given nodes (a recovery's) is kept
  like any other; a recovery takes a kept group only when its ranks sit on the nodes the
  recovery asks for. A group in a placement group made by someone else (a Tune trial's)
  is taken only by a run in that same placement group, and releasing it leaves the
  placement group to its owner.
- Idle groups hold their placement group's CPUs and GPUs: a group of another shape that
  needs them releases idle groups first (oldest first), and leaving the outermost block
  releases all of them. Another driver on the same cluster, or Ray tasks this driver
  starts itself, cannot use them meanwhile: the partitioning pipeline on Ray (chunked
  datasets) releases idle groups before it starts.
- A reused worker is the same process: its peak resident memory (``ru_maxrss``) covers
  earlier runs, so memory benchmarks start fresh groups. Everything a run computes is
  seeded by its own config, so a reused group trains bit for bit like a fresh one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

GroupKey = tuple[str, str, int, tuple[float, ...], float, str, str, str]
"""What a kept group must match: Ray's GCS address and this driver's job id, the worker
count, each worker's CPUs, the GPUs per worker, the runtime environment (JSON), the
actor class (module and name) and the given placement group's id ('' for a group that
places itself)."""


@dataclass
class IdleGroup:
    """A kept group's actors and placement group, and the resources they hold. A group kept
    after a failure has holes: None in ``actors`` and ``pids`` where a worker was lost, its
    bundle still reserved; the run that takes the group starts a new actor there."""

    key: GroupKey
    actors: list[Any]  # by rank; None for a hole
    pg: Any  # None in a placement group made by someone else
    pids: list[int | None]  # by rank; None for a hole
    nodes: list[str]  # the node of every rank's bundle

    @property
    def cpus(self) -> float:
        return sum(self.key[3])

    @property
    def gpus(self) -> float:
        return self.key[4] * self.key[2]

    def serves(self, key: GroupKey, nodes: list[str] | None = None) -> bool:
        """Whether this group can run a group of shape ``key`` (with rank r on ``nodes[r]``
        when given) in its first ranks: the same Ray, runtime environment, actor class,
        placement and GPUs per worker, at least as many workers, and its first ranks with
        the CPUs (and nodes) asked for."""
        world = key[2]
        return (self.key[:2] == key[:2] and self.key[4:] == key[4:] and self.key[2] >= world
                and self.key[3][:world] == key[3] and (nodes is None or self.nodes[:world] == nodes))


def group_key(world: int, cpus: list[float], gpus: float, runtime_env: dict[str, Any], actor: type,
              given_pg: str = "") -> GroupKey:
    """The key of a group of ``world`` actors of class ``actor`` with ``cpus[r]`` CPUs and
    ``gpus`` GPUs each, on the Ray this driver is connected to, in the placement group
    ``given_pg`` (its id) made by someone else, or ('') in one of its own."""
    import ray

    ctx = ray.get_runtime_context()
    return (str(ctx.gcs_address), str(ctx.get_job_id()), world, tuple(float(c) for c in cpus), float(gpus),
            json.dumps(runtime_env, sort_keys=True), f"{actor.__module__}.{actor.__qualname__}", given_pg)


def kill_group(actors: list[Any], pg: Any) -> None:
    """Kill ``actors`` and remove ``pg``; what is already gone (or a hole, None) is skipped."""
    import ray
    from ray.util.placement_group import remove_placement_group

    for a in actors:
        if a is None:  # a hole of a kept group
            continue
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
    if pg is not None:
        try:
            remove_placement_group(pg)
        except Exception:  # noqa: BLE001 - already gone
            pass


class WorkerPool:
    """The idle groups of this driver, and whether a :func:`reuse_workers` block is open."""

    def __init__(self) -> None:
        self.depth = 0
        self.held = False
        self.idle: list[IdleGroup] = []

    @property
    def active(self) -> bool:
        return self.depth > 0

    def hold(self) -> None:
        """Keep clean groups for the rest of this process's life, as if inside a
        :func:`reuse_workers` block never left: for a Ray Tune trial actor, which Tune reuses
        for the next trial of the same resources (``reuse_actors``) and otherwise ends, and
        its kept workers with it (Ray ends an actor's actors with it). Idempotent."""
        if not self.held:
            self.held = True
            self.depth += 1

    def _current(self) -> None:
        """Forget groups of another Ray connection (their handles are no longer valid)."""
        import ray

        if not ray.is_initialized():
            self.idle = []
            return
        ctx = ray.get_runtime_context()
        here = (str(ctx.gcs_address), str(ctx.get_job_id()))
        self.idle = [g for g in self.idle if g.key[:2] == here]

    def take(self, key: GroupKey, nodes: list[str] | None = None, larger: bool = True) -> IdleGroup | None:
        """An idle group that serves shape ``key`` (:meth:`IdleGroup.serves`), removed from
        the pool: one of exactly that many workers, else (``larger``) the smallest larger
        one, whose first ranks run the group while the others wait in it; None when there
        is none."""
        self._current()
        fits = [i for i, g in enumerate(self.idle) if g.serves(key, nodes) and (larger or g.key[2] == key[2])]
        if not fits:
            return None
        return self.idle.pop(min(fits, key=lambda i: self.idle[i].key[2]))

    def keep(self, group: IdleGroup) -> bool:
        """Keep ``group`` for a later run; False (nothing kept) outside :func:`reuse_workers`."""
        if not self.active:
            return False
        self._current()
        self.idle.append(group)
        return True

    def make_room(self, cpus: float, gpus: float) -> None:
        """Release idle groups, oldest first, until ``cpus`` CPUs and ``gpus`` GPUs would be
        free for a new group (as far as Ray's available resources tell)."""
        import ray

        self._current()
        if not self.idle:
            return
        free = ray.available_resources()
        have_cpu, have_gpu = float(free.get("CPU", 0.0)), float(free.get("GPU", 0.0))
        while self.idle and (have_cpu + 1e-9 < cpus or have_gpu + 1e-9 < gpus):
            g = self.idle.pop(0)
            kill_group(g.actors, g.pg)
            have_cpu += g.cpus
            have_gpu += g.gpus

    def release(self) -> None:
        """Kill every idle group."""
        self._current()
        idle, self.idle = self.idle, []
        for g in idle:
            kill_group(g.actors, g.pg)

    def pids(self) -> set[int]:
        """The process ids of the idle workers."""
        return {p for g in self.idle for p in g.pids if p is not None}


POOL = WorkerPool()
"""This driver's pool (one per process: Ray allows one connection per driver)."""


@contextmanager
def reuse_workers() -> Iterator[WorkerPool]:
    """Keep the worker actors of runs that end cleanly, for the next run of the same shape
    in this block (see the module doc); on leaving the outermost block, kill them. Blocks
    nest. Runs on one process (``cluster.workers=1`` without Ray) are not affected.

    >>> with gnntrain.reuse_workers():            # doctest: +SKIP
    ...     runs = [gnntrain.fit(cfg, train__seed=s) for s in range(5)]
    """
    POOL.depth += 1
    try:
        yield POOL
    finally:
        POOL.depth -= 1
        if POOL.depth == 0:
            POOL.release()
