"""A part's own feature rows held on the training device (``sampler.backend: torch``).

An untyped part's rows are one ``[n, F]`` table; a typed part's
(:class:`~partition.feature_rows.TypedRows`) stay one table per node type at the type's
own width, with each row's type and position in it, so the device holds what the host
holds and no padding. :meth:`DeviceRows.gather` answers the same float32 rows as reading
the host table (padded with zeros beyond a type's width), as a tensor on the device.
Rows that do not fit in GPU memory stay in page-locked host memory the GPU gathers from
(:func:`samplers.device.device_tensor`, zero-copy).
"""

from __future__ import annotations

import numpy as np
import torch

from partition.feature_rows import TypedRows, fill_padded
from samplers.device import device_tensor, fits_in_free_memory

__all__ = ["DeviceRows"]


def _nonzero(mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.nonzero(mask, as_tuple=True)


class DeviceRows:
    """Rows ``0 .. n-1`` of a part's feature table (an array or :class:`TypedRows`) on
    ``device``, or with ``mapped`` in page-locked host memory the GPU reads; build it with
    :meth:`place`, which picks."""

    def __init__(self, x: np.ndarray | TypedRows, device: torch.device, *, mapped: bool = False) -> None:
        self.device = device
        self.mapped = mapped
        self.width = int(x.shape[1])
        self.by_type: tuple[torch.Tensor, torch.Tensor] | None = None
        """A typed part's row types and positions in their type's table."""
        if isinstance(x, TypedRows):
            self.tables = [device_tensor(t, device, mapped=mapped) for t in x.tables]
            self.by_type = (device_tensor(x.row_type, device, mapped=mapped),
                            device_tensor(x.row_in_type, device, mapped=mapped))
        else:
            self.tables = [device_tensor(np.asarray(x), device, mapped=mapped)]

    @staticmethod
    def nbytes(x: np.ndarray | TypedRows) -> int:
        """Bytes ``x`` takes on a device (a typed part's per-row type and position too)."""
        if isinstance(x, TypedRows):
            return x.nbytes + x.row_type.nbytes + x.row_in_type.nbytes
        return int(x.nbytes)

    @classmethod
    def place(cls, x: np.ndarray | TypedRows, device: torch.device) -> DeviceRows:
        """``x`` on ``device`` when it fits (a GPU: at most half its free memory; the CPU:
        always, the arrays themselves without a copy), else mapped from page-locked host
        memory."""
        return cls(x, device, mapped=not fits_in_free_memory(cls.nbytes(x), device, share=0.5))

    def gather(self, rows: np.ndarray) -> torch.Tensor:
        """Rows ``rows`` (local positions), float32 ``[len(rows), width]`` on the device."""
        at = torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(self.device)
        if self.by_type is None:
            return self.tables[0][at].to(torch.float32)
        types, positions = self.by_type
        out = torch.zeros((at.shape[0], self.width), dtype=torch.float32, device=self.device)
        return fill_padded(out, self.tables, types[at], positions[at], _nonzero)
