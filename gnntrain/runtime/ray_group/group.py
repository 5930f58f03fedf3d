"""The coordinator's side of a Ray worker group: place and start the actors, call them,
wait for their replies while watching for stalls, and name the worker that failed."""

from __future__ import annotations

import re
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from gnntrain.config import RunConfig
from gnntrain.models import ModelSpec
from gnntrain.runtime import interrupts
from gnntrain.runtime.cluster import worker_runtime_env
from gnntrain.runtime.comm import wire_bytes
from gnntrain.runtime.group import Watch, WorkerGroup
from gnntrain.runtime.placement import NODE_LABEL, alive_nodes, bundle_cpus
from gnntrain.runtime.ray_group import actor
from gnntrain.runtime.ray_group.stall import StallWatch, furthest_behind, position
from gnntrain.runtime.worker import WorkerInfo
from gnntrain.runtime.worker_errors import user_error
from gnntrain.runtime.worker_pool import POOL, GroupKey, IdleGroup, group_key, kill_group
from gnntrain.tasks import Task

__all__ = ["SALVAGE_S", "STARTUP_S", "GivenPlacement", "PlacementError", "RayGroup", "Survivors", "WorkerFailure"]


class WorkerFailure(RuntimeError):
    """A worker died, raised, or did not answer in time."""

    def __init__(self, rank: int, phase: str, cause: str) -> None:
        cause = re.sub(r"\x1b\[[0-9;]*m", "", cause)  # Ray colours its tracebacks
        super().__init__(f"worker {rank} failed during {phase}: {cause}")
        self.rank = rank
        self.phase = phase
        self.cause = cause


class PlacementError(RuntimeError):
    """The cluster could not place the workers' placement group in time."""


@dataclass(frozen=True)
class GivenPlacement:
    """A placement group made by someone else, whose bundles ``first_bundle ..
    first_bundle + k - 1`` hold the k workers (each rank takes its bundle's CPUs and
    GPUs). A Ray Tune trial's: bundle 0 runs the trial (the coordinator), 1..k the
    workers. The group places its actors there and never removes the placement group;
    kept for reuse (:mod:`~gnntrain.runtime.worker_pool`), its actors serve only a later run
    in the same placement group."""

    pg: Any
    first_bundle: int = 1

    @classmethod
    def current(cls, first_bundle: int = 1) -> GivenPlacement:
        """The placement group this task or actor runs in (a Tune trial's)."""
        pg = ray.util.get_current_placement_group()
        if pg is None:
            raise PlacementError("GivenPlacement.current(): this process does not run in a placement group")
        return cls(pg, first_bundle)

    def bundles(self, world: int) -> list[dict[str, float]]:
        """The resources of the workers' ``world`` bundles, by rank."""
        specs = list(self.pg.bundle_specs)[self.first_bundle:self.first_bundle + world]
        if len(specs) != world:
            raise PlacementError(f"the placement group has {len(self.pg.bundle_specs)} bundles; {world} "
                                 f"workers from bundle {self.first_bundle} need {self.first_bundle + world}")
        return specs


