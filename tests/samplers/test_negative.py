"""Negative sampling (``samplers.negative``): draws in graph ids from a hash of the
positive, redraws of edges, and the evaluation negatives of a split."""

from __future__ import annotations

import numpy as np
import pytest

from samplers.edge_keys import undirected_keys
from samplers.negative import (
    MAX_KEYED_NODES,
    NegativeSampler,
    NegativeSampling,
    edge_keys,
    is_edge_or_loop,
    sample_non_edges,
)


def dense_edges(n: int = 60, seed: int = 0) -> np.ndarray:
    """About a fifth of all node pairs, each once with ``u < v``."""
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, (n * n // 5, 2))
    e = e[e[:, 0] != e[:, 1]]
    return np.unique(np.sort(e, axis=1), axis=0)


def test_draws_depend_on_the_positive_alone() -> None:
    """A positive's negatives are the same whatever batch it sits in and in whichever
    order; the epoch changes them."""
    s = NegativeSampler(NegativeSampling("uniform_pairs", 4), num_nodes=50, dst_range=(0, 50))
    src, dst = np.arange(10), np.arange(10, 20)
    whole = s.sample(src, dst, seed=1, epoch=2)
    assert whole.src is not None and whole.src.shape == whole.dst.shape == (10, 4)
    part = s.sample(src[[7, 3]], dst[[7, 3]], seed=1, epoch=2)
    assert part.src is not None
    assert np.array_equal(part.dst, whole.dst[[7, 3]]) and np.array_equal(part.src, whole.src[[7, 3]])
    assert not np.array_equal(s.sample(src, dst, seed=1, epoch=3).dst, whole.dst)


def test_destinations_stay_in_the_destination_range() -> None:
    """A user-item graph: destinations are items, ``uniform_pairs`` sources are users."""
    s = NegativeSampler(NegativeSampling("uniform_pairs", 50), num_nodes=30, dst_range=(10, 30))
    neg = s.sample(np.arange(5), np.arange(10, 15), seed=0, epoch=0)
    assert neg.src is not None
    assert neg.dst.min() >= 10 and neg.dst.max() < 30 and neg.src.max() < 10


def test_in_batch_takes_the_other_positives_destinations() -> None:
    s = NegativeSampler(NegativeSampling("in_batch", 2), num_nodes=10, dst_range=(0, 10))
    neg = s.sample(np.array([0, 1, 2]), np.array([5, 6, 7]), seed=0, epoch=0)
    assert neg.src is None and neg.dst.tolist() == [[6, 7], [7, 5], [5, 6]]


@pytest.mark.parametrize("mode", ["uniform", "uniform_pairs", "degree"])
def test_rejection_leaves_no_edge_and_keeps_what_was_no_edge(mode: str) -> None:
    n, e = 60, dense_edges()
    deg = np.bincount(e.ravel(), minlength=n)
    kw = {"num_nodes": n, "dst_range": (0, n), "in_degree": deg, "train_edges": e}
    plain = NegativeSampler(NegativeSampling(mode, 10), **kw)  # type: ignore[arg-type]
    strict = NegativeSampler(NegativeSampling(mode, 10, reject_edges=True), **kw)  # type: ignore[arg-type]
    src, dst = e[:100, 0], e[:100, 1]

    def pairs(s: NegativeSampler) -> np.ndarray:
        neg = s.sample(src, dst, seed=4, epoch=1)
        a = np.broadcast_to(src[:, None], neg.dst.shape) if neg.src is None else neg.src
        return np.stack([a.reshape(-1), neg.dst.reshape(-1)], 1)

    keys = edge_keys(e, n, True)
    before, after = pairs(plain), pairs(strict)
    hit = is_edge_or_loop(keys, before[:, 0], before[:, 1], n, True)
    assert hit.mean() > 0.1
    assert not is_edge_or_loop(keys, after[:, 0], after[:, 1], n, True).any()
    assert np.array_equal(after[~hit], before[~hit])


def test_rejection_refuses_graphs_too_large_to_key() -> None:
    with pytest.raises(ValueError, match="reject_edges=true keys each edge as u \\* n \\+ v"):
        NegativeSampler(NegativeSampling("uniform", 1, reject_edges=True), num_nodes=MAX_KEYED_NODES + 1,
                        dst_range=(0, 10), train_edges=np.zeros((1, 2), np.int64))


def test_evaluation_negatives_are_non_edges_drawn_from_the_generator() -> None:
    n, e = 60, dense_edges(seed=1)
    keys = undirected_keys(e[:, 0], e[:, 1], n)[::-1]  # any order
    src = np.arange(40)
    a = sample_non_edges(np.random.default_rng(3), src, (0, n), keys, n, 3)
    b = sample_non_edges(np.random.default_rng(3), src, (0, n), keys, n, 3)
    assert np.array_equal(a, b) and a.shape == (120, 2)
    assert np.array_equal(a[:, 0], np.repeat(src, 3))
    assert not is_edge_or_loop(np.sort(keys), a[:, 0], a[:, 1], n, True).any()
