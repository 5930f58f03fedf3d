"""Communication accounting: every byte a worker sends, counted where it is sent.

Each worker owns one :class:`CommCounter`. A request is counted by the worker that
sends it (to the owner), a reply by the worker that serves it (to the requester), so
summing every worker's row gives the full ``k x k`` matrix with no double counting.

The counting rule, the same for every category (:data:`COUNTING_RULE`, written into
``comm.json``): a message's bytes are what Ray serialises for it. Ray serialises each
argument of an actor call on its own and the call's return value as one object, with
its serialization context (msgpack, and pickle protocol 5 with the numpy buffers kept
out of band); :func:`wire_bytes` runs that same serializer and adds up each value's
``total_bytes`` plus its metadata tag. So a request counts every argument (ids,
scalars, the dtype name, the requester's rank) and a reply counts the pickled
structure (tuple, ``Encoded`` object, array headers) around its array buffers. Not
counted: Ray's per-call framing (task spec, ids, RPC headers, one 13-byte marker per
positional argument), which Ray does not expose; ``messages_by_category`` gives the
message counts to add it. In-process runs (no Ray) count with the same serializer, so
their figures equal a Ray run's.

Categories: ``sample`` (frontier ids out, sampled neighbours back), ``feature``
(input-row ids out, encoded rows back), ``eval`` (layer-wise evaluation: halo ids out,
hidden rows back, float32, layer 0's being the features; both kinds of rows go as CSR
where that halves them, :mod:`gnntrain.runtime.codec`), ``gradient``, ``control`` (the
coordinator's calls: arguments to and replies from each worker), and for a learnable
node embedding ``embedding`` (row ids out, table rows back) and ``embedding_grad`` (row
ids and their gradients out to the owner, its empty reply back). Gradient bytes are *computed* from the ring all-reduce
formula (gloo does not expose its wire bytes) and the report labels them so.

On a typed graph the ``sample`` and ``feature`` bytes are also broken down by node type
(``by_node_type``): each message's counted bytes are split over the node types of the ids
it carries (the frontier nodes asked about, the rows asked for; a reply goes with its
request's ids), in proportion to their number -- a feature reply, whose types travel at
their own widths and dtypes, in proportion to each type's encoded bytes instead --
rounded so that the parts add up to the message exactly. Per category, the types' bytes
therefore sum to the category's bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CATEGORIES = ("sample", "feature", "eval", "gradient", "control", "embedding", "embedding_grad")
TYPED_CATEGORIES = ("sample", "feature")
"""Categories whose bytes a typed graph breaks down by node type."""

COUNTING_RULE = ("Ray's serialised size of every argument of a request and of every reply "
                 "(total_bytes + metadata of its serialization context: pickled structure and "
                 "out-of-band array buffers); Ray's per-call framing is not counted")


def wire_bytes(*values: Any) -> int:
    """Bytes Ray moves for ``values``: each serialised on its own, as Ray serialises each
    argument of a call (pass the request's arguments) or a call's return value (pass the
    reply alone)."""
    from ray._private.worker import global_worker  # works before and without ray.init

    ctx = global_worker.get_serialization_context()
    total = 0
    for v in values:
        s = ctx.serialize(v)
        total += int(s.total_bytes) + len(s.metadata)
    return total


def ring_allreduce_bytes(nbytes: int, world: int) -> int:
    """Bytes one worker sends in a ring all-reduce of ``nbytes``: 2 (k-1)/k of the buffer."""
    if world <= 1:
        return 0
    return int(2 * (world - 1) * nbytes // world)


@dataclass
class CommCounter:
    """Bytes and messages one worker sent, by category and destination."""

    rank: int
    world: int
    node_types: np.ndarray | None = None  # type index of every node (typed graphs)
    type_names: tuple[str, ...] = ()
    bytes: np.ndarray = field(init=False)
    messages: np.ndarray = field(init=False)
    type_bytes: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()  # serving threads and the training thread both count
        self.bytes = np.zeros((len(CATEGORIES), self.world), dtype=np.int64)
        self.messages = np.zeros((len(CATEGORIES), self.world), dtype=np.int64)
        self.type_bytes = np.zeros((len(TYPED_CATEGORIES), len(self.type_names)), dtype=np.int64)

    def add(self, category: str, dst: int, nbytes: int, messages: int = 1,
            ids: np.ndarray | None = None, type_weights: np.ndarray | None = None) -> None:
        """Count ``nbytes`` sent to ``dst``; ``ids`` (the node ids the message is about)
        splits them by node type on a typed graph (see the module docstring), in proportion
        to ``type_weights`` (one per type) where given and not all zero."""
        c = CATEGORIES.index(category)
        split = self._split(nbytes, ids, type_weights) if category in TYPED_CATEGORIES else None
        with self._lock:
            self.bytes[c, dst] += nbytes
            self.messages[c, dst] += messages
            if split is not None:
                self.type_bytes[TYPED_CATEGORIES.index(category)] += split

    def _split(self, nbytes: int, ids: np.ndarray | None,
               weights: np.ndarray | None = None) -> np.ndarray | None:
        """``nbytes`` over the node types of ``ids`` in proportion to their count (or to
        ``weights``), by largest remainder (the parts sum to ``nbytes`` exactly)."""
        if self.node_types is None or not self.type_names:
            return None
        k = len(self.type_names)
        if ids is None or np.asarray(ids).size == 0:
            raise ValueError("a typed graph's sample/feature message must name the ids it carries")
        count = np.bincount(np.asarray(self.node_types[np.asarray(ids)], dtype=np.int64), minlength=k)
        if weights is not None and np.asarray(weights).sum() > 0:
            count = np.asarray(weights, dtype=np.int64)
        exact = nbytes * count / count.sum()
        part = np.floor(exact).astype(np.int64)
        rest = int(nbytes - part.sum())
        if rest:
            part[np.argsort(part - exact, kind="stable")[:rest]] += 1
        return part

    def add_requests(self, category: str, call: str, requests: Mapping[int, Any], *args: Any) -> None:
        """One request per owner, counted as sent: Ray serialises the call name, the owner's
        payload (a tuple is several arguments), ``args`` and this worker's rank. An array
        payload is the ids the request is about (the per-type split)."""
        for dst, payload in requests.items():
            own = payload if isinstance(payload, tuple) else (payload,)
            ids = payload if isinstance(payload, np.ndarray) else None
            self.add(category, dst, wire_bytes(call, *own, *args, self.rank), ids=ids)

    def add_gradient(self, nbytes: int) -> None:
        """Ring all-reduce: each worker sends to its successor in the ring."""
        if self.world > 1:
            self.add("gradient", (self.rank + 1) % self.world,
                     ring_allreduce_bytes(nbytes, self.world), 2 * (self.world - 1))

    def take(self) -> dict[str, Any]:
        """The counts since the last call, then reset (one snapshot per epoch)."""
        with self._lock:
            out = {"rank": self.rank, "bytes": self.bytes.tolist(), "messages": self.messages.tolist()}
            if self.type_names:
                out["type_names"] = list(self.type_names)
                out["type_bytes"] = self.type_bytes.tolist()
            self.bytes[:] = 0
            self.messages[:] = 0
            self.type_bytes[:] = 0
        return out


def summarise(snapshots: list[dict[str, Any]], world: int) -> dict[str, Any]:
    """Combine every worker's snapshot into totals, per-category and the k x k matrix."""
    b = np.zeros((len(CATEGORIES), world, world), dtype=np.int64)
    m = np.zeros_like(b)
    by_type: dict[str, dict[str, int]] = {}
    for s in snapshots:
        b[:, s["rank"], :] += np.asarray(s["bytes"], dtype=np.int64)
        m[:, s["rank"], :] += np.asarray(s["messages"], dtype=np.int64)
        for i, c in enumerate(TYPED_CATEGORIES) if "type_bytes" in s else ():
            row = by_type.setdefault(c, dict.fromkeys(s["type_names"], 0))
            for t, v in zip(s["type_names"], s["type_bytes"][i], strict=True):
                row[t] += int(v)
    out = {
        "total_bytes": int(b.sum()),
        "by_category": {c: int(b[i].sum()) for i, c in enumerate(CATEGORIES)},
        "messages_by_category": {c: int(m[i].sum()) for i, c in enumerate(CATEGORIES)},
        "by_worker_sent": [int(v) for v in b.sum(axis=(0, 2))],
        "matrix": b.sum(axis=0).tolist(),
        "matrix_by_category": {c: b[i].tolist() for i, c in enumerate(CATEGORIES)},
        "bytes_are": COUNTING_RULE,
        "gradient_bytes_are": "computed (ring all-reduce formula 2(k-1)/k x buffer per worker)",
    }
    if by_type:
        out["by_node_type"] = by_type
    return out
