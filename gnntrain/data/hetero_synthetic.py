"""A synthetic typed graph shaped like OGB-MAG (``source: synthetic_hetero``), for benchmarks.

Node types ``paper``, ``author``, ``institution``, ``field_of_study`` and the relations
of OGB-MAG::

    (author, writes, paper)          authors_per_paper * papers edges
    (paper, cites, paper)            cites_per_paper * papers edges (no self-citations)
    (paper, has_topic, field_of_study)  fields_per_paper * papers edges
    (author, affiliated_with, institution)  institutions_per_author * authors edges

Every node has a latent class in ``[0, classes)``. An edge picks its paper end (its
author end for ``affiliated_with``) with probability proportional to a Pareto weight of
exponent ``power_law``, and its other end among the nodes of the same class with
probability ``homophily`` (else of a uniformly random class), again by Pareto weight, so
both ends have power-law degrees. A paper's label is its class: its authors, cited
papers and fields share it more often than chance, so the label depends on the typed
neighbourhood. Paper features are the class centroid plus Gaussian noise
(``feature_noise``); the other types are featureless, as in OGB-MAG. Repeated pairs are
dropped, so each relation ends with slightly fewer edges than asked.

Everything is vectorised numpy (one ``searchsorted`` per edge end, no Python loop over
nodes or edges); the same ``seed`` gives the same graph.
"""

from __future__ import annotations

import numpy as np

from gnntrain.config import SyntheticHeteroConfig
from partition.hetero_graph import EdgeType, HeteroGraph

__all__ = ["generate_hetero"]


class _TypeSampler:
    """Draws nodes of one type by Pareto weight, from all nodes or from one class."""

    def __init__(self, cls: np.ndarray, classes: int, power_law: float, rng: np.random.Generator) -> None:
        w = np.asarray(rng.pareto(power_law - 1.0, cls.shape[0])) + 1.0
        self.order = np.argsort(cls, kind="stable")
        self.cum = np.cumsum(w[self.order])
        bounds = np.searchsorted(cls[self.order], np.arange(classes + 1))
        cum0 = np.concatenate([[0.0], self.cum])
        self.lo, self.hi = cum0[bounds[:-1]], cum0[bounds[1:]]
        empty = self.hi <= self.lo  # a class without nodes of this type: draw from all
        self.lo[empty], self.hi[empty] = 0.0, self.cum[-1]

    def _at(self, u: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.cum, u, side="right")
        return self.order[np.minimum(pos, self.order.shape[0] - 1)].astype(np.int64)

    def any(self, m: int, rng: np.random.Generator) -> np.ndarray:
        return self._at(rng.random(m) * self.cum[-1])

    def of_class(self, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        lo, hi = self.lo[c], self.hi[c]
        return self._at(lo + rng.random(c.shape[0]) * (hi - lo))


def generate_hetero(cfg: SyntheticHeteroConfig, name: str = "synthetic-hetero",
                    add_reverse: bool = False) -> HeteroGraph:
    """The MAG-shaped typed graph ``cfg`` describes (see module doc), validated."""
    rng = np.random.default_rng(cfg.seed)
    c_n = cfg.classes
    counts = {"paper": cfg.papers, "author": cfg.authors, "institution": cfg.institutions,
              "field_of_study": cfg.fields}
    cls = {t: rng.integers(0, c_n, n) for t, n in counts.items()}
    pick = {t: _TypeSampler(cls[t], c_n, cfg.power_law, rng) for t in counts}

    def linked(anchor_type: str, m: int, other: str) -> tuple[np.ndarray, np.ndarray]:
        a = pick[anchor_type].any(m, rng)
        same = rng.random(m) < cfg.homophily
        c = np.where(same, cls[anchor_type][a], rng.integers(0, c_n, m))
        return a, pick[other].of_class(c, rng)

    p = cfg.papers
    edges: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}
    paper, author = linked("paper", round(cfg.authors_per_paper * p), "author")
    edges[("author", "writes", "paper")] = (author, paper)
    citing, cited = linked("paper", round(cfg.cites_per_paper * p), "paper")
    keep = citing != cited
    edges[("paper", "cites", "paper")] = (citing[keep], cited[keep])
    edges[("paper", "has_topic", "field_of_study")] = linked("paper", round(cfg.fields_per_paper * p),
                                                             "field_of_study")
    edges[("author", "affiliated_with", "institution")] = linked(
        "author", round(cfg.institutions_per_author * cfg.authors), "institution")
    centroids = rng.normal(size=(c_n, cfg.features)).astype(np.float32)
    x = centroids[cls["paper"]]
    x += rng.normal(scale=cfg.feature_noise, size=x.shape).astype(np.float32)
    perm = rng.permutation(p)
    n_train = max(1, int(cfg.train_frac * p))
    n_val = int(cfg.val_frac * p)
    splits = {"train": perm[:n_train], "val": perm[n_train:n_train + n_val],
              "test": perm[n_train + n_val:]}
    return HeteroGraph.from_edges(num_nodes=counts, edges=edges, x={"paper": x}, target="paper",
                                  y=cls["paper"], splits=splits, num_classes=c_n, name=name,
                                  add_reverse=add_reverse)
