"""A group of workers as the coordinator sees it: in-process (one) or Ray actors (k).

The coordinator's loop (:mod:`gnntrain.runtime.driver`) only talks to this interface —
one round of a named call (:data:`gnntrain.runtime.worker.CALLS`) to every worker — so
the single-process reference, the in-process loopback group and the Ray run share
every line of it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import torch

from gnntrain.config import RunConfig
from gnntrain.data.graph import Graph
from gnntrain.engine import no_allreduce
from gnntrain.models import ModelSpec
from gnntrain.runtime.worker import Worker, WorkerInfo
from gnntrain.tasks import Task
from partition import Part


class WorkerGroup(ABC):
    """``world`` workers; :meth:`call` is one round of calls to all of them."""

    world: int
    infos: list[WorkerInfo]

    @abstractmethod
    def call(self, name: str, *args: Any, phase: str, timeout: float | None = None) -> list[Any]:
        """Call ``name`` on every worker with the same arguments; the replies in rank order.
        ``phase`` names what the call is for in a failure message."""

    def call_one(self, rank: int, name: str, *args: Any, phase: str) -> Any:
        """Call ``name`` on worker ``rank`` only (default: on all, keep ``rank``'s reply)."""
        return self.call(name, *args, phase=phase)[rank]

    @property
    def train_counts(self) -> list[int]:
        return [i.train_examples for i in self.infos]

    @property
    def layerwise(self) -> bool:
        return all(i.layerwise for i in self.infos)

    @property
    def num_layers(self) -> int:
        return self.infos[0].num_layers

    def take_control(self) -> tuple[list[int], list[int]]:
        """Coordinator-to-worker bytes and messages since the last call (``control``)."""
        return [0] * self.world, [0] * self.world

    def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Release every resource the group holds (actors, placement group, processes)."""


def whole_graph_part(graph: Graph) -> Part:
    """The whole graph as the only part: owns every node, no halo."""
    n = graph.num_nodes
    return Part(part_id=0, offsets=np.array([0, n], dtype=np.int64), indptr=graph.indptr,
                indices=graph.indices, x=graph.x, y=graph.y, train_idx=graph.train_idx,
                val_idx=graph.val_idx, test_idx=graph.test_idx, orig_ids=np.arange(n, dtype=np.int64),
                halo_ids=np.empty(0, np.int64), halo_offsets=np.zeros(2, dtype=np.int64))


class LocalGroup(WorkerGroup):
    """The single-process reference: one :class:`Worker` over the whole graph."""

    def __init__(self, cfg: RunConfig, graph: Graph, model: ModelSpec, task: Task) -> None:
        self.world = 1
        if cfg.sampler.prefetch > 0:
            # leave one core to the sampling thread: oversubscribed cores doubled the epoch
            # time on the 2-core bench machine (bench/RESULTS.md, "epoch")
            torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
        self.worker = Worker(cfg, whole_graph_part(graph), rank=0, world=1,
                             degrees=graph.in_degrees(), num_classes=graph.num_classes, peers=None,
                             allreduce=no_allreduce, model=model, task=task)
        self.infos = [self.worker.info]

    def call(self, name: str, *args: Any, phase: str, timeout: float | None = None) -> list[Any]:
        return [self.worker.call(name, *args)]
