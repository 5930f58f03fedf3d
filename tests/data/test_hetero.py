"""Typed graphs: the contract per type and relation, reverse relations, PyG/DGL conversion."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gnntrain.config import SyntheticHeteroConfig
from gnntrain.data.hetero import from_pyg_hetero, to_pyg_hetero
from gnntrain.data.hetero_synthetic import generate_hetero
from partition.graph import GraphError
from partition.hetero_graph import HeteroGraph, reverse_name

WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")


def small_edges(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {WRITES: (rng.integers(0, 7, 30), rng.integers(0, 10, 30)),
            CITES: (rng.integers(0, 10, 25), rng.integers(0, 10, 25))}


def small_graph(**over: object) -> HeteroGraph:
    kw: dict = dict(num_nodes={"paper": 10, "author": 7}, edges=small_edges(),
                    x={"paper": np.ones((10, 3), np.float32)}, target="paper",
                    y=np.arange(10) % 3, splits={"train": [0, 1, 2, 3], "val": [4, 5], "test": [9, 8]},
                    name="small")
    kw.update(over)
    return HeteroGraph.from_edges(**kw)


def edge_set(src: np.ndarray, dst: np.ndarray) -> set[tuple[int, int]]:
    return set(zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), strict=True))


def test_relation_csr_holds_exactly_the_input_edges() -> None:
    g = small_graph()
    for et, (src, dst) in small_edges().items():
        got_src, got_dst = g.relations[et].edges()
        assert edge_set(got_src, got_dst) == edge_set(src, dst)
        assert g.relations[et].indptr.shape == (g.num_nodes[et[2]] + 1,)
    assert g.test_idx.tolist() == [8, 9]  # splits are sorted


def test_add_reverse_transposes_every_relation_with_generated_names() -> None:
    g = small_graph(add_reverse=True)
    assert set(g.edge_types) == {WRITES, CITES, ("paper", reverse_name("writes"), "author"),
                                 ("paper", reverse_name("cites"), "paper")}
    for (s, r, d) in (WRITES, CITES):
        fwd = edge_set(*g.relations[(s, r, d)].edges())
        rev_src, rev_dst = g.relations[(d, reverse_name(r), s)].edges()
        assert edge_set(rev_dst, rev_src) == fwd
    assert len(g.add_reverse().relations) == 4  # adding again adds nothing


@pytest.mark.parametrize(("over", "message"), [
    ({"edges": {WRITES: (np.array([7]), np.array([0]))}},
     r"relation \('author', 'writes', 'paper'\): source id 7 is outside \[0, num_nodes\['author'\]=7\)"),
    ({"edges": {WRITES: (np.array([0]), np.array([10]))}},
     r"destination id 10 is outside \[0, num_nodes\['paper'\]=10\)"),
    ({"edges": {("author", "writes", "venue"): (np.array([0]), np.array([0]))}},
     r"destination type 'venue' is not a node type; node types: \['author', 'paper'\]"),
    ({"y": np.array([0, 1, 2, 3, 0, 0, 0, 0, 0, 0]), "num_classes": 3},
     r"y: label 3 of type 'paper' is outside \[0, num_classes=3\)"),
    ({"x": {"paper": np.full((10, 3), np.nan, np.float32)}},
     r"x\['paper'\]: node 0 has a NaN or Inf feature"),
    ({"x": {"venue": np.ones((2, 3), np.float32)}}, r"x\['venue'\]: not a node type"),
    ({"target": "venue"}, r"target='venue': not a node type"),
    ({"splits": {"train": [0, 10], "val": [4], "test": [5]}},
     r"train_idx: id 10 is outside \[0, num_nodes\['paper'\]=10\)"),
    ({"splits": {"train": [0, 1], "val": [1], "test": [5]}}, r"val_idx overlaps an earlier split"),
    ({"splits": {"train": [0], "valid": [1], "test": [5]}}, r"splits: expected keys train, val, test"),
])
def test_bad_input_names_field_value_and_allowed(over: dict, message: str) -> None:
    with pytest.raises(GraphError, match=message):
        small_graph(**over)


def test_pyg_heterodata_round_trip_is_exact() -> None:
    g = small_graph(add_reverse=True)
    data = to_pyg_hetero(g)
    assert set(data.edge_types) == set(g.edge_types)
    assert int(data["paper"].train_mask.sum()) == g.train_idx.size
    back = from_pyg_hetero(data, target="paper", name="small", num_classes=g.num_classes)
    assert back.content_hash() == g.content_hash()
    assert "author" not in back.x  # a featureless type stays featureless


def test_pyg_round_trip_keeps_repeated_edges() -> None:
    g = HeteroGraph.from_edges(num_nodes={"a": 3, "b": 2}, edges={("a", "r", "b"): ([0, 0, 1], [1, 1, 0])},
                               target="b", y=[0, 1], splits={"train": [0], "val": [], "test": [1]},
                               dedup=False)
    back = from_pyg_hetero(to_pyg_hetero(g), target="b")
    assert back.relations[("a", "r", "b")].num_edges == 3


@pytest.mark.skipif(importlib.util.find_spec("dgl") is None, reason="dgl is not installed (optional extra)")
def test_dgl_heterograph_round_trip() -> None:
    from gnntrain.data.hetero import from_dgl_hetero, to_dgl_hetero

    g = small_graph(add_reverse=True)
    back = from_dgl_hetero(to_dgl_hetero(g), target="paper", name="small")
    assert back.content_hash() == g.content_hash()


def test_homogeneous_graph_is_the_one_type_case() -> None:
    from tests.conftest import make_graph

    h = make_graph()
    g = HeteroGraph.from_graph(h).validate()
    assert g.node_types == ["node"] and g.total_edges == h.num_edges
    np.testing.assert_array_equal(g.homogenise().indices, h.indices)


def test_homogenise_keeps_every_typed_edge() -> None:
    g = small_graph(add_reverse=True)
    hom = g.homogenise()
    base = dict(zip(hom.node_types, hom.type_offsets.tolist(), strict=False))
    dst = np.repeat(np.arange(hom.num_nodes), np.diff(hom.indptr))
    for r, (s, rel, d) in enumerate(hom.edge_types):
        sel = hom.edge_rel == r
        src, dd = g.relations[(s, rel, d)].edges()
        assert edge_set(hom.indices[sel], dst[sel]) == edge_set(src + base[s], dd + base[d])
    assert hom.node_type[base["author"]] == hom.node_types.index("author")


# ---- the synthetic MAG-shaped generator ----------------------------------------------------
def test_synthetic_hetero_is_mag_shaped_and_seeded() -> None:
    cfg = SyntheticHeteroConfig(papers=3000, authors=4000, institutions=50, fields=200, seed=3)
    g = generate_hetero(cfg)
    assert g.num_nodes == {"paper": 3000, "author": 4000, "institution": 50, "field_of_study": 200}
    assert set(g.edge_types) == {("author", "writes", "paper"), ("paper", "cites", "paper"),
                                 ("paper", "has_topic", "field_of_study"),
                                 ("author", "affiliated_with", "institution")}
    assert generate_hetero(cfg).content_hash() == g.content_hash()
    assert generate_hetero(cfg.model_copy(update={"seed": 4})).content_hash() != g.content_hash()
    # power-law: the busiest authors write far more papers than the mean author
    writes = g.relations[("author", "writes", "paper")]
    per_author = np.bincount(writes.indices, minlength=4000)
    assert per_author.max() > 10 * per_author.mean()


def test_synthetic_hetero_labels_follow_the_typed_neighbourhood() -> None:
    """Papers that share a field (paper -> field <- paper) share a class far above chance."""
    cfg = SyntheticHeteroConfig(papers=4000, authors=4000, institutions=50, fields=300,
                                classes=8, homophily=0.7, seed=1)
    g = generate_hetero(cfg)
    topic = g.relations[("paper", "has_topic", "field_of_study")]
    paper, field = topic.edges()
    # majority class of each field's papers predicts a paper's class
    votes = np.zeros((g.num_nodes["field_of_study"], cfg.classes))
    np.add.at(votes, field, np.eye(cfg.classes)[g.y[paper]])
    field_class = votes.argmax(1)
    agree = np.mean(field_class[field] == g.y[paper])
    assert agree > 0.5 > 1 / cfg.classes
    flat = generate_hetero(cfg.model_copy(update={"homophily": 0.0}))
    p2, f2 = flat.relations[("paper", "has_topic", "field_of_study")].edges()
    v2 = np.zeros((flat.num_nodes["field_of_study"], cfg.classes))
    np.add.at(v2, f2, np.eye(cfg.classes)[flat.y[p2]])
    assert np.mean(v2.argmax(1)[f2] == flat.y[p2]) < agree - 0.2
