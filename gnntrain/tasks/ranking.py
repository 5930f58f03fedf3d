"""Ranking metrics of link prediction, from the scores of positives and negatives.

A worker's metric state holds the raw scores of the pairs it scored (``pos``, ``neg``);
merging concatenates them, so the merged state is the multiset of every worker's scores
and each figure below equals the single-process one exactly (each is computed from sorted
scores and integer counts, so neither the order of the workers nor of the pairs changes a
bit). Hits@K needs the K-th highest score over the **global** negative set: a mean of
per-worker Hits@K would be wrong whenever the negatives are spread over workers.

* ``hits@K`` (OGB): share of positives scoring strictly above the K-th highest negative.
* ``mrr``: mean reciprocal rank of each positive among the negatives, ties counted half
  (OGB's optimistic/pessimistic mean), against the shared negative set.
* ``auc``: probability that a positive outscores a negative, ties half (Mann-Whitney).

Per-user and per-source figures (all-item Recall@K / NDCG@K of a user-item graph, MRR of
each positive against its own negatives) are computed where the user or source lives;
a state then holds one value per user (or positive) with its id, merging concatenates
them, and the figure is the mean over the values sorted by id: the same floats summed
in the same order whatever the split across workers (:func:`mean_by_id`).

* ``recall@K`` / ``ndcg@K`` (LightGCN): per user, every item scored, the user's known
  items excluded; recall = hits in the top K / the user's test items; NDCG = DCG of the
  top K over the ideal DCG of min(K, test items) hits at the top.
"""

from __future__ import annotations

import numpy as np

__all__ = ["auc", "hits_at_k", "mean_by_id", "mrr", "per_source_rr", "recall_ndcg_at_k", "top_k", "user_item_cells"]


def _ranks_above(pos: np.ndarray, neg_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per positive: negatives strictly above it, and negatives equal to it."""
    above = neg_sorted.size - np.searchsorted(neg_sorted, pos, side="right")
    ties = np.searchsorted(neg_sorted, pos, side="right") - np.searchsorted(neg_sorted, pos, side="left")
    return above.astype(np.int64), ties.astype(np.int64)


def hits_at_k(pos: np.ndarray, neg: np.ndarray, k: int) -> float:
    """OGB's Hits@K: positives above the K-th highest negative score."""
    if pos.size == 0:
        return float("nan")
    if neg.size < k:
        raise ValueError(f"hits_k={k}: only {neg.size} negatives were scored; K must be at most "
                         "the number of negatives")
    kth = np.partition(neg, neg.size - k)[neg.size - k]
    return int((pos > kth).sum()) / pos.size


def mrr(pos: np.ndarray, neg: np.ndarray) -> float:
    """Mean reciprocal rank of each positive against the negatives (ties half)."""
    if pos.size == 0:
        return float("nan")
    above, ties = _ranks_above(np.sort(pos), np.sort(neg))
    rank = 1.0 + above + 0.5 * ties
    return float(np.sum(1.0 / rank) / pos.size)


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Area under the ROC curve: P(positive > negative), ties half."""
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    above, ties = _ranks_above(pos, np.sort(neg))
    below2 = 2 * (neg.size - above - ties) + ties  # twice the wins, ties once
    return float(int(below2.sum()) / (2 * pos.size * neg.size))


def per_source_rr(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """Reciprocal rank of each positive ``pos[i]`` among its own negatives ``neg[i, :]``
    (ties half, as :func:`mrr`); OGB's per-source protocol (ogbl-citation2)."""
    above = (neg > pos[:, None]).sum(1)
    ties = (neg == pos[:, None]).sum(1)
    return 1.0 / (1.0 + above + 0.5 * ties)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the columns of the ``k`` highest scores, best first (equal scores: the
    lower column first, so the result depends on the row alone)."""
    k = min(k, scores.shape[1])
    cand = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    # a boundary tie may have cut an equal score with a lower column: widen to all of them
    kth = np.take_along_axis(scores, cand, 1).min(1, keepdims=True)
    if int((scores >= kth).sum()) != scores.shape[0] * k:
        out = np.empty((scores.shape[0], k), dtype=np.int64)
        for r in range(scores.shape[0]):
            cols = np.flatnonzero(scores[r] >= kth[r, 0])
            out[r] = cols[np.lexsort((cols, -scores[r, cols]))][:k]
        return out
    vals = np.take_along_axis(scores, cand, 1)
    order = np.lexsort((cand, -vals), axis=1)
    return np.take_along_axis(cand, order, 1).astype(np.int64)


def recall_ndcg_at_k(scores: np.ndarray, truth: np.ndarray, exclude: np.ndarray,
                     k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row (user) of ``scores`` [U, I]: Recall@K and NDCG@K of its ``truth`` items,
    ``(row, column)`` pairs [T, 2], with the ``exclude`` pairs (the user's known items)
    taken out of the ranking. Every row must have at least one truth item."""
    u, n_items = scores.shape
    scores = np.array(scores, dtype=np.float64)
    if exclude.size:
        scores[exclude[:, 0], exclude[:, 1]] = -np.inf
    top = top_k(scores, k)
    keys = np.sort(truth[:, 0].astype(np.int64) * n_items + truth[:, 1])
    want = np.arange(u, dtype=np.int64)[:, None] * n_items + top
    pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
    hit = keys[pos] == want
    n_true = np.bincount(truth[:, 0], minlength=u)
    if (n_true == 0).any():
        raise ValueError(f"row {int(np.flatnonzero(n_true == 0)[0])} has no truth item")
    disc = 1.0 / np.log2(np.arange(top.shape[1]) + 2.0)
    ideal = np.cumsum(disc)[np.minimum(n_true, top.shape[1]) - 1]
    return hit.sum(1) / n_true, (hit * disc).sum(1) / ideal


def mean_by_id(ids: np.ndarray, values: np.ndarray) -> float:
    """Mean of ``values`` summed in the order of their (unique) ``ids``: a merged state
    gives the same float whichever worker computed which value."""
    if ids.size == 0:
        return float("nan")
    return float(np.sum(np.asarray(values, dtype=np.float64)[np.argsort(ids, kind="stable")]) / ids.size)


def user_item_cells(pairs: np.ndarray, users: np.ndarray, lo: int) -> np.ndarray:
    """``(row, column)`` cells of the (user, item) ``pairs`` whose user is in the sorted
    ``users``: row = the user's position, column = item id - ``lo``."""
    at = np.minimum(np.searchsorted(users, pairs[:, 0]), users.size - 1)
    keep = users[at] == pairs[:, 0]
    return np.stack([at[keep], pairs[keep, 1] - lo], 1).astype(np.int64)
