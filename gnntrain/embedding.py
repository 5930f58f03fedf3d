"""Learnable node embeddings: one worker's shard of a partitioned table, updated sparsely.

The table (``model.node_embedding``) holds one row per node and is split by the
partition book like the features: a worker owns the rows of its part and nothing else,
so no process ever holds the whole table. :class:`EmbeddingShard` is that part's rows
and their optimizer state. Per step, every worker sends the gradients of the rows its
batch touched to their owners (:meth:`EmbeddingShard.add_grads`); once the step's
all-reduce has completed -- so every worker's gradients have arrived -- each owner sums
the contributions for each row, divides by the global example count (as the dense
gradients are) and updates the touched rows (:meth:`EmbeddingShard.apply`).

Reads of another owner's rows name the table **version** (the steps applied) the
reader has reached; the owner answers once it has applied as many, so a step never sees
a row from before the previous step's update. Rows of a trainable table are never cached.

Optimizers (row-wise, on the touched rows only):

* ``sgd`` -- ``row -= lr * g``; equal to dense SGD (untouched rows have zero gradient).
* ``sparse_adagrad`` -- ``sum += g^2; row -= lr * g / (sqrt(sum) + 1e-10)``; equal to
  ``torch.optim.Adagrad`` on the whole table: a dense step leaves rows with zero
  gradient unchanged too.
* ``sparse_adam`` -- dense Adam's formula (``torch.optim.Adam``, betas 0.9/0.999, eps
  1e-8, bias correction with the table's step count) applied **lazily**: the moments of a
  row advance only on steps that touch it (PyTorch's ``SparseAdam`` semantics). It equals
  dense Adam on rows touched at every step; on other rows dense Adam would keep decaying
  the moments and moving the row, which a sparse update does not.

Initial rows depend only on ``(seed, original node id, column)`` (a counter-based hash),
so every partitioning -- one process or k workers -- starts from the same table.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnntrain.config import NodeEmbeddingConfig

STATE_NAMES: dict[str, tuple[str, ...]] = {
    "sgd": (),
    "sparse_adagrad": ("sum",),
    "sparse_adam": ("exp_avg", "exp_avg_sq"),
}
"""Per-row optimizer state arrays each optimizer keeps (same shape as the table)."""

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
ADAGRAD_EPS = 1e-10
_INIT_CHUNK = 1 << 16  # rows initialised per vectorised chunk


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, element-wise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _uniform01(orig_ids: np.ndarray, dim: int, key: int, stream: int) -> np.ndarray:
    """Uniform (0, 1) values ``[len(orig_ids), dim]``, a pure function of (key, id, column)."""
    counter = (orig_ids.astype(np.uint64)[:, None] * np.uint64(dim)
               + np.arange(dim, dtype=np.uint64)[None, :])
    with np.errstate(over="ignore"):
        mixed = _splitmix64(counter ^ np.uint64(key) ^ (np.uint64(stream) << np.uint64(62)))
    return ((mixed >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def init_rows(orig_ids: np.ndarray, dim: int, *, seed: int, init: str, scale: float) -> np.ndarray:
    """Initial rows of nodes ``orig_ids`` (float32 ``[n, dim]``)."""
    from gnntrain.engine import mix_seed

    key = mix_seed(seed, "node_embedding")
    u = _uniform01(np.asarray(orig_ids, dtype=np.int64), dim, key, 0)
    if init == "uniform":
        return ((2.0 * u - 1.0) * scale).astype(np.float32)
    if init == "normal":  # Box-Muller on two independent streams
        v = _uniform01(np.asarray(orig_ids, dtype=np.int64), dim, key, 1)
        return (np.sqrt(-2.0 * np.log(u)) * np.cos(2.0 * np.pi * v) * scale).astype(np.float32)
    raise ValueError(f"model.node_embedding.init={init!r}: expected 'normal' or 'uniform'")


class EmbeddingShard:
    """The rows of one part (local row ``i`` = the part's ``i``-th owned node) and their
    optimizer state; thread-safe between the training thread and the serving threads."""

    def __init__(self, cfg: NodeEmbeddingConfig, orig_ids: np.ndarray, *, seed: int,
                 wait_timeout_s: float = 120.0) -> None:
        self.cfg = cfg
        self.num_rows = int(orig_ids.shape[0])
        self.dim = int(cfg.dim)
        self.wait_timeout_s = wait_timeout_s
        names = STATE_NAMES[cfg.optimizer]
        nbytes = 4 * self.num_rows * self.dim * (1 + len(names))
        self.scratch: Path | None = None
        if cfg.mmap_above_mb is not None and nbytes > cfg.mmap_above_mb * 2**20:
            self.scratch = Path(tempfile.mkdtemp(prefix="gnntrain-embedding-"))
            weakref.finalize(self, shutil.rmtree, str(self.scratch), True)
        self.table = self._alloc("table")
        for a in range(0, self.num_rows, _INIT_CHUNK):
            b = min(self.num_rows, a + _INIT_CHUNK)
            self.table[a:b] = init_rows(orig_ids[a:b], self.dim, seed=seed, init=cfg.init,
                                        scale=cfg.init_scale)
        self.state = {n: self._alloc(n) for n in names}
        self.steps = 0  # optimizer steps taken (Adam's bias correction)
        self.version = 0  # steps applied, with or without examples
        self.dry = False  # the scale simulator: reads never wait, gradients are dropped
        self._pending: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
        self._cond = threading.Condition()

    def _alloc(self, name: str) -> np.ndarray:
        shape = (self.num_rows, self.dim)
        if self.scratch is None:
            return np.zeros(shape, dtype=np.float32)
        return np.lib.format.open_memmap(self.scratch / f"{name}.npy", mode="w+",
                                         dtype=np.float32, shape=shape)

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes + sum(s.nbytes for s in self.state.values()))

    def rows(self, local: np.ndarray, version: int | None) -> np.ndarray:
        """Rows ``local`` once ``version`` steps have been applied here (``None``: now)."""
        with self._cond:
            if version is not None and not self.dry and not self._cond.wait_for(
                    lambda: self.version >= version, timeout=self.wait_timeout_s):
                raise TimeoutError(f"embedding rows at version {version} asked, but this shard "
                                   f"is at {self.version} after {self.wait_timeout_s:.0f}s")
            return np.ascontiguousarray(self.table[local])

    def add_grads(self, step: int, rank: int, local: np.ndarray, grads: np.ndarray) -> None:
        """Record worker ``rank``'s gradients of rows ``local`` for step ``step``."""
        if self.dry:
            return
        with self._cond:
            self._pending.setdefault(step, []).append((rank, local, grads))

    def apply(self, count: float) -> None:
        """Apply step ``version``: sum every worker's contributions (in rank order, so the
        sum is the same on every run), divide by the global ``count``, update the rows."""
        with self._cond:
            parts = sorted(self._pending.pop(self.version, []), key=lambda p: p[0])
        if count > 0 and parts:
            local = np.concatenate([p[1] for p in parts])
            grads = torch.from_numpy(np.concatenate([p[2] for p in parts]))
            rows, inv = np.unique(local, return_inverse=True)
            g = torch.zeros((rows.size, self.dim), dtype=torch.float32)
            g.index_add_(0, torch.from_numpy(inv.reshape(-1)), grads)
            g /= float(count)
            self.steps += 1
            self._update(rows, g.numpy())
        elif count > 0:
            self.steps += 1
        with self._cond:
            self.version += 1
            self._cond.notify_all()

    def _update(self, rows: np.ndarray, g: np.ndarray) -> None:
        lr = float(self.cfg.lr)
        w = torch.from_numpy(self.table[rows])
        gt = torch.from_numpy(g)
        if self.cfg.optimizer == "sgd":
            w -= lr * gt
        elif self.cfg.optimizer == "sparse_adagrad":
            s = torch.from_numpy(self.state["sum"][rows])
            s.addcmul_(gt, gt, value=1.0)
            w.addcdiv_(gt, s.sqrt().add_(ADAGRAD_EPS), value=-lr)
            self.state["sum"][rows] = s.numpy()
        else:  # sparse_adam: torch.optim.Adam's single-tensor formula on these rows
            b1, b2 = ADAM_BETAS
            m = torch.from_numpy(self.state["exp_avg"][rows])
            v = torch.from_numpy(self.state["exp_avg_sq"][rows])
            m.lerp_(gt, 1 - b1)
            v.mul_(b2).addcmul_(gt, gt, value=1 - b2)
            bc1 = 1 - b1 ** self.steps
            bc2 = 1 - b2 ** self.steps
            denom = (v.sqrt() / (bc2 ** 0.5)).add_(ADAM_EPS)
            w.addcdiv_(m, denom, value=-lr / bc1)
            self.state["exp_avg"][rows] = m.numpy()
            self.state["exp_avg_sq"][rows] = v.numpy()
        self.table[rows] = w.numpy()

    def state_dict(self) -> dict[str, Any]:
        """The shard as tensors (a checkpoint's per-part file)."""
        return {"table": torch.from_numpy(np.array(self.table)),
                "state": {n: torch.from_numpy(np.array(a)) for n, a in self.state.items()},
                "steps": int(self.steps), "optimizer": self.cfg.optimizer}

    def load_state_dict(self, state: dict[str, Any], part: int) -> None:
        """Restore a shard; a table or state of another shape or optimizer is refused."""
        table = state.get("table")
        want = (self.num_rows, self.dim)
        if not torch.is_tensor(table) or tuple(table.shape) != want:
            got = tuple(table.shape) if torch.is_tensor(table) else type(table).__name__
            raise ValueError(f"checkpoint embedding table of part {part} has shape {got} but the "
                             f"partition gives this part {want[0]} nodes x model.node_embedding."
                             f"dim={want[1]}: the checkpoint was written for another partition or "
                             "width; resume with the run's own partition set and config")
        if state.get("optimizer") != self.cfg.optimizer:
            raise ValueError(f"checkpoint embedding of part {part} was trained with optimizer "
                             f"{state.get('optimizer')!r} but model.node_embedding.optimizer="
                             f"{self.cfg.optimizer!r}; resume with the same optimizer")
        self.table[:] = table.numpy()
        for n, a in self.state.items():
            a[:] = state["state"][n].numpy()
        self.steps = int(state["steps"])
