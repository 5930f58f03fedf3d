"""Synthetic node-classification graphs: power-law degrees, planted classes, noisy features.

The model is a degree-corrected stochastic block model (Chung-Lu within classes):

1. every node gets a class (uniform over ``classes``) and a weight ``w`` drawn from a
   Pareto law with exponent ``power_law`` (so degrees follow ``P(d) ~ d^-power_law``),
   capped at ``min(sqrt(nodes * avg_degree), nodes / classes)`` and scaled so the
   mean is ``avg_degree``;
2. node ``u`` emits ``Poisson(w_u / 2)`` edges; each goes, with probability
   ``homophily``, to a node of ``u``'s class, else to a node of another class chosen
   uniformly, the endpoint drawn proportionally to ``w`` inside that class. Both
   directions are stored, so the expected degree of ``v`` is ``w_v``; self-loops and
   repeated pairs are dropped, so the mean degree and the measured edge homophily end
   a little below the settings (avg_degree 20, homophily 0.55: 18.3 / 0.51 at 5k
   nodes, 18.8 / 0.53 at 20k, 19.8 at 1M);
3. features are a class centroid (one standard normal vector per class) plus
   Gaussian noise of std ``feature_noise``; the centroid is the node's own class,
   except for a ``feature_mismatch`` share of nodes that get another class's. A
   feature-only model is thus capped near ``1 - feature_mismatch`` and blurred further
   by the noise, while the neighbourhood (a ``homophily`` share of same-class
   neighbours) recovers the rest. The features' std is then about
   ``sqrt(1 + feature_noise^2)`` (3.2 at the default noise); ``unit_variance`` divides
   them by that. Inputs that large can hold a model at chance loss for many epochs (a
   3-layer GraphSAGE with Adam lr 0.01 on 100k nodes with noise 6: 4.8% test accuracy
   after 16 epochs raw, 88.9% with unit variance);
4. a random ``train_frac`` / ``val_frac`` / rest split over all nodes.

Scale: edges are generated per block of 16,384 source nodes, each block from its own
random stream keyed by (seed, block), in two passes (count degrees, then regenerate
the same edges and write them into their rows), then every row is sorted and
deduplicated in place. Memory is the output arrays plus one block of edges and a few
``[N]`` arrays, and the graph does not depend on the machine or thread count.
Figures from ``python -m bench.synthetic`` are in the README section of this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

from partition.graph import Graph, csr_from_edges

if TYPE_CHECKING:  # only the type: importing the config models would pull in torch
    from gnntrain.config import SyntheticConfig

__all__ = ["BLOCK", "generate", "generate_one_shot"]

BLOCK = 1 << 14  # source nodes per random stream and per generation step

_LABELS, _WEIGHTS, _CENTROIDS, _SPLIT, _EDGES, _FEATURES = range(6)


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def generate(cfg: SyntheticConfig, name: str = "synthetic") -> Graph:
    """A validated synthetic :class:`Graph` for ``cfg``; equal configs give equal graphs."""
    y, w, sampler = _plan(cfg)
    n = cfg.nodes
    deg = np.zeros(n, dtype=np.int64)
    for a in range(0, n, BLOCK):  # pass 1: degrees only
        src, dst = _block_edges(cfg, a, w, y, sampler)
        _count(deg, src, dst)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    del deg
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    fill = indptr[:-1].copy()
    for a in range(0, n, BLOCK):  # pass 2: the same edges again, written into their rows
        src, dst = _block_edges(cfg, a, w, y, sampler)
        _fill(indices, fill, src, dst)
    del fill, sampler, w
    indptr, indices = _sort_dedup(indptr, indices)
    return _finish(cfg, name, indptr, indices, y)


def generate_one_shot(cfg: SyntheticConfig, name: str = "synthetic") -> Graph:
    """The same graph as :func:`generate`, built the plain way: every edge in memory at
    once, then ``csr_from_edges``. Several times the memory; the reference that tests
    and ``bench.synthetic`` compare the chunked build against."""
    y, w, sampler = _plan(cfg)
    blocks = [_block_edges(cfg, a, w, y, sampler) for a in range(0, cfg.nodes, BLOCK)]
    src = np.concatenate([b[0] for b in blocks])
    dst = np.concatenate([b[1] for b in blocks])
    del blocks
    indptr, indices = csr_from_edges(src, dst, cfg.nodes, undirected=True, dedup=True)
    return _finish(cfg, name, indptr, indices, y)


def _plan(cfg: SyntheticConfig) -> tuple[np.ndarray, np.ndarray, _ClassSampler]:
    """Classes, expected degrees and the per-class endpoint sampler."""
    n = cfg.nodes
    y = _rng(cfg.seed, _LABELS).integers(0, cfg.classes, n)
    w = _weights(n, cfg.avg_degree, cfg.power_law, _rng(cfg.seed, _WEIGHTS),
                 cap=min(np.sqrt(n * cfg.avg_degree), n / cfg.classes))
    return y, w, _ClassSampler(y, w, cfg.classes)


def _finish(cfg: SyntheticConfig, name: str, indptr: np.ndarray, indices: np.ndarray,
            y: np.ndarray) -> Graph:
    """Add features and the random split to the structure; validate."""
    x = _features(cfg, y)
    train, val, test = _split(cfg)
    return Graph(indptr=indptr, indices=indices, x=x, y=y.astype(np.int64),
                 train_idx=np.sort(train), val_idx=np.sort(val), test_idx=np.sort(test),
                 num_classes=cfg.classes, name=name).validate()


def _split(cfg: SyntheticConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train, validation and test node ids (unsorted): a seeded permutation cut by fractions."""
    n = cfg.nodes
    perm = _rng(cfg.seed, _SPLIT).permutation(n)
    n_tr = max(1, int(round(cfg.train_frac * n)))
    n_va = min(int(round(cfg.val_frac * n)), n - n_tr)
    return perm[:n_tr], perm[n_tr:n_tr + n_va], perm[n_tr + n_va:]