@dataclass
class Survivors:
    """The workers of a failed group other than the lost one (:meth:`RayGroup.salvage`), by
    rank, each leaving the failed run (``releasing``: its release call, due by
    ``deadline``, monotonic), with the group's key and placement group and the failed
    call's replies. The next group of the recovery starts new actors for the lost ranks at
    once, takes each worker whose release returns in time (and loads the run into it
    again), and replaces the others too; a run that fails for good puts them back in the
    pool (:meth:`keep`)."""

    key: GroupKey
    pg: Any  # None in a placement group made by someone else
    actors: dict[int, Any]
    releasing: dict[int, Any]
    deadline: float
    nodes: list[str]  # the node of every rank of the failed group
    unanswered: list[Any] = field(default_factory=list)
    taken: IdleGroup | None = None  # the larger kept group the failed one ran in (its other ranks wait)
    pids: dict[int, int] = field(default_factory=dict)  # of the released workers, by rank

    def released(self) -> dict[int, Any]:
        """The workers whose release returned by the deadline (their process ids go to
        ``pids``); the others are killed. The failed call's replies are read then (those of
        a released worker are ready), so Ray reports none of them as unhandled errors."""
        taken: dict[int, Any] = {}
        for r, ref in self.releasing.items():
            try:
                self.pids[r] = ray.get(ref, timeout=max(0.01, self.deadline - time.monotonic()))
                taken[r] = self.actors[r]
            except Exception:  # noqa: BLE001 - stuck or gone: replaced like the lost rank
                kill_group([self.actors[r]], None)
        for ref in self.unanswered:
            with suppress(Exception):
                ray.get(ref, timeout=0)
        self.actors, self.releasing = {}, {}
        return taken

    def keep(self) -> None:
        """For a run that fails for good: the workers that let go in time, with the waiting
        ranks of a larger kept group, back to the pool (inside
        :func:`~gnntrain.runtime.worker_pool.reuse_workers`) as a group with holes where the
        lost worker and any that did not let go were; outside it, or with none left, kill
        them and remove the placement group."""
        world, taken = len(self.nodes), self.taken
        try:
            sound = self.released()
        except BaseException:  # interrupted while they let go: none is kept
            self.discard()
            raise
        group = idle_group(self.key, self.pg, [sound.get(r) for r in range(world)],
                           [self.pids.get(r) for r in range(world)], self.nodes, taken)
        self.taken = None
        if not any(a is not None for a in group.actors) or not POOL.keep(group):
            kill_group(group.actors, self.pg)

    def discard(self) -> None:
        """Kill them, and the waiting ranks of a larger kept group, and remove the placement
        group (the next group is placed elsewhere)."""
        kill_group(list(self.actors.values()) + spare_actors(self.taken, len(self.nodes)), self.pg)
        self.actors, self.releasing, self.taken = {}, {}, None


def _released(actors: list[Any], timeout_s: float = 30.0) -> list[int | None] | None:
    """Ask ``actors`` (by rank, None at a hole) to let go of their run
    (:meth:`WorkerActor.release`): their process ids by rank (None at a hole), or None if one
    does not within ``timeout_s`` (it is not kept then)."""
    live = [a for a in actors if a is not None]
    try:
        pids = iter(ray.get([a.release.remote() for a in live], timeout=timeout_s))
    except Exception:  # noqa: BLE001 - a worker that cannot let go is not kept
        return None
    return [None if a is None else next(pids) for a in actors]


def idle_group(key: GroupKey, pg: Any, actors: list[Any], pids: list[int | None], nodes: list[str],
               taken: IdleGroup | None) -> IdleGroup:
    """The released ``actors`` (by rank, None for a hole) of a group of shape ``key`` as an
    idle group for the pool: with the waiting ranks of the larger kept group ``taken`` it
    ran in, if any."""
    if taken is None:
        return IdleGroup(key, list(actors), pg, list(pids), list(nodes))
    w = len(actors)
    return IdleGroup(taken.key, actors + taken.actors[w:], pg, pids + taken.pids[w:], nodes + taken.nodes[w:])


def spare_actors(taken: IdleGroup | None, world: int) -> list[Any]:
    """The actors of a larger kept group ``taken`` beyond the first ``world`` ranks, which
    wait in it while a group of ``world`` workers runs (:meth:`WorkerPool.take`)."""
    return [] if taken is None else taken.actors[world:]


SALVAGE_S = 10.0
"""How long the workers of a failed group that did not fail get to leave its run (the
training call they were in ends once the lost worker is gone) before they are replaced too."""


STARTUP_S = 120.0
"""The least time a worker may take to start (import torch and PyG, load its part) on a
loaded machine before it is reported as stalled."""


