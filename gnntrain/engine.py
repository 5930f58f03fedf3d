"""The training step and the batch pipeline shared by the single-process trainer and
every distributed worker.

One step reads as nanoGPT's loop does: take the next prepared batch, forward and summed
loss (the task's :meth:`~gnntrain.tasks.Task.training_step`), backward, **all-reduce** the
flattened gradients together with the example count, divide by the global count, step. With a no-op all-reduce this is the single-process
reference; with gloo it is data-parallel training whose gradient equals that of the
mean loss over the union of all workers' batches.
"""

from __future__ import annotations

import hashlib
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from gnntrain.models import BlockNeeds, flat_grads, set_flat_grads
from gnntrain.precision import FP32, Precision
from gnntrain.tasks import MetricState, SeedBatch, Task
from samplers import Block, NeighborSampler, PreparedBatch, SampledBatch, prepare

AllReduce = Callable[[Tensor], Tensor]
"""Sums a 1-d float tensor across all workers and returns the sum (identity for one)."""


def no_allreduce(t: Tensor) -> Tensor:
    return t


class FeatureReader(Protocol):
    """Reads feature rows (and graph in-degrees and node types) of global node ids: the one
    feature protocol (samplers return structure only). Every run reads through
    :class:`gnntrain.runtime.dist_source.DistFeatureReader`, a single process as one worker
    owning every row."""

    def read(self, ids: np.ndarray) -> np.ndarray | Tensor: ...

    def degrees(self, ids: np.ndarray) -> np.ndarray: ...

    def node_types(self, ids: np.ndarray) -> np.ndarray: ...


class InputTable(Protocol):
    """A trainable input table (learnable node embeddings,
    :class:`gnntrain.runtime.dist_embedding.DistEmbedding`): its rows join a batch's input
    at step time (never prefetched: the previous step's update must be in them), their
    gradients go to the rows' owners after backward, and the owners apply the step after
    the all-reduce."""

    def attach(self, batch: PreparedBatch, input_nodes: np.ndarray, *,
               grad: bool) -> tuple[PreparedBatch, Tensor]: ...

    def step(self, input_nodes: np.ndarray | None, rows: Tensor | None) -> None: ...

    def apply(self, count: float) -> None: ...


def mix_seed(*parts: int | str) -> int:
    """A 63-bit integer key derived from ``parts`` (stable across processes and runs)."""
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1


def steps_per_epoch(train_counts: Sequence[int], batch_size: int) -> int:
    """Steps every worker runs: enough for the part with the most training nodes.

    Fixed by the coordinator from all parts' counts, so every worker runs the same
    number of collectives (no DistDGL #3538 deadlock when parts differ).
    """
    return max(1, math.ceil(max(train_counts) / batch_size))


def locality_order(indptr: np.ndarray, indices: np.ndarray, start: int, train_ids: np.ndarray) -> np.ndarray:
    """Training ids ordered by reverse Cuthill-McKee over the part's own edges.

    Neighbouring seeds end up next to each other, so a contiguous batch of them shares
    much of its sampled neighbourhood (fewer distinct input nodes, fewer remote rows).
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    n = indptr.shape[0] - 1
    local = indices - start
    keep = (local >= 0) & (local < n)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))[keep]
    a = sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, local[keep])), shape=(n, n))
    a = (a + a.T).tocsr()
    perm = reverse_cuthill_mckee(a, symmetric_mode=True)
    is_train = np.zeros(n, dtype=bool)
    is_train[train_ids - start] = True
    return (perm[is_train[perm]] + start).astype(np.int64)


def make_optimizer(model: torch.nn.Module, optimizer: str, lr: float,
                   weight_decay: float) -> torch.optim.Optimizer:
    """``train.optimizer`` over the model's parameters."""
    if optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)


@dataclass
class Prepared:
    """A prepared batch plus what it cost to make."""

    batch: PreparedBatch | None
    sample_s: float
    fetch_s: float
    num_input: int
    num_edges: int
    input_nodes: np.ndarray | None = None
    ready: torch.cuda.Event | None = None
    """On a GPU, recorded on the pipeline's copy stream once the batch is on the device."""


