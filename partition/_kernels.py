"""Compiled (numba) loops over nodes and edges: symmetrising, row permutation, LDG streaming.

Each kernel is O(N + E) (LDG: O(E + N k c)) with no Python-level loop; callers allocate
outputs so the integer width (int32 for a 32-bit METIS) is chosen once, by the caller.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def transpose_csr(indptr: np.ndarray, indices: np.ndarray, t_indptr: np.ndarray,
                  t_indices: np.ndarray) -> None:  # pragma: no cover - compiled
    """Fill the transpose (``t_indptr`` zeroed, ``[n + 1]``); rows of the result come out sorted."""
    n = indptr.shape[0] - 1
    for e in range(indices.shape[0]):
        t_indptr[indices[e] + 1] += 1
    for v in range(n):
        t_indptr[v + 1] += t_indptr[v]
    pos = t_indptr[:-1].copy()
    for v in range(n):
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            t_indices[pos[u]] = v
            pos[u] += 1


@njit(cache=True, nogil=True)
def rows_sorted(indptr: np.ndarray, indices: np.ndarray) -> bool:  # pragma: no cover - compiled
    """True when every CSR row is sorted ascending (repeats allowed)."""
    n = indptr.shape[0] - 1
    for v in range(n):
        for e in range(indptr[v] + 1, indptr[v + 1]):
            if indices[e] < indices[e - 1]:
                return False
    return True


@njit(cache=True, nogil=True)
def rows_simple(indptr: np.ndarray, indices: np.ndarray) -> bool:  # pragma: no cover - compiled
    """True when every row is strictly increasing (sorted, no repeats) and has no self-loop."""
    n = indptr.shape[0] - 1
    for v in range(n):
        for e in range(indptr[v], indptr[v + 1]):
            if indices[e] == v or (e > indptr[v] and indices[e] <= indices[e - 1]):
                return False
    return True


@njit(cache=True, nogil=True)
def merge_count(a_ptr: np.ndarray, a_idx: np.ndarray, b_ptr: np.ndarray, b_idx: np.ndarray,
                counts: np.ndarray) -> None:  # pragma: no cover - compiled
    """``counts[v]`` = size of the union of sorted rows ``a[v]`` and ``b[v]`` without ``v`` itself."""
    n = a_ptr.shape[0] - 1
    for v in range(n):
        i, i_end = a_ptr[v], a_ptr[v + 1]
        j, j_end = b_ptr[v], b_ptr[v + 1]
        c = 0
        last = -1
        while i < i_end or j < j_end:
            if j >= j_end or (i < i_end and a_idx[i] <= b_idx[j]):
                u = a_idx[i]
                i += 1
            else:
                u = b_idx[j]
                j += 1
            if u != last and u != v:
                c += 1
            last = u
        counts[v] = c


@njit(cache=True, nogil=True)
def merge_fill(a_ptr: np.ndarray, a_idx: np.ndarray, b_ptr: np.ndarray, b_idx: np.ndarray,
               out_ptr: np.ndarray, out_idx: np.ndarray) -> None:  # pragma: no cover - compiled
    """Write the unions counted by :func:`merge_count` into ``out_idx`` at ``out_ptr``."""
    n = a_ptr.shape[0] - 1
    for v in range(n):
        i, i_end = a_ptr[v], a_ptr[v + 1]
        j, j_end = b_ptr[v], b_ptr[v + 1]
        o = out_ptr[v]
        last = -1
        while i < i_end or j < j_end:
            if j >= j_end or (i < i_end and a_idx[i] <= b_idx[j]):
                u = a_idx[i]
                i += 1
            else:
                u = b_idx[j]
                j += 1
            if u != last and u != v:
                out_idx[o] = u
                o += 1
            last = u


@njit(cache=True, nogil=True)
def permute_rows(indptr: np.ndarray, indices: np.ndarray, perm: np.ndarray, new_of: np.ndarray,
                 out_ptr: np.ndarray, out_idx: np.ndarray) -> None:  # pragma: no cover - compiled
    """Row ``i`` of the output is row ``perm[i]`` of the input with ids mapped through ``new_of``."""
    for i in range(perm.shape[0]):
        v = perm[i]
        o = out_ptr[i]
        for e in range(indptr[v], indptr[v + 1]):
            out_idx[o] = new_of[indices[e]]
            o += 1


@njit(cache=True, nogil=True)
def ldg_stream(indptr: np.ndarray, indices: np.ndarray, k: int, weights: np.ndarray,
               imbalance: float, seed: int, passes: int) -> np.ndarray:  # pragma: no cover - compiled
    """Linear Deterministic Greedy (Stanton & Kliot, KDD 2012), multi-constraint, restreamed.

    Nodes arrive in id order. With ``cap_c = imbalance * total_c / k`` per constraint,
    node ``v`` goes to the part ``p`` that maximises
    ``|N(v) in P_p| * min_c (1 - load[p, c] / cap_c)`` (over the constraints where ``v``
    has weight) among the parts where it fits under the *running* capacity
    ``cap_c * seen_c / total_c + max_weight_c`` (``seen_c``: weight streamed so far). The
    running capacity keeps every part progressing evenly in every constraint, so the
    stream never ends with parts full in different constraints and nowhere to put the
    last nodes; without it the loads overshoot (measured: 1.10 max/mean on CA-HepPh at
    k=8). Ties go to the least-loaded part, then to a seeded random choice; a node that
    fits nowhere goes where its relative overflow is smallest. Passes after the first
    count a neighbour not yet placed in this pass by its part in the previous pass
    (ReLDG, Nishimura & Ugander, KDD 2013). Only two part arrays (N) and one CSR row at
    a time are touched, so the CSR may be a memory map.
    """
    n = indptr.shape[0] - 1
    c_count = weights.shape[1]
    prev = np.full(n, -1, dtype=np.int64)
    parts = np.full(n, -1, dtype=np.int64)
    load = np.zeros((k, c_count), dtype=np.float64)
    hits = np.zeros(k, dtype=np.float64)
    np.random.seed(seed)
    for _ in range(passes):
        prev[:] = parts
        parts[:] = -1
        load[:] = 0.0
        ldg_pass(indptr, indices, 0, k, weights, imbalance, prev, parts, load, hits)
    return parts


@njit(cache=True, nogil=True)
def ldg_pass(indptr: np.ndarray, indices: np.ndarray, lo: int, k: int, weights: np.ndarray,
             imbalance: float, prev: np.ndarray, parts: np.ndarray, load: np.ndarray,
             hits: np.ndarray) -> None:  # pragma: no cover - compiled
    """One LDG pass over the rows of nodes ``lo .. lo + n`` (``indptr``/``weights``/``parts``
    local to them, ``indices``/``prev`` global; a neighbour outside the rows counts at its
    part in ``prev``), capacities from these rows' weights alone: blocks streamed in
    parallel with such shares never exceed the capacity together."""
    n = indptr.shape[0] - 1
    c_count = weights.shape[1]
    total = np.zeros(c_count)
    wmax = np.zeros(c_count)
    for v in range(n):
        for c in range(c_count):
            total[c] += weights[v, c]
            wmax[c] = max(wmax[c], weights[v, c])
    caps = np.empty(c_count)
    for c in range(c_count):
        caps[c] = max(imbalance * total[c] / k, 1e-300)
        total[c] = max(total[c], 1e-300)
    seen = np.zeros(c_count)
    now = np.empty(c_count)
    for v in range(n):
        for c in range(c_count):
            seen[c] += weights[v, c]
            now[c] = caps[c] * seen[c] / total[c] + wmax[c]
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            p = parts[u - lo] if lo <= u < lo + n and parts[u - lo] >= 0 else prev[u]
            if p >= 0:
                hits[p] += 1.0
        best = -1
        best_score = -1.0
        best_load = 0.0
        ties = 0
        for p in range(k):
            fits = True
            pen = 1.0
            for c in range(c_count):
                w = weights[v, c]
                if w > 0:
                    if load[p, c] + w > now[c]:
                        fits = False
                    r = 1.0 - load[p, c] / caps[c]
                    if r < pen:
                        pen = r
            if not fits:
                continue
            score = hits[p] * pen
            rel = load[p, 0] / caps[0]
            if best < 0 or score > best_score or (score == best_score and rel < best_load):
                best, best_score, best_load, ties = p, score, rel, 1
            elif score == best_score and rel == best_load:
                ties += 1
                if np.random.random() * ties < 1.0:
                    best = p
        if best < 0:  # fits nowhere: the part where it overflows least
            worst_min = np.inf
            for p in range(k):
                worst = 0.0
                for c in range(c_count):
                    if weights[v, c] > 0:
                        r = (load[p, c] + weights[v, c]) / now[c]
                        if r > worst:
                            worst = r
                if worst < worst_min:
                    worst_min = worst
                    best = p
        parts[v] = best
        for c in range(c_count):
            load[best, c] += weights[v, c]
        hits[:] = 0.0


@njit(cache=True, nogil=True)
def lp_cluster(indptr: np.ndarray, indices: np.ndarray, lo: int, labels: np.ndarray, own: np.ndarray,
               cw: np.ndarray, delta: np.ndarray, weights: np.ndarray, limit: np.ndarray,
               acc: np.ndarray) -> int:  # pragma: no cover - compiled
    """One round of size-constrained label propagation over the rows ``lo .. lo + n``.

    Node ``v`` joins the neighbouring cluster (label) it has most in-neighbours in, if that
    is strictly more than in its own and the cluster's weight stays within ``limit`` in every
    constraint. ``labels`` and ``cw`` (cluster weights ``[N, c]``) are the round's snapshot
    and are not written: the rows' new labels go to ``own`` (``[n]``, starting as their
    snapshot labels) and weight changes to ``delta`` (zeroed ``[N, c]``), so later rows of
    the block see earlier moves and other blocks see none until the round ends. ``acc`` is a
    zeroed float64 ``[N]`` scratch array. Returns the number of moves.
    """
    n = indptr.shape[0] - 1
    c_count = weights.shape[1]
    touched = np.empty(max(1, _max_row(indptr)), dtype=np.int64)
    moves = 0
    for i in range(n):
        cur = own[i]
        nt = 0
        for e in range(indptr[i], indptr[i + 1]):
            u = indices[e]
            lab = own[u - lo] if lo <= u < lo + n else labels[u]
            if acc[lab] == 0.0:
                touched[nt] = lab
                nt += 1
            acc[lab] += 1.0
        best = cur
        best_c = acc[cur]
        for t in range(nt):
            lab = touched[t]
            if lab == cur or acc[lab] <= best_c:
                continue
            fits = True
            for c in range(c_count):
                if cw[lab, c] + delta[lab, c] + weights[i, c] > limit[c]:
                    fits = False
            if fits:
                best = lab
                best_c = acc[lab]
        for t in range(nt):
            acc[touched[t]] = 0.0
        if best != cur:
            for c in range(c_count):
                delta[cur, c] -= weights[i, c]
                delta[best, c] += weights[i, c]
            own[i] = best
            moves += 1
    return moves


@njit(cache=True, nogil=True)
def _max_row(indptr: np.ndarray) -> int:  # pragma: no cover - compiled
    m = 0
    for i in range(indptr.shape[0] - 1):
        m = max(m, indptr[i + 1] - indptr[i])
    return m


@njit(cache=True, nogil=True)
def refine_proposals(indptr: np.ndarray, indices: np.ndarray, lo: int, parts: np.ndarray, k: int,
                     direction: int, over: np.ndarray, node: np.ndarray, target: np.ndarray,
                     gain: np.ndarray) -> int:  # pragma: no cover - compiled
    """Label-propagation refinement proposals for the rows ``lo .. lo + n``.

    Node ``v`` in part ``p`` proposes the part ``q`` holding most of its in-neighbours if that
    beats ``p`` (``gain`` = neighbours in ``q`` minus in ``p``) and ``q > p`` for
    ``direction = 1`` (``q < p`` for ``-1``): alternating directions between rounds keeps two
    neighbours from swapping parts past each other. A node of an overloaded part
    (``over[p]``) proposes its best part that is not overloaded even at a loss. Writes the
    proposals into ``node``/``target``/``gain`` (length ``n``) and returns their number.
    """
    n = indptr.shape[0] - 1
    acc = np.zeros(k, dtype=np.int64)
    m = 0
    for i in range(n):
        v = lo + i
        p = parts[v]
        for e in range(indptr[i], indptr[i + 1]):
            acc[parts[indices[e]]] += 1
        best = -1
        best_c = -1
        for q in range(k):
            if q == p:
                continue
            if over[p]:
                if over[q]:
                    continue
            elif acc[q] <= acc[p] or (q - p) * direction < 0:
                continue
            if acc[q] > best_c:
                best, best_c = q, acc[q]
        if best >= 0:
            node[m] = v
            target[m] = best
            gain[m] = acc[best] - acc[p]
            m += 1
        acc[:] = 0
    return m


@njit(cache=True, nogil=True)
def accept_moves(node: np.ndarray, target: np.ndarray, gain: np.ndarray, parts: np.ndarray,
                 weights: np.ndarray, load: np.ndarray, allowed: np.ndarray) -> int:  # pragma: no cover - compiled
    """Apply proposals in the given order (best gain first) while the target part stays within
    ``allowed`` in every constraint where the node has weight; a move that loses edges is taken
    only while its source part is above ``allowed`` somewhere. Updates ``parts`` and ``load``
    (``[k, c]``) in place; returns the number of moves."""
    c_count = weights.shape[1]
    moved = 0
    for j in range(node.shape[0]):
        v = node[j]
        q = target[j]
        p = parts[v]
        if p == q:
            continue
        fits = True
        for c in range(c_count):
            if weights[v, c] > 0 and load[q, c] + weights[v, c] > allowed[c]:
                fits = False
        if not fits:
            continue
        if gain[j] <= 0:
            src_over = False
            for c in range(c_count):
                if load[p, c] > allowed[c]:
                    src_over = True
            if not src_over:
                continue
        for c in range(c_count):
            load[p, c] -= weights[v, c]
            load[q, c] += weights[v, c]
        parts[v] = q
        moved += 1
    return moved


@njit(cache=True)
def seed_random(seed: int) -> None:  # pragma: no cover - compiled
    """Seed the random stream compiled kernels draw from (numba keeps its own)."""
    np.random.seed(seed)
