"""Owner routing: which part owns an id, one request per owner, replies back in order.

:class:`PartitionPolicy` is a worker's one view of the partition book (what DGL's
``PartitionPolicy`` and GLT's ``DistFeature`` give them): it holds the book, this worker's
rank and owned id range, the :class:`Peers` that reach the other workers and the byte
counter. It groups global ids by owner (:meth:`PartitionPolicy.route`, a :class:`Route`),
sends one request per owner, counted as sent (:meth:`PartitionPolicy.ask`), and puts
per-owner results back into the caller's order (:meth:`PartitionPolicy.gather` and, for
rows, :meth:`PartitionPolicy.fetch`). Neighbour sampling
(:class:`~gnntrain.runtime.dist_source.DistGraphSource`), feature reads
(:class:`~gnntrain.runtime.dist_source.DistFeatureReader`), learnable embedding rows and
their gradients (:class:`~gnntrain.runtime.dist_embedding.DistEmbedding`) and the hidden
rows of layer-wise evaluation (:class:`~gnntrain.runtime.evaluator.Evaluator`) all route
through it.

Grouping is array work only: one ``searchsorted`` for the owners, one stable radix
``argsort`` of them, one ``bincount`` for the group bounds; ids that arrive sorted (a
part's halo) are split with ``k + 1`` binary searches instead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnntrain.runtime.codec import Encoded, TypedReply
from gnntrain.runtime.comm import CommCounter
from partition import PartitionBook
from samplers import Neighbors
from samplers.base import Fanout


class Peers(ABC):
    """How a worker reaches the other workers. Each call sends one request per owner,
    all owners concurrently, and fails (never hangs) after the configured timeout. The
    method names are the peer calls' names (:data:`PEER_CATEGORIES`)."""

    @abstractmethod
    def sample(self, requests: dict[int, np.ndarray], fanout: Fanout, replace: bool,
               key: int) -> dict[int, Neighbors]: ...

    @abstractmethod
    def features(self, requests: dict[int, np.ndarray],
                 dtype: str | tuple[str, ...]) -> dict[int, Encoded | TypedReply]: ...

    @abstractmethod
    def hidden(self, requests: dict[int, np.ndarray], layer: int) -> dict[int, Encoded]: ...

    @abstractmethod
    def embedding_rows(self, requests: dict[int, np.ndarray],
                       version: int | None) -> dict[int, np.ndarray]: ...

    @abstractmethod
    def embedding_grads(self, requests: dict[int, tuple[np.ndarray, np.ndarray]],
                        step: int) -> None: ...


PEER_CATEGORIES: dict[str, str] = {
    "sample": "sample",
    "features": "feature",
    "hidden": "eval",
    "embedding_rows": "embedding",
    "embedding_grads": "embedding_grad",
}
"""Peer call -> the byte category its requests and replies are counted in
(:data:`gnntrain.runtime.comm.CATEGORIES`)."""


@dataclass(frozen=True)
class Route:
    """``ids`` grouped by owning part.

    ``local``: positions in ``ids`` of the ids this worker owns. ``remote``: for each
    other part owning at least one of ``ids`` (ascending part), the positions of its ids.
    Positions ascend within a group, and together the groups are a permutation of
    ``range(len(ids))``: a result computed per group goes back to the caller's order by
    ``out[positions] = result``.
    """

    ids: np.ndarray
    local: np.ndarray
    remote: dict[int, np.ndarray]

    def requests(self) -> dict[int, np.ndarray]:
        """The ids to ask each remote owner for, in :attr:`remote`'s order."""
        return {q: self.ids[p] for q, p in self.remote.items()}

    def remote_positions(self) -> np.ndarray:
        """Positions of every id owned elsewhere, owner by owner."""
        if not self.remote:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(list(self.remote.values()))


