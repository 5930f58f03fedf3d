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
"""

from __future__ import annotations

import numpy as np

__all__ = ["auc", "hits_at_k", "mrr"]


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
