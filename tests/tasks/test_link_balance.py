"""A link task's message-passing graph tells the partitioner to balance training edges."""

from __future__ import annotations

import numpy as np

from gnntrain.config import parse_dataset
from gnntrain.tasks import LinkPrediction
from partition import PartitionConfig, assign_parts
from tests.conftest import make_graph

DS = parse_dataset({"name": "g", "source": "synthetic"})


def test_link_graph_weighs_each_node_by_its_training_in_degree() -> None:
    """Every training edge is owned by its destination's owner, so a node brings its
    training in-degree; a part's ``train`` load is then its training edges."""
    task = LinkPrediction(val_frac=0.1, test_frac=0.1)
    g = task.load_graph(DS, make_graph(400, avg_degree=8, seed=2))
    assert task.split is not None
    assert np.array_equal(g.train_weights(), g.in_degrees())
    assert int(g.train_weights().sum()) == 2 * task.split.train.shape[0]  # both directions
    parts = assign_parts(g, PartitionConfig(parts=2, balance_edges=False))
    owned = np.bincount(parts, weights=g.in_degrees(), minlength=2)
    assert owned.max() / owned.mean() <= 1.05 + g.in_degrees().max() / owned.mean()
