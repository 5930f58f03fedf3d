"""Negative sampling for link prediction: the training negatives of each positive, and the
evaluation negatives of a random edge split.

Configured as PyG's link loaders take ``NegativeSampling(mode, amount)``: a
:class:`NegativeSampling` names the mode, the amount per positive and whether drawn pairs
that are edges are drawn again; a :class:`NegativeSampler` binds it to one graph (its node
count, the destination range, in-degrees for ``degree``, the training edges for
``reject_edges``) and draws in the graph's own ids, so a positive gets the same negatives
whichever worker, step or partitioning asks (the caller maps partitioned ids to graph ids
and back).

Modes, ``amount`` negatives ``(u, w)`` per positive ``(u, v)``:

* ``uniform``: ``w`` uniform over the destination range (all nodes; the items of a
  user-item graph);
* ``uniform_pairs``: both ends drawn, ``(w1, w2)`` uniform over the source and destination
  spaces (the random pairs OGB's examples train against and its ``edge_neg`` sets hold);
* ``degree``: ``w`` with probability proportional to ``in_degree(w) ** 0.75``;
* ``in_batch``: the destinations of the other positives of the same batch (nothing drawn).

The uniform, uniform_pairs and degree draws are a hash of (seed, epoch, u, v, j)
(:func:`samplers.hashing.hash_uniform`). With ``reject_edges`` a drawn pair that is a
training edge (either direction of an undirected graph) or a self-loop is drawn again from
the next stream of the same hash, up to :data:`MAX_REDRAWS` times (what PyG's
``negative_sampling`` and DGL's ``GlobalUniform`` give); the test is a sorted array of the
training edges' keys ``u * n + v`` (8 bytes per edge).

Evaluation negatives (:func:`sample_non_edges`): random non-edges from a numpy generator,
drawn once when a split is made; or, harder (:func:`common_neighbour_non_edges`, after
HeaRT, Li et al. 2023), each positive's source paired with the non-neighbours that share
the most neighbours with it in the training graph, which a model cannot rank low by
structure alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from samplers.edge_keys import contains, pair_keys, undirected_keys
from samplers.hashing import hash_uniform

__all__ = ["MAX_KEYED_NODES", "MAX_REDRAWS", "NegativeMode", "NegativeSampler", "NegativeSampling",
           "Negatives", "edge_keys", "is_edge_or_loop", "sample_non_edges"]

NegativeMode = Literal["uniform", "uniform_pairs", "degree", "in_batch"]

MAX_REDRAWS = 16
"""``reject_edges``: draws of one negative before an edge is kept (a graph that dense is
near-complete; PyG's ``negative_sampling`` returns fewer negatives then)."""
MAX_KEYED_NODES = 3_037_000_499  # n * n + n below 2^63


@dataclass(frozen=True)
class NegativeSampling:
    """How training negatives are drawn (the mode names are the module docstring's)."""

    mode: NegativeMode = "uniform"
    amount: int = 1
    reject_edges: bool = False


@dataclass(frozen=True)
class Negatives:
    """The negatives of ``P`` positives, ``[P, amount]`` each: ``src`` (None: every
    negative keeps its positive's source) and ``dst``."""

    src: np.ndarray | None
    dst: np.ndarray


def edge_keys(edges: np.ndarray, num_nodes: int, undirected: bool) -> np.ndarray:
    """Sorted distinct int64 keys ``u * n + v`` of ``edges`` [E, 2] (``u <= v`` when
    ``undirected``), the set :func:`is_edge_or_loop` tests against."""
    e = np.asarray(edges, dtype=np.int64)
    if undirected:
        e = np.sort(e, axis=1)
    return np.unique(pair_keys(e[:, 0], e[:, 1], num_nodes))


def is_edge_or_loop(sorted_keys: np.ndarray, a: np.ndarray, b: np.ndarray, n: int,
                    undirected: bool) -> np.ndarray:
    """Whether each pair ``a -> b`` is a self-loop or an edge of ``sorted_keys``
    (:func:`edge_keys`; either direction when ``undirected``)."""
    keys = undirected_keys(a, b, n) if undirected else pair_keys(a, b, n)
    return contains(sorted_keys, keys) | (np.asarray(a) == np.asarray(b))


class NegativeSampler:
    """Training negatives of one graph (graph ids): ``num_nodes`` nodes, destinations in
    ``dst_range`` (sources of ``uniform_pairs`` below ``dst_range[0]`` when that is above 0,
    the users of a user-item graph, else all nodes); ``in_degree`` (every node's, of the
    message-passing graph) for ``degree``; ``train_edges`` [E, 2] for ``reject_edges``."""

    def __init__(self, config: NegativeSampling, *, num_nodes: int, dst_range: tuple[int, int],
                 in_degree: np.ndarray | None = None, train_edges: np.ndarray | None = None,
                 undirected: bool = True) -> None:
        self.config, self.num_nodes, self.dst_range = config, int(num_nodes), dst_range
        self.undirected = undirected
        lo, hi = dst_range
        self._cdf: np.ndarray | None = None  # degree ** 0.75 over the destination range
        if config.mode == "degree":
            if in_degree is None:
                raise ValueError("mode='degree' draws by in-degree: pass in_degree")
            self._cdf = np.cumsum(np.asarray(in_degree)[lo:hi].astype(np.float64) ** 0.75)
        self._keys: np.ndarray | None = None  # sorted training-edge keys
        if config.reject_edges:
            if train_edges is None:
                raise ValueError("reject_edges=true tests drawn pairs against the training "
                                 "edges: pass train_edges")
            if self.num_nodes > MAX_KEYED_NODES:
                raise ValueError(f"reject_edges=true keys each edge as u * n + v in int64, which "
                                 f"holds at most {MAX_KEYED_NODES:,} nodes; the graph has "
                                 f"{self.num_nodes:,}: set reject_edges: false")
            self._keys = edge_keys(train_edges, self.num_nodes, undirected)

    def sample(self, src: np.ndarray, dst: np.ndarray, *, seed: int, epoch: int) -> Negatives:
        """``amount`` negatives of each positive ``src -> dst`` (one batch's, graph ids;
        ``in_batch`` works in any ids, the batch order alone decides)."""
        k = self.config.amount
        if self.config.mode == "in_batch":
            shift = np.arange(1, k + 1)[None, :]
            return Negatives(None, dst[(np.arange(dst.size)[:, None] + shift) % max(1, dst.size)])
        shape = (src.size, k)
        gs = np.broadcast_to(src[:, None], shape).reshape(-1)
        gd = np.broadcast_to(dst[:, None], shape).reshape(-1)
        col = np.broadcast_to(np.arange(k)[None, :], shape).reshape(-1)
        v, w = self._draw(seed, epoch, gs, gd, col, 0)
        if self._keys is not None:
            bad = self._rejected(gs if v is None else v, w)
            for attempt in range(1, MAX_REDRAWS + 1):
                if not bad.any():
                    break
                i = np.flatnonzero(bad)
                rv, w[i] = self._draw(seed, epoch, gs[i], gd[i], col[i], attempt)
                if v is not None and rv is not None:
                    v[i] = rv
                bad[i] = self._rejected(gs[i] if v is None else v[i], w[i])
        return Negatives(None if v is None else v.reshape(shape), w.reshape(shape))

    def _draw(self, seed: int, epoch: int, gs: np.ndarray, gd: np.ndarray, col: np.ndarray,
              attempt: int) -> tuple[np.ndarray | None, np.ndarray]:
        """Draw ``attempt`` of negative ``col`` of each positive ``gs -> gd``: the source
        (None: the positive's own) and the destination. Attempt 0 uses hash streams (none,
        1); a redraw ``a`` streams ``2a`` and ``2a + 1``."""
        lo, hi = self.dst_range
        extra = () if attempt == 0 else (2 * attempt,)
        u = hash_uniform(seed, epoch, gs, gd, col, *extra)
        if self._cdf is not None:
            w = lo + np.minimum(np.searchsorted(self._cdf, u * self._cdf[-1], side="right"),
                                hi - lo - 1)
        else:
            w = lo + np.minimum((u * (hi - lo)).astype(np.int64), hi - lo - 1)
        if self.config.mode != "uniform_pairs":
            return None, w
        s_hi = lo if lo > 0 else self.num_nodes  # a user-item graph's sources are its users
        us = hash_uniform(seed, epoch, gs, gd, col, 2 * attempt + 1)
        return np.minimum((us * s_hi).astype(np.int64), s_hi - 1), w

    def _rejected(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        assert self._keys is not None
        return is_edge_or_loop(self._keys, a, b, self.num_nodes, self.undirected)


def sample_non_edges(rng: np.random.Generator, src: np.ndarray, dst_range: tuple[int, int],
                     keys: np.ndarray, n: int, per: int) -> np.ndarray:
    """``per`` random ``(src, w)`` pairs [len(src) * per, 2] per given source, ``w``
    uniform in ``dst_range`` from ``rng``, none of them a self-loop or an edge of ``keys``
    (undirected keys ``min * n + max``, any order); a drawn edge is drawn again, up to 100
    times."""
    sorted_keys = np.sort(keys)
    src = np.repeat(src, per)
    lo, hi = dst_range
    dst = rng.integers(lo, hi, size=src.size)
    for _ in range(100):
        bad = is_edge_or_loop(sorted_keys, src, dst, n, True)
        if not bad.any():
            break
        dst[bad] = rng.integers(lo, hi, size=int(bad.sum()))
    return np.stack([src, dst], axis=1)


def common_neighbour_non_edges(rng: np.random.Generator, src: np.ndarray, csr: tuple[np.ndarray, np.ndarray],
                               keys: np.ndarray, per: int) -> np.ndarray:
    """``per`` pairs ``(src, w)`` [len(src) * per, 2] per given source: the nodes ``w`` with
    the most common neighbours with the source in the undirected graph ``csr`` (``indptr``,
    ``indices``, e.g. :func:`partition.graph.csr_from_edges` of the training edges with
    ``undirected=True``; ties by a hash of the pair), none a self-loop or an edge of ``keys``
    (undirected keys ``min * n + max``, e.g. held-out positives); a source whose two-hop
    neighbourhood holds fewer gets the rest uniform at random (:func:`sample_non_edges`)."""
    from samplers._kernels import top_common_neighbours

    indptr, indices = (np.asarray(a, dtype=np.int64) for a in csr)
    n = indptr.shape[0] - 1
    src = np.asarray(src, dtype=np.int64)
    sorted_keys = np.sort(keys)  # once: the fill below takes them sorted as they are
    out = np.empty((src.size, per), dtype=np.int64)
    top_common_neighbours(indptr, indices, src, per, sorted_keys, n, out)
    dst = out.ravel()
    short = dst < 0
    if short.any():
        dst[short] = sample_non_edges(rng, np.repeat(src, per)[short], (0, n), sorted_keys, n, 1)[:, 1]
    return np.stack([np.repeat(src, per), dst], axis=1)
