"""Numba kernels of the neighbour sampler: per-node random streams, sampling, relabelling.

Every kernel is ``nopython``, ``nogil`` and cached, so several Python threads can sample
different batches at once (see :meth:`samplers.neighbor.NeighborSampler.iter_batches`).

Random numbers: node ``v`` sampled under key ``k`` gets its own splitmix64 stream seeded by
``mix(k ^ mix(v + golden))``. The neighbours drawn for ``v`` therefore depend only on
``(key, v, fanout, replace)`` and the row's contents, never on which other seeds are in the
call, their order, or which process runs it.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numba as nb
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53
_MASK64 = (1 << 64) - 1

#: a numba scalar (np.int64 / np.uint64 inside kernels; ints from Python callers). Typed by
#: numba when compiled; mypy cannot follow numpy's fixed-width integer rules, so it is Any.
Int: TypeAlias = Any

# the prefetch intrinsic's mangled name: opaque pointers from LLVM 15 on, typed before
_PREFETCH_NAME = "llvm.prefetch.p0" if llvm_binding.llvm_version_info[0] >= 15 \
    else "llvm.prefetch.p0i8"


def mix_key(*parts: int) -> int:
    """Fold integers into one 64-bit key (splitmix64 finaliser), in pure Python."""
    z = 0
    for p in parts:
        z = (z ^ (int(p) & _MASK64)) & _MASK64
        z = (z + 0x9E3779B97F4A7C15) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        z = z ^ (z >> 31)
    return z


@intrinsic
def _prefetch(typingctx, arr, idx):  # type: ignore[no-untyped-def]
    """``llvm.prefetch`` of ``&arr[idx]`` (read, high locality): a hint, never a fault."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _PREFETCH_NAME)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


_PF_FAR = 16  # prefetch indptr this many seeds ahead
_PF_NEAR = 6  # and the neighbour row this many ahead


@nb.njit(inline="always", nogil=True, cache=True)
def _prefetch_rows(indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray,
                   row_offset: Int, i: Int) -> None:
    n = seeds.shape[0]
    if i + _PF_FAR < n:
        _prefetch(indptr, seeds[i + _PF_FAR] - row_offset)  # type: ignore[call-arg]
    if i + _PF_NEAR < n:
        r = seeds[i + _PF_NEAR] - row_offset
        s = indptr[r]
        if s < indices.shape[0]:
            _prefetch(indices, s)  # type: ignore[call-arg]


@nb.njit(inline="always", nogil=True, cache=True)
def _mix64(z: Int) -> Int:
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@nb.njit(inline="always", nogil=True, cache=True)
def _node_state(key: Int, v: Int) -> Int:
    return _mix64(key ^ _mix64(np.uint64(v) + _GOLDEN))


@nb.njit(inline="always", nogil=True, cache=True)
def _uniform(state: Int) -> tuple[Int, float]:
    """Advance the stream; return (new state, float in [0, 1))."""
    state = state + _GOLDEN
    return state, float(_mix64(state) >> _S11) * _INV53


@nb.njit(inline="always", nogil=True, cache=True)
def _below(state: Int, n: Int) -> tuple[Int, Int]:
    """Advance the stream; return (new state, integer uniform in [0, n))."""
    state, u = _uniform(state)
    r = np.int64(u * n)
    if r >= n:  # guard against rounding at the top end
        r = n - 1
    return state, r


@nb.njit(nogil=True, cache=True)
def sample_counts(indptr: np.ndarray, pos_deg: np.ndarray, seeds: np.ndarray,
                  row_offset: Int, fanout: Int, replace: bool,
                  weighted: bool) -> np.ndarray:
    """How many neighbours each seed gets; fixed by degree and fanout, not by chance."""
    out = np.empty(seeds.shape[0], dtype=np.int64)
    for i in range(seeds.shape[0]):
        r = seeds[i] - row_offset
        d = pos_deg[r] if weighted else indptr[r + 1] - indptr[r]
        if fanout < 0:
            out[i] = d
        elif replace:
            out[i] = fanout if d > 0 else 0
        else:
            out[i] = min(d, fanout)
    return out


