"""The Ray actor around :class:`~gnntrain.runtime.worker.Worker`: two concurrency groups,
``train`` (one thread: the coordinator's calls) and ``serve`` (several threads: peers'
requests and progress answers), so a worker answers its peers while it trains."""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from typing import IO, Any

import ray
import torch

from gnntrain.config import RunConfig
from gnntrain.models import ModelSpec
from gnntrain.runtime.cluster import trim_heap
from gnntrain.runtime.faults import FaultInjector
from gnntrain.runtime.ray_group.stall import thread_cpu_s
from gnntrain.runtime.ray_group.transport import RayPeers
from gnntrain.runtime.worker import Worker
from gnntrain.tasks import Task

__all__ = ["WorkerActor", "actor_class", "whole_cpus", "worker_processes"]


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
        from partition.staging import hold, stage_part

        self.cfg = RunConfig.model_validate(cfg_raw)
        self.rank = rank
        self.world = world
        self.model_spec = model
        self.task = task
        # a set on object storage: this worker's own part copied to node-local scratch first
        self.staged = stage_part(part_path, rank, scratch=self.cfg.cluster.scratch_dir,
                                 storage_options=self.cfg.partition.storage_options,
                                 max_bytes=self.cfg.cluster.scratch_max_bytes)
        held: IO[str] | None = getattr(self, "_staged_hold", None)
        if held is not None:  # a kept actor's earlier run
            held.close()
        # a staged copy is held while this worker reads it: no eviction removes it meanwhile
        self._staged_hold = hold(self.staged.path) if self.staged.source is not None else None
        pset = open_training_set(self.staged.path)
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
        return {**self.worker.info.to_dict(),
                "staging": self.staged.to_dict() if self.staged.source is not None else None}

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
        return {**out, "cpu_s": thread_cpu_s(self._train_thread)}


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
