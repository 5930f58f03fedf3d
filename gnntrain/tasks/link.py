"""Link prediction: score node pairs from their embeddings; ranking metrics reduced exactly.

**Edges.** :meth:`LinkPrediction.load_graph` gets the :class:`~gnntrain.data.link.EdgeSplit`
(an ``ogbl`` or ``lightgcn`` source's own split, or a seeded random split of any other
graph) and returns the message-passing graph of the training edges only; the task keeps
the validation and test pairs. After partitioning, :meth:`placed` records the renumbering.

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

**Negatives** per positive ``(u, v)``, ``num_negatives`` of them, ``(u, w)`` with ``w``:
``uniform`` over the destination space (all nodes; the items of a user-item graph),
``uniform_pairs`` (both ends drawn: ``(w1, w2)`` uniform over the source and destination spaces, the
random pairs OGB's own examples train against and its ``edge_neg`` evaluation sets hold),
``degree`` with probability proportional to ``in_degree(w) ** 0.75``, or ``in_batch``
(the destinations of other positives of the same batch: no extra nodes to sample). The
uniform, uniform_pairs and degree draws are a hash of (seed, epoch, u, v, j) in the graph's own ids, so
a positive gets the same negatives whichever worker, step or partitioning draws it; that
makes k workers over one global batch equal to one process exactly. With
``reject_edges`` a drawn pair that is a training edge (either direction of an undirected
graph) or a self-loop is drawn again from the next stream of the same hash, up to
``MAX_REDRAWS`` times (what PyG's ``negative_sampling`` and DGL's ``GlobalUniform`` give:
negatives that are not edges of the message-passing graph); the test is a sorted array of
the training edges' keys in graph ids (8 bytes per edge on each worker), so the draws stay
the same on every worker and partitioning.

**Batches**: ``SeedBatch(nodes = unique endpoints, payload = pairs as indices into nodes)``
sampled once. Target edges stay in message passing by default, as in a full-batch GAE,
OGB's examples and PyG's ``LinkNeighborLoader``; with ``exclude_targets`` the batch's
positive edges and their reverses are kept out of its sampled blocks, so a model cannot
read a target edge off its own input (DGL's ``exclude='reverse_id'``). On ca-HepPh the
exclusion cost 7 points of test Hits@50 and let it collapse after the best epoch
(bench/RESULTS.md, "link_recipe"), hence off by default.

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
Recall@``hits_k`` and NDCG@``hits_k`` per user (:func:`ranking.recall_ndcg_at_k`); the
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
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnntrain.ops import gather_rows
from gnntrain.tasks import ranking
from gnntrain.tasks.base import SPLITS, MetricState, SeedBatch, StepOutput, Task, hash_uniform
from gnntrain.tasks.decoders import HadamardMLP, with_mlp_decoder
from samplers.edge_keys import contains, pair_keys

__all__ = ["DECODERS", "LOSSES", "NEGATIVES", "RANKINGS", "HadamardMLP", "LinkPrediction",
           "with_mlp_decoder"]

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gnntrain.config import DatasetConfig
    from gnntrain.data.link import EdgeSplit
    from partition import Part
    from partition.graph import Graph
    from samplers.batch import PreparedBatch

DECODERS = ("dot", "mlp")
LOSSES = ("bce", "bpr")
NEGATIVES = ("uniform", "uniform_pairs", "degree", "in_batch")
RANKINGS = ("pairs", "items", "per_source")
EXAMPLES = ("directed", "undirected")
_CONCAT_KEYS = ("pos", "neg", "user", "recall", "ndcg", "pid", "rr")
_USER_CHUNK = 1 << 22  # user x item scores per chunk of all-item ranking
MAX_REDRAWS = 16
"""``reject_edges``: draws of one negative before an edge is kept (a graph that dense is
near-complete; PyG's ``negative_sampling`` returns fewer negatives then)."""
_MAX_KEYED_NODES = 3_037_000_499  # n * n + n below 2^63


def _option(name: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        raise ValueError(f"task.options.{name}={value!r}: expected one of {list(allowed)}")


class LinkPrediction(Task):
    """Predict edges; see the module docstring for every option."""

    name: ClassVar[str] = "link"
    metric: ClassVar[str] = "hits"

    def __init__(self, decoder: str = "dot", loss: str = "bce", negatives: str = "uniform",
                 num_negatives: int = 1, exclude_targets: bool = False, hits_k: int = 20,
                 val_frac: float = 0.05, test_frac: float = 0.1, split_seed: int = 0,
                 keep_train_per_node: bool = True, ranking: str = "pairs",
                 examples: str = "directed", reject_edges: bool = False, eval_negatives: int = 0) -> None:
        _option("decoder", decoder, DECODERS)
        _option("examples", examples, EXAMPLES)
        _option("ranking", ranking, RANKINGS)
        _option("loss", loss, LOSSES)
        _option("negatives", negatives, NEGATIVES)
        if not isinstance(reject_edges, bool):
            raise ValueError(f"task.options.reject_edges={reject_edges!r}: must be true or false")
        if reject_edges and negatives == "in_batch":
            raise ValueError("task.options.reject_edges=true redraws negatives that are edges, but "
                             "negatives='in_batch' draws none (they are other positives' "
                             "destinations): use negatives uniform, uniform_pairs or degree, or "
                             "reject_edges: false")
        for name, v, lo in (("num_negatives", num_negatives, 1), ("hits_k", hits_k, 1),
                            ("eval_negatives", eval_negatives, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"task.options.{name}={v!r}: must be an int >= {lo}")
        for name, f in (("val_frac", val_frac), ("test_frac", test_frac)):
            if not isinstance(f, int | float) or not 0.0 <= f < 1.0:
                raise ValueError(f"task.options.{name}={f!r}: must lie in [0, 1)")
        if val_frac + test_frac >= 1.0:
            raise ValueError(f"task.options.val_frac={val_frac} + test_frac={test_frac} = "
                             f"{val_frac + test_frac:g}: must be below 1 (the rest trains)")
        self.decoder, self.loss_kind, self.negatives = decoder, loss, negatives
        self.num_negatives, self.exclude_targets, self.hits_k = num_negatives, exclude_targets, hits_k
        self.val_frac, self.test_frac, self.split_seed = float(val_frac), float(test_frac), split_seed
        self.keep_train_per_node = bool(keep_train_per_node)
        self.ranking, self.examples = ranking, examples
        self.reject_edges = reject_edges
        self.eval_negatives = eval_negatives
        self._edge_keys: np.ndarray | None = None  # sorted training-edge keys, graph ids
        if ranking != "pairs":  # the headline follows the protocol
            self.metric = "recall" if ranking == "items" else "mrr"  # type: ignore[misc]
        self.split: EdgeSplit | None = None
        self._new: np.ndarray | None = None  # graph id -> partitioned id (None: identity)
        self._orig: np.ndarray | None = None  # partitioned id -> graph id
        self._cdf: np.ndarray | None = None  # degree ** 0.75 over the destination range
        self._pairs: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
        self._pids: dict[tuple[int, str], np.ndarray] = {}  # per_source: positives' indices

    # --- edges ----------------------------------------------------------------------------

    def load_graph(self, dataset: DatasetConfig, graph: Graph | None = None) -> Graph:
        from gnntrain.data.link import load_split, message_passing_graph, random_edge_split

        x = None  # fallback features are rebuilt from the training edges alone
        if graph is None and dataset.source in ("ogbl", "lightgcn"):
            if self.eval_negatives:
                raise ValueError(f"task.options.eval_negatives={self.eval_negatives}: dataset "
                                 f"{dataset.name!r} (source={dataset.source}) brings its own evaluation "
                                 "negatives; eval_negatives sets those of a random split")
            split = load_split(dataset)  # type: ignore[arg-type]
        else:
            if self.ranking == "per_source" and not self.eval_negatives:
                raise ValueError("task.options.ranking='per_source' on a random split ranks each "
                                 "positive against its own negatives: set task.options.eval_negatives "
                                 "to how many (e.g. 100)")
            own = self.ranking == "per_source"  # each positive's own negatives, else one shared set
            base = super().load_graph(dataset, graph)
            split = random_edge_split(base, val_frac=self.val_frac, test_frac=self.test_frac,
                                      seed=self.split_seed,
                                      keep_train_per_node=self.keep_train_per_node,
                                      shared_negatives=0 if own else self.eval_negatives,
                                      per_positive=self.eval_negatives if own else 0)
            if graph is not None or getattr(dataset, "features", "stored") is not None:
                x = base.x  # the source's own features
        if self.ranking == "items" and split.dst_range[0] == 0:
            raise ValueError(f"task.options.ranking='items' ranks the items of a user-item graph; "
                             f"dataset {dataset.name!r} (source={dataset.source}) has none: use "
                             "dataset.source=lightgcn or ranking='pairs'")
        if (self.ranking == "per_source") != (split.neg_per_pos > 0):
            raise ValueError(f"task.options.ranking={self.ranking!r}: dataset {dataset.name!r} "
                             + (f"gives each positive its own {split.neg_per_pos} negatives (OGB's "
                                "MRR protocol): set ranking='per_source'" if split.neg_per_pos else
                                "has no per-positive negatives (OGB's target_node_neg): "
                                "per_source ranking needs them"))
        for s in ("val", "test") if self.ranking == "pairs" else ():
            if split.neg(s).shape[0] < self.hits_k and split.pos(s).shape[0]:
                raise ValueError(f"task.options.hits_k={self.hits_k}: the {s} split has only "
                                 f"{split.neg(s).shape[0]} negatives; K must be at most that")
        g = message_passing_graph(split, dataset.name,
                                  feature_fallback=getattr(dataset, "feature_fallback", "degree"),
                                  fallback_dim=getattr(dataset, "fallback_dim", 32), x=x)
        self.split = split
        self._edge_keys = self._train_edge_keys(split) if self.reject_edges else None
        lo, hi = split.dst_range
        # partitioners balance the owned training examples
        if self._every_in_edge_is_example():
            weight = g.in_degrees().astype(np.int64)
        else:
            dst = np.repeat(np.arange(g.num_nodes, dtype=np.int64), np.diff(g.indptr))
            weight = np.bincount(dst[self._is_example(g.indices, dst)], minlength=g.num_nodes)
        g = g.with_train_weight(weight.astype(np.int64))
        w = np.diff(g.indptr)[lo:hi].astype(np.float64) ** 0.75
        self._cdf = np.cumsum(w)
        self._pairs, self._pids = {}, {}
        return g

    def placed(self, new_ids: np.ndarray) -> Task:
        """A copy for the workers: it renumbers, and it drops the split's training edges
        unless all-item ranking needs them (each worker's part holds its own; the
        ``reject_edges`` keys were taken at load time)."""
        t = copy.copy(self)
        t._new = np.asarray(new_ids, dtype=np.int64)
        t._orig = np.empty_like(t._new)
        t._orig[t._new] = np.arange(t._new.size, dtype=np.int64)
        t._pairs, t._pids = {}, {}
        if t.split is not None and t.ranking != "items":
            t.split = replace(t.split, train=np.empty((0, 2), np.int64))
        return t

    def _need_split(self) -> EdgeSplit:
        if self.split is None:
            raise RuntimeError("LinkPrediction has no edge split: the graph must come from "
                               "task.load_graph(dataset, graph) (run_training does this)")
        return self.split

    def _to_new(self, ids: np.ndarray) -> np.ndarray:
        return ids if self._new is None else self._new[ids]

    def _to_graph(self, ids: np.ndarray) -> np.ndarray:
        return ids if self._orig is None else self._orig[ids]

    # --- the contract ---------------------------------------------------------------------

    def out_dim(self, num_classes: int, hidden: int) -> int:
        return hidden

    def check_setup(self, model: nn.Module, *, layerwise_eval: bool) -> None:
        if self.decoder == "mlp" and not callable(getattr(model, "decoder", None)):
            raise ValueError(f"task.options.decoder='mlp' scores pairs with the model's `decoder` "
                             f"module, which {type(model).__name__} lacks: use model.arch "
                             "gnntrain.tasks.link:with_mlp_decoder, give your model a decoder, or "
                             "set decoder: dot")
        if self.ranking == "items" and not layerwise_eval:
            raise ValueError("task.options.ranking='items' ranks every item from the layer-wise "
                             "rows: set train.eval=full with a model that has layer(i, block, h)")

    def _every_in_edge_is_example(self) -> bool:
        split = self._need_split()
        return self.examples == "directed" and split.dst_range == (0, split.num_nodes)

    def _is_example(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Which message-passing edges ``src -> dst`` (graph ids) are training examples:
        those into the destination range (the items of a user-item graph, so every positive
        is a (user, item) pair and its negatives are items), and with ``examples:
        undirected`` only the direction with ``src < dst``."""
        lo, hi = self._need_split().dst_range
        keep = (dst >= lo) & (dst < hi)
        return keep & (src < dst) if self.examples == "undirected" else keep

    def _train_edges(self, part: Part) -> tuple[np.ndarray, np.ndarray]:
        """The part's training edges ``(src, dst)``, partitioned ids: the in-edges that are
        examples (:meth:`_is_example`)."""
        dst = np.repeat(np.arange(part.start, part.stop, dtype=np.int64), np.diff(part.indptr))
        src = np.asarray(part.indices, dtype=np.int64)
        if self._every_in_edge_is_example():  # no mask to build, every epoch
            return src, dst
        keep = self._is_example(self._to_graph(src), self._to_graph(dst))
        return src[keep], dst[keep]

    def num_train_examples(self, part: Part) -> int:
        return int(self._train_edges(part)[0].shape[0])

    def _negatives(self, src: np.ndarray, dst: np.ndarray, seed: int,
                   epoch: int) -> tuple[np.ndarray | None, np.ndarray]:
        """``num_negatives`` pairs per positive as [P, k] partitioned ids: the sources
        (``None``: the positive's own source) and the destinations."""
        k = self.num_negatives
        if self.negatives == "in_batch":
            shift = np.arange(1, k + 1)[None, :]
            return None, dst[(np.arange(dst.size)[:, None] + shift) % max(1, dst.size)]
        shape = (src.size, k)
        gs = np.broadcast_to(self._to_graph(src)[:, None], shape).reshape(-1)
        gd = np.broadcast_to(self._to_graph(dst)[:, None], shape).reshape(-1)
        col = np.broadcast_to(np.arange(k)[None, :], shape).reshape(-1)
        v, w = self._draw(seed, epoch, gs, gd, col, 0)
        if self.reject_edges:
            bad = self._is_edge(gs if v is None else v, w)
            for attempt in range(1, MAX_REDRAWS + 1):
                if not bad.any():
                    break
                i = np.flatnonzero(bad)
                rv, w[i] = self._draw(seed, epoch, gs[i], gd[i], col[i], attempt)
                if v is not None and rv is not None:
                    v[i] = rv
                bad[i] = self._is_edge(gs[i] if v is None else v[i], w[i])
        w_new = self._to_new(w).reshape(shape)
        return (None if v is None else self._to_new(v).reshape(shape)), w_new

    def _draw(self, seed: int, epoch: int, gs: np.ndarray, gd: np.ndarray, col: np.ndarray,
              attempt: int) -> tuple[np.ndarray | None, np.ndarray]:
        """Draw ``attempt`` of negative ``col`` of each positive ``gs -> gd`` (graph ids):
        the source (None: the positive's own) and the destination, graph ids. Attempt 0
        uses hash streams (none, 1); a redraw ``a`` streams ``2a`` and ``2a + 1``."""
        split = self._need_split()
        lo, hi = split.dst_range
        extra = () if attempt == 0 else (2 * attempt,)
        u = hash_uniform(seed, epoch, gs, gd, col, *extra)
        if self.negatives == "degree":
            assert self._cdf is not None
            w = lo + np.minimum(np.searchsorted(self._cdf, u * self._cdf[-1], side="right"),
                                hi - lo - 1)
        else:
            w = lo + np.minimum((u * (hi - lo)).astype(np.int64), hi - lo - 1)
        if self.negatives != "uniform_pairs":
            return None, w
        s_hi = lo if lo > 0 else split.num_nodes  # a user-item graph's sources are its users
        us = hash_uniform(seed, epoch, gs, gd, col, 2 * attempt + 1)
        return np.minimum((us * s_hi).astype(np.int64), s_hi - 1), w

    @staticmethod
    def _train_edge_keys(split: EdgeSplit) -> np.ndarray:
        """Sorted int64 keys ``u * n + v`` of the training edges (graph ids; ``u <= v`` when
        the split is undirected), for ``reject_edges``."""
        if split.num_nodes > _MAX_KEYED_NODES:
            raise ValueError(f"task.options.reject_edges=true keys each edge as u * n + v in "
                             f"int64, which holds at most {_MAX_KEYED_NODES:,} nodes; the graph "
                             f"has {split.num_nodes:,}: set reject_edges: false")
        tr = split.train.astype(np.int64)
        if split.undirected:
            tr = np.sort(tr, axis=1)
        return np.unique(pair_keys(tr[:, 0], tr[:, 1], split.num_nodes))

    def _is_edge(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether each pair ``a -> b`` (graph ids) is a self-loop or a training edge (either
        direction when the split is undirected)."""
        split, keys = self._need_split(), self._edge_keys
        assert keys is not None, "reject_edges keys are taken in load_graph"
        if split.undirected:
            a, b = np.minimum(a, b), np.maximum(a, b)
        return contains(keys, pair_keys(a, b, split.num_nodes)) | (a == b)

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
            out.append(self._batch(s, d, nd, ns, exclude=self.exclude_targets))
        return out

    def _owned_pairs(self, part: Part, split: str) -> tuple[np.ndarray, np.ndarray]:
        """This part's positive and negative pairs of ``split`` (destination owned),
        partitioned ids."""
        key = (part.part_id, split)
        if key not in self._pairs:
            sp = self._need_split()
            pos, neg = self._to_new(sp.pos(split)), self._to_new(sp.neg(split))
            if sp.neg_per_pos:  # a positive's own negatives go where it goes
                m = (pos[:, 1] >= part.start) & (pos[:, 1] < part.stop)
                self._pairs[key] = (pos[m], neg.reshape(-1, sp.neg_per_pos, 2)[m].reshape(-1, 2))
                self._pids[key] = np.flatnonzero(m)
            else:
                mine = [e[(e[:, 1] >= part.start) & (e[:, 1] < part.stop)] for e in (pos, neg)]
                self._pairs[key] = (mine[0], mine[1])
        return self._pairs[key]

    def eval_seeds(self, part: Part, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise ValueError(f"split={split!r}: expected one of {SPLITS}")
        if split == "train":
            return np.arange(part.start, part.stop, dtype=np.int64)
        pos, neg = self._owned_pairs(part, split)
        return np.unique(np.concatenate([pos.reshape(-1), neg.reshape(-1)]))

    def eval_batches(self, part: Part, split: str, batch_size: int) -> list[SeedBatch]:
        if self.ranking == "items":
            raise ValueError("task.options.ranking='items' ranks every item from the layer-wise "
                             "rows: set train.eval=full (and a model with layer(i, block, h))")
        if split == "train":
            return [SeedBatch(np.empty(0, np.int64))]
        pos, neg = self._owned_pairs(part, split)
        k = self._need_split().neg_per_pos
        if k:  # whole groups: a positive with its own negatives
            pid = self._pids[(part.part_id, split)]
            out = []
            for b in np.array_split(np.arange(pos.shape[0]),
                                    max(1, -(-pos.shape[0] * (k + 1) // batch_size))):
                sb = self._batch(pos[b, 0], pos[b, 1], neg.reshape(-1, k, 2)[b, :, 1])
                sb.payload["pid"] = np.concatenate([pid[b], np.full(b.size * k, -1)]).astype(np.int64)
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
        if self.decoder == "dot":
            return h.sum(-1)
        if model is None:
            raise ValueError("task.options.decoder='mlp' scores with the model's decoder: pass "
                             "the model (Task.eval_state(..., model=model))")
        dec = getattr(model, "decoder", None)
        if not callable(dec):
            raise ValueError("task.options.decoder='mlp' needs a model with a `decoder` module "
                             "(model.arch: gnntrain.tasks.link:with_mlp_decoder, or your own "
                             "model's decoder attribute)")
        return dec(h).reshape(-1)

    def loss_of_scores(self, s: Tensor, target: Tensor) -> Tensor:
        label = target[:, 2]
        if self.loss_kind == "bce":
            return F.binary_cross_entropy_with_logits(s, label.to(s.dtype), reduction="sum")
        neg = label == 0
        return -F.logsigmoid(s[target[neg, 3]] - s[neg]).sum()

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        return self.loss_of_scores(self.score(None, out, target), target)

    def num_examples(self, target: Tensor) -> int:
        if self.loss_kind == "bpr":
            return int((target[:, 2] == 0).sum())
        return int(target.shape[0])

    def training_step(self, model: nn.Module, batch: PreparedBatch) -> StepOutput:
        out = model(batch.blocks, batch.x)
        s = self.score(model, out, batch.y)
        correct = int(((s.detach() > 0).long() == batch.y[:, 2]).sum())
        return StepOutput(self.loss_of_scores(s, batch.y), self.num_examples(batch.y),
                          {"correct": np.array([correct], np.int64),
                           "total": np.array([int(batch.y.shape[0])], np.int64)})

    def _score_state(self, s: Tensor, target: Tensor) -> MetricState:
        s64 = s.detach().to(torch.float64).cpu().numpy()
        t = target.cpu().numpy()
        label = t[:, 2]
        if t.shape[1] > 4:  # per-source: positive i against the negatives of group i
            pos, neg = s64[label == 1], s64[label == 0]
            return {"pid": t[label == 1, 4],
                    "rr": ranking.per_source_rr(pos, neg.reshape(pos.size, neg.size // max(1, pos.size)))}
        return {"pos": s64[label == 1], "neg": s64[label == 0]}

    def eval_step(self, model: nn.Module, batch: PreparedBatch) -> MetricState:
        return self._score_state(self.score(model, model(batch.blocks, batch.x), batch.y), batch.y)

    def metric_state(self, out: Tensor, target: Tensor) -> MetricState:
        return self._score_state(self.score(None, out, target), target)

    def eval_rows(self, part: Part, split: str) -> np.ndarray:
        if split == "train":
            return np.empty(0, np.int64)
        if self.ranking == "items":
            lo, hi = self._need_split().dst_range
            return self._to_new(np.arange(lo, hi, dtype=np.int64))
        pos, neg = self._owned_pairs(part, split)
        return np.concatenate([pos[:, 0], neg[:, 0], neg[:, 1] if self.ranking == "per_source"
                               else np.empty(0, np.int64)])

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
        if self.ranking == "items":
            return self._item_ranking_state(part, outputs, split, model)
        pos, neg = self._owned_pairs(part, split)
        pairs = np.concatenate([pos, neg])
        rows = self._rows(part, pairs)
        label = np.r_[np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)]
        cols = [rows[:, 0], rows[:, 1], label, np.full(len(pairs), -1)]
        if self.ranking == "per_source":
            cols.append(np.r_[self._pids[(part.part_id, split)], np.full(len(neg), -1)])
        target = torch.from_numpy(np.stack(cols, 1).astype(np.int64))
        return self._score_state(self.score(model, outputs, target), target)

    def _item_ranking_state(self, part: Part, outputs: Tensor, split: str,
                            model: nn.Module | None) -> MetricState:
        """Recall@K and NDCG@K of every owned user with ``split`` items, over all items
        (graph ids: users ``0..U-1``, items ``lo..hi-1``)."""
        sp = self._need_split()
        lo, hi = sp.dst_range
        truth = sp.pos(split)
        known = sp.train if split == "val" else np.concatenate([sp.train, sp.val])
        new_u = self._to_new(truth[:, 0])
        mine = (new_u >= part.start) & (new_u < part.stop)
        users = np.unique(truth[mine, 0])
        if users.size == 0:
            return {"user": np.empty(0, np.int64), "recall": np.empty(0), "ndcg": np.empty(0)}
        h_items = outputs[torch.from_numpy(self._rows(part, self._to_new(np.arange(lo, hi))))]
        h_users = outputs[torch.from_numpy(self._rows(part, self._to_new(users)))]
        recall, ndcg = [], []
        step = max(1, _USER_CHUNK // max(1, hi - lo))
        for c in range(0, users.size, step):
            cu = users[c:c + step]
            scores = self.score_all(model, h_users[c:c + step], h_items).float().cpu().numpy()
            r, n = ranking.recall_ndcg_at_k(scores, ranking.user_item_cells(truth, cu, lo),
                                            ranking.user_item_cells(known, cu, lo), self.hits_k)
            recall.append(r)
            ndcg.append(n)
        return {"user": users, "recall": np.concatenate(recall), "ndcg": np.concatenate(ndcg)}

    def score_all(self, model: nn.Module | None, h_src: Tensor, h_dst: Tensor) -> Tensor:
        """Scores [S, D] of every pair of rows ``h_src`` x ``h_dst`` with the task's decoder."""
        if self.decoder == "dot":
            return h_src @ h_dst.T
        s, d = h_src.shape[0], h_dst.shape[0]
        src = torch.arange(s).repeat_interleave(d)
        dst = torch.arange(s, s + d).repeat(s)
        target = torch.stack([src, dst], 1)
        return self.score(model, torch.cat([h_src, h_dst]), target).reshape(s, d)

    def merge(self, states: Sequence[MetricState]) -> MetricState:
        """Scores and per-user values concatenate (the merged state is the multiset of all
        of them); counts sum."""
        out: MetricState = {}
        for st in states:
            for k, v in st.items():
                v = np.asarray(v)
                if k in out:
                    out[k] = np.concatenate([out[k], v]) if k in _CONCAT_KEYS else out[k] + v
                else:
                    out[k] = v.copy()
        return out

    def metrics(self, state: MetricState) -> dict[str, float]:
        res: dict[str, float] = {}
        if "total" in state:
            total = int(np.sum(state["total"]))
            res["pair_acc"] = int(np.sum(state["correct"])) / total if total else float("nan")
        if "pos" in state:
            pos = np.asarray(state["pos"], dtype=np.float64)
            neg = np.asarray(state.get("neg", np.empty(0)), dtype=np.float64)
            res["hits"] = ranking.hits_at_k(pos, neg, self.hits_k)
            res["mrr"] = ranking.mrr(pos, neg)
            res["auc"] = ranking.auc(pos, neg)
        if "user" in state:
            users = np.asarray(state["user"], dtype=np.int64)
            res["recall"] = ranking.mean_by_id(users, np.asarray(state["recall"]))
            res["ndcg"] = ranking.mean_by_id(users, np.asarray(state["ndcg"]))
        if "pid" in state:
            res["mrr"] = ranking.mean_by_id(np.asarray(state["pid"], dtype=np.int64),
                                            np.asarray(state["rr"]))
        return res

    def predict(self, out: Tensor, what: str) -> Tensor:
        if what == "logits":
            return out
        raise ValueError(f"--what {what!r}: link prediction writes 'embeddings' (node rows)")
