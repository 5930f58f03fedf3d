"""k worker actors on Ray, one per part, with peer serving and gloo all-reduce.

Each actor is a threaded Ray actor with two concurrency groups: ``train`` (one thread:
the coordinator's calls, dispatched by name through :meth:`Worker.call` —
:data:`~gnntrain.runtime.worker.CALLS` is the one list of them) and ``serve`` (several
threads: peers' sampling, feature and hidden-row requests, :data:`SERVE_CALLS`). A worker
therefore answers its peers while it trains, and all-to-all requests cannot deadlock
(RAY-NOTES: mutual calls hang unless the callee serves concurrently).

The coordinator's waits detect stalls, not long work: while workers are busy with a call
it polls each one's progress (phase, epoch, step or layer, answered on a serving thread,
plus the CPU time of its training thread) and fails the group only when none of the busy
workers has moved for ``cluster.stall_timeout_s`` (:class:`StallWatch`). A dead, raising
or stalled worker raises :class:`WorkerFailure` naming the worker, its phase, epoch and
step, and the cause; a long evaluation that keeps counting batches or layers, or keeps
computing, runs to its end. Peer requests keep a per-message timeout. Gradients are summed with torch.distributed (gloo on
CPU, NCCL on CUDA) whose process group carries the collective timeout.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from gnntrain.config import RunConfig
from gnntrain.models import ModelSpec
from gnntrain.runtime import interrupts
from gnntrain.runtime.cluster import trim_heap, worker_runtime_env
from gnntrain.runtime.codec import Encoded, TypedReply
from gnntrain.runtime.comm import wire_bytes
from gnntrain.runtime.dist_source import Peers
from gnntrain.runtime.faults import FaultInjector
from gnntrain.runtime.group import Watch, WorkerGroup
from gnntrain.runtime.placement import NODE_LABEL, alive_nodes, bundle_cpus
from gnntrain.runtime.worker import Worker, WorkerInfo
from gnntrain.runtime.worker_pool import POOL, IdleGroup, group_key, kill_group
from gnntrain.tasks import Task
from samplers import Neighbors
from samplers.base import Fanout


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


class RayPeers(Peers):
    """Peer requests as concurrent Ray calls, one per owner, with a timeout."""

    def __init__(self, handles: list[Any], rank: int, timeout_s: float) -> None:
        self.handles = handles
        self.rank = rank
        self.timeout_s = timeout_s

    def _gather(self, refs: dict[int, Any], what: str) -> dict[int, Any]:
        try:
            values = ray.get(list(refs.values()), timeout=self.timeout_s)
        except GetTimeoutError:
            raise TimeoutError(f"worker {self.rank}: {what} request to workers {sorted(refs)} "
                               f"got no reply within {self.timeout_s:.0f}s") from None
        return dict(zip(refs, values, strict=True))

    def sample(self, requests: dict[int, np.ndarray], fanout: Fanout, replace: bool,
               key: int) -> dict[int, Neighbors]:
        refs = {o: self.handles[o].serve.remote("sample", ids, fanout, replace, key, self.rank)
                for o, ids in requests.items()}
        return {o: Neighbors(*reply) for o, reply in self._gather(refs, "sample").items()}

    def features(self, requests: dict[int, np.ndarray],
                 dtype: str | tuple[str, ...]) -> dict[int, Encoded | TypedReply]:
        refs = {o: self.handles[o].serve.remote("features", ids, dtype, self.rank)
                for o, ids in requests.items()}
        return self._gather(refs, "feature")

    def hidden(self, requests: dict[int, np.ndarray], layer: int) -> dict[int, Encoded]:
        refs = {o: self.handles[o].serve.remote("hidden", ids, layer, self.rank)
                for o, ids in requests.items()}
        return self._gather(refs, "hidden-row")

    def embedding_rows(self, requests: dict[int, np.ndarray],
                       version: int | None) -> dict[int, np.ndarray]:
        refs = {o: self.handles[o].serve.remote("embedding_rows", ids, version, self.rank)
                for o, ids in requests.items()}
        return self._gather(refs, "embedding-row")

    def embedding_grads(self, requests: dict[int, tuple[np.ndarray, np.ndarray]], step: int) -> None:
        refs = {o: self.handles[o].serve.remote("embedding_grads", ids, grads, step, self.rank)
                for o, (ids, grads) in requests.items()}
        self._gather(refs, "embedding-gradient")


def whole_cpus() -> int:
    """The whole CPUs Ray reserved for this actor (``cluster.cpus_per_worker``): its torch
    threads, as Ray's ``OMP_NUM_THREADS`` convention has it; a share of a CPU (several
    workers on one) gets one thread."""
    return max(1, int(ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)))


class WorkerActor:
    """The Ray actor around :class:`Worker` (decorated in :func:`actor_class`)."""

    def __init__(self, cfg_raw: dict[str, Any], part_path: str, rank: int, world: int,
                 model: ModelSpec, task: Task) -> None:
        torch.set_num_threads(whole_cpus())
        self._store: Any = None
        self._train_thread: int | None = None  # pthread id of the thread running coordinator calls
        self.load(cfg_raw, part_path, rank, world, model, task)

    def load(self, cfg_raw: dict[str, Any], part_path: str, rank: int, world: int,
             model: ModelSpec, task: Task) -> None:
        """Take a run's config, rank and model, and load its part: at start-up, and again
        when a kept actor serves another run (:mod:`~gnntrain.runtime.worker_pool`)."""
        from partition import open_training_set

        self.cfg = RunConfig.model_validate(cfg_raw)
        self.rank = rank
        self.world = world
        self.model_spec = model
        self.task = task
        pset = open_training_set(part_path)
        self.part = pset.load_part(rank)
        self.degrees = pset.global_degrees()
        self.node_types = pset.node_types()
        self.num_classes = int(pset.num_classes)
        self.worker: Worker | None = None

    def address(self) -> tuple[str, int]:
        """Open the gloo rendezvous store on a port the OS picks, and return this node's IP
        and that port (asked of rank 0). The store keeps the port bound, so no other
        process can take it between choosing and using it."""
        import torch.distributed as dist

        self._store = dist.TCPStore("0.0.0.0", 0, self.world, is_master=True,
                                    timeout=timedelta(seconds=self.cfg.cluster.collective_timeout_s),
                                    wait_for_workers=False)
        return ray.util.get_node_ip_address(), int(self._store.port)

    def pid(self) -> int:
        return os.getpid()

    def setup(self, handles: list[Any], master: tuple[str, int], attempt: int = 0,
              backend: str = "gloo") -> dict[str, Any]:
        """Join the process group and build the worker. ``backend`` is ``nccl`` only
        when every worker holds a GPU of its own (NCCL refuses two ranks on one device);
        workers sharing a GPU sum their CUDA gradients with gloo through a host copy."""
        import torch.distributed as dist

        cc = self.cfg.cluster
        if self.world > 1:
            timeout = timedelta(seconds=cc.collective_timeout_s)
            store = self._store if self.rank == 0 else dist.TCPStore(
                master[0], master[1], self.world, is_master=False, timeout=timeout)
            dist.init_process_group(backend, store=store, rank=self.rank, world_size=self.world,
                                    timeout=timeout)

        def allreduce(t: torch.Tensor) -> torch.Tensor:
            if self.world == 1:
                return t
            if t.is_cuda and backend != "nccl":
                host = t.cpu()
                dist.all_reduce(host, op=dist.ReduceOp.SUM)
                return t.copy_(host)
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            return t

        peers = RayPeers(handles, self.rank, cc.call_timeout_s)
        self.worker = Worker(self.cfg, self.part, rank=self.rank, world=self.world,
                             degrees=self.degrees, num_classes=self.num_classes, peers=peers,
                             allreduce=allreduce, model=self.model_spec, task=self.task,
                             node_types=self.node_types,
                             step_hooks=list(FaultInjector.hooks(self.cfg.faults, self.rank, attempt)))
        return self.worker.info.to_dict()

    def _w(self) -> Worker:
        if self.worker is None:
            raise RuntimeError(f"worker {self.rank}: setup() was not called")
        return self.worker

    def call(self, name: str, *args: Any) -> Any:
        """A coordinator call (train group), by name: :data:`CALLS`; then the heap's free
        pages go back to the OS (:func:`~gnntrain.runtime.cluster.trim_heap`)."""
        self._train_thread = threading.get_ident()
        try:
            return self._w().call(name, *args)
        finally:
            trim_heap()

    def serve(self, name: str, *args: Any) -> Any:
        """A peer request (serve group), by name: :data:`SERVE_CALLS`."""
        return self._w().serve(name, *args)

    def shutdown(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()

    def release(self) -> int:
        """Leave the process group and drop the run's part, model and caches, to wait
        for the next run (:mod:`~gnntrain.runtime.worker_pool`); this process's id."""
        import gc

        self.shutdown()
        self.worker = None
        self.part = None  # type: ignore[assignment]
        self._store = None
        gc.collect()
        trim_heap()
        return os.getpid()

    def ping(self) -> int:
        return self.rank

    def node(self) -> str:
        """The id of the Ray node this worker runs on."""
        return str(ray.get_runtime_context().get_node_id())

    def progress(self) -> dict[str, Any]:
        """Where the training thread is, and the CPU seconds it has used (``cpu_s``, None
        where the platform cannot tell); answered on a serving thread, so even a stuck
        worker answers (a dead one does not)."""
        out = self.worker.progress if self.worker is not None else {"phase": "starting"}
        return {**out, "cpu_s": _thread_cpu_s(self._train_thread)}


