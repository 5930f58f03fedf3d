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

The link task's three protocols keep their states here too: a shared negative set
(``pairs``: :func:`pair_state`, scores), each positive's own negatives (``per_source``:
:func:`pair_state`, reciprocal ranks), every item of a user-item graph (``items``:
:func:`user_item_state`); :func:`merge` combines workers' states and :func:`metrics`
turns the merged one into figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["CONCAT_KEYS", "auc", "hits_at_k", "mean_by_id", "merge", "metrics", "mrr", "pair_state",
           "per_source_rr", "recall_ndcg_at_k", "top_k", "user_item_cells", "user_item_state"]

State = dict[str, np.ndarray]
CONCAT_KEYS = ("pos", "neg", "user", "recall", "ndcg", "pid", "rr")
"""State keys whose arrays concatenate when states merge (scores, per-user and
per-positive values); every other key is a count and sums."""
USER_CHUNK = 1 << 22  # user x item scores per chunk of all-item ranking


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


# --- the three protocols: metric states and their exact merge ---------------------------------

def pair_state(scores: np.ndarray, target: np.ndarray) -> State:
    """The state of scored pairs: ``scores`` (float64, one per row of ``target``, whose
    columns are ``src, dst, label, group[, pid]``). A shared negative set (``pairs``): the
    positives' and negatives' scores. Each positive against its own negatives
    (``per_source``, a ``pid`` column; a positive's negatives follow in its order): one
    reciprocal rank per positive with its index."""
    label = target[:, 2]
    if target.shape[1] > 4:
        pos, neg = scores[label == 1], scores[label == 0]
        return {"pid": target[label == 1, 4],
                "rr": per_source_rr(pos, neg.reshape(pos.size, neg.size // max(1, pos.size)))}
    return {"pos": scores[label == 1], "neg": scores[label == 0]}


def user_item_state(users: np.ndarray, scores_of: Callable[[int, int], np.ndarray],
                    truth: np.ndarray, known: np.ndarray, items: tuple[int, int], k: int) -> State:
    """All-item ranking (``items``): Recall@K and NDCG@K of each of ``users`` (sorted graph
    ids, each with at least one ``truth`` pair) over every item in ``items`` = ``[lo,
    hi)``, the ``known`` (user, item) pairs excluded. ``scores_of(a, b)`` gives the scores
    [b - a, hi - lo] of ``users[a:b]`` against every item; users are scored in chunks of
    at most :data:`USER_CHUNK` cells."""
    if users.size == 0:
        return {"user": np.empty(0, np.int64), "recall": np.empty(0), "ndcg": np.empty(0)}
    lo, hi = items
    recall, ndcg = [], []
    step = max(1, USER_CHUNK // max(1, hi - lo))
    for c in range(0, users.size, step):
        cu = users[c:c + step]
        r, n = recall_ndcg_at_k(scores_of(c, c + step), user_item_cells(truth, cu, lo),
                                user_item_cells(known, cu, lo), k)
        recall.append(r)
        ndcg.append(n)
    return {"user": users, "recall": np.concatenate(recall), "ndcg": np.concatenate(ndcg)}


def merge(states: Sequence[State]) -> State:
    """Scores and per-user values concatenate (the merged state is the multiset of all of
    them); counts sum."""
    out: State = {}
    for st in states:
        for key, v in st.items():
            v = np.asarray(v)
            if key in out:
                out[key] = np.concatenate([out[key], v]) if key in CONCAT_KEYS else out[key] + v
            else:
                out[key] = v.copy()
    return out


def metrics(state: State, k: int) -> dict[str, float]:
    """The figures of a merged state: ``pair_acc`` (training batches), ``hits`` (@``k``),
    ``mrr`` and ``auc`` of a shared negative set, ``recall`` and ``ndcg`` (@``k``) of
    all-item ranking, ``mrr`` of per-positive negatives."""
    res: dict[str, float] = {}
    if "total" in state:
        total = int(np.sum(state["total"]))
        res["pair_acc"] = int(np.sum(state["correct"])) / total if total else float("nan")
    if "pos" in state:
        pos = np.asarray(state["pos"], dtype=np.float64)
        neg = np.asarray(state.get("neg", np.empty(0)), dtype=np.float64)
        res["hits"] = hits_at_k(pos, neg, k)
        res["mrr"] = mrr(pos, neg)
        res["auc"] = auc(pos, neg)
    if "user" in state:
        users = np.asarray(state["user"], dtype=np.int64)
        res["recall"] = mean_by_id(users, np.asarray(state["recall"]))
        res["ndcg"] = mean_by_id(users, np.asarray(state["ndcg"]))
    if "pid" in state:
        res["mrr"] = mean_by_id(np.asarray(state["pid"], dtype=np.int64), np.asarray(state["rr"]))
    return res
