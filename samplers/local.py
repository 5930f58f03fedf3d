"""``CSRSource``: the graph protocol over an in-memory CSR (a whole graph or one partition)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from partition.graph import Graph
from samplers import _kernels as K
from samplers.base import Fanout, GraphSource, Neighbors, SamplerError


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


def check_fanout(fanout: Fanout, what: str = "fanout") -> Fanout:
    """An int fanout (>= 1, or -1 for all), or a tuple of one per relation (>= 0, or -1;
    at least one non-zero)."""
    if isinstance(fanout, tuple):
        per = tuple(_check_one(f, f"{what}[{r}]", zero=True) for r, f in enumerate(fanout))
        if not per or not any(per):
            raise SamplerError(f"{what}={fanout!r}: a per-relation fanout needs at least one "
                               "relation with a fanout >= 1 or -1")
        return per
    return _check_one(fanout, what, zero=False)


def _check_one(fanout: object, what: str, *, zero: bool) -> int:
    least = "0" if zero else "1"
    if isinstance(fanout, bool) or not isinstance(fanout, int | np.integer):
        raise SamplerError(f"{what}={fanout!r}: expected an int >= {least}, or -1 for all neighbours")
    if (fanout == 0 and not zero) or fanout < -1:
        raise SamplerError(f"{what}={fanout}: must be >= {least}, or -1 for all neighbours")
    return int(fanout)


_NO_DEGREES = np.zeros(0, dtype=np.int64)  # what the uniform kernel is given for positive degrees


@dataclass(frozen=True)
class RowWeights:
    """Edge weights over one CSR, with what the weighted kernel reads: the inclusive
    cumulative weight within each row and each row's count of positive weights."""

    weight: np.ndarray
    cumw: np.ndarray
    pos_deg: np.ndarray

    @classmethod
    def of(cls, indptr: np.ndarray, weight: np.ndarray) -> RowWeights:
        cumw, pos_deg = K.row_cumsum(indptr, weight)
        return cls(weight, cumw, pos_deg)


@dataclass(frozen=True)
class _RelationRows:
    """One relation's edges as a CSR over the source's rows: ``positions`` (into the
    source's edge arrays) grouped by row with offsets ``indptr``, and their weights."""

    positions: np.ndarray
    indptr: np.ndarray
    weights: RowWeights | None