@nb.njit(nogil=True, cache=True)
def _floyd_small(state: Int, d: Int, k: Int, buf: np.ndarray) -> Int:
    """Robert Floyd's uniform k-subset of [0, d) into buf[:k]; O(k^2), for small k."""
    n = 0
    for j in range(d - k, d):
        state, t = _below(state, j + 1)
        found = False
        for q in range(n):
            if buf[q] == t:
                found = True
                break
        buf[n] = j if found else t
        n += 1
    return state


@nb.njit(nogil=True, cache=True)
def _floyd_hashed(state: Int, d: Int, k: Int, buf: np.ndarray) -> Int:
    """Floyd's algorithm with an open-addressing set: O(k) expected, for large k."""
    cap = 1
    while cap < 2 * k:
        cap *= 2
    table = np.full(cap, -1, dtype=np.int64)
    mask = np.uint64(cap - 1)
    n = 0
    for j in range(d - k, d):
        state, t = _below(state, j + 1)
        pick = t
        h = np.int64(_mix64(np.uint64(t)) & mask)
        while table[h] != -1:
            if table[h] == t:
                pick = j
                break
            h = (h + 1) & (cap - 1)
        # insert pick (t was absent, or j which is always new)
        h = np.int64(_mix64(np.uint64(pick)) & mask)
        while table[h] != -1:
            h = (h + 1) & (cap - 1)
        table[h] = pick
        buf[n] = pick
        n += 1
    return state