def _weights(n: int, avg_degree: float, power_law: float, rng: np.random.Generator,
             cap: float) -> np.ndarray:
    """Expected degrees: Pareto(``power_law``), at most ``cap``, mean ``avg_degree``.

    ``cap`` is ``min(sqrt(nodes * avg_degree), nodes / classes)``: the Chung-Lu bound,
    and the class size (a node cannot have more same-class neighbours than that).
    """
    w = (1.0 - rng.random(n)) ** (-1.0 / (power_law - 1.0))
    cap = max(cap, 2.0 * avg_degree)
    for _ in range(4):  # rescaling after capping moves the mean a little; converge
        w *= avg_degree / w.mean()
        np.minimum(w, cap, out=w)
    return w


class _ClassSampler:
    """Draws nodes of a given class with probability proportional to their weight.

    One Walker/Vose alias table per class over the nodes sorted by class: a draw is
    a uniform slot in the class's range plus a coin against ``prob[slot]``, i.e. three
    independent memory reads. (A binary search over cumulative weights costs ~20
    dependent cache misses per draw at 10M nodes and made generation 6x slower.)
    """

    def __init__(self, y: np.ndarray, w: np.ndarray, classes: int) -> None:
        order = np.argsort(y, kind="stable")
        counts = np.bincount(y, minlength=classes)
        self.first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.count = counts.astype(np.int64)
        self.empty = counts == 0
        self.prob = np.empty(y.shape[0], dtype=np.float64)
        alias = np.empty(y.shape[0], dtype=np.int64)
        _alias_tables(w[order], self.first, self.count, self.prob, alias)
        self.node = order
        self.alias_node = order[alias]

    def draw(self, cls: np.ndarray, u: np.ndarray, coin: np.ndarray) -> np.ndarray:
        slot = self.first[cls] + np.minimum((u * self.count[cls]).astype(np.int64),
                                            self.count[cls] - 1)
        return np.where(coin < self.prob[slot], self.node[slot], self.alias_node[slot])


@numba.njit(cache=True, nogil=True)
def _alias_tables(w: np.ndarray, first: np.ndarray, count: np.ndarray, prob: np.ndarray,
                  alias: np.ndarray) -> None:
    """Vose's alias method, one table per class segment ``[first[c], first[c] + count[c])``."""
    for c in range(first.shape[0]):
        k = count[c]
        if k == 0:
            continue
        f = first[c]
        scaled = w[f:f + k] * (k / w[f:f + k].sum())
        small = np.empty(k, dtype=np.int64)
        large = np.empty(k, dtype=np.int64)
        ns = 0
        nl = 0
        for j in range(k):
            if scaled[j] < 1.0:
                small[ns] = j
                ns += 1
            else:
                large[nl] = j
                nl += 1
        while ns > 0 and nl > 0:
            ns -= 1
            sj = small[ns]
            nl -= 1
            lj = large[nl]
            prob[f + sj] = scaled[sj]
            alias[f + sj] = f + lj
            scaled[lj] = scaled[lj] + scaled[sj] - 1.0
            if scaled[lj] < 1.0:
                small[ns] = lj
                ns += 1
            else:
                large[nl] = lj
                nl += 1
        for j in range(nl):  # leftovers are 1 up to rounding
            prob[f + large[j]] = 1.0
            alias[f + large[j]] = f + large[j]
        for j in range(ns):
            prob[f + small[j]] = 1.0
            alias[f + small[j]] = f + small[j]


