"""k workers inside one process: peers called directly, all-reduce over threads.

Same :class:`WorkerCore` code as the Ray workers, with Ray taken out: the peer calls go
straight to the other cores' ``serve_*`` methods (so bytes are counted exactly as on
Ray), and gradients are summed by a thread barrier. Used by the scale simulator (which
never trains) and by fast tests of the distributed logic; ``RayGroup`` is the runtime.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from gnntrain.config import RunConfig
from gnntrain.runtime.codec import Encoded
from gnntrain.runtime.core import WorkerCore
from gnntrain.runtime.dist_source import Peers
from gnntrain.runtime.group import WorkerGroup
from partition import Part
from samplers import Neighbors


class LoopbackPeers(Peers):
    def __init__(self, cores: list[WorkerCore], rank: int) -> None:
        self.cores = cores
        self.rank = rank

    def sample(self, requests: dict[int, np.ndarray], fanout: int, replace: bool,
               key: int) -> dict[int, Neighbors]:
        out = {}
        for o, ids in requests.items():
            c, n = self.cores[o].serve_sample(ids, fanout, replace, key, self.rank)
            out[o] = Neighbors(counts=c, nbrs=n)
        return out

    def features(self, requests: dict[int, np.ndarray], dtype: str) -> dict[int, Encoded]:
        return {o: self.cores[o].serve_features(ids, dtype, self.rank) for o, ids in requests.items()}

    def hidden(self, requests: dict[int, np.ndarray], layer: int) -> dict[int, np.ndarray]:
        return {o: self.cores[o].serve_hidden(ids, layer, self.rank) for o, ids in requests.items()}


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
    """k cores in threads of this process."""

    def __init__(self, cfg: RunConfig, parts: list[Part], degrees: np.ndarray, num_classes: int) -> None:
        self.world = len(parts)
        self.cores: list[WorkerCore] = []
        reduce = ThreadAllReduce(self.world, cfg.cluster.collective_timeout_s)
        for r, part in enumerate(parts):
            peers = LoopbackPeers(self.cores, r)
            self.cores.append(WorkerCore(cfg, part, rank=r, world=self.world, degrees=degrees,
                                         num_classes=num_classes, peers=peers,
                                         allreduce=lambda t, r=r: reduce(r, t)))  # type: ignore[misc]
        self.train_counts = [int(p.train_idx.size) for p in parts]
        self._pool = ThreadPoolExecutor(max_workers=self.world)

    def _all(self, fn: Any) -> list[Any]:
        futs = [self._pool.submit(fn, c) for c in self.cores]
        return [f.result() for f in futs]

    def setup_cache(self) -> list[dict[str, Any]]:
        return self._all(lambda c: c.setup_cache())

    def train_epoch(self, epoch: int, steps: int) -> list[dict[str, Any]]:
        return self._all(lambda c: c.train_epoch(epoch, steps))

    def evaluate(self, epoch: int, mode: str) -> list[dict[str, Any]]:
        if mode == "sampled":
            return self._all(lambda c: c.eval_sampled(epoch))
        self._all(lambda c: c.eval_begin())
        for layer in range(self.cores[0].model.num_layers):
            self._all(lambda c: c.eval_layer(layer))  # noqa: B023 - called before the next iteration
        return self._all(lambda c: c.eval_counts())

    def comm_snapshots(self) -> list[dict[str, Any]]:
        return [c.comm_snapshot() for c in self.cores]

    def state(self) -> dict[str, Any]:
        return self.cores[0].state()

    def load_state(self, state: dict[str, Any]) -> None:
        for c in self.cores:
            c.load_state(state)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False)


__all__ = ["LoopbackGroup", "LoopbackPeers", "ThreadAllReduce"]
