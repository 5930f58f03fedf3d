"""Synthetic generator: deterministic, a clean undirected CSR, and the planted properties."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gnntrain.config import SyntheticConfig
from gnntrain.data import Graph, GraphSummary, generate, load_dataset
from gnntrain.data.synthetic import BLOCK, _ClassSampler, generate_one_shot
from tests.data.conftest import dataset

SMALL = SyntheticConfig(nodes=5000)


@pytest.fixture(scope="module")
def small() -> Graph:
    return generate(SMALL)


def test_same_config_same_graph_other_seed_other_graph(small: Graph) -> None:
    assert generate(SMALL).content_hash() == small.content_hash()
    assert generate(SMALL.model_copy(update={"seed": 1})).content_hash() != small.content_hash()


def test_load_dataset_dispatches_to_generator(small: Graph) -> None:
    g = load_dataset(dataset(name="syn", source="synthetic", synthetic={"nodes": 5000}))
    assert g.name == "syn" and g.content_hash() == small.content_hash()


def test_csr_is_undirected_sorted_without_loops_or_repeats(small: Graph) -> None:
    s = GraphSummary.of(small)
    assert s.symmetric and s.self_loops == 0
    rows = np.repeat(np.arange(small.num_nodes), small.in_degrees())
    key = rows * small.num_nodes + small.indices
    assert np.all(np.diff(key) > 0)  # strictly increasing: sorted rows, no repeated pair


def test_chunked_two_pass_build_equals_one_shot_reference() -> None:
    """The count/fill/dedup kernels give exactly csr_from_edges on all edges at once."""
    cfg = SyntheticConfig(nodes=3 * BLOCK + 123, avg_degree=6, classes=5)
    g = generate(cfg)
    ref = generate_one_shot(cfg)
    np.testing.assert_array_equal(g.indptr, ref.indptr)
    np.testing.assert_array_equal(g.indices, ref.indices)
    assert g.content_hash() == ref.content_hash()


def test_endpoint_draws_follow_weights_within_the_class() -> None:
    y = np.array([0, 1, 0, 0, 1, 0, 1, 0])
    w = np.array([1.0, 5, 2, 3, 5, 4, 1, 10])
    sampler = _ClassSampler(y, w, 2)
    rng = np.random.default_rng(0)
    m = 400_000
    for c in (0, 1):
        got = np.bincount(sampler.draw(np.full(m, c), rng.random(m), rng.random(m)),
                          minlength=8) / m
        want = np.where(y == c, w, 0) / w[y == c].sum()
        np.testing.assert_allclose(got, want, atol=0.004)


def test_sizes_and_split_fractions(small: Graph) -> None:
    assert (small.num_nodes, small.num_features, small.num_classes) == (5000, 100, 40)
    assert (small.train_idx.size, small.val_idx.size, small.test_idx.size) == (3000, 1000, 1000)
    # repeated pairs are merged, so the mean lands a little below avg_degree
    assert 0.85 * SMALL.avg_degree < small.num_edges / small.num_nodes <= SMALL.avg_degree


@pytest.mark.parametrize("h", [0.2, 0.55, 0.9])
def test_edge_homophily_follows_config(h: float) -> None:
    g = generate(SyntheticConfig(nodes=20000, homophily=h))
    s = GraphSummary.of(g)
    assert s.edge_homophily is not None
    assert h - 0.06 < s.edge_homophily < h + 0.02


def _hill(deg: np.ndarray, dmin: int) -> float:
    """Maximum-likelihood power-law exponent of the degrees >= dmin (discrete approx.)."""
    tail = deg[deg >= dmin].astype(float)
    return 1.0 + tail.size / float(np.log(tail / (dmin - 0.5)).sum())


def test_degree_tail_follows_power_law_exponent() -> None:
    est = {a: _hill(generate(SyntheticConfig(nodes=20000, power_law=a)).in_degrees(), 40)
           for a in (2.5, 3.5)}
    assert abs(est[2.5] - 2.5) < 0.35 and abs(est[3.5] - 3.5) < 0.35
    g = generate(SyntheticConfig(nodes=20000))
    assert g.in_degrees().max() > 10 * g.in_degrees().mean()  # a heavy tail, hot nodes exist


def _nearest_class_mean(g: Graph, z: np.ndarray) -> float:
    """Test accuracy of assigning each node to the closest class mean of training rows."""
    tr = g.train_idx
    means = np.stack([z[tr][g.y[tr] == k].mean(0) for k in range(g.num_classes)])
    score = z @ means.T - 0.5 * (means * means).sum(1)
    return float((score.argmax(1) == g.y)[g.test_idx].mean())


def test_structure_carries_signal_features_alone_do_not(small: Graph) -> None:
    n = small.num_nodes
    adj = sp.csr_matrix((np.ones(small.num_edges), small.indices, small.indptr), shape=(n, n))
    mean = sp.diags(1.0 / np.maximum(small.in_degrees(), 1)) @ adj
    acc_x = _nearest_class_mean(small, small.x)
    acc_2hop = _nearest_class_mean(small, mean @ (mean @ small.x))
    assert 0.15 < acc_x < 0.55  # features: centroid of another class for half the nodes
    assert acc_2hop > acc_x + 0.4 and acc_2hop < 0.99


def test_tiny_graph_with_more_classes_than_fit() -> None:
    g = generate(SyntheticConfig(nodes=30, avg_degree=3, classes=40))
    assert g.num_classes == 40 and g.num_nodes == 30  # empty classes are fine


def test_unit_variance_divides_the_features_and_changes_nothing_else(small: Graph) -> None:
    cfg = SMALL.model_copy(update={"unit_variance": True, "feature_noise": 6.0})
    raw = generate(cfg.model_copy(update={"unit_variance": False}))
    unit = generate(cfg)
    np.testing.assert_array_equal(unit.indices, raw.indices)
    np.testing.assert_array_equal(unit.y, raw.y)
    np.testing.assert_allclose(unit.x, raw.x / np.sqrt(37.0), rtol=1e-6)
    assert 5.5 < raw.x.std() < 6.7 and 0.9 < unit.x.std() < 1.1
    assert generate(SMALL).content_hash() == small.content_hash()  # off by default
