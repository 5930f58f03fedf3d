"""Link prediction: score node pairs from their embeddings; ranking metrics reduced exactly.

The task is a policy over data it is handed: the options (:class:`LinkOptions`,
:mod:`gnntrain.tasks.link_options`), the edge split and its renumbering
(:class:`~gnntrain.data.link_data.LinkData`, loaded by
:func:`~gnntrain.data.link_data.load_link_data`), the training negatives' sampler
(:class:`samplers.negative.NegativeSampler`) and the ranking metrics
(:mod:`gnntrain.tasks.ranking`). It decides which edges are examples, how they batch,
how pairs score and what the loss is.

**Edges.** :meth:`LinkPrediction.load_graph` (the :class:`Task` hook the runtime calls)
loads the split of the dataset (an ``ogbl`` or ``lightgcn`` source's own split, or a seeded
random split of any other graph) and hands it to :meth:`LinkPrediction.receive`, which
checks the options against it and returns the message-passing graph of the training edges
only; the task keeps the validation and test pairs. After partitioning, :meth:`placed`
records the renumbering.

**Training examples** are the message-passing edges themselves: a part's in-edge CSR holds
every edge ``u -> v`` whose destination it owns, so each directed training edge is owned by
the owner of its destination and nothing is stored twice. On a user-item graph the
examples are the ``user -> item`` edges (the ``item -> user`` reverses carry messages
only). The message-passing graph holds both directions of every edge: ``examples:
directed`` (the default) trains on both; ``examples: undirected`` on each edge once,
``u -> v`` with ``u < v`` in the graph's ids (owned by the owner of ``v``), as OGB's
examples and PyG's ``RandomLinkSplit`` train: for a symmetric decoder (``dot``, ``mlp``
on ``h_u * h_v``) the two directions are one example scored twice. An epoch shuffles a part's examples
(seeded by (seed, epoch, rank)) into exactly ``steps`` batches.

**Negatives** per positive ``(u, v)``, ``num_negatives`` of them, drawn by
:mod:`samplers.negative` in the graph's own ids: ``uniform``, ``uniform_pairs``, ``degree``
(a hash of (seed, epoch, u, v, j), so a positive gets the same negatives whichever worker,
step or partitioning draws it; that makes k workers over one global batch equal to one
process exactly) or ``in_batch``. ``reject_edges`` draws again a pair that is a training
edge or a self-loop (the training edges' keys travel with the task, 8 bytes per edge).

**Batches**: ``SeedBatch(nodes = unique endpoints, payload = pairs as indices into nodes)``
sampled once. Target edges stay in message passing by default, as in a full-batch GAE,
OGB's examples and PyG's ``LinkNeighborLoader``; with ``exclude_targets`` the batch's
positive edges and their reverses are kept out of its sampled blocks, so a model cannot
read a target edge off its own input (DGL's ``exclude='reverse_id'``). On ca-HepPh the
exclusion cost 7 points of test Hits@50 and let it collapse after the best epoch
(docs/benchmarks/link_recipe.md), hence off by default.

**Decoders**: ``dot`` (``<h_u, h_v>``) or ``mlp``, the model's own ``decoder`` module
applied to ``h_u * h_v`` (:func:`with_mlp_decoder` builds one; any model with a
``decoder`` attribute works, so a user decoder comes through the model protocol and
trains and all-reduces with it). Losses: ``bce`` (binary cross-entropy on every pair,
summed) or ``bpr`` (``-log sigmoid(s_pos - s_neg)`` per negative, summed).

**Evaluation**: a worker scores the validation/test pairs whose destination it owns.
Layer-wise (``train.eval: full``): every node's final row is computed once over all its
in-neighbours; the rows of remote sources are fetched from their owners after the last
layer (:meth:`eval_rows`, one request per owner, the ``hidden`` path of layer-wise
inference). Sampled (``train.eval: sampled``; exact with ``sampler.fanouts`` all ``-1``):
batches seeded with the pairs' endpoints. The validation/test pairs travel inside this
task object to every worker (each keeps the ones it owns); they are O(eval pairs). The
split's training edges stay out of the workers' copy (:meth:`placed`; each part holds its
own in-edges), except for all-item ranking, which needs each user's training items, and
``reject_edges`` sends their keys. Both modes score with the task's decoder (a ``mlp``
decoder is the model's own module, applied to the same rows). Metrics
(:mod:`gnntrain.tasks.ranking`): ``hits`` (Hits@``hits_k``, the headline), ``mrr``,
``auc``; training batches report ``pair_acc``.

**Evaluation negatives** of a random split (``task.options.eval_negatives``, default 0):
with ``ranking: pairs`` every positive is ranked against one shared set of negatives, by
default one random non-edge per held-out edge (from its source), or with
``eval_negatives`` = N a shared set of N random node pairs (OGB-collab ranks against
100,000); with ``ranking: per_source`` each positive against its own ``eval_negatives``
random non-edges of its source (OGB's MRR protocol; required there). ``ogbl`` and
``lightgcn`` sources bring their own and refuse the option.

**All-item ranking** (``ranking: items``, user-item graphs: ``dataset.source: lightgcn``):
each worker ranks, for every user it owns with validation (test) items, **every** item,
the user's training items (and, for test, validation items) excluded, and keeps
Recall@``hits_k`` and NDCG@``hits_k`` per user (:func:`ranking.user_item_state`); the
item rows come from their owners once, after the last layer (:meth:`eval_rows`). The
merged state holds one value per user, so the mean equals the single-process one
exactly. Headline ``recall``; layer-wise evaluation only (``train.eval: full``).

**Per-source ranking** (``ranking: per_source``, OGB's MRR datasets such as
``ogbl-citation2``, whose split files give every positive its own negatives): each
positive is ranked against its own K negatives (same source) by the worker that owns its
destination; the state keeps one reciprocal rank per positive with the positive's index,
so the merged ``mrr`` (the headline) equals the single-process one exactly.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnntrain.data.link_data import LinkData, OwnedPairs, load_link_data, stores_split
from gnntrain.ops import gather_rows
from gnntrain.tasks import ranking
from gnntrain.tasks.base import SPLITS, MetricState, SeedBatch, StepOutput, Task
from gnntrain.tasks.decoders import HadamardMLP, with_mlp_decoder
from gnntrain.tasks.link_options import (
    DECODERS,
    EXAMPLES,
    LOSSES,
    NEGATIVES,
    RANKINGS,
    WHERE,
    LinkOptions,
)
from samplers.negative import MAX_REDRAWS, NegativeSampler

__all__ = ["DECODERS", "EXAMPLES", "LOSSES", "MAX_REDRAWS", "NEGATIVES", "RANKINGS", "HadamardMLP",
           "LinkOptions", "LinkPrediction", "with_mlp_decoder"]

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gnntrain.config import DatasetConfig
    from gnntrain.data.link import EdgeSplit
    from partition import Part
    from partition.graph import Graph
    from samplers.batch import PreparedBatch


class LinkPrediction(Task):
    """Predict edges; see the module docstring for every option. Made from a
    :class:`LinkOptions` or from the options as keywords (``LinkPrediction(hits_k=5)``)."""

    name: ClassVar[str] = "link"
    metric: ClassVar[str] = "hits"

    def __init__(self, options: LinkOptions | None = None, /, **fields: Any) -> None:
        if options is not None and fields:
            raise TypeError("LinkPrediction takes a LinkOptions or the options as keywords, not both")
        self.options = options if options is not None else LinkOptions.parse(fields)
        if self.options.ranking != "pairs":  # the headline follows the protocol
            self.metric = "recall" if self.options.ranking == "items" else "mrr"  # type: ignore[misc]
        self.data: LinkData | None = None
        self._sampler: NegativeSampler | None = None
        self._pairs: dict[tuple[int, str], OwnedPairs] = {}

    @property
    def hits_k(self) -> int:
        return self.options.hits_k

    @property
    def metric_names(self) -> tuple[str, ...]:
        """What :func:`ranking.metrics` gives for this ranking protocol."""
        return {"pairs": ("hits", "mrr", "auc"), "per_source": ("mrr",),
                "items": ("recall", "ndcg")}[self.options.ranking]

    @property
    def batch_metric_names(self) -> tuple[str, ...]:
        """Training batches are scored as pairs: the share ranked on the right side of 0."""
        return ("pair_acc",)

    @property
    def num_negatives(self) -> int:
        return self.options.num_negatives

    @property
    def split(self) -> EdgeSplit | None:
        """The edge split the task received (graph ids), or None before."""
        return None if self.data is None else self.data.split

    # --- edges ----------------------------------------------------------------------------

    def load_graph(self, dataset: DatasetConfig, graph: Graph | None = None) -> Graph:
        """The split of ``dataset`` (or of ``graph``) from :func:`load_link_data`, handed to
        :meth:`receive`; the options that concern the source are checked first."""
        o = self.options
        if stores_split(dataset, graph):
            if o.eval_negatives:
                raise ValueError(f"{WHERE}.eval_negatives={o.eval_negatives}: dataset "
                                 f"{dataset.name!r} (source={dataset.source}) brings its own evaluation "
                                 "negatives; eval_negatives sets those of a random split")
        elif o.ranking == "per_source" and not o.eval_negatives:
            raise ValueError(f"{WHERE}.ranking='per_source' on a random split ranks each "
                             f"positive against its own negatives: set {WHERE}.eval_negatives "
                             "to how many (e.g. 100)")
        loaded = load_link_data(dataset, graph, o.random_split())
        return self.receive(loaded.data, loaded.graph,
                            f"dataset {dataset.name!r} (source={dataset.source})")

    def receive(self, data: LinkData, graph: Graph, source: str = "the split") -> Graph:
        """Take ``data`` (a split in graph ids) and its message-passing ``graph``, after
        checking the options against them (``source`` names the data in the messages);
        returns ``graph`` weighted by the training examples each node owns, which the
        partitioners balance."""
        o, split = self.options, data.split
        if o.ranking == "items" and split.dst_range[0] == 0:
            raise ValueError(f"{WHERE}.ranking='items' ranks the items of a user-item graph; "
                             f"{source} has none: use dataset.source=lightgcn or ranking='pairs'")
        if (o.ranking == "per_source") != (split.neg_per_pos > 0):
            raise ValueError(f"{WHERE}.ranking={o.ranking!r}: {source} "
                             + (f"gives each positive its own {split.neg_per_pos} negatives (OGB's "
                                "MRR protocol): set ranking='per_source'" if split.neg_per_pos else
                                "has no per-positive negatives (OGB's target_node_neg): "
                                "per_source ranking needs them"))
        for s in ("val", "test") if o.ranking == "pairs" else ():
            if split.neg(s).shape[0] < o.hits_k and split.pos(s).shape[0]:
                raise ValueError(f"{WHERE}.hits_k={o.hits_k}: the {s} split has only "
                                 f"{split.neg(s).shape[0]} negatives; K must be at most that")
        try:
            sampler = NegativeSampler(o.negative_sampling(), num_nodes=split.num_nodes,
                                      dst_range=split.dst_range, in_degree=np.diff(graph.indptr),
                                      train_edges=split.train, undirected=split.undirected)
        except ValueError as e:  # the sampler names its own setting
            raise ValueError(f"{WHERE}.{e}") from None
        self.data, self._sampler, self._pairs = data, sampler, {}
        if self._every_in_edge_is_example():
            weight = graph.in_degrees().astype(np.int64)
        else:
            dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
            weight = np.bincount(dst[self._is_example(graph.indices, dst)], minlength=graph.num_nodes)
        return graph.with_train_weight(weight.astype(np.int64))

    def placed(self, new_ids: np.ndarray) -> Task:
        """A copy for the workers: it renumbers, and it drops the split's training edges
        unless all-item ranking needs them (each worker's part holds its own; the
        ``reject_edges`` keys were taken in :meth:`receive`)."""
        t = copy.copy(self)
        if self.data is not None:
            t.data = self.data.placed(new_ids, keep_train=self.options.ranking == "items")
        t._pairs = {}
        return t

    def _need_data(self) -> LinkData:
        if self.data is None:
            raise RuntimeError("LinkPrediction has no edge split: the graph must come from "
                               "task.load_graph(dataset, graph) (run_training does this)")
        return self.data

    # --- the contract ---------------------------------------------------------------------

    def out_dim(self, num_classes: int, hidden: int) -> int:
        return hidden

    def check_setup(self, model: nn.Module, *, layerwise_eval: bool) -> None:
        if self.options.decoder == "mlp" and not callable(getattr(model, "decoder", None)):
            raise ValueError(f"{WHERE}.decoder='mlp' scores pairs with the model's `decoder` "
                             f"module, which {type(model).__name__} lacks: use model.arch "
                             "gnntrain.tasks.link:with_mlp_decoder, give your model a decoder, or "
                             "set decoder: dot")
        if self.options.ranking == "items" and not layerwise_eval:
            raise ValueError(f"{WHERE}.ranking='items' ranks every item from the layer-wise "
                             "rows: set train.eval=full with a model that has layer(i, block, h)")

    def _every_in_edge_is_example(self) -> bool:
        split = self._need_data().split
        return self.options.examples == "directed" and split.dst_range == (0, split.num_nodes)

    def _is_example(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Which message-passing edges ``src -> dst`` (graph ids) are training examples:
        those into the destination range (the items of a user-item graph, so every positive
        is a (user, item) pair and its negatives are items), and with ``examples:
        undirected`` only the direction with ``src < dst``."""
        lo, hi = self._need_data().split.dst_range
        keep = (dst >= lo) & (dst < hi)
        return keep & (src < dst) if self.options.examples == "undirected" else keep

    def _train_edges(self, part: Part) -> tuple[np.ndarray, np.ndarray]:
        """The part's training edges ``(src, dst)``, partitioned ids: the in-edges that are
        examples (:meth:`_is_example`)."""
        dst = np.repeat(np.arange(part.start, part.stop, dtype=np.int64), np.diff(part.indptr))
        src = np.asarray(part.indices, dtype=np.int64)
        if self._every_in_edge_is_example():  # no mask to build, every epoch
            return src, dst
        data = self._need_data()
        keep = self._is_example(data.to_graph(src), data.to_graph(dst))
        return src[keep], dst[keep]

    def num_train_examples(self, part: Part) -> int:
        return int(self._train_edges(part)[0].shape[0])

    def _negatives(self, src: np.ndarray, dst: np.ndarray, seed: int,
                   epoch: int) -> tuple[np.ndarray | None, np.ndarray]:
        """``num_negatives`` pairs per positive as [P, k] partitioned ids: the sources
        (``None``: the positive's own source) and the destinations, drawn in graph ids."""
        data, sampler = self._need_data(), self._sampler
        assert sampler is not None, "the sampler is made with the split, in receive"
        neg = sampler.sample(data.to_graph(src), data.to_graph(dst), seed=seed, epoch=epoch)
        return (None if neg.src is None else data.to_new(neg.src)), data.to_new(neg.dst)

    def _batch(self, src: np.ndarray, dst: np.ndarray, neg_dst: np.ndarray | None,
               neg_src: np.ndarray | None = None, exclude: bool = False) -> SeedBatch:
        """Positives ``src -> dst`` and negatives (``neg_src`` or each positive's own
        source, repeated per column of ``neg_dst``) as one batch."""
        p = src.size
        if neg_dst is not None and neg_dst.ndim == 2:  # [P, k]: negatives of each positive
            k = neg_dst.shape[1]
            neg_src = np.repeat(src, k) if neg_src is None else neg_src.reshape(-1)
            group = np.repeat(np.arange(p), k)
            neg_dst = neg_dst.reshape(-1)
        else:
            neg_src = np.empty(0, np.int64) if neg_src is None else neg_src
            neg_dst = np.empty(0, np.int64) if neg_dst is None else neg_dst.reshape(-1)
            group = np.full(neg_src.size, -1, dtype=np.int64)
        a = np.concatenate([src, neg_src])
        b = np.concatenate([dst, neg_dst])
        nodes = np.unique(np.concatenate([a, b]))
        payload = {"src": np.searchsorted(nodes, a), "dst": np.searchsorted(nodes, b),
                   "label": np.concatenate([np.ones(p, np.int64), np.zeros(neg_src.size, np.int64)]),
                   "group": np.concatenate([np.arange(p), group]).astype(np.int64)}
        ex = None
        if exclude and p:
            ex = np.concatenate([np.stack([src, dst], 1), np.stack([dst, src], 1)])
        return SeedBatch(nodes.astype(np.int64), payload, ex)

    def epoch_batches(self, part: Part, steps: int, *, seed: int, epoch: int, rank: int,
                      shuffle: bool, order: np.ndarray | None = None) -> list[SeedBatch]:
        src, dst = self._train_edges(part)
        idx = np.arange(src.size)
        if shuffle:
            idx = np.random.default_rng([seed, epoch, rank]).permutation(src.size)
        out = []
        for b in np.array_split(idx, steps):
            s, d = src[b], dst[b]
            ns, nd = self._negatives(s, d, seed, epoch) if b.size else (None, None)
            out.append(self._batch(s, d, nd, ns, exclude=self.options.exclude_targets))
        return out

    def _owned_pairs(self, part: Part, split: str) -> OwnedPairs:
        """This part's evaluation pairs of ``split`` (destination owned), partitioned ids."""
        key = (part.part_id, split)
        if key not in self._pairs:
            self._pairs[key] = self._need_data().owned(split, part.start, part.stop)
        return self._pairs[key]

    def eval_seeds(self, part: Part, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: expected one of {SPLITS}")
        if split == "train":
            return np.arange(part.start, part.stop, dtype=np.int64)
        own = self._owned_pairs(part, split)
        return np.unique(np.concatenate([own.pos.reshape(-1), own.neg.reshape(-1)]))

    def eval_batches(self, part: Part, split: str, batch_size: int) -> list[SeedBatch]:
        if self.options.ranking == "items":
            raise ValueError(f"{WHERE}.ranking='items' ranks every item from the layer-wise "
                             "rows: set train.eval=full (and a model with layer(i, block, h))")
        if split == "train":
            return [SeedBatch(np.empty(0, np.int64))]
        own = self._owned_pairs(part, split)
        pos, neg = own.pos, own.neg
        k = self._need_data().split.neg_per_pos
        if k:  # whole groups: a positive with its own negatives
            assert own.pids is not None
            out = []
            for b in np.array_split(np.arange(pos.shape[0]),
                                    max(1, -(-pos.shape[0] * (k + 1) // batch_size))):
                sb = self._batch(pos[b, 0], pos[b, 1], neg.reshape(-1, k, 2)[b, :, 1])
                sb.payload["pid"] = np.concatenate([own.pids[b], np.full(b.size * k, -1)]).astype(np.int64)
                out.append(sb)
            return out
        n_pos = pos.shape[0]
        pairs = np.concatenate([pos, neg])
        out = []
        for b in np.array_split(np.arange(pairs.shape[0]), max(1, -(-pairs.shape[0] // batch_size))):
            bp, bn = b[b < n_pos], b[b >= n_pos]
            out.append(self._batch(pairs[bp, 0], pairs[bp, 1], pairs[bn, 1], pairs[bn, 0]))
        return out

    def targets(self, part: Part, batch: SeedBatch) -> np.ndarray:
        p = batch.payload
        if not p:
            return np.empty((0, 4), np.int64)
        cols = [p["src"], p["dst"], p["label"], p["group"], *([p["pid"]] if "pid" in p else [])]
        return np.stack(cols, axis=1).astype(np.int64)

    # --- scores, loss, metrics ------------------------------------------------------------

    def score(self, model: nn.Module | None, out: Tensor, target: Tensor) -> Tensor:
        """One score (logit) per pair of ``target`` from the output rows ``out``."""
        h = gather_rows(out, target[:, 0]) * gather_rows(out, target[:, 1])
        if self.options.decoder == "dot":
            return h.sum(-1)
        if model is None:
            raise ValueError(f"{WHERE}.decoder='mlp' scores with the model's decoder: pass "
                             "the model (Task.eval_state(..., model=model))")
        dec = getattr(model, "decoder", None)
        if not callable(dec):
            raise ValueError(f"{WHERE}.decoder='mlp' needs a model with a `decoder` module "
                             "(model.arch: gnntrain.tasks.link:with_mlp_decoder, or your own "
                             "model's decoder attribute)")
        return dec(h).reshape(-1)

    def loss_of_scores(self, s: Tensor, target: Tensor) -> Tensor:
        label = target[:, 2]
        if self.options.loss == "bce":
            return F.binary_cross_entropy_with_logits(s, label.to(s.dtype), reduction="sum")
        neg = label == 0
        return -F.logsigmoid(s[target[neg, 3]] - s[neg]).sum()

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        return self.loss_of_scores(self.score(None, out, target), target)

    def num_examples(self, target: Tensor) -> int:
        if self.options.loss == "bpr":
            return int((target[:, 2] == 0).sum())
        return int(target.shape[0])

    def training_step(self, model: nn.Module, batch: PreparedBatch) -> StepOutput:
        out = model(batch.blocks, batch.x)
        s = self.score(model, out, batch.y)
        correct = int(((s.detach() > 0).long() == batch.y[:, 2]).sum())
        return StepOutput(self.loss_of_scores(s, batch.y), self.num_examples(batch.y),
                          {"correct": np.array([correct], np.int64),
                           "total": np.array([int(batch.y.shape[0])], np.int64)})

    @staticmethod
    def _score_state(s: Tensor, target: Tensor) -> MetricState:
        return ranking.pair_state(s.detach().to(torch.float64).cpu().numpy(), target.cpu().numpy())

    def eval_step(self, model: nn.Module, batch: PreparedBatch) -> MetricState:
        return self._score_state(self.score(model, model(batch.blocks, batch.x), batch.y), batch.y)

    def metric_state(self, out: Tensor, target: Tensor) -> MetricState:
        return self._score_state(self.score(None, out, target), target)

    def eval_rows(self, part: Part, split: str) -> np.ndarray:
        if split == "train":
            return np.empty(0, np.int64)
        if self.options.ranking == "items":
            data = self._need_data()
            lo, hi = data.split.dst_range
            return data.to_new(np.arange(lo, hi, dtype=np.int64))
        own = self._owned_pairs(part, split)
        return np.concatenate([own.pos[:, 0], own.neg[:, 0], own.neg[:, 1]
                               if self.options.ranking == "per_source" else np.empty(0, np.int64)])

    def _rows(self, part: Part, ids: np.ndarray) -> np.ndarray:
        """Rows of ``ids`` (partitioned) in :meth:`eval_state`'s ``outputs``: the owned
        ones first, then :meth:`Task.extra_rows` in sorted order."""
        extra = self.extra_rows(part)
        owned = (ids >= part.start) & (ids < part.stop)
        return np.where(owned, ids - part.start,
                        part.num_owned + np.searchsorted(extra, ids)).astype(np.int64)

    @torch.no_grad()
    def eval_state(self, part: Part, outputs: Tensor, split: str,
                   model: nn.Module | None = None) -> MetricState:
        """Layer-wise: the owned pairs scored from the final rows of their endpoints (the
        remote sources' rows follow the owned ones, :meth:`Task.extra_rows`), with the
        decoder of ``model`` where ``decoder`` is ``mlp``."""
        if split == "train":
            return {}
        if self.options.ranking == "items":
            return self._item_ranking_state(part, outputs, split, model)
        own = self._owned_pairs(part, split)
        pairs = np.concatenate([own.pos, own.neg])
        rows = self._rows(part, pairs)
        label = np.r_[np.ones(len(own.pos), np.int64), np.zeros(len(own.neg), np.int64)]
        cols = [rows[:, 0], rows[:, 1], label, np.full(len(pairs), -1)]
        if own.pids is not None:
            cols.append(np.r_[own.pids, np.full(len(own.neg), -1)])
        target = torch.from_numpy(np.stack(cols, 1).astype(np.int64))
        return self._score_state(self.score(model, outputs, target), target)

    def _item_ranking_state(self, part: Part, outputs: Tensor, split: str,
                            model: nn.Module | None) -> MetricState:
        """Recall@K and NDCG@K of every owned user with ``split`` items, over all items
        (graph ids: users ``0..U-1``, items ``lo..hi-1``)."""
        data = self._need_data()
        sp = data.split
        lo, hi = sp.dst_range
        truth = sp.pos(split)
        known = sp.train if split == "val" else np.concatenate([sp.train, sp.val])
        new_u = data.to_new(truth[:, 0])
        mine = (new_u >= part.start) & (new_u < part.stop)
        users = np.unique(truth[mine, 0])
        h_items = outputs[torch.from_numpy(self._rows(part, data.to_new(np.arange(lo, hi))))]
        h_users = outputs[torch.from_numpy(self._rows(part, data.to_new(users)))]

        def scores_of(a: int, b: int) -> np.ndarray:
            return self.score_all(model, h_users[a:b], h_items).float().cpu().numpy()

        return ranking.user_item_state(users, scores_of, truth, known, (lo, hi), self.options.hits_k)

    def score_all(self, model: nn.Module | None, h_src: Tensor, h_dst: Tensor) -> Tensor:
        """Scores [S, D] of every pair of rows ``h_src`` x ``h_dst`` with the task's decoder."""
        if self.options.decoder == "dot":
            return h_src @ h_dst.T
        s, d = h_src.shape[0], h_dst.shape[0]
        src = torch.arange(s).repeat_interleave(d)
        dst = torch.arange(s, s + d).repeat(s)
        target = torch.stack([src, dst], 1)
        return self.score(model, torch.cat([h_src, h_dst]), target).reshape(s, d)

    def merge(self, states: Sequence[MetricState]) -> MetricState:
        """Scores and per-user values concatenate; counts sum (:func:`ranking.merge`)."""
        return ranking.merge(states)

    def metrics(self, state: MetricState) -> dict[str, float]:
        return ranking.metrics(state, self.options.hits_k)

    def predict(self, out: Tensor, what: str) -> Tensor:
        if what == "logits":
            return out
        raise ValueError(f"--what {what!r}: link prediction writes 'embeddings' (node rows)")
