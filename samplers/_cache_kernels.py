"""Numba kernels of the feature caches: an id -> slot hash table plus LRU / FIFO order.

Table: open addressing with linear probing over ``keys`` (int64, -1 = empty, size a power
of two >= 2 x capacity) and ``tslot`` (the cache slot of each key); deletion shifts later
entries back (no tombstones), so probes stay short however many evictions happen.

Order (``meta = [head, tail, size, ptr]``): LRU keeps a doubly linked list over slots in
``prev`` / ``nxt`` (head = most recent); FIFO fills slots 0..C-1 and then evicts slot
``ptr``, which always holds the oldest row, advancing it round the ring.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from samplers._kernels import Int, _mix64

HEAD, TAIL, SIZE, PTR = 0, 1, 2, 3


@nb.njit(inline="always", nogil=True, cache=True)
def _home(keys: np.ndarray, u: Int) -> Int:
    return np.int64(_mix64(np.uint64(u)) & np.uint64(keys.shape[0] - 1))


@nb.njit(nogil=True, cache=True)
def find(keys: np.ndarray, u: Int) -> Int:
    """Position of ``u`` in the table, or of the empty cell where it would go."""
    mask = keys.shape[0] - 1
    h = _home(keys, u)
    while keys[h] != -1 and keys[h] != u:
        h = (h + 1) & mask
    return h


@nb.njit(nogil=True, cache=True)
def _delete(keys: np.ndarray, tslot: np.ndarray, h: Int) -> None:
    """Remove the entry at position ``h`` and shift back the entries that probed past it."""
    mask = keys.shape[0] - 1
    j = h
    while True:
        j = (j + 1) & mask
        if keys[j] == -1:
            break
        home = _home(keys, keys[j])
        # move keys[j] into the hole h if its home is not cyclically in (h, j]
        if (j > h and (home <= h or home > j)) or (j < h and (home <= h and home > j)):
            keys[h] = keys[j]
            tslot[h] = tslot[j]
            h = j
    keys[h] = -1


@nb.njit(inline="always", nogil=True, cache=True)
def _unlink(prev: np.ndarray, nxt: np.ndarray, meta: np.ndarray, s: Int) -> None:
    p, q = prev[s], nxt[s]
    if p >= 0:
        nxt[p] = q
    else:
        meta[HEAD] = q
    if q >= 0:
        prev[q] = p
    else:
        meta[TAIL] = p


@nb.njit(inline="always", nogil=True, cache=True)
def _push_front(prev: np.ndarray, nxt: np.ndarray, meta: np.ndarray, s: Int) -> None:
    h = meta[HEAD]
    prev[s] = -1
    nxt[s] = h
    if h >= 0:
        prev[h] = s
    else:
        meta[TAIL] = s
    meta[HEAD] = s


@nb.njit(nogil=True, cache=True)
def lookup(ids: np.ndarray, keys: np.ndarray, tslot: np.ndarray, lru: bool, prev: np.ndarray,
           nxt: np.ndarray, meta: np.ndarray) -> np.ndarray:
    """Slot of each id (-1 on a miss); an LRU hit moves its slot to the front."""
    out = np.empty(ids.shape[0], dtype=np.int64)
    if keys.shape[0] == 0:
        out[:] = -1
        return out
    for i in range(ids.shape[0]):
        h = find(keys, ids[i])
        if keys[h] == -1:
            out[i] = -1
            continue
        s = tslot[h]
        out[i] = s
        if lru and meta[HEAD] != s:
            _unlink(prev, nxt, meta, s)
            _push_front(prev, nxt, meta, s)
    return out


@nb.njit(nogil=True, cache=True)
def insert(ids: np.ndarray, rows_in: np.ndarray, keys: np.ndarray, tslot: np.ndarray,
           slot_id: np.ndarray, rows: np.ndarray, lru: bool, prev: np.ndarray, nxt: np.ndarray,
           meta: np.ndarray, written: np.ndarray) -> None:
    """Store ``rows_in[i]`` under ``ids[i]``, evicting the LRU / oldest row when full;
    ``written[i]`` is the slot row ``i`` went to (-1 for a cache of no rows)."""
    cap = slot_id.shape[0]
    written[:] = -1
    if cap == 0:
        return
    for i in range(ids.shape[0]):
        u = ids[i]
        h = find(keys, u)
        if keys[h] != -1:
            s = tslot[h]
            if lru and meta[HEAD] != s:
                _unlink(prev, nxt, meta, s)
                _push_front(prev, nxt, meta, s)
        else:
            if meta[SIZE] < cap:
                s = meta[SIZE]
                meta[SIZE] += 1
            else:
                if lru:
                    s = meta[TAIL]
                    _unlink(prev, nxt, meta, s)
                else:
                    s = meta[PTR]
                    meta[PTR] = (s + 1) % cap
                _delete(keys, tslot, find(keys, slot_id[s]))
                h = find(keys, u)
            keys[h] = u
            tslot[h] = s
            slot_id[s] = u
            if lru:
                _push_front(prev, nxt, meta, s)
        rows[s, :] = rows_in[i, :]
        written[i] = s


@nb.njit(nogil=True, cache=True)
def order_oldest_first(slot_id: np.ndarray, lru: bool, prev: np.ndarray,
                       meta: np.ndarray) -> np.ndarray:
    """Slots in eviction order (the next victim first): re-inserting in this order
    reproduces the cache's state."""
    n = meta[SIZE]
    out = np.empty(n, dtype=np.int64)
    if lru:
        s = meta[TAIL]
        for i in range(n):
            out[i] = s
            s = prev[s]
    else:
        cap = slot_id.shape[0]
        start = meta[PTR] if n == cap else 0
        for i in range(n):
            out[i] = (start + i) % cap
    return out
