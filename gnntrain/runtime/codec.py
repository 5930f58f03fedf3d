"""Reduced-precision encoding of feature rows for transfer between workers.

``float32`` sends rows as they are; ``float16`` / ``bfloat16`` halve the bytes; ``int8``
sends one signed byte per value plus one float32 scale per row (symmetric, per-row
max-abs quantisation). Decoding always returns float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

DTYPES = ("float32", "float16", "bfloat16", "int8")


@dataclass(frozen=True)
class Encoded:
    """Rows as they travel: ``data`` (and ``scale`` for int8)."""

    data: np.ndarray
    scale: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes + (self.scale.nbytes if self.scale is not None else 0))


def encode(rows: np.ndarray, dtype: str) -> Encoded:
    if dtype == "float32":
        return Encoded(np.ascontiguousarray(rows, dtype=np.float32))
    if dtype == "float16":
        return Encoded(rows.astype(np.float16))
    if dtype == "bfloat16":
        t = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)).to(torch.bfloat16)
        return Encoded(t.view(torch.int16).numpy())
    if dtype == "int8":
        amax = np.abs(rows).max(axis=1) if rows.size else np.zeros(rows.shape[0], np.float32)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        q = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
        return Encoded(q, scale)
    raise ValueError(f"train.feature_dtype={dtype!r}: expected one of {', '.join(DTYPES)}")


def decode(enc: Encoded, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return enc.data
    if dtype == "float16":
        return enc.data.astype(np.float32)
    if dtype == "bfloat16":
        return torch.from_numpy(np.array(enc.data, copy=True)).view(torch.bfloat16).float().numpy()
    if dtype == "int8":
        assert enc.scale is not None
        return enc.data.astype(np.float32) * enc.scale[:, None]
    raise ValueError(f"train.feature_dtype={dtype!r}: expected one of {', '.join(DTYPES)}")
