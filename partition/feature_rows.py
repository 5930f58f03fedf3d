"""A typed part's feature rows held per node type, each type at its own width.

A typed graph trained as one graph (:func:`gnntrain.data.hetero.to_training_graph`) has
one feature matrix as wide as its widest type: HeCo DBLP's terms (50 features) and
authors (334) sit in rows 4,231 wide because papers have 4,231. A format-1 set's ``x.npy``
keeps that layout and the typed set stores each type at its width; :class:`TypedRows` is
what a worker holds from either: one table per
node type, each ``[n_t, w_t]`` where ``w_t`` is the last column any of the part's type-``t``
rows uses (by bit pattern, so ``-0.0`` counts as used). Reading rows gives exactly the
padded rows back (float32, zeros beyond a type's width), so a model, the sampler, the
peer server and the cache see the same values as from the padded matrix: ``shape``,
``dtype``, ``rows[ids]`` (an integer array or a slice of row positions) and
``np.asarray(rows)`` (the padded matrix, built on request) work as on an array.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["TypedRows", "fill_padded", "used_width"]


def used_width(x: np.ndarray) -> int:
    """One past the last column holding a value other than +0.0 in any row of ``x``
    (``[n, F]`` float32); 0 when every value is +0.0."""
    if x.size == 0:
        return 0
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    used = np.flatnonzero(np.any(bits != 0, axis=0))
    return int(used[-1]) + 1 if used.size else 0


def fill_padded(out: Any, tables: Sequence[Any], types: Any, pos: Any,
                nonzero: Callable[[Any], tuple[Any, ...]]) -> Any:
    """Write into zeroed ``out`` (``[n, width]``) row ``i`` of ``tables[types[i]]`` at
    position ``pos[i]``, each in the first columns its table has; numpy arrays with
    ``np.nonzero`` or tensors on one device with ``torch.nonzero(..., as_tuple=True)``."""
    for t, table in enumerate(tables):
        (sel,) = nonzero(types == t)
        if len(sel) and table.shape[1]:
            out[sel, :table.shape[1]] = table[pos[sel]]
    return out


class TypedRows:
    """Rows ``0 .. n-1`` of a ``[n, width]`` float32 matrix, stored as one table per type.

    ``row_type[r]`` is row ``r``'s type index; ``tables[t]`` holds the type-``t`` rows in
    row order, cut to the columns they use. ``rows[ids]`` returns the padded rows."""

    def __init__(self, tables: list[np.ndarray], row_type: np.ndarray, width: int) -> None:
        self.tables = tables
        self.row_type = np.ascontiguousarray(row_type, dtype=np.int64)
        counts = np.bincount(self.row_type, minlength=len(tables))
        if counts.shape[0] != len(tables) or any(int(c) != t.shape[0] for c, t in zip(counts, tables, strict=True)):
            raise ValueError(f"TypedRows: {counts.tolist()} rows per type, tables have "
                             f"{[t.shape[0] for t in tables]}")
        if any(t.ndim != 2 or t.shape[1] > width or t.dtype != np.float32 for t in tables):
            raise ValueError(f"TypedRows: every table must be float32 [n_t, w_t] with w_t <= width={width}")
        order = np.argsort(self.row_type, kind="stable")
        self.row_in_type = np.empty_like(self.row_type)
        self.row_in_type[order] = np.arange(order.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
        self.width = int(width)

    @classmethod
    def from_padded(cls, x: np.ndarray, row_type: np.ndarray, num_types: int) -> TypedRows:
        """Split a padded ``[n, F]`` matrix (an array or a memory map, read once) by type."""
        row_type = np.asarray(row_type, dtype=np.int64)
        tables = []
        for t in range(num_types):
            rows = np.asarray(x[np.flatnonzero(row_type == t)], dtype=np.float32)
            tables.append(np.ascontiguousarray(rows[:, :used_width(rows)]))
        return cls(tables, row_type, int(x.shape[1]))

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.row_type.shape[0]), self.width)

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes of the tables (the per-row type and position arrays not counted)."""
        return sum(int(t.nbytes) for t in self.tables)

    def __len__(self) -> int:
        return int(self.row_type.shape[0])

    def __getitem__(self, rows: Any) -> np.ndarray:
        ids = np.arange(len(self))[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
        out = np.zeros((ids.shape[0], self.width), dtype=np.float32)
        return fill_padded(out, self.tables, self.row_type[ids], self.row_in_type[ids], np.nonzero)

    def type_rows(self, t: int, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` (all of type ``t``) at the type's own width (``tables[t]``'s)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and np.any(self.row_type[rows] != t):
            raise ValueError(f"TypedRows.type_rows: rows of other types asked for as type {t}")
        return self.tables[t][self.row_in_type[rows]]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        x = self[np.arange(len(self))]
        return x if dtype is None else x.astype(dtype, copy=False)
