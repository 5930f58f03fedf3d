"""A group of workers as the coordinator sees it: in-process (one) or Ray actors (k).

The coordinator's loop (:mod:`gnntrain.runtime.driver`) only talks to this interface,
so the single-process reference and the distributed run share every line of it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

import torch

from gnntrain.config import RunConfig
from gnntrain.engine import no_allreduce
from gnntrain.runtime.core import WorkerCore
from partition import Part
from partition.graph import Graph


class WorkerGroup(ABC):
    """Every method is one round of calls to all workers, bounded by a timeout."""

    world: int

    @abstractmethod
    def setup_cache(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def train_epoch(self, epoch: int, steps: int) -> list[dict[str, Any]]: ...

    @abstractmethod
    def evaluate(self, epoch: int, mode: str) -> list[dict[str, Any]]: ...

    @abstractmethod
    def comm_snapshots(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def state(self) -> dict[str, Any]: ...

    @abstractmethod
    def load_state(self, state: dict[str, Any]) -> None: ...

    def take_control(self) -> tuple[list[int], list[int]]:
        """Coordinator-to-worker bytes and messages since the last call (``control``)."""
        return [0] * self.world, [0] * self.world

    def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Release every resource the group holds (actors, placement group, processes)."""


def evaluate_core(core: WorkerCore, epoch: int, mode: str) -> dict[str, Any]:
    if mode == "sampled":
        return core.eval_sampled(epoch)
    core.eval_begin()
    for layer in range(core.model.num_layers):
        core.eval_layer(layer)
    return core.eval_counts()


class LocalGroup(WorkerGroup):
    """The single-process reference: one :class:`WorkerCore` over the whole graph."""

    def __init__(self, cfg: RunConfig, graph: Graph) -> None:
        self.world = 1
        if cfg.sampler.prefetch > 0:
            # leave one core to the sampling thread: oversubscribed cores doubled the epoch
            # time on the 2-core bench machine (bench/RESULTS.md, "epoch")
            torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
        part = Part.whole_graph(graph)  # owns every node, no halo
        self.core = WorkerCore(cfg, part, rank=0, world=1, degrees=graph.in_degrees(),
                               num_classes=graph.num_classes, peers=None, allreduce=no_allreduce)
        self.train_counts = [int(graph.train_idx.size)]

    def setup_cache(self) -> list[dict[str, Any]]:
        return [self.core.setup_cache()]

    def train_epoch(self, epoch: int, steps: int) -> list[dict[str, Any]]:
        return [self.core.train_epoch(epoch, steps)]

    def evaluate(self, epoch: int, mode: str) -> list[dict[str, Any]]:
        return [evaluate_core(self.core, epoch, mode)]

    def comm_snapshots(self) -> list[dict[str, Any]]:
        return [self.core.comm_snapshot()]

    def state(self) -> dict[str, Any]:
        return self.core.state()

    def load_state(self, state: dict[str, Any]) -> None:
        self.core.load_state(state)
