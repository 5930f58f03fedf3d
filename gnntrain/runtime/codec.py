"""Encoding of feature rows for transfer between workers: reduced precision and sparsity.

``float32`` sends rows as they are; ``float16`` / ``bfloat16`` halve the bytes; ``int8``
sends one signed byte per value plus one float32 scale per row (symmetric, per-row
max-abs quantisation). Decoding always returns float32.

Independently of the dtype, a reply whose rows are mostly zeros (bag-of-words features:
0.16% of HeCo DBLP's 4,231 paper columns are set) travels as CSR -- its nonzero values at
the dtype's width, their column indices (``uint16`` up to 65,536 columns, else ``int32``)
and ``int32`` row offsets -- whenever that takes at most half the dense bytes. The choice is
made per reply from the rows' own zeros and decodes to exactly the rows the dense form
gives (a value is "zero" by its bit pattern, so ``-0.0`` is kept and sent).
``train.sparse_feature_transfer: false`` keeps every reply dense.

On a typed graph each node type travels at its own width and dtype: an owner groups a
request's ids by node type (:func:`partition.book.value_groups`: type order, request
order within a type), encodes each group's rows cut to the type's columns at the type's dtype
(:func:`type_dtypes` reads ``train.feature_dtype``: one dtype, or a mapping from node type
to dtype, float32 for the types it does not name) and replies with one :class:`Encoded`
per group; the requester groups the same ids the same way and decodes each group into
its rows (zeros beyond the type's width, as in the padded matrix).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from partition.book import value_groups
from samplers.config import per_node_type

_VALUE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}
DTYPES = tuple(_VALUE_BYTES)


@dataclass(frozen=True)
class Encoded:
    """Rows as they travel: ``data`` (and ``scale`` for int8). Rows sent sparse also carry
    ``indptr`` and ``indices`` (CSR; ``data`` then holds the nonzero values in row order)
    and the rows' ``width``."""

    data: np.ndarray
    scale: np.ndarray | None = None
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None
    width: int = 0

    @property
    def sparse(self) -> bool:
        return self.indptr is not None

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self.data, self.scale, self.indptr, self.indices)
                   if a is not None)


TypedReply = tuple[Encoded, ...]
"""A typed graph's feature reply: one :class:`Encoded` per node type the request holds,
in :func:`~partition.book.value_groups` order."""


def _check(dtype: str) -> None:
    if dtype not in _VALUE_BYTES:
        raise ValueError(f"train.feature_dtype={dtype!r}: expected one of {', '.join(DTYPES)}")


def type_dtypes(spec: str | Mapping[str, str], type_names: Sequence[str]) -> tuple[str, ...]:
    """One transfer dtype per node type from ``train.feature_dtype``: a dtype applies to
    every type; a mapping names types (``{"paper": "int8", "author": "float16"}``) and the
    types it leaves out travel float32. An untyped graph gets one dtype. A name that is not
    a node type, a mapping on an untyped graph or an unknown dtype raises ``ValueError``
    naming the field, the value and what is allowed."""
    if isinstance(spec, str):
        _check(spec)
        return (spec,) * max(len(type_names), 1)
    for name, dtype in spec.items():
        if dtype not in _VALUE_BYTES:
            raise ValueError(f"train.feature_dtype.{name}={dtype!r}: expected one of {', '.join(DTYPES)}")
    return per_node_type("train.feature_dtype", spec, type_names, "float32",
                         f"give one of {', '.join(DTYPES)}")


def _narrow(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` (float32, any shape) at a float transfer dtype's width."""
    if dtype == "float16":
        return values.astype(np.float16)
    if dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(values)).to(torch.bfloat16).view(torch.int16).numpy()
    return values


def _widen(data: np.ndarray, dtype: str) -> np.ndarray:
    """The float32 values a float transfer dtype's ``data`` stands for."""
    if dtype == "float16":
        return data.astype(np.float32)
    if dtype == "bfloat16":
        return torch.from_numpy(np.array(data, copy=True)).view(torch.bfloat16).float().numpy()
    return data


def _int8_scale(rows: np.ndarray) -> np.ndarray:
    amax = np.abs(rows).max(axis=1) if rows.size else np.zeros(rows.shape[0], np.float32)
    return np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)


def _quantise(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values / scale), -127, 127).astype(np.int8)


def sparse_pays(num_rows: int, width: int, nnz: int, dtype: str) -> bool:
    """Whether CSR takes at most half the bytes of the dense rows at ``dtype``."""
    vb = _VALUE_BYTES[dtype]
    ib = 2 if width <= 2**16 else 4
    return nnz * (vb + ib) + (num_rows + 1) * 4 <= num_rows * width * vb // 2


def encode(rows: np.ndarray, dtype: str, sparse: bool = True) -> Encoded:
    """``rows`` at ``dtype``; as CSR where :func:`sparse_pays` (``sparse=False``: never)."""
    _check(dtype)
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    n, width = rows.shape
    scale = _int8_scale(rows) if dtype == "int8" else None
    if sparse and rows.size and sparse_pays(n, width, int(np.count_nonzero(rows.view(np.uint32))),
                                            dtype):  # by bit pattern: -0.0 counts as set
        r, c = np.nonzero(rows.view(np.uint32))
        indptr = np.zeros(n + 1, np.int32)
        np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
        values = rows[r, c]
        data = _quantise(values, scale[r]) if scale is not None else _narrow(values, dtype)
        return Encoded(data, scale, indptr, c.astype(np.uint16 if width <= 2**16 else np.int32), width)
    if scale is not None:
        return Encoded(_quantise(rows, scale[:, None]), scale)
    return Encoded(_narrow(rows, dtype))


def decode(enc: Encoded, dtype: str) -> np.ndarray:
    _check(dtype)
    if enc.indptr is not None:
        assert enc.indices is not None
        n = enc.indptr.size - 1
        r = np.repeat(np.arange(n), np.diff(enc.indptr))
        values = (enc.data.astype(np.float32) * enc.scale[r] if enc.scale is not None
                  else _widen(enc.data, dtype))
        out = np.zeros((n, enc.width), np.float32)
        out[r, enc.indices] = values
        return out
    if enc.scale is not None:
        return enc.data.astype(np.float32) * enc.scale[:, None]
    return _widen(enc.data, dtype)


def decode_typed(reply: TypedReply, types: np.ndarray, dtypes: Sequence[str], width: int) -> np.ndarray:
    """The float32 ``[len(types), width]`` rows of a typed reply to ids of node ``types``
    (zeros beyond each type's columns), node type ``t`` sent at ``dtypes[t]``."""
    groups = value_groups(types)
    if len(groups) != len(reply):
        raise ValueError(f"typed feature reply: {len(reply)} groups for ids of {len(groups)} node types")
    out = np.zeros((np.asarray(types).shape[0], width), dtype=np.float32)
    for (t, pos), enc in zip(groups, reply, strict=True):
        rows = decode(enc, dtypes[t])
        out[pos, :rows.shape[1]] = rows
    return out
