"""Graphs the sampler tests share: small, with hubs, built in memory."""

from __future__ import annotations

import numpy as np
import pytest

from partition.graph import Graph, csr_from_edges
from samplers import CSRSource
from tests.conftest import make_graph


def power_law_csr(n: int = 600, m: int = 6000, gamma: float = 2.3,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Chung-Lu style graph: a few hubs with large degree, many small-degree nodes."""
    rng = np.random.default_rng(seed)
    w = np.arange(1, n + 1, dtype=np.float64) ** (-1.0 / (gamma - 1.0))
    cdf = np.cumsum(w / w.sum())
    src = np.minimum(np.searchsorted(cdf, rng.random(m)), n - 1)
    dst = np.minimum(np.searchsorted(cdf, rng.random(m)), n - 1)
    return csr_from_edges(src, dst, n, undirected=True, self_loops="remove")


@pytest.fixture
def hub_graph() -> Graph:
    return make_hub_graph()


def make_hub_graph() -> Graph:
    """600 nodes, ~12k directed edges, max degree in the hundreds, 8 features."""
    indptr, indices = power_law_csr()
    g = make_graph(600, 4, num_features=8)
    return Graph(indptr=indptr, indices=indices, x=g.x, y=g.y, train_idx=g.train_idx,
                 val_idx=g.val_idx, test_idx=g.test_idx, num_classes=g.num_classes,
                 name="hubs").validate()


@pytest.fixture
def hub_source(hub_graph: Graph) -> CSRSource:
    return CSRSource.from_graph(hub_graph)


def edge_set(indptr: np.ndarray, indices: np.ndarray) -> set[tuple[int, int]]:
    """All (src, dst) pairs of an in-neighbour CSR."""
    dst = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return set(zip(indices.tolist(), dst.tolist(), strict=True))
