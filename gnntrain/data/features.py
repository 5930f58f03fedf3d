"""Fallback node features for sources that store structure only.

Several real graphs here come without features (SNAP CA-HepPh and email-Eu-core,
GitHub/MUSAE, Deezer, LastFM: the feature files were over the snapshot's size limit).
A model still needs an ``x``, so the loader builds one from the structure, chosen by
``dataset.feature_fallback``:

``degree`` (5 columns)
    ``log(1 + in_degree)`` of the node, and the mean, max, min and standard deviation
    of ``log(1 + in_degree)`` over its in-neighbours; each column standardised to zero
    mean and unit variance. No one-hot encoding, so the width does not grow with the
    maximum degree.
``random_projection`` (``dataset.fallback_dim`` columns)
    Column 0 is the standardised log-degree; the rest are a FastRP-style random
    projection of the adjacency: every node draws a Gaussian vector ``r`` (fixed seed
    0), then half the remaining columns are the mean ``r`` over the in-neighbours and
    half the mean of that over the in-neighbours again (two hops). Nodes with similar
    neighbourhoods get similar vectors.

Both are deterministic functions of the CSR, so a reloaded graph has the same hash.

A typed graph (:func:`typed_fallback_features`) gets the same matrix computed once over
all its node types and relations together (the homogenised graph: a node's in-neighbours
of every relation count), and each type that has no features takes its own rows; types
with features keep them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np
import scipy.sparse as sp

from partition.graph import Graph
from partition.hetero_graph import HeteroGraph

__all__ = ["degree_features", "fallback_features", "normalize_rows", "random_projection_features",
           "typed_fallback_features"]


def fallback_features(indptr: np.ndarray, indices: np.ndarray,
                      kind: Literal["degree", "random_projection"], dim: int) -> np.ndarray:
    """The fallback matrix named by ``kind`` (see module doc), float32 ``[N, F]``."""
    if kind == "degree":
        return degree_features(indptr, indices)
    return random_projection_features(indptr, indices, dim)


def typed_fallback_features(graph: HeteroGraph, kind: Literal["degree", "random_projection"],
                            dim: int) -> HeteroGraph:
    """``graph`` with every featureless node type given its rows of the fallback matrix
    (see module doc); the graph itself when every type has features."""
    if all(t in graph.x for t in graph.node_types):
        return graph
    hom = graph.homogenise()
    full = fallback_features(hom.indptr, hom.indices, kind, dim)
    x = {t: graph.x[t] if t in graph.x
         else np.ascontiguousarray(full[hom.type_offsets[i]:hom.type_offsets[i + 1]])
         for i, t in enumerate(hom.node_types)}
    return replace(graph, x=x, _hash=[]).validate()


def _standardise(x: np.ndarray) -> np.ndarray:
    std = x.std(axis=0)
    return ((x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)).astype(np.float32)


def degree_features(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Five standardised log-degree statistics per node (see module doc)."""
    n = indptr.shape[0] - 1
    deg = np.diff(indptr)
    ld = np.log1p(deg).astype(np.float64)
    out = np.zeros((n, 5), dtype=np.float64)
    out[:, 0] = ld
    rows = np.flatnonzero(deg > 0)
    if rows.size:
        nb = ld[indices]
        starts = indptr[rows]
        cnt = deg[rows]
        mean = np.add.reduceat(nb, starts) / cnt
        sq = np.add.reduceat(nb * nb, starts) / cnt
        out[rows, 1] = mean
        out[rows, 2] = np.maximum.reduceat(nb, starts)
        out[rows, 3] = np.minimum.reduceat(nb, starts)
        out[rows, 4] = np.sqrt(np.maximum(sq - mean * mean, 0.0))
    return _standardise(out)


def random_projection_features(indptr: np.ndarray, indices: np.ndarray, dim: int,
                               seed: int = 0) -> np.ndarray:
    """Log-degree plus one- and two-hop mean random projections, ``dim`` columns."""
    n = indptr.shape[0] - 1
    deg = np.diff(indptr)
    out = np.empty((n, dim), dtype=np.float32)
    out[:, 0] = _standardise(np.log1p(deg)[:, None].astype(np.float64))[:, 0]
    rest = dim - 1
    if rest == 0:
        return out
    inv = np.where(deg > 0, 1.0 / np.maximum(deg, 1), 0.0).astype(np.float32)
    adj = sp.csr_matrix((np.ones(indices.shape[0], np.float32), indices, indptr), shape=(n, n))
    adj = sp.diags(inv) @ adj
    r = np.random.default_rng(seed).standard_normal((n, rest), dtype=np.float32)
    h1 = np.asarray(adj @ r, dtype=np.float32)
    del r
    d1 = (rest + 1) // 2
    out[:, 1:1 + d1] = h1[:, :d1]
    if rest > d1:
        out[:, 1 + d1:] = np.asarray(adj @ h1[:, d1:], dtype=np.float32)
    return out


def normalize_rows(graph: Graph) -> Graph:
    """A copy of ``graph`` whose feature rows sum to 1 (rows of zeros stay zero).

    PyG's ``NormalizeFeatures``; the usual preprocessing for the bag-of-words Planetoid
    features on which published GCN/GraphSAGE accuracies are measured.
    """
    s = graph.x.sum(axis=1, keepdims=True, dtype=np.float64)
    x = (graph.x / np.where(s == 0, 1.0, s)).astype(np.float32)
    return replace(graph, x=x, _hash=[])
