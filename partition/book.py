"""The partition book: which part owns a node, and local <-> global ids.

Nodes are renumbered so that part ``p`` owns the contiguous new ids
``[offsets[p], offsets[p + 1])`` (DGL's ``RangePartitionBook``). The book is then the
``k + 1`` integers ``offsets``, and every lookup is arithmetic or one ``searchsorted``:
``owner(v) = searchsorted(offsets, v, side='right') - 1``. Empty parts (equal
consecutive offsets) own nothing and are never returned by :meth:`PartitionBook.owner`.

A :class:`~partition.store.PartitionSet` has one book, every
:class:`~partition.store.Part` carries it, and the runtime groups remote ids by owner
through it (:func:`value_groups`). Imports numpy only.
"""

from __future__ import annotations

import numpy as np

from partition.errors import PartitionError

__all__ = ["PartitionBook", "value_groups"]


def value_groups(values: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(value, positions)`` for each distinct value in ``values`` (ascending values;
    positions ascending within a value): how ids are grouped by owner for requests, and
    by node type within a typed feature reply and a typed cache."""
    values = np.asarray(values, dtype=np.int64)
    order = np.argsort(values, kind="stable")
    cuts = np.flatnonzero(np.diff(values[order])) + 1
    return [(int(values[g[0]]), g) for g in np.split(order, cuts) if g.size]


class PartitionBook:
    """Range partition book over ``num_nodes`` new ids in ``num_parts`` parts."""

    __slots__ = ("offsets",)

    def __init__(self, offsets: np.ndarray | list[int]) -> None:
        off = np.array(offsets, dtype=np.int64)  # a private copy: the book never changes
        if off.ndim != 1 or off.size < 2:
            raise PartitionError(f"offsets: expected k + 1 >= 2 integers, got shape {off.shape}")
        if off[0] != 0 or np.any(np.diff(off) < 0):
            raise PartitionError(f"offsets={off.tolist()[:8]}...: must start at 0 and never decrease")
        off.setflags(write=False)
        self.offsets = off

    def __repr__(self) -> str:
        return f"PartitionBook(num_parts={self.num_parts}, num_nodes={self.num_nodes})"

    @classmethod
    def single(cls, num_nodes: int) -> PartitionBook:
        """One part owning all ``num_nodes`` nodes (the single-process run)."""
        return cls(np.array([0, num_nodes], dtype=np.int64))

    @property
    def num_parts(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def num_nodes(self) -> int:
        return int(self.offsets[-1])

    def part_range(self, p: int) -> tuple[int, int]:
        """``(start, stop)``: part ``p`` owns new ids ``start <= v < stop``."""
        self._check_part(p)
        return int(self.offsets[p]), int(self.offsets[p + 1])

    def part_sizes(self) -> np.ndarray:
        """Nodes owned by each part, int64 ``[k]``."""
        return np.diff(self.offsets)

    def owner(self, ids: np.ndarray) -> np.ndarray:
        """Part owning each id (int64, same shape), by one ``searchsorted``.

        Raises :class:`PartitionError` for an id outside ``[0, num_nodes)``.
        """
        ids = np.asarray(ids, dtype=np.int64)
        own = np.searchsorted(self.offsets, ids, side="right") - 1
        if own.size and (own.min() < 0 or own.max() >= self.num_parts):
            bad = int(ids.min()) if own.min() < 0 else int(ids.max())
            raise PartitionError(f"node id {bad} is outside [0, num_nodes={self.num_nodes})")
        return own.astype(np.int64, copy=False)

    def to_local(self, ids: np.ndarray, p: int) -> np.ndarray:
        """Row of each global id inside part ``p``; every id must be owned by ``p``."""
        start, stop = self.part_range(p)
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < start or ids.max() >= stop):
            bad = int(ids.min()) if ids.min() < start else int(ids.max())
            raise PartitionError(f"node id {bad} is not owned by part {p} (it owns [{start}, {stop}))")
        return ids - start

    def to_global(self, local: np.ndarray, p: int) -> np.ndarray:
        """Global id of each row ``local`` of part ``p``; rows must lie in ``[0, size of p)``."""
        start, stop = self.part_range(p)
        local = np.asarray(local, dtype=np.int64)
        if local.size and (local.min() < 0 or local.max() >= stop - start):
            bad = int(local.min()) if local.min() < 0 else int(local.max())
            raise PartitionError(f"row {bad} is outside part {p}'s [0, {stop - start})")
        return local + start

    def split_sorted(self, ids: np.ndarray) -> np.ndarray:
        """For sorted ``ids``: int64 ``[k + 1]`` bounds such that ``ids[b[q]:b[q + 1]]`` are
        owned by part ``q`` (how a part's sorted halo is grouped by owner)."""
        return np.searchsorted(np.asarray(ids, dtype=np.int64), self.offsets).astype(np.int64)

    def _check_part(self, p: int) -> None:
        if not isinstance(p, int | np.integer) or not 0 <= int(p) < self.num_parts:
            raise PartitionError(f"part p={p!r}: expected an int in [0, {self.num_parts})")


def cut_counts(book: PartitionBook, src: np.ndarray, dst_baseline: np.ndarray,
               baseline: np.ndarray) -> tuple[np.ndarray, int]:
    """In-edges ``src -> dst`` of one part (new ids): how many come from each part (the part's
    row of the cut matrix, ``int64 [k]``), and how many the assignment ``baseline`` (the
    part of every new id) cuts, ``dst_baseline`` being the baseline part of each edge's
    destination."""
    return (np.bincount(book.owner(src), minlength=book.num_parts),
            int(np.count_nonzero(baseline[src] != dst_baseline)))