def _thread_cpu_s(ident: int | None) -> float | None:
    """CPU seconds used so far by the thread ``ident`` (``threading.get_ident()``)."""
    if ident is None or not hasattr(time, "pthread_getcpuclockid"):
        return None
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ValueError):
        return None


@dataclass
class StallWatch:
    """When each worker last made progress, from successive :meth:`WorkerActor.progress`
    answers. A worker moved when its phase/epoch/step/layer changed or its training thread
    used CPU time (at least ``min_cpu_share`` of the wall time since it last moved, so a
    thread blocked in a wait, whose clock creeps by microseconds, does not count)."""

    limit_s: float
    min_cpu_share: float = 0.01
    _where: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    _cpu: dict[int, float] = field(default_factory=dict)
    _moved_at: dict[int, float] = field(default_factory=dict)

    def start(self, ranks: list[int], now: float) -> None:
        for r in ranks:
            self._moved_at[r] = now

    def update(self, rank: int, prog: dict[str, Any], now: float) -> None:
        if str(prog.get("phase", "")).startswith(("dead", "not answering")):
            return  # silence is never progress
        where = tuple(sorted((k, str(v)) for k, v in prog.items() if k not in ("cpu_s", "rank")))
        cpu = prog.get("cpu_s")
        if rank not in self._where:  # the first answer is the baseline
            self._where[rank] = where
            if cpu is not None:
                self._cpu[rank] = cpu
            return
        since = now - self._moved_at.get(rank, now)
        moved = where != self._where.get(rank)
        if cpu is not None and rank in self._cpu:
            used = cpu - self._cpu[rank]
            moved = moved or (used > 0.02 and used >= self.min_cpu_share * since)
        if moved:
            self._where[rank] = where
            if cpu is not None:
                self._cpu[rank] = cpu
        if moved:
            self._moved_at[rank] = now

    def still_for(self, rank: int, now: float) -> float:
        """Seconds since ``rank`` last moved."""
        return now - self._moved_at.get(rank, now)

    def stalled(self, ranks: list[int], now: float) -> bool:
        """None of ``ranks`` has moved for the limit."""
        return bool(ranks) and all(self.still_for(r, now) >= self.limit_s for r in ranks)


