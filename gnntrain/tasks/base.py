"""The task contract: everything that differs between learning problems, in one object.

The runtime (samplers, feature fetch, gradient all-reduce, layer-wise inference, bytes
accounting, checkpoints) is the same for every problem; a :class:`Task` says

* **seeds** — which examples an epoch draws on each worker and how they become batches
  (:meth:`Task.num_train_examples`, :meth:`Task.epoch_batches`, :meth:`Task.eval_batches`).
  A batch is a :class:`SeedBatch`: the **nodes** the sampler expands (unique global ids)
  plus task-defined arrays (``payload``). Every worker runs the same number of steps,
  fixed by the coordinator from all parts' :meth:`num_train_examples`.
* **targets** — what a batch needs besides features (:meth:`Task.targets`), attached to
  the prepared batch as ``y``.
* **head and loss** — :meth:`Task.out_dim` (the model's output width) and
  :meth:`Task.loss` (summed over the batch's examples, so the global mean is the sum of
  all workers' sums over the global count: k workers compute the gradient of the global
  batch exactly). :meth:`Task.training_step` is the whole forward + loss and is the hook
  for a custom loss or step (override it, or just :meth:`loss`).
* **metrics, reduced exactly** — a worker returns a :data:`MetricState` (named integer or
  float arrays, e.g. correct/total counts); :meth:`Task.merge` combines the workers' states
  (by default an element-wise sum) and :meth:`Task.metrics` turns the merged state into
  figures. Reducing states, never averaging per-worker figures, makes the reduced metric
  equal the single-process metric.
* **evaluation and prediction** — :meth:`Task.eval_state` scores a split from the final
  layer's outputs of a worker's own nodes (layer-wise inference), or from sampled batches
  (:meth:`Task.eval_batches` + :meth:`Task.metric_state`); :meth:`Task.predict` turns
  outputs into what ``gnntrain.predict`` writes.

How the next problems plug in without another redesign:

(a) **Link prediction.** ``epoch_batches`` draws a worker's positive edges (owned by the
    owner of their destination) and negatives (seeded from (seed, epoch, step, rank)),
    returns ``SeedBatch(nodes=unique endpoints, payload={"src": ..., "dst": ..., "label":
    ...})`` with the pairs as indices into ``nodes``; ``targets`` turns the payload into a
    tensor of local pair indices and labels; the model's outputs are node embeddings
    (``out_dim`` = embedding width) and ``loss`` scores the pairs with the task's decoder
    (dot product, MLP on the Hadamard product; BCE or BPR). Ranking metrics reduce exactly
    through ``merge``: AUC from per-worker score histograms or sorted score lists,
    Hits@K from each worker's top-K negative scores merged into the global top-K (a merge
    that is not a sum — hence ``merge`` is a method), MRR from per-source ranks.
    ``eval_state`` gets every node's embedding from layer-wise inference and scores the
    pairs whose endpoints the worker owns (remote endpoints through the halo rows).
(b) **Typed nodes and relations.** Seeds carry a node type (``SeedBatch.payload["type"]``
    or one task per target type); blocks become typed (per-relation edge sets) and the
    model's output rows are those of the target type's seeds, so ``targets``, ``loss``,
    ``metric_state`` and ``merge`` are unchanged: the per-type logic lives in the sampler,
    the partition book and the model, not here.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from samplers.hashing import hash_uniform

if TYPE_CHECKING:
    from gnntrain.config import DatasetConfig
    from partition import Part
    from partition.graph import Graph
    from samplers.batch import PreparedBatch

MetricState = dict[str, np.ndarray]
"""Named arrays whose merge across workers is exact (counts, sums, top-K lists)."""

SPLITS = ("train", "val", "test")


@dataclass
class SeedBatch:
    """One step's seeds: ``nodes`` (unique global ids the sampler expands; the model's
    output rows follow their order), task-defined arrays in ``payload``, and ``exclude``:
    int64 ``[M, 2]`` global ``(src, dst)`` edges the sampler keeps out of this batch's
    blocks (a link task's target edges), or None."""

    nodes: np.ndarray
    payload: dict[str, np.ndarray] = field(default_factory=dict)
    exclude: np.ndarray | None = None

    @property
    def empty(self) -> bool:
        return int(self.nodes.shape[0]) == 0


@dataclass
class StepOutput:
    """What one training step computed on one worker: the summed loss (with its graph,
    for backward), the number of examples it sums over, and the batch's metric state."""

    loss_sum: Tensor
    count: int
    state: MetricState


class Task(ABC):
    """What a learning problem defines; see the module docstring for the contract."""

    eval_keep: dict[str, float] = {}  # noqa: RUF012 (replaced, never mutated: with_eval_sample)
    eval_seed: int = 0
    name: ClassVar[str]
    """Short name used in configs and reports."""
    metric: ClassVar[str]
    """The headline key of :meth:`metrics` (higher is better): reports show it per split."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The keys :meth:`metrics` gives for an evaluated split, the headline first; each
        is logged per split (``val_<key>``, ``test_<key>``) and a sweep may judge any of
        them. Default: the headline alone."""
        return (self.metric,)

    @property
    def batch_metric_names(self) -> tuple[str, ...]:
        """The keys :meth:`metrics` gives for the training batches' states, logged as
        ``train_<key>_batches``. Default: the headline alone."""
        return (self.metric,)

    @abstractmethod
    def out_dim(self, num_classes: int, hidden: int) -> int:
        """Width of the model's output rows."""

    def check_setup(self, model: nn.Module, *, layerwise_eval: bool) -> None:  # noqa: B027
        """Refuse, before any work, a model or evaluation this task cannot use (raise
        ``ValueError`` naming the setting and what is allowed). ``layerwise_eval``: the run
        evaluates with exact layer-wise rows (``train.eval: full`` and a model with
        ``layer(i, block, h)``)."""

    def load_graph(self, dataset: DatasetConfig, graph: Graph | None = None) -> Graph:
        """The graph message passing runs on: ``graph`` if given, else the one ``dataset``
        loads. A task whose examples are not nodes (link prediction) gets its held-out
        examples from :mod:`gnntrain.data` here and keeps them."""
        if graph is not None:
            return graph
        from gnntrain.data import load_dataset

        return load_dataset(dataset)

    def placed(self, new_ids: np.ndarray) -> Task:
        """This task for the partitioned graph, where graph node ``v`` became
        ``new_ids[v]`` (the partition set's renumbering); called once, before the workers
        start. The default keeps nothing in graph ids and returns ``self``."""
        return self

    @abstractmethod
    def num_train_examples(self, part: Part) -> int:
        """Training examples this part owns (the coordinator sizes the epoch from them)."""

    @abstractmethod
    def epoch_batches(self, part: Part, steps: int, *, seed: int, epoch: int, rank: int,
                      shuffle: bool, order: np.ndarray | None = None) -> list[SeedBatch]:
        """Exactly ``steps`` batches of this part's training examples for ``epoch``
        (possibly empty ones: every worker runs every step's collective)."""

    @abstractmethod
    def eval_seeds(self, part: Part, split: str) -> np.ndarray:
        """Global ids of this part's nodes scored for ``split`` (``train``/``val``/``test``)."""

    def with_eval_sample(self, rates: dict[str, float], seed: int) -> Task:
        """This task evaluating, in sampled evaluation, only a seeded sample of each split
        in ``rates``: a node is kept with probability ``rates[split]`` by a hash of
        (``seed``, its dataset id), so the sample is the same at every evaluation, on any
        number of workers and any partitioning (``train.eval_max_nodes``)."""
        t = copy.copy(self)
        t.eval_keep, t.eval_seed = dict(rates), int(seed)
        return t

    def eval_batches(self, part: Part, split: str, batch_size: int) -> list[SeedBatch]:
        """Batches of ``split`` for sampled evaluation (the order does not matter)."""
        ids = np.asarray(self.eval_seeds(part, split), dtype=np.int64)
        rate = self.eval_keep.get(split)
        if rate is not None:
            orig = np.asarray(part.orig_ids, dtype=np.int64)[ids - part.start]
            ids = ids[hash_uniform(self.eval_seed, orig) < rate]
        steps = max(1, -(-ids.size // batch_size))
        return [SeedBatch(np.ascontiguousarray(b)) for b in np.array_split(ids, steps)]

    @abstractmethod
    def targets(self, part: Part, batch: SeedBatch) -> np.ndarray:
        """What the loss and metrics compare against, for one batch (``PreparedBatch.y``)."""

    @abstractmethod
    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        """The batch's loss **summed** over its examples (not averaged)."""

    def num_examples(self, target: Tensor) -> int:
        """How many examples ``target`` holds (the denominator of the global mean)."""
        return int(target.shape[0])

    def training_step(self, model: nn.Module, batch: PreparedBatch) -> StepOutput:
        """Forward and loss of one prepared batch; override for a custom step."""
        out = model(batch.blocks, batch.x)
        return StepOutput(self.loss(out, batch.y), self.num_examples(batch.y),
                          self.metric_state(out.detach(), batch.y))

    def eval_step(self, model: nn.Module, batch: PreparedBatch) -> MetricState:
        """The metric state of one sampled evaluation batch (the hook for a task whose
        scoring needs more of the model than its outputs, e.g. a learned decoder)."""
        return self.metric_state(model(batch.blocks, batch.x), batch.y)

    @abstractmethod
    def metric_state(self, out: Tensor, target: Tensor) -> MetricState:
        """Sufficient statistics of the metrics on one batch (merged with :meth:`merge`)."""

    def merge(self, states: Sequence[MetricState]) -> MetricState:
        """Combine states of several batches or workers exactly (default: element-wise sum)."""
        out: MetricState = {}
        for st in states:
            for k, v in st.items():
                v = np.asarray(v)
                out[k] = out[k] + v if k in out else v.copy()
        return out

    @abstractmethod
    def metrics(self, state: MetricState) -> dict[str, float]:
        """Figures from a merged state (e.g. ``{"acc": 0.81}``); NaN where undefined."""

    def eval_rows(self, part: Part, split: str) -> np.ndarray:
        """Global ids of other parts' nodes whose final rows :meth:`eval_state` needs (a
        link task's remote endpoints); the evaluator fetches them from their owners."""
        return np.empty(0, dtype=np.int64)

    def extra_rows(self, part: Part) -> np.ndarray:
        """The rows after the owned ones in :meth:`eval_state`'s ``outputs``: the sorted
        distinct ids :meth:`eval_rows` names over every split that this part does not own."""
        ids = np.unique(np.concatenate([np.asarray(self.eval_rows(part, s), dtype=np.int64)
                                        for s in SPLITS]))
        return ids[(ids < part.start) | (ids >= part.stop)]

    def eval_state(self, part: Part, outputs: Tensor, split: str,
                   model: nn.Module | None = None) -> MetricState:
        """The metric state of ``split`` from the final outputs of every node this part
        owns (row ``i`` = local node ``i``), as layer-wise inference produces them, followed
        by the rows of :meth:`extra_rows` (none unless :meth:`eval_rows` asks for some).
        ``model`` is the evaluated model, for a task that scores with more of it than its
        outputs (a link task's learned decoder)."""
        ids = np.asarray(self.eval_seeds(part, split), dtype=np.int64)
        local = torch.from_numpy(ids - part.start)
        target = torch.from_numpy(self.targets(part, SeedBatch(ids)))
        return self.metric_state(outputs[local], target)

    def predict(self, out: Tensor, what: str) -> Tensor:
        """What ``gnntrain.predict --what WHAT`` writes for output rows ``out``."""
        if what == "logits":
            return out
        raise ValueError(f"--what {what!r}: task {self.name!r} writes 'logits' or 'embeddings'")

    def to_json(self, state: MetricState) -> dict[str, Any]:
        """A state as JSON-able lists (states travel in epoch records)."""
        return {k: np.asarray(v).tolist() for k, v in state.items()}

    def from_json(self, raw: dict[str, Any]) -> MetricState:
        return {k: np.asarray(v) for k, v in raw.items()}
