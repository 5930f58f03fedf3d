"""The graph protocol the sampler talks to, and the type it answers with.

A :class:`GraphSource` answers one question: *sample the neighbours of these ids with
this fanout*. The same :class:`~samplers.NeighborSampler` then runs on a whole graph, on
one partition's owned rows, or on a partition plus remote owners (the distributed runtime
implements the last one). Sources return structure only; features are read by a separate
step (the runtime's feature reader, ``gnntrain.engine.FeatureReader``), which also feeds
the remote-feature caches of :mod:`samplers.cache`.

Determinism contract (every implementation must keep it): the neighbours drawn for node
``v`` depend only on ``(key, v, fanout, replace)`` (and the graph), never on the order of
the seeds, how they are grouped into calls, or which process samples them. A source that
splits seeds by owner and asks each owner therefore returns exactly what one process
holding the whole graph returns. :class:`~samplers.CSRSource` derives each node's random
stream from a splitmix64 hash of ``(key, v)``; a remote owner running ``CSRSource`` on its
rows keeps the contract for free.

A source whose draws run on a device (:class:`~samplers.TorchCSRSource`, or the
distributed source of a worker that owns every node) sets :attr:`GraphSource.device` and
answers :meth:`GraphSource.draw_on_device` with tensors there; the sampler then runs every
hop on that device (:mod:`samplers.device_neighbor`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

Fanout = int | tuple[int, ...]
"""One hop's fanout: an int for all edges, or one int per relation (index = relation id)."""


class SamplerError(ValueError):
    """Bad input to a sampler, source or cache; the message names the argument and value."""


@dataclass(frozen=True)
class Neighbors:
    """Neighbours sampled for a list of seeds.

    ``counts`` int64 ``[len(seeds)]``: how many neighbours seed ``i`` got.
    ``nbrs`` int64 ``[counts.sum()]``: their **global** ids, grouped by seed in seed order
    (seed ``i``'s neighbours are ``nbrs[counts[:i].sum():counts[:i+1].sum()]``). With
    replacement a neighbour may repeat within a seed's group; without, it never does.
    ``rels`` (optional) int64 ``[counts.sum()]``: the relation id of each sampled edge, set
    by a source over a typed graph (aligned with ``nbrs``).
    """

    counts: np.ndarray
    nbrs: np.ndarray
    rels: np.ndarray | None = None


@dataclass(frozen=True)
class DeviceNeighbors:
    """:class:`Neighbors` as int64 tensors on a source's device, with the same layout."""

    counts: torch.Tensor
    nbrs: torch.Tensor
    rels: torch.Tensor | None = None


class GraphSource(ABC):
    """The sampler's graph protocol: sample neighbours (global ids throughout).

    ``num_nodes`` is the number of nodes of the **whole** graph, so ids are global.
    ``weighted`` is True when :meth:`sample_neighbors` draws by edge weight; the sampler
    checks it against its own ``weighted`` flag. ``device`` is set by a source that also
    answers :meth:`draw_on_device` for every seed it may be asked about.
    """

    num_nodes: int
    weighted: bool = False
    device: torch.device | None = None

    @abstractmethod
    def sample_neighbors(self, seeds: np.ndarray, fanout: Fanout, *, replace: bool,
                         key: int) -> Neighbors:
        """Draw up to ``fanout`` in-neighbours of each seed (``-1``: all of them); a tuple
        gives one fanout per relation of a typed source (``0``: none of that relation).

        Without replacement a seed gets ``min(fanout, degree)`` distinct neighbours; with
        replacement exactly ``fanout`` (none if it has no neighbours). ``seeds`` may be a
        view of the sampler's scratch buffer: read it during the call, do not keep it.
        """

    def draw_on_device(self, seeds: torch.Tensor, fanout: Fanout, *, replace: bool,
                       key: int) -> DeviceNeighbors:
        """:meth:`sample_neighbors` for int64 ``seeds`` on :attr:`device`, answered there:
        the same neighbours in the same order. Only a source with a ``device`` has it."""
        raise SamplerError(f"{type(self).__name__} draws on the host only (its device is None)")
