"""k workers inside one process: peers called directly, all-reduce over threads.

Same :class:`~gnntrain.runtime.worker.Worker` code as the Ray workers, with Ray taken
out: the peer calls go straight to the other workers' :meth:`~Worker.serve` (so bytes are
counted exactly as on Ray), and gradients are summed by a thread barrier. Used by the
scale simulator (which never trains) and by fast tests of the distributed logic;
``RayGroup`` is the runtime.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnntrain.config import RunConfig
from gnntrain.models import ModelSpec
from gnntrain.runtime.codec import Encoded, TypedReply
from gnntrain.runtime.group import Watch, WorkerGroup
from gnntrain.runtime.routing import Peers
from gnntrain.runtime.worker import Worker
from gnntrain.tasks import Task
from samplers import Neighbors
from samplers.base import Fanout

if TYPE_CHECKING:
    from partition import Part


class LoopbackPeers(Peers):
    def __init__(self, workers: list[Worker], rank: int) -> None:
        self.workers = workers
        self.rank = rank

    def sample(self, requests: dict[int, np.ndarray], fanout: Fanout, replace: bool,
               key: int) -> dict[int, Neighbors]:
        out = {}
        for o, ids in requests.items():
            out[o] = Neighbors(*self.workers[o].serve("sample", ids, fanout, replace, key, self.rank))
        return out

    def features(self, requests: dict[int, np.ndarray],
                 dtype: str | tuple[str, ...]) -> dict[int, Encoded | TypedReply]:
        return {o: self.workers[o].serve("features", ids, dtype, self.rank) for o, ids in requests.items()}

    def hidden(self, requests: dict[int, np.ndarray], layer: int) -> dict[int, Encoded]:
        return {o: self.workers[o].serve("hidden", ids, layer, self.rank) for o, ids in requests.items()}

    def embedding_rows(self, requests: dict[int, np.ndarray],
                       version: int | None) -> dict[int, np.ndarray]:
        return {o: self.workers[o].serve("embedding_rows", ids, version, self.rank)
                for o, ids in requests.items()}

    def embedding_grads(self, requests: dict[int, tuple[np.ndarray, np.ndarray]], step: int) -> None:
        for o, (ids, grads) in requests.items():
            self.workers[o].serve("embedding_grads", ids, grads, step, self.rank)


class ThreadAllReduce:
    """Sum of one tensor per thread, in rank order (deterministic), with a timeout."""

    def __init__(self, world: int, timeout_s: float) -> None:
        self.world = world
        self.timeout_s = timeout_s
        self._slots: list[torch.Tensor | None] = [None] * world
        self._barrier = threading.Barrier(world, timeout=timeout_s)
        self._result: torch.Tensor | None = None

    def __call__(self, rank: int, t: torch.Tensor) -> torch.Tensor:
        self._slots[rank] = t
        if self._barrier.wait() == 0:
            self._result = torch.stack([s for s in self._slots if s is not None]).sum(0)
        self._barrier.wait()
        out = self._result
        assert out is not None
        self._barrier.wait()  # nobody overwrites slots before all have read the result
        return out.clone()


class LoopbackGroup(WorkerGroup):
    """k workers in threads of this process."""

    def __init__(self, cfg: RunConfig, parts: list[Part], degrees: np.ndarray, num_classes: int,
                 model: ModelSpec, task: Task, node_types: np.ndarray | None = None) -> None:
        self.world = len(parts)
        self.workers: list[Worker] = []
        reduce = ThreadAllReduce(self.world, cfg.cluster.collective_timeout_s)
        for r, part in enumerate(parts):
            self.workers.append(Worker(cfg, part, rank=r, world=self.world, degrees=degrees,
                                       num_classes=num_classes, peers=LoopbackPeers(self.workers, r),
                                       allreduce=lambda t, r=r: reduce(r, t),  # type: ignore[misc]
                                       model=model, task=task, node_types=node_types))
        self.infos = [w.info for w in self.workers]
        self._pool = ThreadPoolExecutor(max_workers=self.world)

    def call(self, name: str, *args: Any, phase: str, timeout: float | None = None,
             watch: Watch | None = None) -> list[Any]:
        futs = [self._pool.submit(w.call, name, *args) for w in self.workers]
        return [f.result(timeout=timeout) for f in futs]

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False)


__all__ = ["LoopbackGroup", "LoopbackPeers", "ThreadAllReduce"]
