"""``TorchCSRSource``: the neighbour draw of :class:`~samplers.CSRSource` in torch ops, on
the CSR's device (a GPU, or the CPU).

The numba kernels (:mod:`samplers._kernels`) give node ``v`` under key ``k`` the splitmix64
stream seeded by ``mix(k ^ mix(v + golden))``, advanced by ``golden`` before each draw (a
Weyl sequence), so draw ``s`` of ``v`` is a closed form of ``(k, v, s)``. This module
computes the same numbers with 64-bit integer tensors (two's-complement wrap-around for
the unsigned arithmetic, a masked shift for the logical one) for every seed at once:

* ``fanout = -1``, or a seed with no more neighbours than the fanout (without
  replacement): its whole row, in CSR order;
* with replacement: draw ``s`` picks row position ``floor(u_s * deg)``;
* without: Robert Floyd's ``c``-subset, one step for all seeds at a time (step ``s``
  draws ``t`` in ``[0, deg - c + s]`` and keeps it unless an earlier step picked it, else
  keeps ``deg - c + s``); the numba kernel runs the same algorithm with a scan or a hash
  set, which picks the same positions, so the result is the same for any fanout.

The answer is therefore the numba kernel's, neighbour for neighbour and in the same order
(``tests/samplers/test_device.py`` checks it on CPU tensors, block for block through
:class:`~samplers.NeighborSampler`, untyped and typed, with and without excluded edges;
a training run with ``sampler.backend: torch`` ends bit for bit where ``numba`` does).
:meth:`TorchCSRSource.draw_on_device` keeps the answer on the device, where the sampler
then relabels it into blocks (:mod:`samplers.device_neighbor`); weighted sampling has no
torch draw and is refused. Floyd's steps cost ``O(fanout)`` each per seed, so a hop costs
``O(seeds x fanout^2)`` element operations (the numba kernel: ``O(seeds x fanout)`` with
its hash set above 32).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from samplers import _kernels as K
from samplers.base import DeviceNeighbors, Fanout, Neighbors, SamplerError
from samplers.local import CSRSource, check_fanout, check_ids

__all__ = ["TorchCSRSource", "device_tensor", "draw_uniform", "fits_in_free_memory"]


def _signed(u: int) -> int:
    """A 64-bit unsigned constant as the int64 with the same bits."""
    return u - (1 << 64) if u >= 1 << 63 else u


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_M1 = _signed(0xBF58476D1CE4E5B9)
_M2 = _signed(0x94D049BB133111EB)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


def _lsr(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 bits (``>>`` on int64 tensors is arithmetic)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _mix64(z: torch.Tensor) -> torch.Tensor:
    z = (z ^ _lsr(z, 30)) * _M1
    z = (z ^ _lsr(z, 27)) * _M2
    return z ^ _lsr(z, 31)


def _node_state(key: int, v: torch.Tensor) -> torch.Tensor:
    return _mix64(_mix64(v + _GOLDEN) ^ _signed(key & ((1 << 64) - 1)))


def _below(state: torch.Tensor, step: torch.Tensor | int, n: torch.Tensor) -> torch.Tensor:
    """Draw ``step`` (0-based) of the streams ``state``: an integer uniform in ``[0, n)``."""
    # the stream advances by golden before each draw: (step + 1) * golden, modulo 2**64
    advance = (step + 1) * _GOLDEN if isinstance(step, torch.Tensor) else _signed((step + 1) * _GOLDEN % (1 << 64))
    u = _lsr(_mix64(state + advance), 11).to(torch.float64) * _INV53
    return torch.minimum((u * n.to(torch.float64)).to(torch.int64), n - 1)


def draw_uniform(indptr: torch.Tensor, values: torch.Tensor, seeds: torch.Tensor, row_offset: int,
                 fanout: int, replace: bool, key: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(counts, out)``: the entries of ``values`` (a CSR's ``indices``, or edge positions)
    drawn for each seed, grouped by seed, as :func:`samplers._kernels.sample_uniform` draws
    them. Every tensor on one device; ``seeds`` int64 global ids of rows
    ``seeds - row_offset``."""
    rows = seeds - row_offset
    start = indptr[rows]
    deg = indptr[rows + 1] - start
    if fanout < 0:
        counts = deg
    elif replace:
        counts = torch.where(deg > 0, fanout, 0)
    else:
        counts = torch.clamp(deg, max=fanout)
    n_seeds = int(seeds.shape[0])
    offsets = torch.zeros(n_seeds + 1, dtype=torch.int64, device=seeds.device)
    torch.cumsum(counts, 0, out=offsets[1:])
    seg = torch.repeat_interleave(torch.arange(n_seeds, device=seeds.device), counts)
    slot = torch.arange(seg.shape[0], device=seeds.device) - offsets[seg]  # place in the seed's group
    pos = start[seg] + slot  # the whole row, in order: fanout -1, or no more edges than the fanout
    if fanout >= 0:
        state = _node_state(key, seeds)
        if replace:
            pos = start[seg] + _below(state[seg], slot, deg[seg])
        else:
            subset = counts < deg  # the seeds Floyd samples a subset of
            if bool(subset.any()):
                picks = _floyd(state[subset], deg[subset], fanout)
                mine = subset[seg]
                pos[mine] = start[seg[mine]] + picks.reshape(-1)
    return counts, values[pos]