class RayGroup(WorkerGroup):
    """k :class:`WorkerActor` s in one placement group; the coordinator's side."""

    def __init__(self, cfg: RunConfig, part_path: str, world: int, model: ModelSpec, task: Task,
                 attempt: int = 0, nodes: list[str] | None = None,
                 placement: GivenPlacement | None = None, survivors: Survivors | None = None) -> None:
        """``nodes``: the node id each rank is pinned to (:mod:`~gnntrain.runtime.placement`);
        None lets Ray pack the ranks where they fit. ``placement``: place the ranks in the
        bundles of a placement group made by someone else (a Tune trial's) instead of
        creating one. ``survivors``: the sound workers of the failed group this one replaces
        (same shape, same placement), which serve their ranks again."""
        self.cfg = cfg
        self.world = world
        self.stall_s = cfg.cluster.stall_timeout_s
        self.control_bytes = np.zeros(world, dtype=np.int64)
        self.control_messages = np.zeros(world, dtype=np.int64)
        self.placement = placement
        if placement is not None:
            given = placement.bundles(world)
            cpus = [float(b.get("CPU", 0.0)) for b in given]
            gpus = float(given[0].get("GPU", 0.0))
            if cfg.train.device == "cuda" and gpus <= 0:
                raise ValueError("train.device='cuda' but the workers' bundles hold no GPU")
        else:
            cpus, gpus = self._resources(cfg, world, nodes)
        raw = cfg.model_dump(mode="json")
        env = worker_runtime_env()  # allocator settings; user code the driver imported
        self.key = group_key(world, cpus, gpus, env, actor.WorkerActor,
                             "" if placement is None else placement.pg.id.hex())
        self.healthy = True  # False once a call failed or was interrupted: never kept then
        self.actors: list[Any] = []
        self.pg: Any = None
        self.new_ranks: list[int] = []  # the ranks whose actor this group started
        self.unanswered: list[Any] = []  # replies of the call that failed
        # a kept group of this shape or a larger one, whose first ranks this group runs in
        self.taken = POOL.take(self.key, nodes) if survivors is None else None
        if self.taken is not None:
            self.pg, self.actors = self.taken.pg, self.taken.actors[:world]
            kept = [r for r, a in enumerate(self.actors) if a is not None]  # the others are holes
            try:
                self._get([self.actors[r].load.remote(raw, part_path, r, world, model, task) for r in kept],
                          "start-up", ranks=kept)
            except WorkerFailure as e:  # a kept worker died or cannot load: start a new group
                bad_input = user_error(e.cause) is not None
                if not (bad_input and self._give_back(self.taken)):
                    kill_group(self.actors + spare_actors(self.taken, world), self.pg)
                self.pg, self.actors, self.healthy, self.taken = None, [], True, None
                if bad_input:
                    raise  # bad data or config: a new group would fail the same way
        try:
            if survivors is not None:
                self._take_survivors(raw, env, cpus, gpus, part_path, model, task, survivors)
            elif self.taken is None:
                if placement is None:
                    POOL.make_room(sum(cpus), gpus * world)
                self._start(raw, env, cpus, gpus, nodes, part_path, model, task)
                self.new_ranks = list(range(world))
            else:  # a new actor in each hole of the kept group, in the lost worker's bundle
                self.new_ranks = [r for r, a in enumerate(self.actors) if a is None]
                new = self._new_actors(raw, env, cpus, gpus, part_path, model, task, *self._bundles(),
                                       self.new_ranks)
                for r, a in zip(self.new_ranks, new, strict=True):
                    self.actors[r] = a
            # an actor still being built (imports, loading its part) cannot answer: start-up
            # gets at least STARTUP_S
            up = max(self.stall_s, STARTUP_S)
            master = self._get([self.actors[0].address.remote()], "start-up", ranks=[0], stall_s=up)[0]
            self.pids = self._get([a.pid.remote() for a in self.actors], "start-up", stall_s=up)
            self.nodes: list[str] = self._get([a.node.remote() for a in self.actors], "start-up")
            backend = "nccl" if gpus >= 1 else "gloo"  # NCCL needs one GPU per rank
            infos = self._get([a.setup.remote(self.actors, master, attempt, backend)
                               for a in self.actors], "setup")
        except BaseException:
            self.healthy = False
            self.shutdown()
            raise
        self.infos = [WorkerInfo(**i) for i in infos]

    @staticmethod
    def _resources(cfg: RunConfig, world: int, nodes: list[str] | None) -> tuple[list[float], float]:
        """The CPUs of each rank and the GPUs per rank of a group that places itself."""
        total_cpus = float(ray.cluster_resources().get("CPU", 1.0))
        per = cfg.cluster.cpus_per_worker or min(1.0, total_cpus / world)
        if nodes is None and per * world > total_cpus + 1e-9:
            raise ValueError(
                f"cluster.cpus_per_worker={per} x {world} workers needs {per * world:g} CPUs but the "
                f"Ray cluster has {total_cpus:g}; lower cluster.cpus_per_worker or the worker count")
        gpus = 0.0
        if cfg.train.device == "cuda":  # several workers may share one GPU
            gpus = cfg.cluster.gpus_per_worker or min(1.0, float(ray.cluster_resources().get("GPU", 0)) / world)
            if gpus <= 0:
                raise ValueError("train.device='cuda' but the Ray cluster reports no GPU")
        # pinned ranks sharing a node share its CPUs
        return ([per] * world if nodes is None else bundle_cpus(nodes, alive_nodes(), per)), gpus

    def _start(self, raw: dict[str, Any], env: dict[str, Any], cpus: list[float], gpus: float,
               nodes: list[str] | None, part_path: str, model: ModelSpec, task: Task) -> None:
        """Place the group's bundles (one per rank, on ``nodes`` when pinned), or take the
        given placement group's, and start its actors."""
        world = len(cpus)
        if self.placement is not None:
            self._spawn(raw, env, cpus, gpus, part_path, model, task, self.placement.pg,
                        self.placement.first_bundle)
            return
        bundles = [{"CPU": c, **({"GPU": gpus} if gpus else {})} for c in cpus]
        self.pg = placement_group(bundles, strategy="PACK", **(
            {} if nodes is None else {"bundle_label_selector": [{NODE_LABEL: n} for n in nodes]}))
        if not self.pg.wait(timeout_seconds=int(max(10, self.cfg.cluster.connect_timeout_s))):
            remove_placement_group(self.pg)
            self.pg = None
            where = "" if nodes is None else f" on nodes {nodes} (by rank)"
            raise PlacementError(f"could not place {world} workers with {cpus} CPUs{where} on the cluster "
                                 f"({ray.cluster_resources()})")
        self._spawn(raw, env, cpus, gpus, part_path, model, task, self.pg, 0)

    def _spawn(self, raw: dict[str, Any], env: dict[str, Any], cpus: list[float], gpus: float,
               part_path: str, model: ModelSpec, task: Task, pg: Any, first_bundle: int) -> None:
        """Start rank r's actor in bundle ``first_bundle + r`` of ``pg``."""
        self.actors = self._new_actors(raw, env, cpus, gpus, part_path, model, task, pg, first_bundle,
                                       list(range(len(cpus))))

    def _new_actors(self, raw: dict[str, Any], env: dict[str, Any], cpus: list[float], gpus: float,
                    part_path: str, model: ModelSpec, task: Task, pg: Any, first_bundle: int,
                    ranks: list[int]) -> list[Any]:
        """New actors for ``ranks``, each in its bundle ``first_bundle + r`` of ``pg``."""
        world = len(cpus)
        cls = actor.actor_class()
        return [
            cls.options(num_cpus=cpus[r], num_gpus=gpus, max_restarts=0, name=None,
                        runtime_env=env,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            placement_group=pg, placement_group_bundle_index=first_bundle + r)
                        ).remote(raw, part_path, r, world, model, task)
            for r in ranks]

    def _take_survivors(self, raw: dict[str, Any], env: dict[str, Any], cpus: list[float], gpus: float,
                        part_path: str, model: ModelSpec, task: Task, survivors: Survivors) -> None:
        """New actors for the failed group's lost ranks, started first (importing their
        libraries while the others leave the failed run); the survivors that let go in
        time for their ranks, the run loaded into them again; new actors for the rest."""
        self.pg, self.taken = survivors.pg, survivors.taken
        self.actors = list(survivors.actors.values())  # this group's now: killed with it should a start fail

        def start(ranks: list[int]) -> dict[int, Any]:
            actors = self._new_actors(raw, env, cpus, gpus, part_path, model, task, *self._bundles(), ranks)
            self.actors += actors
            return dict(zip(ranks, actors, strict=True))

        new = start([r for r in range(self.world) if r not in survivors.actors])
        taken = survivors.released()
        new |= start([r for r in range(self.world) if r not in taken and r not in new])
        self.actors = [taken[r] if r in taken else new[r] for r in range(self.world)]
        self.new_ranks = sorted(new)
        kept = sorted(taken)
        self._get([self.actors[r].load.remote(raw, part_path, r, self.world, model, task) for r in kept],
                  "start-up", ranks=kept)

    def _bundles(self) -> tuple[Any, int]:
        """The placement group rank r's bundle ``first + r`` is in, and ``first``."""
        return (self.pg, 0) if self.placement is None else (self.placement.pg, self.placement.first_bundle)

    def salvage(self, lost: int, timeout_s: float = SALVAGE_S) -> Survivors | None:
        """After worker ``lost`` failed: kill it and ask the others to leave the run (each
        ends the call it was in once its peer is gone), for the group that replaces this one
        or for the pool (:class:`Survivors`: those that let go within ``timeout_s`` serve
        their ranks again); None for a group without a placement group to keep."""
        if self.pg is None and self.placement is None:
            return None
        kill_group([self.actors[lost]], None)
        others = {r: a for r, a in enumerate(self.actors) if r != lost}
        out = Survivors(self.key, self.pg, others, {r: a.release.remote() for r, a in others.items()},
                        time.monotonic() + timeout_s, list(self.nodes), self.unanswered, self.taken)
        self.actors = [self.actors[lost]]
        self.pg, self.taken = None, None
        return out

    def diagnose(self, timeout_s: float = 5.0, ranks: list[int] | None = None) -> list[dict[str, Any]]:
        """Each worker's progress (or that it does not answer), to name a stuck worker."""
        ranks = list(range(len(self.actors))) if ranks is None else ranks
        refs = {r: self.actors[r].progress.remote() for r in ranks}
        deadline = time.monotonic() + timeout_s
        out: list[dict[str, Any]] = []
        for r, ref in refs.items():
            try:
                out.append({"rank": r, **ray.get(ref, timeout=max(0.01, deadline - time.monotonic()))})
            except GetTimeoutError:
                out.append({"rank": r, "phase": "not answering"})
            except RayError as e:
                out.append({"rank": r, "phase": f"dead ({e.__class__.__name__})"})
        return out

    def _culprit(self, rank: int, cause: str, phase: str,
                 prog: list[dict[str, Any]] | None = None) -> WorkerFailure:
        """Blame the worker that is dead, silent, or furthest behind, not its waiting peers."""
        try:
            prog = prog or self.diagnose()
        except Exception:  # noqa: BLE001 - diagnosis is best effort
            return WorkerFailure(rank, phase, cause)
        culprit = furthest_behind(prog, rank)
        state = "; ".join(f"worker {p['rank']}: {position(p)}" for p in prog)
        note = f"\nworkers at failure: {state}"
        if culprit != rank:
            note += f"\n(worker {rank} reported the error; worker {culprit} is the one behind)"
        return WorkerFailure(culprit, phase, cause + note)

    def _get(self, refs: list[Any], phase: str, timeout: float | None = None,
             ranks: list[int] | None = None, stall_s: float | None = None,
             watch: Watch | None = None) -> list[Any]:
        """Wait for the replies of ``refs`` (from workers ``ranks``, default ``0..``): as long
        as one of the workers still busy makes progress (see :class:`StallWatch`), and at
        most ``timeout`` seconds when given. ``stall_s`` replaces the stall limit. Every
        round of progress answers also goes to ``watch`` (a progress bar), then at least
        once a second. Failures name the worker and the cause."""
        try:
            return self._wait(refs, phase, timeout, ranks, stall_s, watch)
        except BaseException:
            self.healthy = False
            self.unanswered = list(refs)  # the failed call's replies, read by Survivors.released()
            raise

    def _wait(self, refs: list[Any], phase: str, timeout: float | None, ranks: list[int] | None,
              stall_s: float | None, watch: Watch | None) -> list[Any]:
        stall_s = stall_s or self.stall_s
        ranks = list(range(len(refs))) if ranks is None else ranks
        rank_of = {id(ref): r for ref, r in zip(refs, ranks, strict=True)}
        t0 = time.monotonic()
        deadline = t0 + timeout if timeout else None
        stalls = StallWatch(stall_s)
        stalls.start(ranks, t0)
        poll = min(5.0 if watch is None else 1.0, max(0.2, stall_s / 10))
        next_poll = t0 + poll
        pending = list(refs)
        while pending:
            interrupts.raise_pending()  # a Ctrl-C dropped in a weakref callback
            now = time.monotonic()
            busy = [rank_of[id(r)] for r in pending]
            if deadline is not None and now >= deadline:
                raise self._culprit(busy[0], phase=phase, cause=(
                    f"no reply within {timeout:.0f}s (workers still busy: {busy})"))
            if now >= next_poll:
                prog = self.diagnose(timeout_s=poll, ranks=busy)
                now = time.monotonic()
                for p in prog:
                    stalls.update(p["rank"], p, now)
                if watch is not None:
                    watch(prog)
                if stalls.stalled(busy, now):
                    culprit = furthest_behind(prog, busy[0])
                    still = stalls.still_for(culprit, now)
                    raise self._culprit(culprit, phase=phase, prog=prog, cause=(
                        f"worker {culprit} made no progress for {still:.0f}s "
                        f"(limit {stall_s:g}s, cluster.stall_timeout_s) at "
                        f"{position(next(p for p in prog if p['rank'] == culprit))}; "
                        f"workers still busy: {busy}"))
                next_poll = now + poll
            wait_s = next_poll - now if deadline is None else min(next_poll, deadline) - now
            done, pending = ray.wait(pending, num_returns=1, timeout=max(0.01, wait_s))
            for ref in done:
                try:
                    ray.get(ref)
                except RayTaskError as e:
                    raise self._culprit(rank_of[id(ref)], phase=phase, cause=f"raised:\n{e}") from None
                except RayActorError as e:
                    raise WorkerFailure(rank_of[id(ref)], phase, f"process died ({e.__class__.__name__}): "
                                        f"{str(e)[-4000:]}") from None
                except RayError as e:
                    raise WorkerFailure(rank_of[id(ref)], phase, repr(e)) from None
        return ray.get(refs)

    def call(self, name: str, *args: Any, phase: str, timeout: float | None = None,
             watch: Watch | None = None) -> list[Any]:
        """One call to every worker; its arguments and replies count as ``control``."""
        self.control_bytes += wire_bytes(name, *args)
        self.control_messages += 1
        out = self._get([a.call.remote(name, *args) for a in self.actors], phase, timeout, watch=watch)
        self.control_bytes += np.array([wire_bytes(o) for o in out], dtype=np.int64)
        self.control_messages += 1
        return out

    def call_one(self, rank: int, name: str, *args: Any, phase: str) -> Any:
        return self._get([self.actors[rank].call.remote(name, *args)], phase, ranks=[rank])[0]

    def take_control(self) -> tuple[list[int], list[int]]:
        b, m = self.control_bytes.tolist(), self.control_messages.tolist()
        self.control_bytes[:] = 0
        self.control_messages[:] = 0
        return b, m

    def shutdown(self) -> None:
        """Kill the workers and remove their placement group; inside
        :func:`~gnntrain.runtime.worker_pool.reuse_workers`, keep a healthy group instead.
        A given placement group (:class:`GivenPlacement`) stays: its owner removes it."""
        actors, self.actors = self.actors, []
        taken, self.taken = self.taken, None
        if self.healthy and POOL.active and actors:
            pids = _released(actors)
            if pids is not None and POOL.keep(idle_group(self.key, self.pg, actors, pids, self.nodes, taken)):
                return
        kill_group(actors + spare_actors(taken, self.world), self.pg)

    def _give_back(self, taken: IdleGroup) -> bool:
        """Return a kept group whose workers refused a run's input (they raised; each is
        sound) to the pool, once each has let go of what it loaded; False if one does not."""
        return _released(self.actors) is not None and POOL.keep(taken)
