"""The draws follow the intended distribution (chi-square tests on star graphs).

Keys are fixed, so each test is deterministic; a biased sampler fails it with
p-values far below the 1e-3 threshold.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from samplers import CSRSource

D = 24  # leaves of the star


def star(d: int = D) -> tuple[np.ndarray, np.ndarray]:
    """Node 0 has in-neighbours 1..d; the leaves have none."""
    indptr = np.concatenate([[0], np.full(d + 1, d)]).astype(np.int64)
    return indptr, np.arange(1, d + 1, dtype=np.int64)


def _draws(src: CSRSource, fanout: int, replace: bool, calls: int) -> np.ndarray:
    seed = np.zeros(1, dtype=np.int64)
    return np.concatenate([src.sample_neighbors(seed, fanout, replace=replace, key=k).nbrs
                           for k in range(calls)])


@pytest.mark.parametrize(("fanout", "replace"), [(5, False), (1, False), (5, True), (20, False)])
def test_uniform_on_star(fanout: int, replace: bool) -> None:
    src = CSRSource(*star())
    nbrs = _draws(src, fanout, replace, calls=1500)
    counts = np.bincount(nbrs - 1, minlength=D)
    assert counts.sum() == 1500 * fanout
    assert stats.chisquare(counts).pvalue > 1e-3


def test_large_fanout_uniform() -> None:
    """The hashed Floyd path (fanout > 32) is uniform too."""
    src = CSRSource(*star(100))
    counts = np.bincount(_draws(src, 40, False, calls=600) - 1, minlength=100)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_subsets_are_uniform() -> None:
    """Not just the marginals: every 2-subset of 5 leaves is equally likely."""
    src = CSRSource(*star(5))
    pairs = [tuple(sorted(src.sample_neighbors(np.zeros(1, dtype=np.int64), 2, replace=False,
                                               key=k).nbrs.tolist())) for k in range(3000)]
    _, counts = np.unique(np.array(pairs), axis=0, return_counts=True)
    assert counts.size == 10
    assert stats.chisquare(counts).pvalue > 1e-3


def test_weighted_with_replacement_is_proportional() -> None:
    w = np.arange(1, D + 1, dtype=np.float64)
    src = CSRSource(*star(), edge_weight=w)
    counts = np.bincount(_draws(src, 10, True, calls=1500) - 1, minlength=D)
    assert stats.chisquare(counts, f_exp=counts.sum() * w / w.sum()).pvalue > 1e-3


def test_weighted_single_draw_without_replacement_is_proportional() -> None:
    w = np.arange(1, D + 1, dtype=np.float64)
    src = CSRSource(*star(), edge_weight=w)
    counts = np.bincount(_draws(src, 1, False, calls=6000) - 1, minlength=D)
    assert stats.chisquare(counts, f_exp=counts.sum() * w / w.sum()).pvalue > 1e-3


def test_uniform_across_nodes_under_one_key() -> None:
    """Many centres sharing the same D leaves, one call, one key: per-node streams are
    independent, so the pooled draws are uniform too."""
    centres = 2000
    indptr = np.concatenate([[0], np.arange(1, centres + 1) * D,
                             np.full(D, centres * D)]).astype(np.int64)
    indices = np.tile(np.arange(centres, centres + D, dtype=np.int64), centres)
    src = CSRSource(indptr, indices)
    nbrs = src.sample_neighbors(np.arange(centres), 3, replace=False, key=0).nbrs
    assert stats.chisquare(np.bincount(nbrs - centres, minlength=D)).pvalue > 1e-3


def typed_star(d: int = D) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The star with its leaves' edges alternating between relations 0 and 1, weighted
    1..d: ``(indptr, indices, edge_rel, edge_weight)``."""
    indptr, indices = star(d)
    return indptr, indices, np.arange(d) % 2, np.arange(1, d + 1, dtype=np.float64)


@pytest.mark.parametrize(("fanout", "replace", "calls"), [((6, 2), True, 1500), ((1, 1), False, 6000)])
def test_weighted_per_relation_draws_are_proportional_within_each_relation(
        fanout: tuple[int, int], replace: bool, calls: int) -> None:
    indptr, indices, rel, w = typed_star()
    src = CSRSource(indptr, indices, edge_rel=rel, num_relations=2, edge_weight=w)
    seed = np.zeros(1, dtype=np.int64)
    got = [src.sample_neighbors(seed, fanout, replace=replace, key=k) for k in range(calls)]
    nbrs, rels = np.concatenate([g.nbrs for g in got]), np.concatenate([g.rels for g in got])
    assert got[0].rels is not None and np.array_equal(rels, rel[nbrs - 1])  # each edge's own relation
    for r in (0, 1):
        leaves = np.flatnonzero(rel == r)
        counts = np.bincount(nbrs[rels == r] - 1, minlength=D)[leaves]
        assert counts.sum() == calls * fanout[r]
        assert stats.chisquare(counts, f_exp=counts.sum() * w[leaves] / w[leaves].sum()).pvalue > 1e-3


def test_weighted_per_relation_skips_zero_weights_and_takes_every_positive_edge_at_minus_one() -> None:
    indptr, indices, rel, w = typed_star()
    w[:8] = 0.0  # leaves 1..8: four of each relation never drawn
    src = CSRSource(indptr, indices, edge_rel=rel, num_relations=2, edge_weight=w)
    seed = np.zeros(1, dtype=np.int64)
    for k in range(200):
        got = src.sample_neighbors(seed, (3, -1), replace=False, key=k)
        assert got.rels is not None and got.nbrs.min() > 8
        assert np.array_equal(np.sort(got.nbrs[got.rels == 1]), np.flatnonzero((rel == 1) & (w > 0)) + 1)
        assert np.sum(got.rels == 0) == 3 and np.unique(got.nbrs[got.rels == 0]).size == 3


def test_weighted_per_relation_draws_are_the_same_from_the_owner_of_the_rows() -> None:
    """The determinism contract with weights and per-relation fanouts: a source over
    part of the rows (row_offset) draws what the whole graph draws for those seeds."""
    rng = np.random.default_rng(0)
    n, deg = 60, 12
    indptr = np.arange(n + 1, dtype=np.int64) * deg
    indices = rng.integers(0, n, n * deg)
    rel, w = rng.integers(0, 3, n * deg), rng.random(n * deg) * (rng.random(n * deg) > 0.2)
    whole = CSRSource(indptr, indices, edge_rel=rel, num_relations=3, edge_weight=w)
    lo = 25
    part = CSRSource(indptr[lo:] - indptr[lo], indices[indptr[lo]:], row_offset=lo, num_nodes=n,
                     edge_rel=rel[indptr[lo]:], num_relations=3, edge_weight=w[indptr[lo]:])
    seeds = np.arange(lo, n, 3)
    for replace in (False, True):
        a = whole.sample_neighbors(seeds, (2, 4, 0), replace=replace, key=7)
        b = part.sample_neighbors(seeds, (2, 4, 0), replace=replace, key=7)
        assert np.array_equal(a.counts, b.counts) and np.array_equal(a.nbrs, b.nbrs)
        assert a.rels is not None and b.rels is not None and np.array_equal(a.rels, b.rels)
        assert not np.any(a.rels == 2)