def _floyd(state: torch.Tensor, deg: torch.Tensor, k: int) -> torch.Tensor:
    """``[S, k]`` row positions: Floyd's uniform ``k``-subset of ``[0, deg)`` per stream, in
    the order the steps pick them (every ``deg > k``)."""
    picks = torch.empty((state.shape[0], k), dtype=torch.int64, device=state.device)
    for s in range(k):
        j = deg - k + s
        t = _below(state, s, j + 1)
        taken = (picks[:, :s] == t[:, None]).any(dim=1)
        picks[:, s] = torch.where(taken, j, t)
    return picks


class _HostView:
    """A page-locked host tensor described as CUDA memory (``__cuda_array_interface__``):
    with unified virtual addressing a pinned buffer's address is valid on the GPU too."""

    def __init__(self, pinned: torch.Tensor) -> None:
        self.pinned = pinned  # the CUDA tensor made from this object keeps it, and so the buffer, alive
        self.__cuda_array_interface__ = {
            "shape": tuple(pinned.shape), "typestr": np.dtype(str(pinned.dtype).removeprefix("torch.")).str,
            "data": (pinned.data_ptr(), False), "strides": None, "version": 3}


def fits_in_free_memory(nbytes: int, device: torch.device, share: float = 1.0) -> bool:
    """Whether ``nbytes`` take at most ``share`` of a GPU's free memory (always on the CPU):
    what decides between copying an array to the GPU and mapping it (:func:`device_tensor`)."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes <= free * share


def device_tensor(arr: np.ndarray, device: torch.device, *, mapped: bool = False) -> torch.Tensor:
    """``arr`` as a tensor on ``device``, copied there (on the CPU the array itself), or with
    ``mapped`` copied once into page-locked host memory and seen from the GPU as a CUDA
    tensor over that memory (zero-copy: kernels indexing it read the rows they need across
    the bus; nothing is held in GPU memory), for arrays larger than the GPU's free memory.
    Read-only (memory-mapped) arrays are fine: the tensor is only read."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        host = torch.from_numpy(np.ascontiguousarray(arr))
        if not mapped:
            return host.to(device)
        pinned = host.pin_memory()
    if pinned.numel() == 0:
        return torch.empty(pinned.shape, dtype=pinned.dtype, device=device)
    return torch.as_tensor(_HostView(pinned), device=device)