@nb.njit(nogil=True, cache=True)
def sample_uniform(indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray,
                   row_offset: Int, fanout: Int, replace: bool,
                   key: Int, offsets: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out[offsets[i]:offsets[i+1]]`` with the neighbours drawn for ``seeds[i]``."""
    buf = np.empty(max(fanout, 1), dtype=np.int64)
    for i in range(seeds.shape[0]):
        _prefetch_rows(indptr, indices, seeds, row_offset, i)
        v = seeds[i]
        start = indptr[v - row_offset]
        d = indptr[v - row_offset + 1] - start
        o = offsets[i]
        c = offsets[i + 1] - o
        if c == 0:
            continue
        if fanout < 0 or (c == d and not replace):
            for j in range(d):
                out[o + j] = indices[start + j]
            continue
        state = _node_state(key, v)
        if replace:
            for j in range(c):
                state, t = _below(state, d)
                out[o + j] = indices[start + t]
            continue
        if c <= 32:
            state = _floyd_small(state, d, c, buf)
        else:
            state = _floyd_hashed(state, d, c, buf)
        for j in range(c):
            out[o + j] = indices[start + buf[j]]


@nb.njit(nogil=True, cache=True)
def sample_weighted(indptr: np.ndarray, indices: np.ndarray, weight: np.ndarray,
                    cumw: np.ndarray, seeds: np.ndarray, row_offset: Int, fanout: Int,
                    replace: bool, key: Int, offsets: np.ndarray, out: np.ndarray) -> None:
    """Edge-weighted variant; ``cumw`` is the inclusive cumulative weight within each row.

    With replacement: inverse-CDF draws by binary search in the row's cumulative weights.
    Without: Efraimidis-Spirakis exponential keys ``-log(u) / w``; the ``c`` smallest win.
    Zero-weight edges are never drawn; fanout -1 takes every positive-weight edge.
    """
    kbuf = np.empty(max(fanout, 1), dtype=np.float64)
    pbuf = np.empty(max(fanout, 1), dtype=np.int64)
    for i in range(seeds.shape[0]):
        _prefetch_rows(indptr, indices, seeds, row_offset, i)
        v = seeds[i]
        start = indptr[v - row_offset]
        end = indptr[v - row_offset + 1]
        o = offsets[i]
        c = offsets[i + 1] - o
        if c == 0:
            continue
        if fanout < 0:
            n = 0
            for e in range(start, end):
                if weight[e] > 0.0:
                    out[o + n] = indices[e]
                    n += 1
            continue
        state = _node_state(key, v)
        if replace:
            total = cumw[end - 1]
            for j in range(c):
                state, u = _uniform(state)
                target = u * total
                lo = start
                hi = end - 1
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if cumw[mid] > target:
                        hi = mid
                    else:
                        lo = mid + 1
                out[o + j] = indices[lo]
            continue
        n = 0
        worst = 0
        for e in range(start, end):
            w = weight[e]
            if w <= 0.0:
                continue
            state, u = _uniform(state)
            kk = -np.log(1.0 - u) / w
            if n < c:
                kbuf[n] = kk
                pbuf[n] = e
                if n == 0 or kk > kbuf[worst]:
                    worst = n
                n += 1
            elif kk < kbuf[worst]:
                kbuf[worst] = kk
                pbuf[worst] = e
                worst = 0
                for q in range(1, c):
                    if kbuf[q] > kbuf[worst]:
                        worst = q
        for j in range(c):
            out[o + j] = indices[pbuf[j]]


@nb.njit(nogil=True, cache=True)
def row_cumsum(indptr: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row inclusive cumulative weights (restarting at each row) and positive degrees."""
    n = indptr.shape[0] - 1
    cum = np.empty(weight.shape[0], dtype=np.float64)
    pos = np.zeros(n, dtype=np.int64)
    for r in range(n):
        s = 0.0
        for e in range(indptr[r], indptr[r + 1]):
            w = weight[e]
            s += w
            cum[e] = s
            if w > 0.0:
                pos[r] += 1
    return cum, pos


@nb.njit(nogil=True, cache=True)
def relabel_dense(nbrs: np.ndarray, counts: np.ndarray, local: np.ndarray,
                  nodes: np.ndarray, n_nodes: Int) -> tuple[np.ndarray, Int]:
    """Map the global ``nbrs`` of dst nodes ``0..len(counts)`` to local ids, appending new ones.

    ``local`` is a dense ``[num_nodes]`` int32 map that is -1 for every node not yet in this
    batch; ``nodes[:n_nodes]`` lists the batch's nodes in local-id order. Returns the block's
    ``[2, E]`` edge index (row 0 local src, row 1 local dst) and the new node count.
    """
    e = nbrs.shape[0]
    ei = np.empty((2, e), dtype=np.int64)
    pos = 0
    for d in range(counts.shape[0]):
        for _ in range(counts[d]):
            if pos + _PF_FAR < e:
                _prefetch(local, nbrs[pos + _PF_FAR])  # type: ignore[call-arg]
            u = nbrs[pos]
            lid = local[u]
            if lid < 0:
                lid = n_nodes
                local[u] = lid
                nodes[n_nodes] = u
                n_nodes += 1
            ei[0, pos] = lid
            ei[1, pos] = d
            pos += 1
    return ei, n_nodes


@nb.njit(nogil=True, cache=True)
def insert_seeds_dense(seeds: np.ndarray, local: np.ndarray, nodes: np.ndarray) -> Int:
    """Give the seeds local ids 0..B-1; return -1 if all unique, else the index of a repeat."""
    for i in range(seeds.shape[0]):
        u = seeds[i]
        if local[u] >= 0:
            for j in range(i):  # undo, so the map stays clean for the next batch
                local[seeds[j]] = -1
            return i
        local[u] = i
        nodes[i] = u
    return -1


@nb.njit(nogil=True, cache=True)
def reset_dense(local: np.ndarray, nodes: np.ndarray, n_nodes: Int) -> None:
    for i in range(n_nodes):
        local[nodes[i]] = -1


@nb.njit(nogil=True, cache=True)
def _hash_find(keys: np.ndarray, u: Int) -> Int:
    mask = keys.shape[0] - 1
    h = np.int64(_mix64(np.uint64(u)) & np.uint64(mask))
    while keys[h] != -1 and keys[h] != u:
        h = (h + 1) & mask
    return h


@nb.njit(nogil=True, cache=True)
def relabel_hashed(nbrs: np.ndarray, counts: np.ndarray, keys: np.ndarray, vals: np.ndarray,
                   nodes: np.ndarray, n_nodes: Int) -> tuple[np.ndarray, Int]:
    """:func:`relabel_dense` with an open-addressing table (``keys`` -1 = empty) instead.

    The caller sizes the table to at least twice ``n_nodes + len(nbrs)``.
    """
    e = nbrs.shape[0]
    ei = np.empty((2, e), dtype=np.int64)
    pos = 0
    for d in range(counts.shape[0]):
        for _ in range(counts[d]):
            u = nbrs[pos]
            h = _hash_find(keys, u)
            if keys[h] == -1:
                keys[h] = u
                vals[h] = n_nodes
                nodes[n_nodes] = u
                n_nodes += 1
            ei[0, pos] = vals[h]
            ei[1, pos] = d
            pos += 1
    return ei, n_nodes


@nb.njit(nogil=True, cache=True)
def rebuild_hash(keys: np.ndarray, vals: np.ndarray, nodes: np.ndarray, n_nodes: Int) -> None:
    """Insert ``nodes[:n_nodes]`` (local ids = positions) into an empty table."""
    for i in range(n_nodes):
        h = _hash_find(keys, nodes[i])
        keys[h] = nodes[i]
        vals[h] = i


@nb.njit(nogil=True, cache=True)
def insert_seeds_hashed(seeds: np.ndarray, keys: np.ndarray, vals: np.ndarray,
                        nodes: np.ndarray) -> Int:
    for i in range(seeds.shape[0]):
        u = seeds[i]
        h = _hash_find(keys, u)
        if keys[h] != -1:
            return i
        keys[h] = u
        vals[h] = i
        nodes[i] = u
    return -1


@nb.njit(nogil=True, cache=True)
def count_ids(ids: np.ndarray, counts: np.ndarray) -> None:
    for i in range(ids.shape[0]):
        counts[ids[i]] += 1


@nb.njit(nogil=True, cache=True)
def _identity(x: Int) -> Int:
    return x


@nb.njit(nogil=True, cache=True)
def top_common_neighbours(indptr: np.ndarray, indices: np.ndarray, src: np.ndarray, per: Int,
                          sorted_keys: np.ndarray, n: Int, out: np.ndarray) -> None:  # pragma: no cover
    """``out[i]`` = the ``per`` nodes with the most common neighbours with ``src[i]`` in the
    CSR (undirected), none of them ``src[i]`` itself or a pair of ``sorted_keys`` (undirected
    keys ``min * n + max``); ties go by a hash of the pair, so the same graph gives the same
    nodes; -1 where the two-hop neighbourhood has fewer."""
    count = np.zeros(n, dtype=np.int64)
    seen = np.empty(n, dtype=np.int64)
    for i in range(src.shape[0]):
        s = src[i]
        m = 0
        for e in range(indptr[s], indptr[s + 1]):
            u = indices[e]
            for f in range(indptr[u], indptr[u + 1]):
                w = indices[f]
                if count[w] == 0:
                    seen[m] = w
                    m += 1
                count[w] += 1
        order = np.empty(m, dtype=np.int64)
        rank = np.empty(m, dtype=np.int64)
        k = 0
        for j in range(m):
            w = seen[j]
            lo, hi = (s, w) if s < w else (w, s)
            key = lo * n + hi
            pos = np.searchsorted(sorted_keys, key)
            if w != s and not (pos < sorted_keys.shape[0] and sorted_keys[pos] == key):
                order[k] = w
                # most common neighbours first, then a hash of the pair (31 bits)
                rank[k] = -count[w] * (np.int64(1) << 31) + np.int64(_mix64(np.uint64(key)) >> np.uint64(33))
                k += 1
        best = np.argsort(rank[:k], kind="mergesort")
        for j in range(per):
            out[i, j] = order[best[j]] if j < k else -1
        for j in range(m):
            count[seen[j]] = 0


def _settle_numba() -> None:
    """Finish numba's set-up in the importing thread, before any thread calls a kernel.

    Numba sets its CPU target up on the first call of any kernel in a process, and that
    registers more argument types with the ``functools.singledispatch`` function which
    types every call's arguments. A second thread typing its own first call at that
    moment fails with "dictionary changed size during iteration" (a worker's sampling and
    peer-serving threads meeting their first kernel at once). One call here does the
    set-up at import; typing each argument class the kernels take then puts it in
    singledispatch's cache, so later calls only read it."""
    _identity(np.int64(0))
    for value in (np.empty(0, np.int64), np.int64(0), np.uint64(0), np.int32(0), np.float32(0), np.float64(0),
                  np.bool_(False), 0, 0.0, True):
        nb.typeof(value)


_settle_numba()