class BatchPipeline:
    """Samples and fetches batches on a background thread, ``prefetch`` ahead.

    Sampling of batch t+1 overlaps training on batch t; the consumer's wait for the
    queue is reported as ``wait_s`` (the share of the epoch spent waiting on data).
    Exceptions on the producer thread are re-raised in the consumer.

    On a GPU (``device`` cuda, ``prefetch`` > 0) the background thread works on a CUDA
    stream of its own: the device sampler's hops, the gathers from the feature table, the
    copies of rows fetched from peers and of the batch to the device run there while the
    training step runs on the current stream; the consumer's stream waits for each batch's
    ``ready`` event before using it, and the batch's tensors are recorded on that stream so
    the allocator keeps them until the step is done with them.
    """

    def __init__(self, sampler: NeighborSampler, reader: FeatureReader,
                 targets: Callable[[SeedBatch], np.ndarray], batches: list[SeedBatch],
                 keys: list[int], *, prefetch: int, needs: BlockNeeds, pin: bool = False,
                 device: torch.device | None = None) -> None:
        self.sampler = sampler
        self.reader = reader
        self.targets = targets
        self.batches = batches
        self.keys = keys
        self.needs = needs
        self.pin = pin  # CUDA: page-locked host memory so the copy to the GPU is asynchronous
        self.wait_s = 0.0
        self._q: queue.Queue[Prepared | BaseException] = queue.Queue(maxsize=max(1, prefetch))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.device = device
        self._stream = (torch.cuda.Stream(device) if prefetch > 0 and device is not None and device.type == "cuda"
                        else None)
        if prefetch > 0:
            self._thread = threading.Thread(target=self._produce, name="batch-prefetch", daemon=True)
            self._thread.start()

    def make(self, i: int) -> Prepared:
        seeds = self.batches[i]
        if seeds.empty:
            return Prepared(None, 0.0, 0.0, 0, 0)
        t0 = time.perf_counter()
        sb: SampledBatch = self.sampler.sample(seeds.nodes, self.keys[i], seeds.exclude)
        t1 = time.perf_counter()
        x = self.reader.read(sb.input_nodes)
        deg = self.reader.degrees(sb.input_nodes).astype(np.float32) if self.needs.degrees else None
        types = self.reader.node_types(sb.input_nodes) if self.needs.node_types else None
        pb = prepare(sb, x, self.targets(seeds), deg, types)
        if self.pin:
            pb = pb.pin_memory()
        t2 = time.perf_counter()
        return Prepared(pb, t1 - t0, t2 - t1, int(sb.input_nodes.shape[0]), int(sb.num_sampled_edges),
                        sb.input_nodes)

    def _make_on_stream(self, i: int, stream: torch.cuda.Stream) -> Prepared:
        """:meth:`make` with its device work, and the batch's copy to the device, on ``stream``."""
        with torch.cuda.stream(stream):
            item = self.make(i)
            if item.batch is not None:
                item.batch = item.batch.to(stream.device, non_blocking=True)
                item.ready = torch.cuda.Event()
                item.ready.record(stream)
        return item

    def _produce(self) -> None:
        try:
            for i in range(len(self.batches)):
                if self._stop.is_set():
                    return
                item = self.make(i) if self._stream is None else self._make_on_stream(i, self._stream)
                while not self._stop.is_set():
                    try:
                        self._q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # re-raised in the consumer
            self._q.put(e)

    def __iter__(self) -> Iterator[Prepared]:
        for i in range(len(self.batches)):
            if self._thread is None:
                yield self.make(i)
                continue
            t0 = time.perf_counter()
            item = self._q.get()
            self.wait_s += time.perf_counter() - t0
            if isinstance(item, BaseException):
                raise item
            if item.ready is not None and item.batch is not None:
                current = torch.cuda.current_stream(self.device)
                current.wait_event(item.ready)
                for t in item.batch.tensors():
                    t.record_stream(current)
            yield item

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._stream is not None:  # work still queued there (batches made but not taken) ends here
            self._stream.synchronize()


@dataclass
class EpochStats:
    """Per-worker figures of one epoch; times in seconds."""

    epoch: int
    steps: int = 0
    examples: int = 0
    loss_sum: float = 0.0
    state: MetricState = field(default_factory=dict)
    sample_s: float = 0.0
    fetch_s: float = 0.0
    compute_s: float = 0.0
    sync_s: float = 0.0
    wait_s: float = 0.0
    total_s: float = 0.0
    input_nodes: int = 0
    sampled_edges: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = {k: np.asarray(v).tolist() for k, v in self.state.items()}
        return out


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, task: Task, item: Prepared,
               allreduce: AllReduce, stats: EpochStats, device: torch.device | None = None,
               table: InputTable | None = None, precision: Precision = FP32,
               clip_norm: float | None = None) -> None:
    """One synchronous step. Every worker calls it once per step, even with an empty batch,
    so the all-reduce always has all participants. With a trainable input ``table`` its
    rows are read now, their gradients reach the owners before the all-reduce, and the
    owners update them after it. ``precision``: the forward and loss run under its
    autocast; gradients, their all-reduce, the table and the optimizer stay float32.
    ``clip_norm`` (``train.grad_clip_norm``) clips the all-reduced gradients before the step."""
    device = device or torch.device("cpu")
    model.train()
    opt.zero_grad(set_to_none=False)
    t0 = time.perf_counter()
    local = torch.zeros(2, device=device)
    if item.batch is not None:
        batch = item.batch.to(device, non_blocking=True)
        rows = None
        if table is not None:
            assert item.input_nodes is not None
            batch, rows = table.attach(batch, item.input_nodes, grad=True)
        with precision.autocast():
            out = task.training_step(model, batch)
        precision.backward(out.loss_sum)
        if table is not None:
            if rows is not None and rows.grad is not None and precision.scaler is not None:
                rows.grad.div_(precision.scaler.get_scale())  # the table takes true gradients
            table.step(item.input_nodes, rows)
        local = torch.stack([torch.tensor(float(out.count), device=device),
                             out.loss_sum.detach().to(torch.float32)])
        stats.state = task.merge([stats.state, out.state])
    # gradient sync: one flat buffer holding every gradient, the float buffers (BatchNorm
    # running statistics, averaged so replicas stay equal, as SyncBatchNorm-style training
    # expects) and (count, loss, 1); the last sums to the number of workers
    floats = [b for b in model.buffers() if b.is_floating_point()]
    buf = torch.cat([flat_grads(model).to(device), *[b.reshape(-1).to(torch.float32) for b in floats],
                     local, torch.ones(1, device=device)])
    t1 = time.perf_counter()
    buf = allreduce(buf)
    t2 = time.perf_counter()
    count, world = float(buf[-3]), float(buf[-1])
    n_grad = buf.numel() - 3 - sum(b.numel() for b in floats)
    offset = n_grad
    for b in floats:
        b.copy_((buf[offset:offset + b.numel()] / world).view_as(b))
        offset += b.numel()
    if count > 0:
        set_flat_grads(model, buf[:n_grad] / count)
        precision.step(opt, clip_norm)
    if table is not None:
        table.apply(count)
    stats.steps += 1
    stats.examples += int(local[0])
    stats.loss_sum += float(local[1])
    stats.compute_s += (t1 - t0) + (time.perf_counter() - t2)
    stats.sync_s += t2 - t1
    stats.input_nodes += item.num_input
    stats.sampled_edges += item.num_edges
    stats.sample_s += item.sample_s
    stats.fetch_s += item.fetch_s


