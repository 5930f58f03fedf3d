"""From the arrays a source stores to a validated :class:`Graph`.

Every loader reads its files into a :class:`RawGraph` (edges as stored, features,
labels with ``-1`` for unlabeled nodes, the source's splits if it has any, and where
each array came from) and calls :func:`build_graph`. That one function applies the
load-time options of :class:`BuildOptions`, in this order:

1. cheap checks first, each naming the file or key, the value seen and what is
   allowed: edge ids in ``[0, num_nodes)``, one feature row per node, finite
   features, labels in ``[0, num_classes)``, splits disjoint, non-empty training set,
   no unlabeled node in a split;
2. the CSR of in-neighbours with ``undirected`` / ``dedup`` / ``self_loops``;
3. fallback features when the source has none (:mod:`gnntrain.data.features`);
4. a random split over the labeled nodes when the source has none, or when
   ``split="random"`` asks for one;
5. :meth:`Graph.validate`.

Unlabeled nodes (no row in a label file, ``nan`` in OGB papers100M) get label 0 in
``Graph.y`` and are kept out of every split, so no loss or metric ever reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from gnntrain.data.errors import DataError
from gnntrain.data.features import fallback_features
from partition.graph import Graph, GraphError, csr_from_edges, unique_sorted
from partition.labels import dense_class_ids

if TYPE_CHECKING:
    from gnntrain.config import LoadedDataset

SPLITS = ("train", "val", "test")


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """Load-time cleaning and split options (the fields of ``gnntrain.config.LoadedDataset``)."""

    undirected: bool = False
    dedup: bool = True
    self_loops: Literal["keep", "remove", "add"] = "keep"
    split: int | str = 0
    train_frac: float = 0.6
    val_frac: float = 0.2
    split_seed: int = 0
    num_classes: int | None = None
    feature_fallback: Literal["degree", "random_projection"] = "degree"
    fallback_dim: int = 32

    @classmethod
    def from_config(cls, cfg: LoadedDataset) -> BuildOptions:
        return cls(undirected=cfg.undirected, dedup=cfg.dedup, self_loops=cfg.self_loops,
                   split=cfg.split, train_frac=cfg.train_frac, val_frac=cfg.val_frac,
                   split_seed=cfg.split_seed, num_classes=cfg.num_classes,
                   feature_fallback=cfg.feature_fallback, fallback_dim=cfg.fallback_dim)


@dataclass(kw_only=True)
class RawGraph:
    """Arrays as a source stores them, before cleaning.

    ``src[i] -> dst[i]`` are the stored edges; ``y`` uses ``-1`` for "no label" and
    is ``None`` for a structure-only source (every node then gets class 0 of 1);
    ``splits`` maps ``train``/``val``/``test`` to node ids (any order) or is ``None``.
    ``where`` names the file or key each array came from, for error messages.
    """

    name: str
    num_nodes: int
    src: np.ndarray
    dst: np.ndarray
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    num_classes: int | None = None
    splits: dict[str, np.ndarray] | None = None
    where: dict[str, str] = field(default_factory=dict)

    def origin(self, key: str) -> str:
        return self.where.get(key, self.where.get("source", self.name))


def build_graph(raw: RawGraph, opts: BuildOptions) -> Graph:
    """Check ``raw``, build the CSR, fill in features and splits, validate; see module doc."""
    n = raw.num_nodes
    if n < 1:
        raise DataError(f"{raw.origin('source')}: num_nodes={n}; a graph needs at least one node")
    src, dst = _check_edges(raw)
    x = _check_features(raw)
    y, labeled, num_classes = _check_labels(raw, opts)
    if opts.split == "random" or raw.splits is None:
        splits = random_split(labeled, opts.train_frac, opts.val_frac, opts.split_seed,
                              origin=raw.origin("labels"))
    else:
        splits = _check_splits(raw.splits, labeled, n, raw.origin("splits"))
    indptr, indices = csr_from_edges(src, dst, n, undirected=opts.undirected,
                                     dedup=opts.dedup, self_loops=opts.self_loops)
    del src, dst
    if x is None:
        x = fallback_features(indptr, indices, opts.feature_fallback, opts.fallback_dim)
    g = Graph(indptr=indptr, indices=indices, x=x, y=y, train_idx=splits["train"],
              val_idx=splits["val"], test_idx=splits["test"], num_classes=num_classes,
              name=raw.name)
    try:
        return g.validate()
    except GraphError as e:
        raise DataError(f"{raw.origin('source')}: {e}") from None


def _check_edges(raw: RawGraph) -> tuple[np.ndarray, np.ndarray]:
    src = np.asarray(raw.src).ravel()
    dst = np.asarray(raw.dst).ravel()
    if src.shape != dst.shape:
        raise DataError(f"edges in {raw.origin('edges')}: {src.size} sources but "
                        f"{dst.size} destinations")
    for name, a in (("source", src), ("destination", dst)):
        if a.size and not np.issubdtype(a.dtype, np.integer):
            if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                raise DataError(f"edges in {raw.origin('edges')}: {name} ids must be "
                                f"integers, got dtype {a.dtype} with fractional or NaN values")
        if a.size:
            lo, hi = a.min(), a.max()
            if lo < 0 or hi >= raw.num_nodes:
                bad = lo if lo < 0 else hi
                row = int(np.flatnonzero(a == bad)[0])
                raise DataError(
                    f"edges in {raw.origin('edges')}: {name} id {int(bad)} (edge {row}) is "
                    f"outside [0, num_nodes={raw.num_nodes}); ids must be 0-based and below "
                    "the node count (set dataset.num_nodes, or dataset.relabel: true for "
                    "arbitrary ids)")
    return src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)


def _check_features(raw: RawGraph) -> np.ndarray | None:
    if raw.x is None:
        return None
    x = np.asarray(raw.x)
    where = raw.origin("x")
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DataError(f"features in {where}: expected a [num_nodes, F] matrix, got "
                        f"shape {x.shape}")
    if x.shape[0] != raw.num_nodes:
        raise DataError(f"features in {where}: {x.shape[0]} rows but num_nodes="
                        f"{raw.num_nodes}; there must be exactly one feature row per node")
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise DataError(f"features in {where}: dtype {x.dtype} is not a real number type")
    x = x.astype(np.float32, copy=False)
    finite = np.isfinite(x)
    if not finite.all():
        node, col = (int(v) for v in np.argwhere(~finite)[0])
        raise DataError(f"features in {where}: node {node} column {col} is {x[node, col]}; "
                        "features must be finite (no NaN or Inf)")
    return np.ascontiguousarray(x)


def _check_labels(raw: RawGraph, opts: BuildOptions) -> tuple[np.ndarray, np.ndarray, int]:
    """(y with unlabeled set to 0, boolean labeled mask, num_classes)."""
    n, where = raw.num_nodes, raw.origin("y")
    if raw.y is None:
        return np.zeros(n, np.int64), np.ones(n, bool), 1
    y = np.asarray(raw.y).ravel()
    if y.shape[0] != n:
        raise DataError(f"labels in {where}: {y.shape[0]} labels but num_nodes={n}")
    if not np.issubdtype(y.dtype, np.integer):
        if not np.issubdtype(y.dtype, np.number):
            raise DataError(f"labels in {where}: dtype {y.dtype} is not numeric")
        bad = np.isfinite(y) & (y != np.round(y))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"labels in {where}: node {i} has label {y[i]}; labels must be "
                            "whole numbers (or NaN for unlabeled)")
        y = np.where(np.isfinite(y), y, -1).astype(np.int64)
    y = y.astype(np.int64, copy=False)
    if (y < -1).any():
        i = int(np.flatnonzero(y < -1)[0])
        raise DataError(f"labels in {where}: node {i} has label {int(y[i])}; labels must be "
                        "in [0, num_classes), or -1 for an unlabeled node")
    labeled = y >= 0
    if not labeled.any():
        raise DataError(f"labels in {where}: no node has a label")
    # ids stored 1-based or with gaps become 0..C-1 (with a warning) unless num_classes is given
    ids = dense_class_ids(y, labeled, opts.num_classes or raw.num_classes, where)
    y, num_classes = ids.y, ids.num_classes
    top = int(y[labeled].max())
    if top >= num_classes:
        i = int(np.flatnonzero(y == top)[0])
        raise DataError(f"labels in {where}: node {i} has label {top}, outside "
                        f"[0, num_classes={num_classes})")
    return np.where(labeled, y, 0), labeled, int(num_classes)


def _check_splits(splits: dict[str, np.ndarray], labeled: np.ndarray, n: int,
                  where: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    owner = np.full(n, -1, dtype=np.int8)
    for k, name in enumerate(SPLITS):
        idx = np.asarray(splits.get(name, np.empty(0, np.int64))).ravel()
        if idx.size and not np.issubdtype(idx.dtype, np.integer):
            raise DataError(f"{name} split in {where}: node ids must be integers, got {idx.dtype}")
        idx = idx.astype(np.int64, copy=False)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
            raise DataError(f"{name} split in {where}: node id {bad} is outside "
                            f"[0, num_nodes={n})")
        idx = unique_sorted(idx)
        clash = owner[idx] >= 0
        if clash.any():
            node = int(idx[clash][0])
            raise DataError(f"splits in {where}: node {node} is in both "
                            f"{SPLITS[owner[node]]} and {name}; train/val/test must be disjoint")
        unlabeled = ~labeled[idx]
        if unlabeled.any():
            raise DataError(f"{name} split in {where}: node {int(idx[unlabeled][0])} has no "
                            "label; every split node needs one")
        owner[idx] = k
        out[name] = idx
    if out["train"].size == 0:
        raise DataError(f"train split in {where} is empty: at least one training node "
                        "is needed (pick another split, or split: random)")
    return out


def random_split(labeled: np.ndarray, train_frac: float, val_frac: float, seed: int, *,
                 origin: str = "labels") -> dict[str, np.ndarray]:
    """Split the labeled nodes at random: ``train_frac`` / ``val_frac`` / the rest test."""
    if train_frac + val_frac > 1.0 + 1e-9:
        raise DataError(f"train_frac={train_frac} + val_frac={val_frac} > 1; their sum "
                        "must be at most 1 (the rest is the test split)")
    ids = np.flatnonzero(labeled).astype(np.int64)
    perm = np.random.default_rng(seed).permutation(ids)
    n_tr = int(round(train_frac * ids.size))
    n_va = min(int(round(val_frac * ids.size)), ids.size - n_tr)
    if n_tr == 0:
        raise DataError(f"random split of {origin}: train_frac={train_frac} of "
                        f"{ids.size} labeled nodes leaves the training set empty")
    return {"train": np.sort(perm[:n_tr]), "val": np.sort(perm[n_tr:n_tr + n_va]),
            "test": np.sort(perm[n_tr + n_va:])}


def masks_to_splits(masks: dict[str, np.ndarray], split: int | str, n: int,
                    where: str) -> dict[str, np.ndarray] | None:
    """Turn boolean masks (``[N]``, or ``[S, N]`` / ``[N, S]`` with ``split`` picking one) into ids.

    ``None`` when there are no masks or ``split == "random"`` (a random split replaces them).
    """
    if split == "random" or "train" not in masks:
        return None
    out: dict[str, np.ndarray] = {}
    for name, m in masks.items():
        m = np.asarray(m)
        if m.ndim == 2:
            if m.shape[1] != n and m.shape[0] == n:
                m = m.T
            if m.shape[1] != n:
                raise DataError(f"{name} mask in {where}: shape {m.shape} does not match "
                                f"num_nodes={n}")
            if not isinstance(split, int) or isinstance(split, bool):
                raise DataError(f"split={split!r}: {where} stores {m.shape[0]} splits; give "
                                f"an index 0..{m.shape[0] - 1} (or split: random)")
            if not 0 <= split < m.shape[0]:
                raise DataError(f"split={split}: {where} stores {m.shape[0]} splits, allowed "
                                f"0..{m.shape[0] - 1}")
            m = m[split]
        if m.shape != (n,):
            raise DataError(f"{name} mask in {where}: shape {m.shape}, expected ({n},)")
        if m.dtype != bool:
            if not np.isin(m, (0, 1)).all():
                raise DataError(f"{name} mask in {where}: values must be 0/1 or bool")
            m = m.astype(bool)
        out[name] = np.flatnonzero(m).astype(np.int64)
    return out
