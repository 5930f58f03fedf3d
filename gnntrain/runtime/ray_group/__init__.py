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

The package by job: :mod:`~gnntrain.runtime.ray_group.transport` (peer requests as Ray
calls), :mod:`~gnntrain.runtime.ray_group.actor` (the actor around :class:`Worker`),
:mod:`~gnntrain.runtime.ray_group.stall` (telling a stalled worker from a busy one) and
:mod:`~gnntrain.runtime.ray_group.group` (the coordinator's side: start, call, wait, shut down).
"""

from gnntrain.runtime.ray_group.actor import WorkerActor, actor_class, whole_cpus, worker_processes
from gnntrain.runtime.ray_group.group import (
    SALVAGE_S,
    STARTUP_S,
    GivenPlacement,
    PlacementError,
    RayGroup,
    Survivors,
    WorkerFailure,
)
from gnntrain.runtime.ray_group.stall import StallWatch
from gnntrain.runtime.ray_group.transport import RayPeers

__all__ = ["SALVAGE_S", "STARTUP_S", "GivenPlacement", "PlacementError", "RayGroup", "RayPeers", "StallWatch",
           "Survivors", "WorkerActor", "WorkerFailure", "actor_class", "whole_cpus", "worker_processes"]
