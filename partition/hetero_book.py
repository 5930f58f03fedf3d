"""The typed partition book: ``(type, id)`` <-> ``(part, local id)``.

Nodes of every type are renumbered so that part ``p`` owns the contiguous **type-local**
new ids ``[offsets_t[p], offsets_t[p + 1])`` of each type ``t`` (one range book per type,
:class:`~partition.book.PartitionBook`), and inside part ``p`` the owned nodes are laid
out type by type: rows ``[start[p, t], start[p, t + 1])`` of the part are its nodes of
type ``t``, in new-id order. The whole book is the ``k x T`` matrix ``counts`` (nodes of
type ``t`` owned by part ``p``) and the type order; everything else is a cumulative sum.

The same layout gives a homogeneous numbering (part-major, type-minor, as DistDGL's):
``homogeneous(t, i) = part_offsets[p] + to_local(t, i, p)`` with ``p = owner(t, i)``, so
:attr:`HeteroPartitionBook.homogeneous_book` is an ordinary range book over all nodes.
"""

from __future__ import annotations

import numpy as np

from partition.book import PartitionBook
from partition.errors import PartitionError

__all__ = ["HeteroPartitionBook"]


def _cum(a: np.ndarray) -> np.ndarray:
    out = np.zeros(a.shape[0] + 1, dtype=np.int64)
    np.cumsum(a, out=out[1:])
    return out


class HeteroPartitionBook:
    """Range book over typed nodes: ``counts[p, t]`` nodes of ``node_types[t]`` in part ``p``."""

    __slots__ = ("counts", "homogeneous_book", "node_types", "starts", "type_books")

    def __init__(self, node_types: list[str], counts: np.ndarray | list[list[int]]) -> None:
        c = np.array(counts, dtype=np.int64)
        if c.ndim != 2 or c.shape[1] != len(node_types) or c.shape[0] < 1:
            raise PartitionError(f"counts: expected a [k >= 1, {len(node_types)}] matrix (parts x node "
                                 f"types {node_types}), got shape {list(c.shape)}")
        if np.any(c < 0):
            raise PartitionError("counts: node counts must be >= 0")
        if len(set(node_types)) != len(node_types):
            raise PartitionError(f"node_types={node_types}: repeated type name")
        c.setflags(write=False)
        self.node_types = list(node_types)
        self.counts = c
        self.type_books = {t: PartitionBook(_cum(c[:, i])) for i, t in enumerate(node_types)}
        self.homogeneous_book = PartitionBook(_cum(c.sum(axis=1)))
        starts = np.zeros((c.shape[0], c.shape[1] + 1), dtype=np.int64)
        np.cumsum(c, axis=1, out=starts[:, 1:])
        starts.setflags(write=False)
        self.starts = starts

    def __repr__(self) -> str:
        return f"HeteroPartitionBook(num_parts={self.num_parts}, node_types={self.node_types})"

    @property
    def num_parts(self) -> int:
        return int(self.counts.shape[0])

    def num_nodes(self, node_type: str) -> int:
        return self.book(node_type).num_nodes

    def book(self, node_type: str) -> PartitionBook:
        """The range book of one type's new type-local ids."""
        try:
            return self.type_books[node_type]
        except KeyError:
            raise PartitionError(f"node_type={node_type!r}: not in the book; node types: "
                                 f"{self.node_types}") from None

    def owner(self, node_type: str, ids: np.ndarray) -> np.ndarray:
        """Part owning each new type-local id (one ``searchsorted``)."""
        return self.book(node_type).owner(ids)

    def part_type_range(self, p: int, node_type: str) -> tuple[int, int]:
        """``(lo, hi)``: rows of part ``p`` that hold its nodes of ``node_type``."""
        self.book(node_type).part_range(p)
        i = self.node_types.index(node_type)
        return int(self.starts[p, i]), int(self.starts[p, i + 1])

    def to_local(self, node_type: str, ids: np.ndarray, p: int) -> np.ndarray:
        """Row inside part ``p`` of each new type-local id; every id must be owned by ``p``."""
        lo, _ = self.part_type_range(p, node_type)
        return self.book(node_type).to_local(ids, p) + lo

    def to_global(self, p: int, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(type index into node_types, new type-local id)`` of each row of part ``p``."""
        self.homogeneous_book.part_range(p)
        local = np.asarray(local, dtype=np.int64)
        size = int(self.starts[p, -1])
        if local.size and (local.min() < 0 or local.max() >= size):
            bad = int(local.min()) if local.min() < 0 else int(local.max())
            raise PartitionError(f"row {bad} is outside part {p}'s [0, {size})")
        ti = np.searchsorted(self.starts[p], local, side="right") - 1
        first = np.array([self.type_books[t].offsets[p] for t in self.node_types], dtype=np.int64)
        return ti.astype(np.int64), local - self.starts[p, ti] + first[ti]

    def to_homogeneous(self, node_type: str, ids: np.ndarray) -> np.ndarray:
        """Homogeneous new id (part-major, type-minor) of each new type-local id."""
        ids = np.asarray(ids, dtype=np.int64)
        b = self.book(node_type)
        own = b.owner(ids)
        i = self.node_types.index(node_type)
        return self.homogeneous_book.offsets[own] + self.starts[own, i] + ids - b.offsets[own]
