"""A worker's view of the partitioned embedding table: any node's row, gradients to owners.

:class:`DistEmbedding` reads a batch's input rows -- owned rows from this worker's
:class:`~gnntrain.embedding.EmbeddingShard`, the rest with one request per owner
(category ``embedding``) -- and, after backward, sends the gradients of the rows the
batch touched to their owners, one message per owner per step (``embedding_grad``).
Both route through the worker's :class:`~gnntrain.runtime.routing.PartitionPolicy`, as
sampling and features do, and are counted where they are sent, with the same rule
(:mod:`gnntrain.runtime.comm`).
It is the :class:`~gnntrain.engine.InputTable` the training step and evaluation use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from gnntrain.embedding import EmbeddingShard
from gnntrain.runtime.comm import wire_bytes
from gnntrain.runtime.routing import PartitionPolicy
from samplers import PreparedBatch


@dataclass
class EmbeddingStats:
    rows: int = 0
    remote_rows: int = 0
    grad_rows: int = 0
    remote_grad_rows: int = 0
    seconds: float = 0.0


class DistEmbedding:
    """Reads rows of any node and pushes gradients to their owners (see module docstring)."""

    def __init__(self, shard: EmbeddingShard, policy: PartitionPolicy, combine: str) -> None:
        self.shard = shard
        self.policy = policy
        self.combine_mode = combine
        self.stats = EmbeddingStats()

    # ------------------------------------------------------------------ reading
    def read(self, ids: np.ndarray) -> np.ndarray:
        """Rows of global ``ids`` as of this worker's current version (float32 ``[n, dim]``)."""
        t0 = time.perf_counter()
        version = self.shard.version
        route = self.policy.route(ids)
        out = np.empty((route.ids.size, self.shard.dim), dtype=np.float32)

        def own_rows(own: np.ndarray) -> np.ndarray:
            return self.shard.rows(self.policy.to_local(own), None)

        self.policy.fetch(route, out, own_rows, "embedding_rows", version)
        self.stats.remote_rows += int(route.ids.size - route.local.size)
        self.stats.rows += int(route.ids.size)
        self.stats.seconds += time.perf_counter() - t0
        return out

    def serve_rows(self, ids: np.ndarray, version: int | None, requester: int) -> np.ndarray:
        """A peer's read of rows this worker owns (counted here, as sent)."""
        rows = self.shard.rows(self.policy.to_local(np.asarray(ids, dtype=np.int64)), version)
        self.policy.comm.add("embedding", requester, wire_bytes(rows))
        return rows

    def combine(self, x: Tensor, rows: Tensor) -> Tensor:
        """The model's input from feature rows ``x`` and embedding rows (``model.node_embedding.combine``)."""
        if self.combine_mode == "concat":
            return torch.cat([x.to(rows.dtype), rows], dim=1)
        if self.combine_mode == "sum":
            return x.to(rows.dtype) + rows
        return rows

    def attach(self, batch: PreparedBatch, input_nodes: np.ndarray, *,
               grad: bool) -> tuple[PreparedBatch, Tensor]:
        """``batch`` with its input rows combined with the embedding rows of
        ``input_nodes``; returns the embedding rows too (a leaf that collects gradients
        when ``grad``)."""
        rows = torch.from_numpy(self.read(input_nodes)).to(batch.x.device)
        rows.requires_grad_(grad)
        return replace(batch, x=self.combine(batch.x, rows)), rows

    # ------------------------------------------------------------------ updates
    def push(self, ids: np.ndarray, grads: np.ndarray) -> None:
        """Send this step's gradients of rows ``ids`` to their owners (own rows recorded
        directly); returns once every owner holds them."""
        t0 = time.perf_counter()
        step = self.shard.version
        route = self.policy.route(ids)
        own = route.local
        if own.size:
            self.shard.add_grads(step, self.policy.rank, self.policy.to_local(route.ids[own]),
                                 np.ascontiguousarray(grads[own]))
        requests = {q: (route.ids[p], np.ascontiguousarray(grads[p])) for q, p in route.remote.items()}
        self.policy.ask("embedding_grads", requests, step)
        self.stats.remote_grad_rows += int(route.ids.size - own.size)
        self.stats.grad_rows += int(route.ids.size)
        self.stats.seconds += time.perf_counter() - t0

    def serve_grads(self, ids: np.ndarray, grads: np.ndarray, step: int, requester: int) -> None:
        """A peer's gradients for rows this worker owns (the empty reply counted here)."""
        self.shard.add_grads(step, requester, self.policy.to_local(np.asarray(ids, dtype=np.int64)), grads)
        self.policy.comm.add("embedding_grad", requester, wire_bytes(None))

    def step(self, input_nodes: np.ndarray | None, rows: Tensor | None) -> None:
        """After backward: push the gradients of ``rows`` (zeros where the model did not
        use a row; nothing for an empty batch)."""
        if input_nodes is None or rows is None:
            return
        grad = rows.grad if rows.grad is not None else torch.zeros_like(rows)
        self.push(input_nodes, grad.detach().to(torch.float32).cpu().numpy())

    def apply(self, count: float) -> None:
        """After the step's all-reduce (every worker's gradients are in): update own rows."""
        t0 = time.perf_counter()
        self.shard.apply(count)
        self.stats.seconds += time.perf_counter() - t0
