"""Edge splits for link prediction: OGB link folders, LightGCN user-item files, and a
seeded random split of any graph.

Every source ends in one :class:`EdgeSplit` (graph ids, before partitioning): the
training edges, and the validation and test positives and negatives. The
message-passing graph is built from the **training edges only**
(:func:`message_passing_graph`), so no validation or test edge can reach a model's input.

Sources (``dataset.source``)::

    ogbl      OGB's link-property layout, as OGB ships it (``ogbl-ddi``, ``ogbl-collab``...):
              <path>/raw/edge.csv.gz            training edges "src,dst", each stored once
              <path>/raw/num-node-list.csv.gz   one line: N
              <path>/split/<name>/{train,valid,test}.pt
                  torch-saved dicts of numpy arrays: ``edge`` [E, 2] (positives) and, for
                  valid/test, ``edge_neg`` [E', 2] (the negatives every positive is ranked
                  against); or, for the MRR datasets (``ogbl-citation2``), ``source_node``
                  and ``target_node`` [E] (positives) and ``target_node_neg`` [E, K] (each
                  positive's own K negative destinations, same source). Read with
                  ``torch.load(weights_only=True)`` and only numpy's
                  array-reconstruction globals allowed (:func:`load_pt`): a file that asks
                  for anything else is refused, never executed.
    lightgcn  LightGCN user-item files: <path>/{train,valid,test}.txt, one line per user
              "user item item ..." (0-based; users and items are separate id spaces).
              Users keep ids 0..U-1, items become U..U+I-1; negatives are drawn over items.
    any other source (``csv``, ``npz``, ...): the loaded graph's edges, split at random by
              :func:`random_edge_split` with the task's fractions.

Undirected graphs: a split holds each undirected edge once (``u < v`` for random splits,
as stored for OGB); both directions always land in the same split, and the
message-passing graph gets both directions of every training edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnntrain.data.errors import DataError, require_dir, require_file
from gnntrain.data.features import fallback_features
from gnntrain.data.textio import read_table
from partition.graph import Graph, csr_from_edges, unique_sorted
from samplers.edge_keys import pair_keys, undirected_keys
from samplers.negative import common_neighbour_non_edges, sample_non_edges

if TYPE_CHECKING:
    from gnntrain.config import LightGcnDataset, OgblDataset

__all__ = ["EdgeSplit", "load_lightgcn", "load_ogbl", "load_pt", "load_split",
           "RandomSplitResult", "message_passing_graph", "random_edge_split", "renumber", "split_edges_at_random",
           "training_csr"]

OGBL_LAYOUT = ("<path>/raw/edge.csv.gz and <path>/split/<name>/{train,valid,test}.pt "
               "(OGB's link-property layout; see gnntrain/data/link.py)")
LIGHTGCN_LAYOUT = "<path>/{train,valid,test}.txt, one 'user item item ...' line per user"
EVAL_SPLITS = ("val", "test")


@dataclass(frozen=True)
class EdgeSplit:
    """Link-prediction edges of one graph, int64 ``[E, 2]`` (src, dst) arrays.

    ``train`` are the message-passing (and training) edges; ``val``/``test`` the positives
    scored, ``val_neg``/``test_neg`` the negatives they are ranked against (shared by all
    positives of the split, OGB's Hits@K protocol), or with ``neg_per_pos`` = K > 0 each
    positive's own K negatives (rows ``i*K .. i*K+K-1`` belong to positive ``i``, same
    source; OGB's MRR protocol). ``dst_lo``/``dst_hi`` bound the destination space
    negatives are drawn from (items only for a user-item graph).
    """

    num_nodes: int
    train: np.ndarray
    val: np.ndarray
    val_neg: np.ndarray
    test: np.ndarray
    test_neg: np.ndarray
    undirected: bool = True
    dst_lo: int = 0
    dst_hi: int = -1
    where: str = ""
    neg_per_pos: int = 0

    def pos(self, split: str) -> np.ndarray:
        return {"train": self.train, "val": self.val, "test": self.test}[split]

    def neg(self, split: str) -> np.ndarray:
        return {"val": self.val_neg, "test": self.test_neg}[split]

    @property
    def dst_range(self) -> tuple[int, int]:
        return self.dst_lo, self.num_nodes if self.dst_hi < 0 else self.dst_hi

    def check(self) -> EdgeSplit:
        """Ids in range, no split empty of training edges, no positive in two splits."""
        n = self.num_nodes
        for name in ("train", "val", "val_neg", "test", "test_neg"):
            a = getattr(self, name)
            if a.ndim != 2 or a.shape[1] != 2:
                raise DataError(f"{self.where}: {name} edges have shape {a.shape}, expected [E, 2]")
            if a.size and (a.min() < 0 or a.max() >= n):
                bad = int(a.min()) if a.min() < 0 else int(a.max())
                raise DataError(f"{self.where}: {name} edge endpoint {bad} is outside "
                                f"[0, num_nodes={n}); ids must be 0-based and below the node count")
        for name in EVAL_SPLITS if self.neg_per_pos else ():
            want = self.pos(name).shape[0] * self.neg_per_pos
            if self.neg(name).shape[0] != want or (
                    want and not np.array_equal(np.repeat(self.pos(name)[:, 0], self.neg_per_pos),
                                                self.neg(name)[:, 0])):
                raise DataError(f"{self.where}: {name} has {self.neg(name).shape[0]} negatives for "
                                f"{self.pos(name).shape[0]} positives; expected {self.neg_per_pos} "
                                "per positive, each with the positive's source")
        if self.train.shape[0] == 0:
            raise DataError(f"{self.where}: the split source gives no training edges")
        seen = _keys(self.train, n, self.undirected)
        for name in EVAL_SPLITS:
            k = _keys(self.pos(name), n, self.undirected)
            clash = np.isin(k, seen)
            if clash.any():
                u, v = (int(t) for t in self.pos(name)[np.flatnonzero(clash)[0]])
                raise DataError(f"{self.where}: {name} edge ({u}, {v}) is also a training (or "
                                "validation) edge; the splits must be disjoint")
            seen = np.concatenate([seen, k])
        return self


def _keys(e: np.ndarray, n: int, undirected: bool) -> np.ndarray:
    """One int64 key per edge; for an undirected graph the same for both directions."""
    return (undirected_keys if undirected else pair_keys)(e[:, 0], e[:, 1], n)


def load_split(cfg: OgblDataset | LightGcnDataset) -> EdgeSplit:
    """The split a link source stores (``ogbl`` or ``lightgcn``)."""
    from gnntrain.data.paths import resolve_path

    path = resolve_path(cfg.path)
    try:
        if cfg.source == "ogbl":
            return load_ogbl(path, cfg.split)
        return load_lightgcn(path, num_negatives=cfg.eval_negatives, seed=cfg.split_seed)
    except DataError as e:
        raise DataError(f"dataset {cfg.name!r} (source={cfg.source}): {e}") from None


def training_csr(train: np.ndarray, num_nodes: int, undirected: bool) -> tuple[np.ndarray, np.ndarray]:
    """The in-neighbour CSR of the training edges ``train`` (``[m, 2]``): both directions when
    ``undirected``, repeats and self-loops dropped. Message passing runs on it; the hard
    (common-neighbour) negatives of a random split rank candidates by it."""
    return csr_from_edges(train[:, 0], train[:, 1], num_nodes, undirected=undirected, dedup=True,
                          self_loops="remove")


def message_passing_graph(split: EdgeSplit, name: str, *, feature_fallback: Any = "degree",
                          fallback_dim: int = 32, x: np.ndarray | None = None,
                          csr: tuple[np.ndarray, np.ndarray] | None = None) -> Graph:
    """The graph message passing runs on: the training edges only (both directions when
    undirected), fallback features when ``x`` is None, every node in ``train_idx`` (the
    node splits are unused by link prediction). ``csr``: the split's :func:`training_csr`
    where the caller has it already (:func:`split_edges_at_random` with hard negatives)."""
    indptr, indices = csr if csr is not None else training_csr(split.train, split.num_nodes, split.undirected)
    if x is None:
        x = fallback_features(indptr, indices, feature_fallback, fallback_dim)
    n = split.num_nodes
    return Graph(indptr=indptr, indices=indices, x=np.ascontiguousarray(x, dtype=np.float32),
                 y=np.zeros(n, np.int64), train_idx=np.arange(n, dtype=np.int64),
                 val_idx=np.empty(0, np.int64), test_idx=np.empty(0, np.int64), num_classes=1,
                 name=name).validate()


# --- torch-saved numpy arrays, without a full unpickle --------------------------------------

def _numpy_globals() -> list[Any]:
    """numpy's array-reconstruction globals, under the names old and new numpy pickle them."""
    from numpy._core import multiarray

    out: list[Any] = [np.ndarray, np.dtype,
                      (multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
                      (multiarray._reconstruct, "numpy._core.multiarray._reconstruct")]
    out += [type(np.dtype(c)) for c in "?bBhHiIlLqQefdg"]
    return out


@contextlib.contextmanager
def _allow_numpy() -> Iterator[None]:
    import torch

    with torch.serialization.safe_globals(_numpy_globals()):
        yield


def load_pt(path: Path) -> dict[str, np.ndarray]:
    """A torch-saved dict of numpy arrays, read with ``weights_only=True`` and only numpy's
    reconstruction globals allowed; any other global (code a pickle would run) is refused."""
    import pickle

    import torch

    require_file(path, "ogbl split file", OGBL_LAYOUT)
    try:
        with _allow_numpy():
            obj = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:
        detail = str(e).split("WeightsUnpickler error:")[-1].strip().splitlines()[0]
        raise DataError(f"{path}: refused to load: the file needs a global outside numpy's "
                        f"array reconstruction ({detail}); only dicts of numpy arrays are "
                        "read, never a full unpickle") from None
    except (RuntimeError, EOFError, OSError) as e:
        raise DataError(f"{path}: not a readable torch-saved file ({e})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: expected a dict of arrays (edge, edge_neg), got {type(obj).__name__}")
    out = {}
    for k, v in obj.items():
        arr = v.numpy() if isinstance(v, torch.Tensor) else v
        if not isinstance(arr, np.ndarray):
            raise DataError(f"{path}: key {k!r} holds {type(v).__name__}, expected an array")
        out[str(k)] = arr
    return out


def _pairs(d: dict[str, np.ndarray], key: str, path: Path) -> np.ndarray:
    if key not in d:
        raise DataError(f"{path}: no key {key!r} (found {sorted(d)}); expected OGB's "
                        "edge [E, 2] and edge_neg [E', 2]")
    a = np.asarray(d[key])
    if a.ndim != 2 or 2 not in a.shape:
        raise DataError(f"{path}: {key} has shape {a.shape}, expected [E, 2]")
    if a.shape[1] != 2:
        a = a.T
    if not np.issubdtype(a.dtype, np.integer):
        raise DataError(f"{path}: {key} has dtype {a.dtype}, expected integer node ids")
    return np.ascontiguousarray(a, dtype=np.int64)


def _ids(d: dict[str, np.ndarray], key: str, path: Path, ndim: int) -> np.ndarray:
    if key not in d:
        raise DataError(f"{path}: no key {key!r} (found {sorted(d)}); expected OGB's "
                        "source_node [E], target_node [E] and target_node_neg [E, K]")
    a = np.asarray(d[key])
    if a.ndim != ndim or not np.issubdtype(a.dtype, np.integer):
        raise DataError(f"{path}: {key} has shape {a.shape} and dtype {a.dtype}, expected "
                        f"{'[E]' if ndim == 1 else '[E, K]'} integer node ids")
    return np.ascontiguousarray(a, dtype=np.int64)


def _split_edges(d: dict[str, np.ndarray], path: Path, negatives: bool
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """Positives, negatives and negatives per positive (0: shared) of one OGB split file,
    in either layout: ``edge``/``edge_neg`` or ``source_node``/``target_node``/
    ``target_node_neg``."""
    if "source_node" not in d:
        pos = _pairs(d, "edge", path)
        return pos, _pairs(d, "edge_neg", path) if negatives else np.empty((0, 2), np.int64), 0
    src, dst = _ids(d, "source_node", path, 1), _ids(d, "target_node", path, 1)
    if src.shape != dst.shape:
        raise DataError(f"{path}: source_node has {src.size} ids, target_node {dst.size}; "
                        "they must pair up")
    pos = np.stack([src, dst], 1)
    if not negatives:
        return pos, np.empty((0, 2), np.int64), 0
    neg = _ids(d, "target_node_neg", path, 2)
    if neg.shape[0] != src.size:
        raise DataError(f"{path}: target_node_neg has {neg.shape[0]} rows for {src.size} "
                        "positives; expected one row of negatives per positive")
    k = int(neg.shape[1])
    return pos, np.stack([np.repeat(src, k), neg.reshape(-1)], 1), k


def load_ogbl(path: Path, split: int | str = 0) -> EdgeSplit:
    """OGB's link-property folder ``path`` (see module doc); ``split`` names the folder
    under ``split/`` (the default 0 takes the only one)."""
    require_dir(path, "ogbl dataset.path", OGBL_LAYOUT)
    base = require_dir(path / "split", "ogbl split folder", OGBL_LAYOUT)
    names = sorted(p.name for p in base.iterdir() if p.is_dir())
    if isinstance(split, str):
        if split not in names:
            raise DataError(f"split={split!r}: no folder {base / split}; allowed: {names}")
        folder = base / split
    elif len(names) == 1 and split == 0:
        folder = base / names[0]
    else:
        raise DataError(f"split={split!r}: {base} holds the splits {names}; name one with "
                        "dataset.split")
    files = {s: load_pt(folder / f"{f}.pt") for s, f in (("train", "train"), ("val", "valid"),
                                                          ("test", "test"))}
    train, _, _ = _split_edges(files["train"], folder / "train.pt", False)
    val, val_neg, kv = _split_edges(files["val"], folder / "valid.pt", True)
    test, test_neg, kt = _split_edges(files["test"], folder / "test.pt", True)
    if kv != kt:
        raise DataError(f"{folder}: valid.pt has {kv} negatives per positive, test.pt {kt}; "
                        "both splits must use the same protocol")
    nn = path / "raw" / "num-node-list.csv.gz"
    if nn.is_file():
        n = int(read_table(nn, kind="int", header=False).values.sum())
    else:
        n = max(int(a.max()) for a in (train, val, val_neg, test, test_neg) if a.size) + 1
    return EdgeSplit(num_nodes=n, train=train, val=val, val_neg=val_neg, test=test,
                     test_neg=test_neg, neg_per_pos=kv,
                     undirected=True, where=str(folder)).check()


# --- LightGCN user-item files --------------------------------------------------------------

def _read_adjacency_lists(path: Path) -> np.ndarray:
    """``user item item ...`` lines as [E, 2] (user, item) pairs."""
    require_file(path, "lightgcn file", LIGHTGCN_LAYOUT)
    users: list[np.ndarray] = []
    items: list[np.ndarray] = []
    with path.open() as f:
        for lineno, line in enumerate(f, 1):
            tok = line.split()
            if not tok:
                continue
            try:
                ids = np.array([int(t) for t in tok], dtype=np.int64)
            except ValueError:
                raise DataError(f"{path}:{lineno}: expected integer ids 'user item item ...', "
                                f"got {line.strip()[:60]!r}") from None
            if ids.min() < 0:
                raise DataError(f"{path}:{lineno}: negative id {int(ids.min())}; ids are 0-based")
            users.append(np.full(ids.size - 1, ids[0], dtype=np.int64))
            items.append(ids[1:])
    if not users:
        return np.empty((0, 2), np.int64)
    return np.stack([np.concatenate(users), np.concatenate(items)], axis=1)


def load_lightgcn(path: Path, *, num_negatives: int = 1, seed: int = 0) -> EdgeSplit:
    """LightGCN's ``{train,valid,test}.txt`` under ``path`` as one bipartite graph: users
    ``0..U-1``, items ``U..U+I-1``; ``num_negatives`` random non-interacted (user, item)
    pairs per validation/test positive."""
    require_dir(path, "lightgcn dataset.path", LIGHTGCN_LAYOUT)
    raw = {s: _read_adjacency_lists(path / f"{f}.txt")
           for s, f in (("train", "train"), ("val", "valid"), ("test", "test"))}
    allp = np.concatenate(list(raw.values()))
    n_users, n_items = int(allp[:, 0].max()) + 1, int(allp[:, 1].max()) + 1
    shift = np.array([0, n_users], dtype=np.int64)
    e = {s: unique_rows(a + shift) for s, a in raw.items()}
    n = n_users + n_items
    # a pair seen in training stays there: later splits keep only new interactions
    seen = _keys(e["train"], n, True)
    for s in EVAL_SPLITS:
        k = _keys(e[s], n, True)
        e[s] = e[s][~np.isin(k, seen)]
        seen = np.concatenate([seen, _keys(e[s], n, True)])
    rng = np.random.default_rng(seed)
    negs = {s: sample_non_edges(rng, e[s][:, 0], (n_users, n), seen, n, num_negatives)
            for s in EVAL_SPLITS}
    return EdgeSplit(num_nodes=n, train=e["train"], val=e["val"], val_neg=negs["val"],
                     test=e["test"], test_neg=negs["test"], undirected=True, dst_lo=n_users,
                     dst_hi=n, where=str(path)).check()


def unique_rows(e: np.ndarray) -> np.ndarray:
    if e.size == 0:
        return e.reshape(0, 2)
    n = int(e.max()) + 1
    k = unique_sorted(e[:, 0] * np.int64(n) + e[:, 1])
    return np.stack([k // n, k % n], axis=1)


# --- a seeded random split of any edge list ------------------------------------------------

def random_edge_split(graph: Graph, *, val_frac: float, test_frac: float, seed: int,
                      undirected: bool = True, keep_train_per_node: bool = True,
                      shared_negatives: int = 0, per_positive: int = 0,
                      common_neighbour_negatives: bool = False) -> EdgeSplit:
    """:func:`split_edges_at_random`, the split alone."""
    return split_edges_at_random(graph, val_frac=val_frac, test_frac=test_frac, seed=seed, undirected=undirected,
                                 keep_train_per_node=keep_train_per_node, shared_negatives=shared_negatives,
                                 per_positive=per_positive,
                                 common_neighbour_negatives=common_neighbour_negatives).split


@dataclass(frozen=True)
class RandomSplitResult:
    """A random split, and the :func:`training_csr` it built on the way (hard negatives
    rank by it; None otherwise): message passing reuses it instead of building it again."""

    split: EdgeSplit
    train_csr: tuple[np.ndarray, np.ndarray] | None = None


def split_edges_at_random(graph: Graph, *, val_frac: float, test_frac: float, seed: int,
                          undirected: bool = True, keep_train_per_node: bool = True,
                          shared_negatives: int = 0, per_positive: int = 0,
                          common_neighbour_negatives: bool = False) -> RandomSplitResult:
    """Split ``graph``'s edges at random (seeded): ``val_frac`` and ``test_frac`` of them
    (each undirected edge counted once, both directions in the same split) become
    validation and test positives; the rest train. With ``keep_train_per_node`` an edge is
    only held out if both its endpoints keep at least one training edge (no node loses all
    its training edges).

    The negatives of each evaluation split, never an edge of the graph nor a self-loop:
    by default a shared set of one random non-edge per positive, from the positive's source
    (every positive ranked against all of them: Hits@K); ``shared_negatives`` = N gives a
    shared set of N random pairs instead, sources uniform too (OGB-collab's 100,000 random
    pairs); ``per_positive`` = K gives each positive its own K (same source; OGB's MRR
    protocol, ``neg_per_pos`` = K), with ``common_neighbour_negatives`` the K non-neighbours
    sharing the most neighbours with the source in the training edges (HeaRT's hard
    negatives, :func:`samplers.negative.common_neighbour_non_edges`)."""
    if shared_negatives and per_positive:
        raise DataError(f"shared_negatives={shared_negatives} and per_positive={per_positive}: the "
                        "negatives are either one shared set or each positive's own, not both")
    if common_neighbour_negatives and not (per_positive and undirected):
        raise DataError(f"common_neighbour_negatives on a split with per_positive={per_positive}, "
                        f"undirected={undirected}: they are each positive's own negatives of an "
                        "undirected graph (per_positive >= 1)")
    if not (0 <= val_frac < 1 and 0 <= test_frac < 1 and val_frac + test_frac < 1):
        raise DataError(f"val_frac={val_frac}, test_frac={test_frac}: each must lie in [0, 1) "
                        "and their sum below 1 (the rest trains)")
    n = graph.num_nodes
    ei = graph.edge_index().T
    ei = ei[ei[:, 0] != ei[:, 1]]
    if undirected:
        ei = unique_rows(np.sort(ei, axis=1))
    rng = np.random.default_rng(seed)
    order = rng.permutation(ei.shape[0])
    n_val = int(round(val_frac * ei.shape[0]))
    n_test = int(round(test_frac * ei.shape[0]))
    held = np.zeros(ei.shape[0], dtype=np.int8)  # 0 train, 1 val, 2 test
    if keep_train_per_node:
        spare = np.bincount(ei.ravel(), minlength=n) - 1  # edges a node can still give up
        cand = order
        for label, count in ((1, n_val), (2, n_test)):
            taken = _take_keeping_one(ei, cand, spare, count)
            held[taken] = label
            cand = cand[held[cand] == 0]
    else:
        held[order[:n_val]] = 1
        held[order[n_val:n_val + n_test]] = 2
    edges = {s: ei[held == k] for k, s in enumerate(("train", "val", "test"))}
    all_keys = _keys(ei, n, undirected)

    def sources(split: str) -> np.ndarray:
        return rng.integers(0, n, shared_negatives) if shared_negatives else edges[split][:, 0]

    train_csr = None
    if common_neighbour_negatives:
        train_csr = training_csr(edges["train"], n, undirected=True)
        negs = {s: common_neighbour_non_edges(rng, edges[s][:, 0], train_csr, all_keys, per_positive)
                for s in EVAL_SPLITS}
    else:
        negs = {s: sample_non_edges(rng, sources(s), (0, n), all_keys, n, max(1, per_positive))
                for s in EVAL_SPLITS}
    split = EdgeSplit(num_nodes=n, train=edges["train"], val=edges["val"], val_neg=negs["val"],
                      test=edges["test"], test_neg=negs["test"], undirected=undirected,
                      where=f"random split of {graph.name}", neg_per_pos=per_positive).check()
    return RandomSplitResult(split, train_csr)


def _take_keeping_one(ei: np.ndarray, cand: np.ndarray, spare: np.ndarray, count: int,
                      block: int = 8192) -> np.ndarray:
    """The first ``count`` edges of ``cand`` (in order) that can be held out while both
    endpoints keep a training edge: edge ``(u, v)`` is taken when ``spare[u] > 0`` and
    ``spare[v] > 0`` at its turn, which then drop by one (``spare`` is updated in place).

    The greedy scan, in numpy blocks: within a block an edge is surely taken when both
    endpoints have spare left even if every earlier edge of the block touching them was
    taken, surely skipped when one endpoint has none left already; only the edges between
    those bounds are decided one by one, with the exact count of earlier takes."""
    out: list[np.ndarray] = []
    done = 0
    for b0 in range(0, cand.size, block):
        if done == count:
            break
        idx = cand[b0:b0 + block]
        ends = ei[idx]  # [B, 2]
        flat = ends.ravel()
        # earlier appearances of each endpoint in this block (occurrence rank)
        order = np.argsort(flat, kind="stable")
        sf = flat[order]
        first = np.r_[0, np.flatnonzero(sf[1:] != sf[:-1]) + 1]
        rank_sorted = np.arange(sf.size) - np.repeat(first, np.diff(np.r_[first, sf.size]))
        before = np.empty_like(rank_sorted)
        before[order] = rank_sorted
        before = before.reshape(-1, 2)
        have = spare[ends]
        sure = ((have - before) > 0).all(1)
        never = (have <= 0).any(1)
        take = sure.copy()
        open_ = np.flatnonzero(~sure & ~never)
        if open_.size:
            for j in open_.tolist():  # in order: earlier decisions are final
                u, v = int(ends[j, 0]), int(ends[j, 1])
                prev = take[:j]
                ok = True
                for w in (u, v):
                    used = int((prev & ((ends[:j, 0] == w) | (ends[:j, 1] == w))).sum())
                    ok = ok and spare[w] - used > 0
                take[j] = ok
        hit = np.flatnonzero(take)[:count - done]
        taken = idx[hit]
        np.subtract.at(spare, ei[taken].ravel(), 1)
        out.append(taken)
        done += hit.size
    return np.concatenate(out) if out else np.empty(0, np.int64)


def renumber(split: EdgeSplit, new_ids: np.ndarray) -> EdgeSplit:
    """The split with every id ``v`` replaced by ``new_ids[v]`` (after partitioning)."""
    f = {k: new_ids[getattr(split, k)] for k in ("train", "val", "val_neg", "test", "test_neg")}
    return replace(split, **f)