def _where(p: dict[str, Any]) -> str:
    """``phase`` and, where known, ``epoch``, ``step`` and ``layer`` of a progress answer."""
    return " ".join([str(p.get("phase"))] + [f"{k} {p[k]}" for k in ("epoch", "step", "layer") if k in p])


def _behind(prog: list[dict[str, Any]], default: int) -> int:
    """The worker to blame among ``prog``: a dead or silent one, else the one furthest
    behind (lowest epoch, step), else ``default``."""
    dead = [p for p in prog if str(p.get("phase", "")).startswith(("dead", "not answering"))]
    if dead:
        return int(dead[0]["rank"])
    placed = [p for p in prog if "step" in p and "epoch" in p]
    if len(placed) > 1:
        keys = [(p["epoch"], p["step"]) for p in placed]
        if max(keys) > min(keys):
            return int(placed[keys.index(min(keys))]["rank"])
    return default


def worker_processes(root: Any = None) -> list[Any]:
    """The worker-actor processes (``ray::GnnWorker``) descended from ``root`` (a
    ``psutil.Process``; default this process). Other Ray sessions' workers are never
    listed, so a drill or test that kills or counts them touches only its own."""
    import psutil

    root = root or psutil.Process()
    try:
        procs = root.children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            if "GnnWorker" in " ".join(p.cmdline()) + p.name():
                out.append(p)
        except psutil.Error:
            continue
    return out


_GROUPS = {"serve": ("serve", "ping", "progress", "node"),
           "train": ("address", "pid", "setup", "call", "shutdown", "load", "release")}


