"""What a link task receives: an edge split with its message-passing graph, and, once the
graph is partitioned, the renumbering.

:func:`load_link_data` takes the split a source stores (``ogbl``, ``lightgcn``:
:func:`gnntrain.data.link.load_split`) or a seeded random split of any other graph
(:class:`RandomSplit`, :func:`gnntrain.data.link.split_edges_at_random`), and builds the graph
message passing runs on from the training edges only
(:func:`gnntrain.data.link.message_passing_graph`). :class:`LinkData` keeps the split in
the graph's own ids; :meth:`LinkData.placed` adds the map to the partitioned ids (the
partition set's renumbering) and :meth:`LinkData.owned` gives a part the evaluation pairs
whose destination it owns, in partitioned ids.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from gnntrain.data.link import EdgeSplit, load_split, message_passing_graph, split_edges_at_random

if TYPE_CHECKING:
    from gnntrain.config import DatasetConfig
    from partition.graph import Graph

__all__ = ["LinkData", "LoadedLink", "OwnedPairs", "RandomSplit", "load_link_data", "stores_split"]

STORED_SPLIT_SOURCES = ("ogbl", "lightgcn")


@dataclass(frozen=True)
class RandomSplit:
    """How a graph without a stored split is split (:func:`random_edge_split`'s settings)."""

    val_frac: float = 0.05
    test_frac: float = 0.1
    seed: int = 0
    keep_train_per_node: bool = True
    shared_negatives: int = 0
    per_positive: int = 0
    common_neighbour_negatives: bool = False


@dataclass(frozen=True)
class OwnedPairs:
    """The evaluation pairs of one split whose destination a part owns, partitioned ids:
    positives ``pos`` [P, 2], negatives ``neg`` [M, 2] and, when each positive has its own
    negatives (``neg_per_pos`` = K, ``M = P * K``), the positives' indices in the split
    (``pids``; else None)."""

    pos: np.ndarray
    neg: np.ndarray
    pids: np.ndarray | None = None


@dataclass(frozen=True)
class LinkData:
    """An edge split in graph ids, and after :meth:`placed` the renumbering: graph id
    ``v`` is partitioned id ``new[v]``, partitioned id ``i`` is graph id ``orig[i]``
    (both None before: the identity)."""

    split: EdgeSplit
    new: np.ndarray | None = None
    orig: np.ndarray | None = None

    def placed(self, new_ids: np.ndarray, *, keep_train: bool) -> LinkData:
        """This split for the partitioned graph where graph node ``v`` became
        ``new_ids[v]``; without ``keep_train`` the training edges are dropped (each part
        holds its own in-edges)."""
        new = np.asarray(new_ids, dtype=np.int64)
        orig = np.empty_like(new)
        orig[new] = np.arange(new.size, dtype=np.int64)
        split = self.split if keep_train else replace(self.split, train=np.empty((0, 2), np.int64))
        return LinkData(split, new, orig)

    def to_new(self, ids: np.ndarray) -> np.ndarray:
        """Graph ids to partitioned ids."""
        return ids if self.new is None else self.new[ids]

    def to_graph(self, ids: np.ndarray) -> np.ndarray:
        """Partitioned ids to graph ids."""
        return ids if self.orig is None else self.orig[ids]

    def owned(self, name: str, start: int, stop: int) -> OwnedPairs:
        """The pairs of split ``name`` (``val``/``test``) whose destination lies in the
        partitioned range ``[start, stop)``; a positive's own negatives go where it goes."""
        sp = self.split
        pos, neg = self.to_new(sp.pos(name)), self.to_new(sp.neg(name))
        if sp.neg_per_pos:
            m = (pos[:, 1] >= start) & (pos[:, 1] < stop)
            return OwnedPairs(pos[m], neg.reshape(-1, sp.neg_per_pos, 2)[m].reshape(-1, 2),
                              np.flatnonzero(m))
        mine = [e[(e[:, 1] >= start) & (e[:, 1] < stop)] for e in (pos, neg)]
        return OwnedPairs(mine[0], mine[1])


@dataclass(frozen=True)
class LoadedLink:
    """A loaded split and the graph message passing runs on (its training edges only)."""

    data: LinkData
    graph: Graph


def stores_split(dataset: DatasetConfig, graph: Graph | None = None) -> bool:
    """Whether the split comes from the source's own files (``ogbl``, ``lightgcn``) rather
    than a random split of ``graph`` or of the graph ``dataset`` loads."""
    return graph is None and dataset.source in STORED_SPLIT_SOURCES


def load_link_data(dataset: DatasetConfig, graph: Graph | None = None,
                   random: RandomSplit | None = None) -> LoadedLink:
    """The split of ``dataset`` (or of ``graph``, given in its place) and its
    message-passing graph: the source's stored split, else ``random`` (default
    :class:`RandomSplit`) applied to the graph. Features: the source's own, or where it
    has none (a stored split, ``dataset.features: null``) the dataset's fallback features
    rebuilt from the training edges alone."""
    x = csr = None
    if stores_split(dataset, graph):
        split = load_split(dataset)  # type: ignore[arg-type]
    else:
        from gnntrain.data.load import load_dataset

        r = random or RandomSplit()
        base = graph if graph is not None else load_dataset(dataset)
        made = split_edges_at_random(base, val_frac=r.val_frac, test_frac=r.test_frac, seed=r.seed,
                                     keep_train_per_node=r.keep_train_per_node,
                                     shared_negatives=r.shared_negatives, per_positive=r.per_positive,
                                     common_neighbour_negatives=r.common_neighbour_negatives)
        split, csr = made.split, made.train_csr
        if graph is not None or getattr(dataset, "features", "stored") is not None:
            x = base.x  # the source's own features
    g = message_passing_graph(split, dataset.name,
                              feature_fallback=getattr(dataset, "feature_fallback", "degree"),
                              fallback_dim=getattr(dataset, "fallback_dim", 32), x=x, csr=csr)
    return LoadedLink(LinkData(split), g)
