"""What a link task receives (``gnntrain.data.link_data``): the split and its
message-passing graph, the renumbering after partitioning, each part's evaluation pairs."""

from __future__ import annotations

import numpy as np
import pytest

from gnntrain.config import parse_dataset
from gnntrain.data import link
from gnntrain.data.link import message_passing_graph, random_edge_split, training_csr
from gnntrain.data.link_data import RandomSplit, load_link_data, stores_split
from tests.conftest import make_graph

DS = parse_dataset({"name": "tiny", "source": "synthetic"})


def test_a_graph_without_a_stored_split_is_split_at_random() -> None:
    g = make_graph(150, seed=2)
    spec = RandomSplit(val_frac=0.1, test_frac=0.2, seed=3, shared_negatives=40)
    loaded = load_link_data(DS, g, spec)
    want = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=3, shared_negatives=40)
    for name in ("train", "val", "val_neg", "test", "test_neg"):
        assert np.array_equal(getattr(loaded.data.split, name), getattr(want, name)), name
    mp = message_passing_graph(want, "tiny", x=g.x)
    assert np.array_equal(loaded.graph.indptr, mp.indptr) and np.array_equal(loaded.graph.x, mp.x)
    assert not stores_split(DS, g) and not stores_split(DS)
    assert stores_split(parse_dataset({"name": "cf", "source": "lightgcn", "path": "cf"}))
    assert not stores_split(parse_dataset({"name": "cf", "source": "lightgcn", "path": "cf"}), g)


def test_hard_negatives_and_message_passing_share_one_training_csr(monkeypatch: pytest.MonkeyPatch) -> None:
    """The training edges' CSR that common-neighbour negatives rank by is built once and is
    the message-passing graph's own: the same split, negatives and graph as built apart."""
    g = make_graph(150, seed=2)
    spec = RandomSplit(val_frac=0.1, test_frac=0.2, seed=3, per_positive=4, common_neighbour_negatives=True)
    want = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=3, per_positive=4,
                             common_neighbour_negatives=True)
    want_graph = message_passing_graph(want, "tiny", x=g.x)
    built = []
    monkeypatch.setattr(link, "training_csr", lambda *a, **k: built.append(1) or training_csr(*a, **k))
    loaded = load_link_data(DS, g, spec)
    assert len(built) == 1
    for name in ("train", "val", "val_neg", "test", "test_neg"):
        assert np.array_equal(getattr(loaded.data.split, name), getattr(want, name)), name
    for name in ("indptr", "indices", "x"):
        assert np.array_equal(getattr(loaded.graph, name), getattr(want_graph, name)), name


def test_placed_renumbers_and_owned_pairs_follow_the_destination() -> None:
    g = make_graph(120, seed=5)
    data = load_link_data(DS, g, RandomSplit(per_positive=3)).data
    perm = np.random.default_rng(0).permutation(g.num_nodes)
    placed = data.placed(perm, keep_train=False)
    assert placed.split.train.shape == (0, 2) and data.placed(perm, keep_train=True).split.train.size
    ids = np.arange(g.num_nodes)
    assert np.array_equal(placed.to_new(ids), perm) and np.array_equal(placed.to_graph(perm), ids)
    pids = []
    for lo, hi in ((0, 50), (50, 120)):
        own = placed.owned("test", lo, hi)
        assert own.pids is not None and own.neg.shape == (own.pos.shape[0] * 3, 2)
        assert ((own.pos[:, 1] >= lo) & (own.pos[:, 1] < hi)).all()
        # each positive's own negatives travel with it (same source)
        assert np.array_equal(np.repeat(own.pos[:, 0], 3), own.neg[:, 0])
        assert np.array_equal(own.pos, perm[data.split.test[own.pids]])
        pids += own.pids.tolist()
    assert sorted(pids) == list(range(data.split.test.shape[0]))