class TorchCSRSource(CSRSource):
    """A :class:`~samplers.CSRSource` whose draws run in torch ops on ``device`` (the
    CSR's arrays, and a typed source's per-relation rows, are copied there once, on first
    use): the same neighbours, in the same order, for every fanout, typed or not.
    :meth:`sample_neighbors` answers numpy arrays, as the protocol says;
    :meth:`draw_on_device` keeps them on the device, so a sampler over this source runs
    every hop there (:mod:`samplers.device_neighbor`). A CSR larger than the GPU's free
    memory stays in page-locked host memory that the GPU reads (:func:`device_tensor`,
    :attr:`zero_copy` set): the same draws, slower."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, *, device: torch.device | str = "cpu",
                 row_offset: int = 0, num_nodes: int | None = None, edge_rel: np.ndarray | None = None,
                 num_relations: int = 0) -> None:
        super().__init__(indptr, indices, row_offset=row_offset, num_nodes=num_nodes, edge_rel=edge_rel,
                         num_relations=num_relations)
        self.device = torch.device(device)
        self._on_device: dict[int, tuple[np.ndarray, torch.Tensor]] = {}
        # the arrays drawn from: int64 offsets and neighbours (a typed source's edge positions
        # and relations as well)
        need = 8 * (self.indptr.size + self.indices.size * (1 if self.edge_rel is None else 3))
        self.zero_copy = not fits_in_free_memory(need, self.device)

    @classmethod
    def of(cls, source: CSRSource, device: torch.device | str) -> TorchCSRSource:
        """The same rows as ``source`` (an unweighted :class:`~samplers.CSRSource`), drawn on ``device``."""
        if source.weighted:
            raise SamplerError("a weighted source: weighted sampling has no torch draw; use the numba "
                               "source (samplers.CSRSource)")
        return cls(source.indptr, source.indices, device=device, row_offset=source.row_offset,
                   num_nodes=source.num_nodes, edge_rel=source.edge_rel, num_relations=source.num_relations)

    def _tensor(self, arr: np.ndarray) -> torch.Tensor:
        """``arr`` on the device, copied once (the arrays drawn from live as long as the
        source), or mapped from page-locked host memory (:attr:`zero_copy`)."""
        got = self._on_device.get(id(arr))
        if got is None or got[0] is not arr:
            assert self.device is not None
            got = (arr, device_tensor(np.asarray(arr, dtype=np.int64), self.device, mapped=self.zero_copy))
            self._on_device[id(arr)] = got
        return got[1]

    def sample_neighbors(self, seeds: np.ndarray, fanout: Fanout, *, replace: bool,
                         key: int) -> Neighbors:
        fanout = check_fanout(fanout)
        seeds = check_ids(seeds, self.row_offset, self.row_offset + self.n_rows, "seeds")
        got = self.draw_on_device(torch.from_numpy(seeds).to(self.device), fanout, replace=replace, key=key)
        return Neighbors(counts=got.counts.cpu().numpy(), nbrs=got.nbrs.cpu().numpy(),
                         rels=None if got.rels is None else got.rels.cpu().numpy())

    def draw_on_device(self, seeds: torch.Tensor, fanout: Fanout, *, replace: bool,
                       key: int) -> DeviceNeighbors:
        """What :meth:`CSRSource.sample_neighbors` draws, on the device: ``seeds`` int64 ids
        of this source's rows there (not checked: the sampler gives ids it checked or drew)."""
        if isinstance(fanout, tuple):
            return self._per_relation(seeds, fanout, replace, key)
        indptr = self._tensor(self.indptr)
        if self.edge_rel is None:
            counts, nbrs = draw_uniform(indptr, self._tensor(self.indices), seeds, self.row_offset, fanout,
                                        replace, key)
            return DeviceNeighbors(counts, nbrs)
        # typed: draw edge positions (the same draw), then read neighbour and relation
        counts, pos = draw_uniform(indptr, self._tensor(self._positions()), seeds, self.row_offset, fanout,
                                   replace, key)
        return DeviceNeighbors(counts, self._tensor(self.indices)[pos], self._tensor(self.edge_rel)[pos])

    def _per_relation(self, seeds: torch.Tensor, fanout: tuple[int, ...], replace: bool,
                      key: int) -> DeviceNeighbors:
        """Each relation's own draw, then per seed the relations in id order (as the numba
        source composes them)."""
        by_rel, edge_rel = self._relations_for(fanout)
        rows, picks = [], []
        for r, rr in enumerate(by_rel):
            if fanout[r] == 0:
                continue
            counts, pos = draw_uniform(self._tensor(rr.indptr), self._tensor(rr.positions), seeds,
                                       self.row_offset, fanout[r], replace, K.mix_key(key, 0x4E1, r))
            rows.append(torch.repeat_interleave(torch.arange(seeds.shape[0], device=self.device), counts))
            picks.append(pos)
        row_all = torch.cat(rows)
        order = torch.sort(row_all, stable=True).indices  # per seed, relations in id order
        pos_all = torch.cat(picks)[order]
        counts = torch.bincount(row_all, minlength=int(seeds.shape[0]))
        return DeviceNeighbors(counts, self._tensor(self.indices)[pos_all], self._tensor(edge_rel)[pos_all])