def run_epoch(model: torch.nn.Module, opt: torch.optim.Optimizer, task: Task, pipeline: BatchPipeline,
              allreduce: AllReduce, epoch: int,
              on_step: Callable[[int], None] | None = None,
              device: torch.device | None = None, table: InputTable | None = None,
              precision: Precision = FP32, clip_norm: float | None = None) -> EpochStats:
    stats = EpochStats(epoch=epoch)
    t0 = time.perf_counter()
    try:
        for step, item in enumerate(pipeline):
            train_step(model, opt, task, item, allreduce, stats, device, table, precision, clip_norm)
            if on_step is not None:
                on_step(step)
    finally:
        pipeline.close()
    stats.wait_s = pipeline.wait_s
    stats.total_s = time.perf_counter() - t0
    return stats


@torch.no_grad()
def layer_forward(model: torch.nn.Module, layer: int, h_all: Tensor, indptr: np.ndarray,
                  local_indices: np.ndarray, deg_all: Tensor | None, *, chunk: int = 8192,
                  type_all: Tensor | None = None, rel: np.ndarray | None = None,
                  precision: Precision = FP32) -> Tensor:
    """Layer ``layer`` (the model's ``layer(i, block, h)``) for every destination row of a
    CSR, over all in-neighbours.

    ``h_all`` holds the previous layer's rows of every node the CSR names, in the same
    local numbering as ``local_indices`` (``deg_all`` / ``type_all`` their degrees and node
    types when the model reads them; ``rel`` the CSR's per-edge relation ids on a typed
    graph); destination row ``r`` is local node ``r``
    (owned rows come first). Rows are processed in chunks, each one block whose dst nodes
    are the chunk's rows, to bound memory. The layer runs under ``precision``'s autocast;
    the rows returned are float32 (peers read them as float32 arrays).
    """
    model.eval()
    device = next(model.parameters()).device
    layer_fn: Callable[[int, Block, Tensor], Tensor] = model.layer  # type: ignore[assignment]
    n_dst = indptr.shape[0] - 1
    outs = []
    for a in range(0, n_dst, chunk):
        b = min(n_dst, a + chunk)
        lo, hi = int(indptr[a]), int(indptr[b])
        nbr = local_indices[lo:hi]
        # block-local numbering: the chunk's own rows first, then the neighbours
        uniq, inv = np.unique(nbr, return_inverse=True)
        src_ids = np.concatenate([np.arange(a, b, dtype=np.int64), uniq])
        dst_local = np.repeat(np.arange(b - a, dtype=np.int64), np.diff(indptr[a:b + 1]))
        edge_index = torch.from_numpy(np.stack([inv.astype(np.int64) + (b - a), dst_local]))
        sel = torch.from_numpy(src_ids)
        block = Block(edge_index.to(device), int(src_ids.size), b - a,
                      torch.from_numpy(indptr[a:b + 1].astype(np.int64) - lo).to(device),
                      deg_all[sel].to(device) if deg_all is not None else None,
                      type_all[sel].to(device) if type_all is not None else None,
                      None if rel is None else torch.from_numpy(np.array(rel[lo:hi], dtype=np.int64)).to(device))
        with precision.autocast():
            out = layer_fn(layer, block, h_all[sel].to(device))
        outs.append(out.to("cpu", torch.float32))
    if not outs:
        raise ValueError("layer_forward: the CSR has no destination rows (an empty part)")
    return torch.cat(outs)
