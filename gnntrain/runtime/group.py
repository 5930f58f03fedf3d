"""A group of workers as the coordinator sees it: in-process (one) or Ray actors (k).

The coordinator's loop (:mod:`gnntrain.runtime.driver`) only talks to this interface —
one round of a named call (:data:`gnntrain.runtime.worker.CALLS`) to every worker — so
the single-process reference, the in-process loopback group and the Ray run share
every line of it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch

from gnntrain.config import RunConfig
from gnntrain.engine import no_allreduce
from gnntrain.models import ModelSpec
from gnntrain.runtime.worker import Worker, WorkerInfo
from gnntrain.tasks import Task
from partition import Part
from partition.graph import Graph

Watch = Callable[[list[dict[str, Any]]], None]
"""Sees the workers' progress answers (``rank``, ``phase`` and the counters of
:class:`~gnntrain.runtime.part_access.Progress`) while a call runs: a progress bar."""


class WorkerGroup(ABC):
    """``world`` workers; :meth:`call` is one round of calls to all of them."""

    world: int
    infos: list[WorkerInfo]

    @abstractmethod
    def call(self, name: str, *args: Any, phase: str, timeout: float | None = None,
             watch: Watch | None = None) -> list[Any]:
        """Call ``name`` on every worker with the same arguments; the replies in rank order.
        ``phase`` names what the call is for in a failure message; ``watch``, where the
        group can poll its workers while they work, sees their progress."""

    def call_one(self, rank: int, name: str, *args: Any, phase: str) -> Any:
        """Call ``name`` on worker ``rank`` only (default: on all, keep ``rank``'s reply)."""
        return self.call(name, *args, phase=phase)[rank]

    @property
    def train_counts(self) -> list[int]:
        return [i.train_examples for i in self.infos]

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph: every worker's part together."""
        return sum(i.owned_nodes for i in self.infos)

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


class LocalGroup(WorkerGroup):
    """The single-process reference: one :class:`Worker` over the whole graph."""

    def __init__(self, cfg: RunConfig, graph: Graph, model: ModelSpec, task: Task) -> None:
        self.world = 1
        if cfg.sampler.prefetch > 0:
            # leave one core to the sampling thread: oversubscribed cores doubled the epoch
            # time on the 2-core bench machine (docs/benchmarks/epoch.md)
            torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
        self.worker = Worker(cfg, Part.whole_graph(graph), rank=0, world=1,
                             degrees=graph.in_degrees(), num_classes=graph.num_classes, peers=None,
                             allreduce=no_allreduce, model=model, task=task,
                             node_types=graph.node_types())
        self.infos = [self.worker.info]

    def call(self, name: str, *args: Any, phase: str, timeout: float | None = None,
             watch: Watch | None = None) -> list[Any]:
        return [self.worker.call(name, *args)]  # in this thread: nothing to poll
