"""A worker's view of the partitioned embedding table: any node's row, gradients to owners.

:class:`DistEmbedding` reads a batch's input rows -- owned rows from this worker's
:class:`~gnntrain.embedding.EmbeddingShard`, the rest with one request per owner
(category ``embedding``) -- and, after backward, sends the gradients of the rows the
batch touched to their owners, one message per owner per step (``embedding_grad``).
Both go through the same :class:`~gnntrain.runtime.dist_source.Peers` as sampling and
features and are counted where they are sent, with the same rule (:mod:`gnntrain.runtime.comm`).
It is the :class:`~gnntrain.engine.InputTable` the training step and evaluation use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from gnntrain.embedding import EmbeddingShard
from gnntrain.runtime.comm import CommCounter, wire_bytes
from gnntrain.runtime.dist_source import Peers, group_by_owner
from partition import PartitionBook
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

    def __init__(self, shard: EmbeddingShard, book: PartitionBook, rank: int, start: int,
                 peers: Peers, comm: CommCounter, combine: str) -> None:
        self.shard = shard
        self.book = book
        self.rank = rank
        self.start = start
        self.peers = peers
        self.comm = comm
        self.combine_mode = combine
        self.stats = EmbeddingStats()

    # ------------------------------------------------------------------ reading
    def read(self, ids: np.ndarray) -> np.ndarray:
        """Rows of global ``ids`` as of this worker's current version (float32 ``[n, dim]``)."""
        t0 = time.perf_counter()
        ids = np.asarray(ids, dtype=np.int64)
        version = self.shard.version
        out = np.empty((ids.size, self.shard.dim), dtype=np.float32)
        local_pos, groups = group_by_owner(self.book.owner(ids), self.rank)
        if local_pos.size:
            out[local_pos] = self.shard.rows(ids[local_pos] - self.start, None)
        requests = {o: ids[p] for o, p in groups.items()}
        self.comm.add_requests("embedding", "embedding_rows", requests, version)
        if requests:
            replies = self.peers.embedding_rows(requests, version)
            for o, p in groups.items():
                out[p] = replies[o]
                self.stats.remote_rows += int(p.size)
        self.stats.rows += int(ids.size)
        self.stats.seconds += time.perf_counter() - t0
        return out

    def serve_rows(self, ids: np.ndarray, version: int | None, requester: int) -> np.ndarray:
        """A peer's read of rows this worker owns (counted here, as sent)."""
        rows = self.shard.rows(np.asarray(ids, dtype=np.int64) - self.start, version)
        self.comm.add("embedding", requester, wire_bytes(rows))
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
        ids = np.asarray(ids, dtype=np.int64)
        local_pos, groups = group_by_owner(self.book.owner(ids), self.rank)
        if local_pos.size:
            self.shard.add_grads(step, self.rank, ids[local_pos] - self.start,
                                 np.ascontiguousarray(grads[local_pos]))
        requests = {o: (ids[p], np.ascontiguousarray(grads[p])) for o, p in groups.items()}
        self.comm.add_requests("embedding_grad", "embedding_grads", requests, step)
        self.stats.remote_grad_rows += sum(int(req.size) for req, _ in requests.values())
        if requests:
            self.peers.embedding_grads(requests, step)
        self.stats.grad_rows += int(ids.size)
        self.stats.seconds += time.perf_counter() - t0

    def serve_grads(self, ids: np.ndarray, grads: np.ndarray, step: int, requester: int) -> None:
        """A peer's gradients for rows this worker owns (the empty reply counted here)."""
        self.shard.add_grads(step, requester, np.asarray(ids, dtype=np.int64) - self.start, grads)
        self.comm.add("embedding_grad", requester, wire_bytes(None))

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