class CSRSource(GraphSource):
    """A CSR of in-neighbours: the whole graph, or the rows one partition owns.

    Row ``r`` holds the in-neighbours (global ids) of global node ``row_offset + r``; seeds
    passed to :meth:`sample_neighbors` must lie in ``[row_offset, row_offset + n_rows)``.
    ``edge_weight`` (optional, non-negative, one per edge) makes sampling edge-weighted.
    ``edge_rel`` (optional, one relation id in ``[0, num_relations)`` per edge) makes the
    source typed: every answer carries each sampled edge's relation (``Neighbors.rels``),
    and a hop may give one fanout per relation. An int fanout draws exactly what the untyped
    source draws; a per-relation fanout draws relation ``r``'s edges of node ``v`` from a
    stream keyed by ``(key, r, v)``, so the determinism contract holds per relation. With
    edge weights as well, each relation's draw is weighted within that relation.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, *, row_offset: int = 0, num_nodes: int | None = None,
                 edge_weight: np.ndarray | None = None, edge_rel: np.ndarray | None = None,
                 num_relations: int = 0) -> None:
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
        self.edge_weight: np.ndarray | None = None
        self._weights: RowWeights | None = None
        if edge_weight is not None:
            w = np.ascontiguousarray(edge_weight, dtype=np.float64)
            if w.shape != indices.shape:
                raise SamplerError(
                    f"edge_weight: expected one weight per edge, shape ({indices.size},), got {w.shape}")
            if not np.all(np.isfinite(w)) or (w.size and w.min() < 0):
                raise SamplerError("edge_weight: weights must be finite and >= 0")
            self.edge_weight = w
            self._weights = RowWeights.of(indptr, w)
            self.weighted = True
        self.edge_rel: np.ndarray | None = None
        self.num_relations = 0
        self._pos: np.ndarray | None = None  # arange(E), built on first typed draw
        self._by_rel: list[_RelationRows] = []
        if edge_rel is not None:
            rel = np.asarray(edge_rel)
            if rel.shape != indices.shape or (rel.size and not np.issubdtype(rel.dtype, np.integer)):
                raise SamplerError(f"edge_rel: expected one integer relation id per edge, shape "
                                   f"({indices.size},), got {rel.dtype} {rel.shape}")
            if num_relations < 1 or (rel.size and (rel.min() < 0 or rel.max() >= num_relations)):
                raise SamplerError(f"edge_rel: relation ids must lie in [0, num_relations="
                                   f"{num_relations})")
            self.edge_rel = rel
            self.num_relations = int(num_relations)

    @classmethod
    def from_graph(cls, g: Graph, *, edge_weight: np.ndarray | None = None) -> CSRSource:
        """The whole graph ``g`` (with relation ids when it is typed)."""
        return cls(g.indptr, g.indices, edge_weight=edge_weight, edge_rel=g.edge_rel,
                   num_relations=len(g.edge_type_names))

    def in_degrees(self) -> np.ndarray:
        """In-degree of every owned row, int64 ``[n_rows]``."""
        return np.diff(self.indptr)

    def sample_neighbors(self, seeds: np.ndarray, fanout: Fanout, *, replace: bool,
                         key: int) -> Neighbors:
        fanout = check_fanout(fanout)
        seeds = check_ids(seeds, self.row_offset, self.row_offset + self.n_rows, "seeds")
        if isinstance(fanout, tuple):
            return self._sample_per_relation(seeds, fanout, replace, key)
        if self.edge_rel is None:
            return self._draw(self.indptr, self.indices, seeds, fanout, replace, key, self._weights)
        # typed: draw edge positions (the same draw), then read neighbour and relation
        pos = self._draw(self.indptr, self._positions(), seeds, fanout, replace, key, self._weights)
        return Neighbors(counts=pos.counts, nbrs=self.indices[pos.nbrs],
                         rels=np.asarray(self.edge_rel[pos.nbrs], dtype=np.int64))

    def _draw(self, indptr: np.ndarray, values: np.ndarray, seeds: np.ndarray, fanout: int,
              replace: bool, key: int, weights: RowWeights | None) -> Neighbors:
        """The uniform kernel over one CSR whose entries are ``values``, or the weighted one
        when ``weights`` (aligned with ``values``) are given."""
        off = np.int64(self.row_offset)
        pos_deg = weights.pos_deg if weights is not None else _NO_DEGREES
        # viewed with numpy's own int64 dtype: numba's array carries a dtype object of its own,
        # which Ray pickles again beside the neighbours' (34 bytes more per reply)
        counts = K.sample_counts(indptr, pos_deg, seeds, off, np.int64(fanout),
                                 bool(replace), weights is not None).view(np.int64)
        offsets = np.zeros(seeds.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.int64)
        k = np.uint64(int(key) & ((1 << 64) - 1))
        if weights is not None:
            K.sample_weighted(indptr, values, weights.weight, weights.cumw, seeds,
                              off, np.int64(fanout), bool(replace), k, offsets, out)
        else:
            K.sample_uniform(indptr, values, seeds, off, np.int64(fanout),
                             bool(replace), k, offsets, out)
        return Neighbors(counts=counts, nbrs=out)

    def _positions(self) -> np.ndarray:
        if self._pos is None:
            self._pos = np.arange(self.indices.size, dtype=np.int64)
        return self._pos

    def _relation_csrs(self) -> list[_RelationRows]:
        """Per relation: its edge positions and offsets over the rows (and their weights
        when the source is weighted), built once (``E`` positions and ``R x (n_rows + 1)``
        offsets in all)."""
        if not self._by_rel:
            assert self.edge_rel is not None
            rel = np.asarray(self.edge_rel, dtype=np.int64)
            row = np.repeat(np.arange(self.n_rows, dtype=np.int64), np.diff(self.indptr))
            order = np.argsort(rel, kind="stable")  # by relation, rows in order inside each
            cuts = np.searchsorted(rel[order], np.arange(self.num_relations + 1))
            built = []
            for r in range(self.num_relations):
                pos = order[cuts[r]:cuts[r + 1]]
                ptr = np.zeros(self.n_rows + 1, dtype=np.int64)
                np.cumsum(np.bincount(row[pos], minlength=self.n_rows), out=ptr[1:])
                weights = (None if self.edge_weight is None else
                           RowWeights.of(ptr, np.ascontiguousarray(self.edge_weight[pos])))
                built.append(_RelationRows(pos, ptr, weights))
            self._by_rel = built  # one assignment: safe when sampler threads race here
        return self._by_rel

    def _relations_for(self, fanout: tuple[int, ...]) -> tuple[list[_RelationRows], np.ndarray]:
        """The per-relation rows a per-relation ``fanout`` draws from (one entry per
        relation), and the relation of every edge."""
        if self.edge_rel is None or len(fanout) != self.num_relations:
            raise SamplerError(f"fanout={fanout!r}: a per-relation fanout needs a typed source "
                               f"with that many relations (this one has {self.num_relations})")
        return self._relation_csrs(), self.edge_rel

    def _sample_per_relation(self, seeds: np.ndarray, fanout: tuple[int, ...], replace: bool,
                             key: int) -> Neighbors:
        by_rel, edge_rel = self._relations_for(fanout)
        rows, picks = [], []
        for r, rr in enumerate(by_rel):
            if fanout[r] == 0:
                continue
            got = self._draw(rr.indptr, rr.positions, seeds, fanout[r], replace, K.mix_key(key, 0x4E1, r),
                             rr.weights)
            rows.append(np.repeat(np.arange(seeds.size, dtype=np.int64), got.counts))
            picks.append(got.nbrs)
        row_all = np.concatenate(rows) if rows else np.empty(0, np.int64)
        order = np.argsort(row_all, kind="stable")  # per seed, relations in id order
        pos_all = (np.concatenate(picks) if picks else np.empty(0, np.int64))[order]
        counts = np.bincount(row_all, minlength=seeds.size).astype(np.int64)
        return Neighbors(counts=counts, nbrs=self.indices[pos_all],
                         rels=np.asarray(edge_rel[pos_all], dtype=np.int64))
