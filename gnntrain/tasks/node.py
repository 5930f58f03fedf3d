"""Node classification: labelled nodes, cross-entropy, accuracy from exact counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from gnntrain.tasks.base import SPLITS, MetricState, SeedBatch, Task

if TYPE_CHECKING:
    from partition import Part


def epoch_seed_batches(ids: np.ndarray, steps: int, *, seed: int, epoch: int, rank: int,
                       shuffle: bool = True, order: np.ndarray | None = None) -> list[np.ndarray]:
    """Split this worker's seed ids into exactly ``steps`` near-equal batches.

    A part with fewer seeds gets smaller (possibly empty) batches rather than fewer
    steps; every seed is used once per epoch. With ``order`` (the seeds in a
    bandwidth-reducing order, :func:`gnntrain.engine.locality_order`) each batch is a run
    of nearby seeds that share neighbours (BGL); the runs start at a random offset and are
    visited in random order every epoch.
    """
    rng = np.random.default_rng([seed, epoch, rank])
    if order is not None:
        rolled = np.roll(order, -int(rng.integers(0, max(1, order.size))))
        batches = np.array_split(rolled, steps)
        visit = rng.permutation(steps) if shuffle else np.arange(steps)
        return [np.ascontiguousarray(batches[i]) for i in visit]
    if shuffle:
        ids = ids[rng.permutation(ids.shape[0])]
    return [np.ascontiguousarray(b) for b in np.array_split(ids, steps)]


class NodeClassification(Task):
    """Predict each labelled node's class; accuracy = exact correct / total counts.

    ``label_smoothing`` (in [0, 1)) is passed to the cross-entropy.
    """

    name: ClassVar[str] = "node_classification"
    metric: ClassVar[str] = "acc"

    def __init__(self, label_smoothing: float = 0.0) -> None:
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"task.options.label_smoothing={label_smoothing}: must lie in [0, 1)")
        self.label_smoothing = float(label_smoothing)

    def out_dim(self, num_classes: int, hidden: int) -> int:
        return num_classes

    def num_train_examples(self, part: Part) -> int:
        return int(part.train_idx.size)

    def epoch_batches(self, part: Part, steps: int, *, seed: int, epoch: int, rank: int,
                      shuffle: bool, order: np.ndarray | None = None) -> list[SeedBatch]:
        ids = np.asarray(part.train_idx, dtype=np.int64)
        return [SeedBatch(b) for b in epoch_seed_batches(ids, steps, seed=seed, epoch=epoch,
                                                          rank=rank, shuffle=shuffle, order=order)]

    def eval_seeds(self, part: Part, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: expected one of {SPLITS}")
        return np.asarray(getattr(part, f"{split}_idx"), dtype=np.int64)

    def targets(self, part: Part, batch: SeedBatch) -> np.ndarray:
        return np.asarray(part.y[batch.nodes - part.start], dtype=np.int64)

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(out, target, reduction="sum", label_smoothing=self.label_smoothing)

    def metric_state(self, out: Tensor, target: Tensor) -> MetricState:
        correct = int((out.argmax(1) == target).sum()) if target.numel() else 0
        return {"correct": np.array([correct], dtype=np.int64),
                "total": np.array([int(target.shape[0])], dtype=np.int64)}

    def metrics(self, state: MetricState) -> dict[str, float]:
        total = int(state["total"].sum()) if "total" in state else 0
        out = {"acc": int(state["correct"].sum()) / total if total else float("nan")}
        if self.eval_keep:  # a sampled split: say how many nodes the figure counts
            out["nodes"] = float(total)
        return out

    def predict(self, out: Tensor, what: str) -> Tensor:
        if what == "probs":
            return torch.softmax(out, dim=1)
        if what == "logits":
            return out
        raise ValueError(f"--what {what!r}: node classification writes 'logits', 'probs' "
                         "or 'embeddings'")
