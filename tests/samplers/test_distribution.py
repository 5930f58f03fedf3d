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
