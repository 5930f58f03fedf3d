"""Graphs built for partition tests, each named for its topology."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partition import PartitionConfig, PartitionSet, build_partition_set
from partition.graph import Graph, csr_from_edges


def graph_from_edges(src: np.ndarray, dst: np.ndarray, n: int, *, seed: int = 0,
                     num_features: int = 5, num_classes: int = 3, train_frac: float = 0.5,
                     name: str = "g", **csr: object) -> Graph:
    """A graph with the given edges, random features/labels and a random split."""
    rng = np.random.default_rng(seed)
    indptr, indices = csr_from_edges(src, dst, n, **csr)  # type: ignore[arg-type]
    perm = rng.permutation(n)
    a, b = max(1, int(train_frac * n)), int((train_frac + (1 - train_frac) / 2) * n)
    return Graph(indptr=indptr, indices=indices,
                 x=rng.normal(size=(n, num_features)).astype(np.float32),
                 y=rng.integers(0, num_classes, n).astype(np.int64),
                 train_idx=np.sort(perm[:a]).astype(np.int64),
                 val_idx=np.sort(perm[a:b]).astype(np.int64),
                 test_idx=np.sort(perm[b:]).astype(np.int64),
                 num_classes=num_classes, name=name).validate()


def planted_blocks(blocks: int = 4, size: int = 150, p_in: float = 0.08, p_out: float = 0.004,
                   seed: int = 0, **kw: object) -> Graph:
    """Undirected stochastic block model; node v is in block v // size."""
    rng = np.random.default_rng(seed)
    n = blocks * size
    block = np.arange(n) // size
    u, v = np.triu_indices(n, 1)
    p = np.where(block[u] == block[v], p_in, p_out)
    keep = rng.random(u.shape[0]) < p
    return graph_from_edges(u[keep], v[keep], n, undirected=True, seed=seed, name="blocks", **kw)


def directed_messy(n: int = 120, m: int = 500, seed: int = 1) -> Graph:
    """Directed, with self-loops, repeated edges, 10 isolated nodes and unsorted CSR rows."""
    rng = np.random.default_rng(seed)
    active = n - 10
    src = rng.integers(0, active, m)
    dst = rng.integers(0, active, m)
    src = np.concatenate([src, np.arange(0, active, 7), src[:20]])  # self-loops and repeats
    dst = np.concatenate([dst, np.arange(0, active, 7), dst[:20]])
    g = graph_from_edges(src, dst, n, undirected=False, dedup=False, seed=seed, name="messy")
    indices = g.indices.copy()
    for v in range(n):  # shuffle each row so rows are not sorted
        row = indices[g.indptr[v]:g.indptr[v + 1]]
        rng.shuffle(row)
    return Graph(indptr=g.indptr, indices=indices, x=g.x, y=g.y, train_idx=g.train_idx,
                 val_idx=g.val_idx, test_idx=g.test_idx, num_classes=g.num_classes,
                 name=g.name).validate()


@pytest.fixture
def blocks_graph() -> Graph:
    return planted_blocks()


@pytest.fixture
def messy_graph() -> Graph:
    return directed_messy()


@pytest.fixture
def four_parts(messy_graph: Graph, tmp_path: Path) -> PartitionSet:
    """The messy directed graph cut into 4 METIS parts under a temporary root."""
    return build_partition_set(messy_graph, PartitionConfig(parts=4), tmp_path / "parts")
