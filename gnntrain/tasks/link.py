"""Link prediction: score node pairs from their embeddings; ranking metrics reduced exactly.

**Edges.** :meth:`LinkPrediction.load_graph` gets the :class:`~gnntrain.data.link.EdgeSplit`
(an ``ogbl`` or ``lightgcn`` source's own split, or a seeded random split of any other
graph) and returns the message-passing graph of the training edges only; the task keeps
the validation and test pairs. After partitioning, :meth:`placed` records the renumbering.

**Training examples** are the message-passing edges themselves: a part's in-edge CSR holds
every edge ``u -> v`` whose destination it owns, so each directed training edge is owned by
the owner of its destination and nothing is stored twice. An epoch shuffles a part's
edges (seeded by (seed, epoch, rank)) into exactly ``steps`` batches.

**Negatives** per positive ``(u, v)``, ``num_negatives`` of them, ``(u, w)`` with ``w``:
``uniform`` over the destination space (all nodes; the items of a user-item graph),
``degree`` with probability proportional to ``in_degree(w) ** 0.75``, or ``in_batch``
(the destinations of other positives of the same batch: no extra nodes to sample). The
uniform and degree draws are a hash of (seed, epoch, u, v, j) in the graph's own ids, so
a positive gets the same negatives whichever worker, step or partitioning draws it; that
makes k workers over one global batch equal to one process exactly.

**Batches**: ``SeedBatch(nodes = unique endpoints, payload = pairs as indices into nodes)``
sampled once; with ``exclude_targets`` (default) the batch's positive edges and their
reverses are kept out of its sampled blocks, so a model cannot read a target edge off
its own input (DGL's ``exclude='reverse_id'``).

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
task object to every worker (each keeps the ones it owns); they are O(eval pairs), the
training edges are never copied. A ``mlp`` decoder scores sampled evaluation only (the
layer-wise scoring sees the rows, not the model). Metrics (:mod:`gnntrain.tasks.ranking`): ``hits`` (Hits@``hits_k``,
the headline), ``mrr``, ``auc``; training batches report ``pair_acc``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnntrain.tasks import ranking
from gnntrain.tasks.base import SPLITS, MetricState, SeedBatch, StepOutput, Task

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gnntrain.config import DatasetConfig, ModelConfig
    from gnntrain.data.link import EdgeSplit
    from partition import Part
    from partition.graph import Graph
    from samplers.batch import PreparedBatch

DECODERS = ("dot", "mlp")
LOSSES = ("bce", "bpr")
NEGATIVES = ("uniform", "degree", "in_batch")
_SCORE_KEYS = ("pos", "neg")


def _option(name: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        raise ValueError(f"task.options.{name}={value!r}: expected one of {list(allowed)}")


def hash_uniform(*parts: np.ndarray | int) -> np.ndarray:
    """A float64 in [0, 1) per element: splitmix64 of the broadcast integer ``parts``."""
    arrays = np.broadcast_arrays(*[np.asarray(p, dtype=np.int64) for p in parts])
    z = np.zeros(arrays[0].shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for a in arrays:
            z ^= a.astype(np.uint64)
            z += np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


class HadamardMLP(nn.Module):
    """``decoder``: an MLP on ``h_u * h_v`` giving one score per pair."""

    def __init__(self, dim: int, hidden: int | None = None, layers: int = 2) -> None:
        super().__init__()
        hidden = hidden or dim
        mods: list[nn.Module] = []
        width = dim
        for _ in range(layers - 1):
            mods += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        mods.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*mods)

    def forward(self, h: Tensor) -> Tensor:
        return self.net(h).reshape(-1)


def with_mlp_decoder(in_dim: int, out_dim: int, cfg: ModelConfig) -> nn.Module:
    """Model factory (``model.arch: gnntrain.tasks.link:with_mlp_decoder``): the built-in
    ``model.options.base`` (default ``sage``) plus a :class:`HadamardMLP` ``decoder``."""
    from gnntrain.models import resolve_factory

    opts = dict(cfg.options)
    base = str(opts.pop("base", "sage"))
    model = resolve_factory(base)(in_dim, out_dim, cfg.model_copy(update={"options": opts}))
    model.decoder = HadamardMLP(out_dim)
    return model


class LinkPrediction(Task):
    """Predict edges; see the module docstring for every option."""

    name: ClassVar[str] = "link"
    metric: ClassVar[str] = "hits"

    def __init__(self, decoder: str = "dot", loss: str = "bce", negatives: str = "uniform",
                 num_negatives: int = 1, exclude_targets: bool = True, hits_k: int = 20,
                 val_frac: float = 0.05, test_frac: float = 0.1, split_seed: int = 0,
                 keep_train_per_node: bool = True) -> None:
        _option("decoder", decoder, DECODERS)
        _option("loss", loss, LOSSES)
        _option("negatives", negatives, NEGATIVES)
        for name, v, lo in (("num_negatives", num_negatives, 1), ("hits_k", hits_k, 1)):
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
        self.split: EdgeSplit | None = None
        self._new: np.ndarray | None = None  # graph id -> partitioned id (None: identity)
        self._orig: np.ndarray | None = None  # partitioned id -> graph id
        self._cdf: np.ndarray | None = None  # degree ** 0.75 over the destination range
        self._pairs: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}

    # --- edges ----------------------------------------------------------------------------

    def load_graph(self, dataset: DatasetConfig, graph: Graph | None = None) -> Graph:
        from gnntrain.data.link import load_split, message_passing_graph, random_edge_split

        x = None  # fallback features are rebuilt from the training edges alone
        if graph is None and dataset.source in ("ogbl", "lightgcn"):
            split = load_split(dataset)  # type: ignore[arg-type]
        else:
            base = super().load_graph(dataset, graph)
            split = random_edge_split(base, val_frac=self.val_frac, test_frac=self.test_frac,
                                      seed=self.split_seed,
                                      keep_train_per_node=self.keep_train_per_node)
            if graph is not None or getattr(dataset, "features", "stored") is not None:
                x = base.x  # the source's own features
        for s in ("val", "test"):
            if split.neg(s).shape[0] < self.hits_k and split.pos(s).shape[0]:
                raise ValueError(f"task.options.hits_k={self.hits_k}: the {s} split has only "
                                 f"{split.neg(s).shape[0]} negatives; K must be at most that")
        g = message_passing_graph(split, dataset.name,
                                  feature_fallback=getattr(dataset, "feature_fallback", "degree"),
                                  fallback_dim=getattr(dataset, "fallback_dim", 32), x=x)
        g = g.with_train_weight(g.in_degrees())  # partitioners balance the owned training edges
        self.split = split
        lo, hi = split.dst_range
        w = np.diff(g.indptr)[lo:hi].astype(np.float64) ** 0.75
        self._cdf = np.cumsum(w)
        self._pairs = {}
        return g

    def placed(self, new_ids: np.ndarray) -> Task:
        t = copy.copy(self)
        t._new = np.asarray(new_ids, dtype=np.int64)
        t._orig = np.empty_like(t._new)
        t._orig[t._new] = np.arange(t._new.size, dtype=np.int64)
        t._pairs = {}
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

    def num_train_examples(self, part: Part) -> int:
        return int(part.indices.shape[0])

    def _negatives(self, src: np.ndarray, dst: np.ndarray, seed: int, epoch: int) -> np.ndarray:
        """``num_negatives`` destinations per positive, [P, k] partitioned ids."""
        k = self.num_negatives
        if self.negatives == "in_batch":
            shift = np.arange(1, k + 1)[None, :]
            return dst[(np.arange(dst.size)[:, None] + shift) % max(1, dst.size)]
        split = self._need_split()
        gs, gd = self._to_graph(src)[:, None], self._to_graph(dst)[:, None]
        u = hash_uniform(seed, epoch, gs, gd, np.arange(k)[None, :])
        lo, hi = split.dst_range
        if self.negatives == "uniform":
            w = lo + np.minimum((u * (hi - lo)).astype(np.int64), hi - lo - 1)
        else:
            assert self._cdf is not None
            w = lo + np.minimum(np.searchsorted(self._cdf, u * self._cdf[-1], side="right"),
                                hi - lo - 1)
        return self._to_new(w)

    def _batch(self, src: np.ndarray, dst: np.ndarray, neg_dst: np.ndarray | None,
               neg_src: np.ndarray | None = None, exclude: bool = False) -> SeedBatch:
        """Positives ``src -> dst`` and negatives (``neg_src`` or each positive's own
        source, repeated per column of ``neg_dst``) as one batch."""
        p = src.size
        if neg_dst is not None and neg_src is None:
            k = neg_dst.shape[1]
            neg_src, group = np.repeat(src, k), np.repeat(np.arange(p), k)
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
        dst = np.repeat(np.arange(part.start, part.stop, dtype=np.int64), np.diff(part.indptr))
        src = np.asarray(part.indices, dtype=np.int64)
        idx = np.arange(src.size)
        if shuffle:
            idx = np.random.default_rng([seed, epoch, rank]).permutation(src.size)
        out = []
        for b in np.array_split(idx, steps):
            s, d = src[b], dst[b]
            out.append(self._batch(s, d, self._negatives(s, d, seed, epoch) if b.size else None,
                                   exclude=self.exclude_targets))
        return out

    def _owned_pairs(self, part: Part, split: str) -> tuple[np.ndarray, np.ndarray]:
        """This part's positive and negative pairs of ``split`` (destination owned),
        partitioned ids."""
        key = (part.part_id, split)
        if key not in self._pairs:
            sp = self._need_split()
            pos, neg = self._to_new(sp.pos(split)), self._to_new(sp.neg(split))
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
        if split == "train":
            return [SeedBatch(np.empty(0, np.int64))]
        pos, neg = self._owned_pairs(part, split)
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
        return np.stack([p["src"], p["dst"], p["label"], p["group"]], axis=1).astype(np.int64)

    # --- scores, loss, metrics ------------------------------------------------------------

    def score(self, model: nn.Module | None, out: Tensor, target: Tensor) -> Tensor:
        """One score (logit) per pair of ``target`` from the output rows ``out``."""
        h = out[target[:, 0]] * out[target[:, 1]]
        if self.decoder == "dot":
            return h.sum(-1)
        if model is None:
            raise ValueError("task.options.decoder='mlp' scores with the model's decoder, which "
                             "layer-wise evaluation does not see: set train.eval=sampled")
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
        label = target[:, 2].cpu().numpy()
        return {"pos": s64[label == 1], "neg": s64[label == 0]}

    def eval_step(self, model: nn.Module, batch: PreparedBatch) -> MetricState:
        return self._score_state(self.score(model, model(batch.blocks, batch.x), batch.y), batch.y)

    def metric_state(self, out: Tensor, target: Tensor) -> MetricState:
        return self._score_state(self.score(None, out, target), target)

    def eval_rows(self, part: Part, split: str) -> np.ndarray:
        if split == "train":
            return np.empty(0, np.int64)
        pos, neg = self._owned_pairs(part, split)
        return np.concatenate([pos[:, 0], neg[:, 0]])

    def eval_state(self, part: Part, outputs: Tensor, split: str) -> MetricState:
        """Layer-wise: the owned pairs scored from the final rows of their endpoints (the
        remote sources' rows follow the owned ones, :meth:`Task.extra_rows`)."""
        if split == "train":
            return {}
        pos, neg = self._owned_pairs(part, split)
        pairs = np.concatenate([pos, neg])
        extra = self.extra_rows(part)
        owned = (pairs >= part.start) & (pairs < part.stop)
        rows = np.where(owned, pairs - part.start,
                        part.num_owned + np.searchsorted(extra, pairs)).astype(np.int64)
        label = np.r_[np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)]
        target = torch.from_numpy(np.stack([rows[:, 0], rows[:, 1], label,
                                            np.full(len(pairs), -1)], 1).astype(np.int64))
        return self.metric_state(outputs, target)

    def merge(self, states: Sequence[MetricState]) -> MetricState:
        """Scores concatenate (the merged state is the multiset of all scores); counts sum."""
        out: MetricState = {}
        for st in states:
            for k, v in st.items():
                v = np.asarray(v)
                if k in out:
                    out[k] = np.concatenate([out[k], v]) if k in _SCORE_KEYS else out[k] + v
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
        return res

    def predict(self, out: Tensor, what: str) -> Tensor:
        if what == "logits":
            return out
        raise ValueError(f"--what {what!r}: link prediction writes 'embeddings' (node rows)")
