"""``CSRSource``: the graph protocol over an in-memory CSR (a whole graph or one partition)."""

from __future__ import annotations

import numpy as np

from partition.graph import Graph
from samplers import _kernels as K
from samplers.base import GraphSource, Neighbors, SamplerError


def check_ids(ids: np.ndarray, lo: int, hi: int, what: str) -> np.ndarray:
    """Return ``ids`` as a 1-d int64 array; raise naming the first id outside ``[lo, hi)``."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise SamplerError(f"{what}: expected a 1-d array of node ids, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise SamplerError(f"{what}: expected integer node ids, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size:
        mn, mx = int(arr.min()), int(arr.max())
        if mn < lo or mx >= hi:
            bad = mn if mn < lo else mx
            raise SamplerError(f"{what}: node id {bad} is outside the allowed range [{lo}, {hi})")
    return arr


def check_fanout(fanout: int, what: str = "fanout") -> int:
    if isinstance(fanout, bool) or not isinstance(fanout, int | np.integer):
        raise SamplerError(f"{what}={fanout!r}: expected an int >= 1, or -1 for all neighbours")
    if fanout == 0 or fanout < -1:
        raise SamplerError(f"{what}={fanout}: must be >= 1, or -1 for all neighbours")
    return int(fanout)


class CSRSource(GraphSource):
    """A CSR of in-neighbours: the whole graph, or the rows one partition owns.

    Row ``r`` holds the in-neighbours (global ids) of global node ``row_offset + r``; seeds
    passed to :meth:`sample_neighbors` and ids passed to :meth:`read_features` must lie in
    ``[row_offset, row_offset + n_rows)``. ``x`` (optional) holds the owned rows' features.
    ``edge_weight`` (optional, non-negative, one per edge) makes sampling edge-weighted.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, x: np.ndarray | None = None, *,
                 row_offset: int = 0, num_nodes: int | None = None,
                 edge_weight: np.ndarray | None = None) -> None:
        indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        if indptr.ndim != 1 or indptr.size < 1:
            raise SamplerError(f"indptr: expected a 1-d array of n_rows + 1 offsets, got shape {indptr.shape}")
        if indptr[0] != 0 or indptr[-1] != indices.size or np.any(np.diff(indptr) < 0):
            raise SamplerError(
                f"indptr: must start at 0, never decrease and end at len(indices)={indices.size}; "
                f"got {indptr[0]}..{indptr[-1]}")
        self.n_rows = int(indptr.size - 1)
        if row_offset < 0:
            raise SamplerError(f"row_offset={row_offset}: must be >= 0")
        self.row_offset = int(row_offset)
        total = self.row_offset + self.n_rows if num_nodes is None else int(num_nodes)
        if total < self.row_offset + self.n_rows:
            raise SamplerError(
                f"num_nodes={total}: smaller than row_offset + n_rows = {self.row_offset + self.n_rows}")
        self.num_nodes = total
        if indices.size and (indices.min() < 0 or indices.max() >= total):
            bad = int(indices.min()) if indices.min() < 0 else int(indices.max())
            raise SamplerError(f"indices: neighbour id {bad} is outside [0, num_nodes={total})")
        self.indptr, self.indices = indptr, indices
        if x is not None:
            x = np.asarray(x)
            if x.ndim != 2 or x.shape[0] != self.n_rows:
                raise SamplerError(f"x: expected shape [n_rows={self.n_rows}, F], got {x.shape}")
            if x.dtype != np.float32:
                x = x.astype(np.float32)
        self.x = x
        self.edge_weight: np.ndarray | None = None
        self._cumw = np.zeros(0, dtype=np.float64)
        self._pos_deg = np.zeros(0, dtype=np.int64)
        if edge_weight is not None:
            w = np.ascontiguousarray(edge_weight, dtype=np.float64)
            if w.shape != indices.shape:
                raise SamplerError(
                    f"edge_weight: expected one weight per edge, shape ({indices.size},), got {w.shape}")
            if not np.all(np.isfinite(w)) or (w.size and w.min() < 0):
                raise SamplerError("edge_weight: weights must be finite and >= 0")
            self.edge_weight = w
            self._cumw, self._pos_deg = K.row_cumsum(indptr, w)
            self.weighted = True

    @classmethod
    def from_graph(cls, g: Graph, *, edge_weight: np.ndarray | None = None) -> CSRSource:
        """The whole graph ``g`` with its features."""
        return cls(g.indptr, g.indices, g.x, edge_weight=edge_weight)

    def in_degrees(self) -> np.ndarray:
        """In-degree of every owned row, int64 ``[n_rows]``."""
        return np.diff(self.indptr)

    def sample_neighbors(self, seeds: np.ndarray, fanout: int, *, replace: bool,
                         key: int) -> Neighbors:
        fanout = check_fanout(fanout)
        seeds = check_ids(seeds, self.row_offset, self.row_offset + self.n_rows, "seeds")
        off = np.int64(self.row_offset)
        counts = K.sample_counts(self.indptr, self._pos_deg, seeds, off, np.int64(fanout),
                                 bool(replace), self.weighted)
        offsets = np.zeros(seeds.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.int64)
        k = np.uint64(int(key) & ((1 << 64) - 1))
        if self.weighted:
            assert self.edge_weight is not None
            K.sample_weighted(self.indptr, self.indices, self.edge_weight, self._cumw, seeds,
                              off, np.int64(fanout), bool(replace), k, offsets, out)
        else:
            K.sample_uniform(self.indptr, self.indices, seeds, off, np.int64(fanout),
                             bool(replace), k, offsets, out)
        return Neighbors(counts=counts, nbrs=out)

    def read_features(self, ids: np.ndarray) -> np.ndarray:
        if self.x is None:
            raise SamplerError("read_features: this CSRSource was built without features (x=None)")
        ids = check_ids(ids, self.row_offset, self.row_offset + self.n_rows, "ids")
        if self.row_offset:
            ids = ids - self.row_offset
        return self.x[ids]
