"""Load-time options, random splits, fallback features and the summary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnntrain.data import Graph, GraphSummary, load_dataset
from gnntrain.data.build import random_split
from gnntrain.data.features import degree_features, random_projection_features
from partition.graph import csr_from_edges
from tests.data.conftest import dataset, write_text

EDGES = "0,1\n0,1\n1,2\n2,2\n3,0\n"  # a repeated edge and a self-loop


def _pairs(g: Graph) -> list[tuple[int, int]]:
    s, d = g.edge_index()
    return sorted(zip(s.tolist(), d.tolist(), strict=True))


@pytest.mark.parametrize("opts,want", [
    ({"undirected": False, "dedup": False, "self_loops": "keep"},
     [(0, 1), (0, 1), (1, 2), (2, 2), (3, 0)]),
    ({"undirected": False, "dedup": True, "self_loops": "keep"},
     [(0, 1), (1, 2), (2, 2), (3, 0)]),
    ({"undirected": False, "dedup": True, "self_loops": "remove"},
     [(0, 1), (1, 2), (3, 0)]),
    ({"undirected": False, "dedup": True, "self_loops": "add"},
     [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (3, 0), (3, 3)]),
    ({"undirected": True, "dedup": True, "self_loops": "remove"},
     [(0, 1), (0, 3), (1, 0), (1, 2), (2, 1), (3, 0)]),
])
def test_load_options(tmp_path: Path, opts: dict[str, object],
                      want: list[tuple[int, int]]) -> None:
    write_text(tmp_path / "e.csv", EDGES)
    g = load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"), train_frac=0.5,
                             **opts))
    assert _pairs(g) == want


def test_random_split_fractions_disjoint_and_seeded() -> None:
    labeled = np.ones(1000, bool)
    labeled[::10] = False
    a = random_split(labeled, 0.5, 0.3, seed=3)
    assert [a[s].size for s in ("train", "val", "test")] == [450, 270, 180]
    union = np.concatenate(list(a.values()))
    np.testing.assert_array_equal(np.sort(union), np.flatnonzero(labeled))
    assert all(np.all(np.diff(v) > 0) for v in a.values())
    b = random_split(labeled, 0.5, 0.3, seed=3)
    c = random_split(labeled, 0.5, 0.3, seed=4)
    np.testing.assert_array_equal(a["train"], b["train"])
    assert not np.array_equal(a["train"], c["train"])


def test_split_random_replaces_the_source_split(data_root: Path) -> None:
    fixed = load_dataset(dataset(source="heterophilous", path="heterophilous/texas.npz"))
    rand = load_dataset(dataset(source="heterophilous", path="heterophilous/texas.npz",
                                split="random", train_frac=0.5, val_frac=0.25, split_seed=1))
    assert rand.train_idx.size == round(0.5 * 183) and rand.val_idx.size == round(0.25 * 183)
    assert not np.array_equal(rand.train_idx, fixed.train_idx)


def test_degree_features_on_a_star() -> None:
    # star: centre 0 with 4 leaves, undirected
    indptr, indices = csr_from_edges(np.zeros(4, int), np.arange(1, 5), 5, undirected=True)
    x = degree_features(indptr, indices)
    assert x.shape == (5, 5) and x.dtype == np.float32
    assert np.allclose(x.mean(0), 0, atol=1e-6)
    raw_logdeg = np.log1p([4, 1, 1, 1, 1])
    want = (raw_logdeg - raw_logdeg.mean()) / raw_logdeg.std()
    np.testing.assert_allclose(x[:, 0], want, rtol=1e-6)
    assert np.all(x[1:] == x[1])  # the leaves are indistinguishable


def test_random_projection_features_are_neighbourhood_means() -> None:
    indptr, indices = csr_from_edges(np.array([0, 1, 2]), np.array([1, 2, 3]), 5,
                                     undirected=True)
    x = random_projection_features(indptr, indices, dim=9, seed=0)
    assert x.shape == (5, 9)
    r = np.random.default_rng(0).standard_normal((5, 8), dtype=np.float32)
    np.testing.assert_allclose(x[1, 1:5], (r[0, :4] + r[2, :4]) / 2, rtol=1e-5)
    assert np.all(x[4, 1:] == 0)  # isolated node: no neighbours to average
    np.testing.assert_array_equal(x, random_projection_features(indptr, indices, dim=9))


def test_summary_figures_on_a_hand_made_graph() -> None:
    # 0<->1 (same class), 1->2 (other class, no reverse), loop on 3
    indptr, indices = csr_from_edges(np.array([0, 1, 1, 3]), np.array([1, 0, 2, 3]), 4)
    g = Graph(indptr=indptr, indices=indices, x=np.zeros((4, 1), np.float32),
              y=np.array([0, 0, 1, 1]), train_idx=np.array([0, 1, 2, 3]),
              val_idx=np.empty(0, np.int64), test_idx=np.empty(0, np.int64),
              num_classes=2).validate()
    s = GraphSummary.of(g)
    assert (s.nodes, s.edges, s.self_loops, s.symmetric, s.max_degree) == (4, 4, 1, False, 1)
    assert s.edge_homophily == pytest.approx(3 / 4)
    assert s.largest_class_share == 0.5 and "edge_homophily" in s.format()