def actor_class(serve_threads: int = 4) -> Any:
    """``WorkerActor`` as a Ray actor class with its two concurrency groups."""
    cls = type("GnnWorker", (WorkerActor,), {})
    for group, names in _GROUPS.items():
        for name in names:
            setattr(cls, name, ray.method(concurrency_group=group)(getattr(WorkerActor, name)))
    return ray.remote(concurrency_groups={"train": 1, "serve": serve_threads})(cls)  # type: ignore[call-overload]


STARTUP_S = 120.0
"""The least time a worker may take to start (import torch and PyG, load its part) on a
loaded machine before it is reported as stalled."""


class RayGroup(WorkerGroup):
    """k :class:`WorkerActor` s in one placement group; the coordinator's side."""

    def __init__(self, cfg: RunConfig, part_path: str, world: int, model: ModelSpec, task: Task,
                 attempt: int = 0, nodes: list[str] | None = None) -> None:
        """``nodes``: the node id each rank is pinned to (:mod:`~gnntrain.runtime.placement`);
        None lets Ray pack the ranks where they fit."""
        self.cfg = cfg
        self.world = world
        self.stall_s = cfg.cluster.stall_timeout_s
        self.control_bytes = np.zeros(world, dtype=np.int64)
        self.control_messages = np.zeros(world, dtype=np.int64)
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
        cpus = [per] * world if nodes is None else bundle_cpus(nodes, alive_nodes(), per)
        raw = cfg.model_dump(mode="json")
        env = worker_runtime_env()  # allocator settings; user code the driver imported
        self.key = group_key(world, cpus, gpus, env, WorkerActor)
        self.healthy = True  # False once a call failed or was interrupted: never kept then
        self.actors: list[Any] = []
        self.pg: Any = None
        kept = POOL.take(self.key, nodes)
        if kept is not None:
            self.pg, self.actors = kept.pg, kept.actors
            try:
                self._get([a.load.remote(raw, part_path, r, world, model, task)
                           for r, a in enumerate(self.actors)], "start-up")
            except WorkerFailure:  # a kept worker died or cannot load: start a new group
                kill_group(self.actors, self.pg)
                self.pg, self.actors, self.healthy, kept = None, [], True, None
        try:
            if kept is None:
                POOL.make_room(sum(cpus), gpus * world)
                self._start(raw, env, cpus, gpus, nodes, part_path, model, task)
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

    def _start(self, raw: dict[str, Any], env: dict[str, Any], cpus: list[float], gpus: float,
               nodes: list[str] | None, part_path: str, model: ModelSpec, task: Task) -> None:
        """Place the group's bundles (one per rank, on ``nodes`` when pinned) and start
        its actors."""
        world = len(cpus)
        bundles = [{"CPU": c, **({"GPU": gpus} if gpus else {})} for c in cpus]
        self.pg = placement_group(bundles, strategy="PACK", **(
            {} if nodes is None else {"bundle_label_selector": [{NODE_LABEL: n} for n in nodes]}))
        if not self.pg.wait(timeout_seconds=int(max(10, self.cfg.cluster.connect_timeout_s))):
            remove_placement_group(self.pg)
            self.pg = None
            where = "" if nodes is None else f" on nodes {nodes} (by rank)"
            raise PlacementError(f"could not place {world} workers with {cpus} CPUs{where} on the cluster "
                                 f"({ray.cluster_resources()})")
        cls = actor_class()
        self.actors = [
            cls.options(num_cpus=cpus[r], num_gpus=gpus, max_restarts=0, name=None,
                        runtime_env=env,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(
                            placement_group=self.pg, placement_group_bundle_index=r)
                        ).remote(raw, part_path, r, world, model, task)
            for r in range(world)]

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
        culprit = _behind(prog, rank)
        state = "; ".join(f"worker {p['rank']}: {_where(p)}" for p in prog)
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
                    culprit = _behind(prog, busy[0])
                    still = stalls.still_for(culprit, now)
                    raise self._culprit(culprit, phase=phase, prog=prog, cause=(
                        f"worker {culprit} made no progress for {still:.0f}s "
                        f"(limit {stall_s:g}s, cluster.stall_timeout_s) at "
                        f"{_where(next(p for p in prog if p['rank'] == culprit))}; "
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
        :func:`~gnntrain.runtime.worker_pool.reuse_workers`, keep a healthy group instead."""
        actors, self.actors = self.actors, []
        if self.healthy and POOL.active and actors:
            try:
                pids = ray.get([a.release.remote() for a in actors], timeout=30)
            except Exception:  # noqa: BLE001 - a worker that cannot let go is not kept
                pids = None
            if pids is not None and POOL.keep(IdleGroup(self.key, actors, self.pg, pids, list(self.nodes))):
                return
        kill_group(actors, self.pg)