class PartitionPolicy:
    """One worker's partition book, rank, peers and byte counter (see the module docstring)."""

    def __init__(self, book: PartitionBook, rank: int, peers: Peers, comm: CommCounter) -> None:
        self.book = book
        self.rank = rank
        self.peers = peers
        self.comm = comm
        self.start, self.stop = book.part_range(rank)
        k = book.num_parts
        self._key_dtype = np.uint8 if k <= 1 << 8 else np.uint16 if k <= 1 << 16 else np.int64

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    def owned(self, ids: np.ndarray) -> np.ndarray:
        """Whether this worker owns each global id (bool, same shape)."""
        return (ids >= self.start) & (ids < self.stop)

    def to_local(self, ids: np.ndarray) -> np.ndarray:
        """Row in this worker's tables of each owned global id."""
        return ids - self.start

    def route(self, ids: np.ndarray, *, presorted: bool = False) -> Route:
        """``ids`` grouped by owner. ``presorted``: ``ids`` ascend (a part's halo, a sorted
        set of rows), so each owner's ids are one run, found by binary search."""
        ids = np.asarray(ids, dtype=np.int64)
        if presorted:
            bounds = self.book.split_sorted(ids)
            order = np.arange(ids.size, dtype=np.int64)
        else:
            owners = self.book.owner(ids)
            # stable: positions ascend within an owner; a small key type sorts by radix
            order = np.argsort(owners.astype(self._key_dtype, copy=False), kind="stable")
            bounds = np.zeros(self.book.num_parts + 1, dtype=np.int64)
            np.cumsum(np.bincount(owners, minlength=self.book.num_parts), out=bounds[1:])
        local = order[bounds[self.rank]:bounds[self.rank + 1]]
        remote = {q: order[bounds[q]:bounds[q + 1]] for q in range(self.book.num_parts)
                  if q != self.rank and bounds[q + 1] > bounds[q]}
        return Route(ids, local, remote)

    def ask(self, call: str, requests: Mapping[int, Any], *args: Any) -> Any:
        """Peer call ``call`` (a :class:`Peers` method) with one request per owner, each
        counted as sent in the call's category (:data:`PEER_CATEGORIES`); the owners'
        replies by owner (none asked: ``{}``, and nothing sent)."""
        self.comm.add_requests(PEER_CATEGORIES[call], call, requests, *args)
        if not requests:
            return {}
        return getattr(self.peers, call)(requests, *args)

    def gather(self, route: Route, local: Callable[[np.ndarray], Any] | None, call: str, *args: Any,
               receive: Callable[[np.ndarray, Any], Any] | None = None) -> list[tuple[np.ndarray, Any]]:
        """``(positions, result)`` per group of ``route``: ``local(ids)`` for the owned ids
        (``None``: there must be none), then for each remote owner its reply to peer call
        ``call`` (:meth:`ask`), or ``receive(ids, reply)`` where given."""
        parts: list[tuple[np.ndarray, Any]] = []
        if route.local.size:
            if local is None:
                raise ValueError(f"worker {self.rank}: {call} of ids it owns asked of its peers")
            parts.append((route.local, local(route.ids[route.local])))
        requests = route.requests()
        replies = self.ask(call, requests, *args)
        for q, p in route.remote.items():
            parts.append((p, replies[q] if receive is None else receive(requests[q], replies[q])))
        return parts

    def fetch(self, route: Route, out: np.ndarray, local: Callable[[np.ndarray], np.ndarray] | None,
              call: str, *args: Any, receive: Callable[[np.ndarray, Any], np.ndarray] | None = None,
              at: np.ndarray | None = None) -> np.ndarray:
        """Rows of ``route.ids`` written into ``out`` (id ``i``'s row at ``out[at[i]]``, or
        at ``out[i]`` without ``at``): :meth:`gather`'s groups scattered back. Returns ``out``."""
        for pos, rows in self.gather(route, local, call, *args, receive=receive):
            out[pos if at is None else at[pos]] = rows
        return out
