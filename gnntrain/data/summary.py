"""``GraphSummary``: the figures a user checks first about a loaded graph.

Sizes, the degree distribution, split sizes, class balance, and three structural
checks that catch most loading mistakes: self-loop count, whether every edge has its
reverse (``symmetric``), and edge homophily (share of edges whose endpoints share a
label, over edges between labeled training/val/test nodes or all nodes otherwise).
All are computed in one numba pass over the CSR, without materialising ``[2, E]``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numba
import numpy as np

from partition.graph import Graph

__all__ = ["GraphSummary"]


@dataclass(frozen=True, kw_only=True)
class GraphSummary:
    """Summary figures of a :class:`Graph` (see module doc); ``format()`` prints a table."""

    name: str
    nodes: int
    edges: int
    features: int
    classes: int
    train: int
    val: int
    test: int
    mean_degree: float
    median_degree: float
    max_degree: int
    isolated_nodes: int
    self_loops: int
    symmetric: bool
    edge_homophily: float | None
    largest_class_share: float
    bytes_structure: int
    bytes_features: int
    hash: str

    @classmethod
    def of(cls, g: Graph) -> GraphSummary:
        deg = g.in_degrees()
        labeled = np.zeros(g.num_nodes, dtype=bool)
        for s in ("train", "val", "test"):
            labeled[g.split_idx(s)] = True
        loops, same, counted, symmetric = _edge_stats(g.indptr, g.indices, g.y, labeled)
        counts = np.bincount(g.y[labeled], minlength=g.num_classes)
        return cls(
            name=g.name, nodes=g.num_nodes, edges=g.num_edges, features=g.num_features,
            classes=g.num_classes, train=int(g.train_idx.size), val=int(g.val_idx.size),
            test=int(g.test_idx.size), mean_degree=float(deg.mean()),
            median_degree=float(np.median(deg)), max_degree=int(deg.max()),
            isolated_nodes=int(np.count_nonzero(deg == 0)), self_loops=int(loops),
            symmetric=bool(symmetric),
            edge_homophily=float(same / counted) if counted and g.num_classes > 1 else None,
            largest_class_share=float(counts.max() / max(counts.sum(), 1)),
            bytes_structure=int(g.indptr.nbytes + g.indices.nbytes),
            bytes_features=int(g.x.nbytes), hash=g.content_hash())

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def format(self) -> str:
        """Aligned ``key  value`` lines, one per figure."""
        rows = []
        for key, val in self.as_dict().items():
            if isinstance(val, float):
                text = f"{val:.4g}"
            elif isinstance(val, int) and not isinstance(val, bool):
                text = f"{val:,}"
            else:
                text = str(val)
            rows.append(f"{key:<20} {text}")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.format()


@numba.njit(cache=True, nogil=True)
def _edge_stats(indptr: np.ndarray, indices: np.ndarray, y: np.ndarray,
                labeled: np.ndarray) -> tuple[int, int, int, bool]:
    """(self-loops, same-label labeled edges, labeled edges, every edge has its reverse)."""
    n = indptr.shape[0] - 1
    loops = 0
    same = 0
    counted = 0
    rows_sorted = True
    for v in range(n):
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            if u == v:
                loops += 1
            if labeled[u] and labeled[v]:
                counted += 1
                if y[u] == y[v]:
                    same += 1
            if j > indptr[v] and indices[j - 1] > u:
                rows_sorted = False
    symmetric = True
    for v in range(n):
        if not symmetric:
            break
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            lo = indptr[u]
            hi = indptr[u + 1]
            found = False
            if rows_sorted:
                while lo < hi:
                    mid = (lo + hi) // 2
                    if indices[mid] < v:
                        lo = mid + 1
                    else:
                        hi = mid
                found = lo < indptr[u + 1] and indices[lo] == v
            else:
                for k in range(lo, hi):
                    if indices[k] == v:
                        found = True
                        break
            if not found:
                symmetric = False
                break
    return loops, same, counted, symmetric