def _block_edges(cfg: SyntheticConfig, a: int, w: np.ndarray, y: np.ndarray,
                 sampler: _ClassSampler) -> tuple[np.ndarray, np.ndarray]:
    """Edges emitted by source nodes ``[a, a + BLOCK)``, self-loops dropped."""
    b = min(a + BLOCK, w.shape[0])
    rng = _rng(cfg.seed, _EDGES, a // BLOCK)
    k = rng.poisson(w[a:b] / 2.0)
    src = np.repeat(np.arange(a, b, dtype=np.int64), k)
    m = src.shape[0]
    own = y[src]
    other = (own + rng.integers(1, cfg.classes, m)) % cfg.classes
    cls = np.where(rng.random(m) < cfg.homophily, own, other)
    if sampler.empty.any():  # a tiny graph may leave a class empty: stay in the own class
        cls = np.where(sampler.empty[cls], own, cls)
    dst = sampler.draw(cls, rng.random(m), rng.random(m))
    keep = src != dst
    return src[keep], dst[keep]


def _features(cfg: SyntheticConfig, y: np.ndarray) -> np.ndarray:
    """Class centroid plus N(0, feature_noise^2) noise (divided by sqrt(1 + feature_noise^2)
    with ``unit_variance``), float32, generated per block."""
    centroids = _centroids(cfg)
    x = np.empty((y.shape[0], cfg.features), dtype=np.float32)
    for a in range(0, y.shape[0], BLOCK):
        b = min(a + BLOCK, y.shape[0])
        _feature_rows(cfg, centroids, a, y[a:b], x[a:b])
    return x


def _centroids(cfg: SyntheticConfig) -> np.ndarray:
    return _rng(cfg.seed, _CENTROIDS).standard_normal((cfg.classes, cfg.features), dtype=np.float32)


def _feature_rows(cfg: SyntheticConfig, centroids: np.ndarray, a: int, y: np.ndarray,
                  out: np.ndarray) -> None:
    """Features of the block of rows starting at ``a`` (a multiple of ``BLOCK``) into ``out``."""
    rng = _rng(cfg.seed, _FEATURES, a // BLOCK)
    rng.standard_normal(out=out, dtype=np.float32)
    out *= np.float32(cfg.feature_noise)
    centre = y.copy()
    swap = rng.random(int(y.shape[0])) < cfg.feature_mismatch
    centre[swap] = (centre[swap] + rng.integers(1, cfg.classes, int(swap.sum()))) % cfg.classes
    out += centroids[centre]
    if cfg.unit_variance:
        out *= np.float32(1.0 / np.sqrt(1.0 + cfg.feature_noise ** 2))


@numba.njit(cache=True, nogil=True)
def _count(deg: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    for i in range(src.shape[0]):
        deg[src[i]] += 1
        deg[dst[i]] += 1


@numba.njit(cache=True, nogil=True)
def _fill(indices: np.ndarray, fill: np.ndarray, src: np.ndarray, dst: np.ndarray) -> None:
    """Store ``u -> v`` in row ``v`` and ``v -> u`` in row ``u`` (the graph is undirected)."""
    for i in range(src.shape[0]):
        u = src[i]
        v = dst[i]
        indices[fill[v]] = u
        fill[v] += 1
        indices[fill[u]] = v
        fill[u] += 1


@numba.njit(cache=True, parallel=True)
def _sort_rows(indptr: np.ndarray, indices: np.ndarray, counts: np.ndarray) -> None:
    """Sort every row in place and count its distinct entries."""
    for r in numba.prange(indptr.shape[0] - 1):
        seg = indices[indptr[r]:indptr[r + 1]]
        seg.sort()
        c = 0
        for j in range(seg.shape[0]):
            if j == 0 or seg[j] != seg[j - 1]:
                c += 1
        counts[r] = c


@numba.njit(cache=True, nogil=True)
def _compact_unique(indptr: np.ndarray, indices: np.ndarray) -> None:
    """Move each sorted row's distinct entries left, in place; rewrite ``indptr``."""
    k = 0
    for r in range(indptr.shape[0] - 1):
        start = indptr[r]
        end = indptr[r + 1]
        indptr[r] = k
        prev = -1
        for j in range(start, end):
            v = indices[j]
            if j == start or v != prev:
                indices[k] = v
                k += 1
            prev = v
    indptr[indptr.shape[0] - 1] = k


def _sort_dedup(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted ascending with repeated neighbours removed (as ``csr_from_edges`` does).

    Sorting is parallel over rows; the compaction runs in place, and the array is then
    shrunk with ``resize`` (no second copy of ``indices``, 1.6 GB at 10M nodes).
    """
    counts = np.empty(indptr.shape[0] - 1, dtype=np.int64)
    _sort_rows(indptr, indices, counts)
    if counts.sum() == indices.shape[0]:
        return indptr, indices
    _compact_unique(indptr, indices)
    indices.resize(int(indptr[-1]), refcheck=False)  # the only reference is ours
    return indptr, indices
